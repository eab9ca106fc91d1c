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
	"strings"
	"testing"
)

// The example is a workload layer: it may use DockerIOS only as any team
// would, through its public API — the dockerios.io types (pkg/apis) and
// generated client code (pkg/generated), and the version it is built
// from (pkg/version). Never the machine layer's
// insides (storage, registry, controller, identities), never KubeVirt:
// a workload never creates a VirtualMachine, touches an identity or knows
// a bootdisk exists.
func TestBuiltOnlyOnThePublicAPI(t *testing.T) {
	const (
		dockerios = "github.com/dockerios/dockerios/"
		self      = "github.com/dockerios/dockerios/examples/gitlab-runner"
	)
	public := []string{dockerios + "pkg/apis/", dockerios + "pkg/generated/"}
	// Every package of the example but its tests.
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", self+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list found only %d packages: %v", len(deps), deps)
	}
	var usesAPI bool
	for _, dep := range deps {
		switch {
		case strings.HasPrefix(dep, "kubevirt.io/"):
			t.Errorf("%s: the example must not know KubeVirt", dep)
		case strings.HasPrefix(dep, self):
		case strings.HasPrefix(dep, dockerios):
			ok := dep == dockerios+"pkg/version"
			for _, p := range public {
				ok = ok || strings.HasPrefix(dep, p)
			}
			if !ok {
				t.Errorf("%s is not DockerIOS's public API (%v)", dep, public)
			}
			usesAPI = true
		}
	}
	if !usesAPI {
		t.Error("the example does not use dockerios.io at all: the check checks nothing")
	}
}
