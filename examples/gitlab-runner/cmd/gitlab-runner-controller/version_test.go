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

package main

import (
	"os/exec"
	"testing"

	"github.com/dockerios/dockerios/pkg/version/versiontest"
)

// --version prints the version the build stamped, and needs nothing else:
// no kubeconfig, no cluster.
func TestVersionFlag_PrintsTheStampedVersion(t *testing.T) {
	bin := versiontest.Build(t, ".", versiontest.Stamp)
	cmd := exec.Command(bin, "--version")
	cmd.Env = []string{"KUBECONFIG=/nonexistent"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	if got, want := string(out), versiontest.Stamp+"\n"; got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
}
