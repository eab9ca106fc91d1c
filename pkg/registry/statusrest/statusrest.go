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

// Package statusrest serves the status subresource of any dockerios.io
// resource: the resource's own store, updated with a strategy that may
// change status only. Every kind's status behaves the same way; only the
// strategy differs, so it is written once.
package statusrest

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/dockerios/dockerios/pkg/registry/ledgerstore"
)

// Strategy is what a status strategy must be: an update strategy that says
// which fields a status write leaves alone.
type Strategy interface {
	rest.RESTUpdateStrategy
	rest.ResetFieldsStrategy
}

// REST serves <resource>/status.
type REST struct {
	store *genericregistry.Store
}

var (
	_ rest.Patcher             = &REST{}
	_ rest.ResetFieldsStrategy = &REST{}
	_ rest.TableConvertor      = &REST{}
)

// New returns the status subresource of store. It shares store's storage
// (and watch cache) and differs only in its update strategy.
func New(store *genericregistry.Store, strategy Strategy) *REST {
	statusStore := *store
	statusStore.UpdateStrategy = strategy
	statusStore.ResetFieldsStrategy = strategy
	return &REST{store: &statusStore}
}

// New returns an empty object of the resource.
func (r *REST) New() runtime.Object { return r.store.New() }

// Destroy does nothing: the storage is shared with the main resource, which
// destroys it.
func (r *REST) Destroy() {}

// Get returns the object whose status is asked for.
func (r *REST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// Update writes an object's status. It never creates the object: status
// describes something that exists.
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// A status write can fail a machine, which releases its identity: the
	// ledger answers its dry run, as it answers the main resource's.
	ctx, options = ledgerstore.UpdateOptions(ctx, r.store, options)
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// GetResetFields returns the fields a status write leaves alone.
func (r *REST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

// ConvertToTable prints the object the way the main resource does.
func (r *REST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}
