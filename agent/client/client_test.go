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

package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/server"
)

var (
	ourToken   = []byte("ours-0123456789abcdef0123456789abcdef")
	otherToken = []byte("other-0123456789abcdef0123456789abcdef")
	ready      = &api.Status{Stage: api.StageReady, AgentVersion: "v-test"}
)

func agent(t *testing.T, tok []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(server.NewHandler(server.Options{Token: tok, Status: func() *api.Status { return ready }}))
	t.Cleanup(srv.Close)
	return srv
}

func fake(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func newClient(t *testing.T, srv *httptest.Server, opts Options) *Client {
	t.Helper()
	c, err := New(srv.Listener.Addr().String(), ourToken, opts)
	require.NoError(t, err)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func TestClient_StatusFromAgentWithOurToken(t *testing.T) {
	c := newClient(t, agent(t, ourToken), Options{})
	for i := 0; i < 3; i++ { // fresh nonce each call: no self-inflicted replay
		st, err := c.Status(context.Background())
		require.NoError(t, err)
		assert.Equal(t, api.StageReady, st.Stage)
		assert.Equal(t, "v-test", st.AgentVersion)
	}
}

func TestClient_AgentWithAnotherTokenRejectsUs(t *testing.T) {
	_, err := newClient(t, agent(t, otherToken), Options{}).Status(context.Background())
	assert.ErrorIs(t, err, ErrUnauthenticated)
}

func TestClient_ClockFarOffIsUnauthenticated(t *testing.T) {
	c := newClient(t, agent(t, ourToken), Options{Now: func() time.Time { return time.Now().Add(-time.Hour) }})
	_, err := c.Status(context.Background())
	assert.ErrorIs(t, err, ErrUnauthenticated)
}

func TestClient_ResponseSignedWithAnotherTokenIsWrongMachine(t *testing.T) {
	// An impostor that answers anyone, signing with its own token.
	srv := fake(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := json.Marshal(ready)
		w.Header().Set(api.HeaderResponseSignature, api.EncodeMAC(api.ResponseMAC(otherToken, r.Header.Get(api.HeaderNonce), body)))
		_, _ = w.Write(body)
	})
	_, err := newClient(t, srv, Options{}).Status(context.Background())
	assert.ErrorIs(t, err, ErrWrongMachine)
}

func TestClient_UnsignedResponseIsWrongMachine(t *testing.T) {
	srv := fake(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(ready)
	})
	_, err := newClient(t, srv, Options{}).Status(context.Background())
	assert.ErrorIs(t, err, ErrWrongMachine)
}

func TestClient_ReplayedResponseForAnotherNonceIsWrongMachine(t *testing.T) {
	// A man in the middle records one genuine answer and plays it back.
	real := server.NewHandler(server.Options{Token: ourToken, Status: func() *api.Status { return ready }})
	var (
		mu       sync.Mutex
		recorded *httptest.ResponseRecorder
	)
	srv := fake(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if recorded == nil {
			recorded = httptest.NewRecorder()
			real.ServeHTTP(recorded, r)
		}
		for k, v := range recorded.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(recorded.Code)
		_, _ = w.Write(recorded.Body.Bytes())
	})
	c := newClient(t, srv, Options{})
	_, err := c.Status(context.Background())
	require.NoError(t, err, "the first, genuine answer")
	_, err = c.Status(context.Background())
	assert.ErrorIs(t, err, ErrWrongMachine)
}

func TestClient_ClosedPortIsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	c, err := New(addr, ourToken, Options{Timeout: 2 * time.Second})
	require.NoError(t, err)
	_, err = c.Status(context.Background())
	assert.ErrorIs(t, err, ErrUnreachable)
	assert.NotErrorIs(t, err, ErrUnauthenticated)
}

func TestClient_HungAgentIsUnreachableAtTimeout(t *testing.T) {
	srv := fake(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c := newClient(t, srv, Options{Timeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := c.Status(context.Background())
	assert.ErrorIs(t, err, ErrUnreachable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestClient_OversizedBodyIsRefused(t *testing.T) {
	srv := fake(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte(" "), api.MaxStatusBytes+10))
	})
	_, err := newClient(t, srv, Options{}).Status(context.Background())
	assert.ErrorIs(t, err, ErrBadResponse)
}

func TestClient_UnexpectedStatusIsBadResponse(t *testing.T) {
	srv := fake(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	_, err := newClient(t, srv, Options{}).Status(context.Background())
	assert.ErrorIs(t, err, ErrBadResponse)
	assert.ErrorContains(t, err, "418")
}

func TestNew_RejectsBadArguments(t *testing.T) {
	_, err := New("no-port", ourToken, Options{})
	assert.Error(t, err)
	_, err = New("127.0.0.1:1", nil, Options{})
	assert.Error(t, err)
}

func TestNewNonce_IsValidAndFresh(t *testing.T) {
	a, err := NewNonce()
	require.NoError(t, err)
	b, err := NewNonce()
	require.NoError(t, err)
	assert.True(t, api.ValidNonce(a))
	assert.Len(t, a, 43)
	assert.NotEqual(t, a, b)
}

func TestDecodeResponse(t *testing.T) {
	const nonce = "nonce-0123456789abcdef"
	good, _ := json.Marshal(ready)
	sig := func(tok []byte, n string, body []byte) http.Header {
		return http.Header{api.HeaderResponseSignature: {api.EncodeMAC(api.ResponseMAC(tok, n, body))}}
	}
	for _, tc := range []struct {
		name   string
		code   int
		header http.Header
		body   []byte
		want   error
	}{
		{"good", 200, sig(ourToken, nonce, good), good, nil},
		{"401", 401, nil, nil, ErrUnauthenticated},
		{"500", 500, nil, nil, ErrBadResponse},
		{"no signature", 200, nil, good, ErrWrongMachine},
		{"two signatures", 200, http.Header{api.HeaderResponseSignature: {sig(ourToken, nonce, good).Get(api.HeaderResponseSignature), "x"}}, good, ErrWrongMachine},
		{"other nonce", 200, sig(ourToken, "nonce-fedcba9876543210", good), good, ErrWrongMachine},
		{"other token", 200, sig(otherToken, nonce, good), good, ErrWrongMachine},
		{"tampered body", 200, sig(ourToken, nonce, good), append(bytes.Clone(good), ' '), ErrWrongMachine},
		{"signed garbage", 200, sig(ourToken, nonce, []byte("{")), []byte("{"), ErrBadResponse},
		{"signed null", 200, sig(ourToken, nonce, []byte("null")), []byte("null"), ErrBadResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := DecodeResponse(ourToken, nonce, tc.code, tc.header, tc.body)
			if tc.want == nil {
				require.NoError(t, err)
				assert.Equal(t, api.StageReady, st.Stage)
				return
			}
			assert.Nil(t, st)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

func FuzzDecodeResponse(f *testing.F) {
	const nonce = "nonce-0123456789abcdef"
	good, _ := json.Marshal(ready)
	goodSig := api.EncodeMAC(api.ResponseMAC(ourToken, nonce, good))
	f.Add(200, good, goodSig, false)
	f.Add(200, good, "", true)
	f.Add(200, []byte(`{"stage":"Ready","checks":[{"name":"a","checkedAt":"2026-01-01T00:00:00Z"}]}`), "", true)
	f.Add(200, []byte(`{"stage":1}`), "", true)
	f.Add(200, []byte("null"), "", true)
	f.Add(200, good, strings.ToUpper(goodSig), false)
	f.Add(200, good, goodSig[:10], false)
	f.Add(401, []byte{}, "", false)
	f.Add(302, good, goodSig, false)
	f.Fuzz(func(t *testing.T, code int, body []byte, sig string, signCorrectly bool) {
		want := api.EncodeMAC(api.ResponseMAC(ourToken, nonce, body))
		if signCorrectly {
			sig = want
		}
		st, err := DecodeResponse(ourToken, nonce, code, http.Header{api.HeaderResponseSignature: {sig}}, body)
		if err != nil {
			require.Nil(t, st)
			known := errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrWrongMachine) || errors.Is(err, ErrBadResponse)
			require.True(t, known, "unclassified error %v", err)
			return
		}
		require.Equal(t, 200, code)
		require.True(t, strings.EqualFold(sig, want) && len(sig) == len(want), "decoded a body with signature %q, want %q", sig, want)
		require.NotEmpty(t, st.Stage)
	})
}
