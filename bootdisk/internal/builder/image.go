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
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Tools are the external programs the image is built with, and the Debian
// packages that carry them.
var Tools = []struct{ Name, Package string }{
	{"sfdisk", "fdisk"},
	{"mformat", "mtools"},
	{"mmd", "mtools"},
	{"mcopy", "mtools"},
	{"qemu-img", "qemu-utils"},
}

// CheckTools reports the first missing tool and the package to install.
func CheckTools() error {
	for _, t := range Tools {
		if _, err := toolPath(t.Name); err != nil {
			return fmt.Errorf("%s not found on PATH, /usr/sbin or /sbin: install the Debian package %s", t.Name, t.Package)
		}
	}
	return nil
}

// toolPath finds a tool on PATH or, since Debian keeps sfdisk in /usr/sbin,
// which a non-root user's PATH lacks, in the sbin directories.
func toolPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if fi, serr := os.Stat(filepath.Join(dir, name)); serr == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return filepath.Join(dir, name), nil
		}
	}
	return "", err
}

// SourceDateEpoch is the time every FAT timestamp on the image gets:
// 1980-01-01T00:00:00Z, the earliest FAT can hold. mtools reads it from
// SOURCE_DATE_EPOCH.
const SourceDateEpoch = 315532800

// ESP layout: one EFI system partition from sector 2048 to the end of the
// disk, FAT32, volume label "EFI". (osx-serial-generator's
// opencore-image-ng.sh makes a second, empty FAT partition with libguestfs;
// OpenCore does not need it.)
const (
	SectorSize      = 512
	ESPStartSector  = 2048
	ESPTypeGUID     = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
	ESPLabel        = "EFI"
	MinDiskSizeMiB  = 40
	MaxDiskSizeMiB  = 4096
	DefaultSizeMiB  = 384
	configPlistPath = "EFI/OC/config.plist"
)

// EFIFile is one file of the EFI tree.
type EFIFile struct {
	Rel  string // slash-separated, relative to the tree's root
	Abs  string
	Size int64
}

// EFITree lists the regular files under dir (which holds EFI/), sorted by
// path, and its manifest digest: the sha256 of the lines
// "<sha256>  <path>\n" sorted by path, which is what
//
//	find EFI -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum
//
// prints in dir. image/fetch-inputs.sh checks the upstream tree the same way.
func EFITree(dir string) ([]EFIFile, string, error) {
	var files []EFIFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file or directory", p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, EFIFile{Rel: filepath.ToSlash(rel), Abs: p, Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, "", Invalid("EFI tree %s: %v", dir, err)
	}
	slices.SortFunc(files, func(a, b EFIFile) int { return strings.Compare(a.Rel, b.Rel) })
	has := map[string]bool{}
	manifest := sha256.New()
	for _, f := range files {
		has[f.Rel] = true
		sum, err := fileSHA256(f.Abs)
		if err != nil {
			return nil, "", Invalid("EFI tree: %v", err)
		}
		fmt.Fprintf(manifest, "%s  %s\n", sum, f.Rel)
	}
	for _, need := range []string{"EFI/BOOT/BOOTx64.efi", "EFI/OC/OpenCore.efi"} {
		if !has[need] {
			return nil, "", Invalid("EFI tree %s lacks %s", dir, need)
		}
	}
	return files, hex.EncodeToString(manifest.Sum(nil)), nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := copyBuffer(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// DiskIDs are the identifiers that make an image reproducible: derived from
// the identity, never random.
type DiskIDs struct {
	DiskGUID, PartitionGUID string
	VolumeSerial            string // 8 hex digits
}

// DeriveDiskIDs derives the GPT disk GUID, the partition GUID and the FAT
// volume serial from seed (name-based, RFC 9562 version 8 layout).
func DeriveDiskIDs(seed string) DiskIDs {
	guid := func(label string) string {
		h := sha256.Sum256([]byte("dockerios-bootdisk/" + label + "\x00" + seed))
		b := h[:16]
		b[6] = (b[6] & 0x0f) | 0x80 // version 8
		b[8] = (b[8] & 0x3f) | 0x80 // RFC 9562 variant
		x := strings.ToUpper(hex.EncodeToString(b))
		return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
	}
	v := sha256.Sum256([]byte("dockerios-bootdisk/volume-serial\x00" + seed))
	return DiskIDs{
		DiskGUID:      guid("disk"),
		PartitionGUID: guid("esp"),
		VolumeSerial:  strings.ToUpper(hex.EncodeToString(v[:4])),
	}
}

// toolEnv is the environment the image tools run in: fixed timestamps, no
// user mtools configuration, C locale.
func toolEnv() []string {
	env := []string{
		"SOURCE_DATE_EPOCH=" + strconv.Itoa(SourceDateEpoch),
		"MTOOLS_SKIP_CHECK=1",
		"MTOOLSRC=/dev/null",
		"LC_ALL=C",
		"TZ=UTC",
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "TMPDIR=") || strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return env
}

// run runs a tool; its error carries the last line of its stderr.
func run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	bin, err := toolPath(name)
	if err != nil {
		return nil, &toolError{tool: name, msg: err.Error()}
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = toolEnv()
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if msg == "" {
			msg = err.Error()
		}
		return stdout.Bytes(), &toolError{tool: name, msg: msg}
	}
	return stdout.Bytes(), nil
}

type toolError struct{ tool, msg string }

func (e *toolError) Error() string { return e.tool + ": " + e.msg }

// Partition is one partition as sfdisk --json reports it.
type Partition struct {
	Node  string `json:"node"`
	Start int64  `json:"start"`
	Size  int64  `json:"size"`
	Type  string `json:"type"`
	UUID  string `json:"uuid"`
	Name  string `json:"name"`
}

// PartitionTable is sfdisk --json's output.
type PartitionTable struct {
	PartitionTable struct {
		Label      string      `json:"label"`
		ID         string      `json:"id"`
		SectorSize int         `json:"sectorsize"`
		Partitions []Partition `json:"partitions"`
	} `json:"partitiontable"`
}

// ReadPartitionTable runs sfdisk --json on an image.
func ReadPartitionTable(ctx context.Context, image string) (PartitionTable, error) {
	var pt PartitionTable
	out, err := run(ctx, nil, "sfdisk", "--json", image)
	if err != nil {
		return pt, err
	}
	if err := json.Unmarshal(out, &pt); err != nil {
		return pt, fmt.Errorf("sfdisk --json: %w", err)
	}
	return pt, nil
}

// BuildRaw writes a raw GPT disk image at image (which must not exist) with
// one EFI system partition holding files and config.plist at
// EFI/OC/config.plist. Nothing needs root or a loop device: sfdisk writes
// the table into the file and mtools writes the FAT file system at the
// partition's byte offset (image@@offset).
func BuildRaw(ctx context.Context, image string, files []EFIFile, config []byte, sizeMiB int, ids DiskIDs) error {
	if sizeMiB < MinDiskSizeMiB || sizeMiB > MaxDiskSizeMiB {
		return Invalid("disk size %d MiB: must be %d to %d", sizeMiB, MinDiskSizeMiB, MaxDiskSizeMiB)
	}
	var total int64
	for _, f := range files {
		total += f.Size
	}
	f, err := os.OpenFile(image, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("creating scratch image: %w", err)
	}
	err = f.Truncate(int64(sizeMiB) << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sizing scratch image: %w", err)
	}
	script := fmt.Sprintf("label: gpt\nlabel-id: %s\nfirst-lba: %d\nstart=%d, type=%s, uuid=%s, name=%q\n",
		ids.DiskGUID, ESPStartSector, ESPStartSector, ESPTypeGUID, ids.PartitionGUID, ESPLabel)
	if _, err := run(ctx, []byte(script), "sfdisk", "--quiet", "--no-reread", "--no-tell-kernel", "--wipe", "always", image); err != nil {
		return err
	}
	pt, err := ReadPartitionTable(ctx, image)
	if err != nil {
		return err
	}
	if len(pt.PartitionTable.Partitions) != 1 {
		return fmt.Errorf("sfdisk made %d partitions, want 1", len(pt.PartitionTable.Partitions))
	}
	p := pt.PartitionTable.Partitions[0]
	if free := p.Size*SectorSize - 4<<20; total > free {
		return Invalid("EFI tree is %d bytes: does not fit a %d MiB disk", total, sizeMiB)
	}
	dev := fmt.Sprintf("%s@@%d", image, p.Start*SectorSize)
	if _, err := run(ctx, nil, "mformat", "-i", dev, "-F", "-T", strconv.FormatInt(p.Size, 10),
		"-N", ids.VolumeSerial, "-v", ESPLabel, "::"); err != nil {
		return err
	}
	// Directories parents first, then each directory's files in one mcopy,
	// all in sorted order, so the FAT layout is the same every time.
	dirs := map[string][]string{}
	var dirOrder []string
	addDir := func(d string) {
		for _, part := range ancestors(d) {
			if _, ok := dirs[part]; !ok {
				dirs[part] = nil
				dirOrder = append(dirOrder, part)
			}
		}
	}
	addDir("EFI/OC")
	for _, f := range files {
		if f.Rel == configPlistPath {
			continue // replaced by the rendered one
		}
		d := path.Dir(f.Rel)
		if d != "." {
			addDir(d)
		}
		dirs[d] = append(dirs[d], f.Abs)
	}
	slices.Sort(dirOrder)
	mmd := []string{"-i", dev}
	for _, d := range dirOrder {
		mmd = append(mmd, "::"+d)
	}
	if _, err := run(ctx, nil, "mmd", mmd...); err != nil {
		return err
	}
	targets := append([]string{"."}, dirOrder...)
	for _, d := range targets {
		srcs := dirs[d]
		if len(srcs) == 0 {
			continue
		}
		dst := "::/"
		if d != "." {
			dst = "::" + d + "/"
		}
		args := append(append([]string{"-i", dev}, srcs...), dst)
		if _, err := run(ctx, nil, "mcopy", args...); err != nil {
			return err
		}
	}
	cfg := filepath.Join(filepath.Dir(image), "config.plist")
	if err := os.WriteFile(cfg, config, 0o600); err != nil {
		return fmt.Errorf("writing scratch config.plist: %w", err)
	}
	if _, err := run(ctx, nil, "mcopy", "-i", dev, cfg, "::"+configPlistPath); err != nil {
		return err
	}
	return nil
}

// ancestors returns "a", "a/b", "a/b/c" for "a/b/c".
func ancestors(d string) []string {
	var out []string
	parts := strings.Split(d, "/")
	for i := range parts {
		out = append(out, strings.Join(parts[:i+1], "/"))
	}
	return out
}

// ReadFileFromImage reads one file out of the ESP of an image with mcopy.
func ReadFileFromImage(ctx context.Context, image, name string) ([]byte, error) {
	pt, err := ReadPartitionTable(ctx, image)
	if err != nil {
		return nil, err
	}
	if len(pt.PartitionTable.Partitions) == 0 {
		return nil, fmt.Errorf("%s has no partitions", image)
	}
	dev := fmt.Sprintf("%s@@%d", image, pt.PartitionTable.Partitions[0].Start*SectorSize)
	return run(ctx, nil, "mcopy", "-i", dev, "::"+name, "-")
}
