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

// Package identityledger keeps the Apple identity ledger: which identities
// exist, that their values are unique across the fleet, which machine holds
// which identity, and which machines wait for one. Every change to that
// ledger is made in the same etcd transaction as the object write that
// causes it, so there is never a moment — nor a crash — where an identity is
// held twice, lost, or held by a machine that does not know it.
//
// It does this by wrapping the storage.Interface of the machine and
// identity registries: creates and deletes (and a machine's move to Failed)
// go through transactions built here with package txn; every other read and
// write stays with the generic store and its watch cache. The rules are
// those of docs/reference/api.md, rules 1, 2, 3, 9, 10 and 11, on every write path (rule 7).
package identityledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/storage/door"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// maxAttempts bounds how often one write retries after losing a race for an
// identity or a pending machine. Each loss means another write succeeded,
// so reaching it takes sustained contention on a single pool.
const maxAttempts = 1000

// maxDryRunAttempts bounds a dry run's retries. A dry run removes no stale
// entry it meets (a real write does, and moves on), so it could meet the
// same one again and again; losing races this often, it answers the 409 a
// contended real write would.
const maxDryRunAttempts = 10

// attempts is how often a write of ctx tries.
func (l *Ledger) attempts(ctx context.Context) int {
	if door.IsDryRun(ctx) {
		return maxDryRunAttempts
	}
	return maxAttempts
}

// Condition reasons of IdentityAllocated.
const (
	ReasonAllocated     = "Allocated"
	ReasonPoolExhausted = "PoolExhausted"
	ReasonReleased      = "Released"
)

// Ledger keeps the identity ledger of one etcd.
type Ledger struct {
	client     *clientv3.Client
	machines   *txn.Resource
	identities *txn.Resource
	classes    *txn.Resource
	pools      *txn.Resource
	keys       layout

	clock    clock.PassiveClock
	recorder record.EventRecorder

	randMu sync.Mutex
	rand   *rand.Rand

	// classView remembers, while a watch says it holds, the pool each
	// class draws from (see RunClassView).
	classView classView

	claims Claims

	// free is this apiserver's view of the free lists (see RunFreeView).
	free freeView
}

// Options are a Ledger's collaborators. Clock and Rand default to the real
// clock and a randomly seeded source; Recorder defaults to one that drops events.
type Options struct {
	Clock    clock.PassiveClock
	Recorder record.EventRecorder
	Rand     *rand.Rand
	// Claims, when set, is what the ledger's machine writes owe the claims
	// of the machines' pools (package binding): they are written in the
	// same transaction.
	Claims Claims
}

// Claims is what a machine's writes owe the claims bound to it or waiting
// for a machine of its pool.
type Claims interface {
	// MachineGone adds to tx, which deletes m or marks it for deletion,
	// that m's claim becomes Lost.
	MachineGone(ctx context.Context, tx *txn.Txn, m *dockerio.MacOSMachine) error
	// TouchesClaims says whether a write of a machine from old to updated
	// (nil: deleted) must go through SettleMachine.
	TouchesClaims(old, updated *dockerio.MacOSMachine) bool
	// SettleMachine adds to tx, which writes a machine from old to updated
	// (nil: deleted) conditioned on old being what is stored, what the
	// claims of its pool are owed — a waiting claim may be bound to it —
	// and returns the machine to write, and what to report once tx is
	// committed.
	SettleMachine(ctx context.Context, tx *txn.Txn, old, updated *dockerio.MacOSMachine) (*dockerio.MacOSMachine, func(), error)
}

// New returns the ledger of the etcd client talks to, with objects laid out
// and encoded as optsGetter says, as the registries' generic stores do.
func New(client *clientv3.Client, optsGetter generic.RESTOptionsGetter, o Options) (*Ledger, error) {
	l := &Ledger{client: client, clock: o.Clock, recorder: o.Recorder, rand: o.Rand, claims: o.Claims}
	var err error
	if l.machines, err = txn.NewResource(optsGetter, dockerio.Resource("macosmachines"), true, func() runtime.Object { return &dockerio.MacOSMachine{} }); err != nil {
		return nil, err
	}
	if l.identities, err = txn.NewResource(optsGetter, dockerio.Resource("macosidentities"), false, func() runtime.Object { return &dockerio.MacOSIdentity{} }); err != nil {
		return nil, err
	}
	if l.classes, err = txn.NewResource(optsGetter, dockerio.Resource("macosmachineclasses"), false, func() runtime.Object { return &dockerio.MacOSMachineClass{} }); err != nil {
		return nil, err
	}
	if l.pools, err = txn.NewResource(optsGetter, dockerio.Resource("macosidentitypools"), false, func() runtime.Object { return &dockerio.MacOSIdentityPool{} }); err != nil {
		return nil, err
	}
	l.keys = newLayout(l.identities.StoragePrefix())
	if l.clock == nil {
		l.clock = clock.RealClock{}
	}
	if l.recorder == nil {
		l.recorder = &record.FakeRecorder{}
	}
	if l.rand == nil {
		l.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return l, nil
}

func (l *Ledger) randomIntN(n int) int {
	l.randMu.Lock()
	defer l.randMu.Unlock()
	return l.rand.IntN(n)
}

func (l *Ledger) randomBucket() string {
	l.randMu.Lock()
	defer l.randMu.Unlock()
	return fmt.Sprintf("%03x", l.rand.IntN(1<<(4*bucketDigits)))
}

// binding is what a machine's create needs from its class: the pool it
// draws from, the class's spec the machine is made from (its snapshot),
// the revision at which the class was last written and the one at which
// the pool was created, so a transaction can require that they are still
// the ones read.
type binding struct {
	pool              string
	classKey, poolKey string
	classMod          int64
	poolCreated       int64
	snapshot          *dockerio.ClassSnapshot
}

// require adds to tx that class and pool are still those of b: the class
// unchanged since it was read, so that the snapshot a machine records is
// the class as it is when the machine is created, never an earlier one.
func (b *binding) require(tx *txn.Txn) {
	tx.IfUnchanged(b.classKey, b.classMod).IfCreatedAt(b.poolKey, b.poolCreated)
}

// stale says whether the class was written or the pool replaced since b
// was read. It is asked only after a transaction failed, so the extra read
// is rare.
func (b *binding) stale(ctx context.Context, client *clientv3.Client) (bool, error) {
	resp, err := client.Txn(ctx).Then(clientv3.OpGet(b.classKey, clientv3.WithKeysOnly()), clientv3.OpGet(b.poolKey, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return false, err
	}
	kv := func(i int) *mvccpb.KeyValue {
		if kvs := resp.Responses[i].GetResponseRange().GetKvs(); len(kvs) == 1 {
			return kvs[0]
		}
		return &mvccpb.KeyValue{}
	}
	return kv(0).ModRevision != b.classMod || kv(1).CreateRevision != b.poolCreated, nil
}

// bindingOf returns the pool m draws from: its class's. The answer is
// remembered while the class view says it holds; the create transaction
// checks that class and pool were not replaced since, and refresh reads
// them anew. A machine whose class or pool does not exist is refused, with
// the field to fix.
func (l *Ledger) bindingOf(ctx context.Context, m *dockerio.MacOSMachine, refresh bool) (*binding, error) {
	return l.classBinding(ctx, dockerio.Kind("MacOSMachine"), m.Name, m.Spec.ClassName, refresh)
}

// IdentityPoolOf returns the MacOSIdentityPool the class className draws
// identities from, for an object (of kind, named name) that names the
// class: a machine, a pool or a claim. A class or pool that does not exist,
// or that disagree, is that object's 422 at spec.className. The answer
// follows the class: one remembered from before the class was deleted or
// recreated is never given.
func (l *Ledger) IdentityPoolOf(ctx context.Context, kind schema.GroupKind, name, className string) (string, error) {
	b, err := l.classBinding(ctx, kind, name, className, false)
	if err != nil {
		return "", err
	}
	return b.pool, nil
}

func (l *Ledger) classBinding(ctx context.Context, kind schema.GroupKind, name, className string, refresh bool) (*binding, error) {
	if refresh {
		l.classView.forget(className)
	} else if b, ok := l.classView.get(className); ok {
		return b, nil
	}
	token := l.classView.token(className)
	classField := field.NewPath("spec", "className")
	classKey := l.classes.Key("", className)
	obj, classRevs, err := l.classes.Read(ctx, l.client, classKey)
	if storage.IsNotFound(err) {
		return nil, apierrors.NewInvalid(kind, name, field.ErrorList{
			field.NotFound(classField, className)})
	}
	if err != nil {
		return nil, err
	}
	class := obj.(*dockerio.MacOSMachineClass)
	poolName := class.Spec.IdentityPoolName
	poolKey := l.pools.Key("", poolName)
	poolObj, poolRevs, err := l.pools.Read(ctx, l.client, poolKey)
	if storage.IsNotFound(err) {
		return nil, apierrors.NewInvalid(kind, name, field.ErrorList{
			field.Invalid(classField, className, fmt.Sprintf("the class draws identities from MacOSIdentityPool %q, which does not exist", poolName))})
	}
	if err != nil {
		return nil, err
	}
	// Both models are immutable, so a binding that passed this once passes
	// it for as long as class and pool are these ones.
	if model := poolObj.(*dockerio.MacOSIdentityPool).Spec.Model; model != class.Spec.SMBIOSModel {
		return nil, apierrors.NewInvalid(kind, name, field.ErrorList{
			field.Invalid(classField, className, fmt.Sprintf("the class's SMBIOS model %s differs from %s, the model of its MacOSIdentityPool %q", class.Spec.SMBIOSModel, model, poolName))})
	}
	b := &binding{pool: poolName, classKey: classKey, poolKey: poolKey, classMod: classRevs.Mod, poolCreated: poolRevs.Create,
		snapshot: &dockerio.ClassSnapshot{Generation: class.Generation, Spec: *class.Spec.DeepCopy()}}
	l.classView.put(className, b, token)
	return b, nil
}

// freeIdentity is a free-list entry.
type freeIdentity struct {
	key      string
	rev      int64
	identity string
}

// pickFree returns a free identity of pool, or nil when there is none.
//
// It looks in a random bucket, so that concurrent allocations spread out
// instead of racing for the same identity. etcd counts every key of a range
// it reads, even with a limit, so each read is kept narrow: first one bucket
// (1/4096 of the free list), then, if that is empty, the 256 buckets
// sharing its first digit (1/16), then the whole list. A wider read
// happens only when the narrower one found nothing, that is when the free
// list is short: the cost of an allocation follows the free list's density,
// not the pool's size.
//
// With fromView, the apiserver's own view of the free lists is asked first,
// which costs nothing; it may be behind, which costs the caller a retry.
func (l *Ledger) pickFree(ctx context.Context, pool string, fromView bool) (*freeIdentity, error) {
	if fromView {
		if free, ok := l.free.pick(pool, l.randomIntN); ok {
			return free, nil
		}
	}
	prefix := l.keys.freePrefix(pool)
	b := l.randomBucket()
	for _, scope := range []string{prefix + b + "/", prefix + b[:1], prefix} {
		// Serializable: a stale entry is caught by the allocation's conditions.
		resp, err := l.client.Get(ctx, scope, clientv3.WithPrefix(), clientv3.WithLimit(1), clientv3.WithSerializable())
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) == 1 {
			key := string(resp.Kvs[0].Key)
			return &freeIdentity{key: key, rev: resp.Kvs[0].ModRevision, identity: key[len(prefix)+bucketDigits+1:]}, nil
		}
	}
	return nil, nil
}

// waitingMachine is the oldest machine waiting for an identity of a pool.
type waitingMachine struct {
	pendingKey string
	pendingRev int64
	machine    *dockerio.MacOSMachine
	machineRev int64
}

// oldestWaiting returns the machine that has waited longest for an identity
// of pool, or nil. Entries of machines that are gone, or being deleted (a
// machine being torn down no longer needs an identity), are dropped on the
// way — except in a dry run, which writes nothing and steps over them.
func (l *Ledger) oldestWaiting(ctx context.Context, pool string) (*waitingMachine, error) {
	dryRun := door.IsDryRun(ctx)
	prefix := l.keys.pendingPrefix(pool)
	var limit int64 = 1
	for {
		resp, err := l.client.Get(ctx, prefix, clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(limit))
		if err != nil {
			return nil, err
		}
		stale := 0
		for _, kv := range resp.Kvs {
			key := string(kv.Key)
			ns, name := splitNamespaced(key[len(prefix):])
			obj, rev, err := l.machines.Get(ctx, l.client, l.machines.Key(ns, name))
			if err != nil && !storage.IsNotFound(err) {
				return nil, err
			}
			if err == nil {
				m := obj.(*dockerio.MacOSMachine)
				if string(m.UID) == string(kv.Value) && m.Status.IdentityRef == nil && m.DeletionTimestamp == nil {
					return &waitingMachine{pendingKey: key, pendingRev: kv.ModRevision, machine: m, machineRev: rev}, nil
				}
			}
			// A stale entry: its machine was replaced, already holds an
			// identity or is being deleted. Drop it (if nobody changed it
			// meanwhile).
			stale++
			if dryRun {
				continue
			}
			var tx txn.Txn
			tx.IfUnchanged(key, kv.ModRevision).Delete(key).Delete(l.keys.waiting(ns, name))
			if _, err := txn.Commit(ctx, l.client, &tx); err != nil {
				return nil, err
			}
		}
		if !resp.More {
			return nil, nil
		}
		if dryRun {
			// Read past the stale entries this time.
			limit += int64(stale) + 1
		}
	}
}

func splitNamespaced(s string) (namespace, name string) {
	namespace, name, _ = strings.Cut(s, "/")
	return namespace, name
}

// allocatedTo returns a copy of m that holds identity id.
func (l *Ledger) allocatedTo(m *dockerio.MacOSMachine, id *dockerio.MacOSIdentity) *dockerio.MacOSMachine {
	m = m.DeepCopy()
	m.Status.IdentityRef = &dockerio.LocalObjectReference{Name: id.Name}
	l.setIdentityCondition(m, metav1.ConditionTrue, ReasonAllocated,
		fmt.Sprintf("holds MacOSIdentity %s from pool %s", id.Name, id.Spec.PoolName))
	return m
}

// holding returns a copy of id held by m.
func (l *Ledger) holding(id *dockerio.MacOSIdentity, m *dockerio.MacOSMachine) *dockerio.MacOSIdentity {
	id = id.DeepCopy()
	now := metav1.NewTime(l.clock.Now())
	id.Status.Allocation = &dockerio.IdentityAllocation{
		MachineNamespace: m.Namespace, MachineName: m.Name, MachineUID: string(m.UID), AllocatedTime: &now,
	}
	return id
}

func (l *Ledger) setIdentityCondition(m *dockerio.MacOSMachine, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
		Type: v1alpha1.MachineIdentityAllocated, Status: status, Reason: reason, Message: message,
		ObservedGeneration: m.Generation, LastTransitionTime: metav1.NewTime(l.clock.Now()),
	})
}

func (l *Ledger) event(obj metav1.Object, kind, eventType, reason, format string, args ...interface{}) {
	ref := &corev1.ObjectReference{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: kind,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
	}
	l.recorder.Eventf(ref, eventType, reason, format, args...)
}

// contended is the answer when a write lost its race maxAttempts times: a
// 409, which clients retry, saying why.
func contended(resource, name, pool string) error {
	return apierrors.NewConflict(dockerio.Resource(resource), name,
		fmt.Errorf("too many concurrent writes raced for the identities of pool %s; retry", pool))
}

// DefaultWatchCacheSizes is the apiserver's default --watch-cache-sizes: no
// watch cache of identities. Identities are many (a fleet's whole stock,
// 100,000 and more), rarely listed, and read by the ledger one at a time:
// a watch cache would hold every one decoded, with its field index and
// copy-on-write snapshots, several KiB each. The ledger reads them from
// etcd instead, and its free-list view keeps allocation free of scans.
var DefaultWatchCacheSizes = []string{"macosidentities.dockerios.io#0"}

// WatchCached says whether the apiserver, by DefaultWatchCacheSizes, keeps
// a watch cache of gr; stores built for tests and benchmarks follow it.
func WatchCached(gr schema.GroupResource) bool {
	return gr != dockerio.Resource("macosidentities")
}
