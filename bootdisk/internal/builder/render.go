// Copyright The DockerIOS Authors.
// SPDX-License-Identifier: GPL-3.0-or-later
//
// This file is part of the DockerIOS bootdisk builder, which is free
// software: you can redistribute it and/or modify it under the terms of the
// GNU General Public License as published by the Free Software Foundation,
// either version 3 of the License, or (at your option) any later version.
// See bootdisk/LICENSE.

package builder

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dockerios/dockerios/pkg/identity"
)

// ResultFile is the name of the file that marks a finished artifact. It is
// written last, atomically: an image without it is not finished.
const ResultFile = "result.json"

// stagingPrefix names the directories a run stages its artifact in, inside
// the output directory so that publishing is a rename on one file system.
const stagingPrefix = ".bootdisk-staging-"

// TestHookSleepEnv, when set to a duration, makes render sleep just before
// publishing. Tests use it to kill a run mid-way; it is not for production.
const TestHookSleepEnv = "DOCKERIOS_BOOTDISK_TEST_SLEEP_BEFORE_PUBLISH"

// Formats the image can be written in.
const (
	FormatRaw   = "raw"
	FormatQCOW2 = "qcow2"
)

// DefaultImageName returns the image's file name for a format: disk.img is
// what KubeVirt boots from a file-system PersistentVolumeClaim.
func DefaultImageName(format string) string {
	if format == FormatQCOW2 {
		return "bootdisk.qcow2"
	}
	return "disk.img"
}

// RenderOptions are the render command's inputs.
type RenderOptions struct {
	Identity       Identity
	Display        Display
	Token          string
	TemplatePath   string
	TemplateCommit string
	EFIDir         string
	EFICommit      string
	OutputDir      string
	ImageName      string
	Format         string
	SizeMiB        int
	ScratchDir     string
	// Log receives progress lines (stderr); may be nil.
	Log io.Writer
}

// Result is result.json. It holds no secret and no time, so the same inputs
// give the same file; and no identity value but the model, because it is
// also the command's stdout, which becomes the pod's log, and Kubernetes'
// view role may read pod logs where it may not read the identity.
type Result struct {
	Image          string `json:"image"`
	Format         string `json:"format"`
	SHA256         string `json:"sha256"`
	Size           int64  `json:"size"`
	VirtualSize    int64  `json:"virtualSize"`
	Model          string `json:"model"`
	Resolution     string `json:"resolution"`
	TemplateCommit string `json:"templateCommit"`
	TemplateSHA256 string `json:"templateSHA256"`
	EFICommit      string `json:"efiCommit"`
	EFITreeSHA256  string `json:"efiTreeSHA256"`
	// InputDigest covers every input (the token only through its hash); a
	// re-run with the same digest and an intact image changes nothing.
	InputDigest string `json:"inputDigest"`
}

func (o *RenderOptions) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// RenderDisk builds and publishes the boot disk. On error nothing new is left
// in the output directory and a finished artifact from an earlier run with
// the same inputs is untouched.
func RenderDisk(ctx context.Context, o RenderOptions) (Result, error) {
	var res Result
	if o.Format != FormatRaw && o.Format != FormatQCOW2 {
		return res, Invalid("format %q: must be raw or qcow2", o.Format)
	}
	if o.ImageName == "" {
		o.ImageName = DefaultImageName(o.Format)
	}
	if o.ImageName == ResultFile || strings.ContainsAny(o.ImageName, "/\x00") || strings.HasPrefix(o.ImageName, ".") {
		return res, Invalid("output name %q: must be a plain file name, not %s, not starting with a dot", o.ImageName, ResultFile)
	}
	if o.SizeMiB == 0 {
		o.SizeMiB = DefaultSizeMiB
	}
	if o.SizeMiB < MinDiskSizeMiB || o.SizeMiB > MaxDiskSizeMiB {
		return res, Invalid("disk size %d MiB: must be %d to %d", o.SizeMiB, MinDiskSizeMiB, MaxDiskSizeMiB)
	}
	values, err := o.Identity.Canonical()
	if err != nil {
		return res, err
	}
	if err := o.Display.Check(); err != nil {
		return res, err
	}
	token, err := CheckToken(o.Token)
	if err != nil {
		return res, err
	}
	template, err := os.ReadFile(o.TemplatePath)
	if err != nil {
		return res, Invalid("template: %v", err)
	}
	files, efiSum, err := EFITree(o.EFIDir)
	if err != nil {
		return res, err
	}
	config, err := Render(template, RenderInput{Identity: values, Display: o.Display, Token: token})
	if err != nil {
		return res, err
	}
	templateSum := sha256.Sum256(template)
	res = Result{
		Image:          o.ImageName,
		Format:         o.Format,
		Model:          values.Model,
		Resolution:     o.Display.String(),
		TemplateCommit: o.TemplateCommit,
		TemplateSHA256: hex.EncodeToString(templateSum[:]),
		EFICommit:      o.EFICommit,
		EFITreeSHA256:  efiSum,
	}
	res.InputDigest = inputDigest(res, values, token, o.SizeMiB, config)

	if err := checkOutputDir(o.OutputDir); err != nil {
		return res, err
	}
	if done, ok := finished(o.OutputDir, res.InputDigest); ok {
		o.logf("bootdisk: %s is already published with the same inputs; nothing to do", done.Image)
		return done, nil
	}
	removeStale(o)

	if err := CheckTools(); err != nil {
		return res, err
	}
	scratch, err := os.MkdirTemp(o.ScratchDir, "bootdisk-")
	if err != nil {
		return res, fmt.Errorf("scratch directory: %w", err)
	}
	defer os.RemoveAll(scratch)
	raw := filepath.Join(scratch, "disk.raw")
	o.logf("bootdisk: building %d MiB GPT image with %d EFI files", o.SizeMiB, len(files))
	if err := BuildRaw(ctx, raw, files, config, o.SizeMiB, DeriveDiskIDs(values.SystemUUID+"/"+values.SerialNumber)); err != nil {
		return res, err
	}

	staging, err := os.MkdirTemp(o.OutputDir, stagingPrefix)
	if err != nil {
		return res, OutputErr("creating staging directory", err)
	}
	published := false
	defer func() {
		if !published {
			os.RemoveAll(staging)
		}
	}()
	staged := filepath.Join(staging, o.ImageName)
	if o.Format == FormatQCOW2 {
		if _, err := run(ctx, nil, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, staged); err != nil {
			return res, classifyToolOutputErr("qemu-img convert", err)
		}
	} else if err := sparseCopy(raw, staged); err != nil {
		return res, err
	}
	res.VirtualSize = int64(o.SizeMiB) << 20
	if res.SHA256, res.Size, err = syncAndHash(staged); err != nil {
		return res, err
	}
	body, _ := json.MarshalIndent(res, "", "  ")
	if err := writeSynced(filepath.Join(staging, ResultFile), append(body, '\n')); err != nil {
		return res, err
	}
	if d := os.Getenv(TestHookSleepEnv); d != "" {
		if dur, err := time.ParseDuration(d); err == nil {
			o.logf("bootdisk: test hook: sleeping %s before publishing", dur)
			time.Sleep(dur)
		}
	}
	if err := publish(o.OutputDir, staging, o.ImageName); err != nil {
		return res, err
	}
	published = true
	return res, nil
}

func inputDigest(r Result, v identity.Values, token string, sizeMiB int, config []byte) string {
	tokenSum := sha256.Sum256([]byte(token))
	configSum := sha256.Sum256(config)
	b, _ := json.Marshal(struct {
		Layout                   int
		Values                   identity.Values
		Resolution, Format, Name string
		SizeMiB                  int
		Token, Template, EFI     string
		Config                   string
	}{1, v, r.Resolution, r.Format, r.Image, sizeMiB, hex.EncodeToString(tokenSum[:]), r.TemplateSHA256, r.EFITreeSHA256, hex.EncodeToString(configSum[:])})
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func checkOutputDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return OutputErr("output directory", err)
	}
	if !fi.IsDir() {
		return &Error{Code: ExitOutputVolume, Reason: "output volume: " + dir + " is not a directory"}
	}
	return nil
}

// finished returns the published result if it has the same input digest
// and its image is intact.
func finished(dir, digest string) (Result, bool) {
	var r Result
	b, err := os.ReadFile(filepath.Join(dir, ResultFile))
	if err != nil || json.Unmarshal(b, &r) != nil || r.InputDigest != digest {
		return r, false
	}
	sum, err := fileSHA256(filepath.Join(dir, r.Image))
	return r, err == nil && sum == r.SHA256
}

// removeStale removes staging directories killed runs left behind.
func removeStale(o RenderOptions) {
	stale, _ := filepath.Glob(filepath.Join(o.OutputDir, stagingPrefix+"*"))
	for _, s := range stale {
		if err := os.RemoveAll(s); err != nil {
			o.logf("bootdisk: cannot remove stale %s: %v", s, err)
		}
	}
}

// publish makes the staged artifact the published one: first the old
// result.json goes (so a crash from here on leaves "not finished"), then the
// image and last the new result.json are renamed into place.
func publish(dir, staging, name string) error {
	if err := os.Remove(filepath.Join(dir, ResultFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return OutputErr("removing old "+ResultFile, err)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(staging, name), filepath.Join(dir, name)); err != nil {
		return OutputErr("publishing image", err)
	}
	if err := os.Rename(filepath.Join(staging, ResultFile), filepath.Join(dir, ResultFile)); err != nil {
		return OutputErr("publishing "+ResultFile, err)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	_ = os.Remove(staging)
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return OutputErr("opening output directory", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return OutputErr("syncing output directory", err)
	}
	return nil
}

func writeSynced(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return OutputErr("creating "+filepath.Base(p), err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return OutputErr("writing "+filepath.Base(p), err)
}

// syncAndHash flushes a staged file to disk and hashes what reads back.
func syncAndHash(p string) (string, int64, error) {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return "", 0, OutputErr("opening staged image", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return "", 0, OutputErr("syncing staged image", err)
	}
	h := sha256.New()
	n, err := copyBuffer(h, f)
	if err != nil {
		return "", 0, OutputErr("reading staged image back", err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func copyBuffer(dst io.Writer, src io.Reader) (int64, error) {
	return io.CopyBuffer(dst, src, make([]byte, 1<<20))
}

// sparseCopy copies src to a new file dst, leaving holes where src has
// runs of zeros, so that a mostly empty raw image costs little space.
func sparseCopy(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("reading scratch image: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return OutputErr("creating staged image", err)
	}
	defer out.Close()
	buf := make([]byte, 1<<16)
	var off int64
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if !allZero(buf[:n]) {
				if _, err := out.WriteAt(buf[:n], off); err != nil {
					return OutputErr("writing staged image", err)
				}
			}
			off += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("reading scratch image: %w", rerr)
		}
	}
	if err := out.Truncate(off); err != nil {
		return OutputErr("sizing staged image", err)
	}
	return OutputErr("closing staged image", out.Close())
}

func allZero(b []byte) bool {
	return len(bytes.TrimLeft(b, "\x00")) == 0
}

// classifyToolOutputErr turns a tool's failure to write the output volume
// into an output-volume error.
func classifyToolOutputErr(what string, err error) error {
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"no space left on device", "read-only file system", "disk quota exceeded", "permission denied"} {
		if strings.Contains(msg, s) {
			return &Error{Code: ExitOutputVolume, Reason: "output volume: " + what + ": " + s}
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
