/*
Copyright The DockerIOS Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package macosreleases

import (
	"strings"
	"testing"
)

func TestParseRelease(t *testing.T) {
	for in, want := range map[string]string{
		"sonoma":             "14",
		"Sonoma":             "14",
		"macOS Sonoma":       "14",
		"big-sur":            "11",
		"Big Sur":            "11",
		"macOS Big Sur 11.7": "11.7",
		"14.6":               "14.6",
		"14.6.1":             "14.6.1",
		"sonoma 14.6":        "14.6",
		"10.15.7":            "10.15.7",
		"catalina":           "10.15",
		"tahoe":              "26",
		// Not releases this package knows, or a name and version that disagree.
		"sonoma 13.1": "",
		"10.1":        "",
		"27":          "",
		"14.06":       "",
		"kodiak":      "",
		"":            "",
		"14.6.1.2":    "",
	} {
		v, ok := ParseRelease(in)
		got := ""
		if ok {
			got = v.String()
		}
		if got != want {
			t.Errorf("ParseRelease(%q) = %q (ok %v), want %q", in, got, ok, want)
		}
	}
}

func TestSupports(t *testing.T) {
	for _, tc := range []struct {
		model, release string
		wantErr        string // "" for supported
	}{
		{"iMacPro1,1", "sonoma", ""},
		{"iMacPro1,1", "sequoia", ""},
		{"iMacPro1,1", "15.7.4", ""},
		{"iMacPro1,1", "high-sierra", ""},
		{"iMacPro1,1", "tahoe", "iMacPro1,1 runs macOS 10.13.2 to 15.7.4, and \"tahoe\" is newer"},
		{"iMacPro1,1", "15.8", "is newer"},
		{"iMacPro1,1", "10.13.1", "runs macOS 10.13.2 and later"},
		{"iMacPro1,1", "mojave", ""},
		{"MacPro7,1", "tahoe", ""},
		{"MacPro7,1", "mojave", "MacPro7,1 runs macOS 10.15.1 and later"},
		{"iMac20,1", "26.1", ""},
		{"Macmini8,1", "tahoe", "is newer"},
		{"MacPro6,1", "ventura", "MacPro6,1 runs macOS 10.9.1 to 12.7.6"},
		{"iMac13,1", "catalina", ""},
		{"iMac13,1", "big-sur", "is newer"},
		// No opinion: a model or release the tables do not know.
		{"Mac99,1", "sonoma", ""},
		{"iMacPro1,1", "kodiak", ""},
	} {
		err := Supports(tc.model, tc.release)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("Supports(%s, %s) = %v, want nil", tc.model, tc.release, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("Supports(%s, %s) = %v, want an error containing %q", tc.model, tc.release, err, tc.wantErr)
		}
	}
}

func TestBoardSupports(t *testing.T) {
	// The boards fetch-macOS-v2.py asks as (its menu at the pinned OSX-KVM
	// commit) each run the release they are asked for.
	for board, release := range map[string]string{
		"Mac-7BA5B2D9E42DDD94": "high-sierra",
		"Mac-7BA5B2DFE22DDD8C": "mojave",
		"Mac-00BE6ED71E35EB86": "catalina",
		"Mac-2BD1B31983FE1663": "big-sur",
		"Mac-B809C3757DA9BB8D": "monterey",
		"Mac-4B682C642B45593E": "ventura",
		"Mac-827FAC58A8FDFA22": "sonoma",
		"Mac-CFF7D910A743CAAF": "tahoe",
	} {
		if err := BoardSupports(board, release); err != nil {
			t.Errorf("BoardSupports(%s, %s) = %v", board, release, err)
		}
	}
	err := BoardSupports("Mac-7BA5B2D9E42DDD94", "tahoe")
	if err == nil || !strings.Contains(err.Error(), "board Mac-7BA5B2D9E42DDD94 is a iMacPro1,1") {
		t.Errorf("BoardSupports(iMac Pro board, tahoe) = %v, want the board's model named", err)
	}
	if err := BoardSupports("Mac-0000000000000000", "tahoe"); err != nil {
		t.Errorf("an unknown board has no opinion, got %v", err)
	}
}

func TestTableIsWhole(t *testing.T) {
	ms, err := parseModels(modelsTable)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 100 {
		t.Fatalf("models.txt has %d models, want the whole AppleModels database (121 at the pinned commit)", len(ms))
	}
	for _, m := range ms {
		if m.Newest != nil && m.Newest.Compare(m.Oldest) < 0 {
			t.Errorf("%s: newest %s before oldest %s", m.Name, m.Newest, m.Oldest)
		}
	}
	if _, err := parseModels("iMacPro1,1\tMac-7BA5B2D9E42DDD94\t10.13.2\n"); err == nil {
		t.Error("a line of three columns was accepted")
	}
}
