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
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// sshFixture is one played sshd on 127.0.0.1 and what it recorded.
type sshFixture struct {
	srv     *sshServer
	hostKey ssh.Signer
	mu      sync.Mutex
	log     []SSHCommand
}

func startSSHFixture(t *testing.T, cfg SSHConfig, exitFor func(string) int) *sshFixture {
	t.Helper()
	f := &sshFixture{}
	var err error
	if cfg.HostKey == nil {
		if cfg.HostKey, err = generateHostKey(); err != nil {
			t.Fatal(err)
		}
	}
	f.hostKey = cfg.HostKey
	sc, err := newSSHServerConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if exitFor == nil {
		exitFor = func(string) int { return 0 }
	}
	f.srv, err = startSSHServer(sc, "ns/vm", []string{"127.0.0.1"}, 0, func(c SSHCommand) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.log = append(f.log, c)
	}, exitFor)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopWithin(t, f.srv, 10*time.Second) })
	return f
}

// stopWithin stops srv, failing the test if that takes longer than d (a
// connection holding the server).
func stopWithin(t *testing.T, srv *sshServer, d time.Duration) bool {
	t.Helper()
	stopped := make(chan struct{})
	go func() { srv.stop(); close(stopped) }()
	select {
	case <-stopped:
		return true
	case <-time.After(d):
		t.Errorf("the sshd did not stop within %s", d)
		return false
	}
}

func (f *sshFixture) addr() string { return f.srv.addrs()[0] }

func (f *sshFixture) recorded() []SSHCommand {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]SSHCommand(nil), f.log...)
}

func (f *sshFixture) dial(user string, auth ...ssh.AuthMethod) (*ssh.Client, error) {
	return ssh.Dial("tcp", f.addr(), &ssh.ClientConfig{
		User: user, Auth: auth, HostKeyCallback: ssh.FixedHostKey(f.hostKey.PublicKey()), Timeout: 5 * time.Second})
}

func clientKey(t *testing.T) (ssh.Signer, []byte) {
	t.Helper()
	s, err := generateHostKey()
	if err != nil {
		t.Fatal(err)
	}
	return s, ssh.MarshalAuthorizedKey(s.PublicKey())
}

func TestSSHServer_AcceptsOnlyTheImagesUser(t *testing.T) {
	authorized, authorizedLine := clientKey(t)
	stranger, _ := clientKey(t)
	cfg := SSHConfig{User: "runner", Password: "s3cret", AuthorizedKeys: append([]byte("# the image's key\n"), authorizedLine...)}
	f := startSSHFixture(t, cfg, nil)
	keysOnly := startSSHFixture(t, SSHConfig{User: "runner", AuthorizedKeys: authorizedLine}, nil)

	for _, tc := range []struct {
		name   string
		server *sshFixture
		user   string
		auth   ssh.AuthMethod
		ok     bool
	}{
		{"right password", f, "runner", ssh.Password("s3cret"), true},
		{"wrong password", f, "runner", ssh.Password("guess"), false},
		{"right password, another user", f, "root", ssh.Password("s3cret"), false},
		{"authorized key", f, "runner", ssh.PublicKeys(authorized), true},
		{"unknown key", f, "runner", ssh.PublicKeys(stranger), false},
		{"authorized key, another user", f, "root", ssh.PublicKeys(authorized), false},
		{"password where only keys are accepted", keysOnly, "runner", ssh.Password("s3cret"), false},
		{"key where only keys are accepted", keysOnly, "runner", ssh.PublicKeys(authorized), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.server.dial(tc.user, tc.auth)
			if tc.ok != (err == nil) {
				t.Fatalf("dial as %s: %v, want success %v", tc.user, err, tc.ok)
			}
			if c != nil {
				c.Close()
			}
		})
	}
}

func TestSSHServer_PresentsItsHostKey(t *testing.T) {
	f := startSSHFixture(t, SSHConfig{User: "runner", Password: "pw"}, nil)
	other, _ := clientKey(t)
	_, err := ssh.Dial("tcp", f.addr(), &ssh.ClientConfig{User: "runner", Auth: []ssh.AuthMethod{ssh.Password("pw")},
		HostKeyCallback: ssh.FixedHostKey(other.PublicKey()), Timeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "host key mismatch") {
		t.Fatalf("a client expecting another host key: %v, want a host key mismatch", err)
	}
}

func TestSSHServer_RecordsWhatIsRun(t *testing.T) {
	f := startSSHFixture(t, SSHConfig{User: "runner", Password: "pw"}, func(cmd string) int {
		if strings.Contains(cmd, "brew") {
			return 7
		}
		return 0
	})
	c, err := f.dial("runner", ssh.Password("pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	for _, tc := range []struct {
		command string
		stdin   string
		status  int
	}{
		{"xcode-select -p", "", 0},
		{`CI_SERVER_TOKEN="$(cat)" gitlab-runner register`, "glrt-secret", 0},
		{"brew install xcodes", "", 7},
	} {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		s.Stdin = strings.NewReader(tc.stdin)
		var stderr bytes.Buffer
		s.Stderr = &stderr
		err = s.Run(tc.command)
		var exit *ssh.ExitError
		switch {
		case tc.status == 0 && err != nil:
			t.Errorf("%q: %v", tc.command, err)
		case tc.status != 0 && (!errors.As(err, &exit) || exit.ExitStatus() != tc.status):
			t.Errorf("%q: %v, want exit status %d", tc.command, err, tc.status)
		case tc.status != 0 && !strings.Contains(stderr.String(), "fails on this played guest"):
			t.Errorf("%q: stderr %q does not say the failure is played", tc.command, stderr.String())
		}
	}

	got := f.recorded()
	if len(got) != 3 {
		t.Fatalf("recorded %d commands, want 3: %+v", len(got), got)
	}
	for i, want := range []SSHCommand{
		{Command: "xcode-select -p"},
		{Command: `CI_SERVER_TOKEN="$(cat)" gitlab-runner register`, Stdin: []byte("glrt-secret")},
		{Command: "brew install xcodes", ExitStatus: 7},
	} {
		g := got[i]
		if g.Command != want.Command || !bytes.Equal(g.Stdin, want.Stdin) || g.ExitStatus != want.ExitStatus {
			t.Errorf("command %d: %+v, want %+v", i, g, want)
		}
		if g.Guest != "ns/vm" || g.User != "runner" || g.Address != f.addr() || g.Time.IsZero() {
			t.Errorf("command %d not attributed to the guest and user: %+v", i, g)
		}
	}
}

func TestSSHServer_RefusesAShell(t *testing.T) {
	f := startSSHFixture(t, SSHConfig{User: "runner", Password: "pw"}, nil)
	c, err := f.dial("runner", ssh.Password("pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Shell(); err == nil {
		t.Error("a played guest gave a shell")
	}
	if _, _, err := c.OpenChannel("direct-tcpip", nil); err == nil {
		t.Error("a played guest forwarded a port")
	}
	if n := len(f.recorded()); n != 0 {
		t.Errorf("%d commands recorded, want none", n)
	}
}

func TestSSHServer_StopDropsConnections(t *testing.T) {
	cfg := SSHConfig{User: "runner", Password: "pw"}
	f := startSSHFixture(t, cfg, nil)
	c, err := f.dial("runner", ssh.Password("pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waited := make(chan error, 1)
	go func() { waited <- c.Wait() }()

	if !stopWithin(t, f.srv, 10*time.Second) {
		return
	}
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection outlived the guest's sshd")
	}
	if conn, err := net.DialTimeout("tcp", f.addr(), time.Second); err == nil {
		conn.Close()
		t.Error("the stopped sshd still accepts connections")
	}
}

func TestHarness_FailSSHCommands(t *testing.T) {
	h := &Harness{ctx: context.Background(), sshLog: map[string][]SSHCommand{}}
	h.FailSSHCommands("brew", 3)
	h.FailSSHCommands("xcodebuild", 65)
	h.FailSSHCommands("brew", 4) // replaces the first
	for _, tc := range []struct {
		command string
		want    int
	}{
		{"brew install git", 4},
		{"xcodebuild -version", 65},
		{"sw_vers", 0},
	} {
		if got := h.sshExitStatus(tc.command); got != tc.want {
			t.Errorf("%q exits %d, want %d", tc.command, got, tc.want)
		}
	}
	h.FailSSHCommands("brew", 0)
	if got := h.sshExitStatus("brew install git"); got != 0 {
		t.Errorf("after clearing: exit %d, want 0", got)
	}

	h.recordSSH(SSHCommand{Guest: "a/m-1", Command: "one"})
	h.recordSSH(SSHCommand{Guest: "b/m-1", Command: "other"})
	h.recordSSH(SSHCommand{Guest: "a/m-1", Command: "two"})
	var got []string
	for _, c := range h.SSHCommands("a", "m-1") {
		got = append(got, c.Command)
	}
	if strings.Join(got, ",") != "one,two" {
		t.Errorf("SSHCommands(a, m-1) = %v, want [one two]", got)
	}
}
