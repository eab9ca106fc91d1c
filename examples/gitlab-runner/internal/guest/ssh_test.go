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

package guest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// testServer is an sshd for one user: it answers "echo-stdin" with its
// input, "exit N" with status N, "sleep" by never answering, and anything
// else with "ran: <command>".
type testServer struct {
	addr     string
	hostKeys []ssh.Signer
}

func startServer(t *testing.T, user, password string, authorized ssh.PublicKey, hostKeys ...ssh.Signer) *testServer {
	t.Helper()
	cfg := &ssh.ServerConfig{
		PasswordCallback: func(m ssh.ConnMetadata, p []byte) (*ssh.Permissions, error) {
			if m.User() == user && password != "" && string(p) == password {
				return nil, nil
			}
			return nil, errors.New("no")
		},
		PublicKeyCallback: func(m ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if m.User() == user && authorized != nil && bytes.Equal(k.Marshal(), authorized.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("no")
		},
	}
	for _, k := range hostKeys {
		cfg.AddHostKey(k)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serve(c, cfg)
		}
	}()
	return &testServer{addr: l.Addr().String(), hostKeys: hostKeys}
}

func serve(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go func() {
			defer ch.Close()
			for req := range chReqs {
				if req.Type != "exec" {
					_ = req.Reply(false, nil)
					continue
				}
				var p struct{ Command string }
				_ = ssh.Unmarshal(req.Payload, &p)
				_ = req.Reply(true, nil)
				status := 0
				switch {
				case p.Command == "echo-stdin":
					in, _ := io.ReadAll(ch)
					_, _ = ch.Write(in)
				case p.Command == "sleep":
					<-time.After(time.Minute)
				case strings.HasPrefix(p.Command, "exit "):
					fmt.Sscan(strings.TrimPrefix(p.Command, "exit "), &status)
					fmt.Fprintf(ch.Stderr(), "line one\nfailing with %d\n", status)
				default:
					fmt.Fprintf(ch, "ran: %s\n", p.Command)
				}
				_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
				return
			}
		}()
	}
}

func ed25519Key(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ecdsaKey(t *testing.T) ssh.Signer {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// knownHostsLine accepts key for every host at addr's port, as a golden
// image's clones share its host keys ("*" alone matches port 22 only, as
// in OpenSSH).
func knownHostsLine(addr string, key ssh.PublicKey) string {
	_, port, _ := net.SplitHostPort(addr)
	return "[*]:" + port + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) + "\n"
}

func TestDial(t *testing.T) {
	hostEd, hostEC, stranger := ed25519Key(t), ecdsaKey(t), ed25519Key(t)
	_, userPriv, _ := ed25519.GenerateKey(rand.Reader)
	userSigner, _ := ssh.NewSignerFromKey(userPriv)
	block, err := ssh.MarshalPrivateKey(userPriv, "runner key")
	if err != nil {
		t.Fatal(err)
	}
	userKeyPEM := pem.EncodeToMemory(block)
	// A guest with two host keys, as macOS has several.
	srv := startServer(t, "runner", "pw", userSigner.PublicKey(), hostEC, hostEd)

	for _, tc := range []struct {
		name    string
		creds   Credentials
		wantErr string
		hostKey bool // the error is ErrHostKey
	}{
		{"password, known ed25519 host key", Credentials{User: "runner", Password: "pw", KnownHosts: []byte("# the image's keys\n" + knownHostsLine(srv.addr, hostEd.PublicKey()))}, "", false},
		{"password, known ecdsa host key", Credentials{User: "runner", Password: "pw", KnownHosts: []byte(knownHostsLine(srv.addr, hostEC.PublicKey()))}, "", false},
		{"private key", Credentials{User: "runner", PrivateKey: userKeyPEM, KnownHosts: []byte(knownHostsLine(srv.addr, hostEd.PublicKey()))}, "", false},
		{"any host key, asked for", Credentials{User: "runner", Password: "pw", InsecureIgnoreHostKey: true}, "", false},
		{"unknown host key", Credentials{User: "runner", Password: "pw", KnownHosts: []byte(knownHostsLine(srv.addr, stranger.PublicKey()))}, "host key", true},
		{"host key for another host", Credentials{User: "runner", Password: "pw", KnownHosts: []byte(strings.Replace(knownHostsLine(srv.addr, hostEd.PublicKey()), "[*]", "[10.9.9.9]", 1))}, "host key", true},
		{"no host key check", Credentials{User: "runner", Password: "pw"}, "known_hosts", false},
		{"wrong password", Credentials{User: "runner", Password: "guess", InsecureIgnoreHostKey: true}, "unable to authenticate", false},
		{"garbage private key", Credentials{User: "runner", PrivateKey: []byte("not a key"), InsecureIgnoreHostKey: true}, "private key", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(t.Context(), srv.addr, tc.creds)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				out, err := c.Run(t.Context(), "sw_vers", nil)
				if err != nil || out != "ran: sw_vers\n" {
					t.Fatalf("Run: %q, %v", out, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
			}
			if errors.Is(err, ErrHostKey) != tc.hostKey {
				t.Errorf("errors.Is(err, ErrHostKey) = %v, want %v", !tc.hostKey, tc.hostKey)
			}
		})
	}
}

func TestRun(t *testing.T) {
	srv := startServer(t, "runner", "pw", nil, ed25519Key(t))
	c, err := Dial(t.Context(), srv.addr, Credentials{User: "runner", Password: "pw", InsecureIgnoreHostKey: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	if out, err := c.Run(t.Context(), "echo-stdin", []byte("glrt-token")); err != nil || out != "glrt-token" {
		t.Errorf("stdin: %q, %v", out, err)
	}
	_, err = c.Run(t.Context(), "exit 3", nil)
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Status != 3 || err.Error() != "exited with status 3: failing with 3" {
		t.Errorf("exit 3: %v", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Run(ctx, "sleep", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a command past its deadline: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the deadline took %s to end the command", took)
	}
	// The connection outlives a command that timed out.
	if _, err := c.Run(t.Context(), "true", nil); err != nil {
		t.Errorf("after a timeout: %v", err)
	}
}

func TestDial_Unreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if _, err := Dial(t.Context(), addr, Credentials{User: "u", Password: "p", InsecureIgnoreHostKey: true}); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("dialling a closed port: %v", err)
	}
}

func TestCredentialsFromSecret(t *testing.T) {
	for _, tc := range []struct {
		name     string
		data     map[string]string
		user     string
		insecure bool
		want     Credentials
		wantErr  string
	}{
		{"password and known hosts", map[string]string{"username": "admin\n", "password": "pw", "known_hosts": "* ssh-ed25519 AAAA"}, "", false,
			Credentials{User: "admin", Password: "pw", KnownHosts: []byte("* ssh-ed25519 AAAA")}, ""},
		{"spec's user wins", map[string]string{"username": "admin", "ssh-privatekey": "KEY"}, "runner", true,
			Credentials{User: "runner", PrivateKey: []byte("KEY"), InsecureIgnoreHostKey: true}, ""},
		{"no user", map[string]string{"password": "pw"}, "", true, Credentials{}, "username"},
		{"no password nor key", map[string]string{"username": "admin"}, "", true, Credentials{}, "password or ssh-privatekey"},
		{"no way to check the host", map[string]string{"username": "admin", "password": "pw"}, "", false, Credentials{}, "known_hosts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range tc.data {
				data[k] = []byte(v)
			}
			got, err := CredentialsFromSecret(data, tc.user, tc.insecure)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.User != tc.want.User || got.Password != tc.want.Password || !bytes.Equal(got.PrivateKey, tc.want.PrivateKey) ||
				!bytes.Equal(got.KnownHosts, tc.want.KnownHosts) || got.InsecureIgnoreHostKey != tc.want.InsecureIgnoreHostKey {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestQuote_SurvivesTheShell(t *testing.T) {
	for _, s := range []string{"plain", "with space", `it's`, `$(rm -rf /)`, "`x`", `"q"`, "a\nb", ""} {
		out, err := exec.Command("sh", "-c", "printf %s "+Quote(s)).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != s {
			t.Errorf("Quote(%q) came out of sh as %q", s, out)
		}
	}
}
