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

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/client"
	"github.com/dockerios/dockerios/pkg/version/versiontest"
)

// agentBinary is built once by TestMain.
var agentBinary string

const (
	testToken   = "e2e-token-0123456789abcdef0123456789abcdef"
	waitTimeout = 60 * time.Second // shared, slow machines
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dockerios-agent-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentBinary = filepath.Join(dir, "dockerios-agent")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", versiontest.LDFlags("e2e"), "-o", agentBinary, "github.com/dockerios/dockerios/agent/cmd/dockerios-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the agent:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// agentProc is one running agent.
type agentProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	addr  string
	log   string
	dir   string
	exit  chan error
	token string

	stopOnce sync.Once
	stopErr  error
}

// startAgent writes config (with %ADDR% and %TOKENFILE% substituted) and
// starts the agent on it. The agent is stopped with SIGTERM at cleanup,
// which must make it exit 0.
func startAgent(t testing.TB, config string) *agentProc {
	t.Helper()
	dir := t.TempDir()
	a := &agentProc{addr: freeAddr(t), dir: dir, log: filepath.Join(dir, "agent.log"), exit: make(chan error, 1), token: testToken}
	tokenFile := filepath.Join(dir, "token")
	mustWrite(t, tokenFile, testToken+"\n")
	cfgFile := filepath.Join(dir, "agent.yaml")
	config = strings.NewReplacer("%ADDR%", a.addr, "%TOKENFILE%", tokenFile).Replace(config)
	mustWrite(t, cfgFile, config)
	logf, err := os.Create(a.log)
	if err != nil {
		t.Fatal(err)
	}
	a.cmd = exec.Command(agentBinary, "--config", cfgFile, "--log-level", "debug")
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.exit <- a.cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		if err := a.stop(); err != nil {
			t.Errorf("agent did not shut down cleanly on SIGTERM: %v\n%s", err, a.logs())
		}
	})
	a.waitListening(t)
	return a
}

// stop sends SIGTERM and returns how the agent exited; nil means code 0.
func (a *agentProc) stop() error {
	a.stopOnce.Do(func() {
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case a.stopErr = <-a.exit:
		case <-time.After(20 * time.Second):
			_ = a.cmd.Process.Kill()
			<-a.exit
			a.stopErr = errors.New("killed after 20s")
		}
	})
	return a.stopErr
}

func (a *agentProc) logs() string {
	b, _ := os.ReadFile(a.log)
	return string(b)
}

func (a *agentProc) waitListening(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-a.exit:
			a.exit <- err
			t.Fatalf("agent exited before listening: %v\n%s", err, a.logs())
		default:
		}
		if c, err := net.DialTimeout("tcp", a.addr, time.Second); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("agent not listening on %s\n%s", a.addr, a.logs())
}

func (a *agentProc) client(t testing.TB, token string) *client.Client {
	t.Helper()
	c, err := client.New(a.addr, []byte(token), client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// waitFor polls until ok accepts a status and returns that status.
func (a *agentProc) waitFor(t *testing.T, c *client.Client, what string, ok func(*api.Status) bool) *api.Status {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last *api.Status
	var lastErr error
	for time.Now().Before(deadline) {
		st, err := c.Status(context.Background())
		if err == nil {
			last = st
			if ok(st) {
				return st
			}
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last status %+v, last error %v\nagent log:\n%s", what, last, lastErr, a.logs())
	return nil
}

func stageIs(s api.Stage) func(*api.Status) bool {
	return func(st *api.Status) bool { return st.Stage == s }
}

func hasReason(st *api.Status, typ, contains string) bool {
	for _, r := range st.Reasons {
		if r.Type == typ && strings.Contains(r.Message, contains) {
			return true
		}
	}
	return false
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func mustWrite(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// scratchVolume returns a small volume to fill and the floor that filling
// it crosses: an 8 MiB tmpfs when we may mount one, else the temp dir's
// real volume with a floor just below its current free space.
type scratchVolume struct {
	path      string
	floor     string
	fillBytes int64
}

func newScratchVolume(t *testing.T) scratchVolume {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput(); err == nil {
			t.Cleanup(func() {
				if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
					t.Errorf("umount %s: %v: %s", dir, err, out)
				}
			})
			return scratchVolume{path: dir, floor: "4Mi", fillBytes: 5 << 20}
		} else {
			t.Logf("no tmpfs (%v: %s); using a floor relative to real free space", err, bytes.TrimSpace(out))
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	const margin = 64 << 20
	if free < 4*margin {
		t.Skipf("only %d bytes free", free)
	}
	return scratchVolume{path: dir, floor: fmt.Sprint(free - margin), fillBytes: 2 * margin}
}

func TestAgent_DrivenThroughEveryStage(t *testing.T) {
	vol := newScratchVolume(t)
	world := t.TempDir()
	console := filepath.Join(world, "console")
	marker := filepath.Join(world, "marker")
	flag := filepath.Join(world, "flag")
	portAddr := freeAddr(t)

	a := startAgent(t, fmt.Sprintf(`
listen: "%%ADDR%%"
token:
  file: "%%TOKENFILE%%"
pollInterval: 200ms
session:
  consoleDevice: %s
disk:
  path: %s
  floor: "%s"
checks:
  - name: marker
    kind: pathExists
    path: %s
  - name: flag-command
    kind: command
    command: ["test", "-f", "%s"]
    timeout: 5s
  - name: service-port
    kind: tcpPort
    address: %s
    timeout: 2s
  - name: scratch-headroom
    kind: diskFree
    path: %s
    floor: 1Ki
`, console, vol.path, vol.floor, marker, flag, portAddr, vol.path))
	c := a.client(t, testToken)

	// Booted: no console session yet, so no check runs.
	st := a.waitFor(t, c, "Booted", stageIs(api.StageBooted))
	if st.Session.Up || st.AgentVersion != "e2e" || st.BootTime.IsZero() || st.UptimeSeconds <= 0 {
		t.Errorf("unexpected Booted status: %+v", st)
	}
	if st.Disk.Path != vol.path || st.Disk.TotalBytes == 0 || st.Disk.FloorBytes == 0 {
		t.Errorf("disk not reported: %+v", st.Disk)
	}
	if !hasReason(st, api.ReasonSessionNotStarted, console) {
		t.Errorf("Booted reasons do not name the console: %+v", st.Reasons)
	}
	for _, r := range st.Checks {
		if !r.Pending() {
			t.Errorf("check %s ran before the session: %+v", r.Name, r)
		}
	}

	// A user owns the console: the session is up and checks start, and
	// fail, since nothing they look for exists yet.
	mustWrite(t, console, "")
	if os.Geteuid() == 0 {
		if err := os.Chown(console, 501, 20); err != nil {
			t.Fatal(err)
		}
	}
	st = a.waitFor(t, c, "Provisioning", stageIs(api.StageProvisioning))
	if !st.Session.Up {
		t.Errorf("session not up: %+v", st.Session)
	}
	for _, name := range []string{"marker", "flag-command", "service-port"} {
		if !hasReason(st, api.ReasonCheckFailed, name+":") {
			t.Errorf("Provisioning reasons lack failing check %s: %+v", name, st.Reasons)
		}
	}

	// Make every check pass: a file appears, a command succeeds, a port
	// opens.
	mustWrite(t, marker, "")
	mustWrite(t, flag, "")
	ln, err := net.Listen("tcp", portAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go acceptAndClose(ln)
	st = a.waitFor(t, c, "Ready", stageIs(api.StageReady))
	if len(st.Reasons) != 0 {
		t.Errorf("Ready with reasons: %+v", st.Reasons)
	}
	for _, r := range st.Checks {
		if !r.OK || r.CheckedAt.IsZero() || r.Message == "" {
			t.Errorf("check not passing with detail in Ready: %+v", r)
		}
	}
	assertProgression(t, st.Transitions, api.StageBooted, api.StageSessionStarted, api.StageProvisioning, api.StageReady)

	// Fill the volume past its floor: Degraded, naming the disk.
	fill := filepath.Join(vol.path, "fill")
	if err := os.WriteFile(fill, make([]byte, vol.fillBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	st = a.waitFor(t, c, "Degraded by disk", stageIs(api.StageDegraded))
	if !hasReason(st, api.ReasonDiskBelowFloor, vol.path) {
		t.Errorf("Degraded without a disk reason naming %s: %+v", vol.path, st.Reasons)
	}
	if st.Disk.FreeBytes >= st.Disk.FloorBytes {
		t.Errorf("disk above floor while Degraded: %+v", st.Disk)
	}

	// Degraded recovers once the cause is gone.
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	a.waitFor(t, c, "Ready after freeing the disk", stageIs(api.StageReady))

	// A check failing after Ready degrades the machine rather than sending
	// it back to Provisioning.
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	st = a.waitFor(t, c, "Degraded by a check", stageIs(api.StageDegraded))
	if !hasReason(st, api.ReasonCheckFailed, "marker:") {
		t.Errorf("Degraded without naming the check: %+v", st.Reasons)
	}
	ln.Close()
	a.waitFor(t, c, "the closed port reported", func(st *api.Status) bool {
		return hasReason(st, api.ReasonCheckFailed, "service-port:")
	})
}

func acceptAndClose(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// assertProgression checks that want occurs, in order, within tr.
func assertProgression(t *testing.T, tr []api.Transition, want ...api.Stage) {
	t.Helper()
	i := 0
	var prev time.Time
	for _, x := range tr {
		if x.At.Before(prev) {
			t.Errorf("transitions out of order: %+v", tr)
		}
		prev = x.At
		if i < len(want) && x.Stage == want[i] {
			i++
		}
	}
	if i != len(want) {
		t.Errorf("transitions %+v lack the progression %v", tr, want)
	}
}

func TestAgent_MalformedConfigKeepsServingDegraded(t *testing.T) {
	a := startAgent(t, `
listen: "%ADDR%"
token:
  file: "%TOKENFILE%"
pollInterval: 150ms
disk:
  path: /
  floor: 0
checks:
  - name: broken
    kind: teleport
  - name: typo
    kind: pathExists
    paht: /tmp
`)
	c := a.client(t, testToken)
	st := a.waitFor(t, c, "Degraded", stageIs(api.StageDegraded))
	if len(st.Reasons) == 0 || st.Reasons[0].Type != api.ReasonConfigInvalid {
		t.Fatalf("want ConfigInvalid first, got %+v", st.Reasons)
	}
	if !strings.Contains(st.Reasons[0].Message, `unknown field "paht"`) {
		t.Errorf("reason does not carry the parse error: %q", st.Reasons[0].Message)
	}
	// Still alive and answering several polls later.
	time.Sleep(time.Second)
	st2 := a.waitFor(t, c, "a later poll", func(s *api.Status) bool { return s.ObservedAt.After(st.ObservedAt) })
	if st2.Stage != api.StageDegraded {
		t.Errorf("stage %s after a bad config", st2.Stage)
	}
}

func TestAgent_InvalidValuesAreReportedWithTheirField(t *testing.T) {
	a := startAgent(t, `
listen: "%ADDR%"
token:
  file: "%TOKENFILE%"
checks:
  - name: slow
    kind: command
    command: ["true"]
    timeout: -3s
`)
	st := a.waitFor(t, a.client(t, testToken), "Degraded", stageIs(api.StageDegraded))
	if !hasReason(st, api.ReasonConfigInvalid, "checks[0].timeout: must be positive") {
		t.Errorf("reasons %+v", st.Reasons)
	}
}

func TestAgent_WrongTokenGets401AndNothingElse(t *testing.T) {
	a := startAgent(t, "listen: \"%ADDR%\"\ntoken:\n  file: \"%TOKENFILE%\"\npollInterval: 200ms\n")

	_, err := a.client(t, "wrong-token-0123456789abcdef0123456789").Status(context.Background())
	if !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("wrong token: got %v, want ErrUnauthenticated", err)
	}

	hc := insecureHTTP()
	for name, header := range map[string]map[string]string{
		"no credentials": nil,
		"token sent in the clear": {
			"Authorization": "Bearer " + testToken,
		},
		"forged signature": {
			api.HeaderNonce:     "nonce-0123456789abcdef",
			api.HeaderTimestamp: fmt.Sprint(time.Now().Unix()),
			api.HeaderSignature: strings.Repeat("ab", 32),
		},
	} {
		req, _ := httpRequest("https://"+a.addr+api.StatusPath, header)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		body := readAll(resp)
		if resp.StatusCode != 401 || len(body) != 0 || resp.Header.Get(api.HeaderResponseSignature) != "" || resp.Header.Get("Content-Type") != "" {
			t.Errorf("%s: got %d %q headers %v; want a bare 401", name, resp.StatusCode, body, resp.Header)
		}
	}

	// The right token still works.
	if _, err := a.client(t, testToken).Status(context.Background()); err != nil {
		t.Errorf("right token: %v", err)
	}
}

func TestAgent_OversizedRequestsAreRejectedAndServingContinues(t *testing.T) {
	a := startAgent(t, "listen: \"%ADDR%\"\ntoken:\n  file: \"%TOKENFILE%\"\npollInterval: 200ms\n")
	hc := insecureHTTP()

	req, _ := httpRequest("https://"+a.addr+api.StatusPath, map[string]string{"X-Padding": strings.Repeat("x", 1<<20)})
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(resp)
	if resp.StatusCode != 431 && resp.StatusCode != 400 {
		t.Errorf("1 MiB of headers: got %d, want 431 or 400", resp.StatusCode)
	}

	// A properly signed GET with a large body is refused too.
	sent := signedHeaders(testToken)
	req, _ = httpRequest("https://"+a.addr+api.StatusPath, sent)
	req.Body = readCloser{bytes.NewReader(make([]byte, 4<<20))}
	req.ContentLength = 4 << 20
	if resp, err = hc.Do(req); err == nil {
		readAll(resp)
		if resp.StatusCode != 413 {
			t.Errorf("4 MiB body: got %d, want 413", resp.StatusCode)
		}
	} // the server may also hang up mid-upload, which is just as good

	if _, err := a.client(t, testToken).Status(context.Background()); err != nil {
		t.Errorf("agent stopped serving after oversized requests: %v", err)
	}
}

func TestAgent_MissingTokenExitsWithCode3(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	mustWrite(t, cfg, fmt.Sprintf("listen: %q\ntoken:\n  file: %s\n", freeAddr(t), filepath.Join(dir, "absent")))
	cmd := exec.Command(agentBinary, "--config", cfg)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("got %v, want exit code 3\n%s", err, out)
	}
}

func TestAgent_CheckConfigFlag(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	mustWrite(t, good, "checks: [{name: a, kind: pathExists, path: /}]\n")
	mustWrite(t, bad, "checks: [{name: a, kind: pathExists}]\n")
	if out, err := exec.Command(agentBinary, "--check-config", "--config", good).CombinedOutput(); err != nil {
		t.Errorf("good config: %v\n%s", err, out)
	}
	out, err := exec.Command(agentBinary, "--check-config", "--config", bad).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 5 || !strings.Contains(string(out), "checks[0].path") {
		t.Errorf("bad config: got %v, want exit code 5 naming checks[0].path\n%s", err, out)
	}
	out, err = exec.Command(agentBinary, "--version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "e2e" {
		t.Errorf("--version: %q, %v", out, err)
	}
}

func TestAgent_HungCheckNeverBlocksTheAPI(t *testing.T) {
	world := t.TempDir()
	console := filepath.Join(world, "console")
	pidFile := filepath.Join(world, "pid")
	mustWrite(t, console, "")
	if os.Geteuid() == 0 {
		if err := os.Chown(console, 501, 20); err != nil {
			t.Fatal(err)
		}
	}
	a := startAgent(t, fmt.Sprintf(`
listen: "%%ADDR%%"
token:
  file: "%%TOKENFILE%%"
pollInterval: 200ms
session:
  consoleDevice: %s
disk:
  floor: 0
checks:
  - name: hangs
    kind: command
    command: ["sh", "-c", "echo $$ > %s; exec sleep 600"]
    timeout: 3s
`, console, pidFile))
	c := a.client(t, testToken)
	a.waitFor(t, c, "SessionStarted", stageIs(api.StageSessionStarted))
	// While the check hangs, every answer is prompt and fresh.
	for i := 0; i < 5; i++ {
		start := time.Now()
		st, err := c.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("status took %s while a check hung", took)
		}
		if age := time.Since(st.ObservedAt); age > 2*time.Second {
			t.Errorf("poll loop stalled: status is %s old", age)
		}
		time.Sleep(100 * time.Millisecond)
	}
	st := a.waitFor(t, c, "the hung check to time out", stageIs(api.StageProvisioning))
	if !hasReason(st, api.ReasonCheckFailed, "hangs: timed out after 3s; process group killed") {
		t.Errorf("reasons %+v", st.Reasons)
	}

	// Stopping the agent mid-check must not orphan the command.
	time.Sleep(500 * time.Millisecond) // let the next run start
	if err := a.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, a.logs())
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil && !zombie(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("check command %d outlived the agent", pid)
	}
}

// zombie reports whether pid is a zombie (there may be no reaper in a
// container); a zombie is dead for our purpose.
func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
