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

// Package server is the agent's HTTPS API: one authenticated endpoint,
// GET /v1/status, serving the monitor's last published status. See package
// api for the authentication contract.
package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/dockerios/dockerios/agent/api"
)

// Limits that keep a hostile or broken caller from costing the agent more
// than a few KiB per connection.
const (
	MaxHeaderBytes    = 8 << 10
	MaxConnections    = 32
	ReadHeaderTimeout = 5 * time.Second
	// replayCacheSize bounds remembered nonces; only requests with a valid
	// MAC get in, so only a token holder can fill it.
	replayCacheSize = 4096
	// maxTimestampLen bounds the decimal Unix seconds header.
	maxTimestampLen = 20
)

// Options configure the handler. Token and Status are required.
type Options struct {
	Token  []byte
	Status func() *api.Status
	Now    func() time.Time
	Logger *slog.Logger
}

type handler struct {
	opts   Options
	replay *replayCache
}

// NewHandler returns the API handler.
func NewHandler(opts Options) http.Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &handler{opts: opts, replay: newReplayCache(replayCacheSize, 2*api.MaxClockSkew)}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	// Every answer but a signed status closes its connection: connections
	// are capped (MaxConnections), and a peer without the token must not
	// hold slots open between bad requests while the controller's polls
	// go unanswered.
	w.Header().Set("Connection", "close")
	if r.URL.Path != api.StatusPath {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	nonce, ok := h.authenticate(r)
	if !ok {
		h.opts.Logger.Debug("rejected unauthenticated request", "remote", r.RemoteAddr)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	// A GET carries no body; anything beyond a few bytes is refused without
	// being buffered.
	if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 1024)); err != nil {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		return
	}
	switch h.replay.add(nonce, h.opts.Now()) {
	case replayed:
		w.WriteHeader(http.StatusUnauthorized)
		return
	case cacheFull:
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	body, err := json.Marshal(h.opts.Status())
	if err != nil {
		h.opts.Logger.Error("encoding status", "err", err)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Del("Connection")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set(api.HeaderResponseSignature, api.EncodeMAC(api.ResponseMAC(h.opts.Token, nonce, body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// authenticate checks the caller's proof of the token. The replay check
// comes last, in ServeHTTP, so that only authenticated nonces are stored.
func (h *handler) authenticate(r *http.Request) (string, bool) {
	nonce, ok1 := single(r.Header, api.HeaderNonce)
	ts, ok2 := single(r.Header, api.HeaderTimestamp)
	sig, ok3 := single(r.Header, api.HeaderSignature)
	if !ok1 || !ok2 || !ok3 || !api.ValidNonce(nonce) || len(ts) > maxTimestampLen {
		return "", false
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", false
	}
	if skew := h.opts.Now().Sub(time.Unix(sec, 0)); skew > api.MaxClockSkew || skew < -api.MaxClockSkew {
		return "", false
	}
	if !api.VerifyMAC(sig, api.RequestMAC(h.opts.Token, r.Method, r.URL.Path, ts, nonce)) {
		return "", false
	}
	return nonce, true
}

func single(h http.Header, name string) (string, bool) {
	v := h.Values(name)
	if len(v) != 1 {
		return "", false
	}
	return v[0], true
}

// replayCache remembers nonces for as long as a request carrying them
// could still pass the timestamp check.
type replayCache struct {
	mu     sync.Mutex
	max    int
	ttl    time.Duration
	seen   map[string]struct{}
	order  []seenNonce // in insertion order, hence in expiry order
	head   int
	nowMax time.Time
}

type seenNonce struct {
	nonce string
	at    time.Time
}

func newReplayCache(max int, ttl time.Duration) *replayCache {
	return &replayCache{max: max, ttl: ttl, seen: make(map[string]struct{}, max)}
}

type addResult int

const (
	fresh addResult = iota
	replayed
	// cacheFull: a full cache refuses rather than forgets, so a replay can
	// never slip through eviction.
	cacheFull
)

// add records nonce unless it was seen within the TTL.
func (c *replayCache) add(nonce string, now time.Time) addResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A clock stepping backwards must not make entries live forever.
	if now.After(c.nowMax) {
		c.nowMax = now
	}
	for c.head < len(c.order) && c.nowMax.Sub(c.order[c.head].at) > c.ttl {
		delete(c.seen, c.order[c.head].nonce)
		c.order[c.head] = seenNonce{}
		c.head++
	}
	if c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
	if _, dup := c.seen[nonce]; dup {
		return replayed
	}
	if len(c.seen) >= c.max {
		return cacheFull
	}
	c.seen[nonce] = struct{}{}
	c.order = append(c.order, seenNonce{nonce, c.nowMax})
	return fresh
}

// limitListener caps concurrent connections, so memory stays bounded no
// matter how many clients connect.
type limitListener struct {
	net.Listener
	sem chan struct{}
}

// LimitListener returns a listener that accepts at most n simultaneous
// connections.
func LimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
