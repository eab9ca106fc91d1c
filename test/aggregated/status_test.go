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
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A status writer writes status and nothing else: the metadata the main
// resource owns — labels, annotations, finalizers and owner references —
// stays as it was whatever a /status write carries, as for a custom
// resource's /status and for pods/status. Otherwise whoever may only
// write status could orphan a machine from its pool or claim (so that the
// garbage collector never takes it, and its identity, away) or hang it on
// another owner, which takes update on the machine itself.
func (e *env) testStatusWriterTouchesOnlyStatus(t *testing.T) {
	ns := e.namespace(t, "status-only")
	e.machine(t, ns, "owned", "")
	e.admin.MustRun(t, "", "create", "configmap", "owner", "-n", ns)
	uid := e.admin.MustRun(t, "", "get", "configmap", "owner", "-n", ns, "-o", "jsonpath={.metadata.uid}")
	owners := fmt.Sprintf(`[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"%s"}]`, uid)
	e.admin.MustRun(t, "", "patch", "mm", "owned", "-n", ns, "--type=merge", "-p", `{"metadata":{"ownerReferences":`+owners+`}}`)
	ownerRefs := func() string {
		return e.admin.MustRun(t, "", "get", "mm", "owned", "-n", ns, "-o", "jsonpath={.metadata.ownerReferences[*].name}")
	}
	assert.Equal(t, "owner", ownerRefs())

	e.admin.MustRun(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: status-writer, namespace: %s}
rules:
- apiGroups: [dockerios.io]
  resources: [macosmachines, macosmachines/status]
  verbs: [get]
- apiGroups: [dockerios.io]
  resources: [macosmachines/status]
  verbs: [update, patch]
`, ns), "apply", "-f", "-")
	e.admin.MustRun(t, "", "create", "rolebinding", "stan-writes-status", "-n", ns, "--role=status-writer", "--user=stan")
	stan := e.user(t, "stan")

	// The main resource is not stan's to change.
	forbidden(t, stan.Run("", "patch", "mm", "owned", "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/metadata/ownerReferences"}]`),
		`cannot patch resource "macosmachines"`)
	// Through /status the write is accepted, but changes no owner.
	for _, patch := range []struct{ typ, body string }{
		{"json", `[{"op":"remove","path":"/metadata/ownerReferences"}]`},
		{"merge", `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"other","uid":"00000000-0000-0000-0000-000000000001"}]}}`},
	} {
		stan.MustRun(t, "", "patch", "mm", "owned", "-n", ns, "--subresource=status", "--type="+patch.typ, "-p", patch.body)
		assert.Equal(t, "owner", ownerRefs(), "a %s patch of /status changed the owner references", patch.typ)
	}
}

// A namespace admin (the built-in admin role, which aggregates
// dockerios-admin) does everything with its machines but what is the
// controller's: writing their status, which may fail a machine and so free
// its identity while only the controller knows whether its VM is gone, and
// taking the teardown finalizer off a machine being deleted, which skips
// the teardown. The controller's ClusterRole may do both.
func (e *env) testNamespaceAdminLeavesStatusAndTeardownToTheController(t *testing.T) {
	ns := e.namespace(t, "ns-admin")
	e.machine(t, ns, "held", "")
	e.admin.MustRun(t, "", "create", "rolebinding", "ada-admin", "-n", ns, "--clusterrole=admin", "--user=ada")
	// The controller's ClusterRole as deployed (the Deployment in the same
	// file never runs here: no scheduler, no kubelet).
	e.admin.MustRun(t, "", "apply", "-f", filepath.Join("..", "..", "artifacts", "deploy", "09-controller.yaml"))
	e.admin.MustRun(t, "", "create", "rolebinding", "ctl-controller", "-n", ns, "--clusterrole=dockerios-controller", "--user=ctl")
	ada, ctl := e.user(t, "ada"), e.user(t, "ctl")

	ada.MustRun(t, "", "label", "mm", "held", "-n", ns, "team=macos")
	forbidden(t, ada.Run("", "patch", "mm", "held", "-n", ns, "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Failed"}}`),
		`cannot patch resource "macosmachines/status"`)

	ada.MustRun(t, "", "delete", "mm", "held", "-n", ns, "--wait=false")
	removeFinalizers := []string{"patch", "mm", "held", "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`}
	for _, dryRun := range []string{"--dry-run=server", "--dry-run=none"} {
		forbidden(t, ada.Run("", append(removeFinalizers, dryRun)...), "cannot update macosmachines/finalizers of held")
	}
	assert.Equal(t, "dockerios.io/teardown", e.admin.MustRun(t, "", "get", "mm", "held", "-n", ns, "-o", "jsonpath={.metadata.finalizers[*]}"))

	ctl.MustRun(t, "", removeFinalizers...)
	assert.Contains(t, e.admin.Run("", "get", "mm", "held", "-n", ns).Stderr, "NotFound", "the controller's role lets the machine go")
}
