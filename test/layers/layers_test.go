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

// Package layers checks that imports only run down the layers: the API
// types and the scheme at the bottom, the storage layer on them, the
// registry on storage, the apiserver wiring on the registry, the binaries
// on top; the controller beside the apiserver, talking to it only through
// the API (the generated clientset), never through its storage or registry.
package layers

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/dockerios/dockerios/"

// rules: packages under a prefix may not depend (directly or through
// another package) on anything under the forbidden prefixes.
var rules = []struct {
	layer     string
	forbidden []string
	why       string
}{
	{"pkg/apis/", []string{"pkg/storage/", "pkg/registry/", "pkg/apiserver", "pkg/controller/", "cmd/"},
		"the API types are the bottom layer"},
	{"pkg/scheme", []string{"pkg/storage/", "pkg/registry/", "pkg/apiserver", "pkg/controller/", "cmd/"},
		"the scheme sits on the API types alone, so every layer above may use it"},
	{"pkg/storage/", []string{"pkg/registry/", "pkg/apiserver", "pkg/controller/", "cmd/"},
		"storage must not depend on the registry or the server that wires it"},
	{"pkg/registry/", []string{"pkg/apiserver", "pkg/controller/", "cmd/"},
		"the registry must not depend on the server that wires it"},
	{"pkg/controller/", []string{"pkg/storage/", "pkg/registry/", "pkg/apiserver", "cmd/"},
		"the controller reaches the API through its clients, never through the apiserver's insides"},
	{"pkg/", []string{"cmd/"},
		"libraries never import a binary"},
}

// deps lists every package of the module matching pattern with the
// packages it depends on, tests excluded (a test may reach up a layer to
// set up what it tests).
func deps(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	root, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, pattern)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(root)))
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %s: %v\n%s", pattern, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		m[f[0]] = f[1:]
	}
	return m
}

func TestImportsRunDownTheLayers(t *testing.T) {
	all := deps(t, "./...")
	if len(all) < 50 {
		t.Fatalf("go list found %d packages; is this the module root?", len(all))
	}
	checked := map[string]bool{}
	for _, r := range rules {
		for pkg, ds := range all {
			rel := strings.TrimPrefix(pkg, module)
			if !strings.HasPrefix(rel, r.layer) {
				continue
			}
			checked[r.layer] = true
			for _, d := range ds {
				drel, ours := strings.CutPrefix(d, module)
				if !ours {
					continue
				}
				for _, f := range r.forbidden {
					if strings.HasPrefix(drel, f) {
						t.Errorf("%s depends on %s: %s", rel, drel, r.why)
					}
				}
			}
		}
	}
	for _, r := range rules {
		if !checked[r.layer] {
			t.Errorf("no package under %s: the rule guards nothing (was the layer moved?)", r.layer)
		}
	}
}
