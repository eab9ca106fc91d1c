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

// Package node installs DockerIOS's release on a real Kubernetes node —
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd
// and a kubelet, all built here — and proves it as a cluster administrator
// would meet it: the images from hack/images.sh, the manifest from
// hack/release.sh, pods under PodSecurity restricted, the APIService
// through the aggregation layer, leader election, the launcher webhook,
// a pool and a claim, the bootdisk Job run for real, an upgrade and an
// uninstall.
//
// The node keeps to itself. The test binary runs itself again inside new
// PID, network and mount namespaces (unshare): every process it starts
// (and every container) lives in the PID namespace, so all of them die
// with it, pass or fail; the network — pod IPs, the CNI bridge, the node's
// and Services' addresses, routes — exists only in the network namespace;
// the mounts kubelet and containerd make stay in the mount namespace. The
// kernel settings kubelet would write (vm.overcommit_memory, kernel.panic
// and the like) are bind-mounted over, inside that mount namespace, by
// files holding their current values, so the host's stay as they are. The
// only host state the node touches is its own cgroup directory in each
// cgroup v1 hierarchy, which the outer process removes when the inner one
// has exited, and its temporary directory.
package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	// insideEnv marks the test binary running inside the node's
	// namespaces; its value is the node's working directory.
	insideEnv = "DOCKERIOS_NODE_INSIDE"
	// cgroupEnv names the node's cgroup root (one directory in each
	// hierarchy), chosen by the outer process, which removes it.
	cgroupEnv = "DOCKERIOS_NODE_CGROUP"
	// RequireEnv=1 makes missing prerequisites a failure rather than a
	// skip (hack/test.sh sets it).
	RequireEnv = "DOCKERIOS_REQUIRE_NODE"
)

// skipReason is why this machine cannot run the node test ("" if it can).
var skipReason string

func TestMain(m *testing.M) {
	if dir := os.Getenv(insideEnv); dir != "" {
		os.Exit(inside(m, dir))
	}
	os.Exit(outside(m))
}

// outside checks the prerequisites, runs the test binary again inside the
// node's namespaces, and removes what only the outside can: the cgroups
// and the working directory.
func outside(m *testing.M) (code int) {
	if skipReason = prerequisites(); skipReason != "" {
		if os.Getenv(RequireEnv) == "1" {
			fmt.Fprintf(os.Stderr, "node test: %s (%s=1)\n", skipReason, RequireEnv)
			return 1
		}
		return m.Run() // every test skips, saying why
	}
	dir, err := os.MkdirTemp("", "dockerios-node-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cgroup := filepath.Base(dir)
	hostSysctls, err := readSysctls()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		// What the node must leave as it found it, checked whether the
		// tests passed or not.
		if err := removeCgroups(cgroup); err != nil {
			fmt.Fprintf(os.Stderr, "node test: %v\n", err)
			code = 1
		}
		if now, err := readSysctls(); err != nil || now != hostSysctls {
			fmt.Fprintf(os.Stderr, "node test: the host's kernel settings changed:\n%s\nwere:\n%s\n%v\n", now, hostSysctls, err)
			code = 1
		}
		_ = os.RemoveAll(dir)
	}()
	// --propagation slave: mounts made inside never reach the host.
	// --kill-child: if this process dies, so does the namespace's init.
	args := append([]string{"--pid", "--fork", "--kill-child", "--mount-proc", "--net", "--mount", "--propagation", "slave", "--", os.Args[0]}, os.Args[1:]...)
	cmd := exec.Command("unshare", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), insideEnv+"="+dir, cgroupEnv+"="+cgroup)
	if err := cmd.Run(); err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "node test: unshare: %v\n", err)
		return 1
	}
	return 0
}

// readSysctls reads the kernel settings kubelet would write, as the host
// has them.
func readSysctls() (string, error) {
	var b strings.Builder
	for _, s := range shieldedSysctls {
		v, err := os.ReadFile("/proc/sys/" + s)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s=%s", s, v)
	}
	return b.String(), nil
}

// prerequisites says what this machine lacks to run a node ("" if
// nothing): root, and the Debian packages and builds hack/test.sh installs.
func prerequisites() string {
	if os.Geteuid() != 0 {
		return "the node test runs as root (namespaces, cgroups, containerd)"
	}
	for _, tool := range []string{"unshare", "ip", "mount", "containerd", "containerd-shim-runc-v2", "runc", "ctr"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("%s is not installed (hack/install-debian-packages.sh)", tool)
		}
	}
	if _, err := os.Stat(cniBinDir + "/bridge"); err != nil {
		return "the CNI plugins are not installed (containernetworking-plugins)"
	}
	for env, name := range binaries {
		if _, err := os.Stat(binaryPath(env, name)); err != nil {
			return fmt.Sprintf("%s is missing (hack/build-control-plane.sh; or set %s)", name, env)
		}
	}
	for _, f := range []string{releaseManifest(), imagesList()} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Sprintf("%s is missing (hack/images.sh and hack/release.sh)", f)
		}
	}
	return ""
}

// inside runs the tests in the node's namespaces, after giving them a
// loopback, the node's addresses and the shielded kernel settings.
func inside(m *testing.M, dir string) int {
	if err := prepareNamespaces(dir); err != nil {
		fmt.Fprintf(os.Stderr, "node test: preparing the namespaces: %v\n", err)
		return 1
	}
	return m.Run()
}

// The addresses of the node's network namespace. None is routed anywhere
// but inside it.
const (
	// NodeIP is the kubelet's address (the node's InternalIP).
	NodeIP = "10.123.0.1"
	// KubernetesServiceIP is the kubernetes Service's ClusterIP. Without
	// kube-proxy, pods reach kube-apiserver through it because the node's
	// namespace holds it as a local address and kube-apiserver listens on
	// every address, on the Service's port.
	KubernetesServiceIP = "10.96.0.1"
	serviceCIDR         = "10.96.0.0/24"
	podCIDR             = "10.88.0.0/16"
	// agentCIDR is where the harness's guests (real agent processes)
	// listen: a local route makes every address of it bindable, and pods
	// reach it through the bridge's gateway.
	agentCIDR = "10.124.0.0/16"
)

// shieldedSysctls are the kernel settings kubelet's container manager
// writes (setupKernelTunables).
var shieldedSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

func prepareNamespaces(dir string) error {
	run := func(args ...string) error {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	steps := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", NodeIP + "/32", "dev", "lo"},
		{"ip", "addr", "add", KubernetesServiceIP + "/32", "dev", "lo"},
		{"ip", "route", "add", "local", agentCIDR, "dev", "lo"},
		// kubelet links container logs under /var/log/containers; a tmpfs
		// keeps them (and anything else written there) off the host.
		{"mount", "-t", "tmpfs", "-o", "mode=0755", "node-var-log", "/var/log"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			return err
		}
	}
	shield := filepath.Join(dir, "sysctl")
	if err := os.MkdirAll(shield, 0o755); err != nil {
		return err
	}
	for _, s := range shieldedSysctls {
		current, err := os.ReadFile("/proc/sys/" + s)
		if err != nil {
			return err
		}
		f := filepath.Join(shield, strings.ReplaceAll(s, "/", "_"))
		if err := os.WriteFile(f, current, 0o644); err != nil {
			return err
		}
		if err := run("mount", "--bind", f, "/proc/sys/"+s); err != nil {
			return err
		}
	}
	return nil
}

// cgroupHierarchies are the cgroup v1 hierarchies mounted under
// /sys/fs/cgroup (one directory each; cgroup v2's unified tree excluded:
// kubelet's cgroupfs driver on a v1 host uses the v1 ones).
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if !e.IsDir() || e.Name() == "unified" {
			continue
		}
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err != nil {
			continue
		}
		// Co-mounted controllers appear as symlinks (cpu -> cpu,cpuacct):
		// IsDir is false for those, so each hierarchy is listed once.
		out = append(out, p)
	}
	return out, nil
}

// removeCgroups removes the node's cgroup root from every hierarchy,
// children first, waiting briefly for the kernel to let go of cgroups
// whose last process just died.
func removeCgroups(name string) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	// runc also makes the containers' cgroups in the hybrid host's cgroup
	// v2 tree (unified), under the same root name.
	hierarchies = append(hierarchies, "/sys/fs/cgroup/unified")
	var left []string
	for _, h := range hierarchies {
		root := filepath.Join(h, name)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for try := 0; try < 50; try++ {
				if err = os.Remove(dirs[i]); err == nil || os.IsNotExist(err) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				left = append(left, dirs[i])
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("cgroups left behind: %s", strings.Join(left, ", "))
	}
	return nil
}
