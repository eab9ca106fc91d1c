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

// Package versiontest builds a DockerIOS binary stamped with a known
// version, for the tests that prove --version and /version say what the
// build stamped. It uses only the standard library, so every module of
// this repository (the bootdisk builder's too) can use it.
//
// It is test code: only tests import it.
package versiontest

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// Stamp is the version tests stamp: semver-valid, and no release's.
const Stamp = "v9.8.7-test"

// Package is the import path -X stamps.
const Package = "github.com/dockerios/dockerios/pkg/version"

// LDFlags is the -ldflags value that stamps gitVersion, as hack/version.sh
// does.
func LDFlags(gitVersion string) string {
	return "-X " + Package + ".gitVersion=" + gitVersion
}

// Build builds pkg (an import path, or a directory relative to the test's
// own) stamped with gitVersion, into a directory the test removes, and
// returns the binary's path. No -trimpath: the build shares the compile
// cache with the test's own, so only the link is new.
func Build(t testing.TB, pkg, gitVersion string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "stamped")
	if out, err := exec.Command("go", "build", "-ldflags", LDFlags(gitVersion), "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("building %s stamped %s: %v\n%s", pkg, gitVersion, err, out)
	}
	return bin
}
