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

package binding

import (
	"context"
	"fmt"
	"path"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/storage/door"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

func (b *Binder) queuePrefix(namespace, pool string) string {
	return b.queueRoot + namespace + "/" + pool + "/"
}

// queueKey is where a waiting pool claim stands in its pool's queue.
func (b *Binder) queueKey(c *dockerio.MacOSMachineClaim) string {
	return b.queuePrefix(c.Namespace, c.Spec.PoolName) + c.Name
}

// ClaimStorage wraps the storage of MacOSMachineClaims so that a pool claim
// is Bound at create when a machine is waiting for it, joins its pool's
// queue otherwise, and leaves it — freeing its machine, if it had one — in
// the transaction that deletes it, whichever REST path creates, updates or
// deletes it (see package door).
func (b *Binder) ClaimStorage(inner storage.Interface) storage.Interface {
	return &claimStorage{Interface: inner, b: b}
}

type claimStorage struct {
	storage.Interface
	b *Binder
}

var _ door.Storage = &claimStorage{}

// AnswersDryRuns: every write here honours door.WithDryRun.
func (s *claimStorage) AnswersDryRuns() {}

// createOutcome is what one attempt at creating a claim came to.
type createOutcome int

const (
	created    createOutcome = iota // written, or refused for good
	tryAnother                      // what the attempt read changed meanwhile
)

// Create writes a new claim. A pool claim is Bound, in the transaction
// that creates it, to a Ready, unbound machine of its pool it may take —
// the one Ready longest that this apiserver's view offers, else the one
// free longest in the pool's bindable index in etcd — and only when there
// is none does it join its pool's queue, on condition that none became
// free since it looked (see bindable.go). A claim for a class is always
// created Pending: the controller makes its machine.
func (s *claimStorage) Create(ctx context.Context, key string, obj, out runtime.Object, _ uint64) error {
	c, ok := obj.(*dockerio.MacOSMachineClaim)
	if !ok {
		return fmt.Errorf("not a MacOSMachineClaim: %T", obj)
	}
	if c.ResourceVersion != "" {
		return storage.ErrResourceVersionSetOnCreate
	}
	cKey, err := s.b.claims.EtcdKey(key)
	if err != nil {
		return err
	}
	if c.Spec.PoolName == "" {
		res, err := s.createPendingUnless(ctx, key, cKey, s.b.waiting(c, ""), "", 0, out)
		if err == nil && res != created {
			err = storage.NewKeyExistsError(key, 0)
		}
		return err
	}
	var selector labels.Selector
	if c.Spec.Selector != nil {
		// Validation has refused a malformed selector already.
		if selector, err = metav1.LabelSelectorAsSelector(c.Spec.Selector); err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
	}
	for range maxAttempts {
		// The view is a hint that spares a read of etcd; after a lost
		// race, or when it offers nothing, etcd decides.
		if m, _ := s.b.view.pick(c.Namespace, c.Spec.PoolName, selector); m != nil {
			res, err := s.createBound(ctx, key, cKey, c, m, out)
			if err != nil || res == created {
				return err
			}
			continue
		}
		res, err := s.createFromIndex(ctx, key, cKey, c, selector, out)
		if err != nil || res == created {
			return err
		}
	}
	return apierrors.NewTooManyRequests(fmt.Sprintf("the machines of MacOSMachinePool %s kept changing while the claim was being created; retry", c.Spec.PoolName), 1)
}

// createFromIndex creates c Bound to the machine of its pool's bindable
// index that has been free longest and that c may take, or, with none,
// Pending in the pool's queue on condition that the index has not changed
// since it was read.
func (s *claimStorage) createFromIndex(ctx context.Context, key, cKey string, c *dockerio.MacOSMachineClaim, selector labels.Selector, out runtime.Object) (createOutcome, error) {
	b := s.b
	index := b.bindablePrefix(c.Namespace, c.Spec.PoolName)
	resp, err := b.client.Get(ctx, index, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return created, err
	}
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), index)
		obj, rev, err := b.machines.Get(ctx, b.client, b.machines.Key(c.Namespace, name))
		if storage.IsNotFound(err) {
			continue
		}
		if err != nil {
			return created, err
		}
		m := obj.(*dockerio.MacOSMachine)
		if !isBindable(m) || refusal(c, m) != "" {
			continue
		}
		if busy, ok := b.view.begin(m); !ok {
			// Another create of this replica is binding it: see how that
			// ends rather than race it.
			select {
			case <-busy:
			case <-ctx.Done():
				return created, ctx.Err()
			}
			return tryAnother, nil
		}
		return s.createBound(ctx, key, cKey, c, &bindable{machine: m, rev: rev}, out)
	}
	why, poolSays := b.poolSays(ctx, c.Namespace, c.Spec.PoolName)
	if why == "" {
		why = "no Ready, unbound MacOSMachine of the pool is free to take"
		if selector != nil && !selector.Empty() {
			why = "no Ready, unbound MacOSMachine of the pool matching its selector is free to take"
		}
	}
	pending := b.waiting(c, why)
	if poolSays != "" {
		cond := meta.FindStatusCondition(pending.Status.Conditions, ConditionBound)
		cond.Message += "; " + poolSays
	}
	return s.createPendingUnless(ctx, key, cKey, pending, index, resp.Header.Revision, out)
}

// poolSays reads the pool a claim found no machine in, so that the claim
// created Pending says which of the reasons a pool has none holds — the
// question its owner asks first. A pool that does not exist (yet: a claim
// may be applied before its pool) or is being deleted is why the claim
// waits; otherwise the pool's Ready condition, as its controller last
// wrote it, says whether its machines are all bound, still being made, or
// capped by maxMachines. Only the message depends on this read, never what
// is written: when it fails, the claim says what it says without it.
func (b *Binder) poolSays(ctx context.Context, namespace, name string) (why, says string) {
	obj, _, err := b.pools.Get(ctx, b.client, b.pools.Key(namespace, name))
	switch {
	case storage.IsNotFound(err):
		return fmt.Sprintf("MacOSMachinePool %s does not exist", name), ""
	case err != nil:
		return "", ""
	}
	pool := obj.(*dockerio.MacOSMachinePool)
	if pool.DeletionTimestamp != nil {
		return fmt.Sprintf("MacOSMachinePool %s is being deleted", name), ""
	}
	if ready := meta.FindStatusCondition(pool.Status.Conditions, "Ready"); ready != nil {
		return "", fmt.Sprintf("the pool's Ready condition says %s: %s", ready.Reason, ready.Message)
	}
	return "", ""
}

// createBound tries to create c Bound to m, in one transaction with m's
// claimRef and m's leaving the bindable index, conditioned on m unchanged
// since it was read. The caller has marked m as being bound (view.pick or
// view.begin); createBound ends that.
func (s *claimStorage) createBound(ctx context.Context, key, cKey string, c *dockerio.MacOSMachineClaim, m *bindable, out runtime.Object) (createOutcome, error) {
	b := s.b
	var hideAt int64 // what this attempt learnt of the machine, for the view
	defer func() { b.view.done(m, hideAt) }()
	bound := b.boundTo(c, m.machine)
	mKey := b.machines.Key(m.machine.Namespace, m.machine.Name)
	var tx txn.Txn
	tx.IfAbsent(cKey).IfUnchanged(mKey, m.rev).ReadOnFailure(cKey)
	written, err := tx.PutObject(ctx, b.claims, cKey, bound)
	if err != nil {
		return created, err
	}
	if err := tx.WriteObject(ctx, b.machines, mKey, heldBy(m.machine, c)); err != nil {
		return created, err
	}
	tx.Delete(b.bindableKey(m.machine))
	res, err := txn.Commit(ctx, b.client, &tx)
	if err != nil {
		return created, err
	}
	if res.Succeeded {
		if err := written.Into(out, res.Revision); err != nil {
			return created, err
		}
		if !door.IsDryRun(ctx) {
			hideAt = res.Revision
			// No Event: the create's answer and the claim's Bound
			// condition say it, and an Event per claim would double the
			// writes a warm pool's claims cost the cluster.
			metricBindings.WithLabelValues("atCreate").Inc()
		}
		return created, nil
	}
	if _, exists := res.Found[cKey]; exists {
		return created, storage.NewKeyExistsError(key, 0)
	}
	hideAt = m.rev // the machine changed since it was read
	return tryAnother, nil
}

// waiting returns c as it is created Pending: its Bound condition False,
// saying why (for a pool claim, why is what kept it from being bound at
// create) and what binds it, so that `kubectl describe` answers "why is my
// claim Pending?" without a look at the controller.
func (b *Binder) waiting(c *dockerio.MacOSMachineClaim, why string) *dockerio.MacOSMachineClaim {
	var message string
	if c.Spec.PoolName != "" {
		message = fmt.Sprintf("%s: the claim is bound to the next Ready, unbound MacOSMachine of MacOSMachinePool %s that it may take, oldest claim first", why, c.Spec.PoolName)
	} else {
		message = fmt.Sprintf("a MacOSMachine of MacOSMachineClass %s is made for the claim, named after it; the claim is bound to it once it is Ready", c.Spec.ClassName)
	}
	pending := c.DeepCopy()
	meta.SetStatusCondition(&pending.Status.Conditions, metav1.Condition{
		Type: ConditionBound, Status: metav1.ConditionFalse, Reason: ReasonWaitingForMachine,
		Message: message, ObservedGeneration: c.Generation, LastTransitionTime: metav1.NewTime(b.clock.Now()),
	})
	return pending
}

// createPendingUnless creates c Pending: a claim for a class, or, with
// index set, a pool claim, which joins its pool's queue in the same write —
// on condition that no key of the pool's bindable index changed since
// revision read, when the claim found no machine there it could take.
func (s *claimStorage) createPendingUnless(ctx context.Context, key, cKey string, c *dockerio.MacOSMachineClaim, index string, read int64, out runtime.Object) (createOutcome, error) {
	b := s.b
	var tx txn.Txn
	tx.IfAbsent(cKey).ReadOnFailure(cKey)
	if index != "" {
		tx.IfNothingUnderChangedSince(index, read)
	}
	written, err := tx.PutObject(ctx, b.claims, cKey, c)
	if err != nil {
		return created, err
	}
	if c.Spec.PoolName != "" {
		tx.Put(b.queueKey(c), string(c.UID))
	}
	res, err := txn.Commit(ctx, b.client, &tx)
	if err != nil {
		return created, err
	}
	if !res.Succeeded {
		if _, exists := res.Found[cKey]; exists || index == "" {
			return created, storage.NewKeyExistsError(key, 0)
		}
		return tryAnother, nil // a machine became free meanwhile
	}
	return created, written.Into(out, res.Revision)
}

// GuaranteedUpdate lets the generic store make every update, except two: a
// create (server-side apply of a new claim) goes to Create, so it binds or
// queues exactly as a POST does; and the update that starts deleting a
// waiting claim (it has finalizers) is made here, taking the claim out of
// its pool's queue in the same write, since a claim being deleted is never
// bound.
func (s *claimStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	return door.Updater{
		Inner:     s.Interface,
		Create:    s.Create,
		Intercept: s.interceptLeavingQueue,
		Copy:      s.b.claims.Copy,
	}.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject)
}

// interceptLeavingQueue takes over every update of a waiting pool claim
// marked deleted, and the status write that makes a waiting pool claim
// Lost. It cannot tell the update that marks a claim deleted from later
// ones by the object read: the generic store marks that object in place.
// Later ones only remove finalizers, and taking them over costs a no-op
// delete.
func (s *claimStorage) interceptLeavingQueue(input, output runtime.Object, rev int64) func(context.Context, runtime.Object) (bool, error) {
	updated, ok := output.(*dockerio.MacOSMachineClaim)
	if !ok || updated.Spec.PoolName == "" || updated.Status.MachineName != "" || waiting(updated) {
		return nil
	}
	if old, ok := input.(*dockerio.MacOSMachineClaim); ok && updated.DeletionTimestamp == nil && !waiting(old) {
		return nil // Lost already, and out of the queue since
	}
	return func(ctx context.Context, destination runtime.Object) (bool, error) {
		b := s.b
		cKey := b.claims.Key(updated.Namespace, updated.Name)
		var tx txn.Txn
		tx.IfUnchanged(cKey, rev)
		written, err := tx.PutObject(ctx, b.claims, cKey, updated)
		if err != nil {
			return false, err
		}
		tx.Delete(b.queueKey(updated))
		res, err := txn.Commit(ctx, b.client, &tx)
		if err != nil || !res.Succeeded {
			return false, err
		}
		if door.IsDryRun(ctx) {
			// As the generic store's dry-run update: the resourceVersion read.
			return true, written.Into(destination, rev)
		}
		return true, written.Into(destination, res.Revision)
	}
}

// Delete removes a claim and, in the same transaction, takes it out of its
// pool's queue or frees its machine, which is then Released: never bound
// again, and disposed of.
func (s *claimStorage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	b := s.b
	if opts.ExpectTransformOrDecodeError {
		// A corrupt claim nobody can decode (see
		// IgnoreStoreReadErrorWithClusterBreakingPotential): the store
		// deletes it as any corrupt object; its machine, which names it,
		// is disposed of by the controller as one whose claim is gone, and
		// a queue key it left is dropped by the queue audit.
		return s.Interface.Delete(ctx, key, out, preconditions, validateDeletion, cachedExistingObject, opts)
	}
	claimKey, err := b.claims.EtcdKey(key)
	if err != nil {
		return err
	}
	for range maxAttempts {
		obj, rev, err := b.claims.Get(ctx, b.client, claimKey)
		if err != nil {
			return err
		}
		claim := obj.(*dockerio.MacOSMachineClaim)
		if preconditions != nil {
			if err := preconditions.Check(key, claim); err != nil {
				return err
			}
		}
		if err := validateDeletion(ctx, claim); err != nil {
			return err
		}
		var tx txn.Txn
		tx.IfUnchanged(claimKey, rev).Delete(claimKey)
		if claim.Spec.PoolName != "" {
			tx.Delete(b.queueKey(claim))
		}
		if name := claim.Status.MachineName; name != "" {
			if err := b.freeMachineOf(ctx, &tx, claim, name); err != nil {
				return err
			}
		}
		res, err := txn.Commit(ctx, b.client, &tx)
		if err != nil {
			return err
		}
		if !res.Succeeded {
			continue
		}
		if !door.IsDryRun(ctx) {
			// Like the etcd3 store, answer with the deleted object at the
			// revision of its deletion; a dry run answers it as it is.
			if err := (storage.APIObjectVersioner{}).UpdateObject(claim, uint64(res.Revision)); err != nil {
				return err
			}
		}
		dst, ok := out.(*dockerio.MacOSMachineClaim)
		if !ok {
			return fmt.Errorf("cannot return a MacOSMachineClaim as %T", out)
		}
		*dst = *claim
		return nil
	}
	return apierrors.NewConflict(dockerio.Resource("macosmachineclaims"), path.Base(key), fmt.Errorf("the claim kept changing while it was being deleted; retry"))
}

// freeMachineOf adds to tx, which deletes claim, that its machine name is
// freed and Released — if the machine still names the claim.
func (b *Binder) freeMachineOf(ctx context.Context, tx *txn.Txn, claim *dockerio.MacOSMachineClaim, name string) error {
	machineKey := b.machines.Key(claim.Namespace, name)
	mObj, mRev, err := b.machines.Get(ctx, b.client, machineKey)
	if storage.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	m := mObj.(*dockerio.MacOSMachine)
	if ref := m.Status.ClaimRef; ref == nil || ref.UID != string(claim.UID) {
		return nil
	}
	freed := m.DeepCopy()
	freed.Status.ClaimRef = nil
	meta.SetStatusCondition(&freed.Status.Conditions, metav1.Condition{
		Type: v1alpha1.MachineReleased, Status: metav1.ConditionTrue, Reason: ReasonClaimDeleted,
		Message:            fmt.Sprintf("MacOSMachineClaim %s was deleted; the machine is never bound again and is disposed of", claim.Name),
		ObservedGeneration: m.Generation, LastTransitionTime: metav1.NewTime(b.clock.Now()),
	})
	tx.IfUnchanged(machineKey, mRev)
	err = tx.WriteObject(ctx, b.machines, machineKey, freed)
	return err
}
