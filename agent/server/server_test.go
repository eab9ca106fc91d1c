/*
Copyright The DockerIOS Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package server

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dockerios/dockerios/agent/api"
)

var (
	token = []byte("0123456789abcdef0123456789abcdef")
	t0    = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

func newHandler(c *clock) http.Handler {
	st := &api.Status{Stage: api.StageReady, AgentVersion: "v-test"}
	return NewHandler(Options{Token: token, Status: func() *api.Status { return st }, Now: c.Now})
}

// signed builds a request authenticated with key at time at.
func signed(key []byte, at time.Time, nonce string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, api.StatusPath, nil)
	ts := strconv.FormatInt(at.Unix(), 10)
	r.Header.Set(api.HeaderNonce, nonce)
	r.Header.Set(api.HeaderTimestamp, ts)
	r.Header.Set(api.HeaderSignature, api.EncodeMAC(api.RequestMAC(key, http.MethodGet, api.StatusPath, ts, nonce)))
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

const nonce = "nonce-0123456789abcdef"

func TestHandler_SignsTheExactBodyForTheNonce(t *testing.T) {
	c := &clock{now: t0}
	w := serve(newHandler(c), signed(token, t0, nonce))
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.Bytes()
	assert.True(t, api.VerifyMAC(w.Header().Get(api.HeaderResponseSignature), api.ResponseMAC(token, nonce, body)))
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	var st api.Status
	require.NoError(t, json.Unmarshal(body, &st))
	assert.Equal(t, api.StageReady, st.Stage)
}

func TestHandler_AuthFailuresGet401AndNothingElse(t *testing.T) {
	c := &clock{now: t0}
	mutate := func(f func(r *http.Request)) *http.Request {
		r := signed(token, t0, nonce)
		f(r)
		return r
	}
	for name, r := range map[string]*http.Request{
		"no headers":         httptest.NewRequest(http.MethodGet, api.StatusPath, nil),
		"wrong token":        signed([]byte("ffffffffffffffffffffffffffffffff"), t0, nonce),
		"signature missing":  mutate(func(r *http.Request) { r.Header.Del(api.HeaderSignature) }),
		"signature garbage":  mutate(func(r *http.Request) { r.Header.Set(api.HeaderSignature, "zz") }),
		"nonce swapped":      mutate(func(r *http.Request) { r.Header.Set(api.HeaderNonce, "other-0123456789abcdef") }),
		"nonce too short":    signed(token, t0, "short"),
		"nonce too long":     signed(token, t0, strings.Repeat("a", api.MaxNonceLen+1)),
		"nonce with newline": signed(token, t0, "abcdefgh\nijklmnopq"),
		"nonce twice":        mutate(func(r *http.Request) { r.Header.Add(api.HeaderNonce, nonce) }),
		"timestamp stale":    signed(token, t0.Add(-api.MaxClockSkew-time.Second), nonce),
		"timestamp future":   signed(token, t0.Add(api.MaxClockSkew+time.Second), nonce),
		"timestamp garbage":  mutate(func(r *http.Request) { r.Header.Set(api.HeaderTimestamp, "soon") }),
		"timestamp huge":     mutate(func(r *http.Request) { r.Header.Set(api.HeaderTimestamp, strings.Repeat("9", 40)) }),
	} {
		t.Run(name, func(t *testing.T) {
			w := serve(newHandler(c), r)
			assert.Equal(t, http.StatusUnauthorized, w.Code)
			assert.Empty(t, w.Body.Bytes())
			assert.Empty(t, w.Header().Get(api.HeaderResponseSignature))
			assert.Empty(t, w.Header().Get("Content-Type"))
		})
	}
}

func TestHandler_AcceptsSkewWithinBounds(t *testing.T) {
	c := &clock{now: t0}
	h := newHandler(c)
	assert.Equal(t, http.StatusOK, serve(h, signed(token, t0.Add(-api.MaxClockSkew), "nonce-past-0123456789")).Code)
	assert.Equal(t, http.StatusOK, serve(h, signed(token, t0.Add(api.MaxClockSkew), "nonce-future-01234567")).Code)
}

func TestHandler_ReplayedRequestIsRejected(t *testing.T) {
	c := &clock{now: t0}
	h := newHandler(c)
	assert.Equal(t, http.StatusOK, serve(h, signed(token, t0, nonce)).Code)
	c.Add(time.Minute)
	w := serve(h, signed(token, t0, nonce))
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Empty(t, w.Body.Bytes())
}

func TestHandler_UnauthenticatedNoncesAreNotRemembered(t *testing.T) {
	c := &clock{now: t0}
	h := newHandler(c)
	assert.Equal(t, http.StatusUnauthorized, serve(h, signed([]byte("wrong-wrong-wrong-wrong-wrong-wrong"), t0, nonce)).Code)
	assert.Equal(t, http.StatusOK, serve(h, signed(token, t0, nonce)).Code, "an impostor must not be able to burn our nonce")
}

func TestHandler_OtherPathsAndMethods(t *testing.T) {
	c := &clock{now: t0}
	h := newHandler(c)
	w := serve(h, httptest.NewRequest(http.MethodGet, "/", nil))
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Empty(t, w.Body.Bytes())

	r := signed(token, t0, nonce)
	r.Method = http.MethodPost
	w = serve(h, r)
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Empty(t, w.Body.Bytes())
}

func TestHandler_RequestBodyIsBounded(t *testing.T) {
	c := &clock{now: t0}
	r := signed(token, t0, nonce)
	r.Body = httptest.NewRequest(http.MethodGet, "/", strings.NewReader(strings.Repeat("x", 1<<20))).Body
	w := serve(newHandler(c), r)
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.Empty(t, w.Header().Get(api.HeaderResponseSignature))
}

func TestReplayCache_ExpiresAndRefusesWhenFull(t *testing.T) {
	rc := newReplayCache(3, 10*time.Minute)
	assert.Equal(t, fresh, rc.add("a", t0))
	assert.Equal(t, replayed, rc.add("a", t0.Add(time.Minute)))
	assert.Equal(t, fresh, rc.add("b", t0.Add(time.Minute)))
	assert.Equal(t, fresh, rc.add("c", t0.Add(2*time.Minute)))
	assert.Equal(t, cacheFull, rc.add("d", t0.Add(3*time.Minute)), "full: refuse, never forget early")
	assert.Equal(t, replayed, rc.add("b", t0.Add(3*time.Minute)))
	// "a" expires first, making room; "b" is still remembered.
	assert.Equal(t, fresh, rc.add("d", t0.Add(10*time.Minute+time.Second)))
	assert.Equal(t, replayed, rc.add("b", t0.Add(10*time.Minute+time.Second)))
	// A clock stepping back does not stretch lifetimes.
	assert.Equal(t, fresh, rc.add("e", t0.Add(30*time.Minute)))
	assert.Equal(t, fresh, rc.add("f", t0))
	assert.Len(t, rc.seen, 2)
}

func TestHandler_FullReplayCacheAnswers503(t *testing.T) {
	c := &clock{now: t0}
	h := newHandler(c).(*handler)
	h.replay = newReplayCache(1, 10*time.Minute)
	assert.Equal(t, http.StatusOK, serve(h, signed(token, t0, "nonce-one-0123456789ab")).Code)
	w := serve(h, signed(token, t0, "nonce-two-0123456789ab"))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Empty(t, w.Body.Bytes())
}

func TestLimitListener_CapsConcurrentConnections(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := LimitListener(inner, 1)
	defer ln.Close()

	c1, err := net.Dial("tcp", inner.Addr().String())
	require.NoError(t, err)
	defer c1.Close()
	s1, err := ln.Accept()
	require.NoError(t, err)

	c2, err := net.Dial("tcp", inner.Addr().String())
	require.NoError(t, err)
	defer c2.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		s, err := ln.Accept()
		if err == nil {
			accepted <- s
		}
	}()
	select {
	case <-accepted:
		t.Fatal("second connection accepted while the first is open")
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, s1.Close())
	_ = s1.Close() // a second Close must not release a second slot
	select {
	case s2 := <-accepted:
		s2.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("second connection not accepted after the first closed")
	}
}

// A peer without the token cannot keep connections (a capped resource)
// open: every refusal closes its connection, while a signed answer keeps
// its connection for the next poll.
func TestServer_RefusalsCloseTheirConnection(t *testing.T) {
	c := &clock{now: t0}
	cert, err := SelfSignedCertificate(t0)
	require.NoError(t, err)
	srv := NewServer(newHandler(c), cert, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.ServeTLS(LimitListener(ln, MaxConnections), "", "") }()
	defer srv.Close()

	roundTrip := func(conn *tls.Conn, r *http.Request) *http.Response {
		t.Helper()
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		require.NoError(t, r.Write(conn))
		resp, err := http.ReadResponse(bufio.NewReader(conn), r)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	dial := func() *tls.Conn {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test server's throwaway certificate
		require.NoError(t, err)
		return conn
	}

	bad := dial()
	defer bad.Close()
	unsigned, err := http.NewRequest(http.MethodGet, "https://agent"+api.StatusPath, nil)
	require.NoError(t, err)
	resp := roundTrip(bad, unsigned)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.True(t, resp.Close, "a 401 must close its connection")
	_, err = bad.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the server closed the connection after the 401")

	good := dial()
	defer good.Close()
	resp = roundTrip(good, signed(token, t0, "nonce-keep-0123456789ab"))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.False(t, resp.Close, "a signed answer keeps its connection")
	resp = roundTrip(good, signed(token, t0, "nonce-keep-0123456789cd"))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
