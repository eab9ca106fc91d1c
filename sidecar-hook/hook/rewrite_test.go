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

package hook

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/dockerios/dockerios/sidecar-hook/annotations"
	"github.com/dockerios/dockerios/sidecar-hook/internal/domaincheck"
)

// testOSK is a dummy key of the real key's shape. It is not Apple's key.
var testOSK = "DOCKERIOS-TEST-OSK-not-the-real-key" + strings.Repeat("x", OSKLength-35)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const minimalDomain = `<domain type="kvm">
	<name>ns_vm</name>
	<memory unit="b">1073741824</memory>
	<os>
		<type arch="x86_64" machine="q35">hvm</type>
	</os>
	<devices>
		<disk device="disk" type="file" model="virtio-non-transitional">
			<source file="/disk.img"></source>
			<target bus="virtio" dev="vda"></target>
			<driver name="qemu" type="raw" iothread="1" queues="2"></driver>
			<alias name="ua-system"></alias>
			<address type="pci" domain="0x0000" bus="0x05" slot="0x00" function="0x0"></address>
		</disk>
		<disk device="disk" type="file">
			<source file="/boot.img"></source>
			<target bus="sata" dev="sda"></target>
			<alias name="ua-bootdisk"></alias>
		</disk>
		<disk device="cdrom" type="file">
			<source file="/cd.iso"></source>
			<target bus="sata" dev="sdb"></target>
			<alias name="ua-cd"></alias>
		</disk>
	</devices>
</domain>`

const domainWithArgs = `<domain type="kvm" xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0">
	<name>ns_vm</name>
	<devices>
		<disk device="disk" type="file">
			<source file="/disk.img"></source>
			<target bus="sata" dev="sda"></target>
			<alias name="ua-system"></alias>
		</disk>
	</devices>
	<qemu:commandline>
		<qemu:arg value="-device"></qemu:arg>
		<qemu:arg value="isa-applesmc,osk=stale"></qemu:arg>
		<qemu:arg value="-cpu"></qemu:arg>
		<qemu:arg value="Penryn"></qemu:arg>
		<qemu:arg value="-global"></qemu:arg>
		<qemu:arg value="ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off"></qemu:arg>
		<qemu:arg value="-smbios"></qemu:arg>
		<qemu:arg value="type=2"></qemu:arg>
		<qemu:env name="QEMU_AUDIO_DRV" value="none"></qemu:env>
	</qemu:commandline>
</domain>`

func TestRewrite(t *testing.T) {
	smc := Settings{AppleSMC: true}
	tests := []struct {
		name     string
		domain   string
		settings Settings
		// wantArgs is the full qemu:commandline argument list afterwards.
		wantArgs []string
		// wantBus/wantDev/wantSerial describe disk ua-<settings.SystemDisk>.
		wantBus, wantDev, wantSerial string
		check                        func(t *testing.T, out []byte)
	}{
		{
			name: "apple smc only", domain: minimalDomain, settings: smc,
			wantArgs: []string{"-device", "isa-applesmc,osk=" + testOSK, "-smbios", "type=2"},
		},
		{
			name: "cpu only", domain: minimalDomain, settings: Settings{CPU: "Haswell-noTSX,vendor=GenuineIntel,+invtsc"},
			wantArgs: []string{"-cpu", "Haswell-noTSX,vendor=GenuineIntel,+invtsc"},
		},
		{
			name: "virtio to nvme", domain: minimalDomain,
			settings: Settings{AppleSMC: true, SystemDisk: "system", SystemDiskBus: annotations.BusNVMe},
			wantArgs: []string{"-device", "isa-applesmc,osk=" + testOSK, "-smbios", "type=2"},
			wantBus:  "nvme", wantDev: "nvme0n1", wantSerial: nvmeSerial("ua-system"),
			check: func(t *testing.T, out []byte) {
				d, _ := domaincheck.Parse(out)
				disk := domaincheck.Disk(d, "ua-system")
				if disk.Model != "" || disk.Address != nil || disk.Driver.IOThread != nil || disk.Driver.Queues != nil {
					t.Errorf("virtio-only settings kept on nvme disk: model=%q address=%v driver=%+v", disk.Model, disk.Address, disk.Driver)
				}
				if disk.Driver.Name != "qemu" || disk.Driver.Type != "raw" {
					t.Errorf("driver name/type lost: %+v", disk.Driver)
				}
			},
		},
		{
			name: "virtio to sata takes the first free sdX", domain: minimalDomain,
			settings: Settings{SystemDisk: "system", SystemDiskBus: annotations.BusSATA},
			wantBus:  "sata", wantDev: "sdc",
		},
		{
			name: "sata to virtio", domain: domainWithArgs,
			settings: Settings{SystemDisk: "system", SystemDiskBus: annotations.BusVirtio},
			wantArgs: []string{"-device", "isa-applesmc,osk=stale", "-cpu", "Penryn", "-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off", "-smbios", "type=2"},
			wantBus:  "virtio", wantDev: "vda",
		},
		{
			name: "existing args: ours replaced and moved last, others kept in order", domain: domainWithArgs,
			settings: Settings{AppleSMC: true, CPU: "Haswell"},
			wantArgs: []string{"-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off",
				"-device", "isa-applesmc,osk=" + testOSK, "-smbios", "type=2", "-cpu", "Haswell"},
			check: func(t *testing.T, out []byte) {
				d, _ := domaincheck.Parse(out)
				if envs := d.QEMUCommandline.Envs; len(envs) != 1 || envs[0].Name != "QEMU_AUDIO_DRV" {
					t.Errorf("qemu env lost: %+v", envs)
				}
			},
		},
		{
			name: "disk already on the bus: only the nvme serial is ensured", domain: strings.Replace(strings.Replace(minimalDomain,
				`bus="virtio" dev="vda"`, `bus="nvme" dev="nvme0n3"`, 1), `model="virtio-non-transitional"`, "", 1),
			settings: Settings{SystemDisk: "system", SystemDiskBus: annotations.BusNVMe},
			wantBus:  "nvme", wantDev: "nvme0n3", wantSerial: nvmeSerial("ua-system"),
		},
		{
			name:     "kubevirt fixture, virtio system disk to nvme",
			domain:   string(readFixture(t, "domain-virtio-system.xml")),
			settings: Settings{AppleSMC: true, SystemDisk: "system", SystemDiskBus: annotations.BusNVMe, CPU: "Haswell-noTSX,+invtsc"},
			wantArgs: []string{"-device", "isa-applesmc,osk=" + testOSK, "-smbios", "type=2", "-cpu", "Haswell-noTSX,+invtsc"},
			wantBus:  "nvme", wantDev: "nvme0n1", wantSerial: nvmeSerial("ua-system"),
		},
		{
			name:     "kubevirt fixture, sata system disk to nvme",
			domain:   string(readFixture(t, "domain-sata-system.xml")),
			settings: Settings{AppleSMC: true, SystemDisk: "system", SystemDiskBus: annotations.BusNVMe},
			wantArgs: []string{"-device", "isa-applesmc,osk=" + testOSK, "-smbios", "type=2"},
			wantBus:  "nvme", wantDev: "nvme0n1", wantSerial: nvmeSerial("ua-system"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Rewrite([]byte(tc.domain), tc.settings, testOSK)
			if err != nil {
				t.Fatalf("Rewrite: %v", err)
			}
			before, err := domaincheck.Parse([]byte(tc.domain))
			if err != nil {
				t.Fatal(err)
			}
			after, err := domaincheck.Parse(out)
			if err != nil {
				t.Fatalf("output does not parse: %v\n%s", err, out)
			}
			if got := domaincheck.Args(after); strings.Join(got, " ") != strings.Join(tc.wantArgs, " ") {
				t.Errorf("args = %q, want %q", got, tc.wantArgs)
			}
			alias := ""
			if tc.settings.SystemDisk != "" {
				alias = "ua-" + tc.settings.SystemDisk
				disk := domaincheck.Disk(after, alias)
				if disk == nil {
					t.Fatalf("disk %s missing", alias)
				}
				if disk.Target.Bus != tc.wantBus || disk.Target.Dev != tc.wantDev {
					t.Errorf("target = %s/%s, want %s/%s", disk.Target.Bus, disk.Target.Dev, tc.wantBus, tc.wantDev)
				}
				if tc.wantSerial != "" && disk.Serial != tc.wantSerial {
					t.Errorf("serial = %q, want %q", disk.Serial, tc.wantSerial)
				}
				if len(disk.Serial) > 20 {
					t.Errorf("serial %q longer than NVMe's 20 characters", disk.Serial)
				}
			}
			if err := domaincheck.EqualOutside(before, after, alias); err != nil {
				t.Error(err)
			}
			if tc.check != nil {
				tc.check(t, out)
			}
			again, err := Rewrite(out, tc.settings, testOSK)
			if err != nil {
				t.Fatalf("second pass: %v", err)
			}
			if string(again) != string(out) {
				t.Errorf("second pass changed the domain:\n%s\n---\n%s", out, again)
			}
		})
	}
}

func TestRewriteNoSettingsReturnsInputBytes(t *testing.T) {
	in := readFixture(t, "domain-virtio-system.xml")
	out, err := Rewrite(in, Settings{}, "")
	if err != nil || string(out) != string(in) {
		t.Fatalf("Rewrite with no settings changed the domain (err %v)", err)
	}
}

func TestRewriteErrors(t *testing.T) {
	tests := []struct {
		name     string
		domain   string
		settings Settings
		code     codes.Code
		want     string
	}{
		{"disk not in domain", minimalDomain, Settings{SystemDisk: "macintosh-hd", SystemDiskBus: "nvme"}, codes.InvalidArgument,
			`annotation hook.dockerios.io/system-disk names disk "macintosh-hd", but the domain has no disk with alias "ua-macintosh-hd" (the VMI's disks in the domain: bootdisk, cd, system)`},
		{"cdrom named as system disk", minimalDomain, Settings{SystemDisk: "cd", SystemDiskBus: "nvme"}, codes.InvalidArgument,
			`annotation hook.dockerios.io/system-disk names disk "cd", which is a cdrom, not a disk`},
		{"not xml", "this is not XML", Settings{AppleSMC: true}, codes.InvalidArgument, "cannot parse the domain XML: EOF"},
		{"not a domain", "<network><name>x</name></network>", Settings{AppleSMC: true}, codes.InvalidArgument,
			"cannot parse the domain XML: expected element type <domain> but have <network>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Rewrite([]byte(tc.domain), tc.settings, testOSK)
			var he *Error
			if !errors.As(err, &he) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if he.Code != tc.code || he.Msg != tc.want {
				t.Errorf("err = %v %q\nwant %v %q", he.Code, he.Msg, tc.code, tc.want)
			}
			if strings.Contains(err.Error(), testOSK) {
				t.Error("error contains the OSK")
			}
		})
	}
}

func TestLetters(t *testing.T) {
	for n, want := range map[int]string{0: "a", 25: "z", 26: "aa", 27: "ab", 51: "az", 52: "ba", 701: "zz", 702: "aaa"} {
		if got := letters(n); got != want {
			t.Errorf("letters(%d) = %q, want %q", n, got, want)
		}
	}
}
