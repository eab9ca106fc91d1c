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
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/sidecar-hook/annotations"
	"github.com/dockerios/dockerios/sidecar-hook/internal/domaincheck"
)

// RequireLibvirtEnv, when set (hack/test.sh sets it after installing the
// packages), turns a missing libvirt or QEMU into a failure: CI must never
// pass by skipping this test.
const RequireLibvirtEnv = "DOCKERIOS_REQUIRE_LIBVIRT"

// The machine, class and identity the fixture domain was derived for; the
// test checks the fixture still matches what the controller makes of them.
const (
	fixtureDomain   = "virt-launcher-domain-mac-1.xml"
	domainName      = "macs_mac-1"
	vmiUID          = "9d2e4f6a-1b3c-4d5e-8f7a-0b1c2d3e4f5a"
	identitySerial  = "C02XK0ZZJG5J"
	identityUUID    = "0A9B8C7D-6E5F-4A3B-8C1D-0E9F8A7B6C5D"
	identityMAC     = "3c:22:fb:12:34:56"
	agentNetwork    = "dockerios-agent"
	launcherPrivate = "/var/run/kubevirt-private"
	launcherOVMF    = "/usr/share/edk2/ovmf"
)

// TestThroughLibvirtAndQEMU sends the domain virt-launcher would define for
// a DockerIOS machine through the real hook binary, then has Debian's
// libvirt define it and start it on QEMU (TCG), and checks what QEMU was
// started with and what it built.
func TestThroughLibvirtAndQEMU(t *testing.T) {
	lv := startLibvirt(t)
	vmi, vmiJSON := controllerVMI(t)
	checkFixtureMatchesVMI(t, vmi)

	sc := start(t, "")
	conn := sc.dial(t)

	cases := []struct {
		name string
		// bus overrides the controller's system-disk-bus annotation.
		bus string
		// drivers QEMU may realise the system disk as.
		drivers []string
	}{
		// What the controller asks for with a default class: KubeVirt
		// already put the disk on SATA, so the hook only adds the SMC.
		{name: "class default", drivers: []string{"ide-hd"}},
		// The hook's own move (what nvme needs in production), shown to
		// produce a disk libvirt and QEMU accept.
		{name: "moved to virtio", bus: annotations.BusVirtio, drivers: []string{"virtio-blk-pci", "virtio-blk-pci-non-transitional"}},
		{name: "moved to nvme", bus: annotations.BusNVMe, drivers: []string{"nvme", "nvme-ns"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vmiJSON := vmiJSON
			wantBus := vmi.Annotations[annotations.SystemDiskBus]
			if tc.bus != "" {
				vmiJSON = withAnnotation(t, vmi, annotations.SystemDiskBus, tc.bus)
				wantBus = tc.bus
			}
			if tc.bus == "" && wantBus != string(v1alpha1.DefaultSystemDiskBus) {
				t.Fatalf("the controller asked for bus %q, want the class default %q", wantBus, v1alpha1.DefaultSystemDiskBus)
			}
			out, err := onDefineDomain(t, conn, "v1alpha3", lv.localise(t, fixture(t, fixtureDomain)), vmiJSON)
			if err != nil {
				t.Fatalf("OnDefineDomain: %v", err)
			}
			if disk := domaincheck.Disk(mustParse(t, out), "ua-system"); disk == nil || disk.Target == nil || disk.Target.Bus != wantBus {
				t.Fatalf("the hook left the system disk at %+v, want bus %s", disk, wantBus)
			}

			xmlFile := lv.writeFile(t, "domain-"+strings.ReplaceAll(tc.name, " ", "-")+".xml", out)
			defineOut, err := lv.virsh(t, "define", xmlFile)
			if wantBus == annotations.BusNVMe && !lv.atLeast(11, 5) {
				// libvirt learned the emulated NVMe bus in 11.5.0; an older
				// one must refuse the domain at define, naming the bus, as
				// a launcher older than that would.
				if err == nil {
					lv.virsh(t, "undefine", "--nvram", domainName)
					t.Fatalf("libvirt %s accepted bus='nvme', which it does not know", lv.version)
				}
				if !strings.Contains(defineOut, "nvme") {
					t.Fatalf("libvirt %s refused the nvme domain without naming the bus: %s", lv.version, defineOut)
				}
				t.Logf("libvirt %s refuses bus='nvme' as expected: %s", lv.version, strings.TrimSpace(defineOut))
				return
			}
			if err != nil {
				t.Fatalf("virsh define: %v\n%s", err, defineOut)
			}
			defer lv.virsh(t, "undefine", "--nvram", domainName)
			if out, err := lv.virsh(t, "start", domainName); err != nil {
				t.Fatalf("virsh start: %v\n%s\nQEMU log:\n%s", err, out, lv.qemuLog())
			}
			defer lv.virsh(t, "destroy", domainName)

			args := lv.qemuArgs(t)
			checkQEMUArgs(t, args, lv)
			if got := deviceDriver(t, args, "ua-system"); !contains(tc.drivers, got) {
				t.Errorf("system disk realised as %q, want one of %v (bus %s)", got, tc.drivers, wantBus)
			}

			// The monitor shows what QEMU built from those arguments.
			qtree, err := lv.virsh(t, "qemu-monitor-command", domainName, "--hmp", "info qtree")
			if err != nil {
				t.Fatalf("info qtree: %v\n%s", err, qtree)
			}
			if !strings.Contains(qtree, "dev: isa-applesmc") || !strings.Contains(qtree, `osk = "`+testOSK+`"`) {
				t.Errorf("QEMU has no isa-applesmc device with the OSK:\n%s", qtree)
			}
			if !regexp.MustCompile(`dev: (` + strings.Join(tc.drivers, "|") + `), id "ua-system"`).MatchString(qtree) {
				t.Errorf("QEMU has no %v device for the system disk:\n%s", tc.drivers, qtree)
			}
			if wantBus == annotations.BusSATA && !strings.Contains(qtree, "dev: ich9-ahci") {
				t.Errorf("no AHCI (SATA) controller in QEMU:\n%s", qtree)
			}

			// Started is not enough: a bad device can make QEMU quit once the
			// guest runs. Give OVMF a moment under TCG.
			time.Sleep(2 * time.Second)
			if state, err := lv.virsh(t, "domstate", domainName); err != nil || strings.TrimSpace(state) != "running" {
				t.Errorf("domain state %q (%v) two seconds after start\nQEMU log:\n%s", strings.TrimSpace(state), err, lv.qemuLog())
			}
		})
	}
}

// checkQEMUArgs checks the arguments every case shares: the SMC device with
// the key, SMBIOS type 2 beside libvirt's type 1 carrying the identity, and
// the class's machine, firmware and CPU.
func checkQEMUArgs(t *testing.T, args []string, lv *libvirt) {
	t.Helper()
	if n := domaincheck.CountPair(args, "-device", func(v string) bool { return v == "isa-applesmc,osk="+testOSK }); n != 1 {
		t.Errorf("-device isa-applesmc,osk=<the %d-character OSK> given %d times; QEMU args:\n%s", len(testOSK), n, strings.Join(args, "\n"))
	}
	if n := domaincheck.CountPair(args, "-smbios", func(v string) bool { return v == "type=2" }); n != 1 {
		t.Errorf("-smbios type=2 given %d times", n)
	}
	type1 := func(v string) bool {
		return strings.HasPrefix(v, "type=1,") && strings.Contains(v, ",serial="+identitySerial) &&
			strings.Contains(v, ",uuid="+strings.ToLower(identityUUID))
	}
	if n := domaincheck.CountPair(args, "-smbios", type1); n != 1 {
		t.Errorf("-smbios type=1 with serial %s and uuid %s given %d times", identitySerial, strings.ToLower(identityUUID), n)
	}
	if n := domaincheck.CountPair(args, "-machine", func(v string) bool { return strings.HasPrefix(v, "pc-q35-") }); n != 1 {
		t.Errorf("q35 machine given %d times", n)
	}
	if n := domaincheck.CountPair(args, "-cpu", func(v string) bool { return v == "Penryn" || strings.HasPrefix(v, "Penryn,") }); n != 1 {
		t.Errorf("-cpu Penryn given %d times", n)
	}
	if n := domaincheck.CountPair(args, "-accel", func(v string) bool { return v == "tcg" }); n != 1 {
		t.Errorf("-accel tcg given %d times", n)
	}
	if !strings.Contains(strings.Join(args, " "), filepath.Join(lv.dir, "ovmf", "OVMF_CODE.secboot.fd")) {
		t.Errorf("QEMU was not given the OVMF code as pflash")
	}
}

// deviceDriver returns the driver of the -device whose id is id; libvirt
// writes -device as JSON for current QEMUs.
func deviceDriver(t *testing.T, args []string, id string) string {
	t.Helper()
	for i := 0; i+1 < len(args); i++ {
		if args[i] != "-device" || !strings.HasPrefix(args[i+1], "{") {
			continue
		}
		var dev struct{ Driver, ID string }
		if err := json.Unmarshal([]byte(args[i+1]), &dev); err != nil {
			t.Fatalf("-device %s: %v", args[i+1], err)
		}
		if dev.ID == id {
			return dev.Driver
		}
	}
	t.Fatalf("no -device with id %s in QEMU's arguments:\n%s", id, strings.Join(args, "\n"))
	return ""
}

// controllerVMI is the VirtualMachineInstance KubeVirt makes from the
// VirtualMachine the DockerIOS controller makes for machine macs/mac-1 of a
// default class with an agent network, and its JSON as virt-launcher sends
// it to the hook.
func controllerVMI(t *testing.T) (*kubevirtv1.VirtualMachineInstance, []byte) {
	t.Helper()
	m := &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: "mac-1", Namespace: "macs", UID: "6f1c2a4e-8b3d-4c5e-9f7a-1b2c3d4e5f60"}}
	class := &v1alpha1.MacOSMachineClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.MacOSMachineClassSpec{AgentNetwork: &v1alpha1.AgentNetworkSpec{NetworkName: agentNetwork}}}
	v1alpha1.SetDefaults_MacOSMachineClassSpec(&class.Spec)
	id := &v1alpha1.MacOSIdentity{ObjectMeta: metav1.ObjectMeta{Name: "id-1"},
		Spec: v1alpha1.MacOSIdentitySpec{SerialNumber: identitySerial, SystemUUID: identityUUID, MACAddress: identityMAC}}
	vm, err := machine.VirtualMachine(m, class, id, machine.Settings{HookSidecarImage: "registry.example/dockerios/sidecar-hook:test",
		OSKSecretName: "dockerios-osk", TerminationGracePeriodSeconds: 180}, true)
	if err != nil {
		t.Fatal(err)
	}
	tpl := vm.Spec.Template
	vmi := &kubevirtv1.VirtualMachineInstance{
		TypeMeta: metav1.TypeMeta{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: vm.Name, Namespace: vm.Namespace, UID: vmiUID,
			Labels: tpl.ObjectMeta.Labels, Annotations: tpl.ObjectMeta.Annotations},
		Spec: tpl.Spec,
	}
	b, err := json.Marshal(vmi)
	if err != nil {
		t.Fatal(err)
	}
	return vmi, b
}

func withAnnotation(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance, key, value string) []byte {
	t.Helper()
	c := vmi.DeepCopy()
	c.Annotations[key] = value
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkFixtureMatchesVMI fails when the controller's VM and the derived
// fixture drift apart, which would make this test exercise a domain
// virt-launcher would never send for our VMs.
func checkFixtureMatchesVMI(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance) {
	t.Helper()
	dom := mustParse(t, fixture(t, fixtureDomain))
	if want := vmi.Namespace + "_" + vmi.Name; dom.Name != want {
		t.Errorf("fixture domain name %q, virt-launcher names it %q", dom.Name, want)
	}
	if dom.OS == nil || dom.OS.Type == nil || dom.OS.Type.Machine != vmi.Spec.Domain.Machine.Type {
		t.Errorf("fixture machine type is not the VMI's %q", vmi.Spec.Domain.Machine.Type)
	}
	fw := vmi.Spec.Domain.Firmware
	if fw.Bootloader == nil || fw.Bootloader.EFI == nil || fw.Bootloader.EFI.SecureBoot == nil || *fw.Bootloader.EFI.SecureBoot {
		t.Errorf("the VMI is not EFI without secure boot: %+v", fw.Bootloader)
	}
	if dom.OS.Loader == nil || dom.OS.Loader.Secure != "no" || dom.OS.NVRam == nil {
		t.Errorf("fixture is not EFI without secure boot: %+v", dom.OS.Loader)
	}
	entries := map[string]string{}
	for _, s := range dom.SysInfo {
		if s.SMBIOS != nil && s.SMBIOS.System != nil {
			for _, e := range s.SMBIOS.System.Entry {
				entries[e.Name] = e.Value
			}
		}
	}
	if entries["uuid"] != string(fw.UUID) || entries["serial"] != fw.Serial {
		t.Errorf("fixture SMBIOS system uuid/serial %q/%q, the VMI's firmware %q/%q", entries["uuid"], entries["serial"], fw.UUID, fw.Serial)
	}
	if dom.CPU == nil || dom.CPU.Model == nil || dom.CPU.Model.Value != vmi.Spec.Domain.CPU.Model ||
		dom.CPU.Topology == nil || uint32(dom.CPU.Topology.Cores) != vmi.Spec.Domain.CPU.Cores {
		t.Errorf("fixture CPU %+v is not the VMI's %+v", dom.CPU, vmi.Spec.Domain.CPU)
	}
	if mem := vmi.Spec.Domain.Memory.Guest.Value(); dom.Memory == nil || int64(dom.Memory.Value) != mem || dom.Memory.Unit != "b" {
		t.Errorf("fixture memory %+v, the VMI's guest memory %d bytes", dom.Memory, mem)
	}
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		disk := domaincheck.Disk(dom, "ua-"+d.Name)
		if disk == nil || d.Disk == nil || disk.Target == nil || disk.Target.Bus != string(d.Disk.Bus) {
			t.Errorf("fixture disk ua-%s %+v, the VMI's %+v", d.Name, disk, d.DiskDevice)
			continue
		}
		if d.BootOrder == nil || disk.Boot == nil || disk.Boot.Order != *d.BootOrder {
			t.Errorf("fixture disk ua-%s boot order differs from the VMI's", d.Name)
		}
	}
	ifaces := map[string]libvirtxml.DomainInterface{}
	for _, i := range dom.Devices.Interfaces {
		if i.Alias != nil {
			ifaces[i.Alias.Name] = i
		}
	}
	if len(ifaces) != len(vmi.Spec.Domain.Devices.Interfaces) {
		t.Errorf("fixture has %d interfaces, the VMI %d", len(ifaces), len(vmi.Spec.Domain.Devices.Interfaces))
	}
	for _, vi := range vmi.Spec.Domain.Devices.Interfaces {
		i, ok := ifaces["ua-"+vi.Name]
		if !ok || i.Model == nil || i.Model.Type != vi.Model {
			t.Errorf("fixture interface ua-%s missing or not model %s", vi.Name, vi.Model)
			continue
		}
		if vi.MacAddress != "" && (i.MAC == nil || i.MAC.Address != vi.MacAddress) {
			t.Errorf("fixture interface ua-%s MAC %+v, the VMI's %s", vi.Name, i.MAC, vi.MacAddress)
		}
	}
	if ifaces["ua-"+machine.AgentInterface].MAC == nil || ifaces["ua-"+machine.AgentInterface].MAC.Address != identityMAC {
		t.Errorf("the agent interface does not carry the identity's MAC %s", identityMAC)
	}
}

func mustParse(t *testing.T, doc []byte) *libvirtxml.Domain {
	t.Helper()
	d, err := domaincheck.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// libvirt is a private libvirtd in session mode: its sockets, state, logs
// and the guests' files all live under dir, so concurrent runs and the
// machine's own libvirt (if any) never meet.
type libvirt struct {
	dir     string
	env     []string
	bins    map[string]string
	cred    *syscall.Credential
	uid     int
	version string
	daemon  *exec.Cmd
}

// unprivilegedUID runs libvirt when the test runs as root: libvirtd as root
// is the system daemon, with fixed paths under /run and /var/lib shared
// with every other run.
const unprivilegedUID = 65534

func startLibvirt(t *testing.T) *libvirt {
	t.Helper()
	path := os.Getenv("PATH") + ":/usr/sbin:/sbin"
	var missing []string
	bins := map[string]string{}
	for _, b := range []string{"libvirtd", "virsh", "qemu-system-x86_64", "qemu-img"} {
		p, err := lookPath(b, path)
		if err != nil {
			missing = append(missing, b)
		}
		bins[b] = p
	}
	ovmfCode, ovmfVars := "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"
	for _, f := range []string{ovmfCode, ovmfVars} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("libvirt/QEMU test needs %s: install Debian's libvirt-daemon, libvirt-clients, qemu-system-x86, qemu-utils and ovmf (hack/install-debian-packages.sh)",
			strings.Join(missing, ", "))
		if os.Getenv(RequireLibvirtEnv) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}

	// Short: libvirt's and QEMU's unix sockets live below it.
	dir, err := os.MkdirTemp("", "dios-lv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	lv := &libvirt{dir: dir, bins: bins, uid: os.Geteuid()}
	lv.env = []string{"PATH=" + path, "LC_ALL=C", "HOME=" + filepath.Join(dir, "home"),
		"XDG_RUNTIME_DIR=" + filepath.Join(dir, "run"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"XDG_CACHE_HOME=" + filepath.Join(dir, "cache"), "XDG_DATA_HOME=" + filepath.Join(dir, "data"),
		// virsh must talk to our daemon, never start one of its own.
		"LIBVIRT_AUTOSTART=0"}
	for _, d := range []string{"home", "run", "config/libvirt", "cache", "data", "ovmf",
		"kv/vmi-disks/bootdisk", "kv/vmi-disks/system", "kv/libvirt/qemu/nvram", "kv/" + vmiUID} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The launcher's OVMF file names, with Debian's 4M builds (the size
	// CentOS Stream's edk2-ovmf ships) behind them.
	copyFile(t, ovmfCode, filepath.Join(dir, "ovmf", "OVMF_CODE.secboot.fd"))
	copyFile(t, ovmfVars, filepath.Join(dir, "ovmf", "OVMF_VARS.fd"))
	for _, disk := range []string{"bootdisk", "system"} {
		if out, err := exec.Command(bins["qemu-img"], "create", "-q", "-f", "raw",
			filepath.Join(dir, "kv", "vmi-disks", disk, "disk.img"), "4M").CombinedOutput(); err != nil {
			t.Fatalf("qemu-img: %v\n%s", err, out)
		}
	}
	// QEMU's output to a file: the default sends it through virtlogd, one
	// more daemon to run.
	lv.writeFile(t, "config/libvirt/qemu.conf", []byte("stdio_handler = \"file\"\nsecurity_driver = \"none\"\n"))
	lv.writeFile(t, "libvirtd.conf", []byte(fmt.Sprintf("log_outputs = \"3:file:%s\"\n", filepath.Join(dir, "libvirtd.log"))))

	if lv.uid == 0 {
		lv.uid = unprivilegedUID
		lv.cred = &syscall.Credential{Uid: unprivilegedUID, Gid: unprivilegedUID}
		if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, unprivilegedUID, unprivilegedUID)
		}); err != nil {
			t.Fatal(err)
		}
	}

	out, err := exec.Command(bins["libvirtd"], "--version").Output()
	if err != nil {
		t.Fatalf("libvirtd --version: %v", err)
	}
	lv.version = strings.TrimSpace(string(out[bytes.LastIndexByte(out, ' ')+1:]))

	daemonLog, err := os.Create(filepath.Join(dir, "libvirtd.out"))
	if err != nil {
		t.Fatal(err)
	}
	lv.daemon = exec.Command(bins["libvirtd"], "-f", filepath.Join(dir, "libvirtd.conf"))
	lv.daemon.Env, lv.daemon.Dir = lv.env, dir
	lv.daemon.Stdout, lv.daemon.Stderr = daemonLog, daemonLog
	lv.daemon.SysProcAttr = &syscall.SysProcAttr{Credential: lv.cred, Setpgid: true}
	if err := lv.daemon.Start(); err != nil {
		t.Fatalf("starting libvirtd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- lv.daemon.Wait() }()
	t.Cleanup(func() {
		lv.killQEMU()
		_ = lv.daemon.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = lv.daemon.Process.Kill()
			<-exited
		}
		daemonLog.Close()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "libvirtd.log"))
			t.Logf("libvirtd log:\n%s", b)
		}
	})

	sock := filepath.Join(dir, "run", "libvirt", "libvirt-sock")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			if _, err := lv.virsh(t, "uri"); err == nil {
				break
			}
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "libvirtd.out"))
			t.Fatalf("libvirtd exited: %v\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("libvirtd socket %s never answered", sock)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("libvirt %s in session mode under %s (uid %d)", lv.version, dir, lv.uid)
	return lv
}

func lookPath(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes under the private directory, owned by libvirt's user.
func (lv *libvirt) writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(lv.dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if lv.cred != nil {
		if err := os.Chown(p, int(lv.cred.Uid), int(lv.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// virsh runs virsh against the private daemon; the output is returned on
// failure too, as it carries libvirt's error.
func (lv *libvirt) virsh(t *testing.T, args ...string) (string, error) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(c, lv.bins["virsh"], append([]string{"-c", "qemu:///session"}, args...)...)
	cmd.Env, cmd.Dir = lv.env, lv.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: lv.cred}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// atLeast reports whether the daemon's libvirt is at least major.minor.
func (lv *libvirt) atLeast(major, minor int) bool {
	parts := strings.SplitN(lv.version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (ma > major || ma == major && mi >= minor)
}

// localise turns the launcher's domain into one this machine can run,
// before the hook sees it, so that what libvirt defines is exactly the
// hook's output: the launcher's paths move under the private directory,
// KVM becomes TCG (no KVM here), and the pod's tap devices, which only
// virt-launcher's network setup creates, become user-mode networking with
// the same models and MACs.
func (lv *libvirt) localise(t *testing.T, doc []byte) []byte {
	t.Helper()
	s := strings.ReplaceAll(string(doc), launcherPrivate, filepath.Join(lv.dir, "kv"))
	s = strings.ReplaceAll(s, launcherOVMF, filepath.Join(lv.dir, "ovmf"))
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(s); err != nil {
		t.Fatal(err)
	}
	dom.Type = "qemu"
	for i := range dom.Devices.Interfaces {
		iface := &dom.Devices.Interfaces[i]
		if iface.Source == nil || iface.Source.Ethernet == nil {
			t.Fatalf("interface %d is not the launcher's tap (type ethernet)", i)
		}
		iface.Source = &libvirtxml.DomainInterfaceSource{User: &libvirtxml.DomainInterfaceSourceUser{}}
		iface.Target, iface.MTU = nil, nil
	}
	out, err := dom.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return []byte(out)
}

func (lv *libvirt) pidFile() string {
	return filepath.Join(lv.dir, "run", "libvirt", "qemu", "run", domainName+".pid")
}

// qemuArgs reads the running QEMU's argv from /proc: exactly what it was
// started with, no shell quoting to undo.
func (lv *libvirt) qemuArgs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(lv.pidFile())
	if err != nil {
		t.Fatalf("QEMU pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("QEMU pid file %q: %v", b, err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("QEMU command line: %v", err)
	}
	return strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
}

func (lv *libvirt) qemuLog() string {
	b, err := os.ReadFile(filepath.Join(lv.dir, "cache", "libvirt", "qemu", "log", domainName+".log"))
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// killQEMU ends a QEMU a failed test left running: libvirtd leaves its
// guests running when it exits.
func (lv *libvirt) killQEMU() {
	b, err := os.ReadFile(lv.pidFile())
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte("guest="+domainName)) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
