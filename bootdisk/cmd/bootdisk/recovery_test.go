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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dockerios/dockerios/bootdisk/internal/recovery/recoverytest"
)

const recoveryScript = "../../recovery/fetch-macOS-v2.py"

// recoveryGolden holds result lines of the runs below, one "NAME<TAB>LINE"
// a line. The Apache-2.0 module's pkg/bootdisk test parses them with
// ParseRecoveryResult, so the contract is checked on both sides. Refresh
// after a deliberate change with go test ./cmd/bootdisk -run TestRecovery -update.
const recoveryGolden = "testdata/recovery-results.txt"

// goldenResult compares a result line with the golden one of that name:
// equal but for imageSHA256, which depends on compress/flate's output (the
// test checks it against the DMG it served).
func goldenResult(t *testing.T, name, line string) {
	t.Helper()
	b, err := os.ReadFile(recoveryGolden)
	if err != nil && !(*update && errors.Is(err, os.ErrNotExist)) {
		t.Fatal(err)
	}
	golden := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if k, v, ok := strings.Cut(l, "\t"); ok {
			golden[k] = v
		}
	}
	line = strings.TrimSuffix(line, "\n")
	if *update {
		golden[name] = line
		var out []string
		for k, v := range golden {
			out = append(out, k+"\t"+v)
		}
		slices.Sort(out)
		if err := os.WriteFile(recoveryGolden, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	var got, want map[string]any
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(golden[name]), &want); err != nil {
		t.Fatalf("golden %s: %v", name, err)
	}
	if _, ok := want["imageSHA256"]; ok {
		want["imageSHA256"] = got["imageSHA256"]
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("result line %s\nwant (%s) %s", line, recoveryGolden, golden[name])
	}
}

func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed (hack/install-debian-packages.sh installs it)")
	}
}

// recoveryRun runs `bootdisk recovery` with exactly env (the fake's: its
// proxy, and the test-only key swap), against the committed script.
func recoveryRun(t *testing.T, env []string, out string, extra ...string) runResult {
	t.Helper()
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"recovery", "--script=" + recoveryScript, "--output-dir=" + out,
		"--scratch-dir=" + t.TempDir(), "--progress-interval=100ms"}, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(env, "DOCKERIOS_BOOTDISK_TERMINATION_LOG="+termLog)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := runResult{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(termLog)
	r.termLog = string(b)
	return r
}

type recoveryResult struct {
	Reason, Release, BoardID, Product, ImageSHA256, Message string
	RawBytes                                                int64
}

// resultLine checks stdout and the termination log hold the same single
// JSON line, under 4096 bytes, and returns it decoded.
func resultLine(t *testing.T, r runResult) recoveryResult {
	t.Helper()
	if r.stdout != r.termLog || strings.Count(r.stdout, "\n") != 1 || !strings.HasSuffix(r.stdout, "\n") || len(r.stdout) >= 4096 {
		t.Fatalf("stdout %q, termination log %q: want the same one line", r.stdout, r.termLog)
	}
	var res recoveryResult
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("result line %q: %v", r.stdout, err)
	}
	return res
}

func TestRecoveryEndToEnd(t *testing.T) {
	needPython(t)
	content := recoverytest.DiskContent(6<<20, 42)
	dmg, _ := recoverytest.UDIF(content)
	s := &recoverytest.Service{DMG: dmg, Boards: map[string]string{"Mac-4B682C642B45593E": "041-88800"}}
	env := s.Start(t, recoveryScript)
	out := t.TempDir()
	r := recoveryRun(t, env, out, "--release=ventura")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	res := resultLine(t, r)
	goldenResult(t, "converted", r.stdout)
	sum := sha256.Sum256(dmg)
	want := recoveryResult{Reason: "Converted", Release: "ventura", BoardID: "Mac-4B682C642B45593E", Product: "041-88800",
		ImageSHA256: hex.EncodeToString(sum[:]), RawBytes: int64(len(content)), Message: res.Message}
	if res != want || !strings.Contains(res.Message, "041-88800") {
		t.Errorf("result %+v\nwant   %+v", res, want)
	}
	if reqs := s.Requests(); len(reqs) != 1 || reqs[0].Board != "Mac-4B682C642B45593E" || reqs[0].OS != "latest" {
		t.Errorf("the service was asked %+v", reqs)
	}
	raw, err := os.ReadFile(filepath.Join(out, "disk.img"))
	if err != nil || !bytes.Equal(raw, content) {
		t.Fatalf("disk.img differs from the DMG's content (%v)", err)
	}
	if ents := entries(t, out); len(ents) != 1 {
		t.Errorf("output directory holds %v", ents)
	}
	m := regexp.MustCompile(`(?m)^progress ([0-9]+) ([0-9]+)$`).FindAllStringSubmatch(r.stderr, -1)
	if len(m) == 0 || m[len(m)-1][1] != m[len(m)-1][2] || m[len(m)-1][2] != itoa(len(dmg)) {
		t.Errorf("progress lines %v, want the last at %d of %d\n%s", m, len(dmg), len(dmg), r.stderr)
	}
	if !strings.Contains(r.stderr, "fetch-macOS-v2.py: Image verification complete!\n") {
		t.Errorf("stderr lacks the script's output:\n%s", r.stderr)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestRecoveryFailures(t *testing.T) {
	needPython(t)
	content := recoverytest.DiskContent(2<<20, 7)
	dmg, _ := recoverytest.UDIF(content)
	for _, c := range []struct {
		name   string
		golden string
		mode   recoverytest.Mode
		args   []string
		code   int
		reason string
		msg    string
	}{
		{"board the service refuses", "service-refused", recoverytest.Normal, []string{"--release=sonoma", "--board-id=Mac-0123456789ABCDEF"}, 4, "ServiceRefused",
			`the recovery service refused: "HTTP Error 403: Forbidden" when connecting to http://osrecovery.apple.com/InstallationPayload/RecoveryImage`},
		{"image not matching its chunklist", "checksum-mismatch", recoverytest.CorruptImage, []string{"--release=sonoma"}, 5, "ChecksumMismatch",
			"fetch-macOS-v2.py: Image verification failed. (Invalid chunk 1: hash mismatch)"},
		{"unknown release", "invalid", recoverytest.Normal, []string{"--release=sonoma14"}, 2, "Failed",
			`unknown release "sonoma14": fetch-macOS-v2.py knows high-sierra, mojave, catalina, big-sur, monterey, ventura, sonoma, sequoia, tahoe`},
		{"no release", "", recoverytest.Normal, nil, 2, "Failed", "--release is required: one of high-sierra, mojave,"},
		{"bad flag", "", recoverytest.Normal, []string{"--releases=sonoma"}, 2, "Failed", "flag provided but not defined: -releases"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &recoverytest.Service{DMG: dmg, Mode: c.mode, Boards: map[string]string{"Mac-827FAC58A8FDFA22": "041-00014"}}
			env := s.Start(t, recoveryScript)
			out := t.TempDir()
			if err := os.WriteFile(filepath.Join(out, "disk.img"), []byte("an earlier run's"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := recoveryRun(t, env, out, c.args...)
			res := resultLine(t, r)
			if c.golden != "" {
				goldenResult(t, c.golden, r.stdout)
			}
			if r.code != c.code || res.Reason != c.reason || !strings.Contains(res.Message, c.msg) {
				t.Errorf("exit %d, %+v; want %d %s %q\nstderr %s", r.code, res, c.code, c.reason, c.msg, r.stderr)
			}
			if res.ImageSHA256 != "" || res.RawBytes != 0 {
				t.Errorf("a failure reports an image: %+v", res)
			}
			_, err := os.Stat(filepath.Join(out, "disk.img"))
			if c.code != 2 && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("disk.img after a failed run: %v", err)
			}
		})
	}
}

// TestRecoveryCommandHasNoTestSupport: the fake service and the key swap are
// test code; the command never links them.
func TestRecoveryCommandHasNoTestSupport(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.Fields(string(out))
	found := false
	for _, d := range deps {
		if strings.HasSuffix(d, "/internal/recovery/recoverytest") || d == "net/http/httptest" {
			t.Errorf("bootdisk depends on %s", d)
		}
		found = found || strings.HasSuffix(d, "/bootdisk/internal/recovery")
	}
	if !found {
		t.Error("bootdisk does not depend on internal/recovery: the check above checks nothing")
	}
}
