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
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os/exec"
	"regexp"
	"strings"

	"github.com/dockerios/dockerios/pkg/identity"
)

// GenerateOptions are the generate command's inputs.
type GenerateOptions struct {
	Model      string
	Count      int
	Macserial  string
	Width      int
	Height     int
	KernelArgs string
	// Seed, when non-zero, makes UUIDs and MAC addresses reproducible
	// (tests); zero uses crypto/rand.
	Seed uint64
}

// MaxGenerate bounds one generate run.
const MaxGenerate = 10000

// macserial --num N --model M prints "SERIAL | MLB" lines
// (OpenCorePkg Utilities/macserial/macserial.c, MODE_GENERATE_CURRENT).
var macserialLine = regexp.MustCompile(`^\s*([0-9A-Z]+)\s*\|\s*([0-9A-Z]+)\s*$`)

// Generate writes Count identities for Model in osx-serial-generator's CSV
// format (no header):
//
//	"MODEL","SERIAL","BOARD_SERIAL","UUID","MAC_ADDRESS","WIDTH","HEIGHT","KERNEL_ARGS"
//
// Serials and MLBs come from macserial; UUIDs are random version 4, upper
// case; MACs are an Apple OUI and three random bytes. Every row is validated
// before anything is written.
func Generate(ctx context.Context, o GenerateOptions, w io.Writer) error {
	if err := identity.ValidateModel(o.Model); err != nil {
		return Invalid("model %q: %v", o.Model, err)
	}
	if o.Count < 1 || o.Count > MaxGenerate {
		return Invalid("count %d: must be 1 to %d", o.Count, MaxGenerate)
	}
	if err := (Display{o.Width, o.Height}).Check(); err != nil {
		return err
	}
	if len(o.KernelArgs) > identity.MaxKernelArgsLength || strings.ContainsAny(o.KernelArgs, "\"\r\n\t") {
		return Invalid("kernel arguments: at most %d bytes, without quotes, tabs or line breaks", identity.MaxKernelArgsLength)
	}
	cmd := exec.CommandContext(ctx, o.Macserial, "--num", fmt.Sprint(o.Count), "--model", o.Model)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(string(out) + "\n" + stderr.String())
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			// macserial fails only on arguments it refuses, such as a model
			// it does not know.
			return Invalid("macserial for model %s: %v: %s", o.Model, err, msg)
		}
		return fmt.Errorf("running macserial %s: %v", o.Macserial, err)
	}
	var rnd io.Reader = rand.Reader
	if o.Seed != 0 {
		var seed [32]byte
		binary.LittleEndian.PutUint64(seed[:], o.Seed)
		rnd = mrand.NewChaCha8(seed)
	}
	ouis := identity.AppleOUIs()
	seen := map[string]bool{}
	var rows bytes.Buffer
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "WARN") || strings.HasPrefix(line, "ERROR") {
			return Invalid("macserial for model %s: %s", o.Model, line)
		}
		m := macserialLine.FindStringSubmatch(line)
		if m == nil {
			return Invalid("macserial for model %s printed %q, not \"SERIAL | MLB\"", o.Model, line)
		}
		v := identity.Values{Model: o.Model, SerialNumber: m[1], BoardSerialNumber: m[2]}
		for {
			v.SystemUUID = randomUUID(rnd)
			v.MACAddress = randomMAC(rnd, ouis)
			if !seen["u"+v.SystemUUID] && !seen["m"+v.MACAddress] {
				break
			}
		}
		v.ROM = identity.ROMFromMAC(v.MACAddress)
		if err := v.Validate(); err != nil {
			return Invalid("macserial row %q for model %s is not a valid identity (DockerIOS needs 12-character serials and 17-character MLBs): %s", line, o.Model, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		if seen["s"+v.SerialNumber] || seen["b"+v.BoardSerialNumber] {
			return fmt.Errorf("macserial repeated %q", line)
		}
		for _, k := range []string{"s" + v.SerialNumber, "b" + v.BoardSerialNumber, "u" + v.SystemUUID, "m" + v.MACAddress} {
			seen[k] = true
		}
		fmt.Fprintf(&rows, "\"%s\",\"%s\",\"%s\",\"%s\",\"%s\",\"%d\",\"%d\",\"%s\"\n", v.Model, v.SerialNumber, v.BoardSerialNumber, v.SystemUUID, v.MACAddress, o.Width, o.Height, o.KernelArgs)
		n++
	}
	if n != o.Count {
		return fmt.Errorf("macserial printed %d serials, want %d", n, o.Count)
	}
	_, err = w.Write(rows.Bytes())
	return err
}

func randomUUID(r io.Reader) string {
	var b [16]byte
	_, _ = io.ReadFull(r, b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	x := strings.ToUpper(hex.EncodeToString(b[:]))
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

func randomMAC(r io.Reader, ouis []string) string {
	var b [7]byte
	_, _ = io.ReadFull(r, b[:])
	oui := ouis[int(binary.BigEndian.Uint32(append([]byte{0}, b[:3]...)))%len(ouis)]
	return fmt.Sprintf("%s:%02X:%02X:%02X", oui, b[3], b[4], b[5])
}
