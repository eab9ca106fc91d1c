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
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/test/framework"
)

// A pool that cannot fill because of its maxMachines says so: Ready=False
// with reason MaxMachinesReached naming the cap and what lifts it, and one
// Event, however many times the pool is reconciled meanwhile. Raising the
// cap fills it.
func (e *env) testPoolCap(t *testing.T) {
	ns := e.namespace(t, "capped")
	e.fleet(t, "capped", 3, nil)
	ctx := context.Background()
	e.createPool(t, ns, "warm", v1alpha1.MacOSMachinePoolSpec{ClassName: "capped", Replicas: ptr.To[int32](2), MaxMachines: ptr.To[int32](2)})
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 2 })
	e.createClaim(t, ns, "job", "warm")

	var ready metav1.Condition
	e.waitPool(t, ns, "warm", 30*time.Second, func(p *v1alpha1.MacOSMachinePool) bool {
		if c := meta.FindStatusCondition(p.Status.Conditions, "Ready"); c != nil {
			ready = *c
		}
		return ready.Reason == "MaxMachinesReached"
	})
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Contains(t, ready.Message, "1 of 2 unbound machines are Ready")
	assert.Contains(t, ready.Message, "holds 2 machines (1 bound to claims), its maxMachines")
	ev := e.waitEvent(t, ns, "MacOSMachinePool", "warm", "MaxMachinesReached", "maxMachines")
	assert.Equal(t, ready.Message, ev.Message)

	// Reconciles meanwhile (a machine's status changes bring the pool
	// back) do not say it again.
	for _, m := range e.machines(t, ns) {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"touched": "yes"}}})
		_, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Patch(ctx, m.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
	}
	time.Sleep(3 * time.Second)
	var said int32
	for _, ev := range e.events(t, ns, "MacOSMachinePool", "warm") {
		if ev.Reason == "MaxMachinesReached" {
			said += max(ev.Count, 1)
		}
	}
	assert.Equal(t, int32(1), said, "the cap is announced once")

	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"maxMachines": 3}})
	_, err := e.client.DockeriosV1alpha1().MacOSMachinePools(ns).Patch(ctx, "warm", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, "Ready") && p.Status.ReadyReplicas == 2
	})
	framework.Eventually(t, 10*time.Second, func() string {
		if n := len(e.machines(t, ns)); n != 3 {
			return "want 3 machines"
		}
		return ""
	})
}
