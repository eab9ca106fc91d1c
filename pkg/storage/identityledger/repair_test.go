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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

const indexRoot = "/registry/dockerios.io/identity-index/"

// raw edits etcd behind the ledger's back, as a crash between two
// non-transactional writes or a person with etcdctl would.
type raw struct {
	t          *testing.T
	client     *clientv3.Client
	identities *txn.Resource
	machines   *txn.Resource
}

func newRaw(t *testing.T, e *env) *raw {
	ids, err := txn.NewResource(e.getter, dockerio.Resource("macosidentities"), false, func() runtime.Object { return &dockerio.MacOSIdentity{} })
	require.NoError(t, err)
	ms, err := txn.NewResource(e.getter, dockerio.Resource("macosmachines"), true, func() runtime.Object { return &dockerio.MacOSMachine{} })
	require.NoError(t, err)
	return &raw{t: t, client: e.getter.Server.V3Client.Client, identities: ids, machines: ms}
}

func (r *raw) del(key string) {
	_, err := r.client.Delete(context.Background(), key)
	require.NoError(r.t, err)
}

func (r *raw) delPrefix(prefix string) {
	resp, err := r.client.Delete(context.Background(), prefix, clientv3.WithPrefix())
	require.NoError(r.t, err)
	require.NotZero(r.t, resp.Deleted, "nothing under %s", prefix)
}

func (r *raw) put(key, val string) {
	_, err := r.client.Put(context.Background(), key, val)
	require.NoError(r.t, err)
}

func (r *raw) putObject(res *txn.Resource, key string, obj runtime.Object) {
	data, err := res.Encode(context.Background(), key, obj)
	require.NoError(r.t, err)
	r.put(key, string(data))
}

// setAside removes every key under prefix and returns them, oldest first,
// so that putBack can restore them in the same order.
func (r *raw) setAside(prefix string) []*mvccKV {
	resp, err := r.client.Get(context.Background(), prefix, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	require.NoError(r.t, err)
	var out []*mvccKV
	for _, kv := range resp.Kvs {
		out = append(out, &mvccKV{key: string(kv.Key), value: string(kv.Value)})
	}
	r.delPrefix(prefix)
	return out
}

type mvccKV struct{ key, value string }

func (r *raw) putBack(kvs []*mvccKV) {
	for _, kv := range kvs {
		r.put(kv.key, kv.value)
	}
}

// freeList returns the identities on pool imacpro's free list.
func (r *raw) freeList() []string {
	resp, err := r.client.Get(context.Background(), indexRoot+"pools/imacpro/free/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(r.t, err)
	var names []string
	for _, kv := range resp.Kvs {
		names = append(names, string(kv.Key[strings.LastIndex(string(kv.Key), "/")+1:]))
	}
	return names
}

// recorder keeps each Event with the reference it is about, to check that
// it names the right object (a cluster-scoped one without a namespace).
type recorder struct {
	mu     sync.Mutex
	events []recordedEvent
}

type recordedEvent struct {
	ref                        corev1.ObjectReference
	eventType, reason, message string
}

func (r *recorder) Event(obj runtime.Object, eventType, reason, message string) {
	ev := recordedEvent{eventType: eventType, reason: reason, message: message}
	if ref, ok := obj.(*corev1.ObjectReference); ok {
		ev.ref = *ref
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...interface{}) {
	r.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

func (r *recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, format string, args ...interface{}) {
	r.Eventf(obj, eventType, reason, format, args...)
}

// about returns the Events of reason about the object of kind, namespace and name.
func (r *recorder) about(kind, namespace, name, reason string) []recordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recordedEvent
	for _, ev := range r.events {
		if ev.ref.Kind == kind && ev.ref.Namespace == namespace && ev.ref.Name == name && ev.reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

// newRepairer returns the ledger of another apiserver replica over e's
// etcd, the one that runs the repair here, recording its Events.
func newRepairer(t *testing.T, e *env) (*identityledger.Ledger, *recorder) {
	t.Helper()
	client, err := txn.NewClient(storagebackend.TransportConfig{ServerList: e.getter.Endpoints()})
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	rec := &recorder{}
	l, err := identityledger.New(client, e.getter, identityledger.Options{Recorder: rec})
	require.NoError(t, err)
	return l, rec
}

func quarantine(id *dockerio.MacOSIdentity) *metav1.Condition {
	return meta.FindStatusCondition(id.Status.Conditions, v1alpha1.IdentityQuarantined)
}

func kinds(drifts []identityledger.Drift) []string {
	var out []string
	for _, d := range drifts {
		out = append(out, d.Kind)
	}
	return out
}

// eventAbout is the object a fix's Event must be about.
type eventAbout struct {
	kind, namespace, name string
	eventType, reason     string // default: Warning LedgerRepaired
}

func TestRepair_FindsAndFixesEachKindOfDrift(t *testing.T) {
	pool := eventAbout{kind: "MacOSIdentityPool", name: "imacpro"}
	identity := func(name string) eventAbout { return eventAbout{kind: "MacOSIdentity", name: name} }
	machine := func(name string) eventAbout {
		return eventAbout{kind: "MacOSMachine", namespace: "default", name: name}
	}
	cases := map[string]struct {
		// breakIt edits etcd, given pool imacpro with two identities:
		// id-0001 held by mac-1 and id-0002 free — or, when waiting is
		// set, held by mac-2, with mac-3 waiting.
		breakIt func(t *testing.T, e *env, r *raw)
		want    string
		event   eventAbout
		waiting bool
		passes  int // repairs it takes to be consistent again; 1 unless set
	}{
		"a lost uniqueness key": {
			breakIt: func(t *testing.T, e *env, r *raw) {
				r.del(indexRoot + "values/serialNumber/" + e.identity(t, "id-0001").Spec.SerialNumber)
			},
			want:  identityledger.DriftMissingValueKey,
			event: identity("id-0001"),
		},
		"a uniqueness key naming an identity without that value": {
			breakIt: func(t *testing.T, e *env, r *raw) {
				r.put(indexRoot+"values/serialNumber/"+e.identity(t, "id-0001").Spec.SerialNumber, "id-0002")
			},
			want:  identityledger.DriftMissingValueKey,
			event: identity("id-0001"),
		},
		"a uniqueness key of nobody": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.put(indexRoot+"values/serialNumber/C02ZZZZZZZZZ", "ghost") },
			want:    identityledger.DriftOrphanValueKey,
			event:   identity("ghost"),
		},
		"a lost member key": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.del(indexRoot + "pools/imacpro/members/id-0002") },
			want:    identityledger.DriftMissingMember,
			event:   identity("id-0002"),
		},
		"a member key of nobody": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.put(indexRoot+"pools/imacpro/members/ghost", "") },
			want:    identityledger.DriftOrphanMember,
			event:   pool,
		},
		"a free-list entry for a held identity": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.put(indexRoot+"pools/imacpro/free/00/id-0001", "") },
			want:    identityledger.DriftOrphanFree,
			event:   identity("id-0001"),
		},
		"a free identity lost from the pool": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.delPrefix(indexRoot + "pools/imacpro/free/") },
			want:    identityledger.DriftMissingFree,
			event:   identity("id-0002"),
		},
		"an identity held by a machine deleted behind the ledger's back": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.del(r.machines.Key("default", "mac-1")) },
			want:    identityledger.DriftDanglingHolder,
			event:   identity("id-0001"),
		},
		"a machine whose identity was marked free": {
			breakIt: func(t *testing.T, e *env, r *raw) {
				id := e.identity(t, "id-0001")
				id.Status.Allocation = nil
				id.ResourceVersion = ""
				r.putObject(r.identities, r.identities.Key("", id.Name), id)
			},
			want:  identityledger.DriftMachineRef,
			event: machine("mac-1"),
		},
		"a machine naming an identity that is gone": {
			// It loses the reference, waits, and takes the free id-0002.
			breakIt: func(t *testing.T, e *env, r *raw) { r.del(r.identities.Key("", "id-0001")) },
			want:    identityledger.DriftMachineRef,
			event:   machine("mac-1"),
			passes:  3,
		},
		"a machine that forgot its identity": {
			breakIt: func(t *testing.T, e *env, r *raw) {
				m := e.machine(t, "mac-1")
				m.Status.IdentityRef = nil
				m.ResourceVersion = ""
				r.putObject(r.machines, r.machines.Key("default", m.Name), m)
			},
			want:  identityledger.DriftMachineRef,
			event: machine("mac-1"),
		},
		"a waiting machine lost from the queue": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.delPrefix(indexRoot + "pools/imacpro/pending/") },
			want:    identityledger.DriftMissingWaiting,
			event:   machine("mac-3"),
			waiting: true,
		},
		"a queue entry of nobody": {
			breakIt: func(t *testing.T, e *env, r *raw) {
				r.put(indexRoot+"pools/imacpro/pending/default/ghost", "uid-ghost")
			},
			want:  identityledger.DriftOrphanWaiting,
			event: pool,
		},
		"a machine holding an identity recorded as waiting": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.put(indexRoot+"machines/default/mac-1/waiting-in", "imacpro") },
			want:    identityledger.DriftOrphanWaiting,
			event:   machine("mac-1"),
		},
		"a machine waiting while an identity is free": {
			// The queue is set aside while an identity is added, so it
			// goes onto the free list with mac-3 waiting.
			breakIt: func(t *testing.T, e *env, r *raw) {
				queue := r.setAside(indexRoot + "pools/imacpro/pending/")
				e.addIdentity(t, e.nextIdentity())
				r.putBack(queue)
			},
			want:    identityledger.DriftWaitingWhileFree,
			event:   eventAbout{kind: "MacOSMachine", namespace: "default", name: "mac-3", eventType: corev1.EventTypeNormal, reason: identityledger.ReasonAllocated},
			waiting: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.addIdentity(t, e.nextIdentity())
			e.createMachine(t, "mac-1")
			e.addIdentity(t, e.nextIdentity())
			if tc.waiting {
				e.createMachine(t, "mac-2")
				e.createMachine(t, "mac-3")
			}
			e.assertConsistent(t)

			identityledger.RegisterMetrics()
			before := repairsCounted(t, tc.want)
			tc.breakIt(t, e, newRaw(t, e))

			repairer, events := newRepairer(t, e)
			drifts, err := repairer.Audit(context.Background())
			require.NoError(t, err)
			require.Contains(t, kinds(drifts), tc.want, "audit must find it; found %v", drifts)

			repaired, err := repairer.Repair(context.Background())
			require.NoError(t, err)
			assert.Contains(t, kinds(repaired), tc.want)
			for pass := 1; pass < tc.passes; pass++ {
				_, err := repairer.Repair(context.Background())
				require.NoError(t, err)
			}
			assert.Greater(t, repairsCounted(t, tc.want), before, "each fix is counted")
			e.assertConsistent(t)

			want := tc.event
			if want.reason == "" {
				want.eventType, want.reason = corev1.EventTypeWarning, "LedgerRepaired"
			}
			got := events.about(want.kind, want.namespace, want.name, want.reason)
			require.NotEmpty(t, got, "each fix is told to the object it concerns; recorded %+v", events.events)
			assert.Equal(t, want.eventType, got[0].eventType)
			assert.Equal(t, v1alpha1.SchemeGroupVersion.String(), got[0].ref.APIVersion)
			if want.reason == "LedgerRepaired" {
				assert.True(t, strings.HasPrefix(got[0].message, tc.want+": "), got[0].message)
			}
			if want == pool {
				assert.Equal(t, "seeded-imacpro", string(got[0].ref.UID), "the pool itself, which is cluster-scoped")
			}
		})
	}
}

func TestRepair_QuarantinesIdentitiesSharingAValue(t *testing.T) {
	for name, held := range map[string]bool{"both free": false, "one held by a running machine": true} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			first := e.addIdentity(t, e.nextIdentity())
			if held {
				e.createMachine(t, "mac-1")
			}
			second := e.addIdentity(t, e.nextIdentity())
			r := newRaw(t, e)
			// Someone wrote the second identity with the first's serial,
			// bypassing the apiserver.
			dup := second.DeepCopy()
			dup.Spec.SerialNumber = first.Spec.SerialNumber
			dup.ResourceVersion = ""
			r.putObject(r.identities, r.identities.Key("", dup.Name), dup)

			identityledger.RegisterMetrics()
			before := repairsCounted(t, identityledger.DriftDuplicateValue)
			repairer, events := newRepairer(t, e)
			drifts, err := repairer.Repair(context.Background())
			require.NoError(t, err)
			require.Contains(t, kinds(drifts), identityledger.DriftDuplicateValue)
			assert.Equal(t, before+2, repairsCounted(t, identityledger.DriftDuplicateValue), "one fix per identity")

			for name, other := range map[string]string{first.Name: second.Name, second.Name: first.Name} {
				c := quarantine(e.identity(t, name))
				require.NotNil(t, c, "%s is quarantined", name)
				assert.Equal(t, metav1.ConditionTrue, c.Status)
				assert.Equal(t, identityledger.ReasonDuplicateValue, c.Reason)
				assert.Contains(t, c.Message, "spec.serialNumber is shared with MacOSIdentity "+other)
				assert.NotContains(t, c.Message, first.Spec.SerialNumber, "values are sensitive")
				got := events.about("MacOSIdentity", "", name, identityledger.EventIdentityQuarantined)
				require.Len(t, got, 1, "%s is told", name)
				assert.Equal(t, corev1.EventTypeWarning, got[0].eventType)
				assert.Contains(t, got[0].message, other)
			}
			assert.Empty(t, r.freeList(), "neither is free to take")
			if held {
				assert.Equal(t, "mac-1", e.identity(t, first.Name).Status.Allocation.MachineName, "a running machine keeps its identity")
				assert.Equal(t, first.Name, e.machine(t, "mac-1").Status.IdentityRef.Name)
			}

			// A machine created now gets neither, and a later pass neither
			// gives one to it nor puts one back on the free list.
			assert.Nil(t, e.createMachine(t, "mac-2").Status.IdentityRef)
			drifts, err = repairer.Repair(context.Background())
			require.NoError(t, err)
			assert.Contains(t, kinds(drifts), identityledger.DriftDuplicateValue, "still a person's call")
			assert.Nil(t, e.machine(t, "mac-2").Status.IdentityRef)
			assert.Empty(t, r.freeList())
			assert.Len(t, events.about("MacOSIdentity", "", first.Name, identityledger.DriftDuplicateValue), 1, "a person is reminded")

			if held {
				// Released by its machine, the duplicate does not stay on
				// the free list past the next pass.
				e.deleteMachine(t, "mac-2")
				e.deleteMachine(t, "mac-1")
				_, err = repairer.Repair(context.Background())
				require.NoError(t, err)
				assert.Empty(t, r.freeList())
				id := e.identity(t, first.Name)
				assert.Nil(t, id.Status.Allocation)
				assert.True(t, meta.IsStatusConditionTrue(id.Status.Conditions, v1alpha1.IdentityQuarantined))
			}
		})
	}
}

func TestRepair_LiftsTheQuarantineOnceTheDuplicateIsGone(t *testing.T) {
	e := newEnv(t)
	first := e.addIdentity(t, e.nextIdentity())
	second := e.addIdentity(t, e.nextIdentity())
	r := newRaw(t, e)
	dup := second.DeepCopy()
	dup.Spec.SerialNumber = first.Spec.SerialNumber
	dup.ResourceVersion = ""
	r.putObject(r.identities, r.identities.Key("", dup.Name), dup)
	repairer, events := newRepairer(t, e)
	_, err := repairer.Repair(context.Background())
	require.NoError(t, err)
	require.True(t, meta.IsStatusConditionTrue(e.identity(t, first.Name).Status.Conditions, v1alpha1.IdentityQuarantined))

	// A person decides: the second one goes.
	_, _, err = e.identities.Identity.Delete(e.clusterCtx(), second.Name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)

	drifts, err := repairer.Repair(context.Background())
	require.NoError(t, err)
	assert.Contains(t, kinds(drifts), identityledger.DriftQuarantineResolved)
	c := quarantine(e.identity(t, first.Name))
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, identityledger.ReasonResolved, c.Reason)
	assert.Equal(t, []string{first.Name}, r.freeList(), "free again")
	got := events.about("MacOSIdentity", "", first.Name, identityledger.EventIdentityQuarantineLifted)
	require.Len(t, got, 1)
	assert.Equal(t, corev1.EventTypeNormal, got[0].eventType)
	e.assertConsistent(t)

	m := e.createMachine(t, "mac-1")
	require.NotNil(t, m.Status.IdentityRef)
	assert.Equal(t, first.Name, m.Status.IdentityRef.Name)
}

func TestRepair_GivesFreeIdentitiesToWaitingMachinesOldestFirst(t *testing.T) {
	cases := map[string]struct {
		free int
		want map[string]string // machine → identity
	}{
		"one free identity: the oldest waiting machine": {free: 1, want: map[string]string{"zeta": "id-0001", "alpha": ""}},
		"two free identities: both machines":            {free: 2, want: map[string]string{"zeta": "id-0001", "alpha": "id-0002"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			// zeta waits longer than alpha, though its name sorts after.
			e.createMachine(t, "zeta")
			e.createMachine(t, "alpha")
			r := newRaw(t, e)
			// Hand-offs lost behind the ledger's back: identities added
			// while the queue was set aside went onto the free list.
			queue := r.setAside(indexRoot + "pools/imacpro/pending/")
			for range tc.free {
				e.addIdentity(t, e.nextIdentity())
			}
			r.putBack(queue)
			require.Len(t, r.freeList(), tc.free)

			repairer, events := newRepairer(t, e)
			drifts, err := repairer.Repair(context.Background())
			require.NoError(t, err)
			assert.Contains(t, kinds(drifts), identityledger.DriftWaitingWhileFree)
			for machine, identity := range tc.want {
				m := e.machine(t, machine)
				if identity == "" {
					assert.Nil(t, m.Status.IdentityRef, "%s still waits", machine)
					continue
				}
				require.NotNil(t, m.Status.IdentityRef, "%s took an identity", machine)
				assert.Equal(t, identity, m.Status.IdentityRef.Name)
				c := identityCondition(m)
				assert.Equal(t, metav1.ConditionTrue, c.Status)
				assert.Equal(t, identityledger.ReasonAllocated, c.Reason)
				assert.Equal(t, machine, e.identity(t, identity).Status.Allocation.MachineName)
				assert.Len(t, events.about("MacOSMachine", "default", machine, identityledger.ReasonAllocated), 1)
			}
			assert.Empty(t, r.freeList())
			e.assertConsistent(t)
		})
	}
}

// repairsCounted reads dockerios_identity_ledger_repairs_total{drift=kind}
// from the apiserver's metrics registry.
func repairsCounted(t *testing.T, kind string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "dockerios_identity_ledger_repairs_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "drift" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
