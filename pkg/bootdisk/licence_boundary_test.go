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

package bootdisk

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gplModule is the bootdisk builder's module (GPL-3.0). Nothing the
// Apache-2.0 module builds may depend on it; pkg/bootdisk (this package) is
// a different path and only describes the builder's Job.
const gplModule = "github.com/dockerios/dockerios/bootdisk"

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

func TestLicenceBoundary(t *testing.T) {
	root := moduleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "bootdisk", "go.mod")); err != nil {
		t.Fatalf("bootdisk/ must be its own module (so that ./... here never includes it): %v", err)
	}
	for _, pattern := range []string{"./cmd/...", "./..."} {
		cmd := exec.Command("go", "list", "-deps", "-test", pattern)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				t.Fatalf("go list -deps %s: %v\n%s", pattern, err, ee.Stderr)
			}
			t.Fatal(err)
		}
		n := 0
		for _, pkg := range strings.Fields(string(out)) {
			n++
			if pkg == gplModule || strings.HasPrefix(pkg, gplModule+"/") {
				t.Errorf("%s depends on %s, which is GPL-3.0", pattern, pkg)
			}
		}
		if n < 10 {
			t.Fatalf("go list -deps %s listed only %d packages", pattern, n)
		}
	}
}
