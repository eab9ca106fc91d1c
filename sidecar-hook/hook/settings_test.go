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
)

func TestParseSettings(t *testing.T) {
	tests := []struct {
		name    string
		ann     map[string]string
		want    Settings
		present bool
		err     string
	}{
		{name: "none", ann: map[string]string{"kubevirt.io/x": "y"}},
		{name: "nil", ann: nil},
		{name: "apple smc", ann: map[string]string{"hook.dockerios.io/apple-smc": "true"}, want: Settings{AppleSMC: true}, present: true},
		{name: "apple smc false", ann: map[string]string{"hook.dockerios.io/apple-smc": "false"}, present: true},
		{name: "disk defaults to nvme", ann: map[string]string{"hook.dockerios.io/system-disk": "system"},
			want: Settings{SystemDisk: "system", SystemDiskBus: "nvme"}, present: true},
		{name: "disk on sata", ann: map[string]string{"hook.dockerios.io/system-disk": "system", "hook.dockerios.io/system-disk-bus": "sata"},
			want: Settings{SystemDisk: "system", SystemDiskBus: "sata"}, present: true},
		{name: "cpu", ann: map[string]string{"hook.dockerios.io/cpu": "Haswell,+invtsc"}, want: Settings{CPU: "Haswell,+invtsc"}, present: true},
		{name: "unknown bus", ann: map[string]string{"hook.dockerios.io/system-disk": "system", "hook.dockerios.io/system-disk-bus": "scsi"}, present: true,
			err: `annotation hook.dockerios.io/system-disk-bus is "scsi", an unknown bus; supported buses: nvme, sata, virtio`},
		{name: "bus without disk", ann: map[string]string{"hook.dockerios.io/system-disk-bus": "nvme"}, present: true,
			err: "annotation hook.dockerios.io/system-disk-bus is set but hook.dockerios.io/system-disk is not; the hook needs to know which disk to move"},
		{name: "empty disk", ann: map[string]string{"hook.dockerios.io/system-disk": ""}, present: true,
			err: "annotation hook.dockerios.io/system-disk is empty; it must name a disk of the VirtualMachineInstance"},
		{name: "bad bool", ann: map[string]string{"hook.dockerios.io/apple-smc": "yes"}, present: true,
			err: `annotation hook.dockerios.io/apple-smc is "yes"; it must be "true" or "false"`},
		{name: "unknown annotation", ann: map[string]string{"hook.dockerios.io/gpu": "x", "hook.dockerios.io/apple-smc": "true"}, present: true,
			err: "unknown annotation hook.dockerios.io/gpu on the VirtualMachineInstance; this DockerIOS sidecar hook knows hook.dockerios.io/apple-smc, hook.dockerios.io/cpu, hook.dockerios.io/system-disk, hook.dockerios.io/system-disk-bus (is the hook older than the controller?)"},
		{name: "cpu with space", ann: map[string]string{"hook.dockerios.io/cpu": "Haswell -smp 64"}, present: true,
			err: "annotation hook.dockerios.io/cpu has a space, control or non-ASCII character at byte 7; a QEMU -cpu value is printable ASCII without spaces"},
		{name: "empty cpu", ann: map[string]string{"hook.dockerios.io/cpu": ""}, present: true,
			err: "annotation hook.dockerios.io/cpu is empty; remove it or give a QEMU -cpu value"},
		{name: "long cpu", ann: map[string]string{"hook.dockerios.io/cpu": strings.Repeat("a", 1025)}, present: true,
			err: "annotation hook.dockerios.io/cpu is 1025 characters long; at most 1024 are allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, present, err := ParseSettings(tc.ann)
			if present != tc.present {
				t.Errorf("present = %v, want %v", present, tc.present)
			}
			if tc.err != "" {
				var he *Error
				if !errors.As(err, &he) || he.Code != codes.InvalidArgument || he.Msg != tc.err {
					t.Fatalf("err = %v\nwant %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestLoadOSK(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ name, content string }{
		{"plain", testOSK}, {"newline", testOSK + "\n"}, {"crlf", testOSK + "\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LoadOSK(write(tc.name, tc.content))
			if err != nil || got != testOSK {
				t.Fatalf("LoadOSK = %q, %v", got, err)
			}
		})
	}

	short := testOSK[:63]
	withComma := testOSK[:10] + "," + testOSK[11:]
	withSpace := testOSK[:5] + " " + testOSK[6:]
	errTests := []struct {
		name, path, content, want string
	}{
		{"missing", filepath.Join(dir, "nope"), "", "cannot read the Apple SMC key (OSK) from " + filepath.Join(dir, "nope") +
			": open " + filepath.Join(dir, "nope") + ": no such file or directory; mount it there (see artifacts/kubevirt/README.md) or point --osk-file at it"},
		{"empty", "", "", "the Apple SMC key (OSK) in %s is invalid: it is 0 bytes long; the key is exactly 64 printable ASCII characters"},
		{"short", "", short, "the Apple SMC key (OSK) in %s is invalid: it is 63 bytes long; the key is exactly 64 printable ASCII characters"},
		{"two newlines", "", testOSK + "\n\n", "the Apple SMC key (OSK) in %s is invalid: it is 65 bytes long; the key is exactly 64 printable ASCII characters"},
		{"comma", "", withComma, "the Apple SMC key (OSK) in %s is invalid: byte 11 is a comma, which QEMU's option syntax cannot carry in osk="},
		{"space", "", withSpace, "the Apple SMC key (OSK) in %s is invalid: byte 6 is not a printable ASCII character (space, control or non-ASCII)"},
		{"huge", "", strings.Repeat("a", 5000), "the Apple SMC key (OSK) file %s is larger than 4096 bytes; it must hold exactly 64 printable ASCII characters"},
		{"directory", dir, "", "cannot read the Apple SMC key (OSK) from " + dir + ": read " + dir + ": is a directory"},
	}
	for _, tc := range errTests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.path
			if p == "" {
				p = write(tc.name, tc.content)
			}
			_, err := LoadOSK(p)
			var he *Error
			if !errors.As(err, &he) || he.Code != codes.FailedPrecondition {
				t.Fatalf("err = %v, want FailedPrecondition *Error", err)
			}
			want := tc.want
			if strings.Contains(want, "%s") {
				want = strings.Replace(want, "%s", p, 1)
			}
			if he.Msg != want {
				t.Errorf("err = %q\nwant  %q", he.Msg, want)
			}
			if strings.Contains(he.Msg, testOSK[:20]) {
				t.Error("error quotes the key")
			}
		})
	}
}

func TestOnDefineDomain(t *testing.T) {
	dir := t.TempDir()
	oskFile := filepath.Join(dir, "osk")
	if err := os.WriteFile(oskFile, []byte(testOSK+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := Hook{OSKFile: oskFile}
	dom := readFixture(t, "domain-virtio-system.xml")

	out, res, err := h.OnDefineDomain(dom, readFixture(t, "vmi-plain.json"))
	if err != nil || string(out) != string(dom) || res.Present || res.Changed {
		t.Fatalf("VMI without annotations: err %v, present %v, changed %v, same bytes %v", err, res.Present, res.Changed, string(out) == string(dom))
	}
	if res.VMI.String() != "macs/plain" {
		t.Errorf("VMI = %s", res.VMI)
	}

	out, res, err = h.OnDefineDomain(dom, readFixture(t, "vmi-nvme.json"))
	if err != nil || !res.Changed {
		t.Fatalf("err %v changed %v", err, res.Changed)
	}
	if s := res.Summary(); strings.Contains(s, testOSK) || s != "apple-smc, system-disk system on nvme, cpu override; domain rewritten" {
		t.Errorf("summary %q", s)
	}
	if !strings.Contains(string(out), "isa-applesmc,osk="+testOSK) {
		t.Error("OSK not in output")
	}

	_, _, err = Hook{OSKFile: filepath.Join(dir, "missing")}.OnDefineDomain(dom, readFixture(t, "vmi-nvme.json"))
	if err == nil || !strings.Contains(err.Error(), "cannot read the Apple SMC key (OSK)") {
		t.Errorf("missing OSK: err = %v", err)
	}
	_, _, err = h.OnDefineDomain(dom, []byte("{not json"))
	if err == nil || !strings.HasPrefix(err.Error(), "cannot decode the VirtualMachineInstance JSON sent by virt-launcher: ") {
		t.Errorf("bad VMI: err = %v", err)
	}
}
