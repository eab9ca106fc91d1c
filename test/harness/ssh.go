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

package harness

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// The SSH server a played guest runs stands for macOS's Remote Login
// (sshd), which a golden image built for a workload turns on with the
// account the workload logs in as. DockerIOS itself never uses it: the
// machine layer knows nothing of what runs in the guest. It is here so
// that workload-layer examples (examples/gitlab-runner) can be tested end
// to end against played guests: what they run is recorded, not executed.

const (
	// DefaultSSHPort is where a guest's sshd listens, on every address.
	DefaultSSHPort = 22
	// sshStdinLimit bounds what is kept of a command's standard input.
	sshStdinLimit = 1 << 20
	// sshStdinWait bounds how long a command waits for its input to end:
	// a client that never closes it (an interactive terminal) still gets
	// its answer.
	sshStdinWait = 5 * time.Second
	// sshHandshakeTimeout bounds a connection's handshake, so a client
	// that stalls cannot hold a stopping guest.
	sshHandshakeTimeout = 10 * time.Second
)

// SSHConfig makes the played guests serve SSH. With User empty they serve
// none, as an image without Remote Login.
type SSHConfig struct {
	// Port the guests listen on, on each of their addresses
	// (DefaultSSHPort). Ports below 1024 need root or
	// CAP_NET_BIND_SERVICE: without them the guests boot without SSH and
	// the harness logs why.
	Port int
	// User is the golden image's account: the only user accepted.
	User string
	// Password, when set, is accepted for User.
	Password string
	// AuthorizedKeys, in authorized_keys format, are the public keys
	// accepted for User.
	AuthorizedKeys []byte
	// HostKey is the guests' host key. Nil: one Ed25519 key generated at
	// Start, shared by every guest as the clones of one golden image share
	// theirs (SSHHostKey returns its public half).
	HostKey ssh.Signer
}

func (c *SSHConfig) enabled() bool { return c.User != "" }

// SSHCommand is one command a guest was asked to run over SSH.
type SSHCommand struct {
	// Guest is the VirtualMachineInstance, "namespace/name".
	Guest string
	// Address is the guest's address the client dialled, host:port.
	Address string
	// User the client authenticated as.
	User string
	// Command is the exec request's command line, as the client sent it.
	Command string
	// Stdin is what the client wrote to the command's input (at most
	// 1 MiB), read until it closed it.
	Stdin []byte
	// ExitStatus the command was answered with.
	ExitStatus int
	// Time the command was answered.
	Time time.Time
}

// sshFailure makes commands that contain match exit with status.
type sshFailure struct {
	match  string
	status int
}

// sshServer is one guest's sshd: a listener per address, a goroutine per
// connection, every exec recorded and answered (empty output, exit 0
// unless a failure is injected). Only "session" channels and "exec"
// requests are accepted: a played guest has no shell to give.
type sshServer struct {
	config    *ssh.ServerConfig
	guest     string
	record    func(SSHCommand)
	exitFor   func(command string) int
	listeners []net.Listener

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
	wg    sync.WaitGroup
}

// newSSHServerConfig builds the server side of cfg: password and public
// key authentication of cfg.User, with cfg.HostKey.
func newSSHServerConfig(cfg SSHConfig) (*ssh.ServerConfig, error) {
	if cfg.HostKey == nil {
		return nil, errors.New("harness: SSH needs a host key")
	}
	var keys [][]byte
	for rest := cfg.AuthorizedKeys; len(bytes.TrimSpace(rest)) > 0; {
		key, _, _, r, err := ssh.ParseAuthorizedKey(rest)
		if err != nil {
			return nil, fmt.Errorf("harness: SSH authorized keys: %w", err)
		}
		keys = append(keys, key.Marshal())
		rest = r
	}
	sc := &ssh.ServerConfig{}
	if cfg.Password != "" {
		sc.PasswordCallback = func(meta ssh.ConnMetadata, password []byte) (*ssh.Permissions, error) {
			userOK := subtle.ConstantTimeCompare([]byte(meta.User()), []byte(cfg.User)) == 1
			passOK := subtle.ConstantTimeCompare(password, []byte(cfg.Password)) == 1
			if userOK && passOK {
				return nil, nil
			}
			return nil, fmt.Errorf("password rejected for %q", meta.User())
		}
	}
	if len(keys) > 0 {
		sc.PublicKeyCallback = func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if meta.User() == cfg.User {
				for _, k := range keys {
					if bytes.Equal(k, key.Marshal()) {
						return nil, nil
					}
				}
			}
			return nil, fmt.Errorf("public key rejected for %q", meta.User())
		}
	}
	sc.AddHostKey(cfg.HostKey)
	return sc, nil
}

// generateHostKey makes an Ed25519 host key.
func generateHostKey() (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return ssh.NewSignerFromKey(priv)
}

// startSSHServer listens on port at every address in ips and serves until
// stop. A listener it cannot open fails the whole start.
func startSSHServer(config *ssh.ServerConfig, guest string, ips []string, port int, record func(SSHCommand), exitFor func(string) int) (*sshServer, error) {
	s := &sshServer{config: config, guest: guest, record: record, exitFor: exitFor, conns: map[net.Conn]struct{}{}}
	for _, ip := range ips {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			for _, l := range s.listeners {
				l.Close()
			}
			return nil, err
		}
		s.listeners = append(s.listeners, l)
	}
	for _, l := range s.listeners {
		s.wg.Add(1)
		go s.accept(l)
	}
	return s, nil
}

// addrs are the addresses the server listens on.
func (s *sshServer) addrs() []string {
	var out []string
	for _, l := range s.listeners {
		out = append(out, l.Addr().String())
	}
	return out
}

// stop closes the listeners and every connection, as a guest that shuts
// down or crashes drops them, and waits for the server's goroutines.
func (s *sshServer) stop() {
	s.mu.Lock()
	s.done = true
	for _, l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *sshServer) accept(l net.Listener) {
	defer s.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return // closed by stop
		}
		s.mu.Lock()
		if s.done {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
			s.serve(c)
		}()
	}
}

func (s *sshServer) serve(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(sshHandshakeTimeout))
	conn, chans, reqs, err := ssh.NewServerConn(c, s.config)
	if err != nil {
		return // a failed authentication or handshake: the client is told
	}
	defer conn.Close()
	_ = c.SetDeadline(time.Time{})
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	defer wg.Wait()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only session channels")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.session(conn, ch, chReqs)
		}()
	}
}

// session answers the first exec request of a session channel and closes
// it; anything else (shell, pty-req, env, subsystem) is refused, as
// there is no shell behind a played guest.
func (s *sshServer) session(conn *ssh.ServerConn, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
			continue
		}
		var payload struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
			_ = req.Reply(false, nil)
			continue
		}
		_ = req.Reply(true, nil)
		cmd := SSHCommand{Guest: s.guest, Address: conn.LocalAddr().String(), User: conn.User(), Command: payload.Command}
		cmd.Stdin = readStdin(ch)
		cmd.ExitStatus = s.exitFor(payload.Command)
		cmd.Time = time.Now()
		s.record(cmd)
		if cmd.ExitStatus != 0 {
			fmt.Fprintf(ch.Stderr(), "harness: %q fails on this played guest (exit status %d)\n", payload.Command, cmd.ExitStatus)
		}
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(cmd.ExitStatus)}))
		return
	}
}

// readStdin reads what the client sends until it closes its side, at most
// sshStdinLimit bytes kept and sshStdinWait waited.
func readStdin(ch ssh.Channel) []byte {
	var buf bytes.Buffer
	done := make(chan struct{})
	var mu sync.Mutex
	go func() {
		defer close(done)
		chunk := make([]byte, 32<<10)
		for {
			n, err := ch.Read(chunk)
			mu.Lock()
			if room := sshStdinLimit - buf.Len(); room > 0 {
				buf.Write(chunk[:min(n, room)])
			}
			mu.Unlock()
			if err != nil {
				return // io.EOF: the client closed its input
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(sshStdinWait):
	}
	mu.Lock()
	defer mu.Unlock()
	return bytes.Clone(buf.Bytes())
}

// startSSH starts g's sshd on every address of the guest, if the harness
// plays SSH. A guest whose sshd cannot listen still boots: the reason is
// logged.
func (h *Harness) startSSH(g *guest) {
	if !h.cfg.SSH.enabled() {
		return
	}
	k := g.namespace + "/" + g.name
	srv, err := startSSHServer(h.sshConfig, k, g.ips, h.cfg.SSH.Port, h.recordSSH, h.sshExitStatus)
	if err != nil {
		h.logf("guest %s: sshd: %v", k, err)
		return
	}
	h.mu.Lock()
	if g.ctx.Err() != nil {
		h.mu.Unlock()
		srv.stop()
		return
	}
	g.ssh = srv
	h.mu.Unlock()
	h.logf("guest %s: sshd listening on %v", k, srv.addrs())
	// The guest's end (shutdown, crash, Stop) ends its sshd.
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		<-g.ctx.Done()
		srv.stop()
	}()
}

func (h *Harness) recordSSH(c SSHCommand) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sshLog[c.Guest] = append(h.sshLog[c.Guest], c)
	h.logf("guest %s: ssh %s@%s ran %q (exit status %d)", c.Guest, c.User, c.Address, c.Command, c.ExitStatus)
}

func (h *Harness) sshExitStatus(command string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.sshFailures {
		if strings.Contains(command, f.match) {
			return f.status
		}
	}
	return 0
}

// SSHCommands returns the commands run over SSH on the guests of the
// VirtualMachineInstance namespace/name (a machine's
// status.virtualMachineName), oldest first. They are kept after the guest
// is gone, for as long as the harness runs.
func (h *Harness) SSHCommands(namespace, name string) []SSHCommand {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]SSHCommand(nil), h.sshLog[namespace+"/"+name]...)
}

// SSHGuests returns the guests ("namespace/name") that have run a command
// over SSH.
func (h *Harness) SSHGuests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for k := range h.sshLog {
		out = append(out, k)
	}
	return out
}

// FailSSHCommands makes every command containing match exit with
// exitStatus on every guest, as a provisioning step that breaks on the
// image would (a missing tool, a full disk); exitStatus 0 stops failing
// them.
func (h *Harness) FailSSHCommands(match string, exitStatus int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := h.sshFailures[:0]
	for _, f := range h.sshFailures {
		if f.match != match {
			kept = append(kept, f)
		}
	}
	h.sshFailures = kept
	if exitStatus != 0 {
		h.sshFailures = append(h.sshFailures, sshFailure{match: match, status: exitStatus})
	}
}

// SSHHostKey is the host key the guests present; nil when they serve no
// SSH.
func (h *Harness) SSHHostKey() ssh.PublicKey {
	if h.sshConfig == nil {
		return nil
	}
	return h.cfg.SSH.HostKey.PublicKey()
}

// setUpSSH completes the SSH configuration at Start.
func (h *Harness) setUpSSH() error {
	if !h.cfg.SSH.enabled() {
		return nil
	}
	if h.cfg.SSH.Password == "" && len(bytes.TrimSpace(h.cfg.SSH.AuthorizedKeys)) == 0 {
		return fmt.Errorf("harness: SSH user %q needs a password or authorized keys", h.cfg.SSH.User)
	}
	if h.cfg.SSH.HostKey == nil {
		key, err := generateHostKey()
		if err != nil {
			return err
		}
		h.cfg.SSH.HostKey = key
	}
	sc, err := newSSHServerConfig(h.cfg.SSH)
	if err != nil {
		return err
	}
	h.sshConfig = sc
	return nil
}
