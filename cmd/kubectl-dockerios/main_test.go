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
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned/fake"
	"github.com/dockerios/dockerios/pkg/identity"
)

// help runs the plugin with args and returns what it printed.
func help(t *testing.T, args ...string) string {
	t.Helper()
	cmd := newCommand(newOptions())
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return out.String()
}

// kubectl runs the plugin for "kubectl dockerios ...": every line that
// shows a command must show it as typed.
func TestHelpShowsTheCommandAsTyped(t *testing.T) {
	root := help(t, "--help")
	for _, want := range []string{"kubectl dockerios [command]", `Use "kubectl dockerios [command] --help"`} {
		if !strings.Contains(root, want) {
			t.Errorf("root help lacks %q:\n%s", want, root)
		}
	}
	all := root
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"identities", "import"}, []string{
			"Usage:\n  kubectl dockerios identities import --pool POOL FILE [flags]",
			"  kubectl dockerios identities import --pool imacpro serials.csv",
		}},
		{[]string{"identities", "generate"}, []string{"Usage:\n  kubectl dockerios identities generate --pool POOL --count N [flags]"}},
		{[]string{"claim"}, []string{"Usage:\n  kubectl dockerios claim [NAME] (--pool POOL | --class CLASS) [flags]", "  kubectl dockerios claim --pool warm\n"}},
		{[]string{"release"}, []string{"Usage:\n  kubectl dockerios release CLAIM... [flags]"}},
		{[]string{"machines"}, []string{"Usage:\n  kubectl dockerios machines [flags]"}},
		{[]string{"completion"}, []string{"Usage:\n  kubectl dockerios completion (bash|zsh|fish|powershell|kubectl)"}},
	} {
		out := help(t, append(tc.args, "--help")...)
		for _, want := range tc.want {
			if !strings.Contains(out, want) {
				t.Errorf("%v help lacks %q:\n%s", tc.args, want, out)
			}
		}
		all += out
	}
	if regexp.MustCompile(`(?m)^\s*kubectl (identities|import|generate|claim|release|machines|completion)\b`).MatchString(all) {
		t.Errorf("a usage line drops dockerios:\n%s", all)
	}
}

// The plugin takes kubectl's connection flags, so that a user's habits
// (and a script's) carry over.
func TestKubectlConnectionFlags(t *testing.T) {
	out := help(t, "machines", "--help")
	for _, flag := range []string{"--kubeconfig string", "--context string", "-n, --namespace string", "--as string", "--request-timeout string", "-o, --output string"} {
		if !strings.Contains(out, flag) {
			t.Errorf("machines --help lacks %s:\n%s", flag, out)
		}
	}
}

// The exit statuses other than 0 and 1 are documented where a user looks.
func TestHelpDocumentsTheExitStatuses(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"claim", "--help"}} {
		out := strings.Join(strings.Fields(help(t, args...)), " ")
		for _, want := range []string{"2 when claim --wait gave up at --timeout", "130 when claim --wait was interrupted"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v lacks %q:\n%s", args, want, out)
			}
		}
	}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		status  int
		printed string
	}{
		{"success", nil, 0, ""},
		{"an error", errors.New("no such pool"), 1, "error: no such pool\n"},
		{"a timeout", &codedError{code: exitTimeout, err: errors.New("timed out")}, 2, "error: timed out\n"},
		{"a timeout, wrapped", fmt.Errorf("claim: %w", &codedError{code: exitTimeout, err: errors.New("timed out")}), 2, "error: claim: timed out\n"},
		{"an interrupt", &codedError{code: exitInterrupted, err: errors.New("interrupted")}, 130, "error: interrupted\n"},
		{"errors of several objects, a line each", errors.Join(errors.New("a not found"), errors.New("b not found")), 1, "error: a not found\nerror: b not found\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if got := exitStatus(&out, tc.err); got != tc.status {
				t.Errorf("status %d, want %d", got, tc.status)
			}
			if out.String() != tc.printed {
				t.Errorf("printed %q, want %q", out.String(), tc.printed)
			}
		})
	}
}

// The file format is documented where a user looks: every column the
// reader expects is named, in its order.
func TestImportHelpDocumentsTheFileFormat(t *testing.T) {
	imp := help(t, "identities", "import", "--help")
	at := 0
	for _, col := range identity.RowColumns {
		i := strings.Index(imp[at:], col)
		if i < 0 {
			t.Fatalf("import help does not name column %s after the previous one:\n%s", col, imp)
		}
		at += i + len(col)
	}
}

const (
	goodRow = `"iMacPro1,1","C02CK029HX87","C02015700QXJG36CB","4B408A88-4062-4532-9AA1-3D8A3549327F","34:31:8F:D3:88:E4","1920","1080",""` + "\n"
	// A valid serial, and a board serial whose checksum fails.
	badBoardRow = `"iMacPro1,1","C02FX08QHX87","C02126802GUJG36JB","DEFDACC8-2225-471C-AEE1-19EDDE5A3F90","28:8F:F6:F5:DE:D0","1920","1080",""` + "\n"
)

func serialSet(t *testing.T, rows string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "serials.csv")
	if err := os.WriteFile(path, []byte(rows), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newClient is a fake clientset. Not NewClientset: its field-managed
// tracker needs a typed schema of our kinds that the fake does not carry.
func newClient(objects ...runtime.Object) *fake.Clientset {
	return fake.NewSimpleClientset(objects...) //nolint:staticcheck // see above
}

func TestImportFile(t *testing.T) {
	pool := &v1alpha1.MacOSIdentityPool{ObjectMeta: metav1.ObjectMeta{Name: "imacpro"}, Spec: v1alpha1.MacOSIdentityPoolSpec{Model: "iMacPro1,1"}}

	t.Run("a pool that does not exist prints nothing but the error", func(t *testing.T) {
		var out bytes.Buffer
		err := importFile(context.Background(), newClient(), "nope", serialSet(t, goodRow), &out)
		if err == nil || !strings.Contains(err.Error(), "MacOSIdentityPool nope") || !strings.Contains(err.Error(), "not found") {
			t.Errorf("error %v, want the pool not found", err)
		}
		if out.Len() > 0 {
			t.Errorf("printed before the error:\n%s", out.String())
		}
	})

	t.Run("a rejected row shows its valid serial", func(t *testing.T) {
		var out bytes.Buffer
		err := importFile(context.Background(), newClient(pool), "imacpro", serialSet(t, goodRow+badBoardRow), &out)
		if err == nil || err.Error() != "1 of 2 rows rejected" {
			t.Errorf("error %v, want 1 of 2 rows rejected", err)
		}
		for _, want := range []string{
			`(?m)^1\s+C02CK029HX87\s+imacpro-[0-9a-f]{16}\s+created\s`,
			`(?m)^2\s+C02FX08QHX87\s+-\s+rejected\s+boardSerialNumber "C02126802GUJG36JB": fails the MLB checksum`,
			`(?m)^1 created, 0 already present, 1 rejected$`,
		} {
			if !regexp.MustCompile(want).MatchString(out.String()) {
				t.Errorf("output does not match %s:\n%s", want, out.String())
			}
		}
	})
}
