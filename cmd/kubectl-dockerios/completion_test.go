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
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

func TestCompletionScripts(t *testing.T) {
	for _, tc := range []struct {
		shell string
		// want is what marks the script as that shell's, for this program.
		want string
	}{
		{"bash", "complete -o default -F __start_kubectl-dockerios kubectl-dockerios"},
		{"zsh", "#compdef kubectl-dockerios"},
		{"fish", "complete -c kubectl-dockerios "},
		{"powershell", "Register-ArgumentCompleter -CommandName 'kubectl-dockerios'"},
		{"kubectl", "exec kubectl-dockerios __complete \"$@\""},
	} {
		t.Run(tc.shell, func(t *testing.T) {
			p := newPlugin(t, newFakeAPI())
			if err := p.run(context.Background(), "completion", tc.shell); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(p.stdout.String(), tc.want) {
				t.Errorf("the %s script lacks %q:\n%.600s", tc.shell, tc.want, p.stdout)
			}
		})
	}
	p := newPlugin(t, newFakeAPI())
	if err := p.run(context.Background(), "completion", "tcsh"); err == nil || !strings.Contains(err.Error(), `invalid argument "tcsh"`) {
		t.Errorf("completion tcsh: %v", err)
	}
}

// complete runs cobra's completion request, as the shell scripts do, and
// returns the completions and the directive line.
func complete(t *testing.T, p *plugin, args ...string) ([]string, string) {
	t.Helper()
	if err := p.run(context.Background(), append([]string{"__complete"}, args...)...); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(p.stdout.String()), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// Names are completed from the API: pools and claims of the namespace,
// classes and identity pools of the cluster.
func TestCompletion_NamesFromTheAPI(t *testing.T) {
	inOtherNS := machinePool("elsewhere")
	inOtherNS.Namespace = "other"
	objects := []runtime.Object{
		machinePool("warm"), machinePool("xcode16"), inOtherNS,
		&v1alpha1.MacOSMachineClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}},
		&v1alpha1.MacOSMachineClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}},
		pendingClaim("build-1", "warm"), pendingClaim("build-2", "warm"), pendingClaim("ci-1", "warm"),
		identityPool("imacpro", "iMacPro1,1"),
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"claim --pool", []string{"claim", "--pool", ""}, []string{"warm", "xcode16"}},
		{"claim --pool, a prefix typed", []string{"claim", "--pool", "x"}, []string{"xcode16"}},
		{"claim NAME --pool, NAME a pool's name too", []string{"claim", "warm", "--pool", ""}, []string{"warm", "xcode16"}},
		{"claim --pool in another namespace", []string{"claim", "-n", "other", "--pool", ""}, []string{"elsewhere"}},
		{"claim --class", []string{"claim", "--class", ""}, []string{"gpu", "standard"}},
		{"release, less the claims already named", []string{"release", "build-1", "b"}, []string{"build-2"}},
		{"identities generate --pool", []string{"identities", "generate", "--pool", ""}, []string{"imacpro"}},
		{"identities import --pool", []string{"identities", "import", "--pool", ""}, []string{"imacpro"}},
		{"-o", []string{"machines", "-o", "y"}, []string{"yaml"}},
		{"-n, from the cluster's namespaces", []string{"machines", "-n", "d"}, []string{"default", "demo"}},
		{"generate -o has csv", []string{"identities", "generate", "-o", "c"}, []string{"csv"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, directive := complete(t, newPlugin(t, newFakeAPI(objects...)), tc.args...)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("completions %q, want %q", got, tc.want)
			}
			// 4 is ShellCompDirectiveNoFileComp: a name is not a file.
			if directive != ":4" {
				t.Errorf("directive %s, want :4", directive)
			}
		})
	}
}

// A TAB that cannot reach the API completes nothing and says nothing.
func TestCompletion_QuietWhenTheAPIFails(t *testing.T) {
	api := newFakeAPI()
	api.PrependReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	p := newPlugin(t, api)
	got, directive := complete(t, p, "claim", "--pool", "")
	if len(got) != 0 || directive != ":4" {
		t.Errorf("completions %q %s", got, directive)
	}
	if strings.Contains(p.stdout.String()+p.stderr.String(), "connection refused") {
		t.Errorf("the error was shown:\n%s%s", p.stdout, p.stderr)
	}
}
