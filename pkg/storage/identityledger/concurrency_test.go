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

package identityledger_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
)

// runParallel runs fn for every item with the given number of writers,
// alternating between the two instances, and fails on any error.
func runParallel(t *testing.T, writers int, items []string, instances []*instance, fn func(*instance, string) error) {
	t.Helper()
	work := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for w := range writers {
		inst := instances[w%len(instances)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for item := range work {
				if err := fn(inst, item); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", item, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, item := range items {
		work <- item
	}
	close(work)
	wg.Wait()
	require.Empty(t, errs)
}

// TestTwoReplicas_1000MachinesRaceFor500Identities is rule 2 under load: two
// apiserver instances sharing one etcd, 64 concurrent writers. Every
// identity ends up held exactly once, the rest of the machines wait, and
// freed identities go to the machines that have waited longest. The two
// replicas are decorated as the apiserver decorates them: stores behind
// watch caches, the free-list and class views running, so allocations
// pick from views that may be behind.
func TestTwoReplicas_1000MachinesRaceFor500Identities(t *testing.T) {
	const identities, machines, writers, deletes = 500, 1000, 64, 250
	e := newEnv(t)
	instances := []*instance{newProductionInstance(t, e.getter), newProductionInstance(t, e.getter)}

	ids := make([]*dockerio.MacOSIdentity, identities)
	var idNames []string
	for i := range ids {
		ids[i] = e.nextIdentity()
		idNames = append(idNames, ids[i].Name)
	}
	byName := map[string]*dockerio.MacOSIdentity{}
	for _, id := range ids {
		byName[id.Name] = id
	}
	runParallel(t, writers, idNames, instances, func(i *instance, name string) error {
		_, err := i.identities.Identity.Create(i.clusterCtx(), byName[name].DeepCopy(), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		return err
	})
	// Half the machines are created as server-side apply creates them.
	createMachine := func(i *instance, name string) (runtime.Object, error) {
		if n, _ := strconv.Atoi(name[len("mac-"):]); n%2 == 0 {
			return i.machines.Machine.Create(i.nsCtx(), registrytest.Machine(name), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		}
		obj, _, err := i.machines.Machine.Update(i.nsCtx(), name, rest.DefaultUpdatedObjectInfo(registrytest.Machine(name)),
			rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, true, &metav1.UpdateOptions{})
		return obj, err
	}

	var names []string
	for i := range machines {
		names = append(names, fmt.Sprintf("mac-%04d", i))
	}
	var mu sync.Mutex
	createdAt := map[string]int64{} // machine → revision of its create
	runParallel(t, writers, names, instances, func(i *instance, name string) error {
		obj, err := createMachine(i, name)
		if err != nil {
			return err
		}
		rev, _ := strconv.ParseInt(obj.(*dockerio.MacOSMachine).ResourceVersion, 10, 64)
		mu.Lock()
		createdAt[name] = rev
		mu.Unlock()
		return nil
	})

	holders, waiting := e.census(t)
	assert.Len(t, holders, identities, "every identity is held")
	assert.Len(t, waiting, machines-identities, "the other machines wait")
	e.assertConsistent(t)
	counts, err := e.ledger.Counts(context.Background(), "imacpro")
	require.NoError(t, err)
	assert.Equal(t, int32(identities), counts.Allocated)
	assert.Equal(t, int32(machines-identities), counts.Pending)

	// Delete 250 holders, concurrently, through both instances.
	var doomed []string
	for name := range holders {
		doomed = append(doomed, name)
	}
	slices.Sort(doomed)
	doomed = doomed[:deletes]
	runParallel(t, writers, doomed, instances, func(i *instance, name string) error {
		obj, _, err := i.machines.Machine.Delete(i.nsCtx(), name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
		if err != nil {
			return err
		}
		m := obj.(*dockerio.MacOSMachine).DeepCopy()
		m.Finalizers = nil
		_, _, err = i.machines.Machine.Update(i.nsCtx(), name, rest.DefaultUpdatedObjectInfo(m), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		return err
	})

	holders2, waiting2 := e.census(t)
	assert.Len(t, holders2, identities, "every freed identity was taken again")
	assert.Len(t, waiting2, machines-identities-deletes)

	// The machines that got the freed identities are exactly the 250 that
	// had waited longest.
	slices.SortFunc(waiting, func(a, b string) int { return int(createdAt[a] - createdAt[b]) })
	oldest := waiting[:deletes]
	for _, name := range oldest {
		_, ok := holders2[name]
		assert.True(t, ok, "%s (created at revision %d) waited longest and should hold an identity", name, createdAt[name])
	}
	e.assertConsistent(t)
}

// census returns the machines holding an identity (with it) and those
// waiting, checking that no identity is held twice on the way.
func (e *env) census(t *testing.T) (map[string]string, []string) {
	t.Helper()
	list, err := e.machines.Machine.List(e.nsCtx(), nil)
	require.NoError(t, err)
	holders := map[string]string{}
	heldBy := map[string]string{}
	var waiting []string
	for _, m := range list.(*dockerio.MacOSMachineList).Items {
		if m.DeletionTimestamp != nil {
			continue
		}
		if ref := m.Status.IdentityRef; ref != nil {
			if other, dup := heldBy[ref.Name]; dup {
				t.Errorf("identity %s is held by both %s and %s", ref.Name, other, m.Name)
			}
			heldBy[ref.Name] = m.Name
			holders[m.Name] = ref.Name
			continue
		}
		waiting = append(waiting, m.Name)
	}
	return holders, waiting
}
