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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dockerios/dockerios/bootdisk/internal/builder"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/pkg/version/versiontest"
	"howett.net/plist"
)

var update = flag.Bool("update", false, "rewrite the golden CSV in ../../../pkg/bootdisk/testdata")

// goldenCSV is read by a test of the Apache-2.0 module (pkg/bootdisk), which
// checks every row with pkg/identity; this module only writes it.
const goldenCSV = "../../../pkg/bootdisk/testdata/generated-identities.csv"

var binary string

// TestMain builds the real command once, stamped with a known version as
// hack/version.sh stamps a release. The image tools are required: a
// missing one fails the run, naming the Debian package to install.
func TestMain(m *testing.M) {
	flag.Parse()
	if err := builder.CheckTools(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: bootdisk tests need the image tools: %v (apt-get install -y fdisk mtools qemu-utils)\n", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "bootdisk-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "bootdisk")
	if out, err := exec.Command("go", "build", "-ldflags", versiontest.LDFlags(versiontest.Stamp), "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building bootdisk: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// A valid identity (from pkg/identity's osx-serial-generator test rows).
var testIdentity = map[string]string{
	"model":        "iMacPro1,1",
	"serial":       "C02CK029HX87",
	"board-serial": "C02015700QXJG36CB",
	"uuid":         "4b408a88-4062-4532-9aa1-3d8a3549327f", // lower case: canonicalized
	"mac-address":  "34:31:8f:d3:88:e4",
}

type runResult struct {
	code           int
	stdout, stderr string
	termLog        string
}

// renderRun runs the binary's render command with the test identity, the test
// EFI tree and template, overridden by extra flags ("--name=value"), and env.
func renderRun(t *testing.T, outDir string, env []string, extra ...string) runResult {
	t.Helper()
	args := []string{"render", "--template=testdata/config-template.plist", "--efi-dir=testdata/efi",
		"--output-dir=" + outDir, "--size-mib=48", "--template-commit=0000000000000000000000000000000000000001",
		"--scratch-dir=" + t.TempDir()}
	for k, v := range testIdentity {
		args = append(args, "--"+k+"="+v)
	}
	args = append(args, extra...)
	return runBinary(t, append([]string{"DOCKERIOS_AGENT_TOKEN=" + testToken}, env...), args...)
}

func runBinary(t *testing.T, env []string, args ...string) runResult {
	t.Helper()
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(append(os.Environ(), "DOCKERIOS_BOOTDISK_TERMINATION_LOG="+termLog), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := runResult{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running bootdisk: %v", err)
	}
	b, _ := os.ReadFile(termLog)
	r.termLog = string(b)
	return r
}

func mustSucceed(t *testing.T, r runResult) builder.Result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var res builder.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("stdout is not the result: %v: %q", err, r.stdout)
	}
	return res
}

func readResult(t *testing.T, dir string) builder.Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, builder.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	var res builder.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func sha(t *testing.T, p string) string {
	t.Helper()
	out, err := exec.Command("sha256sum", p).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))[0]
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	return names
}

func TestRenderEndToEnd(t *testing.T) {
	out := t.TempDir()
	res := mustSucceed(t, renderRun(t, out, nil, "--width=2560", "--height=1440"))
	img := filepath.Join(out, "disk.img")

	// result.json is what stdout said, and describes the file.
	if got := readResult(t, out); got != res {
		t.Errorf("result.json %+v, stdout %+v", got, res)
	}
	fi, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	if res.SHA256 != sha(t, img) || res.Size != fi.Size() || res.Size != 48<<20 || res.VirtualSize != 48<<20 {
		t.Errorf("result %+v does not describe %s (%d bytes)", res, img, fi.Size())
	}
	if res.Model != "iMacPro1,1" ||
		res.TemplateCommit != "0000000000000000000000000000000000000001" || res.Format != "raw" || res.Image != "disk.img" || res.Resolution != "2560x1440" {
		t.Errorf("result fields: %+v", res)
	}
	if strings.Contains(mustRead(t, filepath.Join(out, builder.ResultFile)), testToken) {
		t.Error("result.json contains the token")
	}
	// stdout is the pod's log: no identity value there either.
	noIdentityValues(t, "stdout", renderRun(t, t.TempDir(), nil).stdout)
	if got := entries(t, out); strings.Join(got, ",") != "disk.img,result.json" {
		t.Errorf("output directory holds %v", got)
	}

	// GPT with one EFI system partition, as sfdisk reads it.
	pt, err := builder.ReadPartitionTable(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	tab := pt.PartitionTable
	if tab.Label != "gpt" || tab.SectorSize != 512 || len(tab.Partitions) != 1 {
		t.Fatalf("partition table: %+v", tab)
	}
	p := tab.Partitions[0]
	if p.Start != 2048 || p.Type != builder.ESPTypeGUID || p.Name != "EFI" || p.Size < 40<<11 {
		t.Errorf("ESP: %+v", p)
	}
	ids := builder.DeriveDiskIDs("4B408A88-4062-4532-9AA1-3D8A3549327F/C02CK029HX87")
	if tab.ID != ids.DiskGUID || p.UUID != ids.PartitionGUID {
		t.Errorf("GUIDs %s/%s, want the derived %s/%s", tab.ID, p.UUID, ids.DiskGUID, ids.PartitionGUID)
	}

	// The EFI tree is on the ESP.
	for _, f := range []string{"EFI/BOOT/BOOTx64.efi", "EFI/OC/OpenCore.efi", "EFI/OC/Drivers/OpenRuntime.efi", "EFI/OC/ACPI/SSDT-EC.aml"} {
		got, err := builder.ReadFileFromImage(context.Background(), img, f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if want := mustRead(t, filepath.Join("testdata/efi", f)); string(got) != want {
			t.Errorf("%s on the image is %q, want %q", f, got, want)
		}
	}

	cfg := checkRenderedConfig(t, img, "2560x1440@32")
	if dig(t, cfg, "NVRAM", "Add", "7C436110-AB2A-4BBB-A880-FE41995C9F82")["boot-args"] != "-v keepsyms=1 tlbto_us=0 vti=9" {
		t.Error("template values outside the placeholders changed")
	}
}

// checkRenderedConfig reads EFI/OC/config.plist from the image and checks
// that every identity value is in its key with its type, the ROM as six
// bytes of <data>, the resolution, and the agent token. It returns the
// parsed config.
func checkRenderedConfig(t *testing.T, img, resolution string) map[string]any {
	t.Helper()
	raw, err := builder.ReadFileFromImage(context.Background(), img, "EFI/OC/config.plist")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("{{")) || bytes.Contains(raw, []byte("stale")) {
		t.Errorf("config.plist has a placeholder left or is the tree's own:\n%s", raw)
	}
	var cfg map[string]any
	if format, err := plist.Unmarshal(raw, &cfg); err != nil || format != plist.XMLFormat {
		t.Fatalf("config.plist: format %d, %v", format, err)
	}
	gen := dig(t, cfg, "PlatformInfo", "Generic")
	for key, want := range map[string]string{
		"SystemSerialNumber": "C02CK029HX87",
		"MLB":                "C02015700QXJG36CB",
		"SystemUUID":         "4B408A88-4062-4532-9AA1-3D8A3549327F",
		"SystemProductName":  "iMacPro1,1",
	} {
		if got, ok := gen[key].(string); !ok || got != want {
			t.Errorf("PlatformInfo → Generic → %s = %#v, want <string>%s</string>", key, gen[key], want)
		}
	}
	if rom, ok := gen["ROM"].([]byte); !ok || !bytes.Equal(rom, []byte{0x34, 0x31, 0x8F, 0xD3, 0x88, 0xE4}) {
		t.Errorf("ROM = %#v, want <data> of the MAC's six bytes", gen["ROM"])
	}
	if !bytes.Contains(raw, []byte("<key>ROM</key>\n\t\t\t\t<data>NDGP04jk</data>")) {
		t.Errorf("ROM is not written as base64 <data>:\n%s", raw)
	}
	if got := dig(t, cfg, "UEFI", "Output")["Resolution"]; got != resolution {
		t.Errorf("UEFI → Output → Resolution = %#v", got)
	}
	add := dig(t, cfg, "NVRAM", "Add", builder.AgentTokenGUID)
	if tok, ok := add[builder.AgentTokenVariable].([]byte); !ok || string(tok) != testToken {
		t.Errorf("NVRAM → Add → %s → %s = %#v, want <data> of the token", builder.AgentTokenGUID, builder.AgentTokenVariable, add[builder.AgentTokenVariable])
	}
	if _, ok := add["rtc-blacklist"]; !ok {
		t.Error("the template's own variable under the agent GUID was lost")
	}
	del, _ := dig(t, cfg, "NVRAM", "Delete")[builder.AgentTokenGUID].([]any)
	if fmt.Sprint(del) != "[rtc-blacklist dockerios-agent-token]" {
		t.Errorf("NVRAM → Delete → %s = %v", builder.AgentTokenGUID, del)
	}
	return cfg
}

// The image's default template is derived at build time: `template` on
// OSX-KVM's config.plist, then `render` with the result. Here the config is
// a synthetic one with the same key paths.
func TestTemplateThenRender(t *testing.T) {
	const config = "testdata/opencore-config.plist"
	dir := t.TempDir()
	tpl := filepath.Join(dir, "config.plist")
	r := runBinary(t, nil, "template", "--from="+config, "--output="+tpl)
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("template: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// Written atomically (no temporary file left), readable by the image's
	// non-root user.
	if got := entries(t, dir); strings.Join(got, ",") != "config.plist" {
		t.Errorf("output directory holds %v", got)
	}
	if fi, err := os.Stat(tpl); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("template file: %v, %v, want mode 0644", fi, err)
	}
	// Deterministic; without --output it goes to stdout.
	if r := runBinary(t, nil, "template", "--from="+config); r.code != 0 || r.stdout != mustRead(t, tpl) {
		t.Errorf("template to stdout: exit %d, output differs from the file", r.code)
	}
	// Rerunning replaces the file with the same bytes.
	before := mustRead(t, tpl)
	if r := runBinary(t, nil, "template", "--from="+config, "--output="+tpl); r.code != 0 || mustRead(t, tpl) != before {
		t.Errorf("second template run: exit %d, or different bytes", r.code)
	}

	out := t.TempDir()
	const osxKVMCommit = "da4b23b5e92c5b939568700034367e8b7649fe90"
	res := mustSucceed(t, renderRun(t, out, nil, "--template="+tpl, "--template-commit="+osxKVMCommit, "--width=2560", "--height=1440"))
	if res.TemplateCommit != osxKVMCommit || res.TemplateSHA256 != sha(t, tpl) {
		t.Errorf("result records template %s %s, want %s %s", res.TemplateCommit, res.TemplateSHA256, osxKVMCommit, sha(t, tpl))
	}
	cfg := checkRenderedConfig(t, filepath.Join(out, "disk.img"), "2560x1440@32")

	// Apart from the identity, the resolution, the agent token and the
	// OpenCore 1.0.5 keys added with their defaults, the rendered config is
	// the config template started from.
	var want map[string]any
	if _, err := plist.Unmarshal([]byte(mustRead(t, config)), &want); err != nil {
		t.Fatal(err)
	}
	gen := dig(t, want, "PlatformInfo", "Generic")
	gen["SystemProductName"], gen["SystemSerialNumber"], gen["MLB"] = "iMacPro1,1", "C02CK029HX87", "C02015700QXJG36CB"
	gen["SystemUUID"], gen["ROM"], gen["MaxBIOSVersion"] = "4B408A88-4062-4532-9AA1-3D8A3549327F", []byte{0x34, 0x31, 0x8F, 0xD3, 0x88, 0xE4}, false
	dig(t, want, "UEFI", "Output")["Resolution"] = "2560x1440@32"
	dig(t, want, "UEFI")["Unload"] = []any{}
	dig(t, want, "Booter", "Quirks")["ClearTaskSwitchBit"] = false
	dig(t, want, "Misc", "Boot")["ShowPicker"] = false
	dig(t, want, "NVRAM", "Add", builder.AgentTokenGUID)[builder.AgentTokenVariable] = []byte(testToken)
	del := dig(t, want, "NVRAM", "Delete")
	del[builder.AgentTokenGUID] = append(del[builder.AgentTokenGUID].([]any), builder.AgentTokenVariable)
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("rendered config.plist is not the source config with the expected changes:\ngot:  %#v\nwant: %#v", cfg, want)
	}

	if r := runBinary(t, nil, "help"); r.code != 0 || !strings.Contains(r.stdout, "bootdisk template --from") {
		t.Errorf("usage does not name the template command: %q", r.stdout)
	}
}

func TestTemplateBadInput(t *testing.T) {
	config := mustRead(t, "testdata/opencore-config.plist")
	const mlb = "\t\t\t<key>MLB</key>\n\t\t\t<string>DUMMYMLB000000001</string>\n"
	if !strings.Contains(config, mlb) {
		t.Fatal("the test config's MLB moved; update this test")
	}
	writeConfig := func(t *testing.T, s string) string {
		p := filepath.Join(t.TempDir(), "config.plist")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return "--from=" + p
	}
	for _, tc := range []struct {
		name     string
		args     func(t *testing.T) []string
		code     int
		contains string
	}{
		{"no --from", flags(), 2, "--from is required"},
		{"missing config", flags("--from=/nonexistent/config.plist"), 2, "reading the OpenCore config"},
		{"config without MLB", func(t *testing.T) []string {
			return []string{writeConfig(t, strings.Replace(config, mlb, "", 1))}
		}, 2, "PlatformInfo → Generic → MLB is missing"},
		{"Resolution not a string", func(t *testing.T) []string {
			return []string{writeConfig(t, strings.Replace(config, "<string>1920x1080@32</string>", "<integer>1920</integer>", 1))}
		}, 2, "UEFI → Output → Resolution is an integer, want a string"},
		{"not a plist", func(t *testing.T) []string { return []string{writeConfig(t, "hello")} }, 2, "not an XML property list"},
		{"argument", flags("--from=testdata/opencore-config.plist", "extra"), 2, "unexpected argument"},
		{"output directory missing", flags("--from=testdata/opencore-config.plist", "--output=/nonexistent/dir/config.plist"), 3, "creating /nonexistent/dir/config.plist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"template", "--output=" + filepath.Join(dir, "config.plist")}, tc.args(t)...)
			r := runBinary(t, nil, args...)
			checkFailure(t, r, tc.code, tc.contains)
			if got := entries(t, dir); len(got) != 0 {
				t.Errorf("a failed run left %v", got)
			}
		})
	}
}

func TestRenderQCOW2(t *testing.T) {
	out := t.TempDir()
	res := mustSucceed(t, renderRun(t, out, nil, "--format=qcow2"))
	img := filepath.Join(out, "bootdisk.qcow2")
	info, err := exec.Command("qemu-img", "info", "--output=json", img).Output()
	if err != nil {
		t.Fatal(err)
	}
	var qi struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal(info, &qi); err != nil {
		t.Fatal(err)
	}
	if qi.Format != "qcow2" || qi.VirtualSize != 48<<20 || res.SHA256 != sha(t, img) {
		t.Errorf("qemu-img info %+v, result %+v", qi, res)
	}
	// Converted back, it is the raw image byte for byte.
	rawOut := t.TempDir()
	rawRes := mustSucceed(t, renderRun(t, rawOut, nil))
	back := filepath.Join(t.TempDir(), "back.raw")
	if out, err := exec.Command("qemu-img", "convert", "-O", "raw", img, back).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if sha(t, back) != rawRes.SHA256 {
		t.Error("qcow2 and raw images differ in content")
	}
}

func TestRenderReproducible(t *testing.T) {
	for _, format := range []string{"raw", "qcow2"} {
		t.Run(format, func(t *testing.T) {
			a, b := t.TempDir(), t.TempDir()
			ra := mustSucceed(t, renderRun(t, a, nil, "--format="+format))
			time.Sleep(1100 * time.Millisecond) // a different wall clock second
			rb := mustSucceed(t, renderRun(t, b, nil, "--format="+format))
			if ra != rb {
				t.Errorf("two renders differ:\n%+v\n%+v", ra, rb)
			}
			if mustRead(t, filepath.Join(a, builder.ResultFile)) != mustRead(t, filepath.Join(b, builder.ResultFile)) {
				t.Error("result.json differs")
			}
		})
	}
}

func TestRenderRerun(t *testing.T) {
	out := t.TempDir()
	first := mustSucceed(t, renderRun(t, out, nil))
	img := filepath.Join(out, "disk.img")
	before, _ := os.Stat(img)

	// Same inputs: the finished artifact is left alone.
	again := mustSucceed(t, renderRun(t, out, nil))
	after, _ := os.Stat(img)
	if again != first || !os.SameFile(before, after) || !before.ModTime().Equal(after.ModTime()) {
		t.Error("a re-run with the same inputs rewrote the artifact")
	}

	// Different inputs: replaced, and nothing else left behind.
	changed := mustSucceed(t, renderRun(t, out, nil, "--width=1280", "--height=720"))
	if changed.SHA256 == first.SHA256 || readResult(t, out) != changed || sha(t, img) != changed.SHA256 {
		t.Error("a re-run with other inputs did not publish its artifact")
	}
	if got := entries(t, out); strings.Join(got, ",") != "disk.img,result.json" {
		t.Errorf("output directory holds %v", got)
	}
}

// startKilled starts a render that sleeps before publishing, waits until it
// has staged everything, and SIGKILLs it.
func startKilled(t *testing.T, out string, extra ...string) {
	t.Helper()
	args := []string{"render", "--template=testdata/config-template.plist", "--efi-dir=testdata/efi",
		"--output-dir=" + out, "--size-mib=48", "--scratch-dir=" + t.TempDir()}
	for k, v := range testIdentity {
		args = append(args, "--"+k+"="+v)
	}
	cmd := exec.Command(binary, append(args, extra...)...)
	cmd.Env = append(os.Environ(), "DOCKERIOS_AGENT_TOKEN="+testToken, builder.TestHookSleepEnv+"=60s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	hooked := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "test hook") {
			hooked = true
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !hooked {
		t.Fatal("render ended before reaching the test hook")
	}
}

func TestRenderKilledLeavesNothingFinished(t *testing.T) {
	out := t.TempDir()
	startKilled(t, out)
	for _, name := range entries(t, out) {
		if name == "disk.img" || name == builder.ResultFile {
			t.Errorf("a killed run left %s", name)
		}
		if !strings.HasPrefix(name, ".bootdisk-staging-") {
			t.Errorf("a killed run left %s outside its staging directory", name)
		}
	}
	// The next run cleans up and publishes.
	mustSucceed(t, renderRun(t, out, nil))
	if got := entries(t, out); strings.Join(got, ",") != "disk.img,result.json" {
		t.Errorf("after a good run the output directory holds %v", got)
	}
}

func TestRenderKilledKeepsFinishedArtifact(t *testing.T) {
	out := t.TempDir()
	first := mustSucceed(t, renderRun(t, out, nil))
	startKilled(t, out, "--width=1280", "--height=720")
	if got := readResult(t, out); got != first || sha(t, filepath.Join(out, "disk.img")) != first.SHA256 {
		t.Error("a killed re-run damaged the finished artifact")
	}
}

func TestRenderBadInput(t *testing.T) {
	template := mustRead(t, "testdata/config-template.plist")
	writeTemplate := func(t *testing.T, s string) string {
		p := filepath.Join(t.TempDir(), "config.plist")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return "--template=" + p
	}
	for _, tc := range []struct {
		name     string
		env      []string
		args     func(t *testing.T) []string
		code     int
		contains string
	}{
		{name: "short serial", args: flags("--serial=C02CK029HX8"), code: 2, contains: "serialNumber"},
		{name: "bad MLB check character", args: flags("--board-serial=C02015700QXJG36CC"), code: 2, contains: "boardSerialNumber"},
		{name: "bad UUID", args: flags("--uuid=not-a-uuid"), code: 2, contains: "systemUUID"},
		{name: "non-Apple MAC", args: flags("--mac-address=02:00:00:00:00:01"), code: 2, contains: "macAddress"},
		{name: "ROM not the MAC", args: flags("--rom=34318FD388E5"), code: 2, contains: "rom"},
		{name: "bad model", args: flags("--model=iMacPro"), code: 2, contains: "model"},
		{name: "missing token", env: []string{"DOCKERIOS_AGENT_TOKEN="}, args: flags(), code: 2, contains: "agent token missing"},
		{name: "short token", env: []string{"DOCKERIOS_AGENT_TOKEN=abc"}, args: flags(), code: 2, contains: "agent token"},
		{name: "resolution", args: flags("--width=10"), code: 2, contains: "resolution"},
		{name: "unknown format", args: flags("--format=vmdk"), code: 2, contains: "format"},
		{name: "unknown flag", args: flags("--colour=red"), code: 2, contains: "colour"},
		{name: "template lacks {{HEIGHT}}", args: func(t *testing.T) []string {
			return []string{writeTemplate(t, strings.Replace(template, "{{WIDTH}}x{{HEIGHT}}@32", "{{WIDTH}}x1080@32", 1))}
		}, code: 2, contains: "placeholder {{HEIGHT}} is missing"},
		{name: "template lacks {{SERIAL}} but names it in a comment", args: func(t *testing.T) []string {
			return []string{writeTemplate(t, strings.Replace(template, "<string>{{SERIAL}}</string>", "<string>C02CK029HX87</string>", 1))}
		}, code: 2, contains: "placeholder {{SERIAL}} is missing"},
		{name: "template has {{ROM}} inside a longer string", args: func(t *testing.T) []string {
			return []string{writeTemplate(t, strings.Replace(template, "<string>{{ROM}}</string>", "<string>rom-{{ROM}}</string>", 1))}
		}, code: 2, contains: "{{ROM}} must be the whole value"},
		{name: "template has an unknown placeholder", args: func(t *testing.T) []string {
			return []string{writeTemplate(t, strings.Replace(template, "<string>Create</string>", "<string>{{MODE}}</string>", 1))}
		}, code: 2, contains: "unknown placeholder {{MODE}}"},
		{name: "template puts the serial in the wrong key", args: func(t *testing.T) []string {
			s := strings.Replace(template, "<string>{{SERIAL}}</string>", "<string>x</string>", 1)
			s = strings.Replace(s, "<string>Create</string>", "<string>{{SERIAL}}</string>", 1)
			return []string{writeTemplate(t, s)}
		}, code: 2, contains: "SystemSerialNumber"},
		{name: "template is not a plist", args: func(t *testing.T) []string {
			return []string{writeTemplate(t, strings.Replace(template, "</dict>\n</plist>", "", 1))}
		}, code: 2, contains: "not an XML property list"},
		{name: "EFI tree without OpenCore.efi", args: func(t *testing.T) []string {
			d := t.TempDir()
			os.MkdirAll(filepath.Join(d, "EFI/BOOT"), 0o755)
			os.WriteFile(filepath.Join(d, "EFI/BOOT/BOOTx64.efi"), []byte("x"), 0o644)
			return []string{"--efi-dir=" + d}
		}, code: 2, contains: "lacks EFI/OC/OpenCore.efi"},
		{name: "missing output directory", args: flags("--output-dir=/nonexistent/output"), code: 3, contains: "output volume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			r := renderRun(t, out, tc.env, tc.args(t)...)
			checkFailure(t, r, tc.code, tc.contains)
			// The line is the pod's termination message: it names what is
			// wrong, never the value.
			noIdentityValues(t, "the failure line", r.stdout)
			if got := entries(t, out); len(got) != 0 {
				t.Errorf("a failed run left %v", got)
			}
		})
	}
}

func flags(f ...string) func(*testing.T) []string { return func(*testing.T) []string { return f } }

// identityForms are the spellings of the test identity's values, and of
// the values the bad-input tests pass, that must never be printed.
var identityForms = []string{
	"C02CK029HX87", "C02015700QXJG36CB", "4B408A88-4062-4532-9AA1-3D8A3549327F", "4B408A88406245329AA13D8A3549327F",
	"34:31:8F:D3:88:E4", "34318FD388E4", "34-31-8F-D3-88-E4",
	"C02CK029HX8", "C02015700QXJG36CC", "02:00:00:00:00:01", "34318FD388E5",
}

// noIdentityValues fails if out shows any of identityForms, in any case.
func noIdentityValues(t *testing.T, what, out string) {
	t.Helper()
	for _, v := range identityForms {
		if strings.Contains(strings.ToLower(out), strings.ToLower(v)) {
			t.Errorf("%s shows the identity value %s: %q", what, v, out)
		}
	}
}

// secretVolume lays out files as the kubelet mounts a Secret volume: the
// data in a timestamped directory, "..data" linking to it, and one link
// per key.
func secretVolume(t *testing.T, data map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	ts := "..2026_11_30_12_00_00.000000001"
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ts, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, ts, k), []byte(v), 0o440); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// secretIdentity is the test identity as the controller's identity Secret
// holds it.
func secretIdentity() map[string]string {
	return map[string]string{
		"serialNumber": "C02CK029HX87", "boardSerialNumber": "C02015700QXJG36CB",
		"systemUUID": "4B408A88-4062-4532-9AA1-3D8A3549327F", "macAddress": "34:31:8F:D3:88:E4", "rom": "34318FD388E4",
	}
}

// The Job's way: the model as a flag, every other value from the mounted
// identity Secret. The disk is the one the same values as flags give.
func TestRenderIdentityDir(t *testing.T) {
	viaFlags := mustSucceed(t, renderRun(t, t.TempDir(), nil))
	args := []string{"render", "--template=testdata/config-template.plist", "--efi-dir=testdata/efi",
		"--size-mib=48", "--template-commit=0000000000000000000000000000000000000001", "--model=iMacPro1,1"}
	for _, tc := range []struct {
		name  string
		files map[string]string
		extra []string
	}{
		{"every value from the directory", secretIdentity(), nil},
		{"values with a trailing newline, as kubectl create secret --from-file makes them", func() map[string]string {
			m := secretIdentity()
			for k, v := range m {
				m[k] = v + "\n"
			}
			return m
		}(), nil},
		{"without rom: derived from the MAC", func() map[string]string { m := secretIdentity(); delete(m, "rom"); return m }(), nil},
		{"the model from the directory too", func() map[string]string { m := secretIdentity(); m["model"] = "iMacPro1,1"; return m }(), nil},
		{"a flag overrides a file", func() map[string]string { m := secretIdentity(); m["serialNumber"] = "C02FX08QHX87"; return m }(),
			[]string{"--serial=C02CK029HX87"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			a := append(append(args, "--identity-dir="+secretVolume(t, tc.files), "--output-dir="+out, "--scratch-dir="+t.TempDir()), tc.extra...)
			res := mustSucceed(t, runBinary(t, []string{"DOCKERIOS_AGENT_TOKEN=" + testToken}, a...))
			if res.SHA256 != viaFlags.SHA256 || res.InputDigest != viaFlags.InputDigest {
				t.Errorf("result %+v, want the disk the flags give, %+v", res, viaFlags)
			}
		})
	}
}

func TestRenderIdentityDirBadInput(t *testing.T) {
	args := func(dir string) []string {
		return []string{"render", "--template=testdata/config-template.plist", "--efi-dir=testdata/efi",
			"--output-dir=" + t.TempDir(), "--scratch-dir=" + t.TempDir(), "--model=iMacPro1,1", "--identity-dir=" + dir}
	}
	for _, tc := range []struct {
		name     string
		dir      func(t *testing.T) string
		contains string
	}{
		{"no such directory", func(*testing.T) string { return "/nonexistent/identity" }, "identity directory"},
		{"a missing value", func(t *testing.T) string {
			m := secretIdentity()
			delete(m, "boardSerialNumber")
			return secretVolume(t, m)
		}, "boardSerialNumber is missing"},
		{"a bad value is named, never shown", func(t *testing.T) string {
			m := secretIdentity()
			m["serialNumber"] = "C02CK029HX8"
			return secretVolume(t, m)
		}, "serialNumber"},
		{"a ROM that is not the MAC", func(t *testing.T) string {
			m := secretIdentity()
			m["rom"] = "34318FD388E5"
			return secretVolume(t, m)
		}, "rom"},
		{"an oversized file", func(t *testing.T) string {
			m := secretIdentity()
			m["systemUUID"] = strings.Repeat("4B408A88-4062-4532-9AA1-3D8A3549327F", 100)
			return secretVolume(t, m)
		}, "systemUUID is longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBinary(t, []string{"DOCKERIOS_AGENT_TOKEN=" + testToken}, args(tc.dir(t))...)
			checkFailure(t, r, 2, tc.contains)
			noIdentityValues(t, "the failure line", r.stdout)
			noIdentityValues(t, "stderr", r.stderr)
		})
	}
}

// checkFailure checks the failure contract: the exit code, exactly one line
// on stdout, the same line in the termination log.
func checkFailure(t *testing.T, r runResult, code int, contains string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d (stdout %q, stderr %q)", r.code, code, r.stdout, r.stderr)
	}
	if strings.Count(r.stdout, "\n") != 1 || !strings.HasPrefix(r.stdout, "bootdisk: ") || !strings.Contains(r.stdout, contains) {
		t.Errorf("stdout %q: want one line starting \"bootdisk: \" containing %q", r.stdout, contains)
	}
	if r.termLog != r.stdout {
		t.Errorf("termination log %q, want %q", r.termLog, r.stdout)
	}
}

// mountTmpfs mounts a small tmpfs for the output-volume tests, which need
// root (CI runs them as root); elsewhere they are skipped.
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs output volume")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	return dir
}

func TestRenderOutputVolumeFull(t *testing.T) {
	for _, format := range []string{"raw", "qcow2"} {
		t.Run(format, func(t *testing.T) {
			out := mountTmpfs(t, "size=16k")
			r := renderRun(t, out, nil, "--format="+format)
			checkFailure(t, r, 3, "no space left on device")
			if got := entries(t, out); len(got) != 0 {
				t.Errorf("a failed run left %v", got)
			}
		})
	}
}

func TestRenderOutputVolumeReadOnly(t *testing.T) {
	out := mountTmpfs(t, "size=1m,ro")
	r := renderRun(t, out, nil)
	checkFailure(t, r, 3, "read-only file system")
}

func TestGenerate(t *testing.T) {
	r := runBinary(t, nil, "generate", "--macserial=testdata/fake-macserial", "--model=iMacPro1,1", "--num=5", "--seed=7")
	if r.code != 0 {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	rows, rowErrs, err := identity.ParseRows(strings.NewReader(r.stdout))
	if err != nil || len(rowErrs) != 0 || len(rows) != 5 {
		t.Fatalf("generated rows: %d rows, errors %v, %v\n%s", len(rows), rowErrs, err, r.stdout)
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Split(line, ",")
		// "MODEL" is quoted and has a comma: 9 pieces, every field quoted.
		if len(f) != 9 || !strings.HasPrefix(line, `"iMacPro1,1","`) || !strings.HasSuffix(line, `,"1920","1080",""`) {
			t.Errorf("row %q is not osx-serial-generator's CSV format", line)
		}
	}
	if *update {
		if err := os.WriteFile(goldenCSV, []byte(r.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want := mustRead(t, goldenCSV); r.stdout != want {
		t.Errorf("generate no longer writes %s (run go test ./cmd/bootdisk -run TestGenerate -update):\n%s", goldenCSV, r.stdout)
	}

	// Without a seed the UUIDs and MACs are random.
	r2 := runBinary(t, nil, "generate", "--macserial=testdata/fake-macserial", "--num=2")
	if r2.code != 0 || r2.stdout == r.stdout[:len(r2.stdout)] {
		t.Errorf("unseeded generate: exit %d, %q", r2.code, r2.stdout)
	}

	// To a file, atomically.
	file := filepath.Join(t.TempDir(), "serials.csv")
	if r := runBinary(t, nil, "generate", "--macserial=testdata/fake-macserial", "--num=5", "--seed=7", "--output="+file); r.code != 0 || mustRead(t, file) != want(t) {
		t.Errorf("generate --output: exit %d %q", r.code, r.stdout)
	}
}

func want(t *testing.T) string { return mustRead(t, goldenCSV) }

func TestGenerateBadInput(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      []string
		args     []string
		code     int
		contains string
	}{
		{"unknown model warning", []string{"FAKE_MACSERIAL_EXTRA=WARN: Unknown model, assuming default!"}, []string{"--num=2"}, 2, "Unknown model"},
		{"not a model", nil, []string{"--model=Mac"}, 2, "model"},
		{"count", nil, []string{"--num=0"}, 2, "count"},
		{"garbage output", []string{"FAKE_MACSERIAL_EXTRA=hello"}, []string{"--num=1"}, 2, "not \"SERIAL | MLB\""},
		{"too few serials", nil, []string{"--num=6"}, 1, "printed 5 serials, want 6"},
		{"legacy 11-character serial", []string{"FAKE_MACSERIAL_EXTRA=W8803J1ZYXK | W88033100J9F"}, []string{"--num=1"}, 2, "not a valid identity"},
		{"missing macserial", nil, []string{"--macserial=/nonexistent/macserial"}, 1, "macserial"},
		{"macserial refuses the model", []string{"FAKE_MACSERIAL_FAIL=Model id (-1) or name (Foo1,1) is out of valid range [0, 120]!"}, []string{"--model=Foo1,1"}, 2, "out of valid range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"generate", "--macserial=testdata/fake-macserial"}, tc.args...)
			r := runBinary(t, tc.env, args...)
			checkFailure(t, r, tc.code, tc.contains)
		})
	}
}

func dig(t *testing.T, m map[string]any, path ...string) map[string]any {
	t.Helper()
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			t.Fatalf("%s is not a dictionary", strings.Join(path, " → "))
		}
		m = next
	}
	return m
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// --version prints the version the build stamped and exits 0, wherever it
// stands and with nothing else given: no identity, no output volume.
func TestVersionFlag_PrintsTheStampedVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}} {
		r := runBinary(t, nil, args...)
		if r.code != builder.ExitOK || r.stdout != versiontest.Stamp+"\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 0 and %q", args, r.code, r.stdout, r.stderr, versiontest.Stamp+"\n")
		}
	}
}
