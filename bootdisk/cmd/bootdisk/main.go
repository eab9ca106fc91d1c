// Copyright The DockerIOS Authors.
// SPDX-License-Identifier: GPL-3.0-or-later
//
// This file is part of the DockerIOS bootdisk builder, which is free
// software: you can redistribute it and/or modify it under the terms of the
// GNU General Public License as published by the Free Software Foundation,
// either version 3 of the License, or (at your option) any later version.
// See bootdisk/LICENSE.

// Command bootdisk renders a DockerIOS machine's OpenCore boot disk
// (render), generates identity rows (generate) and derives the config.plist
// template from an OpenCore config (template). README.md describes the
// contract the DockerIOS controller's Job relies on.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/dockerios/dockerios/bootdisk/internal/builder"
	"github.com/dockerios/dockerios/bootdisk/internal/recovery"
	"github.com/dockerios/dockerios/pkg/version"
)

// Defaults inside the builder image (see Dockerfile).
const (
	defaultTemplate  = "/opt/dockerios-bootdisk/template/config.plist"
	defaultEFIDir    = "/opt/dockerios-bootdisk/efi"
	defaultMacserial = "/opt/dockerios-bootdisk/bin/macserial"
	defaultOutputDir = "/output"
	defaultTermLog   = "/dev/termination-log"
	defaultScript    = "/opt/dockerios-bootdisk/recovery/fetch-macOS-v2.py"
	tokenEnv         = "DOCKERIOS_AGENT_TOKEN"
)

const usage = `usage:
  bootdisk render   [flags]   build the machine's boot disk into the output volume
  bootdisk generate [flags]   print N identities as osx-serial-generator CSV rows
  bootdisk template --from CONFIG [--output FILE]
                              turn an OpenCore config.plist (OSX-KVM's) into a
                              template with osx-serial-generator's placeholders
  bootdisk recovery --release NAME [flags]
                              fetch a release's recovery image from Apple with
                              fetch-macOS-v2.py, verify it, convert it to disk.img
  bootdisk --version          print the version and exit
Run "bootdisk COMMAND -h" for flags. See README.md.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	termLog := defaultTermLog
	if v := os.Getenv("DOCKERIOS_BOOTDISK_TERMINATION_LOG"); v != "" {
		termLog = v
	}
	var err error
	switch {
	case len(args) == 0:
		err = builder.Invalid("no command: want render, generate, template or recovery")
	case args[0] == "render":
		err = render(ctx, args[1:], stdout, stderr)
	case args[0] == "generate":
		err = generate(ctx, args[1:], stdout, stderr)
	case args[0] == "template":
		err = deriveTemplate(args[1:], stdout, stderr)
	case args[0] == "recovery":
		return fetchRecovery(ctx, args[1:], stdout, stderr, termLog)
	case args[0] == "-h" || args[0] == "--help" || args[0] == "help":
		fmt.Fprintln(stdout, usage)
		return builder.ExitOK
	case args[0] == "--version" || args[0] == "-version":
		fmt.Fprintln(stdout, version.String())
		return builder.ExitOK
	default:
		err = builder.Invalid("unknown command %q: want render, generate, template or recovery", args[0])
	}
	if errors.Is(err, flag.ErrHelp) {
		return builder.ExitOK
	}
	if err == nil {
		return builder.ExitOK
	}
	// One line on stdout, and the same line as the container's termination
	// message when Kubernetes provides the file.
	line := "bootdisk: " + builder.OneLine(err)
	fmt.Fprintln(stdout, line)
	if _, statErr := os.Stat(termLog); statErr == nil {
		_ = os.WriteFile(termLog, []byte(line+"\n"), 0o644)
	}
	return builder.ExitCode(err)
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("bootdisk "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return builder.Invalid("%v", err)
	}
	if fs.NArg() > 0 {
		return builder.Invalid("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

func render(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("render", stderr)
	var id builder.Identity
	o := builder.RenderOptions{Log: stderr}
	identityFile := fs.String("identity-file", "", "identity JSON file (a MacOSIdentity spec); flags override its fields")
	identityDir := fs.String("identity-dir", "", "directory with one file per identity value, named by the MacOSIdentity spec's fields "+
		"(a mounted Secret); overrides --identity-file, flags override it")
	fs.StringVar(&id.Model, "model", "", "SMBIOS model, e.g. iMacPro1,1")
	fs.StringVar(&id.SerialNumber, "serial", "", "system serial number (12 characters)")
	fs.StringVar(&id.BoardSerialNumber, "board-serial", "", "main logic board serial, MLB (17 characters)")
	fs.StringVar(&id.SystemUUID, "uuid", "", "SMBIOS system UUID")
	fs.StringVar(&id.MACAddress, "mac-address", "", "MAC address with an Apple OUI; the ROM is its six bytes")
	fs.StringVar(&id.ROM, "rom", "", "ROM as 12 hex digits (optional; must equal the MAC's bytes)")
	fs.IntVar(&o.Display.Width, "width", 1920, "console width in pixels")
	fs.IntVar(&o.Display.Height, "height", 1080, "console height in pixels")
	tokenFile := fs.String("token-file", "", "read the agent token from this file instead of $"+tokenEnv)
	fs.StringVar(&o.TemplatePath, "template", defaultTemplate, "config.plist template with osx-serial-generator's placeholders")
	fs.StringVar(&o.TemplateCommit, "template-commit", os.Getenv("DOCKERIOS_BOOTDISK_TEMPLATE_COMMIT"), "upstream commit of the template, recorded in result.json")
	fs.StringVar(&o.EFIDir, "efi-dir", defaultEFIDir, "directory holding the EFI/ tree")
	fs.StringVar(&o.EFICommit, "efi-commit", os.Getenv("DOCKERIOS_BOOTDISK_EFI_COMMIT"), "upstream commit of the EFI tree, recorded in result.json")
	fs.StringVar(&o.OutputDir, "output-dir", defaultOutputDir, "output volume")
	fs.StringVar(&o.ImageName, "output-name", "", "image file name (default disk.img for raw, bootdisk.qcow2 for qcow2)")
	fs.StringVar(&o.Format, "format", builder.FormatRaw, "raw or qcow2")
	fs.IntVar(&o.SizeMiB, "size-mib", builder.DefaultSizeMiB, "virtual disk size in MiB")
	fs.StringVar(&o.ScratchDir, "scratch-dir", os.TempDir(), "where the raw image is assembled before it is copied to the output volume")
	if err := parse(fs, args); err != nil {
		return err
	}
	var base builder.Identity
	if *identityFile != "" {
		if base, err = builder.ReadIdentityFile(*identityFile); err != nil {
			return err
		}
	}
	if *identityDir != "" {
		dir, err := builder.ReadIdentityDir(*identityDir)
		if err != nil {
			return err
		}
		base = base.Merge(dir)
	}
	id = base.Merge(id)
	// The failure line becomes the pod's termination message and log,
	// which more people may read than may read the identity.
	defer func() { err = id.Redact(err) }()
	o.Identity = id
	o.Token = os.Getenv(tokenEnv)
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return builder.Invalid("token file: %v", err)
		}
		o.Token = string(b)
	}
	res, err := builder.RenderDisk(ctx, o)
	if err != nil {
		return err
	}
	line, _ := json.Marshal(res)
	fmt.Fprintln(stdout, string(line))
	return nil
}

func generate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("generate", stderr)
	var o builder.GenerateOptions
	fs.StringVar(&o.Model, "model", "iMacPro1,1", "SMBIOS model")
	fs.IntVar(&o.Count, "num", 1, "number of identities")
	fs.StringVar(&o.Macserial, "macserial", defaultMacserial, "macserial binary")
	fs.IntVar(&o.Width, "width", 1920, "WIDTH column")
	fs.IntVar(&o.Height, "height", 1080, "HEIGHT column")
	fs.StringVar(&o.KernelArgs, "kernel-args", "", "KERNEL_ARGS column")
	fs.Uint64Var(&o.Seed, "seed", 0, "make UUIDs and MACs reproducible (tests only; 0 = crypto/rand)")
	output := fs.String("output", "", "write the rows to this file (atomically) instead of stdout")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *output == "" {
		return builder.Generate(ctx, o, stdout)
	}
	return writeAtomically(*output, 0o600, func(w io.Writer) error { return builder.Generate(ctx, o, w) })
}

func deriveTemplate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("template", stderr)
	from := fs.String("from", "", "OpenCore config.plist to start from (OSX-KVM's OpenCore/config.plist)")
	output := fs.String("output", "", "write the template to this file (atomically, mode 0644) instead of stdout")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *from == "" {
		return builder.Invalid("--from is required: the OpenCore config.plist to derive the template from")
	}
	config, err := os.ReadFile(*from)
	if err != nil {
		return builder.Invalid("reading the OpenCore config: %v", err)
	}
	template, err := builder.DeriveTemplate(config)
	if err != nil {
		return err
	}
	if *output == "" {
		_, err := stdout.Write(template)
		return err
	}
	// 0644: the image runs as a non-root user that must read the template.
	return writeAtomically(*output, 0o644, func(w io.Writer) error {
		_, err := w.Write(template)
		return builder.OutputErr("writing "+*output, err)
	})
}

// fetchRecovery runs `bootdisk recovery`. Unlike render's, its result line
// is JSON whether it succeeds or fails: {"reason": Converted, ServiceRefused,
// ChecksumMismatch or Failed, "message": ..., and on success the release,
// board-id, product, the DMG's sha256 and the raw size}, one line on stdout
// and in the termination log. The script's output and the progress lines go
// to stderr.
func fetchRecovery(ctx context.Context, args []string, stdout, stderr io.Writer, termLog string) int {
	fs := newFlags("recovery", stderr)
	o := recovery.Options{Log: stderr}
	fs.StringVar(&o.Release, "release", "", "release, by fetch-macOS-v2.py's short name (high-sierra ... tahoe)")
	fs.StringVar(&o.BoardID, "board-id", "", "ask as this board-id instead of the one the script's table gives the release")
	fs.StringVar(&o.OutputDir, "output-dir", defaultOutputDir, "output volume: receives disk.img")
	fs.StringVar(&o.ScratchDir, "scratch-dir", os.TempDir(), "where the DMG and its chunklist are downloaded")
	fs.StringVar(&o.Script, "script", defaultScript, "OSX-KVM's fetch-macOS-v2.py")
	fs.StringVar(&o.Python, "python", "python3", "the Python 3 interpreter that runs the script")
	fs.DurationVar(&o.ProgressInterval, "progress-interval", recovery.DefaultProgressInterval, "least time between progress lines")
	res := recovery.Result{}
	err := parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return builder.ExitOK
	}
	if err == nil {
		res, err = recovery.Run(ctx, o)
	}
	reason, code := recovery.Classify(err)
	if err != nil {
		res = recovery.Result{Reason: reason, Release: res.Release, BoardID: res.BoardID, Product: res.Product,
			Message: builder.OneLine(err)}
	}
	line, _ := json.Marshal(res)
	// A termination message is capped at 4096 bytes: keep the line under it.
	for len(line) >= 4096 {
		res.Release, res.BoardID, res.Product = "", "", ""
		res.Message = res.Message[:len(res.Message)/2]
		line, _ = json.Marshal(res)
	}
	fmt.Fprintln(stdout, string(line))
	if _, statErr := os.Stat(termLog); statErr == nil {
		_ = os.WriteFile(termLog, append(line, '\n'), 0o644)
	}
	return code
}

// writeAtomically writes a file through a temporary file in the same
// directory, synced and renamed into place, so a reader sees the old file or
// the whole new one.
func writeAtomically(path string, mode os.FileMode, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return builder.OutputErr("creating "+path, err)
	}
	defer os.Remove(tmp.Name())
	err = builder.OutputErr("writing "+path, tmp.Chmod(mode))
	if err == nil {
		err = write(tmp)
	}
	if err == nil {
		err = builder.OutputErr("writing "+path, tmp.Sync())
	}
	if cerr := tmp.Close(); err == nil {
		err = builder.OutputErr("writing "+path, cerr)
	}
	if err != nil {
		return err
	}
	return builder.OutputErr("renaming "+path, os.Rename(tmp.Name(), path))
}
