// Copyright The DockerIOS Authors.
// SPDX-License-Identifier: GPL-3.0-or-later

package builder

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The EFI tree digest is the one the Dockerfile checks upstream's tree with.
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
