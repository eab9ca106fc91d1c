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
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dockerios/dockerios/pkg/identity"
	"howett.net/plist"
)

// templateSlot is a value DeriveTemplate replaces with a placeholder.
type templateSlot struct {
	path        []string
	placeholder string
	// data: the value may be <data> as well as <string> (the ROM).
	data bool
}

// templateSlots are the keys OpenCore reads the identity and the console
// resolution from, with the osx-serial-generator placeholders Render fills
// in. Each must exist in the config DeriveTemplate starts from.
var templateSlots = []templateSlot{
	{path: []string{"PlatformInfo", "Generic", "SystemProductName"}, placeholder: "{{DEVICE_MODEL}}"},
	{path: []string{"PlatformInfo", "Generic", "SystemSerialNumber"}, placeholder: "{{SERIAL}}"},
	{path: []string{"PlatformInfo", "Generic", "MLB"}, placeholder: "{{BOARD_SERIAL}}"},
	{path: []string{"PlatformInfo", "Generic", "SystemUUID"}, placeholder: "{{UUID}}"},
	// A <string>; Render turns <string>{{ROM}}</string> into six bytes of
	// <data>.
	{path: []string{"PlatformInfo", "Generic", "ROM"}, placeholder: "{{ROM}}", data: true},
	{path: []string{"UEFI", "Output", "Resolution"}, placeholder: "{{WIDTH}}x{{HEIGHT}}@32"},
}

// openCoreDefaults are the keys of OpenCore 1.0.5's Docs/Sample.plist that
// OSX-KVM's config.plist (written for OpenCore 1.0.0) lacks, with the
// values OpenCore assumes when they are missing. DeriveTemplate adds them
// only where absent, so that ocvalidate 1.0.5 finds every key.
var openCoreDefaults = []struct {
	path  []string
	value func() any
}{
	{[]string{"Booter", "Quirks", "ClearTaskSwitchBit"}, func() any { return false }}, // since OpenCore 1.0.4
	{[]string{"UEFI", "Unload"}, func() any { return []any{} }},                       // since OpenCore 1.0.2
	{[]string{"PlatformInfo", "Generic", "MaxBIOSVersion"}, func() any { return false }},
}

// DeriveTemplate turns an OpenCore config.plist (OSX-KVM's
// OpenCore/config.plist) into a template for Render: the identity keys and
// the resolution get osx-serial-generator's placeholders, the OpenCore 1.0.5
// keys the config lacks are added with OpenCore's defaults, and everything
// else is kept. It fails, naming the key, when a key it fills is missing or
// not a string (ROM: string or data), so that a change of the upstream
// layout fails the image build rather than a boot. The same config gives
// the same bytes.
func DeriveTemplate(config []byte) ([]byte, error) {
	var root map[string]any
	format, err := plist.Unmarshal(config, &root)
	if err != nil {
		return nil, Invalid("OpenCore config is not an XML property list with a dictionary at its root: %v", err)
	}
	if format != plist.XMLFormat {
		return nil, Invalid("OpenCore config is a %s property list, want XML", plist.FormatNames[format])
	}
	// A {{ in the config would be taken for a placeholder by Render.
	if p := findBraces(root, nil); p != "" {
		return nil, Invalid("OpenCore config: %s already contains {{", p)
	}
	for _, s := range templateSlots {
		parent, err := parentDict(root, s.path)
		if err != nil {
			return nil, err
		}
		key := s.path[len(s.path)-1]
		name := keyPath(s.path)
		switch v := parent[key].(type) {
		case string:
		case []byte:
			if !s.data {
				return nil, Invalid("OpenCore config: %s is %s, want a string", name, plistType(v))
			}
		case nil:
			return nil, Invalid("OpenCore config: %s is missing", name)
		default:
			want := "a string"
			if s.data {
				want = "a string or data"
			}
			return nil, Invalid("OpenCore config: %s is %s, want %s", name, plistType(v), want)
		}
		parent[key] = s.placeholder
	}
	// Macs of a pool boot unattended: the picker would only add its
	// timeout to every boot (OSX-KVM shows it for 45 s). Without it
	// OpenCore boots the default entry at once, as the nopicker templates
	// of osx-serial-generator do.
	boot, err := parentDict(root, []string{"Misc", "Boot", "ShowPicker"})
	if err != nil {
		return nil, err
	}
	if _, ok := boot["ShowPicker"].(bool); !ok {
		return nil, Invalid("OpenCore config: Misc → Boot → ShowPicker is %s, want a boolean", plistType(boot["ShowPicker"]))
	}
	boot["ShowPicker"] = false
	for _, d := range openCoreDefaults {
		parent, err := parentDict(root, d.path)
		if err != nil {
			return nil, err
		}
		if _, ok := parent[d.path[len(d.path)-1]]; !ok {
			parent[d.path[len(d.path)-1]] = d.value()
		}
	}
	out, err := encodeXML(root)
	if err != nil {
		return nil, err
	}
	if err := checkTemplate(out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkTemplate renders a derived template once, with a fixed identity, so
// that a template Render would refuse never leaves DeriveTemplate.
func checkTemplate(template []byte) error {
	in := RenderInput{
		Identity: identity.Values{
			Model:             "iMacPro1,1",
			SerialNumber:      "C02CK029HX87",
			BoardSerialNumber: "C02015700QXJG36CB",
			SystemUUID:        "4B408A88-4062-4532-9AA1-3D8A3549327F",
			MACAddress:        "34:31:8F:D3:88:E4",
			ROM:               "34318FD388E4",
		},
		Display: Display{Width: 1920, Height: 1080},
		Token:   strings.Repeat("0", 64),
	}
	if _, err := Render(template, in); err != nil {
		return fmt.Errorf("the derived template does not render: %w", err)
	}
	return nil
}

// parentDict returns the dictionary holding the last key of path; each
// dictionary on the way must exist.
func parentDict(root map[string]any, path []string) (map[string]any, error) {
	cur := root
	for i, k := range path[:len(path)-1] {
		switch v := cur[k].(type) {
		case map[string]any:
			cur = v
		case nil:
			return nil, Invalid("OpenCore config: %s is missing", keyPath(path[:i+1]))
		default:
			return nil, Invalid("OpenCore config: %s is %s, want a dictionary", keyPath(path[:i+1]), plistType(v))
		}
	}
	return cur, nil
}

// findBraces returns the key path of the first (in sorted key order) key or
// string value containing "{{", or "".
func findBraces(v any, path []string) string {
	switch v := v.(type) {
	case string:
		if strings.Contains(v, "{{") {
			return keyPath(path)
		}
	case []any:
		for i, e := range v {
			if p := findBraces(e, slices.Concat(path, []string{fmt.Sprintf("[%d]", i)})); p != "" {
				return p
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := slices.Concat(path, []string{k})
			if strings.Contains(k, "{{") {
				return keyPath(p)
			}
			if found := findBraces(v[k], p); found != "" {
				return found
			}
		}
	}
	return ""
}

// keyPath names a key the way Render's errors do: PlatformInfo → Generic → MLB.
func keyPath(path []string) string {
	var b strings.Builder
	for i, k := range path {
		if i > 0 && !strings.HasPrefix(k, "[") {
			b.WriteString(" → ")
		}
		b.WriteString(k)
	}
	return b.String()
}

// plistType names the property-list type of a value decoded by
// howett.net/plist, with its article.
func plistType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a dictionary"
	case []any:
		return "an array"
	case string:
		return "a string"
	case []byte:
		return "data"
	case bool:
		return "a boolean"
	case uint64, int64:
		return "an integer"
	case float64:
		return "a real"
	case time.Time:
		return "a date"
	}
	return fmt.Sprintf("a %T", v)
}
