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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/tools/record"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/identity"
	identitystorage "github.com/dockerios/dockerios/pkg/registry/macosidentity/storage"
	machinestorage "github.com/dockerios/dockerios/pkg/registry/macosmachine/storage"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
)

// instance is what one apiserver replica has: its own ledger, etcd client
// and machine and identity stores, over the shared etcd.
type instance struct {
	ledger     *identityledger.Ledger
	events     *record.FakeRecorder
	machines   machinestorage.MachineStorage
	identities identitystorage.IdentityStorage
}

type env struct {
	getter *registrytest.RESTOptionsGetter
	*instance
	gen *identity.Generator
	n   int
}

// newEnv returns an etcd holding class "standard", drawing from the empty
// pool "imacpro", and one apiserver instance over it.
func newEnv(t *testing.T) *env {
	t.Helper()
	getter := registrytest.NewRESTOptionsGetter(t)
	registrytest.Seed(t, getter, registrytest.MachineClass("standard"), registrytest.IdentityPool("imacpro"))
	return &env{getter: getter, instance: newInstance(t, getter), gen: identity.NewGenerator(1, "iMacPro1,1")}
}

func newInstance(t *testing.T, getter *registrytest.RESTOptionsGetter) *instance {
	t.Helper()
	ledger, events := registrytest.NewLedger(t, getter)
	machines, err := machinestorage.NewStorage(getter, ledger, registrytest.AllowAll)
	require.NoError(t, err)
	t.Cleanup(machines.Machine.DestroyFunc)
	identities, err := identitystorage.NewStorage(getter, ledger)
	require.NoError(t, err)
	t.Cleanup(identities.Identity.DestroyFunc)
	return &instance{ledger: ledger, events: events, machines: machines, identities: identities}
}

// newProductionInstance is newInstance as the apiserver decorates it: its
// own watch caches over the shared etcd, and the ledger's free-list and
// class views running until the test ends.
func newProductionInstance(t *testing.T, shared *registrytest.RESTOptionsGetter) *instance {
	t.Helper()
	getter := registrytest.RESTOptionsGetterFor(shared.Endpoints()...)
	getter.WatchCache = true
	i := newInstance(t, getter)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go i.ledger.RunFreeView(ctx)
	go i.ledger.RunClassView(ctx)
	return i
}

func (i *instance) nsCtx() context.Context {
	return genericregistrytest.NewNamespaceScopeContext(i.machines.Machine.Store.Store, metav1.NamespaceDefault)
}

func (i *instance) clusterCtx() context.Context {
	return genericregistrytest.NewClusterScopeContext(i.identities.Identity.Store.Store)
}

// nextIdentity returns a new valid identity of pool imacpro.
func (e *env) nextIdentity() *dockerio.MacOSIdentity {
	e.n++
	v := e.gen.Next()
	return &dockerio.MacOSIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("id-%04d", e.n)},
		Spec: dockerio.MacOSIdentitySpec{PoolName: "imacpro", Model: v.Model, SerialNumber: v.SerialNumber,
			BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
	}
}

func (i *instance) addIdentity(t *testing.T, id *dockerio.MacOSIdentity) *dockerio.MacOSIdentity {
	t.Helper()
	obj, err := i.identities.Identity.Create(i.clusterCtx(), id, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	return obj.(*dockerio.MacOSIdentity)
}

func (i *instance) createMachine(t *testing.T, name string) *dockerio.MacOSMachine {
	t.Helper()
	obj, err := i.machines.Machine.Create(i.nsCtx(), registrytest.Machine(name), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	return obj.(*dockerio.MacOSMachine)
}

// deleteMachine deletes a machine as users and the controller do: the
// delete marks it, removing the teardown finalizer lets it go.
func (i *instance) deleteMachine(t *testing.T, name string) {
	t.Helper()
	obj, _, err := i.machines.Machine.Delete(i.nsCtx(), name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)
	m := obj.(*dockerio.MacOSMachine).DeepCopy()
	m.Finalizers = nil
	_, _, err = i.machines.Machine.Update(i.nsCtx(), name, rest.DefaultUpdatedObjectInfo(m), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
}

func (i *instance) machine(t *testing.T, name string) *dockerio.MacOSMachine {
	t.Helper()
	obj, err := i.machines.Machine.Get(i.nsCtx(), name, &metav1.GetOptions{})
	require.NoError(t, err)
	return obj.(*dockerio.MacOSMachine)
}

func (i *instance) identity(t *testing.T, name string) *dockerio.MacOSIdentity {
	t.Helper()
	obj, err := i.identities.Identity.Get(i.clusterCtx(), name, &metav1.GetOptions{})
	require.NoError(t, err)
	return obj.(*dockerio.MacOSIdentity)
}

// assertConsistent scans etcd and requires every index key to match its
// object and every object its keys.
func (e *env) assertConsistent(t *testing.T) {
	t.Helper()
	drifts, err := e.ledger.Audit(context.Background())
	require.NoError(t, err)
	assert.Empty(t, drifts)
}

func identityCondition(m *dockerio.MacOSMachine) *metav1.Condition {
	return meta.FindStatusCondition(m.Status.Conditions, "IdentityAllocated")
}

func drainEvents(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestMachineCreate_TakesAFreeIdentityInTheSameWrite(t *testing.T) {
	e := newEnv(t)
	id := e.addIdentity(t, e.nextIdentity())
	m := e.createMachine(t, "mac-1")

	require.NotNil(t, m.Status.IdentityRef)
	assert.Equal(t, id.Name, m.Status.IdentityRef.Name)
	c := identityCondition(m)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, identityledger.ReasonAllocated, c.Reason)

	held := e.identity(t, id.Name)
	require.NotNil(t, held.Status.Allocation)
	assert.Equal(t, "default", held.Status.Allocation.MachineNamespace)
	assert.Equal(t, "mac-1", held.Status.Allocation.MachineName)
	assert.Equal(t, string(m.UID), held.Status.Allocation.MachineUID)
	assert.Equal(t, m.ResourceVersion, e.machine(t, "mac-1").ResourceVersion, "the returned machine is the stored one")

	counts, err := e.ledger.Counts(context.Background(), "imacpro")
	require.NoError(t, err)
	assert.Equal(t, identityledger.PoolCounts{Total: 1, Free: 0, Allocated: 1, Pending: 0}, counts)
	e.assertConsistent(t)
}

func TestMachineCreate_WaitsWhenThePoolIsExhausted(t *testing.T) {
	e := newEnv(t)
	m := e.createMachine(t, "mac-1")

	assert.Nil(t, m.Status.IdentityRef, "an identity is never invented")
	assert.Equal(t, dockerio.MachinePending, m.Status.Phase)
	c := identityCondition(m)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, identityledger.ReasonPoolExhausted, c.Reason)
	assert.Contains(t, c.Message, "imacpro")

	events := drainEvents(e.events)
	require.Len(t, events, 1)
	assert.True(t, strings.HasPrefix(events[0], "Warning PoolExhausted"), events[0])

	counts, err := e.ledger.Counts(context.Background(), "imacpro")
	require.NoError(t, err)
	assert.Equal(t, int32(1), counts.Pending)
	e.assertConsistent(t)
}

func TestIdentityAdded_GoesToTheLongestWaitingMachine(t *testing.T) {
	e := newEnv(t)
	e.createMachine(t, "first")
	e.createMachine(t, "second")
	drainEvents(e.events)

	id := e.addIdentity(t, e.nextIdentity())
	assert.NotNil(t, id.Status.Allocation, "a waiting machine takes the identity as it is added")
	assert.Equal(t, "first", id.Status.Allocation.MachineName)

	first := e.machine(t, "first")
	require.NotNil(t, first.Status.IdentityRef)
	assert.Equal(t, id.Name, first.Status.IdentityRef.Name)
	assert.Equal(t, metav1.ConditionTrue, identityCondition(first).Status)
	assert.Nil(t, e.machine(t, "second").Status.IdentityRef)
	events := drainEvents(e.events)
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "Normal Allocated")

	e.addIdentity(t, e.nextIdentity())
	assert.NotNil(t, e.machine(t, "second").Status.IdentityRef)
	e.assertConsistent(t)
}

func TestMachineDelete_GivesTheIdentityToTheLongestWaitingMachineOrBack(t *testing.T) {
	e := newEnv(t)
	id := e.addIdentity(t, e.nextIdentity())
	e.createMachine(t, "holder")
	e.createMachine(t, "waiter-1")
	e.createMachine(t, "waiter-2")

	e.deleteMachine(t, "holder")
	_, err := e.machines.Machine.Get(e.nsCtx(), "holder", &metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))
	assert.Equal(t, id.Name, e.machine(t, "waiter-1").Status.IdentityRef.Name, "oldest waiting machine first")
	assert.Nil(t, e.machine(t, "waiter-2").Status.IdentityRef)
	assert.Equal(t, "waiter-1", e.identity(t, id.Name).Status.Allocation.MachineName)

	// With nobody left waiting, a released identity goes back to the pool.
	e.deleteMachine(t, "waiter-2")
	e.deleteMachine(t, "waiter-1")
	assert.Nil(t, e.identity(t, id.Name).Status.Allocation)
	counts, err := e.ledger.Counts(context.Background(), "imacpro")
	require.NoError(t, err)
	assert.Equal(t, identityledger.PoolCounts{Total: 1, Free: 1, Allocated: 0, Pending: 0}, counts)
	e.assertConsistent(t)
}

func TestMachineFailed_ReleasesItsIdentityInTheSameWrite(t *testing.T) {
	e := newEnv(t)
	id := e.addIdentity(t, e.nextIdentity())
	m := e.createMachine(t, "mac-1")
	e.createMachine(t, "waiter")

	failed := m.DeepCopy()
	failed.Status.Phase = dockerio.MachineFailed
	obj, _, err := e.machines.Status.Update(e.nsCtx(), "mac-1", rest.DefaultUpdatedObjectInfo(failed), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	got := obj.(*dockerio.MacOSMachine)
	assert.Equal(t, dockerio.MachineFailed, got.Status.Phase)
	assert.Nil(t, got.Status.IdentityRef)
	assert.Equal(t, identityledger.ReasonReleased, identityCondition(got).Reason)
	assert.Equal(t, got.ResourceVersion, e.machine(t, "mac-1").ResourceVersion)

	assert.Equal(t, "waiter", e.identity(t, id.Name).Status.Allocation.MachineName, "the waiting machine took it")
	e.assertConsistent(t)
}

func TestMachineFailed_StopsWaiting(t *testing.T) {
	e := newEnv(t)
	m := e.createMachine(t, "mac-1")
	failed := m.DeepCopy()
	failed.Status.Phase = dockerio.MachineFailed
	_, _, err := e.machines.Status.Update(e.nsCtx(), "mac-1", rest.DefaultUpdatedObjectInfo(failed), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)

	id := e.addIdentity(t, e.nextIdentity())
	assert.Nil(t, id.Status.Allocation, "a failed machine takes no identity")
	e.assertConsistent(t)
}

func TestOtherUpdates_LeaveTheLedgerAlone(t *testing.T) {
	e := newEnv(t)
	e.addIdentity(t, e.nextIdentity())
	m := e.createMachine(t, "mac-1")
	provisioning := m.DeepCopy()
	provisioning.Status.Phase = dockerio.MachineProvisioning
	obj, _, err := e.machines.Status.Update(e.nsCtx(), "mac-1", rest.DefaultUpdatedObjectInfo(provisioning), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.NotNil(t, obj.(*dockerio.MacOSMachine).Status.IdentityRef)
	e.assertConsistent(t)
}

func TestIdentityCreate_RefusesADuplicateValueNamingFieldAndHolder(t *testing.T) {
	e := newEnv(t)
	first := e.addIdentity(t, e.nextIdentity())
	for field, mutate := range map[string]func(*dockerio.MacOSIdentitySpec){
		"serialNumber":      func(s *dockerio.MacOSIdentitySpec) { s.SerialNumber = first.Spec.SerialNumber },
		"boardSerialNumber": func(s *dockerio.MacOSIdentitySpec) { s.BoardSerialNumber = first.Spec.BoardSerialNumber },
		"systemUUID":        func(s *dockerio.MacOSIdentitySpec) { s.SystemUUID = first.Spec.SystemUUID },
		"macAddress":        func(s *dockerio.MacOSIdentitySpec) { s.MACAddress, s.ROM = first.Spec.MACAddress, first.Spec.ROM },
	} {
		t.Run(field, func(t *testing.T) {
			dup := e.nextIdentity()
			mutate(&dup.Spec)
			_, err := e.identities.Identity.Create(e.clusterCtx(), dup, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
			require.True(t, apierrors.IsConflict(err), "want 409, got %v", err)
			assert.Contains(t, err.Error(), first.Name)
			status := err.(apierrors.APIStatus).Status()
			var fields []string
			for _, c := range status.Details.Causes {
				fields = append(fields, c.Field)
			}
			assert.Contains(t, fields, "spec."+field)
			_, err = e.identities.Identity.Get(e.clusterCtx(), dup.Name, &metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "nothing of a refused identity is written")
		})
	}
	e.assertConsistent(t)
}

func TestIdentityDelete_RefusesAHeldIdentityNamingTheMachine(t *testing.T) {
	e := newEnv(t)
	id := e.addIdentity(t, e.nextIdentity())
	e.createMachine(t, "mac-1")

	_, _, err := e.identities.Identity.Delete(e.clusterCtx(), id.Name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.True(t, apierrors.IsConflict(err), "want 409, got %v", err)
	assert.Contains(t, err.Error(), "default/mac-1")

	e.deleteMachine(t, "mac-1")
	_, _, err = e.identities.Identity.Delete(e.clusterCtx(), id.Name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)

	// Its values are free to be used again.
	again := id.DeepCopy()
	again.ResourceVersion, again.UID, again.Name = "", "", "reborn"
	again.Status = dockerio.MacOSIdentityStatus{}
	e.addIdentity(t, again)
	e.assertConsistent(t)
}

func TestMachineCreate_RefusesAClassOrPoolThatDoesNotExistOrDisagree(t *testing.T) {
	e := newEnv(t)
	registrytest.Seed(t, e.getter, func() *dockerio.MacOSMachineClass {
		c := registrytest.MachineClass("orphan")
		c.Spec.IdentityPoolName = "nowhere"
		return c
	}())
	registrytest.Seed(t, e.getter, func() *dockerio.MacOSMachineClass {
		c := registrytest.MachineClass("macpro")
		c.Spec.SMBIOSModel = "MacPro7,1"
		return c
	}())
	for className, want := range map[string]string{
		"missing": `spec.className: Not found: "missing"`,
		"orphan":  `MacOSIdentityPool "nowhere", which does not exist`,
		"macpro":  `the class's SMBIOS model MacPro7,1 differs from iMacPro1,1, the model of its MacOSIdentityPool "imacpro"`,
	} {
		m := registrytest.Machine("mac-" + className)
		m.Spec.ClassName = className
		_, err := e.machines.Machine.Create(e.nsCtx(), m, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		require.True(t, apierrors.IsInvalid(err), "want 422, got %v", err)
		assert.Contains(t, err.Error(), want)
	}
}

func TestIdentityCreate_RefusesAMissingPoolOrAnotherModel(t *testing.T) {
	e := newEnv(t)
	noPool := e.nextIdentity()
	noPool.Spec.PoolName = "nowhere"
	_, err := e.identities.Identity.Create(e.clusterCtx(), noPool, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	assert.Contains(t, err.Error(), "spec.poolName")

	otherModel := e.nextIdentity()
	otherModel.Spec.Model = "MacPro7,1"
	_, err = e.identities.Identity.Create(e.clusterCtx(), otherModel, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	assert.Contains(t, err.Error(), "must be iMacPro1,1")
}

func TestConcurrentIdentityCreates_SharingAValue_ExactlyOneWins(t *testing.T) {
	e := newEnv(t)
	// Two replicas as the apiserver decorates them; half the writers
	// create as server-side apply does, through an update that creates.
	replicas := []*instance{newProductionInstance(t, e.getter), newProductionInstance(t, e.getter)}
	base := e.nextIdentity()
	const writers = 16
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := e.nextIdentityLocked()
			id.Spec.SerialNumber = base.Spec.SerialNumber // every writer shares this value
			inst := replicas[w%2]
			if w%4 < 2 {
				_, errs[w] = inst.identities.Identity.Create(inst.clusterCtx(), id, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
				return
			}
			_, _, errs[w] = inst.identities.Identity.Update(inst.clusterCtx(), id.Name, rest.DefaultUpdatedObjectInfo(id),
				rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, true, &metav1.UpdateOptions{})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		assert.True(t, apierrors.IsConflict(err), "a loser gets 409, got %v", err)
	}
	assert.Equal(t, 1, won)
	e.assertConsistent(t)
}

var genMu sync.Mutex

// nextIdentityLocked is nextIdentity for concurrent callers.
func (e *env) nextIdentityLocked() *dockerio.MacOSIdentity {
	genMu.Lock()
	defer genMu.Unlock()
	return e.nextIdentity()
}

func TestMachineCreate_NoticesAClassReplacedSinceItWasRead(t *testing.T) {
	e := newEnv(t)
	e.addIdentity(t, e.nextIdentity())
	e.createMachine(t, "mac-1") // reads and remembers: standard draws from imacpro

	// Class standard is replaced by one drawing from another pool.
	other := registrytest.IdentityPool("other")
	registrytest.Seed(t, e.getter, other)
	_, err := e.getter.Server.V3Client.Client.Delete(context.Background(), "/registry/dockerios.io/macosmachineclasses/standard")
	require.NoError(t, err)
	replaced := registrytest.MachineClass("standard")
	replaced.Spec.IdentityPoolName = "other"
	replaced.UID = "replaced"
	registrytest.Seed(t, e.getter, replaced)
	id := e.nextIdentity()
	id.Spec.PoolName = "other"
	e.addIdentity(t, id)

	m := e.createMachine(t, "mac-2")
	require.NotNil(t, m.Status.IdentityRef, "the machine drew from the class's new pool")
	assert.Equal(t, id.Name, m.Status.IdentityRef.Name)
	e.assertConsistent(t)
}

// failMachine writes the machine Failed through the status subresource, as
// the controller does, fenced or not.
func (i *instance) failMachine(t *testing.T, name string, fenced bool) *dockerio.MacOSMachine {
	t.Helper()
	failed := i.machine(t, name).DeepCopy()
	failed.Status.Phase = dockerio.MachineFailed
	if fenced {
		meta.SetStatusCondition(&failed.Status.Conditions, metav1.Condition{Type: dockerio.MachineIdentityFenced, Status: metav1.ConditionTrue,
			Reason: "NodeLost", Message: "its VM may still run on a lost node"})
	}
	return i.updateStatus(t, failed)
}

func (i *instance) updateStatus(t *testing.T, m *dockerio.MacOSMachine) *dockerio.MacOSMachine {
	t.Helper()
	obj, _, err := i.machines.Status.Update(i.nsCtx(), m.Name, rest.DefaultUpdatedObjectInfo(m), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	return obj.(*dockerio.MacOSMachine)
}

// Rule 9: a machine whose VM may still run keeps its identity when it
// fails, and gives it back in the write that lifts the fence.
func TestMachineFailedFenced_KeepsItsIdentityUntilTheFenceIsLifted(t *testing.T) {
	e := newEnv(t)
	id := e.addIdentity(t, e.nextIdentity())
	e.createMachine(t, "lost")
	e.createMachine(t, "waiter")

	got := e.failMachine(t, "lost", true)
	assert.Equal(t, dockerio.MachineFailed, got.Status.Phase)
	require.NotNil(t, got.Status.IdentityRef, "a fenced machine keeps its identity")
	assert.Equal(t, id.Name, got.Status.IdentityRef.Name)
	assert.Equal(t, "lost", e.identity(t, id.Name).Status.Allocation.MachineName)
	assert.Nil(t, e.machine(t, "waiter").Status.IdentityRef, "nobody else gets a fenced identity")
	e.assertConsistent(t)

	// A later status write that keeps the fence changes nothing.
	again := got.DeepCopy()
	meta.SetStatusCondition(&again.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NodeLost", Message: "still lost"})
	assert.NotNil(t, e.updateStatus(t, again).Status.IdentityRef)

	lifted := e.machine(t, "lost").DeepCopy()
	meta.SetStatusCondition(&lifted.Status.Conditions, metav1.Condition{Type: dockerio.MachineIdentityFenced, Status: metav1.ConditionFalse,
		Reason: "VirtualMachineGone", Message: "its VirtualMachineInstance is gone"})
	got = e.updateStatus(t, lifted)
	assert.Nil(t, got.Status.IdentityRef)
	assert.Equal(t, identityledger.ReasonReleased, identityCondition(got).Reason)
	assert.Contains(t, identityCondition(got).Message, "confirmed gone")
	assert.Equal(t, "waiter", e.identity(t, id.Name).Status.Allocation.MachineName, "the waiting machine took it once the fence was lifted")
	e.assertConsistent(t)
}

func TestMachineFailedFenced_GivesItsIdentityBackWhenDeleted(t *testing.T) {
	e := newEnv(t)
	id := e.addIdentity(t, e.nextIdentity())
	e.createMachine(t, "lost")
	e.failMachine(t, "lost", true)
	e.deleteMachine(t, "lost")
	assert.Nil(t, e.identity(t, id.Name).Status.Allocation)
	e.assertConsistent(t)
}

func TestMachineFailedFenced_WhileWaitingStillStopsWaiting(t *testing.T) {
	e := newEnv(t)
	e.createMachine(t, "mac-1")
	got := e.failMachine(t, "mac-1", true)
	assert.Nil(t, got.Status.IdentityRef)
	id := e.addIdentity(t, e.nextIdentity())
	assert.Nil(t, id.Status.Allocation, "only a held identity can be fenced; a failed machine takes none")
	e.assertConsistent(t)
}

// Rule 10: a machine records its class's spec at create; a status write
// cannot change it, and a class edited since the apiserver last read it is
// read again, so the snapshot is never of an earlier class.
func TestMachineCreate_RecordsTheClassAsItIs(t *testing.T) {
	shared := registrytest.NewRESTOptionsGetter(t)
	registrytest.Seed(t, shared, registrytest.MachineClass("standard"), registrytest.IdentityPool("imacpro"))
	i := newProductionInstance(t, shared)

	m := i.createMachine(t, "mac-1")
	require.NotNil(t, m.Status.ClassSnapshot)
	assert.Equal(t, int32(1920), m.Status.ClassSnapshot.Spec.Display.Width)
	assert.Equal(t, "sonoma", m.Status.ClassSnapshot.Spec.ImageName)

	// Wait until the class view remembers the class, and keep what it
	// remembers.
	var remembered any
	require.Eventually(t, func() bool {
		_, err := i.ledger.IdentityPoolOf(context.Background(), dockerio.Kind("MacOSMachine"), "probe", "standard")
		require.NoError(t, err)
		remembered = i.ledger.RememberedClass("standard")
		return remembered != nil
	}, 10*time.Second, 20*time.Millisecond)

	edited := registrytest.MachineClass("standard")
	edited.UID, edited.Generation = "seeded-standard", 2
	edited.Spec.Display = dockerio.DisplaySpec{Width: 1280, Height: 800}
	registrytest.Overwrite(t, shared, edited)
	// The view hears of the edit; put back what it remembered before, as
	// a view whose watch is behind would still have it.
	require.Eventually(t, func() bool { return i.ledger.RememberedClass("standard") == nil }, 10*time.Second, 10*time.Millisecond)
	i.ledger.Remember("standard", remembered)

	m2 := i.createMachine(t, "mac-2")
	require.NotNil(t, m2.Status.ClassSnapshot)
	assert.Equal(t, int32(1280), m2.Status.ClassSnapshot.Spec.Display.Width, "made from the class as it is, not as the view remembered it")
	assert.Equal(t, int64(2), m2.Status.ClassSnapshot.Generation)

	// Status writes cannot touch the snapshot.
	rewrite := i.machine(t, "mac-1").DeepCopy()
	rewrite.Status.ClassSnapshot.Spec.Display.Width = 640
	assert.Equal(t, int32(1920), i.updateStatus(t, rewrite).Status.ClassSnapshot.Spec.Display.Width)
	assert.Equal(t, int32(1920), i.machine(t, "mac-1").Status.ClassSnapshot.Spec.Display.Width)
}

// A copy of an identity is refused naming every duplicated field and the
// identity holding each value, as the plugin's import does.
func TestIdentityCreate_NamesEveryDuplicatedField(t *testing.T) {
	e := newEnv(t)
	first := e.addIdentity(t, e.nextIdentity())
	dup := first.DeepCopy()
	dup.ObjectMeta = metav1.ObjectMeta{Name: "copy"}
	dup.Status = dockerio.MacOSIdentityStatus{}
	_, err := e.identities.Identity.Create(e.clusterCtx(), dup, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "want 409, got %v", err)
	var fields []string
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		fields = append(fields, c.Field)
		assert.Contains(t, c.Message, first.Name, c.Field)
	}
	assert.ElementsMatch(t, []string{"spec.serialNumber", "spec.boardSerialNumber", "spec.systemUUID", "spec.macAddress", "spec.rom"}, fields)
	for _, f := range fields {
		assert.Contains(t, err.Error(), f, "the message names every field")
	}
}
