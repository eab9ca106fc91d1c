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
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dockerios/dockerios/test/framework"
)

// A claim against a pool with a Ready machine comes back Bound from its
// create — kubectl create, a server-side dry run, apply --server-side —
// to the machine Ready longest, and `kubectl get mmclaim` shows that
// machine at once. The claimer holds verb claim on the pool, not bind.
func (e *env) testClaimBoundAtCreate(t *testing.T) {
	ns := e.namespace(t, "bound-at-create")
	e.pool(t, ns, "ci")
	e.machine(t, ns, "mac-old", "ci")
	e.makeReady(t, ns, "mac-old")
	// Ready times are kept to the second: let the second machine's be later.
	time.Sleep(1100 * time.Millisecond)
	e.machine(t, ns, "mac-new", "ci")
	e.makeReady(t, ns, "mac-new")
	e.admin.MustRun(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: claimer, namespace: %[1]s}
rules:
- apiGroups: [dockerios.io]
  resources: [macosmachineclaims]
  verbs: [create, get, list, patch]
- apiGroups: [dockerios.io]
  resources: [macosmachinepools]
  resourceNames: [ci]
  verbs: [claim]
`, ns), "apply", "-f", "-")
	e.admin.MustRun(t, "", "create", "rolebinding", "gina-claims", "-n", ns, "--role=claimer", "--user=gina")
	gina := e.user(t, "gina")
	claim := func(name string) string {
		return fmt.Sprintf("apiVersion: dockerios.io/v1alpha1\nkind: MacOSMachineClaim\nmetadata: {name: %s, namespace: %s}\nspec: {poolName: ci}\n", name, ns)
	}
	const phaseAndMachine = "jsonpath={.status.phase}/{.status.machineName}"

	// The apiserver learns of Ready machines from its watch: within
	// moments. A dry run answers what the create would, and writes nothing.
	framework.Eventually(t, 10*time.Second, func() string {
		if out := gina.MustRun(t, claim("first"), "create", "-f", "-", "--dry-run=server", "-o", phaseAndMachine); out != "Bound/mac-old" {
			return "a dry-run create answered " + out
		}
		return ""
	})
	assert.Empty(t, e.admin.MustRun(t, "", "get", "mmclaim", "-n", ns, "-o", "name"), "a dry run stores no claim")
	assert.Empty(t, e.admin.MustRun(t, "", "get", "mm", "mac-old", "-n", ns, "-o", "jsonpath={.status.claimRef}"), "nor binds a machine")

	assert.Equal(t, "Bound/mac-old", gina.MustRun(t, claim("first"), "create", "-f", "-", "-o", phaseAndMachine),
		"kubectl create prints the claim Bound, to the machine Ready longest")
	row := strings.Fields(gina.MustRun(t, "", "get", "mmclaim", "first", "-n", ns, "--no-headers"))
	require.Len(t, row, 6, "NAME POOL CLASS PHASE MACHINE AGE")
	assert.Equal(t, []string{"first", "ci", "<none>", "Bound", "mac-old"}, row[:5])
	assert.Equal(t, "first", e.admin.MustRun(t, "", "get", "mm", "mac-old", "-n", ns, "-o", "jsonpath={.status.claimRef.name}"))

	assert.Equal(t, "Bound/mac-new", gina.MustRun(t, claim("second"), "apply", "--server-side", "-f", "-", "-o", phaseAndMachine),
		"apply --server-side of a new claim binds as create does")

	assert.Equal(t, "Pending/", gina.MustRun(t, claim("third"), "create", "-f", "-", "-o", phaseAndMachine),
		"no Ready machine left: the claim waits")
	row = strings.Fields(gina.MustRun(t, "", "get", "mmclaim", "third", "-n", ns, "--no-headers"))
	require.Len(t, row, 6)
	assert.Equal(t, []string{"Pending", "<none>"}, row[3:5])
}
