// Copyright The DockerIOS Authors.
// SPDX-License-Identifier: GPL-3.0-or-later
//
// This file is part of the DockerIOS bootdisk builder, which is free
// software: you can redistribute it and/or modify it under the terms of the
// GNU General Public License as published by the Free Software Foundation,
// either version 3 of the License, or (at your option) any later version.
// See bootdisk/LICENSE.

package recovery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dockerios/dockerios/bootdisk/internal/builder"
	"github.com/dockerios/dockerios/bootdisk/internal/recovery/recoverytest"
)

// The committed, unchanged script (bootdisk/recovery).
const script = "../../recovery/fetch-macOS-v2.py"

// needTools skips when the interpreter or qemu-img is missing;
// hack/install-debian-packages.sh installs both (python3, qemu-utils), so CI
// never skips.
func needTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"python3", "qemu-img"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian: python3, qemu-utils; hack/install-debian-packages.sh installs them)", tool)
		}
	}
}

// testImage is a small BaseSystem-like disk as a UDIF, and its content.
func testImage(t *testing.T, seed uint64) (dmg, content []byte) {
	t.Helper()
	content = recoverytest.DiskContent(4<<20, seed)
	dmg, types := recoverytest.UDIF(content)
	if types.Zlib == 0 || types.Raw == 0 || types.Zero == 0 || types.Ignore == 0 {
		t.Fatalf("test image lacks a chunk type: %+v", types)
	}
	return dmg, content
}

const (
	sonomaBoard  = "Mac-827FAC58A8FDFA22"
	venturaBoard = "Mac-4B682C642B45593E"
	otherBoard   = "Mac-7BA5B2D9E42DDD94" // iMacPro1,1: high-sierra's and sequoia's row
)

func service(dmg []byte) *recoverytest.Service {
	return &recoverytest.Service{DMG: dmg, ChunkSize: 256 << 10, Boards: map[string]string{
		sonomaBoard: "041-00014", venturaBoard: "041-00013", otherBoard: "041-00015",
	}}
}

type logBuf struct {
	mu    sync.Mutex
	b     bytes.Buffer
	times []time.Time
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range bytes.Count(p, []byte("\n")) {
		l.times = append(l.times, time.Now())
	}
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func options(t *testing.T, env []string, release string) (Options, *logBuf) {
	log := &logBuf{}
	return Options{Release: release, OutputDir: t.TempDir(), ScratchDir: t.TempDir(), Script: script,
		Python: "python3", Env: env, Log: log, ProgressInterval: 50 * time.Millisecond}, log
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestScriptIsThePinnedOne: the committed script is byte for byte the one
// pins.sh pins (OSX-KVM's at OSX_KVM_COMMIT).
func TestScriptIsThePinnedOne(t *testing.T) {
	pins, err := os.ReadFile("../../image/pins.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^FETCH_MACOS_SHA256=([0-9a-f]{64})$`).FindSubmatch(pins)
	if m == nil {
		t.Fatal("pins.sh has no FETCH_MACOS_SHA256")
	}
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if got := sha(b); got != string(m[1]) {
		t.Fatalf("%s: sha256 %s, pins.sh says %s", script, got, m[1])
	}
}

// TestParseProducts reads the release table from the pinned script.
func TestParseProducts(t *testing.T) {
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := ParseProducts(b)
	if err != nil {
		t.Fatal(err)
	}
	var shorts []string
	for _, p := range ps {
		shorts = append(shorts, p.Short)
	}
	want := []string{"high-sierra", "mojave", "catalina", "big-sur", "monterey", "ventura", "sonoma", "sequoia", "tahoe"}
	if !slices.Equal(shorts, want) {
		t.Fatalf("releases %v, want %v", shorts, want)
	}
	for _, c := range []Product{
		{Short: "sonoma", BoardID: sonomaBoard, MLB: "00000000000000000", OSType: "default"},
		{Short: "ventura", BoardID: venturaBoard, MLB: "00000000000000000", OSType: "latest"},
		{Short: "high-sierra", BoardID: otherBoard, MLB: "00000000000J80300", OSType: "default"},
		{Short: "tahoe", BoardID: "Mac-CFF7D910A743CAAF", MLB: "00000000000000000", OSType: "latest"},
	} {
		p, ok := Lookup(ps, c.Short)
		p.Name = ""
		if !ok || p != c {
			t.Errorf("%s: %+v, want %+v", c.Short, p, c)
		}
	}
	if _, ok := Lookup(ps, "sonoma-14"); ok {
		t.Error("Lookup found an unknown release")
	}
	for name, src := range map[string]string{
		"no table":     "def main():\n    pass\n",
		"empty table":  "    products = [\n    ]\n",
		"not one line": "    products = [\n" + `            {"name": "Sonoma", "b": "Mac-827FAC58A8FDFA22",` + "\n" + `"m": "00000000000000000", "short": "sonoma"},` + "\n    ]\n",
		"bad board":    "    products = [\n" + `            {"name": "x", "b": "Mac-827fac58a8fdfa22", "m": "00000000000000000", "short": "sonoma"},` + "\n    ]\n",
		"bad os":       "    products = [\n" + `            {"name": "x", "b": "Mac-827FAC58A8FDFA22", "m": "00000000000000000", "os_type": "oldest", "short": "sonoma"},` + "\n    ]\n",
		"duplicate":    "    products = [\n" + strings.Repeat(`            {"name": "x", "b": "Mac-827FAC58A8FDFA22", "m": "00000000000000000", "short": "sonoma"},`+"\n", 2) + "    ]\n",
	} {
		if ps, err := ParseProducts([]byte(src)); err == nil {
			t.Errorf("%s: parsed %+v", name, ps)
		}
	}
}

func TestChunklistAndVerifyImage(t *testing.T) {
	img := bytes.Repeat([]byte("0123456789abcdef"), 70000) // 1,120,000 bytes: 5 chunks, the last short
	cnk := recoverytest.Chunklist(img, 256<<10, recoverytest.Key())
	cl, err := ParseChunklist(cnk)
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.Chunks) != 5 || cl.Total() != int64(len(img)) || cl.SignatureMethod != 1 {
		t.Fatalf("%d chunks, total %d, signature method %d", len(cl.Chunks), cl.Total(), cl.SignatureMethod)
	}
	write := func(b []byte) string {
		p := filepath.Join(t.TempDir(), "BaseSystem.dmg")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sum, size, err := VerifyImage(write(img), cl)
	if err != nil || sum != sha(img) || size != int64(len(img)) {
		t.Fatalf("VerifyImage: %s %d %v", sum, size, err)
	}
	flipped := bytes.Clone(img)
	flipped[3*(256<<10)+7] ^= 1
	for name, b := range map[string][]byte{
		"a changed byte":  flipped,
		"truncated":       img[:len(img)-1],
		"one chunk short": img[:4*(256<<10)],
		"a byte more":     append(bytes.Clone(img), 0),
	} {
		if _, _, err := VerifyImage(write(b), cl); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: %v, want a mismatch", name, err)
		}
	}
	bad := func(mut func([]byte)) []byte { b := bytes.Clone(cnk); mut(b); return b }
	for name, b := range map[string][]byte{
		"magic":            bad(func(b []byte) { b[0] = 'X' }),
		"signature method": bad(func(b []byte) { b[10] = 3 }),
		"zero chunks":      bad(func(b []byte) { clear(b[12:20]) }),
		"signature offset": bad(func(b []byte) { b[28]++ }),
		"short":            cnk[:0x24+0x24*2],
		"header only":      cnk[:0x20],
	} {
		if _, err := ParseChunklist(b); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// TestScriptNeedsATerminal shows why bootdisk runs the script on a
// pseudo-terminal: with its output on a pipe, as a pod's is, its
// verify_image calls os.get_terminal_size() unguarded and reports every
// image as failing verification.
func TestScriptNeedsATerminal(t *testing.T) {
	needTools(t)
	dmg, _ := testImage(t, 1)
	s := service(dmg)
	env := s.Start(t, script)
	out := t.TempDir()
	cmd := exec.Command("python3", script, "--action", "download", "-b", sonomaBoard, "-m", "00000000000000000", "-o", out, "-n", "BaseSystem")
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(b), "Image verification failed. ([Errno 25] Inappropriate ioctl for device)") {
		t.Fatalf("script on a pipe: %v\n%s", err, b)
	}
}

func run(t *testing.T, o Options) (Result, error, string, int) {
	t.Helper()
	res, err := Run(context.Background(), o)
	reason, code := Classify(err)
	if err == nil {
		reason = res.Reason
	}
	return res, err, reason, code
}

// TestRunReleases runs the real script against the fake for two releases
// whose rows differ in board-id and os type, and checks the fake was asked
// as the script's table says, and that disk.img is the DMG's content.
func TestRunReleases(t *testing.T) {
	needTools(t)
	for _, c := range []struct {
		release, board, os, product string
	}{
		{"sonoma", sonomaBoard, "default", "041-00014"},
		{"ventura", venturaBoard, "latest", "041-00013"},
	} {
		t.Run(c.release, func(t *testing.T) {
			dmg, content := testImage(t, 2)
			s := service(dmg)
			o, log := options(t, s.Start(t, script), c.release)
			res, err, _, _ := run(t, o)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			want := Result{Reason: ReasonConverted, Release: c.release, BoardID: c.board, Product: c.product,
				ImageSHA256: sha(dmg), RawBytes: int64(len(content)), Message: res.Message}
			if res != want {
				t.Errorf("result %+v\nwant   %+v", res, want)
			}
			reqs := s.Requests()
			if len(reqs) != 1 || reqs[0].Board != c.board || reqs[0].MLB != "00000000000000000" || reqs[0].OS != c.os ||
				len(reqs[0].CID) != 16 || len(reqs[0].K) != 64 || len(reqs[0].FG) != 64 {
				t.Errorf("the service was asked %+v, want board %s, MLB zero, os %s", reqs, c.board, c.os)
			}
			gets := s.AssetGets()
			if len(gets) != 2 || !strings.HasPrefix(gets[0], "200 ") || !strings.HasSuffix(gets[0], ".chunklist") ||
				!strings.HasPrefix(gets[1], "200 ") || !strings.HasSuffix(gets[1], ".dmg") {
				t.Errorf("asset requests %v", gets)
			}
			raw, err := os.ReadFile(filepath.Join(o.OutputDir, ImageFile))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(raw, content) {
				t.Errorf("disk.img (%d bytes) is not the DMG's content (%d bytes)", len(raw), len(content))
			}
			if ents, _ := os.ReadDir(o.OutputDir); len(ents) != 1 {
				t.Errorf("output directory holds %v", ents)
			}
			if ents, _ := os.ReadDir(o.ScratchDir); len(ents) != 0 {
				t.Errorf("scratch directory holds %v", ents)
			}
			for _, l := range []string{"fetch-macOS-v2.py: Downloading " + c.product + "...", "fetch-macOS-v2.py: Image verification complete!"} {
				if !strings.Contains(log.String(), l+"\n") {
					t.Errorf("log lacks %q:\n%s", l, log)
				}
			}
			if strings.Contains(log.String(), "% downloaded") || strings.Contains(log.String(), "Chunk 1 (") {
				t.Errorf("the script's progress bars reached the log:\n%s", log)
			}
		})
	}
}

func TestRunBoardIDOverride(t *testing.T) {
	needTools(t)
	dmg, _ := testImage(t, 3)
	s := service(dmg)
	o, log := options(t, s.Start(t, script), "sonoma")
	o.BoardID = otherBoard
	res, err, _, _ := run(t, o)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if reqs := s.Requests(); len(reqs) != 1 || reqs[0].Board != otherBoard || reqs[0].OS != "default" {
		t.Errorf("the service was asked %+v, want board %s", reqs, otherBoard)
	}
	if res.BoardID != otherBoard || res.Product != "041-00015" {
		t.Errorf("result %+v", res)
	}
}

func TestRunInvalid(t *testing.T) {
	o, _ := options(t, nil, "sonoma-14")
	_, err, reason, code := run(t, o)
	if reason != ReasonFailed || code != builder.ExitInvalidInput || err == nil ||
		!strings.Contains(err.Error(), `unknown release "sonoma-14": fetch-macOS-v2.py knows high-sierra, mojave, catalina, big-sur, monterey, ventura, sonoma, sequoia, tahoe`) {
		t.Errorf("unknown release: %s %d %v", reason, code, err)
	}
	o, _ = options(t, nil, "sonoma")
	o.BoardID = "Mac-827fac58a8fdfa22"
	if _, err, _, code := run(t, o); code != builder.ExitInvalidInput {
		t.Errorf("lower-case board-id: %d %v", code, err)
	}
	o, _ = options(t, nil, "sonoma")
	o.OutputDir = filepath.Join(o.OutputDir, "absent")
	if _, err, _, code := run(t, o); code != builder.ExitOutputVolume {
		t.Errorf("absent output directory: %d %v", code, err)
	}
}

// staleOutput puts what an earlier run could have left in dir.
func staleOutput(t *testing.T, dir string) {
	for _, n := range []string{ImageFile, "." + ImageFile + ".tmp-123"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRunFailures(t *testing.T) {
	needTools(t)
	for _, c := range []struct {
		name    string
		mode    recoverytest.Mode
		board   string // asked for instead of the table's
		reason  string
		code    int
		message string
	}{
		{"unknown board", recoverytest.Normal, "Mac-0123456789ABCDEF", ReasonServiceRefused, ExitServiceRefused,
			`the recovery service refused: "HTTP Error 403: Forbidden" when connecting to http://osrecovery.apple.com/InstallationPayload/RecoveryImage`},
		{"refused", recoverytest.Refuse, "", ReasonServiceRefused, ExitServiceRefused, "HTTP Error 403: Forbidden"},
		{"expired asset token", recoverytest.ExpiredToken, "", ReasonServiceRefused, ExitServiceRefused, `"HTTP Error 403: Forbidden" when connecting to http://oscdn.apple.com/content/downloads/041-00014/`},
		{"missing key", recoverytest.MissingKey, "", ReasonServiceRefused, ExitServiceRefused, "RuntimeError: Missing key CU"},
		{"no session", recoverytest.NoSession, "", ReasonServiceRefused, ExitServiceRefused, "RuntimeError: No session in headers"},
		{"corrupt image", recoverytest.CorruptImage, "", ReasonChecksumMismatch, ExitChecksumMismatch, "Image verification failed. (Invalid chunk 3: hash mismatch)"},
		{"bad signature", recoverytest.BadSignature, "", ReasonChecksumMismatch, ExitChecksumMismatch, "Image verification failed. (assert pow(signature, 0x10001, Apple_EFI_ROM_public_key_1) == plaintext)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dmg, _ := testImage(t, 4)
			s := service(dmg)
			s.Mode = c.mode
			o, log := options(t, s.Start(t, script), "sonoma")
			o.BoardID = c.board
			staleOutput(t, o.OutputDir)
			_, err, reason, code := run(t, o)
			if reason != c.reason || code != c.code || err == nil || !strings.Contains(err.Error(), c.message) {
				t.Errorf("%s %d %v; want %s %d %q\n%s", reason, code, err, c.reason, c.code, c.message, log)
			}
			if ents, _ := os.ReadDir(o.OutputDir); len(ents) != 0 {
				t.Errorf("output directory holds %v", ents)
			}
			if ents, _ := os.ReadDir(o.ScratchDir); len(ents) != 0 {
				t.Errorf("scratch directory holds %v", ents)
			}
		})
	}
}

// fakePython writes a script that stands in for the interpreter: it leaves
// chunklist and dmg in the -o directory as the real script would and exits
// 0, so what bootdisk itself checks after a successful download is tested.
func fakePython(t *testing.T, chunklist, dmg []byte) string {
	dir := t.TempDir()
	for n, b := range map[string][]byte{"chunklist": chunklist, "dmg": dmg} {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "python3")
	sh := fmt.Sprintf(`#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done
echo "Downloading 041-99999..."
cp %[1]s/chunklist "$out/BaseSystem.chunklist" && cp %[1]s/dmg "$out/BaseSystem.dmg"
`, dir)
	if err := os.WriteFile(p, []byte(sh), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunVerifiesWhatItConverts: bootdisk checks the downloaded image
// against the chunklist itself before converting it, whatever the script
// said.
func TestRunVerifiesWhatItConverts(t *testing.T) {
	needTools(t)
	dmg, content := testImage(t, 5)
	cnk := recoverytest.Chunklist(dmg, 256<<10, recoverytest.Key())
	changed := bytes.Clone(dmg)
	changed[1000] ^= 1
	for _, c := range []struct {
		name   string
		dmg    []byte
		reason string
	}{
		{"matching", dmg, ReasonConverted},
		{"a changed byte", changed, ReasonChecksumMismatch},
		{"truncated", dmg[:len(dmg)-512], ReasonChecksumMismatch},
		{"a byte more", append(bytes.Clone(dmg), 0), ReasonChecksumMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, log := options(t, nil, "sonoma")
			o.Python = fakePython(t, cnk, c.dmg)
			res, err, reason, code := run(t, o)
			if reason != c.reason {
				t.Fatalf("%s %d %v\n%s", reason, code, err, log)
			}
			raw, rerr := os.ReadFile(filepath.Join(o.OutputDir, ImageFile))
			if c.reason == ReasonConverted {
				if rerr != nil || !bytes.Equal(raw, content) || res.Product != "041-99999" {
					t.Errorf("disk.img: %v; result %+v", rerr, res)
				}
				return
			}
			if code != ExitChecksumMismatch || !errors.Is(rerr, os.ErrNotExist) {
				t.Errorf("exit %d; disk.img: %v", code, rerr)
			}
		})
	}
}

// TestConvertUDIF converts a generated UDIF with qemu-img and compares
// the raw disk with the content byte for byte; a truncated DMG is refused
// and leaves nothing.
func TestConvertUDIF(t *testing.T) {
	needTools(t)
	for _, size := range []int{4 << 20, 3<<20 + 7*512} {
		content := recoverytest.DiskContent(size, uint64(size))
		dmg, _ := recoverytest.UDIF(content)
		p := filepath.Join(t.TempDir(), "BaseSystem.dmg")
		if err := os.WriteFile(p, dmg, 0o644); err != nil {
			t.Fatal(err)
		}
		o := Options{OutputDir: t.TempDir(), QemuImg: "qemu-img", Log: &logBuf{}}
		n, err := convert(context.Background(), o, p)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(o.OutputDir, ImageFile))
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(size) || !bytes.Equal(raw, content) {
			t.Errorf("size %d: converted %d bytes, equal %v", size, n, bytes.Equal(raw, content))
		}
		if !bytes.Equal(raw[512:520], []byte("EFI PART")) || !bytes.Equal(raw[40*512+1024:40*512+1026], []byte("H+")) {
			t.Error("the content has no GPT header or HFS+ volume header")
		}

		// A DMG qemu-img opens but cannot read to the end (its last zlib
		// chunk corrupt): the conversion fails after the target exists, and
		// leaves no disk.img, whole or partial.
		_, types := recoverytest.UDIF(content)
		bad := bytes.Clone(dmg)
		last := types.ZlibOffsets[len(types.ZlibOffsets)-1]
		copy(bad[last+2:], "corrupt!")
		q := filepath.Join(t.TempDir(), "BaseSystem.dmg")
		if err := os.WriteFile(q, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		o.OutputDir = t.TempDir()
		if _, err := convert(context.Background(), o, q); err == nil || !strings.Contains(err.Error(), "qemu-img convert") {
			t.Errorf("corrupt zlib chunk: %v", err)
		}
		if ents, _ := os.ReadDir(o.OutputDir); len(ents) != 0 {
			t.Errorf("a failed conversion left %v", ents)
		}

		for _, cut := range []int{len(dmg) / 2, len(dmg) - 600} {
			q := filepath.Join(t.TempDir(), "BaseSystem.dmg")
			if err := os.WriteFile(q, dmg[:cut], 0o644); err != nil {
				t.Fatal(err)
			}
			o.OutputDir = t.TempDir()
			if _, err := convert(context.Background(), o, q); err == nil || !strings.Contains(err.Error(), "qemu-img") {
				t.Errorf("truncated to %d bytes: %v", cut, err)
			}
			if ents, _ := os.ReadDir(o.OutputDir); len(ents) != 0 {
				t.Errorf("truncated DMG left %v", ents)
			}
		}
	}
}

var progressLine = regexp.MustCompile(`^progress ([0-9]+) ([0-9]+)$`)

// TestRunProgress: while the image downloads, "progress DONE TOTAL" lines,
// at most one per interval, DONE growing to TOTAL, the image's size.
func TestRunProgress(t *testing.T) {
	needTools(t)
	// The script writes the image 1 MiB at a time. The service sleeps
	// 20 ms after each 64 KiB, so each MiB takes at least 320 ms and the
	// ~6 MiB image at least 1.8 s: nine intervals or more, whatever the
	// machine's load (a 5 ms pause, 450 ms in all, left room for only two
	// lines on a busy CI machine).
	dmg, _ := recoverytest.UDIF(recoverytest.DiskContent(16<<20, 6))
	s := service(dmg)
	s.Throttle = 20 * time.Millisecond
	o, log := options(t, s.Start(t, script), "sonoma")
	o.ProgressInterval = 200 * time.Millisecond
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	var done []int64
	var at []time.Time
	log.mu.Lock()
	for i, l := range strings.Split(strings.TrimSuffix(log.b.String(), "\n"), "\n") {
		if m := progressLine.FindStringSubmatch(l); m != nil {
			d, _ := strconv.ParseInt(m[1], 10, 64)
			total, _ := strconv.ParseInt(m[2], 10, 64)
			if total != int64(len(dmg)) {
				t.Errorf("total %d, want %d", total, len(dmg))
			}
			done = append(done, d)
			at = append(at, log.times[i])
		}
	}
	log.mu.Unlock()
	if len(done) < 3 || done[len(done)-1] != int64(len(dmg)) || !slices.IsSorted(done) {
		t.Fatalf("progress %v (want ≥3, growing, ending at %d)\n%s", done, len(dmg), log)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < o.ProgressInterval-10*time.Millisecond {
			t.Errorf("progress lines %d and %d %v apart, interval %v", i-1, i, gap, o.ProgressInterval)
		}
	}
}
