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

// Package door makes a storage.Interface wrapper the one door through which
// every write of a ledger kind reaches etcd, whatever REST path made it.
//
// The generic registry store reaches its storage by three roads that a
// wrapper overriding only Create and Delete would miss:
//
//   - create-on-update: server-side apply (and any update the store lets
//     create) of an object that does not exist goes to GuaranteedUpdate
//     with ignoreNotFound, and the etcd3 store creates it there;
//   - dry run: the store's DryRunnableStorage answers dry-run requests
//     itself — a Get and a copy — and never calls the wrapper, so a dry run
//     would skip every rule the wrapper enforces;
//   - an update that removes the last finalizer of an object being deleted,
//     which the store turns into a Delete.
//
// GuaranteedUpdate here sends a create-on-update to the wrapper's Create,
// and hands the wrapper every update it must make itself. For dry runs, the
// REST layer (pkg/registry/ledgerstore) takes the dry run out of the
// request's options and puts it in the context instead, so the store runs
// its real path down to the wrapper, which then answers exactly what the
// real request would — the same checks, the same transaction conditions
// evaluated against etcd — and writes nothing.
package door

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
)

type dryRunKey struct{}

// WithDryRun returns ctx marked as a dry run: a Storage answers requests
// made with it without writing.
func WithDryRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, dryRunKey{}, true)
}

// IsDryRun says whether ctx is marked as a dry run.
func IsDryRun(ctx context.Context) bool {
	v, _ := ctx.Value(dryRunKey{}).(bool)
	return v
}

// Storage is a storage.Interface that answers dry runs marked in the
// context itself. Only such a storage may be handed a dry run that way:
// any other would write.
type Storage interface {
	storage.Interface
	// AnswersDryRuns says the storage honours WithDryRun.
	AnswersDryRuns()
}

// CreateFunc creates obj at key, as storage.Interface's Create does.
type CreateFunc func(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error

// InterceptFunc looks at an update the generic store is about to make
// (old is what storage holds, at revision rev; updated is the store's
// answer) and returns a write to make instead, or nil to let the update
// through. The write must put its result into destination and answer a
// dry run without writing; ok false means what it read changed meanwhile
// and the update must be decided again.
type InterceptFunc func(old, updated runtime.Object, rev int64) func(ctx context.Context, destination runtime.Object) (ok bool, err error)

// Updater is what GuaranteedUpdate needs of a wrapper.
type Updater struct {
	// Inner is the storage the wrapper wraps: the watch cache, then etcd.
	Inner storage.Interface
	// Create is the wrapper's own Create; a create-on-update goes there.
	Create CreateFunc
	// Intercept, when set, takes over updates the wrapper must make itself.
	Intercept InterceptFunc
	// Copy copies an object as storage would return it (a round trip
	// through the storage codec), for dry-run answers.
	Copy func(in, out runtime.Object) error
}

// maxAttempts bounds how often an update is decided again after losing a
// race to another write.
const maxAttempts = 100

// errTakenOver stops the inner update: the wrapper makes the write itself.
var errTakenOver = errors.New("write taken over by the ledger")

// GuaranteedUpdate is storage.Interface's GuaranteedUpdate for a wrapper:
// creates go to u.Create, updates u.Intercept claims are made by it, every
// other update by u.Inner; a dry run (IsDryRun(ctx)) reads and decides
// exactly the same, and writes nothing.
func (u Updater) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	for range maxAttempts {
		var create runtime.Object
		var takeOver func(context.Context, runtime.Object) (bool, error)
		decide := func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
			output, ttl, err := tryUpdate(input, res)
			if err != nil {
				return output, ttl, err
			}
			if res.ResourceVersion == 0 {
				// Nothing is stored: the store is creating the object.
				create = output
				return nil, nil, errTakenOver
			}
			if u.Intercept != nil {
				if takeOver = u.Intercept(input, output, int64(res.ResourceVersion)); takeOver != nil {
					return nil, nil, errTakenOver
				}
			}
			return output, ttl, nil
		}
		var err error
		if IsDryRun(ctx) {
			err = u.dryRunUpdate(ctx, key, destination, ignoreNotFound, preconditions, decide, cachedExistingObject)
		} else {
			err = u.Inner.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, decide, cachedExistingObject)
		}
		if !errors.Is(err, errTakenOver) {
			return err
		}
		if create != nil {
			err := u.Create(ctx, key, create, destination, 0)
			if !storage.IsExist(err) {
				return err
			}
			// Created by someone else meanwhile: as the etcd3 store does,
			// update what is there now.
		} else {
			ok, err := takeOver(ctx, destination)
			if ok || err != nil {
				return err
			}
		}
		// What the update read changed: read it again, decide again.
		cachedExistingObject = nil
	}
	// A 409, which clients retry, as for any update that lost its race.
	return storage.NewResourceVersionConflictsError(key, 0)
}

// dryRunUpdate decides an update as the inner storage would, and writes
// nothing: the generic store's own dry run (DryRunnableStorage), which
// never reaches a wrapper.
func (u Updater) dryRunUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	v, err := conversion.EnforcePtr(destination)
	if err != nil {
		return fmt.Errorf("unable to convert output object to pointer: %w", err)
	}
	current := reflect.New(v.Type()).Interface().(runtime.Object)
	if err := u.Inner.Get(ctx, key, storage.GetOptions{IgnoreNotFound: ignoreNotFound}, current); err != nil {
		return err
	}
	if err := preconditions.Check(key, current); err != nil {
		return err
	}
	rev, err := u.Inner.Versioner().ObjectResourceVersion(current)
	if err != nil {
		return err
	}
	updated, _, err := tryUpdate(current, storage.ResponseMeta{ResourceVersion: rev})
	if err != nil {
		return err
	}
	return u.Copy(updated, destination)
}
