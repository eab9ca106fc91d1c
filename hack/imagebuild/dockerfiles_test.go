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
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// One path of truth: hack/images.sh builds every DockerIOS image, and no
// Dockerfile describes one differently. The one Dockerfile left is
// KubeVirt's launcher rebuilt with isa-applesmc (a cluster prerequisite
// images.sh cannot build: CentOS's qemu-kvm source RPM); it must name the
// KubeVirt release go.mod's kubevirt.io/api is.
func TestOnlyTheLauncherHasADockerfile(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "_output" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (d.Name() == "Dockerfile" || strings.HasPrefix(d.Name(), "Dockerfile.") || strings.HasSuffix(d.Name(), ".Dockerfile")) {
			rel, _ := filepath.Rel(root, p)
			found = append(found, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0] != "artifacts/kubevirt/Dockerfile" {
		t.Fatalf("Dockerfiles %v; hack/images.sh is the one way DockerIOS's images are built", found)
	}

	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*kubevirt\.io/api (v[0-9.]+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod requires no kubevirt.io/api")
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, found[0]))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dockerfile), "ARG KUBEVIRT_VERSION="+string(m[1])+"\n") {
		t.Errorf("%s's KUBEVIRT_VERSION is not go.mod's kubevirt.io/api %s", found[0], m[1])
	}
}
