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

package framework

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// StartControlPlaneEmbeddedLedger is StartControlPlane with the DockerIOS
// apiserver keeping the ledger in its embedded etcd, in
// DockerIOSDataDir, as the shipped Deployment runs it (no
// --etcd-servers), started with extraArgs.
func StartControlPlaneEmbeddedLedger(t TB, extraArgs ...string) *ControlPlane {
	t.Helper()
	cp := StartKubeAPIServer(t)
	cp.startKubeControllerManager(t)
	cp.registerDockerIOS(t)
	var args []string
	for _, a := range cp.dockerIOSArgs {
		if !strings.HasPrefix(a, "--etcd-servers=") {
			args = append(args, a)
		}
	}
	cp.dockerIOSArgs = append(args, extraArgs...)
	cp.startDockerIOS(t)
	cp.waitAPIServiceAvailable(t, 2*time.Minute)
	return cp
}

// DockerIOSDataDir is the DockerIOS apiserver's --data-dir.
func (cp *ControlPlane) DockerIOSDataDir() string { return filepath.Join(cp.Dir, "dockerios") }

// DockerIOSArgs are the arguments the DockerIOS apiserver runs with.
func (cp *ControlPlane) DockerIOSArgs() []string { return append([]string(nil), cp.dockerIOSArgs...) }

// StopDockerIOS stops the DockerIOS apiserver (SIGTERM) and waits for it
// to exit.
func (cp *ControlPlane) StopDockerIOS(t TB) { cp.dockerIOS.signal(t, syscall.SIGTERM) }

// StartDockerIOS starts the DockerIOS apiserver again, with args instead
// of those it ran with when args are given, and returns at once: whether
// it serves is the test's to check.
func (cp *ControlPlane) StartDockerIOS(t TB, args ...string) {
	t.Helper()
	if len(args) > 0 {
		cp.dockerIOSArgs = args
	}
	cp.startDockerIOS(t)
}

// DockerIOSExited is closed once the running DockerIOS apiserver exits.
func (cp *ControlPlane) DockerIOSExited() <-chan struct{} { return cp.dockerIOS.exited }

// GetDockerIOS asks the DockerIOS apiserver for path directly (not
// through kube-apiserver), anonymously, trusting the test's serving CA,
// as a kubelet's probe or a person's curl would; it returns the status
// code and body.
func (cp *ControlPlane) GetDockerIOS(t TB, path string) (int, string) {
	t.Helper()
	return cp.GetDockerIOSWithToken(t, path, "")
}

// GetDockerIOSWithToken is GetDockerIOS with a bearer token (a
// ServiceAccount's, which the apiserver has kube-apiserver review), as
// Prometheus scrapes /metrics.
func (cp *ControlPlane) GetDockerIOSWithToken(t TB, path, token string) (int, string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.servingCA.CertPEM())
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, cp.DockerIOSURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// EmbeddedEtcdURL is the client URL of the running DockerIOS apiserver's
// embedded etcd, which it records in its data directory.
func (cp *ControlPlane) EmbeddedEtcdURL(t TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cp.DockerIOSDataDir(), "embedded-etcd.url"))
	if err != nil {
		t.Fatalf("the DockerIOS apiserver records no embedded etcd: %v", err)
	}
	return strings.TrimSpace(string(data))
}

// WaitDockerIOSServed waits until kubectl sees dockerios.io through
// kube-apiserver, as StartControlPlane does.
func (cp *ControlPlane) WaitDockerIOSServed(t TB, timeout time.Duration) {
	t.Helper()
	cp.waitAPIServiceAvailable(t, timeout)
}
