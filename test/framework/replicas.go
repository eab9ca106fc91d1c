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
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StartKubeAPIServerForDockerIOS starts etcd and kube-apiserver with
// DockerIOS registered as StartControlPlane registers it (its RBAC, the
// ExternalName Service, the APIService trusting the test's serving CA),
// but runs no DockerIOS apiserver: the test starts its own, as many as it
// wants (DockerIOSReplicaArgs), and routes DockerIOSPort to them.
// Everything stops when the test ends.
func StartKubeAPIServerForDockerIOS(t TB) *ControlPlane {
	t.Helper()
	cp := StartKubeAPIServer(t)
	cp.registerDockerIOS(t)
	return cp
}

// DockerIOSPort is the local port the APIService routes dockerios.io to.
func (cp *ControlPlane) DockerIOSPort() int {
	u, err := url.Parse(cp.DockerIOSURL)
	if err != nil {
		panic(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		panic(err)
	}
	return port
}

// DockerIOSReplicaArgs returns the arguments a DockerIOS apiserver runs
// with behind this control plane (its kubeconfigs, its serving
// certificate), serving on port with dataDir as its data directory, and
// without --etcd-servers: the caller names its etcd (and its TLS files).
func (cp *ControlPlane) DockerIOSReplicaArgs(port int, dataDir string) []string {
	var args []string
	for _, a := range cp.dockerIOSArgs {
		if strings.HasPrefix(a, "--etcd-servers=") || strings.HasPrefix(a, "--data-dir=") || strings.HasPrefix(a, "--secure-port=") {
			continue
		}
		args = append(args, a)
	}
	return append(args, "--data-dir="+dataDir, fmt.Sprintf("--secure-port=%d", port))
}

// WaitAPIServiceAvailable waits until kubectl sees dockerios.io through
// kube-apiserver.
func (cp *ControlPlane) WaitAPIServiceAvailable(t TB, timeout time.Duration) {
	t.Helper()
	cp.waitAPIServiceAvailable(t, timeout)
}

// EtcdBinary is the etcd the control plane runs ($DOCKERIOS_ETCD_BIN, or
// bin/etcd), for tests that run more of it.
func EtcdBinary(t TB) string {
	t.Helper()
	return binaryFromEnv(t, EtcdBinEnv, "etcd")
}

// Process is a server a test runs beside the control plane. It stops
// (SIGTERM) with the control plane when the test ends, if it still runs,
// and its output is logged then if the test failed.
type Process struct{ p *process }

// StartProcess starts bin with args beside the control plane.
func (cp *ControlPlane) StartProcess(t TB, name, bin string, args ...string) *Process {
	t.Helper()
	return &Process{cp.start(t, name, bin, args...)}
}

// Signal sends sig and waits for the process to exit, killing it (and
// failing the test) if it has not within a minute.
func (p *Process) Signal(t TB, sig syscall.Signal) {
	t.Helper()
	p.p.signal(t, sig)
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.p.exited }

// Output is what the process has printed so far.
func (p *Process) Output() string { return p.p.output.String() }

// PID is the process's id.
func (p *Process) PID() int { return p.p.PID() }
