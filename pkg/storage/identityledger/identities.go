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
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/storage/door"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// IdentityStorage wraps the storage of MacOSIdentities so that an identity
// is written together with the index keys that keep its values unique, and
// joins its pool either free or, when machines are waiting, held by the one
// that has waited longest — whichever REST path creates or deletes it (see
// package door).
func (l *Ledger) IdentityStorage(inner storage.Interface) storage.Interface {
	return &identityStorage{Interface: inner, l: l}
}

type identityStorage struct {
	storage.Interface
	l *Ledger
}

var _ door.Storage = &identityStorage{}

// AnswersDryRuns: every write here honours door.WithDryRun.
func (s *identityStorage) AnswersDryRuns() {}

// GuaranteedUpdate lets the generic store make every update (the spec is
// immutable, and status writes cannot touch the allocation), except a
// create — server-side apply of a new identity — which goes to Create, so
// it is checked for duplicates and joins its pool exactly as a POST does.
// A delete that marks the identity first (foreground or orphan
// propagation, or an identity with finalizers, which the store makes as an
// update) is refused for a held identity, as the delete itself would be:
// otherwise the identity would sit marked for deletion while its machine
// runs. A free identity it marks is taken off its pool's free list in the
// same write, so that no machine is given an identity that is going away.
func (s *identityStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	// marking says the update being decided marks a free identity for
	// deletion; decided (refuseMarkingHeld) and then taken over
	// (takeOffFreeList) on each attempt, in that order.
	marking := false
	// outside says the update changes whether a free identity is held
	// outside the ledger (see outsideWrite).
	outside := false
	refuseMarkingHeld := func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
		// Noted first: the store marks a deletion on the object it is
		// given, so input may carry it once tryUpdate returns.
		old, ok := input.(*dockerio.MacOSIdentity)
		unmarked := ok && old.DeletionTimestamp == nil
		var heldBy *dockerio.IdentityAllocation
		if unmarked && old.Status.Allocation != nil {
			a := *old.Status.Allocation
			heldBy = &a
		}
		marking = false
		output, ttl, err := tryUpdate(input, res)
		if err != nil {
			return output, ttl, err
		}
		updated, ok := output.(*dockerio.MacOSIdentity)
		if ok && heldBy != nil && updated.DeletionTimestamp != nil {
			return nil, nil, heldError(updated.Name, heldBy)
		}
		marking = ok && unmarked && updated.DeletionTimestamp != nil
		outside = ok && old != nil && updated.Status.Allocation == nil && updated.DeletionTimestamp == nil &&
			heldOutsideLedger(old) != heldOutsideLedger(updated)
		return output, ttl, nil
	}
	takeOffFreeList := func(_, output runtime.Object, rev int64) func(context.Context, runtime.Object) (bool, error) {
		switch {
		case marking:
			return s.markFree(output.(*dockerio.MacOSIdentity), rev)
		case outside:
			return s.outsideWrite(output.(*dockerio.MacOSIdentity), rev)
		}
		return nil
	}
	return door.Updater{Inner: s.Interface, Create: s.Create, Intercept: takeOffFreeList, Copy: s.l.identities.Copy}.
		GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, refuseMarkingHeld, cachedExistingObject)
}

// markFree writes a free identity marked for deletion, unchanged since rev,
// and takes it off its pool's free list in the same transaction. It waits
// for its finalizers given to no machine, as a held one cannot be marked;
// the delete that ends the wait drops its other index keys.
func (s *identityStorage) markFree(marked *dockerio.MacOSIdentity, rev int64) func(context.Context, runtime.Object) (bool, error) {
	l := s.l
	return func(ctx context.Context, destination runtime.Object) (bool, error) {
		idKey := l.identities.Key("", marked.Name)
		var tx txn.Txn
		tx.IfUnchanged(idKey, rev)
		written, err := tx.PutObject(ctx, l.identities, idKey, marked)
		if err != nil {
			return false, err
		}
		tx.Delete(l.keys.free(marked.Spec.PoolName, marked.Name))
		res, err := txn.Commit(ctx, l.client, &tx)
		if err != nil || !res.Succeeded {
			return false, err
		}
		if door.IsDryRun(ctx) {
			// As the generic store's dry-run update: the resourceVersion read.
			return true, written.Into(destination, rev)
		}
		l.free.forget(marked.Spec.PoolName, l.keys.free(marked.Spec.PoolName, marked.Name))
		return true, written.Into(destination, res.Revision)
	}
}

// heldError is the 409 for deleting identity name, which a machine holds.
func heldError(name string, a *dockerio.IdentityAllocation) error {
	return apierrors.NewConflict(dockerio.Resource("macosidentities"), name,
		fmt.Errorf("it is held by MacOSMachine %s/%s (uid %s); it can be deleted once that machine is gone", a.MachineNamespace, a.MachineName, a.MachineUID))
}

// uniqueValues returns an identity's unique values by field.
func uniqueValues(s *dockerio.MacOSIdentitySpec) map[string]string {
	return map[string]string{
		"serialNumber":      s.SerialNumber,
		"boardSerialNumber": s.BoardSerialNumber,
		"systemUUID":        s.SystemUUID,
		"macAddress":        s.MACAddress,
		"rom":               s.ROM,
	}
}

// Create writes a new identity if none of its values is held by another.
// A duplicate is refused with 409 naming each field and who holds it.
func (s *identityStorage) Create(ctx context.Context, key string, obj, out runtime.Object, _ uint64) error {
	l := s.l
	id, ok := obj.(*dockerio.MacOSIdentity)
	if !ok {
		return fmt.Errorf("not a MacOSIdentity: %T", obj)
	}
	if id.ResourceVersion != "" {
		return storage.ErrResourceVersionSetOnCreate
	}
	idKey, err := l.identities.EtcdKey(key)
	if err != nil {
		return err
	}
	if err := l.checkPool(ctx, id); err != nil {
		return err
	}
	pool := id.Spec.PoolName
	values := uniqueValues(&id.Spec)
	// A pool on hold takes new identities but gives none out until the
	// hold is lifted: a value imported again after a restore may be one a
	// running VM still uses.
	hold, _, err := l.hold(ctx, pool)
	if err != nil {
		return err
	}
	for range l.attempts(ctx) {
		var next *waitingMachine
		if hold == nil {
			if next, err = l.oldestWaiting(ctx, pool); err != nil {
				return err
			}
		}
		var tx txn.Txn
		tx.IfAbsent(idKey).ReadOnFailure(idKey)
		for _, f := range uniqueFields {
			k := l.keys.value(f, values[f])
			tx.IfAbsent(k).ReadOnFailure(k).Put(k, id.Name)
		}
		tx.Put(l.keys.member(pool, id.Name), "")
		stored := id
		switch {
		case hold != nil:
		case next == nil:
			tx.IfNothingUnder(l.keys.pendingPrefix(pool)).Put(l.keys.free(pool, id.Name), "")
		default:
			n := next.machine
			nKey := l.machines.Key(n.Namespace, n.Name)
			tx.IfUnchanged(nKey, next.machineRev).IfUnchanged(next.pendingKey, next.pendingRev)
			if err := tx.WriteObject(ctx, l.machines, nKey, l.allocatedTo(n, id)); err != nil {
				return err
			}
			tx.Delete(next.pendingKey).Delete(l.keys.waiting(n.Namespace, n.Name))
			stored = l.holding(id, n)
		}
		written, err := tx.PutObject(ctx, l.identities, idKey, stored)
		if err != nil {
			return err
		}
		res, err := txn.Commit(ctx, l.client, &tx)
		if err != nil {
			return err
		}
		if !res.Succeeded {
			if _, exists := res.Found[idKey]; exists {
				return storage.NewKeyExistsError(key, 0)
			}
			if err := duplicateValues(id, values, res.Found, l.keys); err != nil {
				return err
			}
			continue // a machine started or stopped waiting meanwhile
		}
		if next != nil && !door.IsDryRun(ctx) {
			(&handoff{identity: id, to: next.machine}).announce(l)
		}
		return written.Into(out, res.Revision)
	}
	return contended("macosidentities", id.Name, pool)
}

// checkPool refuses an identity whose pool does not exist or is of another model.
func (l *Ledger) checkPool(ctx context.Context, id *dockerio.MacOSIdentity) error {
	obj, _, err := l.pools.Get(ctx, l.client, l.pools.Key("", id.Spec.PoolName))
	if storage.IsNotFound(err) {
		return apierrors.NewInvalid(dockerio.Kind("MacOSIdentity"), id.Name, field.ErrorList{
			field.NotFound(field.NewPath("spec", "poolName"), id.Spec.PoolName)})
	}
	if err != nil {
		return err
	}
	if model := obj.(*dockerio.MacOSIdentityPool).Spec.Model; model != id.Spec.Model {
		return apierrors.NewInvalid(dockerio.Kind("MacOSIdentity"), id.Name, field.ErrorList{
			field.Invalid(field.NewPath("spec", "model"), id.Spec.Model, fmt.Sprintf("must be %s, the model of MacOSIdentityPool %s", model, id.Spec.PoolName))})
	}
	return nil
}

// duplicateValues turns the index keys a failed create found into a 409
// that names each duplicated field and the identity holding the value.
func duplicateValues(id *dockerio.MacOSIdentity, values map[string]string, found map[string]txn.KeyValue, keys layout) error {
	var causes []metav1.StatusCause
	var all []string
	for _, f := range uniqueFields {
		kv, ok := found[keys.value(f, values[f])]
		if !ok {
			continue
		}
		msg := fmt.Sprintf("%s is already held by MacOSIdentity %s", values[f], kv.Value)
		all = append(all, fmt.Sprintf("spec.%s: %s", f, msg))
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueDuplicate, Field: "spec." + f, Message: msg})
	}
	if len(causes) == 0 {
		return nil
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusConflict,
		Reason: metav1.StatusReasonConflict,
		Details: &metav1.StatusDetails{
			Group: dockerio.GroupName, Kind: "macosidentities", Name: id.Name, Causes: causes,
		},
		Message: fmt.Sprintf("MacOSIdentity %q duplicates another identity: %s", id.Name, strings.Join(all, "; ")),
	}}
}

// Delete removes a free identity and its index keys. An identity a machine
// holds is refused, naming the machine: it is in use until that machine is gone.
func (s *identityStorage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	l := s.l
	if opts.ExpectTransformOrDecodeError {
		// A corrupt object nobody can decode: the store deletes it as any
		// corrupt object, and the repair audit drops its index keys.
		return s.Interface.Delete(ctx, key, out, preconditions, validateDeletion, cachedExistingObject, opts)
	}
	idKey, err := l.identities.EtcdKey(key)
	if err != nil {
		return err
	}
	for range l.attempts(ctx) {
		obj, rev, err := l.identities.Get(ctx, l.client, idKey)
		if err != nil {
			return err
		}
		id := obj.(*dockerio.MacOSIdentity)
		if err := preconditions.Check(key, id); err != nil {
			return err
		}
		if err := validateDeletion(ctx, id); err != nil {
			return err
		}
		if a := id.Status.Allocation; a != nil {
			return heldError(id.Name, a)
		}
		var tx txn.Txn
		tx.IfUnchanged(idKey, rev).Delete(idKey)
		if err := l.dropIndexKeys(ctx, &tx, id); err != nil {
			return err
		}
		res, err := txn.Commit(ctx, l.client, &tx)
		if err != nil {
			return err
		}
		if !res.Succeeded {
			continue
		}
		if !door.IsDryRun(ctx) {
			// Like the etcd3 store: the deleted object at the revision of
			// its deletion (a dry run answers with the object as it is).
			if err := (storage.APIObjectVersioner{}).UpdateObject(id, uint64(res.Revision)); err != nil {
				return err
			}
		}
		dst, ok := out.(*dockerio.MacOSIdentity)
		if !ok {
			return fmt.Errorf("cannot return a MacOSIdentity as %T", out)
		}
		*dst = *id
		return nil
	}
	return contended("macosidentities", nameOf(key), "")
}

// dropIndexKeys adds to tx the removal of id's index keys — only those that
// are id's, so that a drifted key held by another identity survives.
func (l *Ledger) dropIndexKeys(ctx context.Context, tx *txn.Txn, id *dockerio.MacOSIdentity) error {
	values := uniqueValues(&id.Spec)
	for _, f := range uniqueFields {
		k := l.keys.value(f, values[f])
		resp, err := l.client.Get(ctx, k)
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == id.Name {
			tx.IfUnchanged(k, resp.Kvs[0].ModRevision).Delete(k)
		}
	}
	tx.Delete(l.keys.member(id.Spec.PoolName, id.Name)).Delete(l.keys.free(id.Spec.PoolName, id.Name))
	return nil
}
