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
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
)

// raiseHolds puts every pool on hold as a restore does.
func (e *env) raiseHolds(t *testing.T) {
	t.Helper()
	client, err := clientv3.New(clientv3.Config{Endpoints: e.getter.Endpoints(), DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer client.Close()
	pools, err := identityledger.RaiseRestoreHolds(context.Background(), client, e.ledger.StoragePrefix(), "restored from a snapshot at revision 7", time.Now())
	require.NoError(t, err)
	require.Equal(t, []string{"imacpro"}, pools)
}

// A restored ledger gives out no identity until its hold is lifted: not a
// free one a VM may still run with, not one given back by a machine that
// goes, not one created anew. Lifting it gives them to the waiting
// machines, oldest first, then to the free list.
func TestRestoreHold_NothingIsGivenOutUntilLifted(t *testing.T) {
	e := newEnv(t)
	e.addIdentity(t, e.nextIdentity())
	e.addIdentity(t, e.nextIdentity())
	held := e.createMachine(t, "mac-0").Status.IdentityRef
	require.NotNil(t, held)
	e.raiseHolds(t)
	e.assertConsistent(t)

	h, err := e.ledger.Hold(context.Background(), "imacpro")
	require.NoError(t, err)
	require.NotNil(t, h)
	assert.Equal(t, identityledger.ReasonRestored, h.Reason)

	m1 := e.createMachine(t, "mac-1")
	assert.Nil(t, m1.Status.IdentityRef, "a free identity of a pool on hold was given to a machine")
	created := e.addIdentity(t, e.nextIdentity())
	assert.Nil(t, created.Status.Allocation)
	assert.Nil(t, e.machine(t, "mac-1").Status.IdentityRef, "an identity created in a pool on hold was given to a machine")
	e.deleteMachine(t, "mac-0")
	assert.Nil(t, e.machine(t, "mac-1").Status.IdentityRef, "an identity given back in a pool on hold went to a machine")
	assert.Nil(t, e.identity(t, held.Name).Status.Allocation)
	counts, err := e.ledger.Counts(context.Background(), "imacpro")
	require.NoError(t, err)
	assert.Zero(t, counts.Free, "a pool on hold has nothing on its free list")
	e.assertConsistent(t)
	// The repair puts nothing back either.
	_, err = e.ledger.Repair(context.Background())
	require.NoError(t, err)
	assert.Nil(t, e.machine(t, "mac-1").Status.IdentityRef)

	lifted, err := e.ledger.LiftHold(context.Background(), "imacpro")
	require.NoError(t, err)
	assert.True(t, lifted)
	require.NotNil(t, e.machine(t, "mac-1").Status.IdentityRef, "the waiting machine got no identity once the hold was lifted")
	counts, err = e.ledger.Counts(context.Background(), "imacpro")
	require.NoError(t, err)
	assert.Equal(t, int32(2), counts.Free, "the other two identities are free again")
	e.assertConsistent(t)

	again, err := e.ledger.LiftHold(context.Background(), "imacpro")
	require.NoError(t, err)
	assert.False(t, again, "a second lift found a hold")
}

// setHeldOutside writes the HeldOutsideLedger condition through the
// status subresource, as the controller does.
func (i *instance) setHeldOutside(t *testing.T, name string, status metav1.ConditionStatus) *dockerio.MacOSIdentity {
	t.Helper()
	id := i.identity(t, name).DeepCopy()
	reason := v1alpha1.ReasonInUseByUnrecordedVM
	if status == metav1.ConditionFalse {
		reason = v1alpha1.ReasonHolderGone
	}
	meta.SetStatusCondition(&id.Status.Conditions, metav1.Condition{Type: v1alpha1.IdentityHeldOutsideLedger, Status: status,
		Reason: reason, Message: "VirtualMachine default/orphan runs with it"})
	obj, _, err := i.identities.Status.Update(i.clusterCtx(), name, rest.DefaultUpdatedObjectInfo(id), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	return obj.(*dockerio.MacOSIdentity)
}

// An identity a VM unknown to the ledger runs with leaves the free list in
// the write that says so, is given to no machine, and goes to the oldest
// waiting machine in the write that says the VM is gone.
func TestHeldOutsideLedger_WithheldUntilTheVMIsGone(t *testing.T) {
	e := newEnv(t)
	x := e.addIdentity(t, e.nextIdentity())

	got := e.setHeldOutside(t, x.Name, metav1.ConditionTrue)
	assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.IdentityHeldOutsideLedger))
	counts, err := e.ledger.Counts(context.Background(), "imacpro")
	require.NoError(t, err)
	assert.Zero(t, counts.Free, "an identity in use outside the ledger stayed on the free list")
	m := e.createMachine(t, "mac-1")
	assert.Nil(t, m.Status.IdentityRef, "an identity in use outside the ledger was given to a machine")
	e.assertConsistent(t)
	_, err = e.ledger.Repair(context.Background())
	require.NoError(t, err)
	assert.Nil(t, e.machine(t, "mac-1").Status.IdentityRef, "the repair gave away an identity in use outside the ledger")

	// A status write cannot touch the allocation nor the quarantine.
	forged := e.identity(t, x.Name).DeepCopy()
	forged.Status.Allocation = &dockerio.IdentityAllocation{MachineNamespace: "default", MachineName: "mac-9", MachineUID: "u"}
	meta.SetStatusCondition(&forged.Status.Conditions, metav1.Condition{Type: v1alpha1.IdentityQuarantined, Status: metav1.ConditionTrue, Reason: "DuplicateValue", Message: "x"})
	obj, _, err := e.identities.Status.Update(e.clusterCtx(), x.Name, rest.DefaultUpdatedObjectInfo(forged), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Nil(t, obj.(*dockerio.MacOSIdentity).Status.Allocation)
	assert.Nil(t, meta.FindStatusCondition(obj.(*dockerio.MacOSIdentity).Status.Conditions, v1alpha1.IdentityQuarantined))

	e.setHeldOutside(t, x.Name, metav1.ConditionFalse)
	ref := e.machine(t, "mac-1").Status.IdentityRef
	require.NotNil(t, ref, "the waiting machine did not get the identity once the VM was gone")
	assert.Equal(t, x.Name, ref.Name)
	e.assertConsistent(t)
}

// A held identity whose machine goes while a VM unknown to the ledger runs
// with it is given back to nobody.
func TestHeldOutsideLedger_ReleasedToNobody(t *testing.T) {
	e := newEnv(t)
	x := e.addIdentity(t, e.nextIdentity())
	e.createMachine(t, "mac-0")
	e.setHeldOutside(t, x.Name, metav1.ConditionTrue)
	e.createMachine(t, "mac-1")
	e.deleteMachine(t, "mac-0")
	assert.Nil(t, e.identity(t, x.Name).Status.Allocation)
	assert.Nil(t, e.machine(t, "mac-1").Status.IdentityRef, "a released identity in use outside the ledger went to a waiting machine")
	e.assertConsistent(t)
}
