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

// Package client asks a DockerIOS guest agent for its status. It proves the
// machine's token without sending it and accepts an answer only if it is
// signed with the same token for this very request, so a status can always
// be attributed to the machine that holds the token.
//
// Errors wrap one of the sentinels below; test them with errors.Is:
//
//   - ErrUnreachable: no answer (dial failure, TLS failure, timeout,
//     connection dropped). The machine may be booting or gone.
//   - ErrUnauthenticated: the agent answered 401, i.e. it does not accept
//     our token (another machine at this address, a clock more than
//     api.MaxClockSkew off, or a token mismatch).
//   - ErrWrongMachine: a 200 whose signature is missing or does not match
//     our token and nonce: an impostor, a replay, or another machine.
//   - ErrBadResponse: a signed answer we cannot use (bad JSON), an
//     unexpected HTTP status, or an oversized body.
package client

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/dockerios/dockerios/agent/api"
)

var (
	ErrUnreachable     = errors.New("agent unreachable")
	ErrUnauthenticated = errors.New("agent rejected our credentials")
	ErrWrongMachine    = errors.New("response not signed by the expected machine")
	ErrBadResponse     = errors.New("bad agent response")
)

// DefaultTimeout bounds one Status call, connection included.
const DefaultTimeout = 5 * time.Second

// Options tune a Client; the zero value is fine.
type Options struct {
	// Timeout bounds each call; DefaultTimeout if zero.
	Timeout time.Duration
	// Now is the clock for request timestamps; time.Now if nil.
	Now func() time.Time
	// Transport replaces the default HTTPS transport, for tests.
	Transport http.RoundTripper
}

// Client talks to one agent.
type Client struct {
	url     string
	token   []byte
	timeout time.Duration
	now     func() time.Time
	http    *http.Client
}

// New returns a client for the agent at address ("host:port") holding
// token.
func New(address string, token []byte, opts Options) (*Client, error) {
	if _, _, err := net.SplitHostPort(address); err != nil {
		return nil, fmt.Errorf("agent address %q: %w", address, err)
	}
	if len(token) == 0 {
		return nil, errors.New("empty token")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Transport == nil {
		opts.Transport = &http.Transport{
			// No CA verification: agents present self-signed certificates
			// and a guest's certificate proves nothing we could check. What
			// authenticates the agent is the response MAC over our nonce;
			// TLS only keeps the status private on the wire.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // see above
			// Proxy stays nil: agents are dialled directly, never through
			// an environment proxy.
			MaxResponseHeaderBytes: 64 << 10,
			IdleConnTimeout:        30 * time.Second,
			TLSHandshakeTimeout:    opts.Timeout,
		}
	}
	return &Client{
		url:     "https://" + address + api.StatusPath,
		token:   append([]byte(nil), token...),
		timeout: opts.Timeout,
		now:     opts.Now,
		http: &http.Client{
			Transport: opts.Transport,
			// The agent never redirects; following one would send our
			// proof somewhere else.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// Status fetches and verifies the agent's status.
func (c *Client) Status(ctx context.Context) (*api.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	nonce, err := NewNonce()
	if err != nil {
		return nil, err
	}
	ts := strconv.FormatInt(c.now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(api.HeaderNonce, nonce)
	req.Header.Set(api.HeaderTimestamp, ts)
	req.Header.Set(api.HeaderSignature, api.EncodeMAC(api.RequestMAC(c.token, http.MethodGet, api.StatusPath, ts, nonce)))
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, api.MaxStatusBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading body: %w", ErrUnreachable, err)
	}
	return DecodeResponse(c.token, nonce, resp.StatusCode, resp.Header, body)
}

// CloseIdleConnections releases pooled connections to the agent.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// NewNonce returns 32 random bytes in base64url: 43 characters.
func NewNonce() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// DecodeResponse turns an agent's answer to the request that carried nonce
// into a Status. The signature is checked over the exact body bytes before
// anything is parsed, so nothing from an unverified body reaches the
// caller.
func DecodeResponse(token []byte, nonce string, code int, header http.Header, body []byte) (*api.Status, error) {
	switch {
	case code == http.StatusUnauthorized:
		return nil, ErrUnauthenticated
	case code != http.StatusOK:
		return nil, fmt.Errorf("%w: HTTP status %d", ErrBadResponse, code)
	case len(body) > api.MaxStatusBytes:
		return nil, fmt.Errorf("%w: body larger than %d bytes", ErrBadResponse, api.MaxStatusBytes)
	}
	sigs := header.Values(api.HeaderResponseSignature)
	if len(sigs) != 1 {
		return nil, fmt.Errorf("%w: want one %s header, got %d", ErrWrongMachine, api.HeaderResponseSignature, len(sigs))
	}
	if !api.VerifyMAC(sigs[0], api.ResponseMAC(token, nonce, body)) {
		return nil, fmt.Errorf("%w: signature does not match", ErrWrongMachine)
	}
	var st api.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadResponse, err)
	}
	if st.Stage == "" {
		return nil, fmt.Errorf("%w: no stage", ErrBadResponse)
	}
	return &st, nil
}
