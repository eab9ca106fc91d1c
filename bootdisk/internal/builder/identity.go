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
	"fmt"
	"os"
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
