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
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Product is one row of fetch-macOS-v2.py's menu table (`products = [...]`
// in its main()): the board-id and MLB the script asks Apple's recovery
// service with for a release, and the os type ("default" when the row has
// none, as the script does).
type Product struct {
	Name    string `json:"name"`
	BoardID string `json:"b"`
	MLB     string `json:"m"`
	OSType  string `json:"os_type"`
	Short   string `json:"short"`
}

var (
	productsStart = regexp.MustCompile(`(?m)^\s*products\s*=\s*\[\s*$`)
	productRow    = regexp.MustCompile(`^\s*(\{.*\})\s*,?\s*$`)
	boardIDRe     = regexp.MustCompile(`^Mac-[0-9A-F]{16}$`)
	mlbRe         = regexp.MustCompile(`^[0-9A-Z]{17}$`)
	shortRe       = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
)

// ParseProducts reads the release table from the script's text. The table
// is read, not copied: the script's board-ids are the distinction it
// encodes, and a pinned script that moves one moves what DockerIOS asks.
// Each row is one JSON object on one line, as at the pinned commit; a
// layout this parser does not recognise is an error, never an empty table.
func ParseProducts(script []byte) ([]Product, error) {
	loc := productsStart.FindIndex(script)
	if loc == nil {
		return nil, fmt.Errorf("fetch-macOS-v2.py has no `products = [` table")
	}
	var out []Product
	seen := map[string]bool{}
	for _, line := range strings.Split(string(script[loc[1]:]), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		if strings.HasPrefix(trimmed, "]") {
			break
		}
		m := productRow.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("fetch-macOS-v2.py products table: unrecognised row %q", trimmed)
		}
		var p Product
		dec := json.NewDecoder(bytes.NewReader([]byte(m[1])))
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("fetch-macOS-v2.py products table: row %q: %v", trimmed, err)
		}
		if p.OSType == "" {
			p.OSType = "default"
		}
		switch {
		case !shortRe.MatchString(p.Short):
			return nil, fmt.Errorf("fetch-macOS-v2.py products table: row %q: bad short name", trimmed)
		case !boardIDRe.MatchString(p.BoardID):
			return nil, fmt.Errorf("fetch-macOS-v2.py products table: row %q: bad board-id", trimmed)
		case !mlbRe.MatchString(p.MLB):
			return nil, fmt.Errorf("fetch-macOS-v2.py products table: row %q: bad MLB", trimmed)
		case p.OSType != "default" && p.OSType != "latest":
			return nil, fmt.Errorf("fetch-macOS-v2.py products table: row %q: bad os_type", trimmed)
		case seen[p.Short]:
			return nil, fmt.Errorf("fetch-macOS-v2.py products table: %q appears twice", p.Short)
		}
		seen[p.Short] = true
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("fetch-macOS-v2.py products table is empty")
	}
	return out, nil
}

// Lookup returns the row for a release's short name (sonoma, ventura, ...).
func Lookup(products []Product, release string) (Product, bool) {
	for _, p := range products {
		if p.Short == release {
			return p, true
		}
	}
	return Product{}, false
}

// ValidBoardID reports whether s has the form of an Apple board-id the
// recovery service knows (Mac- and 16 upper-case hex digits), the form the
// apiserver accepts.
func ValidBoardID(s string) bool { return boardIDRe.MatchString(s) }
