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

// Package version is DockerIOS's own version: what every binary's
// --version prints, what the apiserver's /version answers, and the tag
// of the images the controller names by default. Its values are stamped
// at build time from git by hack/version.sh:
//
//	go build -ldflags "$(hack/version.sh)" ./cmd/...
//
// It imports nothing outside the standard library, so that every module
// of this repository (the bootdisk builder's, under the GPL, and the
// examples') can use it without taking on Kubernetes' dependencies. It
// must never hold the Kubernetes libraries' version: that one decides
// which features and API behaviour the libraries emulate, and is
// k8s.io/component-base/version's.
package version

import (
	"fmt"
	"runtime"
	"strings"
)

// Set by -ldflags "-X github.com/dockerios/dockerios/pkg/version.NAME=VALUE"
// (hack/version.sh). They are variables, not constants, because -X can
// only set a package-level string variable that is not initialised by a
// function call. The defaults are what a plain "go build" gives: a
// semver-valid version that says it was not stamped.
var (
	// gitVersion is `git describe --tags --always --dirty --match 'v*'`,
	// such as v0.2.0 or v0.2.0-14-gabcdef0, or v0.0.0-gabcdef0 before the
	// first tag.
	gitVersion = "v0.0.0-dev"
	// gitCommit is the full SHA of the commit built.
	gitCommit = ""
	// gitTreeState is "clean" or "dirty" (uncommitted changes to tracked
	// files went into the build).
	gitTreeState = ""
	// buildDate is the commit's time in RFC 3339 UTC, not the time of the
	// build, so two builds of one commit are the same bytes.
	buildDate = "1970-01-01T00:00:00Z"
)

// Info is DockerIOS's version. Its fields are those of
// k8s.io/apimachinery/pkg/version.Info, in the same order and of the same
// types, so that one converts to the other (apimachineryversion.Info(v))
// where the Kubernetes libraries want theirs, as the apiserver's /version
// does; tags are not part of a conversion, so they may stay the same too.
type Info struct {
	// Major and Minor are those of GitVersion.
	Major string `json:"major"`
	Minor string `json:"minor"`
	// The emulation and minimum compatibility versions describe a
	// Kubernetes component's API behaviour; DockerIOS has no such version
	// of its own, so Get leaves them empty (omitted from JSON).
	EmulationMajor        string `json:"emulationMajor,omitempty"`
	EmulationMinor        string `json:"emulationMinor,omitempty"`
	MinCompatibilityMajor string `json:"minCompatibilityMajor,omitempty"`
	MinCompatibilityMinor string `json:"minCompatibilityMinor,omitempty"`
	GitVersion            string `json:"gitVersion"`
	GitCommit             string `json:"gitCommit"`
	GitTreeState          string `json:"gitTreeState"`
	BuildDate             string `json:"buildDate"`
	GoVersion             string `json:"goVersion"`
	Compiler              string `json:"compiler"`
	Platform              string `json:"platform"`
}

// String is the version alone, as --version prints it (and as
// apimachinery's Info.String says it).
func (i Info) String() string { return i.GitVersion }

// Get returns the version this binary was built as.
func Get() Info {
	major, minor := majorMinor(gitVersion)
	return Info{
		Major:        major,
		Minor:        minor,
		GitVersion:   gitVersion,
		GitCommit:    gitCommit,
		GitTreeState: gitTreeState,
		BuildDate:    buildDate,
		GoVersion:    runtime.Version(),
		Compiler:     runtime.Compiler,
		Platform:     fmt.Sprintf("%s/%s", runtime.GOOS, runtime.GOARCH),
	}
}

// String is GitVersion: what --version prints.
func String() string { return gitVersion }

// majorMinor reads the major and minor version out of a semantic version
// such as v0.2.0-14-gabcdef0; both are empty for anything else, as a
// version stamped by hand may be.
func majorMinor(v string) (string, string) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if !strings.HasPrefix(v, "v") || len(parts) < 3 || !digits(parts[0]) || !digits(parts[1]) {
		return "", ""
	}
	return parts[0], parts[1]
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
