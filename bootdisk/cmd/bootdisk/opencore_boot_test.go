// Copyright The DockerIOS Authors.
// SPDX-License-Identifier: GPL-3.0-or-later
//
// This file is part of the DockerIOS bootdisk builder, which is free
// software: you can redistribute it and/or modify it under the terms of the
// GNU General Public License as published by the Free Software Foundation,
// either version 3 of the License, or (at your option) any later version.
// See bootdisk/LICENSE.

package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dockerios/dockerios/pkg/efivars"
	"github.com/dockerios/dockerios/pkg/identity"
)

// requireQEMUEnv, when set (hack/test.sh sets it), turns missing QEMU or
// OVMF into a failure, as for the hook's libvirt test: CI must never pass
// by skipping the boot.
const requireQEMUEnv = "DOCKERIOS_REQUIRE_LIBVIRT"

// The firmware the hook's libvirt test gives QEMU: Debian's 4 MiB OVMF build
// with SMM, behind the names KubeVirt's launcher uses (OVMF_CODE.secboot.fd
// with secure='no', and the keyless OVMF_VARS.fd as the NVRAM template).
const (
	ovmfCode = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	ovmfVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// The OpenCore 1.0.5 files in testdata (README.md there says where they
// come from). Checked here so that a changed file cannot pass unnoticed.
const (
	openCoreDir     = "../../testdata/opencore-1.0.5"
	openCoreCommit  = "da4b23b5e92c5b939568700034367e8b7649fe90" // OSX-KVM, image/pins.sh's OSX_KVM_COMMIT
	openCoreVersion = "REL-105-2025-07-07"
	bootConfig      = "../../testdata/opencore-boot-config.plist"
)

var openCoreFiles = map[string]string{
	"EFI/BOOT/BOOTx64.efi":                "60b14d437912e78a977c75436692ee8a7fa9e301644dbc677d648233fe2d77f3",
	"EFI/OC/OpenCore.efi":                 "a78f699080543456c29551134b78f1bb59f69ec38bc94b59b3c04bb5f28bdd12",
	"EFI/OC/Drivers/OpenCanopy.efi":       "a0907571d97f7a63f3df0bc8a289ce7340db0a455c79e3c44c0e631b3bc0e7f5",
	"EFI/OC/Drivers/OpenHfsPlus.efi":      "340ec62f8e25db4c3bfe357dd37bd89fd80f7585e40ee451b180fbf29434e818",
	"EFI/OC/Drivers/OpenPartitionDxe.efi": "6ed2d0fb88062cc179158ad6fba08bd8a5e83b268b4dce2a1502d9fe578603ea",
	"EFI/OC/Drivers/OpenRuntime.efi":      "a7493c410bd88f90736c0b0137d1af63694fc18168a65b2d1351ff64c40b0d65",
	"EFI/OC/Drivers/ResetNvramEntry.efi":  "552b287b1c399fe939748994fea11ae10b97eaffbb880cd3906de08bb09f309a",
}

// Vendor GUIDs: Apple's, under which OpenCore's PlatformInfo writes the
// identity, and OpenCore's own, under which the token is added.
var (
	appleVendor    = efivars.MustParseGUID("4D1EDE05-38C7-4A6A-9CC6-4BCCA8B38C14")
	openCoreVendor = efivars.MustParseGUID("4D1FDA02-38C7-4A6A-9CC6-4BCCA8B30102")
)

// The agent reads this variable (agent/config.DefaultNVRAMVariable).
const tokenVariable = "4D1FDA02-38C7-4A6A-9CC6-4BCCA8B30102:dockerios-agent-token"

// wantVar is a variable OpenCore must have set, with its attributes.
type wantVar struct {
	vendor efivars.GUID
	name   string
	data   []byte
	attrs  uint32
}

func (w wantVar) key() string { return w.vendor.String() + ":" + w.name }

// TestOpenCoreBootsRenderedDisk renders a boot disk with the real command
// from OpenCore 1.0.5's files (those of image/pins.sh's OSX-KVM pin), a
// generated identity and a random token, boots it with OVMF in QEMU (TCG,
// q35, the disk on SATA as on our VMs) and reads back what OpenCore wrote:
//
//   - the token, from the VARS file: OpenCore's NVRAM → Add with WriteFlash
//     sets it non-volatile, so it is in the flash image the VM keeps;
//   - the identity (MLB, ROM, serial, system UUID, the model's board ID) and
//     OpenCore's version, from the firmware's variable store in guest RAM:
//     OpenCore 1.0.5 sets these without EFI_VARIABLE_NON_VOLATILE
//     (Library/OcMainLib/OpenCorePlatform.c OcPlatformUpdateNvram and
//     OpenCoreNvram.c OcReportVersion), whatever WriteFlash says, so they
//     never reach the VARS file. The test asserts that too. Its RELEASE
//     build does not log them either (DEBUG_INFO is compiled out), so the
//     variable store is the one place to observe them.
//
// With DOCKERIOS_BOOTDISK_OSX_KVM_OPENCORE set to the OpenCore/ directory of
// an OSX-KVM checkout at the pinned commit, it also boots what the image
// ships: that whole EFI tree, with the template `bootdisk template` makes
// of that checkout's config.plist.
func TestOpenCoreBootsRenderedDisk(t *testing.T) {
	qemu := requireQEMU(t)
	t.Run("testdata", func(t *testing.T) {
		checkOpenCoreFiles(t)
		bootRenderedDisk(t, qemu, filepath.Join(openCoreDir, "efi"), bootConfig)
	})
	t.Run("OSX-KVM", func(t *testing.T) {
		dir := os.Getenv(osxKVMOpenCoreEnv)
		if dir == "" {
			t.Skipf("set %s to an OSX-KVM checkout's OpenCore/ directory (commit %s) to boot its whole tree and config", osxKVMOpenCoreEnv, openCoreCommit)
		}
		bootRenderedDisk(t, qemu, dir, filepath.Join(dir, "config.plist"))
	})
}

const osxKVMOpenCoreEnv = "DOCKERIOS_BOOTDISK_OSX_KVM_OPENCORE"

func bootRenderedDisk(t *testing.T, qemu, efiDir, config string) {
	id := identity.NewGenerator(15, "iMacPro1,1").Next()
	token := randomToken(t)
	dir := t.TempDir()

	template := filepath.Join(dir, "template.plist")
	if r := runBinary(t, nil, "template", "--from="+config, "--output="+template); r.code != 0 {
		t.Fatalf("template: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The identity arrives as the Job gives it: one file per key of the
	// identity Secret (pkg/bootdisk.IdentitySecretData), the token in the
	// environment.
	idDir := filepath.Join(dir, "identity")
	outDir := filepath.Join(dir, "output")
	for _, d := range []string{idDir, outDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range map[string]string{
		"serialNumber": id.SerialNumber, "boardSerialNumber": id.BoardSerialNumber,
		"systemUUID": id.SystemUUID, "macAddress": id.MACAddress, "rom": id.ROM,
	} {
		if err := os.WriteFile(filepath.Join(idDir, k), []byte(v+"\n"), 0o440); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	res := mustSucceed(t, runBinary(t, []string{"DOCKERIOS_AGENT_TOKEN=" + token},
		"render", "--model="+id.Model, "--identity-dir="+idDir, "--width=1920", "--height=1080",
		"--format=raw", "--output-dir="+outDir, "--scratch-dir="+t.TempDir(),
		"--template="+template, "--efi-dir="+efiDir,
		"--template-commit="+config, "--efi-commit="+openCoreCommit))
	t.Logf("rendered %s (%d MiB) in %s", res.Image, res.VirtualSize>>20, time.Since(start).Round(time.Millisecond))

	vars := filepath.Join(dir, "VARS.fd")
	copyTestFile(t, ovmfVars, vars)
	if s := parseVars(t, vars); len(s.Live()) != 0 {
		t.Fatalf("the VARS template already holds %d variables", len(s.Live()))
	}

	rom, err := hex.DecodeString(id.ROM)
	if err != nil {
		t.Fatal(err)
	}
	// SystemUUID goes to system-id in the byte order of the string
	// (OcAsciiStrToRawGuid), not as an EFI_GUID.
	systemID, err := hex.DecodeString(strings.ReplaceAll(id.SystemUUID, "-", ""))
	if err != nil {
		t.Fatal(err)
	}
	const bsrt = efivars.BootServiceAccess | efivars.RuntimeAccess
	inRAM := []wantVar{
		{openCoreVendor, "opencore-version", []byte(openCoreVersion), bsrt},
		{appleVendor, "MLB", []byte(id.BoardSerialNumber), bsrt},
		{appleVendor, "HW_MLB", []byte(id.BoardSerialNumber), bsrt},
		{appleVendor, "ROM", rom, bsrt},
		{appleVendor, "HW_ROM", rom, bsrt},
		{appleVendor, "SSN", []byte(id.SerialNumber), bsrt},
		{appleVendor, "HW_SSN", []byte(id.SerialNumber), bsrt},
		{appleVendor, "system-id", systemID, efivars.BootServiceAccess},
		// The board ID OpenCore's model table gives iMacPro1,1: the model
		// came through too.
		{appleVendor, "HW_BID", []byte("Mac-7BA5B2D9E42DDD94"), bsrt},
	}
	inVars := wantVar{openCoreVendor, "dockerios-agent-token", []byte(token), efivars.NonVolatile | bsrt}
	if inVars.key() != tokenVariable {
		t.Fatalf("token variable %s, want the agent's %s", inVars.key(), tokenVariable)
	}

	vm := startQEMU(t, qemu, dir, filepath.Join(outDir, res.Image), vars)
	booted := time.Now()
	// Everything must be there within the bound; the whole test must stay
	// under five minutes on two busy cores.
	deadline := booted.Add(3 * time.Minute)
	for {
		missing := missingInRAM(t, vm.ram, inRAM)
		if s, err := readVars(vars); err == nil {
			if _, ok := s.Get(inVars.vendor, inVars.name); !ok {
				missing = append(missing, inVars.key()+" (VARS file)")
			}
		} else {
			missing = append(missing, "a parsable VARS file: "+err.Error())
		}
		if len(missing) == 0 {
			break
		}
		if vm.exited() || time.Now().After(deadline) {
			vm.stop()
			t.Fatalf("after %s OpenCore has not set %s\nQEMU: %s\nserial console:\n%s",
				time.Since(booted).Round(time.Second), strings.Join(missing, ", "), vm.stderr.String(), tail(vm.serial(), 3000))
		}
		time.Sleep(time.Second)
	}
	vm.stop()
	t.Logf("OpenCore had set every variable %s after QEMU started", time.Since(booted).Round(100*time.Millisecond))

	// From here on nothing runs: what the files hold is final.
	s := parseVars(t, vars)
	got, ok := s.Get(inVars.vendor, inVars.name)
	if !ok || !bytes.Equal(got.Data, inVars.data) || got.Attributes != inVars.attrs {
		t.Errorf("VARS file: %s = %q (attributes %#x), want the render's token (attributes %#x)", inVars.key(), got.Data, got.Attributes, inVars.attrs)
	} else {
		t.Logf("VARS file: %s = the token (%d bytes), attributes %#x", inVars.key(), len(got.Data), got.Attributes)
	}
	for _, w := range inRAM {
		if v, ok := s.Get(w.vendor, w.name); ok {
			t.Errorf("VARS file holds %s (attributes %#x): OpenCore 1.0.5 sets it volatile; if a new OpenCore persists it, read it from the VARS file", w.key(), v.Attributes)
		}
	}
	checkRAM(t, vm.ram, inRAM)
	// OpenCore reports a config it cannot read (OC:) and every key or value
	// its 1.0.5 schema does not know or cannot parse (OCS:). The test config
	// logs to the serial port; OSX-KVM's logs on screen only, so for it
	// this check sees nothing.
	out := vm.serial()
	t.Logf("OpenCore on the serial console:\n%s", openCoreLines(out))
	for _, bad := range []string{"OC: Failed to parse configuration", "OC: Failed to load configuration", "OCS: "} {
		if strings.Contains(out, bad) {
			t.Errorf("OpenCore reports %q on the serial console:\n%s", bad, tail(out, 3000))
		}
	}
}

func requireQEMU(t *testing.T) string {
	t.Helper()
	var missing []string
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		missing = append(missing, "qemu-system-x86_64 (Debian package qemu-system-x86)")
	}
	for _, f := range []string{ovmfCode, ovmfVars} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f+" (Debian package ovmf)")
		}
	}
	if len(missing) > 0 {
		msg := "the OpenCore boot test needs " + strings.Join(missing, " and ") + " (hack/install-debian-packages.sh)"
		if os.Getenv(requireQEMUEnv) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if testing.Short() && os.Getenv(requireQEMUEnv) == "" {
		t.Skip("boots a VM; skipped with -short")
	}
	return qemu
}

// checkOpenCoreFiles checks the test data is exactly the files README.md
// lists: nothing changed, nothing added.
func checkOpenCoreFiles(t *testing.T) {
	t.Helper()
	root := filepath.Join(openCoreDir, "efi")
	var seen []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		seen = append(seen, rel)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		if want, ok := openCoreFiles[rel]; !ok {
			t.Errorf("%s: not one of the OpenCore 1.0.5 files the test data lists", rel)
		} else if got := hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%s: sha256 %s, want %s (testdata/opencore-1.0.5/README.md)", rel, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(openCoreFiles) {
		t.Fatalf("found %v, want the %d files of testdata/opencore-1.0.5/README.md", seen, len(openCoreFiles))
	}
}

func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "boot-test-" + hex.EncodeToString(b)
}

type qemuVM struct {
	t      *testing.T
	cmd    *exec.Cmd
	done   chan struct{}
	stderr bytes.Buffer
	ram    string
	log    string
}

// startQEMU boots disk with the OVMF code and the writable vars. Guest RAM
// is a shared file, so the firmware's variable stores in RAM can be read
// from outside. The identity is deliberately not given to QEMU's SMBIOS
// (KubeVirt sets type 1's serial and UUID): every value the test finds
// then came from the boot disk.
func startQEMU(t *testing.T, qemu, dir, disk, vars string) *qemuVM {
	t.Helper()
	vm := &qemuVM{t: t, done: make(chan struct{}), ram: filepath.Join(dir, "guest-ram"), log: filepath.Join(dir, "serial.log")}
	const mem = "512M"
	osk := strings.Repeat("0123456789abcdef", 4) // a dummy 64-character key, as the hook's test uses
	vm.cmd = exec.Command(qemu,
		"-nodefaults", "-no-user-config", "-no-reboot",
		"-machine", "q35,accel=tcg,memory-backend=ram",
		"-object", "memory-backend-file,id=ram,size="+mem+",mem-path="+vm.ram+",share=on",
		"-m", mem, "-smp", "1", "-cpu", "Penryn",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+ovmfCode,
		"-drive", "if=pflash,format=raw,unit=1,file="+vars,
		"-device", "isa-applesmc,osk="+osk,
		// The disk on q35's AHCI controller, as our VMs have it; snapshot
		// keeps the rendered artifact unchanged.
		"-drive", "if=none,id=bootdisk,format=raw,snapshot=on,file="+disk,
		"-device", "ide-hd,drive=bootdisk,bus=ide.0,bootindex=1",
		"-device", "VGA", "-display", "none",
		"-serial", "file:"+vm.log, "-monitor", "none",
	)
	vm.cmd.Stderr = &vm.stderr
	vm.cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	vm.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := vm.cmd.Start(); err != nil {
		t.Fatalf("starting QEMU: %v", err)
	}
	go func() { _ = vm.cmd.Wait(); close(vm.done) }()
	t.Cleanup(vm.stop)
	return vm
}

func (vm *qemuVM) exited() bool {
	select {
	case <-vm.done:
		return true
	default:
		return false
	}
}

func (vm *qemuVM) stop() {
	if !vm.exited() {
		_ = vm.cmd.Process.Kill()
		<-vm.done
	}
}

func (vm *qemuVM) serial() string {
	b, _ := os.ReadFile(vm.log)
	return string(b)
}

// ramStores maps the guest RAM file and returns the variable stores in it.
func ramStores(path string) ([]*efivars.Store, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return efivars.FindStores(mem), func() { _ = syscall.Munmap(mem) }, nil
}

func missingInRAM(t *testing.T, ram string, want []wantVar) []string {
	t.Helper()
	stores, unmap, err := ramStores(ram)
	if err != nil {
		return []string{"guest RAM: " + err.Error()}
	}
	defer unmap()
	var missing []string
	for _, w := range want {
		if !slices.ContainsFunc(stores, func(s *efivars.Store) bool { _, ok := s.Get(w.vendor, w.name); return ok }) {
			missing = append(missing, w.key())
		}
	}
	return missing
}

// checkRAM asserts every wanted variable is in some variable store in RAM
// and every live copy (EDK II keeps a runtime cache beside the SMM store)
// has the wanted value and attributes.
func checkRAM(t *testing.T, ram string, want []wantVar) {
	t.Helper()
	stores, unmap, err := ramStores(ram)
	if err != nil {
		t.Fatalf("guest RAM: %v", err)
	}
	defer unmap()
	var where []string
	for _, s := range stores {
		where = append(where, fmt.Sprintf("%#x (%d live)", s.Offset, len(s.Live())))
	}
	t.Logf("variable stores in guest RAM at %s", strings.Join(where, ", "))
	for _, w := range want {
		copies := 0
		for _, s := range stores {
			v, ok := s.Get(w.vendor, w.name)
			if !ok {
				continue
			}
			copies++
			if !bytes.Equal(v.Data, w.data) || v.Attributes != w.attrs {
				t.Errorf("guest RAM store at %#x: %s = %q (attributes %#x), want %q (attributes %#x)", s.Offset, w.key(), v.Data, v.Attributes, w.data, w.attrs)
			}
		}
		if copies == 0 {
			t.Errorf("no variable store in guest RAM holds %s", w.key())
			continue
		}
		t.Logf("guest RAM: %s = %s (attributes %#x, %d copies)", w.key(), printable(w.data), w.attrs, copies)
	}
}

func readVars(path string) (*efivars.Store, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return efivars.ParseFirmwareVolume(b)
}

func parseVars(t *testing.T, path string) *efivars.Store {
	t.Helper()
	s, err := readVars(path)
	if err != nil {
		t.Fatalf("VARS file %s: %v", path, err)
	}
	return s
}

func printable(b []byte) string {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return strings.ToUpper(hex.EncodeToString(b))
		}
	}
	return string(b)
}

// openCoreLines picks OpenCore's log lines ("00:000 00:000 OCB: ...") out of
// the console, which also carries OVMF's screen control sequences.
func openCoreLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, " OC"); i >= 0 && strings.Contains(l[i:], ": ") {
			out = append(out, strings.TrimRight(l, "\r"))
		}
	}
	return strings.Join(out, "\n")
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func copyTestFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
