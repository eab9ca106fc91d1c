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
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// agentStopTimeout bounds a graceful agent stop (the agent itself allows
// in-flight requests 5 s) before SIGKILL.
const agentStopTimeout = 6 * time.Second

// nobody is the uid the console device is given when the harness runs as
// root: the agent takes a console owned by a non-root user as a logged-in
// session, as loginwindow's chown of /dev/console is on macOS.
const nobody = 65534

// guest is one running VMI's guest: its files and its agent process. All
// fields are guarded by Harness.mu.
type guest struct {
	namespace, name string
	uid             types.UID
	machineUID      string
	node            string
	ips             []string
	addr            string // host:port the agent listens on
	dir             string

	ctx    context.Context // ends when the guest stops
	cancel context.CancelFunc
	cmd    *exec.Cmd
	exited chan struct{}
	ssh    *sshServer // nil unless the harness plays SSH
	frozen bool       // SIGSTOPped by PartitionAgents
	// degraded: the setup-done marker is (to be) absent.
	degraded bool
	// lost: its node was lost with it.
	lost bool
}

func (g *guest) alive() bool {
	if g.cmd == nil {
		return false
	}
	select {
	case <-g.exited:
		return false
	default:
		return true
	}
}

func (g *guest) file(name string) string { return filepath.Join(g.dir, name) }

// ensureGuest boots the guest of a Running VMI once: after BootDelay its
// agent starts (stage Booted), halfway through SetupDelay the console
// session starts, and at its end the image's setup-done marker appears
// (Ready). A VMI without the machine-uid label is not a DockerIOS machine
// and gets no agent.
func (h *Harness) ensureGuest(vmi *kubevirtv1.VirtualMachineInstance) {
	k := vmi.Namespace + "/" + vmi.Name
	h.mu.Lock()
	defer h.mu.Unlock()
	if g := h.guests[k]; g != nil && g.uid == vmi.UID {
		return
	}
	g := &guest{namespace: vmi.Namespace, name: vmi.Name, uid: vmi.UID, machineUID: vmi.Labels[machineUIDLabel],
		node: vmi.Status.NodeName}
	want := agentNetwork(vmi)
	for _, i := range vmi.Status.Interfaces {
		if i.IP == "" {
			continue
		}
		// A VMI Running before this harness started keeps its addresses.
		h.ips[i.IP] = true
		g.ips = append(g.ips, i.IP)
		if i.Name == want {
			g.addr = net.JoinHostPort(i.IP, strconv.Itoa(h.cfg.AgentPort))
		}
	}
	g.dir = filepath.Join(h.cfg.WorkDir, fmt.Sprintf("%s_%s_%s", vmi.Namespace, vmi.Name, string(vmi.UID)[:8]))
	g.ctx, g.cancel = context.WithCancel(h.ctx)
	h.guests[k] = g
	if g.machineUID == "" || g.addr == "" {
		return
	}
	h.wg.Add(1)
	go h.boot(g)
}

// boot plays the guest's boot, login and image setup around the real agent.
func (h *Harness) boot(g *guest) {
	defer h.wg.Done()
	if !sleep(g.ctx, h.cfg.BootDelay) {
		return
	}
	for h.isStalled(g.machineUID) {
		if !sleep(g.ctx, 100*time.Millisecond) {
			return
		}
	}
	var token []byte
	for {
		var err error
		if token, err = h.machineToken(g); err == nil {
			break
		}
		h.logf("guest %s/%s: %v (waiting)", g.namespace, g.name, err)
		if !sleep(g.ctx, 500*time.Millisecond) {
			return
		}
	}
	// Remote Login comes up with the system, beside the agent.
	h.startSSH(g)
	if err := h.startAgent(g, token); err != nil {
		h.logf("guest %s/%s: %v", g.namespace, g.name, err)
		return
	}
	// The session starts after the agent's first look, as loginwindow
	// comes up after launchd's daemons: on a loaded machine a process may
	// take longer to start than SetupDelay/2, and an agent whose first
	// look already finds a session never reports Booted.
	if !awaitListening(g.ctx, g.addr, agentStartTimeout) {
		h.logf("guest %s/%s: agent not listening on %s after %s; starting the session all the same", g.namespace, g.name, g.addr, agentStartTimeout)
	}
	if !sleep(g.ctx, h.cfg.SetupDelay/2) {
		return
	}
	if err := h.login(g); err != nil {
		h.logf("guest %s/%s: console session: %v", g.namespace, g.name, err)
	}
	if !sleep(g.ctx, h.cfg.SetupDelay-h.cfg.SetupDelay/2) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !g.degraded && g.ctx.Err() == nil {
		if err := os.WriteFile(g.file("setup-done"), nil, 0o644); err != nil {
			h.logf("guest %s/%s: setup-done: %v", g.namespace, g.name, err)
		}
	}
}

// login makes the console session: the console device owned by a
// non-root user.
func (h *Harness) login(g *guest) error {
	path := g.file("console")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		return os.Chown(path, nobody, nobody)
	}
	return nil
}

// machineToken reads the machine's agent token from its Secret (the one
// in the VMI's namespace labelled with the machine's UID): in a cluster
// the bootdisk carries it into the guest's NVRAM.
func (h *Harness) machineToken(g *guest) ([]byte, error) {
	ctx, cancel := context.WithTimeout(g.ctx, 10*time.Second)
	defer cancel()
	list, err := h.kube.CoreV1().Secrets(g.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{machineUIDLabel: g.machineUID}.String()})
	if err != nil {
		return nil, err
	}
	for _, s := range list.Items {
		if t := s.Data[tokenSecretKey]; len(t) > 0 {
			return t, nil
		}
	}
	return nil, fmt.Errorf("no Secret with %s=%s and key %q", machineUIDLabel, g.machineUID, tokenSecretKey)
}

// agentConfig is the agent's config file (agent/README.md): the token from
// a file, a fast poll, the console device and disk in the guest's
// directory, and one check on the image's setup-done marker.
type agentConfig struct {
	Listen string `json:"listen"`
	Token  struct {
		File string `json:"file"`
	} `json:"token"`
	PollInterval string `json:"pollInterval"`
	Session      struct {
		ConsoleDevice string `json:"consoleDevice"`
	} `json:"session"`
	Disk struct {
		Path  string `json:"path"`
		Floor string `json:"floor"`
	} `json:"disk"`
	Checks []agentCheck `json:"checks"`
	// OSVersionCommand prints the guest's macOS version (Config.GuestOSVersion).
	OSVersionCommand []string `json:"osVersionCommand,omitempty"`
}

type agentCheck struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Path    string `json:"path"`
	Timeout string `json:"timeout"`
}

// agentStartTimeout bounds how long a guest's boot waits for its agent to
// listen: a frozen (partitioned) agent never does.
const agentStartTimeout = 15 * time.Second

// awaitListening says whether addr accepted a connection within timeout.
// The agent listens just before its first look at the guest.
func awaitListening(ctx context.Context, addr string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return true
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return false
		}
	}
	return false
}

// startAgent writes the guest's files and starts the agent in its own
// process group (so a stop reaches it whole), killed with the harness's
// process should that die first.
func (h *Harness) startAgent(g *guest, token []byte) error {
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		return err
	}
	var cfg agentConfig
	cfg.Listen = g.addr
	cfg.Token.File = g.file("token")
	cfg.PollInterval = h.cfg.AgentPollInterval.String()
	cfg.Session.ConsoleDevice = g.file("console")
	cfg.Disk.Path, cfg.Disk.Floor = g.dir, "1"
	cfg.Checks = []agentCheck{{Name: "setup-done", Kind: "pathExists", Path: g.file("setup-done"), Timeout: "1s"}}
	if v := h.cfg.GuestOSVersion; v != "" {
		// What sw_vers -productVersion prints in the guest.
		cfg.OSVersionCommand = []string{"/bin/sh", "-c", "echo " + v}
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(g.file("token"), token, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(g.file("agent.yaml"), data, 0o600); err != nil {
		return err
	}
	logFile, err := os.OpenFile(g.file("agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(h.cfg.AgentBinary, "--config", g.file("agent.yaml"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	h.mu.Lock()
	defer h.mu.Unlock()
	if g.ctx.Err() != nil {
		logFile.Close()
		return nil // stopped meanwhile
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting the agent: %w", err)
	}
	g.cmd, g.exited = cmd, make(chan struct{})
	if h.partitioned {
		if err := freeze(cmd.Process.Pid); err != nil {
			h.logf("guest %s/%s: partitioning its new agent: %v", g.namespace, g.name, err)
		}
		g.frozen = true
	}
	h.stats.AgentsStarted++
	exited := g.exited
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		err := cmd.Wait()
		logFile.Close()
		close(exited)
		if g.ctx.Err() == nil {
			out, _ := os.ReadFile(g.file("agent.log"))
			h.logf("agent of %s/%s exited on its own (%v):\n%s", g.namespace, g.name, err, out)
		}
	}()
	h.logf("agent of %s/%s listening on %s (pid %d)", g.namespace, g.name, g.addr, cmd.Process.Pid)
	return nil
}

// stopGuest ends the guest of VMI namespace/name (if its UID is uid, or
// any when uid is ""): SIGTERM as an ACPI shutdown would, or SIGKILL for
// a crash. Its record (and addresses) stay until the VMI is gone.
func (h *Harness) stopGuest(namespace, name string, uid types.UID, kill bool) {
	h.mu.Lock()
	g := h.guests[namespace+"/"+name]
	h.mu.Unlock()
	if g != nil && (uid == "" || g.uid == uid) {
		h.stopAgent(g, kill)
	}
}

// stopAgent stops g's boot and its agent's process group and waits for
// the agent to exit.
func (h *Harness) stopAgent(g *guest, kill bool) {
	h.mu.Lock()
	g.cancel()
	cmd, exited := g.cmd, g.exited
	g.frozen = false
	h.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	pgid := -cmd.Process.Pid
	if kill {
		_ = syscall.Kill(pgid, syscall.SIGKILL)
	} else {
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		_ = syscall.Kill(pgid, syscall.SIGCONT) // a partitioned agent must run to exit
	}
	select {
	case <-exited:
	case <-time.After(agentStopTimeout):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-exited
	}
}

// vmiGone forgets the guests of VMIs namespace/name other than keep
// (every one when keep is ""): their agents are stopped and their
// addresses freed, as the VMI no longer exists.
func (h *Harness) vmiGone(namespace, name string, keep types.UID) {
	k := namespace + "/" + name
	h.mu.Lock()
	g := h.guests[k]
	if g != nil && (keep == "" || g.uid != keep) {
		delete(h.guests, k)
	} else {
		g = nil
	}
	for uid, at := range h.seenVMIs {
		if at == k && uid != keep {
			delete(h.seenVMIs, uid)
			delete(h.restartAt, uid)
			h.stats.VMIsDeleted++
		}
	}
	h.mu.Unlock()
	if g == nil {
		return
	}
	h.stopAgent(g, false)
	h.releaseIPs(g.ips)
	if g.dir != "" {
		_ = os.RemoveAll(g.dir)
	}
}

// allocIPs takes n addresses in Config.GuestNetwork's /16 that no other VMI
// has and that nothing listens on at the agent port (nor at the SSH port,
// when the guests serve SSH).
func (h *Harness) allocIPs(n int) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	const space = 256 * 254
	var out []string
	for tries := 0; len(out) < n && tries < space; tries++ {
		i := h.nextIP % space
		h.nextIP++
		ip := fmt.Sprintf("%s.%d.%d", h.cfg.GuestNetwork, i/254, i%254+1)
		if h.ips[ip] {
			continue
		}
		if !portFree(ip, h.cfg.AgentPort) || (h.cfg.SSH.enabled() && !portFree(ip, h.cfg.SSH.Port)) {
			continue // someone else's (another test process's harness)
		}
		h.ips[ip] = true
		out = append(out, ip)
	}
	if len(out) < n {
		for _, ip := range out {
			delete(h.ips, ip)
		}
		return nil, fmt.Errorf("no free address in %s.0.0/16", h.cfg.GuestNetwork)
	}
	return out, nil
}

// portFree says whether nothing listens on ip:port.
func portFree(ip string, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func (h *Harness) releaseIPs(ips []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ip := range ips {
		delete(h.ips, ip)
	}
}

func (h *Harness) isStalled(machineUID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stalled[machineUID]
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (h *Harness) guest(namespace, name string) (*guest, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.guests[namespace+"/"+name]
	if g == nil {
		return nil, fmt.Errorf("harness: no guest for VirtualMachineInstance %s/%s", namespace, name)
	}
	return g, nil
}

// AgentOf returns the address of the agent of VMI namespace/name, and
// whether its process is running (it may be partitioned).
func (h *Harness) AgentOf(namespace, name string) (addr string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.guests[namespace+"/"+name]
	if g == nil || !g.alive() {
		return "", false
	}
	return g.addr, true
}

// StallBoot makes the guests of the machine with UID machineUID hang
// before their agent starts, while set: the VMI is Running but the agent
// never answers, as with a guest stuck at boot (a bad bootdisk, a kernel
// panic at boot, a wedged loginwindow). It affects boots that have not
// yet started their agent.
func (h *Harness) StallBoot(machineUID string, stall bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if stall {
		h.stalled[machineUID] = true
	} else {
		delete(h.stalled, machineUID)
	}
}

// HangGuest plays a guest that hangs while its VM keeps running (a wedged
// kernel, a spinning WindowServer): the agent of VMI namespace/name is
// stopped (SIGSTOP), so connections are accepted by the kernel and never
// answered, and the VMI stays Running with nothing else wrong. Unlike
// PartitionAgents, only this guest is affected.
func (h *Harness) HangGuest(namespace, name string) error {
	g, err := h.guest(namespace, name)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !g.alive() {
		return fmt.Errorf("harness: the agent of %s/%s is not running", namespace, name)
	}
	if err := freeze(g.cmd.Process.Pid); err != nil {
		return err
	}
	g.frozen = true
	return nil
}

// Unschedulable makes the VMIs of the machine with UID machineUID find no
// node while set: they stay Scheduling with PodScheduled=False reason
// Unschedulable, as on a cluster where no node offers what the VM asks
// for (no KVM, no free GPU).
func (h *Harness) Unschedulable(machineUID string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if on {
		h.unschedulable[machineUID] = true
	} else {
		delete(h.unschedulable, machineUID)
	}
}

func (h *Harness) isUnschedulable(machineUID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unschedulable[machineUID]
}

// DegradeGuest removes the image's setup-done marker from the guest of VMI
// namespace/name, so its real agent's check fails and, once the machine
// has been Ready, it reports Degraded (reason CheckFailed), as a guest
// whose runner or tooling broke while the OS stays up would. The VMI keeps
// Running.
func (h *Harness) DegradeGuest(namespace, name string) error {
	g, err := h.guest(namespace, name)
	if err != nil {
		return err
	}
	h.mu.Lock()
	g.degraded = true
	h.mu.Unlock()
	if err := os.Remove(g.file("setup-done")); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// RepairGuest puts the setup-done marker back: the agent reports Ready
// again (Degraded recovers).
func (h *Harness) RepairGuest(namespace, name string) error {
	g, err := h.guest(namespace, name)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	g.degraded = false
	if g.cmd == nil {
		return nil // the boot writes it
	}
	return os.WriteFile(g.file("setup-done"), nil, 0o644)
}

// CrashGuest plays a guest or virt-launcher crash (a macOS kernel panic
// that QEMU reports, QEMU killed by the OOM killer): the agent is killed
// (SIGKILL) and the VMI becomes Failed with its Ready condition False
// (reason GuestNotRunning), as virt-handler reports a domain that is gone.
// If the VM should still run, KubeVirt replaces the VMI after
// RestartDelay.
func (h *Harness) CrashGuest(namespace, name string) error {
	g, err := h.guest(namespace, name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	obj, err := h.dyn.Resource(VirtualMachineInstanceGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	vmi, err := fromUnstructured[kubevirtv1.VirtualMachineInstance](obj)
	if err != nil {
		return err
	}
	if vmi.UID != g.uid {
		return fmt.Errorf("harness: VirtualMachineInstance %s/%s was replaced", namespace, name)
	}
	return h.failVMI(ctx, vmi, "", corev1.ConditionFalse, kubevirtv1.GuestNotRunningReason, "Guest VM is not reported as running")
}

// PartitionAgents makes every agent unreachable while on (agents started
// meanwhile included), as a fault of the agent network would, while their
// VMIs keep Running and the guests stay healthy: the agent processes are
// stopped (SIGSTOP), so a connection is accepted by the kernel but never
// answered, and callers time out exactly as across a black-holed path.
// Off continues them (SIGCONT); they answer again with the same token and
// address.
func (h *Harness) PartitionAgents(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.partitioned = on
	for _, g := range h.guests {
		if !g.alive() || g.frozen == on {
			continue
		}
		change := thaw
		if on {
			change = freeze
		}
		if err := change(g.cmd.Process.Pid); err != nil {
			h.logf("agent of %s/%s: %v", g.namespace, g.name, err)
			continue
		}
		g.frozen = on
	}
}
