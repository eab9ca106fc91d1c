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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	acv1alpha1 "github.com/dockerios/dockerios/pkg/generated/applyconfiguration/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/test/framework"
)

// TestClaimBurst_BindsExactlyMinNMEveryRun creates N claims at once
// against M free machines of a pool — half through each of two apiserver
// replicas on one etcd, half by POST and half by server-side apply — and
// requires exactly min(N, M) of them Bound in their create responses, every
// round: a claim that loses a race for a machine takes the next free one
// before it waits, whichever replica made it and whatever that replica's
// view had seen. No controller runs. Afterwards no claim of the pool waits
// while a machine of it is free.
func TestClaimBurst_BindsExactlyMinNMEveryRun(t *testing.T) {
	etcd, err := embeddedetcd.Start(filepath.Join(t.TempDir(), "data"), os.Stderr)
	require.NoError(t, err)
	t.Cleanup(etcd.Stop)
	var clients [2]versioned.Interface
	for i := range clients {
		s := framework.StartLocalServer(t, t.TempDir(), "--etcd-servers", etcd.ClientURL)
		if i == 0 {
			createClassAndPool(t, s)
		}
		clients[i], err = versioned.NewForConfig(restConfig(t, s.Kubeconfig))
		require.NoError(t, err)
	}
	ctx := context.Background()
	const ns = "default"

	shapes := []struct{ claims, machines int }{{10, 4}, {4, 10}, {8, 8}, {12, 6}, {6, 1}, {1, 6}}
	const rounds = 24
	for round := range rounds {
		shape := shapes[round%len(shapes)]
		pool := fmt.Sprintf("burst-%02d", round)
		_, err := clients[0].DockeriosV1alpha1().MacOSMachinePools(ns).Create(ctx, &v1alpha1.MacOSMachinePool{
			ObjectMeta: metav1.ObjectMeta{Name: pool},
			Spec:       v1alpha1.MacOSMachinePoolSpec{ClassName: "standard", Replicas: ptr.To[int32](0)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		for i := range shape.machines {
			// Made Ready through either replica, as a controller talking
			// to either would.
			c := clients[i%2].DockeriosV1alpha1().MacOSMachines(ns)
			m, err := c.Create(ctx, &v1alpha1.MacOSMachine{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-m%02d", pool, i)},
				Spec:       v1alpha1.MacOSMachineSpec{ClassName: "standard", PoolName: pool},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			m.Status.Phase = v1alpha1.MachineReady
			meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: v1alpha1.MachineConditionReady,
				Status: metav1.ConditionTrue, Reason: "AgentReady", Message: "the guest agent reports Ready"})
			_, err = c.UpdateStatus(ctx, m, metav1.UpdateOptions{})
			require.NoError(t, err)
		}

		bound := make([]string, shape.claims)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range shape.claims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := clients[i%2].DockeriosV1alpha1().MacOSMachineClaims(ns)
				name := fmt.Sprintf("%s-c%02d", pool, i)
				<-start
				var out *v1alpha1.MacOSMachineClaim
				var err error
				if (i/2)%2 == 0 {
					out, err = c.Create(ctx, &v1alpha1.MacOSMachineClaim{
						ObjectMeta: metav1.ObjectMeta{Name: name},
						Spec:       v1alpha1.MacOSMachineClaimSpec{PoolName: pool},
					}, metav1.CreateOptions{})
				} else {
					out, err = c.Apply(ctx, acv1alpha1.MacOSMachineClaim(name, ns).
						WithSpec(acv1alpha1.MacOSMachineClaimSpec().WithPoolName(pool)),
						metav1.ApplyOptions{FieldManager: "burst", Force: true})
				}
				if !assert.NoError(t, err, "round %d: claim %s", round, name) {
					return
				}
				if out.Status.Phase == v1alpha1.ClaimBound {
					bound[i] = out.Status.MachineName
				}
			}()
		}
		close(start)
		wg.Wait()

		n, taken := 0, map[string]bool{}
		for i, m := range bound {
			if m == "" {
				continue
			}
			n++
			assert.False(t, taken[m], "round %d: machine %s answered to two claims (c%02d)", round, m, i)
			taken[m] = true
		}
		want := min(shape.claims, shape.machines)
		require.Equal(t, want, n, "round %d: %d claims against %d free machines: %d Bound in their create responses, want %d",
			round, shape.claims, shape.machines, n, want)

		// What is left: waiting claims only if no machine is free.
		claims, err := clients[round%2].DockeriosV1alpha1().MacOSMachineClaims(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		machines, err := clients[round%2].DockeriosV1alpha1().MacOSMachines(ns).List(ctx, metav1.ListOptions{
			LabelSelector: v1alpha1.MachinePoolLabel + "=" + pool})
		require.NoError(t, err)
		pending, free := 0, 0
		for _, c := range claims.Items {
			if c.Spec.PoolName == pool && c.Status.Phase == v1alpha1.ClaimPending {
				pending++
			}
		}
		for _, m := range machines.Items {
			if m.Status.ClaimRef == nil {
				free++
			}
		}
		assert.Equal(t, shape.claims-want, pending, "round %d: claims left waiting", round)
		assert.Equal(t, shape.machines-want, free, "round %d: machines left free", round)
	}
}
