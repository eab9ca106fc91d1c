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

// Package guest runs commands in a macOS guest over SSH, as the golden
// image's user. DockerIOS gives a workload a Ready machine and its address;
// how to log in is the image's business (Remote Login on, an account, its
// password or key, its host key), so it comes from a Secret the workload
// names, never from the machine layer.
package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Secret keys of the credentials Secret.
const (
	KeyUsername   = "username"
	KeyPassword   = "password"
	KeyPrivateKey = "ssh-privatekey" // as in a kubernetes.io/ssh-auth Secret
	KeyKnownHosts = "known_hosts"
)

// outputTail is how much of a command's output an error quotes.
const outputTail = 2048

// Credentials log in to a guest.
type Credentials struct {
	User       string
	Password   string
	PrivateKey []byte
	// KnownHosts are OpenSSH known_hosts lines the host key is checked
	// against.
	KnownHosts []byte
	// InsecureIgnoreHostKey accepts any host key when KnownHosts is empty.
	InsecureIgnoreHostKey bool
}

// CredentialsFromSecret reads a credentials Secret's data; user, when
// set, overrides its username.
func CredentialsFromSecret(data map[string][]byte, user string, insecureIgnoreHostKey bool) (Credentials, error) {
	c := Credentials{User: user, Password: string(data[KeyPassword]), PrivateKey: data[KeyPrivateKey],
		KnownHosts: data[KeyKnownHosts], InsecureIgnoreHostKey: insecureIgnoreHostKey}
	if c.User == "" {
		c.User = strings.TrimSpace(string(data[KeyUsername]))
	}
	var missing []string
	if c.User == "" {
		missing = append(missing, "a username (key "+KeyUsername+", or spec.ssh.user)")
	}
	if c.Password == "" && len(c.PrivateKey) == 0 {
		missing = append(missing, "key "+KeyPassword+" or "+KeyPrivateKey)
	}
	if len(bytes.TrimSpace(c.KnownHosts)) == 0 && !insecureIgnoreHostKey {
		missing = append(missing, "key "+KeyKnownHosts+" (or spec.ssh.insecureIgnoreHostKey)")
	}
	if len(missing) > 0 {
		return Credentials{}, fmt.Errorf("the SSH credentials lack %s", strings.Join(missing, " and "))
	}
	return c, nil
}

// ErrHostKey: the guest's host key is not one known_hosts accepts.
var ErrHostKey = errors.New("host key not accepted")

// ExitError is a command that ran and exited non-zero.
type ExitError struct {
	Status int
	// Output is the end of what the command wrote (stdout and stderr).
	Output string
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("exited with status %d", e.Status)
	if last := lastLine(e.Output); last != "" {
		msg += ": " + last
	}
	return msg
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// Conn is a logged-in SSH connection to a guest.
type Conn struct {
	client *ssh.Client
}

// Dial connects to addr (host:port) and logs in.
func Dial(ctx context.Context, addr string, c Credentials) (*Conn, error) {
	cfg := &ssh.ClientConfig{User: c.User, Timeout: 15 * time.Second}
	if len(c.PrivateKey) > 0 {
		signer, err := ssh.ParsePrivateKey(c.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("the SSH private key: %w", err)
		}
		cfg.Auth = append(cfg.Auth, ssh.PublicKeys(signer))
	}
	if c.Password != "" {
		cfg.Auth = append(cfg.Auth, ssh.Password(c.Password))
	}
	switch {
	case len(bytes.TrimSpace(c.KnownHosts)) > 0:
		cb, err := hostKeyCallback(c.KnownHosts)
		if err != nil {
			return nil, err
		}
		cfg.HostKeyCallback = cb
		cfg.HostKeyAlgorithms = hostKeyAlgorithms(c.KnownHosts)
	case c.InsecureIgnoreHostKey:
		cfg.HostKeyCallback = ssh.InsecureIgnoreHostKey() //nolint:gosec // asked for explicitly (spec.ssh.insecureIgnoreHostKey)
	default:
		return nil, errors.New("no known_hosts to check the host key against")
	}

	var d net.Dialer
	tcp, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", addr, err)
	}
	// The handshake is bounded by the context and by the client's timeout.
	deadline := time.Now().Add(cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = tcp.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { tcp.Close() })
	conn, chans, reqs, err := ssh.NewClientConn(tcp, addr, cfg)
	stop()
	if err != nil {
		tcp.Close()
		var keyErr *knownhosts.KeyError
		if errors.As(err, &keyErr) {
			return nil, fmt.Errorf("ssh %s: %w: %v", addr, ErrHostKey, err)
		}
		return nil, fmt.Errorf("ssh %s: %w", addr, err)
	}
	_ = tcp.SetDeadline(time.Time{})
	return &Conn{client: ssh.NewClient(conn, chans, reqs)}, nil
}

// hostKeyCallback checks host keys against known_hosts lines. The x/crypto
// parser reads files only, so the lines go through one that is removed at
// once (the callback keeps what it parsed).
func hostKeyCallback(knownHosts []byte) (ssh.HostKeyCallback, error) {
	f, err := os.CreateTemp("", "known_hosts")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(knownHosts); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	cb, err := knownhosts.New(f.Name())
	if err != nil {
		return nil, fmt.Errorf("the SSH known_hosts: %w", err)
	}
	return cb, nil
}

// hostKeyAlgorithms are the algorithms of the plain keys in known_hosts, so
// that a guest offering several host keys (macOS has ECDSA, Ed25519 and
// RSA ones) shows one that is known rather than the client's first
// preference. With a certificate authority line any algorithm may do:
// nil keeps the client's defaults.
func hostKeyAlgorithms(knownHosts []byte) []string {
	var algos []string
	add := func(a ...string) {
		for _, x := range a {
			if !slices.Contains(algos, x) {
				algos = append(algos, x)
			}
		}
	}
	for rest := knownHosts; len(bytes.TrimSpace(rest)) > 0; {
		marker, _, key, _, r, err := ssh.ParseKnownHosts(rest)
		if errors.Is(err, io.EOF) {
			break // only comments left
		}
		if err != nil {
			return nil // knownhosts.New reports it
		}
		rest = r
		switch {
		case marker == "cert-authority":
			return nil
		case marker == "revoked":
		case key.Type() == ssh.KeyAlgoRSA:
			add(ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			add(key.Type())
		}
	}
	return algos
}

// Run runs command with stdin as its input and returns what it wrote
// (stdout and stderr, the last 2 KiB). A non-zero exit is an *ExitError;
// the context's end closes the session.
func (c *Conn) Run(ctx context.Context, command string, stdin []byte) (string, error) {
	s, err := c.client.NewSession()
	if err != nil {
		return "", fmt.Errorf("ssh session: %w", err)
	}
	defer s.Close()
	out := &tailBuffer{max: outputTail}
	s.Stdout, s.Stderr = out, out
	s.Stdin = bytes.NewReader(stdin)
	done := make(chan error, 1)
	go func() { done <- s.Run(command) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = s.Signal(ssh.SIGKILL)
		s.Close()
		return out.String(), ctx.Err()
	}
	var exit *ssh.ExitError
	switch {
	case errors.As(err, &exit):
		return out.String(), &ExitError{Status: exit.ExitStatus(), Output: out.String()}
	case err != nil:
		return out.String(), fmt.Errorf("ssh: %w", err)
	}
	return out.String(), nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.client.Close() }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// Quote quotes s for a POSIX shell (sh, bash, zsh: what a macOS login
// shell is).
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
