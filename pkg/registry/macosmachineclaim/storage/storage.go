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

// Package storage wires the MacOSMachineClaim rules of package
// macosmachineclaim to etcd through the generic registry store.
package storage

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/validation"
	"github.com/dockerios/dockerios/pkg/registry/customverbs"
	"github.com/dockerios/dockerios/pkg/registry/ledgerstore"
	"github.com/dockerios/dockerios/pkg/registry/macosmachineclaim"
	"github.com/dockerios/dockerios/pkg/registry/statusrest"
	"github.com/dockerios/dockerios/pkg/storage/binding"
)

// REST serves macosmachineclaims. Its writes go through the binder's
// storage, which answers dry runs itself (see package ledgerstore): a
// dry-run create answers Bound or Pending as the real one would.
type REST struct {
	*ledgerstore.Store
	deps Deps
}

// BindREST serves macosmachineclaims/bind.
type BindREST struct {
	deps Deps
}

// ClaimStorage bundles a claim's resource and subresources.
type ClaimStorage struct {
	Claim  *REST
	Status *statusrest.REST
	Bind   *BindREST
}

// Deps are what claims need beyond their own storage.
type Deps struct {
	// Binder writes claim and machine together.
	Binder *binding.Binder
	// Classes says which identity pool a class draws from.
	Classes customverbs.ClassPools
	// Authorizer checks the custom verbs claim, bind and use.
	Authorizer authorizer.Authorizer
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
	_ rest.NamedCreater       = &BindREST{}
)

// NewStorage returns the storage of macosmachineclaims, their status and bind.
func NewStorage(optsGetter generic.RESTOptionsGetter, deps Deps) (ClaimStorage, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &dockerio.MacOSMachineClaim{} },
		NewListFunc:               func() runtime.Object { return &dockerio.MacOSMachineClaimList{} },
		PredicateFunc:             macosmachineclaim.Matcher,
		DefaultQualifiedResource:  dockerio.Resource("macosmachineclaims"),
		SingularQualifiedResource: dockerio.Resource("macosmachineclaim"),

		CreateStrategy:      macosmachineclaim.Strategy,
		UpdateStrategy:      macosmachineclaim.Strategy,
		DeleteStrategy:      macosmachineclaim.Strategy,
		ResetFieldsStrategy: macosmachineclaim.Strategy,

		TableConvertor: macosmachineclaim.TableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: macosmachineclaim.GetAttrs}); err != nil {
		return ClaimStorage{}, err
	}
	// A pool claim is Bound at create when a machine waits for it, and
	// deleting a bound claim frees its machine, each in one transaction.
	store.Storage.Storage = deps.Binder.ClaimStorage(store.Storage.Storage)
	return ClaimStorage{
		Claim:  &REST{Store: &ledgerstore.Store{Store: store}, deps: deps},
		Status: statusrest.New(store, macosmachineclaim.StatusStrategy),
		Bind:   &BindREST{deps: deps},
	}, nil
}

// Create creates a claim if its user may ask what it asks: claim on the
// pool it names, or use on the identity pool of the class it names. The
// checks run after validation, so a malformed claim gets its 422 first.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	return r.Store.Create(ctx, obj, r.checkingVerbs(createValidation), options)
}

// Update updates a claim. Server-side apply of a claim that does not exist
// creates it here, and is checked exactly as Create is; a claim's spec is
// immutable, so no update changes what it asks for.
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.Store.Update(ctx, name, objInfo, r.checkingVerbs(createValidation), updateValidation, forceAllowCreate, options)
}

// checkingVerbs is createValidation preceded by the custom verb checks: the
// generic store calls it on every path that creates a claim.
func (r *REST) checkingVerbs(createValidation rest.ValidateObjectFunc) rest.ValidateObjectFunc {
	return func(ctx context.Context, obj runtime.Object) error {
		if err := r.authorize(ctx, obj.(*dockerio.MacOSMachineClaim)); err != nil {
			return err
		}
		if createValidation != nil {
			return createValidation(ctx, obj)
		}
		return nil
	}
}

func (r *REST) authorize(ctx context.Context, c *dockerio.MacOSMachineClaim) error {
	claims := dockerio.Resource("macosmachineclaims")
	if c.Spec.PoolName != "" {
		return customverbs.Require(ctx, r.deps.Authorizer, customverbs.Claim,
			customverbs.Target{Resource: "macosmachinepools", Namespace: c.Namespace, Name: c.Spec.PoolName},
			claims, c.Name, "a claim against a pool needs verb claim on the pool")
	}
	pool, err := r.deps.Classes.IdentityPoolOf(ctx, dockerio.Kind("MacOSMachineClaim"), c.Name, c.Spec.ClassName)
	if err != nil {
		return err
	}
	return customverbs.Require(ctx, r.deps.Authorizer, customverbs.Use,
		customverbs.Target{Resource: "macosidentitypools", Name: pool},
		claims, c.Name, "a claim for a class makes a machine drawing identities from the class's pool, which needs verb use on it")
}

// New returns an empty binding.
func (r *BindREST) New() runtime.Object { return &dockerio.MacOSMachineBinding{} }

// Destroy does nothing: the binder is shared.
func (r *BindREST) Destroy() {}

// Create binds the claim name to the machine the binding names, if the user
// may bind that machine, and answers with the bound claim.
func (r *BindREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	b, ok := obj.(*dockerio.MacOSMachineBinding)
	if !ok {
		return nil, apierrors.NewBadRequest("the body of bind must be a MacOSMachineBinding")
	}
	namespace := genericapirequest.NamespaceValue(ctx)
	if errs := validation.ValidateMacOSMachineBinding(b, namespace, name); len(errs) > 0 {
		return nil, apierrors.NewInvalid(dockerio.Kind("MacOSMachineBinding"), name, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj); err != nil {
			return nil, err
		}
	}
	if err := customverbs.Require(ctx, r.deps.Authorizer, customverbs.Bind,
		customverbs.Target{Resource: "macosmachines", Namespace: namespace, Name: b.MachineName},
		dockerio.Resource("macosmachineclaims"), name, "binding a claim to a machine needs verb bind on the machine"); err != nil {
		return nil, err
	}
	dryRun := options != nil && len(options.DryRun) > 0
	return r.deps.Binder.Bind(ctx, namespace, name, b.MachineName, dryRun)
}

// ShortNames lets `kubectl get mmclaim` work.
func (r *REST) ShortNames() []string { return []string{"mmclaim"} }

// Categories puts claims in `kubectl get dockerios`.
func (r *REST) Categories() []string { return []string{"dockerios"} }
