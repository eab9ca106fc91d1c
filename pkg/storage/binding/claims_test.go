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

package binding_test

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	machinestorage "github.com/dockerios/dockerios/pkg/registry/macosmachine/storage"
	claimstorage "github.com/dockerios/dockerios/pkg/registry/macosmachineclaim/storage"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
	"github.com/dockerios/dockerios/pkg/storage/binding"
)

const (
	queueRoot    = "/registry/dockerios.io/claim-queue/"
	bindableRoot = "/registry/dockerios.io/bindable-machines/"
)

// strayMachine makes a Ready machine of pool warm that is missing from its
// pool's bindable index, as an apiserver from before the index left every
// Ready machine (or an edit of etcd): claims created afterwards wait
// beside it, which only the bind subresource, the controller's repair,
// mends.
func (e *env) strayMachine(t *testing.T, name string, mutate ...func(*dockerio.MacOSMachine)) *dockerio.MacOSMachine {
	t.Helper()
	m := e.readyMachine(t, name, mutate...)
	resp, err := e.getter.Server.V3Client.Client.Delete(context.Background(), bindableRoot+m.Namespace+"/"+m.Spec.PoolName+"/"+name)
	require.NoError(t, err)
	require.EqualValues(t, 1, resp.Deleted, "the Ready machine was in the index")
	return m
}

// bindable lists the machines of pool warm in its bindable index.
func (e *env) bindable(t *testing.T) []string {
	t.Helper()
	prefix := bindableRoot + metav1.NamespaceDefault + "/warm/"
	resp, err := e.getter.Server.V3Client.Client.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	var names []string
	for _, kv := range resp.Kvs {
		names = append(names, strings.TrimPrefix(string(kv.Key), prefix))
	}
	return names
}

// replica returns another apiserver's storage over e's etcd: its own
// binder, ledger, stores and (when started) view.
func (e *env) replica(t *testing.T) *env {
	t.Helper()
	ledger, binder := registrytest.NewLedgerAndBinder(t, e.getter)
	machines, err := machinestorage.NewStorage(e.getter, ledger, registrytest.AllowAll)
	require.NoError(t, err)
	t.Cleanup(machines.Machine.DestroyFunc)
	claims, err := claimstorage.NewStorage(e.getter, claimstorage.Deps{Binder: binder, Classes: ledger, Authorizer: registrytest.AllowAll})
	require.NoError(t, err)
	t.Cleanup(claims.Claim.DestroyFunc)
	return &env{machines: machines, claims: claims, binder: binder, getter: e.getter}
}

// startView runs the binder's view of bindable machines, as the apiserver
// does once it has started.
func (e *env) startView(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go e.binder.RunMachineView(ctx, e.machines.Machine.Store.Storage.Storage)
}

// waitBindable waits until the view would bind exactly want, in order,
// to claims of pool warm.
func (e *env) waitBindable(t *testing.T, want ...string) {
	t.Helper()
	e.waitBindableIn(t, "warm", want...)
}

// caughtUp waits until the view has taken in every write made so far: it
// applies the watch's events in order, so once it shows a machine made
// now, it has seen all before.
func (e *env) caughtUp(t *testing.T) {
	t.Helper()
	e.readyMachine(t, "sentinel", func(m *dockerio.MacOSMachine) { m.Spec.PoolName = "sentinel" })
	e.waitBindableIn(t, "sentinel", "sentinel")
}

func (e *env) waitBindableIn(t *testing.T, pool string, want ...string) {
	t.Helper()
	var names []string
	var known bool
	if !assert.Eventually(t, func() bool {
		names, known = e.binder.BindableMachines(metav1.NamespaceDefault, pool)
		return known && fmt.Sprint(names) == fmt.Sprint(want)
	}, 10*time.Second, 5*time.Millisecond) {
		t.Fatalf("the view never showed %v: it showed %v (loaded: %v)", want, names, known)
	}
}

// readyMachineSince creates a machine of pool warm Ready since since.
func (e *env) readyMachineSince(t *testing.T, name string, since time.Time) {
	t.Helper()
	e.readyMachine(t, name)
	m := e.getMachine(t, name)
	for i := range m.Status.Conditions {
		if m.Status.Conditions[i].Type == "Ready" {
			m.Status.Conditions[i].LastTransitionTime = metav1.NewTime(since)
		}
	}
	_, _, err := e.machines.Status.Update(e.ctx(), name, rest.DefaultUpdatedObjectInfo(m), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
}

// queue lists the waiting claims of pool warm, as etcd holds them.
func (e *env) queue(t *testing.T) []string {
	t.Helper()
	resp, err := e.getter.Server.V3Client.Client.Get(context.Background(), queueRoot, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	var names []string
	for _, kv := range resp.Kvs {
		names = append(names, strings.TrimPrefix(string(kv.Key), queueRoot))
	}
	return names
}

func (e *env) tryClaim(name string, mutate ...func(*dockerio.MacOSMachineClaim)) (*dockerio.MacOSMachineClaim, error) {
	c := registrytest.MachineClaim(name)
	for _, f := range mutate {
		f(c)
	}
	obj, err := e.claims.Claim.Create(e.ctx(), c, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return obj.(*dockerio.MacOSMachineClaim), nil
}

func TestCreate_BindsTheMachineReadyLongestInTheSameWrite(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.readyMachineSince(t, "mac-b", time.Now().Add(-time.Minute))
	e.readyMachineSince(t, "mac-a", time.Now())
	e.readyMachineSince(t, "mac-c", time.Now().Add(-time.Hour))
	e.startView(t)
	e.waitBindable(t, "mac-c", "mac-b", "mac-a")

	for _, want := range []string{"mac-c", "mac-b", "mac-a"} {
		c := e.claim(t, "for-"+want)
		assert.Equal(t, dockerio.ClaimBound, c.Status.Phase, "the create answers Bound")
		assert.Equal(t, want, c.Status.MachineName, "the machine Ready longest first")
		assert.NotNil(t, c.Status.BoundTime)
		assert.NotEmpty(t, c.ResourceVersion)
		m := e.getMachine(t, want)
		require.NotNil(t, m.Status.ClaimRef)
		assert.Equal(t, dockerio.ClaimReference{Name: c.Name, UID: string(c.UID)}, *m.Status.ClaimRef)
		assert.Equal(t, c.ResourceVersion, m.ResourceVersion, "claim and machine are written in one transaction")
	}
	assert.Empty(t, e.queue(t), "a claim bound at create never waits")

	c := e.claim(t, "late")
	assert.Equal(t, dockerio.ClaimPending, c.Status.Phase, "no machine left: Pending")
	assert.Equal(t, []string{"default/warm/late"}, e.queue(t))
}

// Without a view (an apiserver still loading it, or one whose watch
// broke), etcd's bindable index decides: a claim is still Bound at create.
func TestCreate_WithoutAViewTheIndexBindsAtCreate(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.readyMachineSince(t, "mac-new", time.Now())
	e.readyMachineSince(t, "mac-old", time.Now().Add(-time.Hour))
	assert.Equal(t, []string{"mac-new", "mac-old"}, e.bindable(t))
	for _, want := range []string{"mac-new", "mac-old"} {
		c := e.claim(t, "for-"+want)
		assert.Equal(t, dockerio.ClaimBound, c.Status.Phase)
		assert.Equal(t, want, c.Status.MachineName, "the machine free longest first")
		assert.Equal(t, c.ResourceVersion, e.getMachine(t, want).ResourceVersion, "claim and machine in one write")
	}
	assert.Empty(t, e.bindable(t), "a bound machine leaves the index in the write that binds it")
	late := e.claim(t, "late")
	assert.Equal(t, dockerio.ClaimPending, late.Status.Phase)
	assertWaiting(t, late, "no Ready, unbound MacOSMachine of the pool matching its selector is free to take")
	assert.Equal(t, []string{"default/warm/late"}, e.queue(t))
}

// The bind subresource stays as the controller's repair, for a machine the
// index does not know (written before it existed, or an edit of etcd).
func TestBind_RepairsAStrayMachineAndLeavesTheQueue(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.strayMachine(t, "mac-1")
	c := e.claim(t, "ci-1")
	assert.Equal(t, dockerio.ClaimPending, c.Status.Phase)
	assert.Equal(t, []string{"default/warm/ci-1"}, e.queue(t))
	bound, err := e.bind("ci-1", "mac-1")
	require.NoError(t, err)
	assert.Empty(t, e.queue(t), "bound: out of the queue in the same write")
	cond := meta.FindStatusCondition(bound.Status.Conditions, binding.ConditionBound)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Len(t, bound.Status.Conditions, 1)
}

// warmMachine creates a machine of pool warm, not Ready yet.
func (e *env) warmMachine(t *testing.T, name string) {
	t.Helper()
	m := registrytest.Machine(name)
	m.Spec.PoolName = "warm"
	m.Labels = map[string]string{"xcode": "16"}
	_, err := e.machines.Machine.Create(e.ctx(), m, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
}

// makeReady reports an existing machine Ready, as the controller does.
func (e *env) makeReady(t *testing.T, name string) *dockerio.MacOSMachine {
	t.Helper()
	m := e.getMachine(t, name).DeepCopy()
	m.Status.Phase = dockerio.MachineReady
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
		Type: "Ready", Status: metav1.ConditionTrue, Reason: "AgentReady", Message: "the guest agent reports Ready"})
	obj, _, err := e.machines.Status.Update(e.ctx(), name, rest.DefaultUpdatedObjectInfo(m), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	return obj.(*dockerio.MacOSMachine)
}

// A machine that becomes Ready is bound, in the status write that says
// so, to the oldest waiting claim of its pool it may take: no claim waits
// for the controller while a machine is free.
func TestMachineReady_BindsTheOldestWaitingClaimInTheSameWrite(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.startView(t)
	e.waitBindable(t)
	picky, err := e.tryClaim("picky", func(c *dockerio.MacOSMachineClaim) {
		c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"xcode": "15"}}
	})
	require.NoError(t, err)
	first, second := e.claim(t, "first"), e.claim(t, "second")
	for _, c := range []*dockerio.MacOSMachineClaim{picky, first, second} {
		require.Equal(t, dockerio.ClaimPending, c.Status.Phase)
	}
	e.warmMachine(t, "mac-1")
	ready := e.makeReady(t, "mac-1")
	require.NotNil(t, ready.Status.ClaimRef, "the status write's answer holds the claim it served")
	assert.Equal(t, dockerio.ClaimReference{Name: "first", UID: string(first.UID)}, *ready.Status.ClaimRef,
		"the oldest claim it may take: picky's selector does not match it")
	c := e.getClaim(t, "first")
	assert.Equal(t, dockerio.ClaimBound, c.Status.Phase)
	assert.Equal(t, "mac-1", c.Status.MachineName)
	assert.Equal(t, ready.ResourceVersion, c.ResourceVersion, "in one transaction")
	assert.Equal(t, []string{"default/warm/picky", "default/warm/second"}, e.queue(t))
	assert.Empty(t, e.bindable(t))

	// A free machine whose labels change so that a waiting claim's
	// selector matches it is bound to that claim in the label write.
	e.readyMachine(t, "mac-2")
	// second took it at once (the fixture's selector is xcode=16).
	assert.Equal(t, "mac-2", e.getClaim(t, "second").Status.MachineName)
	e.readyMachine(t, "mac-3", func(m *dockerio.MacOSMachine) { m.Labels = map[string]string{"xcode": "14"} })
	assert.Equal(t, []string{"mac-3"}, e.bindable(t), "nobody waiting may take it: it is free")
	m := e.getMachine(t, "mac-3").DeepCopy()
	m.Labels["xcode"] = "15"
	obj, _, err := e.machines.Machine.Update(e.ctx(), "mac-3", rest.DefaultUpdatedObjectInfo(m), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	relabelled := obj.(*dockerio.MacOSMachine)
	require.NotNil(t, relabelled.Status.ClaimRef)
	assert.Equal(t, "picky", relabelled.Status.ClaimRef.Name)
	assert.Equal(t, relabelled.ResourceVersion, e.getClaim(t, "picky").ResourceVersion)
	assert.Empty(t, e.queue(t))
	assert.Empty(t, e.bindable(t))
}

// A free machine marked for deletion (its finalizer holds it) leaves the
// index in the write that marks it: no claim is bound to it after.
func TestDelete_AFreeMachineLeavesTheIndexWhenMarked(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.readyMachine(t, "mac-1")
	require.Equal(t, []string{"mac-1"}, e.bindable(t))
	obj, _, err := e.machines.Machine.Delete(e.ctx(), "mac-1", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)
	require.NotNil(t, obj.(*dockerio.MacOSMachine).DeletionTimestamp, "the teardown finalizer holds it")
	assert.Empty(t, e.bindable(t))
	c := e.claim(t, "ci-1")
	assert.Equal(t, dockerio.ClaimPending, c.Status.Phase)
}

// A claim's create and a machine's becoming Ready, racing in two
// apiservers with and without a view: whichever commits second sees the
// first, so the claim always ends Bound to the machine — never Pending
// beside it.
func TestCreateAndReady_RaceNeverLeavesAClaimBesideAFreeMachine(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	other := e.replica(t)
	other.startView(t)
	const rounds = 40
	for i := range rounds {
		name := fmt.Sprintf("mac-%02d", i)
		e.warmMachine(t, name)
		creator := e
		if i%2 == 1 {
			creator = other
		}
		var wg sync.WaitGroup
		var c *dockerio.MacOSMachineClaim
		var m *dockerio.MacOSMachine
		wg.Add(2)
		go func() {
			defer wg.Done()
			var err error
			c, err = creator.tryClaim(fmt.Sprintf("ci-%02d", i))
			assert.NoError(t, err)
		}()
		go func() {
			defer wg.Done()
			m = e.makeReady(t, name)
		}()
		wg.Wait()
		require.NotNil(t, c)
		got := e.getClaim(t, c.Name)
		require.Equal(t, dockerio.ClaimBound, got.Status.Phase, "round %d: claim %s is %s while %s is Ready (create answered %s, ready answered claimRef %v)",
			i, c.Name, got.Status.Phase, name, c.Status.Phase, m.Status.ClaimRef)
		assert.Equal(t, name, got.Status.MachineName)
		assert.Empty(t, e.queue(t))
		assert.Empty(t, e.bindable(t))
	}
}

func TestCreate_ClaimsThatCannotTakeAMachineWait(t *testing.T) {
	// The fixture's claims have a selector.
	const noMachine = "no Ready, unbound MacOSMachine of the pool matching its selector is free to take: " +
		"the claim is bound to the next Ready, unbound MacOSMachine of MacOSMachinePool warm"
	cases := map[string]struct {
		machine func(t *testing.T, e *env)
		claim   func(*dockerio.MacOSMachineClaim)
		// why is (the start of) the message of the claim's Bound condition.
		why string
	}{
		"selector matches no Ready machine": {
			machine: func(t *testing.T, e *env) { e.readyMachine(t, "mac-1") },
			claim: func(c *dockerio.MacOSMachineClaim) {
				c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"xcode": "15"}}
			},
			why: "no Ready, unbound MacOSMachine of the pool matching its selector is free to take",
		},
		"machine of another pool": {
			machine: func(t *testing.T, e *env) {
				e.readyMachine(t, "mac-1", func(m *dockerio.MacOSMachine) { m.Spec.PoolName = "other" })
			},
			claim: func(c *dockerio.MacOSMachineClaim) { c.Spec.Selector = nil },
			why:   "no Ready, unbound MacOSMachine of the pool is free to take: the claim is bound to the next",
		},
		"machine not Ready": {
			machine: func(t *testing.T, e *env) {
				_, err := e.machines.Machine.Create(e.ctx(), registrytest.Machine("mac-1"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
				require.NoError(t, err)
			},
			why: noMachine,
		},
		"machine released by its last claim": {
			machine: func(t *testing.T, e *env) {
				e.readyMachine(t, "mac-1")
				e.waitBindable(t, "mac-1")
				require.Equal(t, "mac-1", e.claim(t, "before").Status.MachineName)
				_, _, err := e.claims.Claim.Delete(e.ctx(), "before", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
				require.NoError(t, err)
			},
			why: noMachine,
		},
		"pool does not exist": {
			machine: func(t *testing.T, e *env) { e.readyMachine(t, "mac-1") },
			claim: func(c *dockerio.MacOSMachineClaim) {
				c.Spec.PoolName, c.Spec.Selector = "nope", nil
			},
			why: "MacOSMachinePool nope does not exist: the claim is bound to the next Ready, unbound MacOSMachine of MacOSMachinePool nope that it may take, oldest claim first",
		},
		"pool being deleted": {
			machine: func(t *testing.T, e *env) {
				p := registrytest.MachinePool("warm")
				p.Finalizers, p.DeletionTimestamp = []string{"example.com/hold"}, ptr.To(metav1.Now())
				registrytest.Overwrite(t, e.getter, p)
			},
			why: "MacOSMachinePool warm is being deleted: the claim is bound to the next",
		},
		"the pool says which of its reasons holds": {
			machine: func(t *testing.T, e *env) {
				p := registrytest.MachinePool("warm")
				p.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "MaxMachinesReached",
					Message: "0 of 2 unbound machines are Ready, and the pool makes no more: it holds 10 machines (10 bound to claims), its maxMachines"}}
				registrytest.Overwrite(t, e.getter, p)
			},
			why: noMachine + " that it may take, oldest claim first; the pool's Ready condition says MaxMachinesReached: " +
				"0 of 2 unbound machines are Ready, and the pool makes no more: it holds 10 machines (10 bound to claims), its maxMachines",
		},
		"class claim": {
			machine: func(t *testing.T, e *env) { e.readyMachine(t, "mac-1") },
			claim: func(c *dockerio.MacOSMachineClaim) {
				c.Spec.PoolName, c.Spec.ClassName = "", "standard"
			},
			why: "a MacOSMachine of MacOSMachineClass standard is made for the claim",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, registrytest.AllowAll)
			e.startView(t)
			e.waitBindable(t)
			tc.machine(t, e)
			e.caughtUp(t)
			var mutate []func(*dockerio.MacOSMachineClaim)
			if tc.claim != nil {
				mutate = append(mutate, tc.claim)
			}
			c, err := e.tryClaim("ci-1", mutate...)
			require.NoError(t, err)
			assert.Equal(t, dockerio.ClaimPending, c.Status.Phase)
			assert.Empty(t, c.Status.MachineName)
			assertWaiting(t, c, tc.why)
			assert.Equal(t, c.Status, e.getClaim(t, "ci-1").Status, "the answer is what was written")
		})
	}
}

// assertWaiting asserts that c says, in its Bound condition, that it
// waits, and why.
func assertWaiting(t *testing.T, c *dockerio.MacOSMachineClaim, why string) {
	t.Helper()
	cond := meta.FindStatusCondition(c.Status.Conditions, binding.ConditionBound)
	if !assert.NotNil(t, cond, "a claim created Pending says why in its Bound condition") {
		return
	}
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, binding.ReasonWaitingForMachine, cond.Reason)
	assert.Contains(t, cond.Message, why)
	assert.Equal(t, c.Generation, cond.ObservedGeneration)
	assert.False(t, cond.LastTransitionTime.IsZero())
}

func TestCreate_DryRunAnswersAsTheRealCreateAndWritesNothing(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.readyMachine(t, "mac-1")
	e.startView(t)
	e.waitBindable(t, "mac-1")
	dry := &metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	obj, err := e.claims.Claim.Create(e.ctx(), registrytest.MachineClaim("ci-1"), rest.ValidateAllObjectFunc, dry)
	require.NoError(t, err)
	c := obj.(*dockerio.MacOSMachineClaim)
	assert.Equal(t, dockerio.ClaimBound, c.Status.Phase, "the dry run answers what the real create would")
	assert.Equal(t, "mac-1", c.Status.MachineName)
	assert.Empty(t, c.ResourceVersion, "nothing was stored")
	_, err = e.claims.Claim.Get(e.ctx(), "ci-1", &metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
	assert.Nil(t, e.getMachine(t, "mac-1").Status.ClaimRef)
	e.waitBindable(t, "mac-1")

	real := e.claim(t, "ci-1")
	assert.Equal(t, "mac-1", real.Status.MachineName, "the real create does what the dry run said")

	obj, err = e.claims.Claim.Create(e.ctx(), registrytest.MachineClaim("ci-2"), rest.ValidateAllObjectFunc, dry)
	require.NoError(t, err)
	assert.Equal(t, dockerio.ClaimPending, obj.(*dockerio.MacOSMachineClaim).Status.Phase)
	assert.Empty(t, e.queue(t), "a dry run joins no queue")

	_, err = e.claims.Claim.Create(e.ctx(), registrytest.MachineClaim("ci-1"), rest.ValidateAllObjectFunc, dry)
	assert.True(t, apierrors.IsAlreadyExists(err), "a dry-run create of an existing claim: got %v", err)
}

func TestCreate_ServerSideApplyBindsAsPOSTDoes(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.readyMachine(t, "mac-1")
	e.startView(t)
	e.waitBindable(t, "mac-1")
	obj, created, err := e.claims.Claim.Update(e.ctx(), "ci-1", rest.DefaultUpdatedObjectInfo(registrytest.MachineClaim("ci-1")),
		rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, true, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "mac-1", obj.(*dockerio.MacOSMachineClaim).Status.MachineName)
	require.NotNil(t, e.getMachine(t, "mac-1").Status.ClaimRef)

	obj, _, err = e.claims.Claim.Update(e.ctx(), "ci-2", rest.DefaultUpdatedObjectInfo(registrytest.MachineClaim("ci-2")),
		rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, true, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, dockerio.ClaimPending, obj.(*dockerio.MacOSMachineClaim).Status.Phase)
	assert.Equal(t, []string{"default/warm/ci-2"}, e.queue(t), "an applied claim waits in the queue as a POSTed one")
}

func TestDelete_AWaitingClaimLeavesItsQueue(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.claim(t, "plain")
	withFinalizer := registrytest.MachineClaim("finalized")
	withFinalizer.Finalizers = []string{"example.com/hold"}
	_, err := e.claims.Claim.Create(e.ctx(), withFinalizer, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"default/warm/finalized", "default/warm/plain"}, e.queue(t))

	_, _, err = e.claims.Claim.Delete(e.ctx(), "plain", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	assert.Len(t, e.queue(t), 2, "a dry-run delete leaves the queue alone")

	_, _, err = e.claims.Claim.Delete(e.ctx(), "plain", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)
	_, immediate, err := e.claims.Claim.Delete(e.ctx(), "finalized", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)
	assert.False(t, immediate, "the finalizer holds the claim")
	assert.NotNil(t, e.getClaim(t, "finalized").DeletionTimestamp)
	assert.Empty(t, e.queue(t), "a claim being deleted waits for nothing: out of the queue when marked")
}

func TestStatus_AWaitingClaimMadeLostLeavesItsQueue(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	lost := e.claim(t, "lost").DeepCopy()
	require.Equal(t, []string{"default/warm/lost"}, e.queue(t))
	lost.Status.Phase = dockerio.ClaimLost

	_, _, err := e.claims.Status.Update(e.ctx(), lost.Name, rest.DefaultUpdatedObjectInfo(lost), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	assert.Equal(t, []string{"default/warm/lost"}, e.queue(t), "a dry-run status write leaves the queue alone")

	_, _, err = e.claims.Status.Update(e.ctx(), lost.Name, rest.DefaultUpdatedObjectInfo(lost), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, dockerio.ClaimLost, e.getClaim(t, "lost").Status.Phase)
	assert.Empty(t, e.queue(t), "a Lost claim waits for nothing: out of the queue in the write that makes it Lost")
}

func TestAuditQueue_DropsOnlyEntriesWhoseClaimNoLongerWaits(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.claim(t, "waiting")
	ctx := context.Background()
	_, err := e.getter.Server.V3Client.Client.Put(ctx, queueRoot+"default/warm/gone", "uid-of-a-deleted-claim")
	require.NoError(t, err)
	n, err := e.binder.AuditQueue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"default/warm/waiting"}, e.queue(t))
}

// An upgrade from a release without the bindable index, or an edit of
// etcd: the audit settles every free machine missing from the index — a
// waiting claim takes it, else it is indexed — and drops keys of machines
// that are not free.
func TestAuditBindable_MendsTheIndexFromTheMachines(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.strayMachine(t, "stray-1")
	e.strayMachine(t, "stray-2")
	waiting := e.claim(t, "waiting")
	require.Equal(t, dockerio.ClaimPending, waiting.Status.Phase, "the index does not know the stray machines")
	e.warmMachine(t, "not-ready")
	ctx := context.Background()
	for _, name := range []string{"not-ready", "deleted"} {
		_, err := e.getter.Server.V3Client.Client.Put(ctx, bindableRoot+"default/warm/"+name, "")
		require.NoError(t, err)
	}
	e.startView(t)
	e.waitBindable(t, "stray-1", "stray-2")

	n, err := e.binder.AuditBindable(ctx)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	c := e.getClaim(t, "waiting")
	assert.Equal(t, dockerio.ClaimBound, c.Status.Phase, "the waiting claim took a stray machine")
	free := "stray-1"
	if c.Status.MachineName == "stray-1" {
		free = "stray-2"
	}
	assert.Equal(t, []string{free}, e.bindable(t), "the other is indexed; keys of machines that are not free are gone")
	assert.Empty(t, e.queue(t))
	n, err = e.binder.AuditBindable(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left to mend")
}

// TestCreate_RacesNeverBindAMachineTwice has two apiserver replicas, each
// with its own view, take claims while machines turn Ready, the controller
// binds waiting claims and claims are deleted, all at once; afterwards
// every machine is held by at most one claim, claim and machine agree, and
// the queue holds exactly the claims still waiting.
func TestCreate_RacesNeverBindAMachineTwice(t *testing.T) {
	getter := registrytest.NewRESTOptionsGetter(t)
	getter.WatchCache = true
	registrytest.Seed(t, getter, registrytest.MachineClass("standard"), registrytest.IdentityPool("imacpro"))
	first := (&env{getter: getter}).replica(t)
	second := first.replica(t)
	replicas := []*env{first, second}
	for _, r := range replicas {
		r.startView(t)
		r.waitBindable(t)
	}
	const warm, later, claims = 15, 15, 60
	for i := range warm {
		first.readyMachine(t, fmt.Sprintf("warm-%02d", i))
	}
	for _, r := range replicas {
		r.waitBindable(t, func() []string {
			var names []string
			for i := range warm {
				names = append(names, fmt.Sprintf("warm-%02d", i))
			}
			return names
		}()...)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	// The creates start together, so that the two replicas reach for the
	// same machine (the one Ready longest) at the same moment.
	start := make(chan struct{})
	for i := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := replicas[i%2]
			if _, err := r.tryClaim(fmt.Sprintf("ci-%02d", i)); err != nil {
				errs <- fmt.Errorf("create ci-%02d: %w", i, err)
			}
		}()
	}
	for i := range later {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replicas[i%2].readyMachine(t, fmt.Sprintf("later-%02d", i))
		}()
	}
	// Deletes of some claims, whatever state they are in.
	for i := 0; i < claims; i += 7 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.Intn(50)) * time.Millisecond)
			_, _, err := replicas[(i+1)%2].claims.Claim.Delete(replicas[0].ctx(), fmt.Sprintf("ci-%02d", i), rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs <- fmt.Errorf("delete ci-%02d: %w", i, err)
			}
		}()
	}
	close(start)
	// The controller: bind waiting claims to Ready machines, oldest first,
	// until the creates are done.
	stop := make(chan struct{})
	var controller sync.WaitGroup
	controller.Add(1)
	go func() {
		defer controller.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			controllerPass(t, replicas[1])
		}
	}()
	wg.Wait()
	close(stop)
	controller.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	controllerPass(t, first) // serve whoever still waits

	claimsList, err := first.claims.Claim.List(first.ctx(), nil)
	require.NoError(t, err)
	machinesList, err := first.machines.Machine.List(first.ctx(), nil)
	require.NoError(t, err)
	holder := map[string]string{}
	var waitingClaims []string
	for _, c := range claimsList.(*dockerio.MacOSMachineClaimList).Items {
		if c.Status.MachineName == "" {
			waitingClaims = append(waitingClaims, "default/warm/"+c.Name)
			continue
		}
		if other, dup := holder[c.Status.MachineName]; dup {
			t.Errorf("machine %s bound to both %s and %s", c.Status.MachineName, other, c.Name)
		}
		holder[c.Status.MachineName] = c.Name
	}
	bound := 0
	for _, m := range machinesList.(*dockerio.MacOSMachineList).Items {
		if m.Status.ClaimRef == nil {
			assert.Empty(t, holder[m.Name], "claim %s names machine %s, which names no claim", holder[m.Name], m.Name)
			continue
		}
		bound++
		assert.Equal(t, holder[m.Name], m.Status.ClaimRef.Name, "machine %s and its claim agree", m.Name)
	}
	assert.Equal(t, len(holder), bound)
	sort.Strings(waitingClaims)
	assert.Equal(t, waitingClaims, e2q(first.queue(t)), "the queue holds exactly the waiting claims")
	t.Logf("%d claims bound, %d waiting, of %d machines", bound, len(waitingClaims), warm+later)
}

func e2q(q []string) []string {
	sort.Strings(q)
	if q == nil {
		return nil
	}
	return q
}

// controllerPass binds waiting claims, oldest first, to Ready unbound
// machines through the bind subresource, as the pool controller does.
func controllerPass(t *testing.T, e *env) {
	claimsList, err := e.claims.Claim.List(e.ctx(), nil)
	require.NoError(t, err)
	machinesList, err := e.machines.Machine.List(e.ctx(), nil)
	require.NoError(t, err)
	var free []string
	for _, m := range machinesList.(*dockerio.MacOSMachineList).Items {
		if m.Status.ClaimRef == nil && m.Status.Phase == dockerio.MachineReady && m.DeletionTimestamp == nil {
			free = append(free, m.Name)
		}
	}
	items := claimsList.(*dockerio.MacOSMachineClaimList).Items
	sort.Slice(items, func(i, j int) bool { return items[i].CreationTimestamp.Before(&items[j].CreationTimestamp) })
	for _, c := range items {
		if c.Status.MachineName != "" || c.DeletionTimestamp != nil || len(free) == 0 {
			continue
		}
		if _, err := e.bind(c.Name, free[0]); err == nil || apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			free = free[1:]
		} else {
			t.Errorf("bind %s to %s: %v", c.Name, free[0], err)
		}
	}
}

// frozenWatch is a machine storage whose watch never delivers an event: a
// view following it keeps what it listed, as a replica whose watch lags.
type frozenWatch struct{ storage.Interface }

func (frozenWatch) Watch(context.Context, string, storage.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

// TestCreate_AStaleViewCostsARetryNeverASecondBinding has one replica bind
// a machine while another replica's view still shows it free: the second
// replica's transaction, conditioned on the machine's revision, fails, and
// its claim waits instead of taking a bound machine.
func TestCreate_AStaleViewCostsARetryNeverASecondBinding(t *testing.T) {
	live := newEnv(t, registrytest.AllowAll)
	lagging := live.replica(t)
	live.readyMachine(t, "mac-1")
	live.startView(t)
	live.waitBindable(t, "mac-1")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go lagging.binder.RunMachineView(ctx, frozenWatch{lagging.machines.Machine.Store.Storage.Storage})
	lagging.waitBindable(t, "mac-1")

	first := live.claim(t, "first")
	require.Equal(t, "mac-1", first.Status.MachineName)
	lagging.waitBindable(t, "mac-1") // still: its watch delivers nothing

	second, err := lagging.tryClaim("second")
	require.NoError(t, err)
	assert.Equal(t, dockerio.ClaimPending, second.Status.Phase, "the machine changed since the view saw it: the claim waits")
	m := live.getMachine(t, "mac-1")
	require.NotNil(t, m.Status.ClaimRef)
	assert.Equal(t, "first", m.Status.ClaimRef.Name)
	names, _ := lagging.binder.BindableMachines(metav1.NamespaceDefault, "warm")
	assert.Empty(t, names, "the stale entry is dropped until the watch shows the machine again")
}
