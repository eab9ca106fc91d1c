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

package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned/fake"
	dlisters "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

// A pool fills up to its replicas while it lives, and makes no machine
// once it is being deleted: with foreground propagation the garbage
// collector deletes its machines first, and a pool that replaced them
// would never go.
func TestReconcilePool_MakesMachinesOnlyWhileThePoolLives(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deleting bool
		creates  int
	}{
		{name: "living pool fills", creates: 2},
		{name: "pool being deleted makes none", deleting: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := warmPool(2)
			if tc.deleting {
				p.DeletionTimestamp = ptr.To(metav1.Now())
				p.Finalizers = []string{metav1.FinalizerDeleteDependents}
			}
			e := newPoolEnv(t, p, nil, nil)
			made := 0
			e.client.PrependReactor("create", "macosmachines", func(a k8stesting.Action) (bool, runtime.Object, error) {
				m := a.(k8stesting.CreateAction).GetObject().(*v1alpha1.MacOSMachine)
				made++
				m.Name = fmt.Sprintf("%s%d", m.GenerateName, made) // the fake does not generate names
				return false, nil, nil
			})
			require.NoError(t, e.r.ReconcilePool(context.Background(), "ci", "warm"))
			creates := 0
			for _, v := range e.verbs() {
				if v == "create" {
					creates++
				}
			}
			assert.Equal(t, tc.creates, creates, "machines created")
		})
	}
}

// poolEnv is a pool reconciler whose caches show a pool, machines and
// claims, over an API that holds stored (and the pool) as they are now,
// which may be newer than the caches.
type poolEnv struct {
	r      *Reconciler
	client *fake.Clientset
}

// warmPool is pool "warm" in namespace ci, of class standard.
func warmPool(replicas int32) *v1alpha1.MacOSMachinePool {
	return &v1alpha1.MacOSMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: "ci", UID: "pool-uid", ResourceVersion: "1"},
		Spec:       v1alpha1.MacOSMachinePoolSpec{ClassName: "standard", Replicas: ptr.To(replicas)},
	}
}

func newPoolEnv(t *testing.T, p *v1alpha1.MacOSMachinePool, cached []*v1alpha1.MacOSMachine, claims []*v1alpha1.MacOSMachineClaim, stored ...runtime.Object) *poolEnv {
	t.Helper()
	// Not NewClientset: its field-managed tracker needs a typed schema of
	// our kinds that the fake does not carry.
	client := fake.NewSimpleClientset(append([]runtime.Object{p}, stored...)...) //nolint:staticcheck // see above
	index := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	pools, machines, claimIndex := index(), index(), index()
	require.NoError(t, pools.Add(p))
	for _, m := range cached {
		require.NoError(t, machines.Add(m))
	}
	for _, c := range claims {
		require.NoError(t, claimIndex.Add(c))
	}
	return &poolEnv{client: client, r: &Reconciler{
		Client:   client,
		Pools:    dlisters.NewMacOSMachinePoolLister(pools),
		Machines: dlisters.NewMacOSMachineLister(machines),
		Claims:   dlisters.NewMacOSMachineClaimLister(claimIndex),
		Recorder: record.NewFakeRecorder(100),
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	}}
}

// verbs lists the writes of machines made, as "create" or "delete <name>".
func (e *poolEnv) verbs() []string {
	var out []string
	for _, a := range e.client.Actions() {
		if a.GetResource().Resource != "macosmachines" {
			continue
		}
		switch a := a.(type) {
		case k8stesting.CreateAction:
			out = append(out, "create")
		case k8stesting.DeleteAction:
			out = append(out, "delete "+a.GetName())
		}
	}
	return out
}

func poolMachine(name, rv string, isReady bool) *v1alpha1.MacOSMachine {
	m := &v1alpha1.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ci", UID: types.UID(name + "-uid"), ResourceVersion: rv,
			CreationTimestamp: metav1.Now(), Labels: map[string]string{v1alpha1.MachinePoolLabel: "warm"}},
		Spec:   v1alpha1.MacOSMachineSpec{ClassName: "standard", PoolName: "warm"},
		Status: v1alpha1.MacOSMachineStatus{Phase: v1alpha1.MachineStarting},
	}
	if isReady {
		m.Status.Phase = v1alpha1.MachineReady
		m.Status.Conditions = []metav1.Condition{{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionTrue,
			Reason: "GuestReady", LastTransitionTime: metav1.Now()}}
	}
	return m
}

// Scaling down deletes a machine as the cache shows it, conditioned on its
// resourceVersion: the apiserver may have bound it to a claim at create
// meanwhile, and deleting it would leave that claim Lost a moment after
// it was Bound.
func TestReconcilePool_ScaleDownSparesAMachineBoundMeanwhile(t *testing.T) {
	cached := poolMachine("warm-a", "5", true)
	bound := cached.DeepCopy()
	bound.ResourceVersion = "6"
	bound.Status.ClaimRef = &v1alpha1.ClaimReference{Name: "job", UID: "job-uid"}
	e := newPoolEnv(t, warmPool(0), []*v1alpha1.MacOSMachine{cached}, nil, bound)
	e.client.PrependReactor("delete", "macosmachines", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// As the apiserver checks a delete's preconditions.
		if p := a.(k8stesting.DeleteActionImpl).DeleteOptions.Preconditions; p != nil && p.ResourceVersion != nil && *p.ResourceVersion != bound.ResourceVersion {
			return true, nil, apierrors.NewConflict(v1alpha1.Resource("macosmachines"), a.(k8stesting.DeleteAction).GetName(),
				errors.New("the ResourceVersion in the precondition does not match"))
		}
		return false, nil, nil
	})

	require.NoError(t, e.r.ReconcilePool(context.Background(), "ci", "warm"))

	_, err := e.client.DockeriosV1alpha1().MacOSMachines("ci").Get(context.Background(), "warm-a", metav1.GetOptions{})
	assert.NoError(t, err, "the machine bound meanwhile is kept")
	assert.Empty(t, e.r.Recorder.(*record.FakeRecorder).Events, "no Disposed event for a delete that did not happen")
}

// While machines the pool created are not in the cache yet, it deletes
// none to scale down: the excess is theirs, the newest and furthest from
// Ready, and deleting what the cache shows instead would take the Ready
// machine and keep two cold ones.
func TestReconcilePool_ScaleDownWaitsForTheMachinesItCreated(t *testing.T) {
	e := newPoolEnv(t, warmPool(1), []*v1alpha1.MacOSMachine{poolMachine("warm-a", "5", true)}, nil)
	now := time.Now()
	e.r.expect.add("ci/warm", "warm-b", now) // created when replicas were 3
	e.r.expect.add("ci/warm", "warm-c", now)

	err := e.r.ReconcilePool(context.Background(), "ci", "warm")

	assert.Empty(t, e.verbs(), "no machine deleted (nor made) until the cache shows warm-b and warm-c")
	assert.True(t, IsRetry(err), "the pool comes back even should they never show: %v", err)
}

// A bind that fails (here: its claim was deleted meanwhile) leaves its
// machine unbound as far as the pool counts: counting it bound would make
// a superfluous machine, which the next pass would pay for with a Ready
// one.
func TestReconcilePool_AFailedBindLeavesItsMachineUnbound(t *testing.T) {
	claim := &v1alpha1.MacOSMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ci", UID: "job-uid", CreationTimestamp: metav1.Now()},
		Spec:       v1alpha1.MacOSMachineClaimSpec{PoolName: "warm"},
		Status:     v1alpha1.MacOSMachineClaimStatus{Phase: v1alpha1.ClaimPending},
	}
	e := newPoolEnv(t, warmPool(1), []*v1alpha1.MacOSMachine{poolMachine("warm-a", "5", true)}, []*v1alpha1.MacOSMachineClaim{claim})
	binds := 0
	e.client.PrependReactor("create", "macosmachineclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "bind" {
			return false, nil, nil
		}
		binds++
		return true, nil, apierrors.NewNotFound(v1alpha1.Resource("macosmachineclaims"), "job")
	})

	err := e.r.ReconcilePool(context.Background(), "ci", "warm")

	require.Error(t, err, "the failed bind is reported")
	assert.Equal(t, 1, binds)
	assert.Empty(t, e.verbs(), "warm-a is still the pool's one unbound machine: nothing to make")
}

// A class claim whose name a machine not made for it already has (a
// person's, a pool's) cannot get its machine, which is named after it: it
// says so with a Warning Event and makes nothing, while a machine left by
// an earlier claim of the same name is only waited for.
func TestReconcileClassClaim_SaysWhenItsMachineNameIsTaken(t *testing.T) {
	for _, tc := range []struct {
		name      string
		claimUID  string // the label on the existing machine; "" for none
		wantEvent bool
	}{
		{name: "a machine not made for a claim", wantEvent: true},
		{name: "an earlier claim's machine, going", claimUID: "earlier-uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := &v1alpha1.MacOSMachineClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "build1", Namespace: "ci", UID: "build1-uid", CreationTimestamp: metav1.Now()},
				Spec:       v1alpha1.MacOSMachineClaimSpec{ClassName: "standard"},
				Status:     v1alpha1.MacOSMachineClaimStatus{Phase: v1alpha1.ClaimPending},
			}
			other := poolMachine("build1", "5", true)
			other.Labels = map[string]string{}
			if tc.claimUID != "" {
				other.Labels[v1alpha1.ClaimUIDLabel] = tc.claimUID
			}
			e := newPoolEnv(t, warmPool(0), []*v1alpha1.MacOSMachine{other}, []*v1alpha1.MacOSMachineClaim{claim})

			err := e.r.ReconcileClassClaim(context.Background(), "ci", "build1")

			require.Error(t, err, "retried: the name may come free")
			assert.Empty(t, e.verbs(), "no machine made or deleted")
			events := e.r.Recorder.(*record.FakeRecorder).Events
			if !tc.wantEvent {
				assert.Empty(t, events)
				return
			}
			require.Len(t, events, 1)
			assert.Contains(t, <-events, "Warning MachineNameTaken MacOSMachine build1 already exists and was not made for this claim")
		})
	}
}

// A pass that only lost races asks quietly for another; one with a real
// error beside them reports it.
func TestIsRetry(t *testing.T) {
	real := errors.New("creating a machine for pool warm: forbidden")
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"nil":                          {nil, false},
		"a lost race":                  {errRetry, true},
		"lost races joined":            {errors.Join(errRetry, nil, errRetry), true},
		"a lost race, wrapped":         {fmt.Errorf("binding: %w", errRetry), true},
		"a real error":                 {real, false},
		"a real error beside a race":   {errors.Join(errRetry, real), false},
		"nested, a real error in":      {errors.Join(errRetry, errors.Join(errRetry, real)), false},
		"nested, only races":           {errors.Join(errors.Join(errRetry), errRetry), true},
		"wrapped join with a real one": {fmt.Errorf("pass: %w", errors.Join(errRetry, real)), false},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, IsRetry(tc.err))
		})
	}
}

// A machine that failed is replaced, and the pool says so: when a class's
// machines keep failing, the pool's Events show it (aggregated into one),
// not only Events on machines that are gone. A released machine (its claim
// deleted) is disposed of without a word on the pool.
func TestReconcilePool_SaysWhenItReplacesAFailedMachine(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutate    func(*v1alpha1.MacOSMachine)
		wantEvent string
	}{
		{name: "failed", wantEvent: "Warning MachineReplaced replacing MacOSMachine warm-a: it failed: StartTimeout: the agent never reported",
			mutate: func(m *v1alpha1.MacOSMachine) {
				m.Status.Phase = v1alpha1.MachineFailed
				m.Status.Conditions = []metav1.Condition{{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse,
					Reason: "StartTimeout", Message: "the agent never reported"}}
			}},
		{name: "released", mutate: func(m *v1alpha1.MacOSMachine) {
			m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: v1alpha1.MachineReleased, Status: metav1.ConditionTrue, Reason: "ClaimDeleted"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := poolMachine("warm-a", "5", true)
			tc.mutate(m)
			e := newPoolEnv(t, warmPool(0), []*v1alpha1.MacOSMachine{m}, nil, m.DeepCopy())

			require.NoError(t, e.r.ReconcilePool(context.Background(), "ci", "warm"))

			assert.Equal(t, []string{"delete warm-a"}, e.verbs())
			var poolEvents []string
			for events := e.r.Recorder.(*record.FakeRecorder).Events; len(events) > 0; {
				if ev := <-events; !strings.HasPrefix(ev, "Normal Disposed") {
					poolEvents = append(poolEvents, ev)
				}
			}
			if tc.wantEvent == "" {
				assert.Empty(t, poolEvents)
				return
			}
			assert.Equal(t, []string{tc.wantEvent}, poolEvents)
		})
	}
}
