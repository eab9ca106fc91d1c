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
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/test/framework"
)

// The controller is killed with SIGKILL at random moments, 20 times, while
// 50 machines provision and 20 of them are deleted. Afterwards every
// machine converges, and a scan finds no leaked identity, Secret, PVC, Job,
// DataVolume, VM or VMI, and no machine with two of anything.
func (e *env) testCrashStorm(t *testing.T) {
	const machines, deletions, kills = 50, 20, 20
	ns := e.namespace(t, "storm")
	e.fleet(t, "storm", machines, nil)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 42))
	t.Logf("storm: %d machines, %d deletions, %d controller kills", machines, deletions, kills)

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the storm
		defer wg.Done()
		for i := range kills {
			time.Sleep(time.Duration(100+rng.IntN(1400)) * time.Millisecond)
			e.ctrl.Kill(t)
			time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
			e.ctrl.Start(t)
			if i%5 == 4 {
				t.Logf("storm: %d kills", i+1)
			}
		}
	}()
	go func() { // creates and deletes
		defer wg.Done()
		for i := range machines {
			_, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Create(ctx, &v1alpha1.MacOSMachine{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mac-%02d", i)}, Spec: v1alpha1.MacOSMachineSpec{ClassName: "storm"}}, metav1.CreateOptions{})
			assert.NoError(t, err)
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		}
		for _, i := range rng.Perm(machines)[:deletions] {
			time.Sleep(time.Duration(rng.IntN(600)) * time.Millisecond)
			assert.NoError(t, e.client.DockeriosV1alpha1().MacOSMachines(ns).Delete(ctx, fmt.Sprintf("mac-%02d", i), metav1.DeleteOptions{}))
		}
	}()
	wg.Wait()

	// Convergence: the deleted are gone, the others Ready.
	framework.Eventually(t, 4*time.Minute, func() string {
		ms := e.machines(t, ns)
		notReady := 0
		for _, m := range ms {
			if m.Status.Phase != v1alpha1.MachineReady {
				notReady++
			}
		}
		if len(ms) != machines-deletions || notReady > 0 {
			return fmt.Sprintf("%d machines (want %d), %d not Ready\ncontroller log tail:\n%s", len(ms), machines-deletions, notReady, tail(e.ctrl.Output(), 10))
		}
		return ""
	})

	// The scan.
	live := map[string]string{} // uid → name
	identities := map[string]string{}
	for _, m := range e.machines(t, ns) {
		live[string(m.UID)] = m.Name
		require.NotNil(t, m.Status.IdentityRef, m.Name)
		if other, dup := identities[m.Status.IdentityRef.Name]; dup {
			t.Errorf("identity %s held by %s and %s", m.Status.IdentityRef.Name, other, m.Name)
		}
		identities[m.Status.IdentityRef.Name] = m.Name
	}
	ids, err := e.client.DockeriosV1alpha1().MacOSIdentities().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	allocated := 0
	for _, id := range ids.Items {
		if id.Spec.PoolName != "storm" || id.Status.Allocation == nil {
			continue
		}
		allocated++
		a := id.Status.Allocation
		if live[a.MachineUID] != a.MachineName {
			t.Errorf("identity %s leaked: allocated to %s/%s (uid %s), which does not exist", id.Name, a.MachineNamespace, a.MachineName, a.MachineUID)
		}
	}
	assert.Equal(t, machines-deletions, allocated, "allocated identities")
	e.waitPoolCounts(t, "storm", deletions, machines-deletions)

	perMachine := map[string]map[string]int{}
	count := func(kind string, labels map[string]string) {
		uid := labels[machine.MachineUIDLabel]
		if _, ok := live[uid]; !ok {
			t.Errorf("%s of a machine that is gone (uid %s) leaked", kind, uid)
			return
		}
		if perMachine[uid] == nil {
			perMachine[uid] = map[string]int{}
		}
		perMachine[uid][kind]++
	}
	sel := metav1.ListOptions{LabelSelector: machine.MachineUIDLabel}
	secrets, err := e.kube.CoreV1().Secrets(ns).List(ctx, sel)
	require.NoError(t, err)
	for _, o := range secrets.Items {
		count("Secret", o.Labels)
	}
	pvcs, err := e.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel)
	require.NoError(t, err)
	for _, o := range pvcs.Items {
		count("PersistentVolumeClaim", o.Labels)
	}
	jobs, err := e.kube.BatchV1().Jobs(ns).List(ctx, sel)
	require.NoError(t, err)
	for _, o := range jobs.Items {
		count("Job", o.Labels)
	}
	for kind, gvr := range map[string]schema.GroupVersionResource{
		"DataVolume": external.DataVolumes, "VirtualMachine": external.VirtualMachines, "VirtualMachineInstance": external.VirtualMachineInstances,
	} {
		l, err := e.dynamic(t).Resource(gvr).Namespace(ns).List(ctx, sel)
		if apierrors.IsNotFound(err) {
			continue
		}
		require.NoError(t, err)
		for _, o := range l.Items {
			count(kind, (&unstructured.Unstructured{Object: o.Object}).GetLabels())
		}
	}
	want := map[string]int{"Secret": 2, "PersistentVolumeClaim": 1, "Job": 1, "DataVolume": 1, "VirtualMachine": 1, "VirtualMachineInstance": 1}
	for uid, name := range live {
		assert.Equal(t, want, perMachine[uid], "machine %s has exactly one of each", name)
	}
	t.Logf("storm: %d machines converged Ready, %d deleted; scan clean", len(live), deletions)
}
