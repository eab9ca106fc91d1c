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
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dockerios/dockerios/pkg/macosreleases"
)

// The apiserver validates source.recovery.release against
// pkg/macosreleases's list of names and source.recovery.boardID against its
// model table (the Apache side, which may not read this script); the Job
// then looks the release up in the pinned script's menu. The two lists must
// be the same, and each board the script asks as must be a model that runs
// the release it is asked for: otherwise an image the apiserver admitted
// would fail here, or the service would answer with another release.
func TestScriptMenuAgreesWithTheAPI(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "recovery", "fetch-macOS-v2.py"))
	if err != nil {
		t.Fatal(err)
	}
	products, err := ParseProducts(script)
	if err != nil {
		t.Fatal(err)
	}
	var menu []string
	for _, p := range products {
		menu = append(menu, p.Short)
		r, ok := macosreleases.ReleaseNamed(p.Short)
		if !ok {
			t.Errorf("the script's menu offers %q, which pkg/macosreleases does not know: the apiserver would refuse it", p.Short)
			continue
		}
		if err := macosreleases.BoardSupports(p.BoardID, r.Name); err != nil {
			t.Errorf("the script asks for %s as %s: %v", p.Short, p.BoardID, err)
		}
		if _, known := macosreleases.ModelOfBoard(p.BoardID); !known {
			t.Errorf("the script's board %s for %s is in no model of pkg/macosreleases: its support cannot be checked", p.BoardID, p.Short)
		}
	}
	api := macosreleases.ReleaseNames()
	slices.Sort(menu)
	slices.Sort(api)
	if !slices.Equal(menu, api) {
		t.Errorf("the script's menu %v and pkg/macosreleases %v differ: an admitted release would be unknown to the Job, or a fetchable one refused", menu, api)
	}
}
