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
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/test/framework"
)

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// TestEndToEnd starts one environment and runs every scenario against it.
func TestEndToEnd(t *testing.T) {
	e := start(t)
	t.Run("MachineLifecycle", e.testMachineLifecycle)
}

// One machine goes Pending → Provisioning → Starting → Ready with the real
// agent answering with its token; deleting it tears everything down and
// gives its identity back.
func (e *env) testMachineLifecycle(t *testing.T) {
	ns := e.namespace(t, "lifecycle")
	e.fleet(t, "lifecycle", 1, nil)
	m := e.createMachine(t, ns, "mac", "lifecycle")
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
	assert.Equal(t, map[string]int{"Secret": 1, "PersistentVolumeClaim": 1, "Job": 1, "DataVolume": 1, "VirtualMachine": 1, "VirtualMachineInstance": 1}, owned)

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
func (e *env) waitPoolCounts(t *testing.T, pool string, free, allocated int32) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, func() string {
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
func (e *env) ownedObjects(t *testing.T, ns, uid string) map[string]int {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: labels.Set{machine.MachineUIDLabel: uid}.String()}
	out := map[string]int{}
	count := func(kind string, n int, err error) {
		require.NoError(t, err)
		if n > 0 {
			out[kind] = n
		}
	}
	s, err := e.kube.CoreV1().Secrets(ns).List(ctx, sel)
	count("Secret", lenOr(s, err, func() int { return len(s.Items) }), err)
	p, err := e.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel)
	count("PersistentVolumeClaim", lenOr(p, err, func() int { return len(p.Items) }), err)
	j, err := e.kube.BatchV1().Jobs(ns).List(ctx, sel)
	count("Job", lenOr(j, err, func() int { return len(j.Items) }), err)
	dyn := e.dynamic(t)
	for kind, gvr := range map[string]struct{ g, v, r string }{
		"DataVolume":             {external.DataVolumes.Group, external.DataVolumes.Version, external.DataVolumes.Resource},
		"VirtualMachine":         {external.VirtualMachines.Group, external.VirtualMachines.Version, external.VirtualMachines.Resource},
		"VirtualMachineInstance": {external.VirtualMachineInstances.Group, external.VirtualMachineInstances.Version, external.VirtualMachineInstances.Resource},
	} {
		l, err := dyn.Resource(schemaGVR(gvr.g, gvr.v, gvr.r)).Namespace(ns).List(ctx, sel)
		if apierrors.IsNotFound(err) {
			continue
		}
		count(kind, lenOr(l, err, func() int { return len(l.Items) }), err)
	}
	return out
}

func lenOr[T any](v *T, err error, n func() int) int {
	if err != nil || v == nil {
		return 0
	}
	return n()
}
