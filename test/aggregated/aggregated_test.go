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
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/localpki"
	"github.com/dockerios/dockerios/test/framework"
)

// TestThroughKubeAPIServer starts one control plane and runs every
// scenario of the package against it, each in its own namespaces.
func TestThroughKubeAPIServer(t *testing.T) {
	e := startEnv(t)
	t.Run("DiscoveryAndExplain", e.testDiscoveryAndExplain)
	t.Run("EveryKindCRUDWatchApplyScale", e.testEveryKind)
	t.Run("ClaimVerbOnPools", e.testClaimVerb)
	t.Run("BindSubresourceAndBindVerb", e.testBind)
	t.Run("ClaimBoundAtCreate", e.testClaimBoundAtCreate)
	t.Run("UseVerbOnIdentityPools", e.testUseVerb)
	t.Run("EditAloneReadsWhatItWrites", e.testEditAlone)
	t.Run("CustomVerbsOnEveryWritePath", e.testCustomVerbsOnEveryWritePath)
	t.Run("IdentityValuesHiddenFromViewers", e.testViewerSeesNoIdentityValues)
	t.Run("StatusWriterTouchesOnlyStatus", e.testStatusWriterTouchesOnlyStatus)
	t.Run("NamespaceAdminLeavesStatusAndTeardownToTheController", e.testNamespaceAdminLeavesStatusAndTeardownToTheController)
	t.Run("FiftyClaimsRaceForTwentyMachines", e.testBindRace)
	t.Run("DirectRequestsNeedTheFrontProxy", e.testDirectRequests)
	t.Run("NamespaceDeletionCompletes", e.testNamespaceDeletion)
	t.Run("GarbageCollectorFollowsOurKinds", e.testGarbageCollectorFollowsOurKinds)
	t.Run("LauncherPodWebhookMountsTheOSKSecret", e.testLauncherPodWebhook)
	t.Run("PluginAsAClaimer", e.testPluginAsAClaimer)
	t.Run("AuthorizationAnsweredAhead", e.testAuthorizationAnsweredAhead)
}

// Discovery and OpenAPI v3 reach kubectl through kube-apiserver's
// aggregator: api-resources and explain work as for built-in kinds.
func (e *env) testDiscoveryAndExplain(t *testing.T) {
	out := e.admin.MustRun(t, "", "api-resources", "--api-group=dockerios.io", "-o", "name")
	assert.ElementsMatch(t, []string{
		"macosidentities.dockerios.io", "macosidentitypools.dockerios.io", "macosimages.dockerios.io",
		"macosmachineclaims.dockerios.io", "macosmachineclasses.dockerios.io", "macosmachinepools.dockerios.io",
		"macosmachines.dockerios.io",
	}, lines(out))

	// kubectl explain reads OpenAPI v3 (/openapi/v3/apis/dockerios.io/v1alpha1),
	// which kube-apiserver aggregates from ours.
	paths := e.admin.MustRun(t, "", "get", "--raw", "/openapi/v3")
	assert.Contains(t, paths, `"apis/dockerios.io/v1alpha1"`)
	explain := e.admin.MustRun(t, "", "explain", "macosmachineclaims.spec")
	assert.Contains(t, explain, "KIND:       MacOSMachineClaim")
	assert.Contains(t, explain, "poolName")
	assert.Contains(t, explain, "selector")
	explain = e.admin.MustRun(t, "", "explain", "mm.status.identityRef")
	assert.Contains(t, explain, "MacOSIdentity")

	// Short names and the dockerios category come through discovery too.
	e.admin.MustRun(t, "", "get", "dockerios", "-A")
	e.admin.MustRun(t, "", "get", "mmclass", className)
}

// Every kind goes through create, get, get -w, apply --server-side and
// delete through kube-apiserver; pools also scale.
func (e *env) testEveryKind(t *testing.T) {
	ns := e.namespace(t, "crud")
	manifests := []struct {
		resource, name, namespace, yaml string
	}{
		{"macosidentitypools", "crud-pool", "", `apiVersion: dockerios.io/v1alpha1
kind: MacOSIdentityPool
metadata: {name: crud-pool}
spec: {model: "iMacPro1,1"}
`},
		{"macosimages", "crud-image", "", `apiVersion: dockerios.io/v1alpha1
kind: MacOSImage
metadata: {name: crud-image}
spec:
  source: {dataSource: {namespace: images, name: ventura}}
  release: "13.6"
`},
		{"macosmachineclasses", "crud-class", "", fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSMachineClass
metadata: {name: crud-class}
spec: {imageName: sonoma, identityPoolName: %s, systemDisk: {size: 128Gi}}
`, identityPool)},
		{"macosmachines", "crud-mac", ns, fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSMachine
metadata: {name: crud-mac, namespace: %s}
spec: {className: %s}
`, ns, className)},
		{"macosmachinepools", "crud-pool", ns, fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSMachinePool
metadata: {name: crud-pool, namespace: %s}
spec: {className: %s, replicas: 1}
`, ns, className)},
		{"macosmachineclaims", "crud-claim", ns, fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSMachineClaim
metadata: {name: crud-claim, namespace: %s}
spec: {poolName: crud-pool}
`, ns)},
	}
	// An identity needs a pool, of its own so that no machine takes it,
	// and values no other identity holds.
	e.admin.MustRun(t, `apiVersion: dockerios.io/v1alpha1
kind: MacOSIdentityPool
metadata: {name: crud-ids}
spec: {model: "iMacPro1,1"}
`, "apply", "-f", "-")
	v := generated(fleetSize, 1)[0] // the fleet holds the generator's first fleetSize
	manifests = append(manifests, struct{ resource, name, namespace, yaml string }{
		"macosidentities", "crud-id", "", fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSIdentity
metadata: {name: crud-id}
spec: {poolName: crud-ids, model: "iMacPro1,1", serialNumber: %s, boardSerialNumber: %s, systemUUID: %s, macAddress: "%s", rom: "%s"}
`, v.SerialNumber, v.BoardSerialNumber, v.SystemUUID, v.MACAddress, v.ROM)})

	stop := make(chan struct{})
	defer e.finalizeDeletedMachines(t, ns, stop).Wait()
	defer close(stop)

	for _, m := range manifests {
		t.Run(m.resource, func(t *testing.T) {
			nsArgs := []string{}
			if m.namespace != "" {
				nsArgs = []string{"-n", m.namespace}
			}
			args := func(a ...string) []string { return append(a, nsArgs...) }
			ref := m.resource + "/" + m.name

			// The server's table columns, with the event type in front and
			// the team label last.
			watch := e.admin.Stream(t, args("get", m.resource, "-w", "--output-watch-events", "--no-headers", "-L", "team")...)
			e.admin.MustRun(t, m.yaml, "create", "-f", "-")
			waitLine(t, watch, "ADDED", m.name, "")

			got := e.admin.MustRun(t, "", args("get", ref, "-o", "jsonpath={.metadata.name} {.metadata.uid}")...)
			require.Regexp(t, "^"+m.name+" [0-9a-f-]{36}$", got)

			// Server-side apply takes ownership of a label; the watch sees it.
			applied := strings.Replace(m.yaml, "metadata: {name: "+m.name, "metadata: {labels: {team: macos}, name: "+m.name, 1)
			e.admin.MustRun(t, applied, "apply", "--server-side", "--field-manager=crud-test", "-f", "-")
			waitLine(t, watch, "MODIFIED", m.name, "macos")
			managers := e.admin.MustRun(t, "", args("get", ref, "--show-managed-fields", "-o", "jsonpath={.metadata.managedFields[*].manager}")...)
			assert.Contains(t, managers, "crud-test")

			if m.resource == "macosmachinepools" {
				e.admin.MustRun(t, "", args("scale", ref, "--replicas=3")...)
				assert.Equal(t, "3", e.admin.MustRun(t, "", args("get", ref, "-o", "jsonpath={.spec.replicas}")...))
				scale := e.admin.MustRun(t, "", args("get", ref, "--subresource=scale", "-o", "jsonpath={.kind} {.spec.replicas}")...)
				assert.Equal(t, "Scale 3", scale)
			}

			e.admin.MustRun(t, "", args("delete", ref, "--wait=true", "--timeout=60s")...)
			waitLine(t, watch, "DELETED", m.name, "")
			r := e.admin.Run("", args("get", ref)...)
			require.Error(t, r.Err)
			assert.Contains(t, r.Stderr, "NotFound")
		})
	}
}

// waitLine waits for a line of watch for the event on the object name,
// whose last column is last when last is not empty.
func waitLine(t *testing.T, watch <-chan string, event, name, last string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	var seen []string
	for {
		select {
		case line, ok := <-watch:
			if !ok {
				t.Fatalf("kubectl get -w ended before %s %s; it printed %q", event, name, seen)
			}
			seen = append(seen, line)
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == event && f[1] == name && (last == "" || f[len(f)-1] == last) {
				return
			}
		case <-timeout:
			t.Fatalf("kubectl get -w printed no %s %s (last column %q) in 30s; it printed %q", event, name, last, seen)
		}
	}
}

// A claim against a pool needs verb claim on that pool: kubectl auth can-i
// says so, a user without it gets 403 naming it, a user with it succeeds.
func (e *env) testClaimVerb(t *testing.T) {
	ns := e.namespace(t, "claims")
	e.pool(t, ns, "ci")
	e.pool(t, ns, "other")
	e.admin.MustRun(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: claims-writer, namespace: %[1]s}
rules:
- apiGroups: [dockerios.io]
  resources: [macosmachineclaims]
  verbs: [create, get, list, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ci-claimer, namespace: %[1]s}
rules:
- apiGroups: [dockerios.io]
  resources: [macosmachinepools]
  resourceNames: [ci]
  verbs: [claim]
`, ns), "apply", "-f", "-")
	e.admin.MustRun(t, "", "create", "rolebinding", "alice-writes", "-n", ns, "--role=claims-writer", "--user=alice")
	e.admin.MustRun(t, "", "create", "rolebinding", "alice-claims-ci", "-n", ns, "--role=ci-claimer", "--user=alice")
	e.admin.MustRun(t, "", "create", "rolebinding", "bob-writes", "-n", ns, "--role=claims-writer", "--user=bob")

	canI := func(as, target string) string {
		r := e.admin.Run("", "auth", "can-i", "claim", target, "-n", ns, "--as="+as)
		return strings.TrimSpace(r.Stdout)
	}
	assert.Equal(t, "yes", canI("alice", "macosmachinepools/ci"))
	assert.Equal(t, "no", canI("alice", "macosmachinepools/other"))
	assert.Equal(t, "no", canI("bob", "macosmachinepools/ci"))

	claim := func(name, pool string) string {
		return fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSMachineClaim
metadata: {name: %s, namespace: %s}
spec: {poolName: %s}
`, name, ns, pool)
	}
	alice, bob := e.user(t, "alice"), e.user(t, "bob")
	forbidden(t, bob.Run(claim("bobs", "ci"), "create", "-f", "-"),
		`user "bob" cannot claim macosmachinepools/ci in namespace claims`)
	forbidden(t, alice.Run(claim("alices-other", "other"), "create", "-f", "-"),
		`user "alice" cannot claim macosmachinepools/other in namespace claims`)
	alice.MustRun(t, claim("alices", "ci"), "create", "-f", "-")
	assert.Equal(t, "Pending", alice.MustRun(t, "", "get", "mmclaim", "alices", "-n", ns, "-o", "jsonpath={.status.phase}"))
	// Nothing of the refused claims was written.
	assert.Equal(t, []string{"macosmachineclaim.dockerios.io/alices"}, lines(e.admin.MustRun(t, "", "get", "mmclaim", "-n", ns, "-o", "name")))
}

// bind is a subresource of claims guarded by verb bind on the machine; it
// writes the claim and the machine together.
func (e *env) testBind(t *testing.T) {
	ns := e.namespace(t, "bind")
	// Class claims: the apiserver binds a pool claim by itself (at create,
	// or when a machine is freed), while a class claim waits for the
	// controller to bind it to the machine made for it.
	uid := e.classClaim(t, ns, "job-1")
	e.classClaim(t, ns, "job-2")
	e.machineFor(t, ns, "mac-a", uid)
	e.machineFor(t, ns, "mac-b", uid)
	e.makeReady(t, ns, "mac-a")
	e.makeReady(t, ns, "mac-b")
	e.admin.MustRun(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: binder-a, namespace: %[1]s}
rules:
- apiGroups: [dockerios.io]
  resources: [macosmachineclaims/bind]
  verbs: [create]
- apiGroups: [dockerios.io]
  resources: [macosmachines]
  resourceNames: [mac-a]
  verbs: [bind]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: bind-subresource-only, namespace: %[1]s}
rules:
- apiGroups: [dockerios.io]
  resources: [macosmachineclaims/bind]
  verbs: [create]
`, ns), "apply", "-f", "-")
	e.admin.MustRun(t, "", "create", "rolebinding", "carol-binds-a", "-n", ns, "--role=binder-a", "--user=carol")
	e.admin.MustRun(t, "", "create", "rolebinding", "dave-subresource", "-n", ns, "--role=bind-subresource-only", "--user=dave")

	binding := func(machine string) string {
		path := filepath.Join(t.TempDir(), "binding.json")
		require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(
			`{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachineBinding","machineName":%q}`, machine)), 0o600))
		return path
	}
	bindPath := "/apis/dockerios.io/v1alpha1/namespaces/" + ns + "/macosmachineclaims/job-1/bind"
	carol, dave, eve := e.user(t, "carol"), e.user(t, "dave"), e.user(t, "eve")

	// Without the subresource, kube-apiserver's RBAC refuses; with the
	// subresource but not the verb on the machine, DockerIOS refuses.
	forbidden(t, eve.Run("", "create", "--raw", bindPath, "-f", binding("mac-a")))
	forbidden(t, dave.Run("", "create", "--raw", bindPath, "-f", binding("mac-a")),
		`user "dave" cannot bind macosmachines/mac-a in namespace bind`)
	forbidden(t, carol.Run("", "create", "--raw", bindPath, "-f", binding("mac-b")),
		`user "carol" cannot bind macosmachines/mac-b in namespace bind`)
	assert.Empty(t, e.admin.MustRun(t, "", "get", "mmclaim", "job-1", "-n", ns, "-o", "jsonpath={.status.machineName}"))

	out := carol.MustRun(t, "", "create", "--raw", bindPath, "-f", binding("mac-a"))
	var claim v1alpha1.MacOSMachineClaim
	require.NoError(t, json.Unmarshal([]byte(out), &claim), out)
	assert.Equal(t, "mac-a", claim.Status.MachineName)
	assert.Equal(t, v1alpha1.ClaimBound, claim.Status.Phase)
	assert.Equal(t, "job-1", e.admin.MustRun(t, "", "get", "mm", "mac-a", "-n", ns, "-o", "jsonpath={.status.claimRef.name}"))

	// A bound claim is never re-bound; the reason comes back as 409.
	r := e.admin.Run("", "create", "--raw", bindPath, "-f", binding("mac-b"))
	require.Error(t, r.Err)
	assert.Contains(t, r.Stderr, "Conflict")
	assert.Contains(t, r.Stderr, "the claim is already bound to MacOSMachine mac-a")
	// A bound machine takes no other claim.
	r = e.admin.Run("", "create", "--raw", strings.Replace(bindPath, "job-1", "job-2", 1), "-f", binding("mac-a"))
	require.Error(t, r.Err)
	assert.Contains(t, r.Stderr, "the machine is already bound to MacOSMachineClaim job-1")

	// Deleting the claim frees the machine in the same write.
	e.admin.MustRun(t, "", "delete", "mmclaim", "job-1", "-n", ns)
	assert.Empty(t, e.admin.MustRun(t, "", "get", "mm", "mac-a", "-n", ns, "-o", "jsonpath={.status.claimRef}"))
}

// Creating a machine draws an identity from its class's pool, which needs
// verb use on that identity pool even for a namespace's editor.
func (e *env) testUseVerb(t *testing.T) {
	ns := e.namespace(t, "use")
	e.admin.MustRun(t, "", "create", "rolebinding", "erin-edits", "-n", ns, "--clusterrole=edit", "--user=erin")
	erin := e.user(t, "erin")
	machine := fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSMachine
metadata: {name: erins, namespace: %s}
spec: {className: %s}
`, ns, className)
	// edit (through the aggregated dockerios-edit) lets erin create
	// machines, but not draw identities.
	assert.Equal(t, "yes", strings.TrimSpace(e.admin.Run("", "auth", "can-i", "create", "macosmachines", "-n", ns, "--as=erin").Stdout))
	forbidden(t, erin.Run(machine, "create", "-f", "-"),
		`user "erin" cannot use macosidentitypools/`+identityPool)
	classClaim := fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSMachineClaim
metadata: {name: erins-claim, namespace: %s}
spec: {className: %s}
`, ns, className)
	forbidden(t, erin.Run(classClaim, "create", "-f", "-"),
		`user "erin" cannot use macosidentitypools/`+identityPool)

	e.admin.MustRun(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: use-%[1]s}
rules:
- apiGroups: [dockerios.io]
  resources: [macosidentitypools]
  resourceNames: [%[1]s]
  verbs: [use]
`, identityPool), "apply", "-f", "-")
	e.admin.MustRun(t, "", "create", "clusterrolebinding", "erin-uses", "--clusterrole=use-"+identityPool, "--user=erin")
	// DockerIOS asks kube-apiserver with a SubjectAccessReview and, like
	// every delegating server, caches a denial for a few seconds
	// (--authorization-webhook-cache-unauthorized-ttl, 10s by default):
	// the grant takes effect within that.
	framework.Eventually(t, 30*time.Second, func() string {
		if r := erin.Run(machine, "create", "-f", "-"); r.Err != nil {
			return "erin still cannot create a machine: " + r.Stderr
		}
		return ""
	})
	erin.MustRun(t, classClaim, "create", "-f", "-")
	framework.Eventually(t, 10*time.Second, func() string {
		if id := erin.MustRun(t, "", "get", "mm", "erins", "-n", ns, "-o", "jsonpath={.status.identityRef.name}"); id == "" {
			return "erin's machine holds no identity"
		}
		return ""
	})
}

// dockerios-edit is aggregated into edit, which carries view's rules; bound
// on its own it still reads what it may write, so that a user given only it
// can look at the claim they just made.
func (e *env) testEditAlone(t *testing.T) {
	ns := e.namespace(t, "edit-alone")
	e.pool(t, ns, "ci")
	e.admin.MustRun(t, "", "create", "rolebinding", "gina-edits", "-n", ns, "--clusterrole=dockerios-edit", "--user=gina")
	gina := e.user(t, "gina")
	canI := func(verb, resource string) framework.Result {
		return e.admin.Run("", "auth", "can-i", verb, resource, "-n", ns, "--as=gina")
	}
	for _, resource := range []string{"macosmachines", "macosmachinepools", "macosmachineclaims"} {
		for _, verb := range []string{"create", "get", "list", "watch"} {
			assert.Equal(t, "yes", strings.TrimSpace(canI(verb, resource).Stdout), "%s %s", verb, resource)
		}
	}
	assert.Equal(t, "yes", strings.TrimSpace(canI("get", "macosmachinepools/scale").Stdout))
	assert.Equal(t, "no", strings.TrimSpace(canI("get", "macosidentities").Stdout))
	// kubectl knows only the built-in verbs: it warns, and answers.
	r := canI("claim", "macosmachinepools/ci")
	assert.Equal(t, "yes", strings.TrimSpace(r.Stdout))
	assert.Contains(t, r.Stderr, "verb 'claim' is not a known verb")

	gina.MustRun(t, fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSMachineClaim
metadata: {name: ginas, namespace: %s}
spec: {poolName: ci}
`, ns), "create", "-f", "-")
	assert.Equal(t, "Pending", gina.MustRun(t, "", "get", "mmclaim", "ginas", "-n", ns, "-o", "jsonpath={.status.phase}"))
	assert.Contains(t, gina.MustRun(t, "", "get", "mm,mmpool,mmclaim", "-n", ns, "-o", "name"), "macosmachineclaim.dockerios.io/ginas")
	gina.MustRun(t, "", "get", "--raw", "/apis/dockerios.io/v1alpha1/namespaces/"+ns+"/macosmachinepools/ci/scale")
}

// A namespace viewer reads machines, and sees the name of the identity a
// machine holds, never its values; identities themselves are refused.
func (e *env) testViewerSeesNoIdentityValues(t *testing.T) {
	ns := e.namespace(t, "view")
	e.machine(t, ns, "viewed", "")
	e.admin.MustRun(t, "", "create", "rolebinding", "frank-views", "-n", ns, "--clusterrole=view", "--user=frank")
	frank := e.user(t, "frank")

	var idName string
	framework.Eventually(t, 10*time.Second, func() string {
		idName = e.admin.MustRun(t, "", "get", "mm", "viewed", "-n", ns, "-o", "jsonpath={.status.identityRef.name}")
		if idName == "" {
			return "the machine holds no identity"
		}
		return ""
	})
	id, err := e.client.DockeriosV1alpha1().MacOSIdentities().Get(context.Background(), idName, metav1.GetOptions{})
	require.NoError(t, err)

	seen := frank.MustRun(t, "", "get", "mm", "viewed", "-n", ns, "-o", "json")
	assert.Contains(t, seen, idName)
	for _, value := range []string{id.Spec.SerialNumber, id.Spec.BoardSerialNumber, id.Spec.SystemUUID, id.Spec.MACAddress, id.Spec.ROM} {
		assert.NotContains(t, seen, value)
	}
	seen = frank.MustRun(t, "", "get", "mm,mmpool,mmclaim", "-n", ns, "-o", "yaml")
	assert.NotContains(t, seen, id.Spec.SerialNumber)
	forbidden(t, frank.Run("", "get", "mid", idName), `cannot get resource "macosidentities"`)
	forbidden(t, frank.Run("", "get", "mid"), `cannot list resource "macosidentities"`)
	assert.Equal(t, "no", strings.TrimSpace(e.admin.Run("", "auth", "can-i", "get", "macosidentities", "--as=frank").Stdout))
}

// Fifty waiting claims race, through kube-apiserver, for twenty machines
// made Ready at the same moment: each Ready write binds the oldest waiting
// claim, while every claim also tries the bind subresource on the machines
// in its own random order (the controller's repair, racing the apiserver).
// Twenty end Bound, thirty Pending, no machine is bound twice, and every
// bind that answered success is a binding stored.
func (e *env) testBindRace(t *testing.T) {
	const machines, claims = 20, 50
	ns := e.namespace(t, "race")
	e.pool(t, ns, "race")
	for i := range machines {
		e.machine(t, ns, fmt.Sprintf("mac-%02d", i), "race")
	}
	for i := range claims {
		e.claim(t, ns, fmt.Sprintf("claim-%02d", i), "race")
	}
	var ready sync.WaitGroup
	for i := range machines {
		ready.Add(1)
		go func() {
			defer ready.Done()
			e.makeReady(t, ns, fmt.Sprintf("mac-%02d", i))
		}()
	}
	defer ready.Wait()

	var wg sync.WaitGroup
	var mu sync.Mutex
	boundBy := map[string]string{} // machine → claim, as the bind answers said
	for i := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			claim := fmt.Sprintf("claim-%02d", i)
			for _, j := range rand.Perm(machines) {
				machine := fmt.Sprintf("mac-%02d", j)
				got, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).Bind(context.Background(), claim,
					&v1alpha1.MacOSMachineBinding{MachineName: machine}, metav1.CreateOptions{})
				if apierrors.IsConflict(err) {
					continue
				}
				if err != nil {
					t.Errorf("bind %s to %s: %v", claim, machine, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if other, dup := boundBy[machine]; dup {
					t.Errorf("machine %s bound to both %s and %s", machine, other, claim)
				}
				boundBy[machine] = got.Name
				return
			}
		}()
	}
	wg.Wait()
	ready.Wait()

	claimList, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	phases := map[v1alpha1.MacOSMachineClaimPhase]int{}
	claimOf := map[string]string{} // machine → claim, as stored
	for _, c := range claimList.Items {
		phases[c.Status.Phase]++
		if c.Status.MachineName != "" {
			if other, dup := claimOf[c.Status.MachineName]; dup {
				t.Errorf("claims %s and %s both hold machine %s", other, c.Name, c.Status.MachineName)
			}
			claimOf[c.Status.MachineName] = c.Name
		}
	}
	assert.Equal(t, map[v1alpha1.MacOSMachineClaimPhase]int{v1alpha1.ClaimBound: machines, v1alpha1.ClaimPending: claims - machines}, phases)
	for m, c := range boundBy {
		assert.Equal(t, c, claimOf[m], "the bind of %s to %s answered success: it is the binding stored", c, m)
	}

	machineList, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, m := range machineList.Items {
		require.NotNil(t, m.Status.ClaimRef, "machine %s is unbound", m.Name)
		assert.Equal(t, claimOf[m.Name], m.Status.ClaimRef.Name, "machine %s and its claim disagree", m.Name)
	}
}

// The DockerIOS server trusts a user named in X-Remote-User only from a
// client presenting the front-proxy certificate kube-apiserver holds.
func (e *env) testDirectRequests(t *testing.T) {
	url := e.cp.DockerIOSURL + "/apis/dockerios.io/v1alpha1/macosidentities"
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(e.cp.DockerIOSServingCA()))
	get := func(cert *tls.Certificate, headers map[string]string) (int, string) {
		t.Helper()
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	keyPair := func(certPEM, keyPEM []byte) *tls.Certificate {
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		require.NoError(t, err)
		return &c
	}
	admin := map[string]string{"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}
	refused := func(status int, body string) {
		t.Helper()
		assert.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, status, body)
		assert.NotContains(t, body, `"items"`)
	}

	refused(get(nil, nil))
	refused(get(nil, admin))
	// A certificate from an untrusted CA, with the front-proxy's name.
	rogue, err := localpki.NewCA("rogue", time.Now())
	require.NoError(t, err)
	refused(get(keyPair(mustIssue(t, rogue, "front-proxy-client")), admin))
	// A front-proxy CA certificate with a name kube-apiserver's
	// --requestheader-allowed-names does not list.
	refused(get(keyPair(e.cp.FrontProxyClient(t, "someone-else")), admin))
	// A user certificate kube-apiserver trusts authenticates its holder,
	// not whoever the headers name.
	status, body := get(keyPair(e.userCert(t, "mallory")), admin)
	assert.Equal(t, http.StatusForbidden, status, body)
	assert.Contains(t, body, `User \"mallory\" cannot list resource \"macosidentities\"`)

	// What kube-apiserver itself presents is accepted: the refusals above
	// were about the credentials, not the route.
	status, body = get(keyPair(e.cp.FrontProxyClient(t, "front-proxy-client")), admin)
	assert.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"kind":"MacOSIdentityList"`)
}

func mustIssue(t *testing.T, ca *localpki.CA, name string) ([]byte, []byte) {
	t.Helper()
	cert, key, err := ca.IssueClient(name, nil, time.Now())
	require.NoError(t, err)
	return cert, key
}

// userCert is a client certificate of the cluster's client CA for name.
func (e *env) userCert(t *testing.T, name string) ([]byte, []byte) {
	t.Helper()
	cfg := framework.RESTConfig(t, e.cp.UserKubeconfig(t, name))
	return cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData
}

// Deleting a namespace that holds DockerIOS objects completes: the
// namespace controller finds our kinds through aggregated discovery and
// deletes them, machines release their identities, and the APIService
// stays Available throughout.
func (e *env) testNamespaceDeletion(t *testing.T) {
	ns := e.namespace(t, "doomed")
	e.pool(t, ns, "ci")
	e.machine(t, ns, "mac-1", "ci")
	e.makeReady(t, ns, "mac-1")
	e.machine(t, ns, "mac-2", "")
	// The claim is bound to mac-1 as it is created (or, if the server's
	// view has not seen mac-1 Ready yet, waits for a bind).
	e.claim(t, ns, "job", "ci")
	_, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).Bind(context.Background(), "job",
		&v1alpha1.MacOSMachineBinding{MachineName: "mac-1"}, metav1.CreateOptions{})
	if err != nil {
		require.True(t, apierrors.IsConflict(err), "got %v", err)
	}
	require.Equal(t, "mac-1", e.admin.MustRun(t, "", "get", "mmclaim", "job", "-n", ns, "-o", "jsonpath={.status.machineName}"))
	var held []string
	for _, name := range []string{"mac-1", "mac-2"} {
		m, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, m.Status.IdentityRef, "machine %s holds no identity", name)
		held = append(held, m.Status.IdentityRef.Name)
	}

	stop := make(chan struct{})
	finalizer := e.finalizeDeletedMachines(t, ns, stop)
	e.admin.MustRun(t, "", "delete", "namespace", ns, "--wait=false")
	availableCondition := func() string {
		return e.admin.MustRun(t, "", "get", "apiservice", "v1alpha1.dockerios.io",
			"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
	}
	framework.Eventually(t, 3*time.Minute, func() string {
		if available := availableCondition(); available != "True" {
			t.Errorf("APIService v1alpha1.dockerios.io Available=%q while the namespace was deleted", available)
		}
		r := e.admin.Run("", "get", "namespace", ns, "-o", "jsonpath={.status.conditions}")
		if r.Err != nil && strings.Contains(r.Stderr, "NotFound") {
			return ""
		}
		return "namespace " + ns + " still there: " + r.Stdout + r.Stderr
	})
	close(stop)
	finalizer.Wait()

	assert.Equal(t, "True", availableCondition())
	left := e.admin.MustRun(t, "", "get", "mm,mmpool,mmclaim", "-n", ns, "-o", "name", "--ignore-not-found")
	assert.Empty(t, left)
	for _, name := range held {
		id, err := e.client.DockeriosV1alpha1().MacOSIdentities().Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		if id.Status.Allocation != nil {
			assert.NotEqual(t, ns, id.Status.Allocation.MachineNamespace, "identity %s still held by a deleted machine", name)
		}
	}
}
