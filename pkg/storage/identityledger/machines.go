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

package identityledger

import (
	"context"
	"fmt"
	"path"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/storage/door"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// AuthorizeFunc says whether the user of ctx may have m draw identities
// from pool (the verb use on it): nil, or the 403 to answer.
type AuthorizeFunc func(ctx context.Context, m *dockerio.MacOSMachine, pool string) error

// MachineStorage wraps the storage of MacOSMachines so that a machine takes
// an identity in the transaction that creates it, and gives it back in the
// transaction that deletes it or marks it Failed — whichever REST path
// creates, updates or deletes it (see package door). authorize is asked,
// for every create, about the pool the transaction draws from.
func (l *Ledger) MachineStorage(inner storage.Interface, authorize AuthorizeFunc) storage.Interface {
	return &machineStorage{Interface: inner, l: l, authorize: authorize}
}

type machineStorage struct {
	storage.Interface
	l         *Ledger
	authorize AuthorizeFunc
}

var _ door.Storage = &machineStorage{}

// AnswersDryRuns: every write here honours door.WithDryRun.
func (s *machineStorage) AnswersDryRuns() {}

// Create writes a new machine holding a free identity of its class's pool
// or, when none is free, waiting for one — never without a record of which.
// The user must be allowed to use the pool the transaction draws from: the
// check is made against the very class and pool the transaction requires
// unchanged, so a class recreated meanwhile is checked anew.
func (s *machineStorage) Create(ctx context.Context, key string, obj, out runtime.Object, _ uint64) error {
	l := s.l
	m, ok := obj.(*dockerio.MacOSMachine)
	if !ok {
		return fmt.Errorf("not a MacOSMachine: %T", obj)
	}
	if m.ResourceVersion != "" {
		return storage.ErrResourceVersionSetOnCreate
	}
	mKey, err := l.machines.EtcdKey(key)
	if err != nil {
		return err
	}
	b, err := l.bindingOf(ctx, m, false)
	if err != nil {
		return err
	}
	m = m.DeepCopy()
	authorized := ""
	for attempt := range l.attempts(ctx) {
		// The machine is made from its class as the transaction requires
		// it to be (rule 10): later edits of the class do not reach it.
		m.Status.ClassSnapshot = b.snapshot.DeepCopy()
		if b.pool != authorized && s.authorize != nil {
			if err := s.authorize(ctx, m, b.pool); err != nil {
				return err
			}
			authorized = b.pool
		}
		// The first attempt uses hints (this apiserver's view of the free
		// list, a serializable read); after a race, linearizable reads.
		free, err := l.pickFree(ctx, b.pool, attempt == 0)
		if err != nil {
			return err
		}
		var res outcome
		if free == nil {
			res, err = s.createWaiting(ctx, key, mKey, m, b, out)
		} else {
			res, err = s.createHolding(ctx, key, mKey, m, free, b, attempt == 0, out)
		}
		switch {
		case err != nil || res == done:
			return err
		case res == classChanged:
			// The class or pool was replaced since it was read: read it
			// again (it may be gone now, which is the caller's 422).
			if b, err = l.bindingOf(ctx, m, true); err != nil {
				return err
			}
		}
	}
	return contended("macosmachines", m.Name, b.pool)
}

// outcome of one attempt at a conditional write.
type outcome int

const (
	done         outcome = iota // written, or refused for good
	raced                       // another write changed what the attempt read; try again
	classChanged                // the machine's class or pool was replaced; read it again
)

// failed says why a create's transaction did not apply.
func (l *Ledger) failed(ctx context.Context, key, mKey string, b *binding, res txn.Result) (outcome, error) {
	if _, exists := res.Found[mKey]; exists {
		return done, storage.NewKeyExistsError(key, 0)
	}
	stale, err := b.stale(ctx, l.client)
	if err != nil {
		return done, err
	}
	if stale {
		return classChanged, nil
	}
	return raced, nil
}

// createHolding tries to create m holding the free identity.
func (s *machineStorage) createHolding(ctx context.Context, key, mKey string, m *dockerio.MacOSMachine, free *freeIdentity, b *binding, hint bool, out runtime.Object) (outcome, error) {
	l := s.l
	idKey := l.identities.Key("", free.identity)
	obj, idRev, err := l.readIdentity(ctx, free.identity, hint)
	if err != nil && !storage.IsNotFound(err) {
		return done, err
	}
	if err != nil || !allocatable(obj.(*dockerio.MacOSIdentity)) {
		if hint {
			// The view or the serializable read is behind: look again,
			// linearizably.
			l.free.forget(b.pool, free.key)
			return raced, nil
		}
		// The free-list entry outlived its identity (only possible after
		// a manual etcd edit): drop it — if neither it nor the identity
		// changed since they were read, so that a read that was merely
		// behind never costs the pool a free identity.
		var tx txn.Txn
		tx.IfUnchanged(free.key, free.rev)
		if err != nil {
			tx.IfAbsent(idKey)
		} else {
			tx.IfUnchanged(idKey, idRev)
		}
		tx.Delete(free.key)
		_, err := txn.Commit(ctx, l.client, &tx)
		return raced, err
	}
	id := obj.(*dockerio.MacOSIdentity)

	var tx txn.Txn
	tx.IfAbsent(mKey).IfUnchanged(free.key, free.rev).IfUnchanged(idKey, idRev).ReadOnFailure(mKey)
	b.require(&tx)
	written, err := tx.PutObject(ctx, l.machines, mKey, l.allocatedTo(m, id))
	if err != nil {
		return done, err
	}
	if err := tx.WriteObject(ctx, l.identities, idKey, l.holding(id, m)); err != nil {
		return done, err
	}
	tx.Delete(free.key)
	res, err := txn.Commit(ctx, l.client, &tx)
	if err != nil {
		return done, err
	}
	dryRun := door.IsDryRun(ctx)
	if !dryRun {
		l.free.forget(b.pool, free.key) // taken now, by us or by someone faster
	}
	if !res.Succeeded {
		return l.failed(ctx, key, mKey, b, res)
	}
	if !dryRun {
		metricAllocations.WithLabelValues("atCreate").Inc()
	}
	return done, written.Into(out, res.Revision)
}

// allocatable says whether a free-list entry's identity may be given to a
// machine: it is free and not withheld.
func allocatable(id *dockerio.MacOSIdentity) bool {
	return id.Status.Allocation == nil && !withheld(id)
}

// withheld says whether an identity is given to no machine, held or not: a
// duplicate (quarantined) until a person resolves it, one a VM unknown to
// the ledger runs with, or one marked for deletion, which is going away.
func withheld(id *dockerio.MacOSIdentity) bool {
	return isQuarantined(id) || heldOutsideLedger(id) || id.DeletionTimestamp != nil
}

// readIdentity reads an identity and the revision it was last written at.
// As a hint (the first attempt at an allocation) it is a serializable read:
// etcd answers from its own state without a consensus round, and the
// allocation transaction requires the identity unchanged since, so a stale
// answer only costs a retry. Otherwise it is a linearizable read.
//
// Identities are not read from a watch cache: the apiserver keeps none of
// them (see cmd/apiserver), since a fleet's whole stock of identities,
// decoded and indexed, would cost far more memory than this read costs time.
func (l *Ledger) readIdentity(ctx context.Context, name string, hint bool) (runtime.Object, int64, error) {
	if hint {
		return l.identities.Get(ctx, l.client, l.identities.Key("", name), clientv3.WithSerializable())
	}
	return l.identities.Get(ctx, l.client, l.identities.Key("", name))
}

// createWaiting tries to create m waiting for an identity of its pool; it
// races when an identity became free meanwhile, which m should then take.
func (s *machineStorage) createWaiting(ctx context.Context, key, mKey string, m *dockerio.MacOSMachine, b *binding, out runtime.Object) (outcome, error) {
	l := s.l
	pool := b.pool
	waiting := m.DeepCopy()
	l.setIdentityCondition(waiting, metav1.ConditionFalse, ReasonPoolExhausted,
		fmt.Sprintf("MacOSIdentityPool %s has no free identity; the machine takes the next one freed or added, oldest waiting machine first", pool))

	var tx txn.Txn
	tx.IfAbsent(mKey).IfNothingUnder(l.keys.freePrefix(pool)).ReadOnFailure(mKey)
	b.require(&tx)
	written, err := tx.PutObject(ctx, l.machines, mKey, waiting)
	if err != nil {
		return done, err
	}
	tx.Put(l.keys.pending(pool, m.Namespace, m.Name), string(m.UID)).Put(l.keys.waiting(m.Namespace, m.Name), pool)
	res, err := txn.Commit(ctx, l.client, &tx)
	if err != nil {
		return done, err
	}
	if !res.Succeeded {
		return l.failed(ctx, key, mKey, b, res)
	}
	if err := written.Into(out, res.Revision); err != nil {
		return done, err
	}
	if door.IsDryRun(ctx) {
		return done, nil
	}
	metricAllocations.WithLabelValues("waiting").Inc()
	l.event(waiting, "MacOSMachine", corev1.EventTypeWarning, ReasonPoolExhausted,
		"MacOSIdentityPool %s has no free identity; the machine waits for the next one freed or added", pool)
	return done, nil
}

// Delete removes a machine and, in the same transaction, gives its identity
// to the machine that has waited longest for one of that pool, or back to
// the pool. A waiting machine stops waiting. The claim bound to it learns
// it is Lost in that same transaction.
func (s *machineStorage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	l := s.l
	if opts.ExpectTransformOrDecodeError {
		// An object etcd holds but nobody can decode (see
		// IgnoreStoreReadErrorWithClusterBreakingPotential): its identity
		// cannot be read from it, so the store deletes it as it would any
		// corrupt object, and the repair audit gives back what it held.
		return s.Interface.Delete(ctx, key, out, preconditions, validateDeletion, cachedExistingObject, opts)
	}
	mKey, err := l.machines.EtcdKey(key)
	if err != nil {
		return err
	}
	for range l.attempts(ctx) {
		obj, rev, err := l.machines.Get(ctx, l.client, mKey)
		if err != nil {
			return err
		}
		m := obj.(*dockerio.MacOSMachine)
		if err := preconditions.Check(key, m); err != nil {
			return err
		}
		if err := validateDeletion(ctx, m); err != nil {
			return err
		}
		var tx txn.Txn
		tx.IfUnchanged(mKey, rev).Delete(mKey)
		handoff, err := l.release(ctx, &tx, m)
		if err != nil {
			return err
		}
		report, err := l.settleClaims(ctx, &tx, m, nil)
		if err != nil {
			return err
		}
		res, err := txn.Commit(ctx, l.client, &tx)
		if err != nil {
			return err
		}
		if !res.Succeeded {
			continue
		}
		if door.IsDryRun(ctx) {
			// As the generic store's dry run: the object as it is.
			return copyInto(out, m)
		}
		handoff.announce(l)
		report()
		metricReleases.WithLabelValues("delete").Inc()
		// Like the etcd3 store, answer with the deleted object at the
		// revision of its deletion.
		if err := (storage.APIObjectVersioner{}).UpdateObject(m, uint64(res.Revision)); err != nil {
			return err
		}
		return copyInto(out, m)
	}
	return contended("macosmachines", nameOf(key), "")
}

// GuaranteedUpdate lets the generic store make every update, except two:
// a create (server-side apply of a new machine) goes to Create, so it
// allocates exactly as a POST does; and the move to Failed is made here,
// because a failed machine gives back what it holds (rule 3) in that same
// transaction.
func (s *machineStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	return door.Updater{
		Inner:     s.Interface,
		Create:    s.Create,
		Intercept: s.intercept,
		Copy:      s.l.machines.Copy,
	}.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject)
}

// intercept takes over the updates that must write more than the machine.
func (s *machineStorage) intercept(input, output runtime.Object, rev int64) func(context.Context, runtime.Object) (bool, error) {
	if f := s.interceptFailing(input, output, rev); f != nil {
		return f
	}
	if f := s.interceptLosingClaim(output, rev); f != nil {
		return f
	}
	return s.interceptSettlingClaims(input, output, rev)
}

// settleClaims adds to tx, which writes a machine from old to updated (nil:
// deleted), what the write owes the claims: a claim bound to a machine
// being deleted is Lost, and a machine that becomes free is bound to the
// oldest claim of its pool waiting for one (package binding). It returns
// what to report once tx is committed.
func (l *Ledger) settleClaims(ctx context.Context, tx *txn.Txn, old, updated *dockerio.MacOSMachine) (func(), error) {
	if l.claims == nil {
		return func() {}, nil
	}
	if updated == nil {
		if err := l.claims.MachineGone(ctx, tx, old); err != nil {
			return nil, err
		}
	}
	_, report, err := l.claims.SettleMachine(ctx, tx, old, updated)
	return report, err
}

// interceptSettlingClaims takes over the updates that change what a claim
// could take — a machine becoming Ready and unbound, or no longer; the
// labels of a free machine — so that a claim waiting for a machine of the
// pool is bound in the write that frees one (rule 8), whoever makes it: the
// controller, a person with kubectl, or the garbage collector.
func (s *machineStorage) interceptSettlingClaims(input, output runtime.Object, rev int64) func(context.Context, runtime.Object) (bool, error) {
	old, ok1 := input.(*dockerio.MacOSMachine)
	updated, ok2 := output.(*dockerio.MacOSMachine)
	l := s.l
	if !ok1 || !ok2 || l.claims == nil || !l.claims.TouchesClaims(old, updated) {
		return nil
	}
	return func(ctx context.Context, destination runtime.Object) (bool, error) {
		mKey := l.machines.Key(updated.Namespace, updated.Name)
		var tx txn.Txn
		tx.IfUnchanged(mKey, rev)
		write, report, err := l.claims.SettleMachine(ctx, &tx, old, updated)
		if err != nil {
			return false, err
		}
		written, err := tx.PutObject(ctx, l.machines, mKey, write)
		if err != nil {
			return false, err
		}
		res, err := txn.Commit(ctx, l.client, &tx)
		if err != nil || !res.Succeeded {
			return false, err
		}
		if door.IsDryRun(ctx) {
			return true, written.Into(destination, rev)
		}
		report()
		return true, written.Into(destination, res.Revision)
	}
}

// interceptLosingClaim takes over the updates of a bound machine marked
// for deletion: its claim learns it is Lost in the write that starts the
// teardown (the first of them), not when the machine is finally gone —
// the workload must not go on using a Mac that is being taken apart. It
// cannot tell the marking update from later ones by the object read (the
// generic store marks that object in place); for the later ones the claim
// is already Lost and nothing more is written.
func (s *machineStorage) interceptLosingClaim(output runtime.Object, rev int64) func(context.Context, runtime.Object) (bool, error) {
	updated, ok := output.(*dockerio.MacOSMachine)
	l := s.l
	if !ok || updated.DeletionTimestamp == nil || updated.Status.ClaimRef == nil || l.claims == nil {
		return nil
	}
	return func(ctx context.Context, destination runtime.Object) (bool, error) {
		mKey := l.machines.Key(updated.Namespace, updated.Name)
		var tx txn.Txn
		tx.IfUnchanged(mKey, rev)
		written, err := tx.PutObject(ctx, l.machines, mKey, updated)
		if err != nil {
			return false, err
		}
		if err := l.claims.MachineGone(ctx, &tx, updated); err != nil {
			return false, err
		}
		res, err := txn.Commit(ctx, l.client, &tx)
		if err != nil || !res.Succeeded {
			return false, err
		}
		if door.IsDryRun(ctx) {
			return true, written.Into(destination, rev)
		}
		return true, written.Into(destination, res.Revision)
	}
}

// interceptFailing takes over the updates after which a failed machine
// holds nothing: the move to Failed, and the lifting of a failed machine's
// fence. A machine whose VM may still run (condition IdentityFenced True,
// rule 9) keeps its identity when it fails, and gives it back in the
// write that says its VM is confirmed gone, or when it is deleted. Only a
// held identity can be fenced: a machine failing while it waits for one
// always stops waiting.
func (s *machineStorage) interceptFailing(input, output runtime.Object, rev int64) func(context.Context, runtime.Object) (bool, error) {
	old, ok1 := input.(*dockerio.MacOSMachine)
	updated, ok2 := output.(*dockerio.MacOSMachine)
	if !ok1 || !ok2 || updated.Status.Phase != dockerio.MachineFailed {
		return nil
	}
	holds := old.Status.IdentityRef != nil
	switch {
	case holds && Fenced(updated):
		return nil
	case old.Status.Phase == dockerio.MachineFailed && !holds:
		return nil
	}
	f := &failTransition{old: old, updated: updated, rev: rev}
	return func(ctx context.Context, destination runtime.Object) (bool, error) {
		return s.failAndRelease(ctx, s.l.machines.Key(old.Namespace, old.Name), f, destination)
	}
}

type failTransition struct {
	old, updated *dockerio.MacOSMachine
	rev          int64
}

// Fenced says whether a machine's identity is fenced: its VM may still run,
// so the identity stays held even though the machine failed.
func Fenced(m *dockerio.MacOSMachine) bool {
	return meta.IsStatusConditionTrue(m.Status.Conditions, dockerio.MachineIdentityFenced)
}

// failAndRelease writes the Failed machine without its identity and releases
// the identity, if the machine is still as the update saw it.
func (s *machineStorage) failAndRelease(ctx context.Context, mKey string, f *failTransition, destination runtime.Object) (bool, error) {
	l := s.l
	failed := f.updated.DeepCopy()
	if ref := f.old.Status.IdentityRef; ref != nil && f.old.Status.Phase == dockerio.MachineFailed {
		l.setIdentityCondition(failed, metav1.ConditionFalse, ReasonReleased,
			fmt.Sprintf("MacOSIdentity %s was given back once the failed machine's VM was confirmed gone", ref.Name))
	} else if ref != nil {
		l.setIdentityCondition(failed, metav1.ConditionFalse, ReasonReleased,
			fmt.Sprintf("MacOSIdentity %s was given back when the machine failed", ref.Name))
	} else {
		l.setIdentityCondition(failed, metav1.ConditionFalse, ReasonReleased, "the machine failed and no longer waits for an identity")
	}
	failed.Status.IdentityRef = nil

	var tx txn.Txn
	tx.IfUnchanged(mKey, f.rev)
	written, err := tx.PutObject(ctx, l.machines, mKey, failed)
	if err != nil {
		return false, err
	}
	// A Failed machine is never free: if it was, it leaves the index.
	if _, err := l.settleClaims(ctx, &tx, f.old, failed); err != nil {
		return false, err
	}
	handoff, err := l.release(ctx, &tx, f.old)
	if err != nil {
		return false, err
	}
	res, err := txn.Commit(ctx, l.client, &tx)
	if err != nil || !res.Succeeded {
		return false, err
	}
	if door.IsDryRun(ctx) {
		// As the generic store's dry-run update: the resourceVersion read.
		return true, written.Into(destination, f.rev)
	}
	handoff.announce(l)
	metricReleases.WithLabelValues("failed").Inc()
	return true, written.Into(destination, res.Revision)
}

// handoff says what a release did, to report once it is committed.
type handoff struct {
	identity *dockerio.MacOSIdentity
	to       *dockerio.MacOSMachine
}

func (h *handoff) announce(l *Ledger) {
	if h == nil || h.to == nil {
		return
	}
	metricAllocations.WithLabelValues("handedOver").Inc()
	l.event(h.to, "MacOSMachine", corev1.EventTypeNormal, ReasonAllocated,
		"took MacOSIdentity %s, which was given back to pool %s", h.identity.Name, h.identity.Spec.PoolName)
}

// release adds to tx what giving back m's identity takes: the identity goes
// to the oldest machine waiting in its pool, or onto the free list; a
// waiting m stops waiting. The caller adds the write of m itself.
func (l *Ledger) release(ctx context.Context, tx *txn.Txn, m *dockerio.MacOSMachine) (*handoff, error) {
	ref := m.Status.IdentityRef
	if ref == nil {
		waitingKey := l.keys.waiting(m.Namespace, m.Name)
		resp, err := l.client.Get(ctx, waitingKey)
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) == 1 {
			pool := string(resp.Kvs[0].Value)
			tx.Delete(waitingKey).Delete(l.keys.pending(pool, m.Namespace, m.Name))
		}
		return nil, nil
	}
	idKey := l.identities.Key("", ref.Name)
	obj, idRev, err := l.identities.Get(ctx, l.client, idKey)
	if storage.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	id := obj.(*dockerio.MacOSIdentity)
	if a := id.Status.Allocation; a == nil || a.MachineUID != string(m.UID) {
		// The ledger says someone else holds it: nothing of ours to give.
		return nil, nil
	}
	tx.IfUnchanged(idKey, idRev)
	if withheld(id) {
		// Released, but neither onto the free list nor to a waiting
		// machine.
		released := id.DeepCopy()
		released.Status.Allocation = nil
		err := tx.WriteObject(ctx, l.identities, idKey, released)
		return nil, err
	}
	pool := id.Spec.PoolName
	hold, _, err := l.hold(ctx, pool)
	if err != nil {
		return nil, err
	}
	if hold != nil {
		// Released, but neither onto the free list nor to a waiting
		// machine until the pool's hold is lifted.
		released := id.DeepCopy()
		released.Status.Allocation = nil
		err := tx.WriteObject(ctx, l.identities, idKey, released)
		return nil, err
	}
	next, err := l.oldestWaiting(ctx, pool)
	if err != nil {
		return nil, err
	}
	if next == nil {
		released := id.DeepCopy()
		released.Status.Allocation = nil
		if err := tx.WriteObject(ctx, l.identities, idKey, released); err != nil {
			return nil, err
		}
		tx.IfNothingUnder(l.keys.pendingPrefix(pool)).Put(l.keys.free(pool, id.Name), "")
		return nil, nil
	}
	n := next.machine
	nKey := l.machines.Key(n.Namespace, n.Name)
	tx.IfUnchanged(nKey, next.machineRev).IfUnchanged(next.pendingKey, next.pendingRev)
	if err := tx.WriteObject(ctx, l.machines, nKey, l.allocatedTo(n, id)); err != nil {
		return nil, err
	}
	if err := tx.WriteObject(ctx, l.identities, idKey, l.holding(id, n)); err != nil {
		return nil, err
	}
	tx.Delete(next.pendingKey).Delete(l.keys.waiting(n.Namespace, n.Name))
	return &handoff{identity: id, to: n}, nil
}

func copyInto(out, in runtime.Object) error {
	dst, ok1 := out.(*dockerio.MacOSMachine)
	src, ok2 := in.(*dockerio.MacOSMachine)
	if !ok1 || !ok2 {
		return fmt.Errorf("cannot copy %T into %T", in, out)
	}
	*dst = *src
	return nil
}

// nameOf is the object name at the end of a store key, for messages.
func nameOf(key string) string { return path.Base(key) }
