// Copyright The DockerIOS Authors.
// SPDX-License-Identifier: GPL-3.0-or-later
//
// This file is part of the DockerIOS bootdisk builder, which is free
// software: you can redistribute it and/or modify it under the terms of the
// GNU General Public License as published by the Free Software Foundation,
// either version 3 of the License, or (at your option) any later version.
// See bootdisk/LICENSE.

// Package recovery fetches a macOS release's recovery image (BaseSystem.dmg)
// from Apple's recovery service with OSX-KVM's fetch-macOS-v2.py, run
// unchanged, verifies it against the chunklist the service returned and
// converts it to a raw disk on the output volume. README.md ("recovery")
// describes the contract the controller's recovery Job relies on.
package recovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/dockerios/dockerios/bootdisk/internal/builder"
)

// The reasons a run ends with: the "reason" of its result line, which the
// controller sets as its condition's reason.
const (
	ReasonConverted        = "Converted"
	ReasonServiceRefused   = "ServiceRefused"
	ReasonChecksumMismatch = "ChecksumMismatch"
	ReasonFailed           = "Failed"
)

// Exit codes beyond builder's (0 converted, 1 failed, 2 invalid input,
// 3 output volume).
const (
	// ExitServiceRefused: the recovery service answered with an HTTP error
	// or without the keys the script needs (no session, missing AU, ...).
	ExitServiceRefused = 4
	// ExitChecksumMismatch: the image or its chunklist failed verification.
	ExitChecksumMismatch = 5
)

const (
	// ImageFile is the raw disk the run leaves in the output directory.
	ImageFile = "disk.img"
	// baseName is what the script is told to save its two files as
	// (BaseSystem.chunklist, BaseSystem.dmg).
	baseName = "BaseSystem"
	// DefaultProgressInterval is the least time between progress lines.
	DefaultProgressInterval = 2 * time.Second
)

// Error is a failure with its reason and exit code.
type Error struct {
	Reason  string
	Code    int
	Message string
}

func (e *Error) Error() string { return e.Message }

func refused(format string, args ...any) error {
	return &Error{Reason: ReasonServiceRefused, Code: ExitServiceRefused, Message: fmt.Sprintf(format, args...)}
}

func mismatch(format string, args ...any) error {
	return &Error{Reason: ReasonChecksumMismatch, Code: ExitChecksumMismatch, Message: fmt.Sprintf(format, args...)}
}

func failed(format string, args ...any) error {
	return &Error{Reason: ReasonFailed, Code: builder.ExitFailure, Message: fmt.Sprintf(format, args...)}
}

// Classify returns the result reason and exit code of a run that returned
// err: Converted and 0 for nil; invalid input (exit 2) and output-volume
// errors (exit 3) are Failed with builder's codes.
func Classify(err error) (reason string, code int) {
	if err == nil {
		return ReasonConverted, builder.ExitOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason, e.Code
	}
	return ReasonFailed, builder.ExitCode(err)
}

// Options configure Run.
type Options struct {
	// Release is the short name in the script's products table (sonoma).
	Release string
	// BoardID, when set, replaces the table's board-id for the release.
	BoardID string
	// OutputDir receives ImageFile; ScratchDir holds the download.
	OutputDir, ScratchDir string
	// Script is fetch-macOS-v2.py; Python the interpreter that runs it.
	Script, Python string
	// QemuImg defaults to "qemu-img".
	QemuImg string
	// ProgressInterval defaults to DefaultProgressInterval.
	ProgressInterval time.Duration
	// Env is the script's environment (nil: this process's). The script
	// honours http_proxy.
	Env []string
	// Log receives the script's output, a line at a time without its
	// progress bars, and "progress DONE TOTAL" lines.
	Log io.Writer
}

// Result is what a run reports: the JSON line on stdout and in the
// termination log.
type Result struct {
	Reason      string `json:"reason"`
	Release     string `json:"release,omitempty"`
	BoardID     string `json:"boardID,omitempty"`
	Product     string `json:"product,omitempty"`
	ImageSHA256 string `json:"imageSHA256,omitempty"`
	RawBytes    int64  `json:"rawBytes,omitempty"`
	Message     string `json:"message"`
}

// Run fetches, verifies and converts o.Release's recovery image. The
// result is filled as far as the run came; on error its Reason is empty
// (Classify tells it).
func Run(ctx context.Context, o Options) (Result, error) {
	res := Result{Release: o.Release}
	if o.Log == nil {
		o.Log = io.Discard
	}
	o.Log = &lockedWriter{w: o.Log}
	if o.QemuImg == "" {
		o.QemuImg = "qemu-img"
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	// The script runs in the scratch directory: name it absolutely.
	if abs, err := filepath.Abs(o.Script); err == nil {
		o.Script = abs
	}
	script, err := os.ReadFile(o.Script)
	if err != nil {
		return res, builder.Invalid("reading fetch-macOS-v2.py: %v", err)
	}
	products, err := ParseProducts(script)
	if err != nil {
		return res, builder.Invalid("%v", err)
	}
	var known []string
	for _, p := range products {
		known = append(known, p.Short)
	}
	if o.Release == "" {
		return res, builder.Invalid("--release is required: one of %s", strings.Join(known, ", "))
	}
	p, ok := Lookup(products, o.Release)
	if !ok {
		return res, builder.Invalid("unknown release %q: fetch-macOS-v2.py knows %s", o.Release, strings.Join(known, ", "))
	}
	board := p.BoardID
	if o.BoardID != "" {
		if !ValidBoardID(o.BoardID) {
			return res, builder.Invalid("--board-id %q is not an Apple board-id such as Mac-7BA5B2D9E42DDD94", o.BoardID)
		}
		board = o.BoardID
	}
	res.BoardID = board

	if err := prepareOutput(o.OutputDir); err != nil {
		return res, err
	}
	work, err := os.MkdirTemp(o.ScratchDir, "recovery-")
	if err != nil {
		return res, failed("scratch directory: %v", err)
	}
	defer os.RemoveAll(work)

	product, err := runScript(ctx, o, p, board, work)
	res.Product = product
	if err != nil {
		return res, err
	}
	dmg := filepath.Join(work, baseName+".dmg")
	cnk, err := os.ReadFile(filepath.Join(work, baseName+".chunklist"))
	if err != nil {
		return res, failed("fetch-macOS-v2.py succeeded but left no chunklist: %v", err)
	}
	cl, err := ParseChunklist(cnk)
	if err != nil {
		return res, mismatch("%v", err)
	}
	// The script verified the image (and the chunklist's signature); this
	// verifies the very file that is converted, so that nothing unverified
	// reaches the volume.
	sum, size, err := VerifyImage(dmg, cl)
	if err != nil {
		if errors.Is(err, ErrMismatch) {
			return res, mismatch("BaseSystem.dmg: %v", err)
		}
		return res, failed("reading BaseSystem.dmg: %v", err)
	}
	fmt.Fprintf(o.Log, "recovery: BaseSystem.dmg (%s) verified: %d bytes in %d chunks, sha256 %s\n", product, size, len(cl.Chunks), sum)
	raw, err := convert(ctx, o, dmg)
	if err != nil {
		return res, err
	}
	res.Reason = ReasonConverted
	res.ImageSHA256 = sum
	res.RawBytes = raw
	res.Message = fmt.Sprintf("recovery image %s for %s (board %s) fetched, verified against its chunklist (%d bytes) and converted to %s (%d bytes)",
		product, o.Release, board, size, ImageFile, raw)
	return res, nil
}

// prepareOutput checks that the output directory is writable and removes
// what an earlier run left: a run replaces the volume's disk, and a failed
// run leaves none.
func prepareOutput(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return builder.OutputErr("output directory", err)
	}
	if !st.IsDir() {
		return builder.OutputErr("output directory", fmt.Errorf("%s is not a directory", dir))
	}
	probe, err := os.CreateTemp(dir, ".recovery-probe-")
	if err != nil {
		return builder.OutputErr("writing "+dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	stale, _ := filepath.Glob(filepath.Join(dir, "."+ImageFile+".tmp-*"))
	for _, p := range append(stale, filepath.Join(dir, ImageFile)) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return builder.OutputErr("removing "+p, err)
		}
	}
	return nil
}

var (
	downloadingRe = regexp.MustCompile(`^Downloading (\S+)\.\.\.$`)
	// The script's progress bars, overwritten in place with \r: not logged.
	barRe   = regexp.MustCompile(`^([0-9.]+/[0-9.]+ MB|[0-9.]+ MB downloaded)`)
	chunkRe = regexp.MustCompile(`^Chunk [0-9]+ \([0-9]+ bytes\)$`)
)

// runScript runs fetch-macOS-v2.py's download on a pseudo-terminal (see
// openPTY), logs its output and classifies how it ended. It returns the
// product the service answered with.
func runScript(ctx context.Context, o Options, p Product, board, work string) (string, error) {
	master, term, err := openPTY()
	if err != nil {
		return "", failed("%v", err)
	}
	defer master.Close()
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	args := []string{o.Script, "--action", "download", "-b", board, "-m", p.MLB, "-os", p.OSType, "-o", work, "-n", baseName}
	fmt.Fprintf(o.Log, "recovery: %s: asking Apple's recovery service as board %s, MLB %s, os %s\n", o.Release, board, p.MLB, p.OSType)
	cmd := exec.CommandContext(ctx, o.Python, args...)
	cmd.Env = append(append([]string(nil), env...), "PYTHONDONTWRITEBYTECODE=1")
	cmd.Dir = work
	cmd.Stdout, cmd.Stderr = term, term
	if err := cmd.Start(); err != nil {
		term.Close()
		return "", failed("starting %s: %v", o.Python, err)
	}
	term.Close()

	mon := &monitor{log: o.Log, interval: o.ProgressInterval,
		dmg: filepath.Join(work, baseName+".dmg"), chunklist: filepath.Join(work, baseName+".chunklist"),
		started: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go mon.run()

	var (
		product, httpErr, runtimeErr, verifyFail string
		last                                     []string
	)
	handle := func(line string) {
		line = strings.TrimSpace(line)
		if line == "" || barRe.MatchString(line) || chunkRe.MatchString(line) {
			return
		}
		fmt.Fprintln(o.Log, "fetch-macOS-v2.py: "+line)
		last = append(last, line)
		if len(last) > 4 {
			last = last[1:]
		}
		switch {
		case downloadingRe.MatchString(line):
			product = downloadingRe.FindStringSubmatch(line)[1]
		case strings.HasPrefix(line, "Saving ") && strings.HasSuffix(line, baseName+".dmg..."):
			mon.begin()
		case strings.HasPrefix(line, `ERROR: "HTTP Error`):
			httpErr = line
		case strings.HasPrefix(line, "RuntimeError: "):
			runtimeErr = line
		case strings.HasPrefix(line, "Image verification failed."):
			verifyFail = line
		}
	}
	buf := make([]byte, 32<<10)
	var pending []byte
	for {
		n, rerr := master.Read(buf)
		pending = append(pending, buf[:n]...)
		for {
			i := bytes.IndexAny(pending, "\r\n")
			if i < 0 {
				break
			}
			handle(string(pending[:i]))
			pending = pending[i+1:]
		}
		if rerr != nil { // EIO once the script and its terminal are gone
			break
		}
	}
	handle(string(pending))
	waitErr := cmd.Wait()
	mon.end()

	switch {
	case httpErr != "":
		return product, refused("the recovery service refused: %s", strings.TrimPrefix(httpErr, "ERROR: "))
	case strings.HasPrefix(runtimeErr, "RuntimeError: Missing key"), strings.HasPrefix(runtimeErr, "RuntimeError: No session"):
		return product, refused("the recovery service's answer lacks what the script needs: %s", runtimeErr)
	case verifyFail != "":
		return product, mismatch("fetch-macOS-v2.py: %s", verifyFail)
	case ctx.Err() != nil:
		return product, failed("interrupted: %v", ctx.Err())
	case waitErr != nil:
		return product, failed("fetch-macOS-v2.py: %v: %s", waitErr, strings.Join(last, " | "))
	case product == "":
		return product, failed("fetch-macOS-v2.py exited 0 without naming the product: %s", strings.Join(last, " | "))
	}
	return product, nil
}

// monitor prints "progress DONE TOTAL" while the image downloads, at most
// once per interval and only when it changed: DONE is the size of the
// growing BaseSystem.dmg, TOTAL the image size its chunklist (downloaded
// first, complete by then) gives.
type monitor struct {
	log                 io.Writer
	interval            time.Duration
	dmg, chunklist      string
	once                sync.Once
	started, stop, done chan struct{}
	total               int64
	last                time.Time
	lastDone, lastTotal int64
	printed             bool
}

func (m *monitor) begin() { m.once.Do(func() { close(m.started) }) }

// end stops the monitor after a last sample, and waits for it.
func (m *monitor) end() {
	close(m.stop)
	<-m.done
}

func (m *monitor) run() {
	defer close(m.done)
	select {
	case <-m.started:
	case <-m.stop:
		return
	}
	t := time.NewTicker(m.interval)
	defer t.Stop()
	m.sample(false)
	for {
		select {
		case <-t.C:
			m.sample(false)
		case <-m.stop:
			m.sample(true)
			return
		}
	}
}

func (m *monitor) sample(final bool) {
	if m.total == 0 {
		if b, err := os.ReadFile(m.chunklist); err == nil {
			if cl, err := ParseChunklist(b); err == nil {
				m.total = cl.Total()
			}
		}
		if m.total == 0 {
			return
		}
	}
	st, err := os.Stat(m.dmg)
	if err != nil {
		return
	}
	if m.printed && st.Size() == m.lastDone && m.total == m.lastTotal {
		return
	}
	if wait := m.interval - time.Since(m.last); m.printed && wait > 0 {
		if !final {
			return
		}
		time.Sleep(wait)
	}
	fmt.Fprintf(m.log, "progress %d %d\n", st.Size(), m.total)
	m.printed, m.last, m.lastDone, m.lastTotal = true, time.Now(), st.Size(), m.total
}

// convert turns the verified DMG into OutputDir/disk.img: qemu-img writes a
// temporary file in the output directory, which is synced, checked against
// the size the DMG declares and renamed into place, so disk.img is never
// half written.
func convert(ctx context.Context, o Options, dmg string) (int64, error) {
	var stderr bytes.Buffer
	info := exec.CommandContext(ctx, o.QemuImg, "info", "--output=json", "-f", "dmg", dmg)
	info.Stderr = &stderr
	out, err := info.Output()
	if err != nil {
		return 0, failed("qemu-img cannot read BaseSystem.dmg as a DMG: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var vi struct {
		VirtualSize int64 `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &vi); err != nil || vi.VirtualSize <= 0 || vi.VirtualSize%512 != 0 {
		return 0, failed("qemu-img info on BaseSystem.dmg: virtual size %d (%v)", vi.VirtualSize, err)
	}
	tmp, err := os.CreateTemp(o.OutputDir, "."+ImageFile+".tmp-")
	if err != nil {
		return 0, builder.OutputErr("creating a temporary image", err)
	}
	name := tmp.Name()
	tmp.Close()
	renamed := false
	defer func() {
		if !renamed {
			os.Remove(name)
		}
	}()
	fmt.Fprintf(o.Log, "recovery: converting BaseSystem.dmg to a raw disk of %d bytes\n", vi.VirtualSize)
	stderr.Reset()
	conv := exec.CommandContext(ctx, o.QemuImg, "convert", "-f", "dmg", "-O", "raw", dmg, name)
	conv.Stderr = &stderr
	if err := conv.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "No space left on device") || strings.Contains(msg, "Disk quota exceeded") {
			return 0, &builder.Error{Code: builder.ExitOutputVolume, Reason: "output volume: converting: " + msg}
		}
		return 0, failed("qemu-img convert: %v: %s", err, msg)
	}
	f, err := os.Open(name)
	if err != nil {
		return 0, builder.OutputErr("reading the converted image", err)
	}
	err = f.Sync()
	st, serr := f.Stat()
	f.Close()
	if err != nil {
		return 0, builder.OutputErr("syncing the converted image", err)
	}
	if serr != nil {
		return 0, builder.OutputErr("reading the converted image", serr)
	}
	if st.Size() != vi.VirtualSize {
		return 0, failed("qemu-img wrote %d bytes, the DMG declares %d", st.Size(), vi.VirtualSize)
	}
	if err := os.Chmod(name, 0o644); err != nil {
		return 0, builder.OutputErr("chmod of the converted image", err)
	}
	if err := os.Rename(name, filepath.Join(o.OutputDir, ImageFile)); err != nil {
		return 0, builder.OutputErr("renaming the converted image", err)
	}
	renamed = true
	if d, err := os.Open(o.OutputDir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return 0, builder.OutputErr("syncing the output directory", err)
		}
	}
	return st.Size(), nil
}

// lockedWriter serialises the run's and the monitor's log lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
