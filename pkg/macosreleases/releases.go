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
	_ "embed"
	"fmt"
	"strconv"
	"strings"
)

// Release is a macOS release: a name and the version family it is.
type Release struct {
	// Name as fetch-macOS-v2.py's menu spells it, e.g. "big-sur".
	Name string
	// Title as Apple writes it, e.g. "Big Sur".
	Title string
	// Family is the version every build of the release starts with:
	// "10.15" for Catalina, "14" for Sonoma (Apple numbered by minor
	// version until 10.15 and by major version from 11).
	Family Version
}

// Releases the recovery fetch knows, oldest first: the names of
// fetch-macOS-v2.py's menu at the pinned OSX-KVM commit (bootdisk/recovery;
// a test on the builder's side checks the two lists agree), with Apple's
// version of each.
var Releases = []Release{
	{"high-sierra", "High Sierra", Version{10, 13}},
	{"mojave", "Mojave", Version{10, 14}},
	{"catalina", "Catalina", Version{10, 15}},
	{"big-sur", "Big Sur", Version{11}},
	{"monterey", "Monterey", Version{12}},
	{"ventura", "Ventura", Version{13}},
	{"sonoma", "Sonoma", Version{14}},
	{"sequoia", "Sequoia", Version{15}},
	{"tahoe", "Tahoe", Version{26}},
}

// ReleaseNames lists the names of Releases, for error messages.
func ReleaseNames() []string {
	names := make([]string, len(Releases))
	for i, r := range Releases {
		names[i] = r.Name
	}
	return names
}

// ReleaseNamed returns the release of that name ("sonoma", "Sonoma",
// "big sur", "macOS Big Sur" all name one).
func ReleaseNamed(name string) (Release, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	n = strings.TrimSpace(strings.TrimPrefix(n, "macos"))
	n = strings.ReplaceAll(n, " ", "-")
	for _, r := range Releases {
		if r.Name == n {
			return r, true
		}
	}
	return Release{}, false
}

// ParseRelease reads what a MacOSImage's spec.release may say — a release
// name ("sonoma"), a version ("14", "14.6.1", "10.15.7") or both ("sonoma
// 14.6", "macOS Sonoma 14.6") — as the most precise version it states:
// "sonoma" is 14, "14.6" is 14.6. ok is false when it names no release
// this package knows (the caller then has no opinion), or when a name and
// a version disagree.
func ParseRelease(s string) (v Version, ok bool) {
	fields := strings.Fields(strings.ToLower(s))
	if len(fields) > 0 && fields[0] == "macos" {
		fields = fields[1:]
	}
	var named *Release
	var version Version
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if pv, err := ParseVersion(f); err == nil {
			if version != nil {
				return nil, false
			}
			version = pv
			continue
		}
		// Two-word names ("big sur").
		if i+1 < len(fields) {
			if r, found := ReleaseNamed(f + "-" + fields[i+1]); found {
				named, i = &r, i+1
				continue
			}
		}
		r, found := ReleaseNamed(f)
		if !found || named != nil {
			return nil, false
		}
		named = &r
	}
	switch {
	case version != nil && named != nil:
		if !named.Family.Contains(version) {
			return nil, false
		}
		return version, true
	case version != nil:
		if _, known := FamilyOf(version); !known {
			return nil, false
		}
		return version, true
	case named != nil:
		return named.Family, true
	}
	return nil, false
}

// FamilyOf returns the release a version belongs to.
func FamilyOf(v Version) (Release, bool) {
	for _, r := range Releases {
		if r.Family.Contains(v) {
			return r, true
		}
	}
	return Release{}, false
}

// Version is a dotted macOS version, e.g. {14, 6, 1}.
type Version []int

// ParseVersion reads "14.6.1" (at most three numbers).
func ParseVersion(s string) (Version, error) {
	parts := strings.Split(s, ".")
	if len(parts) > 3 {
		return nil, fmt.Errorf("%q has more than three numbers", s)
	}
	v := make(Version, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p == "" || (len(p) > 1 && p[0] == '0') {
			return nil, fmt.Errorf("%q is not a version such as 14.6.1", s)
		}
		v[i] = n
	}
	return v, nil
}

func (v Version) String() string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ".")
}

// Compare orders versions, a missing number counting as 0: 14 = 14.0 < 14.6.
func (v Version) Compare(o Version) int {
	for i := 0; i < len(v) || i < len(o); i++ {
		a, b := 0, 0
		if i < len(v) {
			a = v[i]
		}
		if i < len(o) {
			b = o[i]
		}
		if a != b {
			if a < b {
				return -1
			}
			return 1
		}
	}
	return 0
}

// Contains says whether o starts with v: 14 contains 14.6.1, 10.15 contains
// 10.15.7 but not 10.1.
func (v Version) Contains(o Version) bool {
	if len(o) < len(v) {
		return false
	}
	for i := range v {
		if v[i] != o[i] {
			return false
		}
	}
	return true
}
