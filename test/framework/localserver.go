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

// Package framework runs the real DockerIOS components for integration and
// end-to-end tests: the apiserver binary (built from this checkout) and the
// real kubectl. Tests talk to them exactly as a user would.
//
// It is test code: nothing under pkg/ or cmd/ imports it.
package framework

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Environment variables that point tests at prebuilt binaries; hack/test.sh
// sets them so the suite builds each binary once.
const (
	APIServerBinEnv = "DOCKERIOS_APISERVER_BIN"
	PluginBinEnv    = "DOCKERIOS_KUBECTL_PLUGIN_BIN"
	KubectlBinEnv   = "KUBECTL"
	AgentBinEnv     = "DOCKERIOS_AGENT_BIN"
)

// StorageMediaTypeEnv, when set, is the --storage-media-type of every
// DockerIOS apiserver the framework starts, so that a suite written for
// the default (JSON) runs as well on the other media type an operator may
// choose (hack/test.sh runs the model test so, with protobuf).
const StorageMediaTypeEnv = "DOCKERIOS_TEST_STORAGE_MEDIA_TYPE"

// withStorageMediaType returns args with the --storage-media-type
// $DOCKERIOS_TEST_STORAGE_MEDIA_TYPE asks for, if any, first: a flag the
// test passes itself comes later and wins.
func withStorageMediaType(args ...string) []string {
	mt := os.Getenv(StorageMediaTypeEnv)
	if mt == "" {
		return args
	}
	return append([]string{"--storage-media-type=" + mt}, args...)
}

// APIServerBinary returns the apiserver binary to test: $DOCKERIOS_APISERVER_BIN
// when set, otherwise one built from this checkout (once per test process).
func APIServerBinary(t TB) string {
	t.Helper()
	return apiserverBin.get(t)
}

// PluginBinary returns the kubectl-dockerios plugin to test:
// $DOCKERIOS_KUBECTL_PLUGIN_BIN when set, otherwise one built from this checkout.
func PluginBinary(t TB) string {
	t.Helper()
	return pluginBin.get(t)
}

// AgentBinary returns the guest agent: $DOCKERIOS_AGENT_BIN when set,
// otherwise one built from this checkout.
func AgentBinary(t TB) string {
	t.Helper()
	return agentBin.get(t)
}

var (
	agentBin     = &binary{env: AgentBinEnv, name: "dockerios-agent", pkg: "./agent/cmd/dockerios-agent"}
	apiserverBin = &binary{env: APIServerBinEnv, name: "dockerios-apiserver", pkg: "./cmd/apiserver"}
	pluginBin    = &binary{env: PluginBinEnv, name: "kubectl-dockerios", pkg: "./cmd/kubectl-dockerios"}
)

// binary is a program of this module, built at most once per test process.
type binary struct {
	env, name, pkg string
	once           sync.Once
	path           string
	err            error
}

func (b *binary) get(t TB) string {
	if bin := os.Getenv(b.env); bin != "" {
		return bin
	}
	b.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			b.err = err
			return
		}
		dir, err := os.MkdirTemp("", "dockerios-test-bin")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, b.name)
		cmd := exec.Command("go", "build", "-o", b.path, b.pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %v\n%s", b.pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("tests must run inside the DockerIOS module")
	}
	return filepath.Dir(gomod), nil
}

// LocalServer is a DockerIOS apiserver running in --local mode with its
// embedded etcd.
type LocalServer struct {
	DataDir    string
	Port       int
	Kubeconfig string

	bin  string
	args []string
	*process
}

// StartLocalServer runs the apiserver with --local in dataDir (and any extra
// flags) and waits until it is ready. The server is stopped when the test ends.
func StartLocalServer(t TB, dataDir string, extraArgs ...string) *LocalServer {
	t.Helper()
	return StartLocalServerBinary(t, APIServerBinary(t), dataDir, extraArgs...)
}

// StartLocalServerBinary is StartLocalServer with another build of the
// apiserver, such as one stamped with a known version.
func StartLocalServerBinary(t TB, bin, dataDir string, extraArgs ...string) *LocalServer {
	t.Helper()
	port := FreePort(t)
	s := &LocalServer{
		DataDir:    dataDir,
		Port:       port,
		Kubeconfig: filepath.Join(dataDir, "admin.kubeconfig"),
	}
	s.bin = bin
	s.args = append(withStorageMediaType("--local", "--data-dir", dataDir, "--secure-port", fmt.Sprint(port)), extraArgs...)
	s.start(t)
	s.waitReady(t, 2*time.Minute)
	return s
}

func (s *LocalServer) start(t TB) {
	t.Helper()
	s.process = startProcess(t, "apiserver", s.bin, s.args...)
	t.Cleanup(func() {
		s.Stop(t)
		if t.Failed() {
			t.Logf("apiserver output:\n%s", s.output.String())
		}
	})
}

// Restart starts a stopped server again — same binary, data directory, port
// and flags, so its kubeconfig keeps working — and returns as soon as the
// process has started, not once it is ready: what a restart costs is
// measured from here (see WaitReady).
func (s *LocalServer) Restart(t TB) *LocalServer {
	t.Helper()
	select {
	case <-s.exited:
	default:
		t.Fatalf("apiserver (pid %d) is still running", s.PID())
	}
	n := &LocalServer{DataDir: s.DataDir, Port: s.Port, Kubeconfig: s.Kubeconfig, bin: s.bin, args: s.args}
	n.start(t)
	return n
}

// WaitReady waits until /readyz answers ok, as StartLocalServer does.
func (s *LocalServer) WaitReady(t TB, timeout time.Duration) {
	t.Helper()
	s.waitReady(t, timeout)
}

// Exited is closed when the server's process has exited.
func (s *LocalServer) Exited() <-chan struct{} { return s.exited }

// waitReady waits for the kubeconfig of this run to be written and for
// /readyz to answer ok through it.
func (s *LocalServer) waitReady(t TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	want := fmt.Sprintf("https://127.0.0.1:%d", s.Port)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			t.Fatalf("apiserver exited while starting:\n%s", s.output.String())
		default:
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
		if err == nil && cfg.Host == want {
			client, cerr := kubernetes.NewForConfig(cfg)
			if cerr == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				body, rerr := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
				cancel()
				if rerr == nil && string(body) == "ok" {
					return
				}
				lastErr = rerr
			}
		} else {
			lastErr = err
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("apiserver not ready after %s (last error: %v):\n%s", timeout, lastErr, s.output.String())
}

// Stop asks the server to shut down (SIGTERM) and waits for it to exit.
func (s *LocalServer) Stop(t TB) { s.signal(t, syscall.SIGTERM) }

// Kill kills the server (SIGKILL), as a crash or an OOM kill would.
func (s *LocalServer) Kill(t TB) { s.signal(t, syscall.SIGKILL) }

// Output returns what the server has logged so far.
func (s *LocalServer) Output() string { return s.output.String() }

// FreePort returns a loopback TCP port nothing listens on right now.
func FreePort(t TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
