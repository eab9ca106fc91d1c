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

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/test/framework"
	"github.com/dockerios/dockerios/test/harness"
)

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// TestEndToEnd starts one environment and runs every scenario against it.
func TestEndToEnd(t *testing.T) {
	e := start(t)
	t.Run("MachineLifecycle", e.testMachineLifecycle)
	t.Run("PoolFillsAndClaimsBind", e.testPoolAndClaims)
	t.Run("PoolAtMaxMachinesSaysSo", e.testPoolCap)
	t.Run("ClassClaimGetsAMachineOfItsOwn", e.testClassClaim)
	t.Run("AgentNetworkCarriesTheIdentityMAC", e.testAgentNetwork)
	t.Run("FailureRules", e.testFailureRules)
	t.Run("CrashStorm", e.testCrashStorm)
	t.Run("ArtifactsApplyWithKustomize", e.testArtifacts)
	t.Run("ImageStatusSaysWhetherTheSourceIsReady", e.testImageStatus)
	t.Run("NoOSKSecretNoVirtualMachine", e.testOSKSecretMissing)
	t.Run("NoIdentityValueReachesViewers", e.testNoIdentityValueForViewers)
	t.Run("ControllerWasRefusedNothing", e.testControllerWasRefusedNothing)
}

// The controller runs as its ServiceAccount under the shipped RBAC
// (artifacts/deploy/09-controller.yaml, trimmed to what its code calls):
// through whatever the scenarios before made it do, neither kube-apiserver
// nor the DockerIOS apiserver refused it anything. A verb taken away that
// a path still needs shows here (a reflector's failed list, a reconcile
// error), even where the scenario itself recovered.
func (e *env) testControllerWasRefusedNothing(t *testing.T) {
	var refused []string
	for _, line := range strings.Split(e.ctrl.Output(), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			refused = append(refused, line)
		}
	}
	assert.Empty(t, refused, "the controller was refused")
}

// One machine goes Pending → Provisioning → Starting → Ready with the real
// agent answering with its token; deleting it tears everything down and
// gives its identity back.
func (e *env) testMachineLifecycle(t *testing.T) {
	ns := e.namespace(t, "lifecycle")
	e.fleet(t, "lifecycle", 1, nil)
	e.waitPoolCounts(t, "lifecycle", 1, 0)
	m := e.createMachine(t, ns, "mac", "lifecycle")
	// The pool's counts follow the allocation at once (a freed free-list
	// key is all that changes in the ledger).
	e.waitPoolCountsWithin(t, "lifecycle", 0, 1, 5*time.Second)
	seen := map[v1alpha1.MacOSMachinePhase]bool{}
	ready := e.waitMachine(t, ns, "mac", 90*time.Second, "Ready", func(m *v1alpha1.MacOSMachine) bool {
		seen[m.Status.Phase] = true
		return m.Status.Phase == v1alpha1.MachineReady
	})
	t.Logf("phases seen while polling: %v", seen)
	for _, typ := range []string{"IdentityAllocated", "BootdiskReady", "SystemDiskReady", "VirtualMachineRunning", "AgentReachable", "GuestReady", "Ready"} {
		assert.Equal(t, metav1.ConditionTrue, condition(ready, typ).Status, "%s: %s", typ, condition(ready, typ).Message)
	}
	require.NotNil(t, ready.Status.Agent)
	assert.Equal(t, v1alpha1.AgentStageReady, ready.Status.Agent.Stage)
	assert.NotEmpty(t, ready.Status.Addresses)
	assert.NotEmpty(t, ready.Status.NodeName)
	assert.Equal(t, "mac", ready.Status.VirtualMachineName)
	e.waitEvent(t, ns, "MacOSMachine", "mac", "Ready", "the guest agent reports Ready")

	// What the controller made, once each, all labelled with the machine.
	owned := e.ownedObjects(t, ns, string(m.UID))
	assert.Equal(t, map[string]int{"Secret": 2, "PersistentVolumeClaim": 1, "Job": 1, "DataVolume": 1, "VirtualMachine": 1, "VirtualMachineInstance": 1}, owned)

	require.NoError(t, e.client.DockeriosV1alpha1().MacOSMachines(ns).Delete(context.Background(), "mac", metav1.DeleteOptions{}))
	e.gone(t, ns, "mac", 60*time.Second)
	assert.Empty(t, e.ownedObjects(t, ns, string(m.UID)), "teardown leaves nothing behind")
	id, err := e.client.DockeriosV1alpha1().MacOSIdentities().Get(context.Background(), "lifecycle-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, id.Status.Allocation, "the identity went back to the pool with the machine's removal")
	e.waitPoolCounts(t, "lifecycle", 1, 0)
}

// waitPoolCounts waits for an identity pool's status to count free and
// allocated identities (the apiserver updates the counts shortly after
// the writes that change them).
func (e *env) waitPoolCounts(t testing.TB, pool string, free, allocated int32) {
	t.Helper()
	e.waitPoolCountsWithin(t, pool, free, allocated, 30*time.Second)
}

func (e *env) waitPoolCountsWithin(t testing.TB, pool string, free, allocated int32, within time.Duration) {
	t.Helper()
	framework.Eventually(t, within, func() string {
		p, err := e.client.DockeriosV1alpha1().MacOSIdentityPools().Get(context.Background(), pool, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if p.Status.Free != free || p.Status.Allocated != allocated {
			return fmt.Sprintf("pool %s: free %d allocated %d, want %d and %d", pool, p.Status.Free, p.Status.Allocated, free, allocated)
		}
		return ""
	})
}

// ownedObjects counts, by kind, the objects in ns labelled with the machine
// UID (everything the controller makes for a machine carries it).
func (e *env) ownedObjects(t testing.TB, ns, uid string) map[string]int {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: labels.Set{machine.MachineUIDLabel: uid}.String()}
	out := map[string]int{}
	count := func(kind string, n int) {
		if n > 0 {
			out[kind] = n
		}
	}
	s, err := e.kube.CoreV1().Secrets(ns).List(ctx, sel)
	require.NoError(t, err)
	count("Secret", len(s.Items))
	p, err := e.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel)
	require.NoError(t, err)
	count("PersistentVolumeClaim", len(p.Items))
	j, err := e.kube.BatchV1().Jobs(ns).List(ctx, sel)
	require.NoError(t, err)
	count("Job", len(j.Items))
	for kind, gvr := range map[string]schema.GroupVersionResource{
		"DataVolume": external.DataVolumes, "VirtualMachine": external.VirtualMachines, "VirtualMachineInstance": external.VirtualMachineInstances,
	} {
		l, err := e.dynamic(t).Resource(gvr).Namespace(ns).List(ctx, sel)
		require.NoError(t, err)
		count(kind, len(l.Items))
	}
	return out
}

// A pool of 5 fills to Ready; 8 claims arrive: 5 bind at once to the warm
// machines, the other 3 as replacements become Ready; deleting a claim
// disposes of its machine, the pool refills, and every identity of a
// deleted machine goes back.
func (e *env) testPoolAndClaims(t *testing.T) {
	ns := e.namespace(t, "pool")
	e.fleet(t, "pool", 16, nil)
	ctx := context.Background()
	e.createPool(t, ns, "warm", v1alpha1.MacOSMachinePoolSpec{ClassName: "pool", Replicas: ptr.To[int32](5), MaxMachines: ptr.To[int32](14)})
	e.waitPool(t, ns, "warm", 2*time.Minute, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 5 })

	warm := map[string]bool{}
	for _, m := range e.machines(t, ns) {
		warm[m.Name] = true
	}
	require.Len(t, warm, 5, "the pool made exactly its replicas")

	start := time.Now()
	for i := range 8 {
		_, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).Create(ctx, &v1alpha1.MacOSMachineClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%d", i)},
			Spec:       v1alpha1.MacOSMachineClaimSpec{PoolName: "warm"},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		time.Sleep(20 * time.Millisecond) // creation order is claim order
	}
	// Five bind at once, to the warm machines, oldest claims first.
	framework.Eventually(t, 20*time.Second, func() string {
		bound := e.boundClaims(t, ns)
		if len(bound) < 5 {
			return fmt.Sprintf("%d claims bound, want 5 at once", len(bound))
		}
		return ""
	})
	t.Logf("5 claims bound %s after the first was created", time.Since(start).Round(time.Millisecond))
	bound := e.boundClaims(t, ns)
	for i := range 5 {
		m, ok := bound[fmt.Sprintf("job-%d", i)]
		assert.True(t, ok, "the oldest claims are served first: job-%d", i)
		assert.True(t, warm[m], "job-%d bound to warm machine %s", i, m)
	}
	// The other three as replacements become Ready.
	framework.Eventually(t, 2*time.Minute, func() string {
		if n := len(e.boundClaims(t, ns)); n < 8 {
			return fmt.Sprintf("%d of 8 claims bound", n)
		}
		return ""
	})
	bound = e.boundClaims(t, ns)
	seen := map[string]string{}
	for c, m := range bound {
		if other, dup := seen[m]; dup {
			t.Errorf("machine %s bound to %s and %s", m, other, c)
		}
		seen[m] = c
		mm := e.machine(t, ns, m)
		require.NotNil(t, mm.Status.ClaimRef, "machine %s", m)
		assert.Equal(t, c, mm.Status.ClaimRef.Name)
	}
	e.waitPool(t, ns, "warm", 2*time.Minute, func(p *v1alpha1.MacOSMachinePool) bool {
		return p.Status.ReadyReplicas == 5 && p.Status.BoundMachines == 8
	})

	// Deleting a claim disposes of its machine; the pool refills.
	gone := bound["job-0"]
	goneM := e.machine(t, ns, gone)
	require.NoError(t, e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).Delete(ctx, "job-0", metav1.DeleteOptions{}))
	e.gone(t, ns, gone, time.Minute)
	e.waitEvent(t, ns, "MacOSMachine", gone, "Disposed", "its claim was deleted")
	assert.Empty(t, e.ownedObjects(t, ns, string(goneM.UID)))
	id, err := e.client.DockeriosV1alpha1().MacOSIdentities().Get(ctx, goneM.Status.IdentityRef.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, id.Status.Allocation, "identity %s released", id.Name)
	e.waitPool(t, ns, "warm", 2*time.Minute, func(p *v1alpha1.MacOSMachinePool) bool {
		return p.Status.ReadyReplicas == 5 && p.Status.BoundMachines == 7
	})

	// Deleting the pool's claims and machines gives every identity back.
	require.NoError(t, e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	require.NoError(t, e.client.DockeriosV1alpha1().MacOSMachinePools(ns).Delete(ctx, "warm", metav1.DeleteOptions{}))
	require.NoError(t, e.client.DockeriosV1alpha1().MacOSMachines(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	framework.Eventually(t, 2*time.Minute, func() string {
		if n := len(e.machines(t, ns)); n > 0 {
			return fmt.Sprintf("%d machines left", n)
		}
		return ""
	})
	e.waitPoolCounts(t, "pool", 16, 0)
}

func (e *env) boundClaims(t testing.TB, ns string) map[string]string {
	t.Helper()
	l, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, c := range l.Items {
		if c.Status.Phase == v1alpha1.ClaimBound {
			out[c.Name] = c.Status.MachineName
		}
	}
	return out
}

func (e *env) waitPool(t testing.TB, ns, name string, within time.Duration, ok func(*v1alpha1.MacOSMachinePool) bool) {
	t.Helper()
	framework.Eventually(t, within, func() string {
		p, err := e.client.DockeriosV1alpha1().MacOSMachinePools(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if ok(p) {
			return ""
		}
		var b strings.Builder
		for _, m := range e.machines(t, ns) {
			fmt.Fprintf(&b, "\n  %s: %s claim=%v", m.Name, m.Status.Phase, m.Status.ClaimRef != nil)
		}
		return fmt.Sprintf("pool %s/%s: replicas %d ready %d bound %d%s\ncontroller log tail:\n%s", ns, name,
			p.Status.Replicas, p.Status.ReadyReplicas, p.Status.BoundMachines, b.String(), tail(e.ctrl.Output(), 10))
	})
}

// `kubectl kustomize artifacts/` renders DockerIOS and its agent network,
// and never the sample fleet (its dockerios.io objects cannot be applied
// in one go with the APIService that serves them); artifacts/deploy is
// valid for the real API (server-side dry run: the control plane's own
// registration is not overwritten); the agent network and the sample fleet
// are applied for real and the sample machine becomes Ready.
func (e *env) testArtifacts(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	rendered := e.admin.MustRun(t, "", "kustomize", filepath.Join(root, "artifacts"))
	for _, kind := range []string{"APIService", "MutatingWebhookConfiguration", "NetworkAttachmentDefinition", "NetworkPolicy",
		"Deployment", "PodTemplate"} {
		assert.Contains(t, rendered, "kind: "+kind)
	}
	assert.NotContains(t, rendered, "apiVersion: dockerios.io/", "artifacts/ must not apply dockerios.io objects before the APIService serves them")
	// DockerIOS's own manifests against the live API without replacing
	// this control plane's registration (a server dry run: the sample
	// fleet cannot be dry-run, its machine needs its class to exist).
	out := e.admin.MustRun(t, "", "apply", "-k", filepath.Join(root, "artifacts", "deploy"), "--dry-run=server")
	assert.Contains(t, out, "deployment.apps/dockerios-controller created (server dry run)")
	assert.Contains(t, out, "mutatingwebhookconfiguration.admissionregistration.k8s.io/dockerios-launcher-pods configured (server dry run)")

	e.admin.MustRun(t, "", "apply", "-k", filepath.Join(root, "artifacts", "network"))
	e.admin.MustRun(t, "", "apply", "-f", filepath.Join(root, "artifacts", "examples"))
	e.waitMachine(t, "default", "mac-1", 2*time.Minute, "Ready", phaseIs(v1alpha1.MachineReady))

	// Machines, pools and claims first: an identity held by a machine
	// cannot be deleted until the machine is gone.
	ex := func(f string) string { return filepath.Join(root, "artifacts", "examples", f) }
	e.admin.MustRun(t, "", "delete", "--wait=true", "--timeout=2m", "-f", ex("06-claim.yaml"), "-f", ex("05-pool.yaml"))
	e.admin.MustRun(t, "", "-n", "default", "delete", "mm", "-l", v1alpha1.MachinePoolLabel+"=warm", "--wait=true", "--timeout=2m")
	e.admin.MustRun(t, "", "delete", "--wait=true", "--timeout=2m", "-f", ex("04-machine.yaml"))
	e.admin.MustRun(t, "", "delete", "--wait=true", "--timeout=2m", "-f", ex("03-class.yaml"), "-f", ex("02-image.yaml"), "-f", ex("01-identity.yaml"), "-f", ex("00-identitypool.yaml"))
}

// A MacOSImage says whether its source can be cloned from.
func (e *env) testImageStatus(t *testing.T) {
	ctx := context.Background()
	e.bareNamespace(t, "golden")
	// CDI's DataSource has no status subresource: its status is written
	// with the object, here at once.
	ds := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
		"metadata": map[string]any{"name": "sonoma", "namespace": "golden"},
		"spec":     map[string]any{"source": map[string]any{"pvc": map[string]any{"namespace": "golden", "name": "sonoma-disk"}}},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}},
	}}
	_, err := e.dynamic(t).Resource(harness.DataSourceGVR).Namespace("golden").Create(ctx, ds, metav1.CreateOptions{})
	require.NoError(t, err)

	for name, src := range map[string]string{"img-ready": "sonoma", "img-missing": "absent"} {
		_, err := e.client.DockeriosV1alpha1().MacOSImages().Create(ctx, &v1alpha1.MacOSImage{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.MacOSImageSpec{Release: "14.6", Source: v1alpha1.ImageSource{
				DataSource: &v1alpha1.NamespacedObjectReference{Namespace: "golden", Name: src}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for name, want := range map[string]string{"img-ready": "True/SourceReady", "img-missing": "False/SourceNotFound"} {
		framework.Eventually(t, 30*time.Second, func() string {
			img, err := e.client.DockeriosV1alpha1().MacOSImages().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			c := meta.FindStatusCondition(img.Status.Conditions, "Ready")
			if c == nil || string(c.Status)+"/"+c.Reason != want {
				return fmt.Sprintf("image %s Ready condition %+v, want %s", name, c, want)
			}
			if c.Message == "" {
				return "no message"
			}
			return ""
		})
	}
}

// A claim naming a class gets a machine of its own, named after it, bound
// when Ready; deleting the claim disposes of the machine.
func (e *env) testClassClaim(t *testing.T) {
	ns := e.namespace(t, "classclaim")
	e.fleet(t, "classclaim", 1, nil)
	ctx := context.Background()
	_, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).Create(ctx, &v1alpha1.MacOSMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "interactive"}, Spec: v1alpha1.MacOSMachineClaimSpec{ClassName: "classclaim"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.waitEvent(t, ns, "MacOSMachineClaim", "interactive", "MachineCreated", "MacOSMachine interactive of class classclaim")
	framework.Eventually(t, 90*time.Second, func() string {
		if m := e.boundClaims(t, ns)["interactive"]; m != "interactive" {
			return fmt.Sprintf("claim bound to %q, want its own machine", m)
		}
		return ""
	})
	m := e.machine(t, ns, "interactive")
	assert.Equal(t, v1alpha1.MachineReady, m.Status.Phase)
	require.NotNil(t, m.Status.ClaimRef)
	assert.Equal(t, "interactive", m.Status.ClaimRef.Name)

	require.NoError(t, e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).Delete(ctx, "interactive", metav1.DeleteOptions{}))
	e.gone(t, ns, "interactive", 60*time.Second)
	assert.Empty(t, e.ownedObjects(t, ns, string(m.UID)))
	e.waitPoolCounts(t, "classclaim", 1, 0)
}

// Without the OSK Secret in its namespace a machine does not start its VM
// and says why; with the Secret it goes on.
func (e *env) testOSKSecretMissing(t *testing.T) {
	ns := e.bareNamespace(t, "nokey")
	e.fleet(t, "nokey", 1, nil)
	e.createMachine(t, ns, "mac", "nokey")
	m := e.waitMachine(t, ns, "mac", 60*time.Second, "waiting for its OSK Secret", func(m *v1alpha1.MacOSMachine) bool {
		return condition(m, "VirtualMachineRunning").Reason == "OSKSecretMissing"
	})
	assert.Contains(t, condition(m, "VirtualMachineRunning").Message, "Secret nokey/dockerios-osk with Apple's SMC key")
	assert.Zero(t, e.ownedObjects(t, ns, string(m.UID))["VirtualMachine"], "no VM without the key")
	e.oskSecret(t, ns)
	e.waitMachine(t, ns, "mac", 60*time.Second, "Ready", phaseIs(v1alpha1.MachineReady))
}
