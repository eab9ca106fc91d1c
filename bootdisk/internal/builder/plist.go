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
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dockerios/dockerios/pkg/identity"
	"howett.net/plist"
)

// The NVRAM variable the guest agent reads its token from
// (agent/README.md): nvram 4D1FDA02-38C7-4A6A-9CC6-4BCCA8B30102:dockerios-agent-token.
const (
	AgentTokenGUID     = "4D1FDA02-38C7-4A6A-9CC6-4BCCA8B30102"
	AgentTokenVariable = "dockerios-agent-token"
)

// Placeholders are those of osx-serial-generator's templates
// (generate-specific-bootdisk.sh); every one must be used by a template.
var Placeholders = []string{"{{DEVICE_MODEL}}", "{{SERIAL}}", "{{BOARD_SERIAL}}", "{{UUID}}", "{{ROM}}", "{{WIDTH}}", "{{HEIGHT}}"}

var (
	xmlComment = regexp.MustCompile(`(?s)<!--.*?-->`)
	// osx-serial-generator writes the ROM as <string>hex</string>; OpenCore
	// wants six bytes of <data>. Either element around {{ROM}} becomes data.
	romElement       = regexp.MustCompile(`<(string|data)>\s*\{\{ROM\}\}\s*</(string|data)>`)
	leftPlaceholders = regexp.MustCompile(`\{\{[A-Za-z0-9_]+\}\}`)
)

// RenderInput is everything config.plist depends on.
type RenderInput struct {
	Identity identity.Values
	Display  Display
	Token    string
}

// Render fills an osx-serial-generator style config.plist template and adds
// the agent token to NVRAM. It fails, naming the problem, when the template
// lacks a placeholder, has one it does not know, is not a property list, or
// does not put the identity where OpenCore reads it.
func Render(template []byte, in RenderInput) ([]byte, error) {
	// Comments go first: upstream templates name every placeholder in a
	// comment above the XML declaration, which would hide a missing one, and
	// a comment before the declaration is not well-formed XML.
	body := xmlComment.ReplaceAllString(string(template), "")
	for _, p := range Placeholders {
		if !strings.Contains(body, p) {
			return nil, Invalid("template: placeholder %s is missing (outside comments)", p)
		}
	}
	rom, err := hex.DecodeString(in.Identity.ROM)
	if err != nil || len(rom) != 6 {
		return nil, Invalid("ROM %q is not six bytes of hex", in.Identity.ROM)
	}
	body = romElement.ReplaceAllString(body, "<data>"+base64.StdEncoding.EncodeToString(rom)+"</data>")
	if strings.Contains(body, "{{ROM}}") {
		return nil, Invalid("template: {{ROM}} must be the whole value of a <string> or <data> element")
	}
	r := strings.NewReplacer(
		"{{DEVICE_MODEL}}", escape(in.Identity.Model),
		"{{SERIAL}}", escape(in.Identity.SerialNumber),
		"{{BOARD_SERIAL}}", escape(in.Identity.BoardSerialNumber),
		"{{UUID}}", escape(in.Identity.SystemUUID),
		"{{WIDTH}}", strconv.Itoa(in.Display.Width),
		"{{HEIGHT}}", strconv.Itoa(in.Display.Height),
	)
	body = r.Replace(body)
	if m := leftPlaceholders.FindString(body); m != "" {
		return nil, Invalid("template: unknown placeholder %s", m)
	}
	body = strings.TrimSpace(body)

	var root map[string]any
	if _, err := plist.Unmarshal([]byte(body), &root); err != nil {
		return nil, Invalid("template is not an XML property list with a dictionary at its root: %v", err)
	}
	if err := checkRendered(root, in, rom); err != nil {
		return nil, err
	}
	if err := addToken(root, in.Token); err != nil {
		return nil, err
	}
	return encodeXML(root)
}

// encodeXML writes a config.plist the way Render and DeriveTemplate both
// do: XML, tab-indented, dictionary keys sorted (so the same root gives the
// same bytes), ending in a newline.
func encodeXML(root map[string]any) ([]byte, error) {
	out, err := plist.MarshalIndent(root, plist.XMLFormat, "\t")
	if err != nil {
		return nil, fmt.Errorf("encoding config.plist: %w", err)
	}
	// Spell empty values out, as Apple's and OpenCore's sample configs do,
	// rather than trust every parser with <data/>. ('<' inside values is
	// escaped, so these can only be elements.)
	out = bytes.ReplaceAll(out, []byte("<data/>"), []byte("<data></data>"))
	out = bytes.ReplaceAll(out, []byte("<string/>"), []byte("<string></string>"))
	return append(out, '\n'), nil
}

func escape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// dictAt walks nested dictionaries. create makes missing ones.
func dictAt(root map[string]any, create bool, path ...string) (map[string]any, error) {
	cur := root
	for i, k := range path {
		v, ok := cur[k]
		if !ok && create {
			v = map[string]any{}
			cur[k] = v
		}
		d, isDict := v.(map[string]any)
		if !isDict {
			return nil, Invalid("template: %s is not a dictionary", strings.Join(path[:i+1], " → "))
		}
		cur = d
	}
	return cur, nil
}

// checkRendered proves the placeholders were where OpenCore reads them.
func checkRendered(root map[string]any, in RenderInput, rom []byte) error {
	gen, err := dictAt(root, false, "PlatformInfo", "Generic")
	if err != nil {
		return err
	}
	for _, want := range []struct{ key, placeholder, value string }{
		{"SystemProductName", "{{DEVICE_MODEL}}", in.Identity.Model},
		{"SystemSerialNumber", "{{SERIAL}}", in.Identity.SerialNumber},
		{"MLB", "{{BOARD_SERIAL}}", in.Identity.BoardSerialNumber},
		{"SystemUUID", "{{UUID}}", in.Identity.SystemUUID},
	} {
		if got, _ := gen[want.key].(string); got != want.value {
			return Invalid("template: PlatformInfo → Generic → %s must be <string>%s</string>", want.key, want.placeholder)
		}
	}
	if got, _ := gen["ROM"].([]byte); !bytes.Equal(got, rom) {
		return Invalid("template: PlatformInfo → Generic → ROM must be {{ROM}}")
	}
	out, err := dictAt(root, false, "UEFI", "Output")
	if err != nil {
		return err
	}
	res, _ := out["Resolution"].(string)
	if !strings.HasPrefix(res, in.Display.String()) {
		return Invalid("template: UEFI → Output → Resolution must be <string>{{WIDTH}}x{{HEIGHT}}@32</string> (or without @depth)")
	}
	return nil
}

// addToken sets the agent token under NVRAM → Add → AgentTokenGUID and lists
// it under NVRAM → Delete → AgentTokenGUID: OpenCore's Add does not replace a
// variable that exists, so without Delete a re-provisioned machine would keep
// its previous token.
func addToken(root map[string]any, token string) error {
	add, err := dictAt(root, true, "NVRAM", "Add", AgentTokenGUID)
	if err != nil {
		return err
	}
	add[AgentTokenVariable] = []byte(token)
	del, err := dictAt(root, true, "NVRAM", "Delete")
	if err != nil {
		return err
	}
	var names []any
	switch v := del[AgentTokenGUID].(type) {
	case nil:
	case []any:
		names = v
	default:
		return Invalid("template: NVRAM → Delete → %s is not an array", AgentTokenGUID)
	}
	if !slices.Contains(names, any(AgentTokenVariable)) {
		names = append(names, AgentTokenVariable)
	}
	del[AgentTokenGUID] = names
	return nil
}
