// Copyright The DockerIOS Authors.
// SPDX-License-Identifier: GPL-3.0-or-later

package builder

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The EFI tree digest is the one image/fetch-inputs.sh checks upstream's tree with.
func TestEFITreeDigestMatchesShell(t *testing.T) {
	dirs := []string{"../../cmd/bootdisk/testdata/efi"}
	// OSX-KVM's real tree, when a developer has it unpacked (see README).
	if d := os.Getenv("DOCKERIOS_BOOTDISK_REAL_EFI_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		_, got, err := EFITree(dir)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", "find EFI -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Fields(string(out))[0]; got != want {
			t.Errorf("%s: EFITree digest %s, shell %s", dir, got, want)
		}
	}
}

func TestDeriveDiskIDs(t *testing.T) {
	a, b := DeriveDiskIDs("x"), DeriveDiskIDs("y")
	if a != DeriveDiskIDs("x") || a.DiskGUID == b.DiskGUID || a.PartitionGUID == a.DiskGUID || len(a.VolumeSerial) != 8 {
		t.Errorf("%+v %+v", a, b)
	}
	if a.DiskGUID[14] != '8' {
		t.Errorf("GUID %s is not version 8", a.DiskGUID)
	}
}

func TestCheckToken(t *testing.T) {
	good := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{good, true}, {" " + good + "\n", true}, {"", false}, {good[:31], false},
		{strings.Repeat("a", 257), false}, {good[:40] + " " + good[:40], false}, {good + "\x00", false}, {good + "é", false},
	} {
		got, err := CheckToken(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != strings.TrimSpace(tc.in)) {
			t.Errorf("CheckToken(%q) = %q, %v", tc.in, got, err)
		}
	}
}

func TestRedact(t *testing.T) {
	id := Identity{Model: "iMacPro1,1", SerialNumber: "C02CK029HX87", BoardSerialNumber: "C02015700QXJG36CB",
		SystemUUID: "4b408a88-4062-4532-9aa1-3d8a3549327f", MACAddress: "34:31:8f:d3:88:e4", ROM: "34318FD388E5"}
	for _, tc := range []struct {
		in, want string
		code     int
	}{
		{"nothing to hide", "nothing to hide", ExitFailure},
		{`serialNumber "C02CK029HX87": bad`, `serialNumber "<redacted>": bad`, ExitInvalidInput},
		{"uuid 4B408A88-4062-4532-9AA1-3D8A3549327F and 4b408a88406245329aa13d8a3549327f", "uuid <redacted> and <redacted>", ExitInvalidInput},
		{"mac 34:31:8F:D3:88:E4, 34-31-8f-d3-88-e4, 34318fd388e4", "mac <redacted>, <redacted>, <redacted>", ExitOutputVolume},
		{`rom "34318FD388E5": must be the MAC address's six bytes, 34318FD388E4`, `rom "<redacted>": must be the MAC address's six bytes, <redacted>`, ExitInvalidInput},
		{"MLB C02015700QXJG36CB, model iMacPro1,1", "MLB <redacted>, model iMacPro1,1", ExitInvalidInput},
	} {
		err := id.Redact(&Error{Code: tc.code, Reason: tc.in})
		if err.Error() != tc.want || ExitCode(err) != tc.code {
			t.Errorf("Redact(%q) = %q (exit %d), want %q (exit %d)", tc.in, err, ExitCode(err), tc.want, tc.code)
		}
	}
	if id.Redact(nil) != nil {
		t.Error("Redact(nil) is not nil")
	}
	// Values too short to identify anything are left alone, so a bad one
	// does not garble the message.
	if got := (Identity{SerialNumber: "C"}).Redact(Invalid("serialNumber %q: Cannot decode", "C")).Error(); got != `serialNumber "C": Cannot decode` {
		t.Errorf("short value: %q", got)
	}
}

func TestReadIdentityDir(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{"serialNumber": "C02CK029HX87\n", "macAddress": " 34:31:8F:D3:88:E4 ", "unrelated": "x"} {
		if err := os.WriteFile(dir+"/"+k, []byte(v), 0o440); err != nil {
			t.Fatal(err)
		}
	}
	id, err := ReadIdentityDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Identity{SerialNumber: "C02CK029HX87", MACAddress: "34:31:8F:D3:88:E4"}); id != want {
		t.Errorf("got %+v, want %+v", id, want)
	}
	if _, err := ReadIdentityDir(dir + "/serialNumber"); ExitCode(err) != ExitInvalidInput || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file as the directory: %v", err)
	}
}
