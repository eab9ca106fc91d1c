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

package aggregated

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The custom verbs hold on every path kubectl can create an object by —
// POST, client-side apply, server-side apply, each also as a server-side
// dry run — and no status patch binds around the bind subresource.
func (e *env) testCustomVerbsOnEveryWritePath(t *testing.T) {
	ns := e.namespace(t, "verbs-paths")
	e.pool(t, ns, "ci")
	e.admin.MustRun(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: claims-writer, namespace: %[1]s}
rules:
- apiGroups: [dockerios.io]
  resources: [macosmachineclaims, macosmachineclaims/status, macosmachines, macosmachines/status, macosmachinepools]
  verbs: [create, get, list, patch, update, delete]
- apiGroups: [dockerios.io]
  resources: [macosmachineclaims/bind]
  verbs: [create]
`, ns), "apply", "-f", "-")
	// frank may write claims, machines and pools, and post to bind, but
	// holds none of the custom verbs.
	e.admin.MustRun(t, "", "create", "rolebinding", "frank-writes", "-n", ns, "--role=claims-writer", "--user=frank")
	frank := e.user(t, "frank")

	object := func(kind, name, spec string) string {
		return fmt.Sprintf("apiVersion: dockerios.io/v1alpha1\nkind: %s\nmetadata: {name: %s, namespace: %s}\nspec: %s\n", kind, name, ns, spec)
	}
	paths := []struct {
		name string
		args []string
	}{
		{"create", []string{"create", "-f", "-"}},
		{"create dry run", []string{"create", "-f", "-", "--dry-run=server"}},
		{"client-side apply", []string{"apply", "-f", "-"}},
		{"server-side apply", []string{"apply", "--server-side", "-f", "-"}},
		{"server-side apply dry run", []string{"apply", "--server-side", "-f", "-", "--dry-run=server"}},
	}
	objects := []struct {
		what, manifest, refusal string
	}{
		{"pool claim", object("MacOSMachineClaim", "franks-claim", "{poolName: ci}"), `user "frank" cannot claim macosmachinepools/ci in namespace ` + ns},
		{"class claim", object("MacOSMachineClaim", "franks-class-claim", "{className: "+className+"}"), `user "frank" cannot use macosidentitypools/` + identityPool},
		{"machine", object("MacOSMachine", "franks-machine", "{className: "+className+"}"), `user "frank" cannot use macosidentitypools/` + identityPool},
		{"machine pool", object("MacOSMachinePool", "franks-pool", "{className: "+className+", replicas: 0, maxMachines: 1}"), `user "frank" cannot use macosidentitypools/` + identityPool},
	}
	for _, o := range objects {
		for _, p := range paths {
			t.Run(o.what+" by "+p.name, func(t *testing.T) {
				forbidden(t, frank.Run(o.manifest, p.args...), o.refusal)
			})
		}
	}
	// Nothing of it was written.
	assert.Empty(t, e.admin.MustRun(t, "", "get", "mmclaim,mm", "-n", ns, "-o", "name"))
	assert.Equal(t, []string{"macosmachinepool.dockerios.io/ci"}, lines(e.admin.MustRun(t, "", "get", "mmpool", "-n", ns, "-o", "name")))

	// bind: the subresource, dry run or not, needs verb bind on the
	// machine; and the fields a bind writes cannot be patched in through
	// status instead.
	// A class claim and the machine made for it: the pair the controller
	// binds (a pool claim would be bound by the apiserver itself).
	e.machineFor(t, ns, "mac-a", e.classClaim(t, ns, "job-1"))
	e.makeReady(t, ns, "mac-a")
	body := filepath.Join(t.TempDir(), "binding.json")
	require.NoError(t, os.WriteFile(body, []byte(`{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachineBinding","machineName":"mac-a"}`), 0o600))
	bindPath := "/apis/dockerios.io/v1alpha1/namespaces/" + ns + "/macosmachineclaims/job-1/bind"
	for _, path := range []string{bindPath, bindPath + "?dryRun=All"} {
		forbidden(t, frank.Run("", "create", "--raw", path, "-f", body), `user "frank" cannot bind macosmachines/mac-a in namespace `+ns)
	}
	for _, patch := range []struct{ resource, name, typ, body string }{
		{"mmclaim", "job-1", "merge", `{"status":{"machineName":"mac-a","phase":"Bound"}}`},
		{"mmclaim", "job-1", "json", `[{"op":"add","path":"/status/machineName","value":"mac-a"}]`},
		{"mm", "mac-a", "merge", `{"status":{"claimRef":{"name":"job-1","uid":"x"}}}`},
	} {
		// The status strategy leaves these fields to the bind
		// subresource: the patch may be accepted, but changes nothing of
		// the binding.
		frank.Run("", "patch", patch.resource, patch.name, "-n", ns, "--subresource=status", "--type="+patch.typ, "-p", patch.body)
	}
	assert.Empty(t, e.admin.MustRun(t, "", "get", "mmclaim", "job-1", "-n", ns, "-o", "jsonpath={.status.machineName}"))
	assert.Empty(t, e.admin.MustRun(t, "", "get", "mm", "mac-a", "-n", ns, "-o", "jsonpath={.status.claimRef}"))
}
