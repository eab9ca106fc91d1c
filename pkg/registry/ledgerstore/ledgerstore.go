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

// Package ledgerstore serves the kinds whose writes go through DockerIOS's
// own transactions (identities, machines and claims) with the generic registry
// store, so that a dry run answers exactly what the real request would.
//
// The generic store answers dry runs itself, above its storage: it reads
// the object and returns it, without ever asking the storage that enforces
// the ledger's rules — so a dry-run create of a duplicate identity would
// succeed where the real one gets 409, and a dry-run delete of a held
// identity would succeed too. Store takes the dry run out of the request's
// options and marks the context instead (door.WithDryRun); the generic
// store then runs its real path, and the ledger's storage, which honours
// the mark, makes every check and evaluates every transaction condition
// against etcd, and writes nothing.
//
// It does so only for a store whose storage says it honours the mark
// (door.Storage): for any other store it changes nothing, since that
// storage would write.
package ledgerstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/util/dryrun"

	"github.com/dockerios/dockerios/pkg/storage/door"
)

// Store is a generic registry store whose dry runs its storage answers.
type Store struct {
	*genericregistry.Store
}

var (
	_ rest.StandardStorage              = &Store{}
	_ rest.CollectionDeleter            = &Store{}
	_ rest.ResetFieldsStrategy          = &Store{}
	_ rest.TableConvertor               = &Store{}
	_ rest.CorruptObjectDeleterProvider = &Store{}
)

// AnswersDryRuns says whether store's storage answers dry runs marked in
// the context.
func AnswersDryRuns(store *genericregistry.Store) bool {
	_, ok := store.Storage.Storage.(door.Storage)
	return ok
}

// Create creates obj; a dry run is answered by the storage.
func (s *Store) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	if options != nil && dryrun.IsDryRun(options.DryRun) && AnswersDryRuns(s.Store) {
		ctx, options = door.WithDryRun(ctx), options.DeepCopy()
		options.DryRun = nil
	}
	return s.Store.Create(ctx, obj, createValidation, options)
}

// Update updates (or, for server-side apply, creates) the object name; a
// dry run is answered by the storage.
func (s *Store) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	ctx, options = UpdateOptions(ctx, s.Store, options)
	return s.Store.Update(ctx, name, objInfo, createValidation, updateValidation, forceAllowCreate, options)
}

// Delete deletes the object name; a dry run is answered by the storage.
func (s *Store) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	ctx, options = deleteOptions(ctx, s.Store, options)
	obj, immediate, err := s.Store.Delete(ctx, name, deleteValidation, options)
	return obj, immediate, s.namingTheResource(err)
}

// DeleteCollection deletes every object listOptions selects, each as
// Delete would; a dry run is answered by the storage for each.
func (s *Store) DeleteCollection(ctx context.Context, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions, listOptions *metainternalversion.ListOptions) (runtime.Object, error) {
	ctx, options = deleteOptions(ctx, s.Store, options)
	obj, err := s.Store.DeleteCollection(ctx, deleteValidation, options, listOptions)
	return obj, s.namingTheResource(err)
}

// namingTheResource rewrites the 409 the generic store gives for a delete
// whose preconditions (uid, resourceVersion) fail: it names the kind
// (MacOSMachine.dockerios.io), where every other answer of the resource
// names the resource (macosmachines.dockerios.io) that clients ask for.
func (s *Store) namingTheResource(err error) error {
	var status *apierrors.StatusError
	if !errors.As(err, &status) || status.ErrStatus.Reason != metav1.StatusReasonConflict || status.ErrStatus.Details == nil {
		return err
	}
	d := status.ErrStatus.Details
	byKind := schema.GroupResource{Group: d.Group, Resource: d.Kind}
	resource := s.DefaultQualifiedResource
	if d.Group != resource.Group || d.Kind == resource.Resource {
		return err
	}
	cause, ok := strings.CutPrefix(status.ErrStatus.Message, fmt.Sprintf("Operation cannot be fulfilled on %s %q: ", byKind.String(), d.Name))
	if !ok {
		return err
	}
	return apierrors.NewConflict(resource, d.Name, errors.New(cause))
}

// UpdateOptions moves an update's dry run from options into the context
// when store's storage answers dry runs, for subresources (status) that
// update through store.
func UpdateOptions(ctx context.Context, store *genericregistry.Store, options *metav1.UpdateOptions) (context.Context, *metav1.UpdateOptions) {
	if options != nil && dryrun.IsDryRun(options.DryRun) && AnswersDryRuns(store) {
		ctx, options = door.WithDryRun(ctx), options.DeepCopy()
		options.DryRun = nil
	}
	return ctx, options
}

func deleteOptions(ctx context.Context, store *genericregistry.Store, options *metav1.DeleteOptions) (context.Context, *metav1.DeleteOptions) {
	if options != nil && dryrun.IsDryRun(options.DryRun) && AnswersDryRuns(store) {
		ctx, options = door.WithDryRun(ctx), options.DeepCopy()
		options.DryRun = nil
	}
	return ctx, options
}
