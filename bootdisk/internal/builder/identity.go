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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/dockerios/dockerios/pkg/identity"
)

// Identity is what a boot disk carries about its machine. The JSON field
// names are those of a MacOSIdentity's spec, so `kubectl get macosidentity
// NAME -o jsonpath='{.spec}'` is a valid identity file.
type Identity struct {
	Model             string `json:"model"`
	SerialNumber      string `json:"serialNumber"`
	BoardSerialNumber string `json:"boardSerialNumber"`
	SystemUUID        string `json:"systemUUID"`
	MACAddress        string `json:"macAddress"`
	// ROM is optional; when set it must be the MAC address's six bytes.
	ROM string `json:"rom,omitempty"`
	// PoolName is accepted (a MacOSIdentity spec carries it) and ignored.
	PoolName string `json:"poolName,omitempty"`
}

// ReadIdentityFile reads an identity JSON file. Unknown fields are errors.
func ReadIdentityFile(path string) (Identity, error) {
	var id Identity
	b, err := os.ReadFile(path)
	if err != nil {
		return id, Invalid("identity file: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&id); err != nil {
		return id, Invalid("identity file %s: %v", path, err)
	}
	return id, nil
}

// IdentityDirFiles are the files ReadIdentityDir reads, each holding one
// value: a MacOSIdentity spec's field names, which are the keys of the
// identity Secret the controller mounts into the Job (a Secret volume is
// one file per key). model is optional there; the Job passes it as a flag.
var IdentityDirFiles = []string{"model", "serialNumber", "boardSerialNumber", "systemUUID", "macAddress", "rom"}

// maxIdentityValueFile bounds what one value file may hold: every value is
// a few dozen characters, and a hostile mount must not cost memory.
const maxIdentityValueFile = 1024

// ReadIdentityDir reads an identity from a directory of value files (see
// IdentityDirFiles); surrounding whitespace is dropped, an absent file
// leaves its field empty. Errors name files, never their contents.
func ReadIdentityDir(dir string) (Identity, error) {
	var id Identity
	fields := map[string]*string{
		"model": &id.Model, "serialNumber": &id.SerialNumber, "boardSerialNumber": &id.BoardSerialNumber,
		"systemUUID": &id.SystemUUID, "macAddress": &id.MACAddress, "rom": &id.ROM,
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return id, Invalid("identity directory: %v", err)
	}
	if !fi.IsDir() {
		return id, Invalid("identity directory %s is not a directory", dir)
	}
	for _, name := range IdentityDirFiles {
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return id, Invalid("identity directory: %v", err)
		}
		b, err := io.ReadAll(io.LimitReader(f, maxIdentityValueFile+1))
		f.Close()
		if err != nil {
			return id, Invalid("identity directory: reading %s: %v", name, err)
		}
		if len(b) > maxIdentityValueFile {
			return id, Invalid("identity directory: %s is longer than %d bytes", name, maxIdentityValueFile)
		}
		*fields[name] = strings.TrimSpace(string(b))
	}
	return id, nil
}

// Merge returns id with every non-empty field of override replacing its own.
func (id Identity) Merge(override Identity) Identity {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&id.Model, override.Model)
	set(&id.SerialNumber, override.SerialNumber)
	set(&id.BoardSerialNumber, override.BoardSerialNumber)
	set(&id.SystemUUID, override.SystemUUID)
	set(&id.MACAddress, override.MACAddress)
	set(&id.ROM, override.ROM)
	return id
}

// Canonical validates id with DockerIOS's identity rules (serial 12
// characters, MLB 17 with a valid check character, upper-case UUID, a MAC
// with an Apple OUI, ROM equal to the MAC's bytes) and returns its canonical
// values, ROM filled in.
func (id Identity) Canonical() (identity.Values, error) {
	mac := identity.CanonicalMACAddress(id.MACAddress)
	v := identity.Values{
		Model:             strings.TrimSpace(id.Model),
		SerialNumber:      strings.TrimSpace(id.SerialNumber),
		BoardSerialNumber: strings.TrimSpace(id.BoardSerialNumber),
		SystemUUID:        identity.CanonicalSystemUUID(id.SystemUUID),
		MACAddress:        mac,
		ROM:               identity.ROMFromMAC(mac),
	}
	if id.ROM != "" {
		v.ROM = identity.CanonicalROM(id.ROM)
	}
	if err := v.Validate(); err != nil {
		return v, Invalid("invalid identity: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return v, nil
}

// minRedacted is the shortest value Redact hides: a shorter one identifies
// nothing, and hiding it would garble the rest of the message.
const minRedacted = 4

// Redacted stands for an identity value in messages.
const Redacted = "<redacted>"

// Redact returns err with every spelling of id's values in its message
// (as given and canonical, any case; the MAC with colons, dashes or
// nothing between its bytes) replaced by Redacted, keeping its exit code.
// Failure messages end up where more people may read them than may read
// the identity: the container's termination message in the pod's status,
// and the pod's log.
func (id Identity) Redact(err error) error {
	if err == nil {
		return nil
	}
	var forms []string
	add := func(vs ...string) {
		for _, v := range vs {
			if v = strings.TrimSpace(v); len(v) >= minRedacted {
				forms = append(forms, v)
			}
		}
	}
	add(id.SerialNumber, id.BoardSerialNumber, id.SystemUUID, strings.ReplaceAll(id.SystemUUID, "-", ""), id.ROM)
	for _, mac := range []string{id.MACAddress, identity.CanonicalMACAddress(id.MACAddress)} {
		add(mac, strings.ReplaceAll(mac, ":", ""), strings.ReplaceAll(mac, ":", "-"), strings.ReplaceAll(mac, "-", ""), strings.ReplaceAll(mac, "-", ":"))
	}
	if len(forms) == 0 {
		return err
	}
	// Longest first, so that a value is never half-replaced by a shorter
	// one it contains.
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	quoted := make([]string, len(forms))
	for i, f := range forms {
		quoted[i] = regexp.QuoteMeta(f)
	}
	re := regexp.MustCompile("(?i)" + strings.Join(quoted, "|"))
	msg := err.Error()
	redacted := re.ReplaceAllLiteralString(msg, Redacted)
	if redacted == msg {
		return err
	}
	return &Error{Code: ExitCode(err), Reason: redacted}
}

// Token limits, as the guest agent reads them (agent/README.md).
const (
	MinTokenLength = 32
	MaxTokenLength = 256
)

// CheckToken validates the per-machine agent token and returns it trimmed.
func CheckToken(raw string) (string, error) {
	t := strings.TrimSpace(raw)
	if t == "" {
		return "", Invalid("agent token missing: set DOCKERIOS_AGENT_TOKEN")
	}
	if len(t) < MinTokenLength || len(t) > MaxTokenLength {
		return "", Invalid("agent token is %d characters long: must be %d to %d", len(t), MinTokenLength, MaxTokenLength)
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; c <= ' ' || c > '~' {
			return "", Invalid("agent token has a character at position %d that is not printable ASCII or is whitespace", i+1)
		}
	}
	return t, nil
}

// Display is the console resolution.
type Display struct{ Width, Height int }

// Check validates the resolution.
func (d Display) Check() error {
	if d.Width < 640 || d.Width > 8192 || d.Height < 480 || d.Height > 8192 {
		return Invalid("resolution %dx%d: width and height must be 640-8192 and 480-8192 pixels", d.Width, d.Height)
	}
	return nil
}

func (d Display) String() string { return fmt.Sprintf("%dx%d", d.Width, d.Height) }
