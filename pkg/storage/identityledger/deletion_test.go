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
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
)

// An identity marked for deletion — a delete of one with finalizers, or
// with foreground or orphan propagation, which the store makes as an
// update — is going away. No machine may be given it meanwhile: the
// machine would boot with an identity its owner retired, and the write
// removing the last finalizer would be refused (409, held) until that
// machine is gone.
func TestIdentityMarkedForDeletion_IsGivenToNoMachine(t *testing.T) {
	cases := map[string]struct {
		// leftOnFreeList puts the marked identity back on its pool's free
		// list, as an apiserver without this rule left it.
		leftOnFreeList bool
		wantDrifts     []string
	}{
		"marked by a delete its finalizer holds back": {},
		"left on the free list by an older apiserver": {leftOnFreeList: true, wantDrifts: []string{identityledger.DriftOrphanFree}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// setup
			e := newEnv(t)
			r := newRaw(t, e)
			id := e.nextIdentity()
			id.Finalizers = []string{"example.com/hold"}
			id = e.addIdentity(t, id)
			var freeList []*mvccKV
			if tc.leftOnFreeList {
				freeList = r.setAside(indexRoot + "pools/imacpro/free/")
			}

			// execute
			obj, _, err := e.identities.Identity.Delete(e.clusterCtx(), id.Name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
			require.NoError(t, err)
			require.NotNil(t, obj.(*dockerio.MacOSIdentity).DeletionTimestamp, "marked, not deleted")
			if tc.leftOnFreeList {
				r.putBack(freeList)
			}
			drifts, err := e.ledger.Audit(context.Background())
			require.NoError(t, err)
			m := e.createMachine(t, "mac-1")

			// assert
			assert.Equal(t, tc.wantDrifts, kinds(drifts))
			assert.Nil(t, m.Status.IdentityRef, "an identity being deleted is given to no machine")
			assert.Equal(t, identityledger.ReasonPoolExhausted, identityCondition(m).Reason)
			assert.Nil(t, e.identity(t, id.Name).Status.Allocation)
			assert.Empty(t, r.freeList())
			e.assertConsistent(t)

			// Its finalizer gone, the identity goes; the machine still waits.
			marked := e.identity(t, id.Name)
			marked.Finalizers = nil
			_, _, err = e.identities.Identity.Update(e.clusterCtx(), id.Name, rest.DefaultUpdatedObjectInfo(marked),
				rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.NoError(t, err)
			_, err = e.identities.Identity.Get(e.clusterCtx(), id.Name, &metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "want NotFound, got %v", err)
			assert.Nil(t, e.machine(t, "mac-1").Status.IdentityRef)
			e.assertConsistent(t)
		})
	}
}

// A dry run of that delete marks nothing: the identity stays free, and the
// next machine takes it.
func TestIdentityMarkedForDeletion_DryRunLeavesItFree(t *testing.T) {
	// setup
	e := newEnv(t)
	r := newRaw(t, e)
	id := e.nextIdentity()
	id.Finalizers = []string{"example.com/hold"}
	id = e.addIdentity(t, id)

	// execute
	obj, _, err := e.identities.Identity.Delete(e.clusterCtx(), id.Name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)

	// assert
	assert.NotNil(t, obj.(*dockerio.MacOSIdentity).DeletionTimestamp, "the dry run answers as the delete would")
	assert.Nil(t, e.identity(t, id.Name).DeletionTimestamp)
	assert.Equal(t, []string{id.Name}, r.freeList())
	m := e.createMachine(t, "mac-1")
	require.NotNil(t, m.Status.IdentityRef)
	assert.Equal(t, id.Name, m.Status.IdentityRef.Name)
	e.assertConsistent(t)
}

// An identity marked for deletion while held (by hand in etcd, or by an
// apiserver without the rule that refuses it), whose machine then went
// behind the ledger's back, is given back by the repair to nobody: not to
// the machine waiting in its pool, nor onto the free list.
func TestIdentityMarkedForDeletion_RepairGivesItToNobody(t *testing.T) {
	// setup
	e := newEnv(t)
	r := newRaw(t, e)
	e.addIdentity(t, e.nextIdentity())
	held := e.createMachine(t, "mac-1")
	require.NotNil(t, held.Status.IdentityRef)
	waiting := e.createMachine(t, "mac-2")
	require.Nil(t, waiting.Status.IdentityRef, "the pool's one identity is held")
	id := e.identity(t, held.Status.IdentityRef.Name)
	id.Finalizers = []string{"example.com/hold"}
	id.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	id.ResourceVersion = ""
	r.putObject(r.identities, r.identities.Key("", id.Name), id)
	r.del(r.machines.Key("default", "mac-1"))

	// execute
	repairer, _ := newRepairer(t, e)
	repaired, err := repairer.Repair(context.Background())
	require.NoError(t, err)

	// assert
	assert.Contains(t, kinds(repaired), identityledger.DriftDanglingHolder)
	assert.Nil(t, e.identity(t, id.Name).Status.Allocation, "released")
	assert.Nil(t, e.machine(t, "mac-2").Status.IdentityRef, "an identity being deleted is given to no waiting machine")
	assert.Empty(t, r.freeList(), "nor put on the free list")
}

// A machine marked for deletion while it waits for an identity — every
// machine carries the teardown finalizer, so its delete only marks it —
// no longer needs one (the repair audit says so too). An identity freed
// or added meanwhile goes to the next machine that waits and lives, or
// back to the pool: given to the machine being torn down, it would sit
// there, counted allocated, until that machine's last finalizer goes.
func TestMachineMarkedForDeletion_WhileWaiting_IsGivenNoIdentity(t *testing.T) {
	// setup
	e := newEnv(t)
	id := e.addIdentity(t, e.nextIdentity())
	require.NotNil(t, e.createMachine(t, "holder").Status.IdentityRef)
	require.Nil(t, e.createMachine(t, "going").Status.IdentityRef)
	require.Nil(t, e.createMachine(t, "staying").Status.IdentityRef)
	_, _, err := e.machines.Machine.Delete(e.nsCtx(), "going", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)
	require.NotNil(t, e.machine(t, "going").DeletionTimestamp, "the teardown finalizer holds it")

	// execute
	e.deleteMachine(t, "holder")

	// assert
	assert.Nil(t, e.machine(t, "going").Status.IdentityRef, "a machine being deleted is given no identity")
	require.NotNil(t, e.machine(t, "staying").Status.IdentityRef, "the next machine that waits takes it")
	assert.Equal(t, id.Name, e.machine(t, "staying").Status.IdentityRef.Name)
	e.assertConsistent(t)

	// An identity added while only the machine being deleted waits goes
	// onto the free list.
	added := e.addIdentity(t, e.nextIdentity())
	assert.Nil(t, added.Status.Allocation)
	assert.Nil(t, e.machine(t, "going").Status.IdentityRef)
	counts, err := e.ledger.Counts(context.Background(), "imacpro")
	require.NoError(t, err)
	assert.Equal(t, identityledger.PoolCounts{Total: 2, Free: 1, Allocated: 1, Pending: 0}, counts)
	e.assertConsistent(t)
}
