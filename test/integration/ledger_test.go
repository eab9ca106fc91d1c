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

package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/pkg/identityimport"
	"github.com/dockerios/dockerios/test/framework"
)

// serialSet is the part of a file osx-serial-generator wrote that holds
// iMacPro1,1 identities: its first five rows.
func serialSet(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "pkg", "identity", "testdata", "osx-serial-generator.csv"))
	require.NoError(t, err)
	rows := strings.SplitAfterN(string(data), "\n", 6)[:5]
	for _, r := range rows {
		require.True(t, strings.HasPrefix(r, `"iMacPro1,1"`), r)
	}
	path := filepath.Join(t.TempDir(), "imacpro.csv")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(rows, "")), 0o600))
	return path
}

// TestLedger_ThroughKubectl is the identity ledger as an operator meets it:
// a machine waits while its pool is empty, the kubectl plugin imports a
// serial set and the waiting machine takes one at once, a re-import changes
// nothing, a duplicate is refused naming its holder, a held identity cannot
// be deleted, and the pool's status counts keep up.
func TestLedger_ThroughKubectl(t *testing.T) {
	s := framework.StartLocalServer(t, t.TempDir())
	k := framework.NewKubectl(t, s.Kubeconfig)
	plugin := k.WithPlugin(t)
	createClassAndPool(t, s)
	// The first row of the serial set, and the name import gives it: a
	// hash of its values, which says none of them.
	firstValues := identity.Values{Model: "iMacPro1,1", SerialNumber: "C02CK029HX87", BoardSerialNumber: "C02015700QXJG36CB",
		SystemUUID: "4B408A88-4062-4532-9AA1-3D8A3549327F", MACAddress: "34:31:8F:D3:88:E4", ROM: "34318FD388E4"}
	firstName := identityimport.Name("imacpro", firstValues)
	reason := func(machine string) string {
		return k.MustRun(t, "", "get", "mm", machine, "-o", `jsonpath={.status.conditions[?(@.type=="IdentityAllocated")].reason}`)
	}

	t.Run("a machine waits while the pool is empty", func(t *testing.T) {
		k.MustRun(t, "", "create", "-f", filepath.Join(examplesDir(t), "04-machine.yaml"))
		assert.Equal(t, "PoolExhausted", reason("mac-1"))
		assert.Regexp(t, `^mac-1\s+standard\s+Pending\s+<none>`, k.MustRun(t, "", "get", "mm", "mac-1", "--no-headers"))
	})

	t.Run("the plugin's help shows it as typed", func(t *testing.T) {
		r := plugin.Run("", "dockerios", "identities", "import", "--help")
		require.NoError(t, r.Err, "stderr:\n%s", r.Stderr)
		assert.Contains(t, r.Stdout, "kubectl dockerios identities import --pool POOL FILE [flags]")
		assert.Contains(t, r.Stdout, "DEVICE_MODEL")
	})

	t.Run("a pool that does not exist is the only thing said", func(t *testing.T) {
		r := plugin.Run("", "dockerios", "identities", "import", "--pool", "nope", serialSet(t))
		require.Error(t, r.Err)
		assert.Empty(t, r.Stdout)
		assert.Contains(t, r.Stderr, `MacOSIdentityPool nope: macosidentitypools.dockerios.io "nope" not found`)
	})

	t.Run("import creates every row, and the waiting machine takes one", func(t *testing.T) {
		r := plugin.Run("", "dockerios", "identities", "import", "--pool", "imacpro", serialSet(t))
		require.NoError(t, r.Err, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
		assert.Contains(t, r.Stdout, "5 created, 0 already present, 0 rejected")
		assert.Regexp(t, `(?m)^1\s+C02CK029HX87\s+`+firstName+`\s+created`, r.Stdout)
		assert.Equal(t, "Allocated", reason("mac-1"))
		assert.Regexp(t, `^mac-1\s+standard\s+Pending\s+imacpro-`, k.MustRun(t, "", "get", "mm", "mac-1", "--no-headers"))
	})

	t.Run("re-importing changes nothing", func(t *testing.T) {
		before := k.MustRun(t, "", "get", "mid", "-o", "custom-columns=NAME:.metadata.name,RV:.metadata.resourceVersion", "--no-headers")
		r := plugin.Run("", "dockerios", "identities", "import", "--pool", "imacpro", serialSet(t))
		require.NoError(t, r.Err)
		assert.Contains(t, r.Stdout, "0 created, 5 already present, 0 rejected")
		after := k.MustRun(t, "", "get", "mid", "-o", "custom-columns=NAME:.metadata.name,RV:.metadata.resourceVersion", "--no-headers")
		assert.Equal(t, before, after)
	})

	t.Run("a row duplicating a held value is rejected naming the holder", func(t *testing.T) {
		rows, err := os.ReadFile(serialSet(t))
		require.NoError(t, err)
		first := strings.SplitN(string(rows), "\n", 2)[0]
		// The same identity but for its serial (and so its name): every
		// other value is already held by the first row's identity.
		dup := strings.Replace(first, "C02CK029HX87", "C02CK029HX88", 1)
		dupValues := firstValues
		dupValues.SerialNumber = "C02CK029HX88"
		bad := filepath.Join(t.TempDir(), "dup.csv")
		require.NoError(t, os.WriteFile(bad, []byte(dup+"\n"), 0o600))
		r := plugin.Run("", "dockerios", "identities", "import", "--pool", "imacpro", bad)
		require.Error(t, r.Err, "a rejected row makes the import fail")
		assert.Contains(t, r.Stdout, "0 created, 0 already present, 1 rejected")
		assert.Contains(t, r.Stdout, "spec.boardSerialNumber: C02015700QXJG36CB is already held by MacOSIdentity "+firstName)
		r = k.Run("", "get", "mid", identityimport.Name("imacpro", dupValues))
		assert.Contains(t, r.Stderr, "NotFound", "nothing of a refused identity is written")
	})

	held := k.MustRun(t, "", "get", "mm", "mac-1", "-o", "jsonpath={.status.identityRef.name}")
	t.Run("a held identity cannot be deleted", func(t *testing.T) {
		r := k.Run("", "delete", "mid", held)
		require.Error(t, r.Err)
		assert.Contains(t, r.Stderr, "held by MacOSMachine default/mac-1")
	})

	t.Run("pool status counts keep up", func(t *testing.T) {
		framework.Eventually(t, 15*time.Second, func() string {
			out := k.MustRun(t, "", "get", "mipool", "imacpro", "--no-headers")
			if ok, _ := regexpMatch(`^imacpro\s+iMacPro1,1\s+5\s+4\s+1\s+0\s`, out); !ok {
				return "pool status is " + out
			}
			return ""
		})
	})

	t.Run("a deleted machine gives its identity back", func(t *testing.T) {
		k.MustRun(t, "", "delete", "mm", "mac-1", "--wait=false")
		k.MustRun(t, "", "patch", "mm", "mac-1", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
		assert.Empty(t, k.MustRun(t, "", "get", "mid", held, "-o", "jsonpath={.status.allocation}"))
		k.MustRun(t, "", "delete", "mid", held)
		framework.Eventually(t, 15*time.Second, func() string {
			out := k.MustRun(t, "", "get", "mipool", "imacpro", "--no-headers")
			if ok, _ := regexpMatch(`^imacpro\s+iMacPro1,1\s+4\s+4\s+0\s+0\s`, out); !ok {
				return "pool status is " + out
			}
			return ""
		})
	})
}

func regexpMatch(pattern, s string) (bool, error) { return regexp.MatchString(pattern, s) }
