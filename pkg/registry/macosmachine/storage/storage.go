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

// Package storage wires the MacOSMachine rules of package macosmachine to
// etcd through the generic registry store: the main resource and its status
// subresource share one store and differ only in strategy.
package storage

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/customverbs"
	"github.com/dockerios/dockerios/pkg/registry/macosmachine"
	"github.com/dockerios/dockerios/pkg/registry/statusrest"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
)

// REST serves macosmachines.
type REST struct {
	*genericregistry.Store
	ledger     *identityledger.Ledger
	authorizer authorizer.Authorizer
}

// MachineStorage bundles a machine's resource and subresources.
type MachineStorage struct {
	Machine *REST
	Status  *statusrest.REST
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// NewStorage returns the storage of macosmachines and macosmachines/status.
func NewStorage(optsGetter generic.RESTOptionsGetter, ledger *identityledger.Ledger, authz authorizer.Authorizer) (MachineStorage, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &dockerio.MacOSMachine{} },
		NewListFunc:               func() runtime.Object { return &dockerio.MacOSMachineList{} },
		PredicateFunc:             macosmachine.Matcher,
		DefaultQualifiedResource:  dockerio.Resource("macosmachines"),
		SingularQualifiedResource: dockerio.Resource("macosmachine"),

		CreateStrategy:      macosmachine.Strategy,
		UpdateStrategy:      macosmachine.Strategy,
		DeleteStrategy:      macosmachine.Strategy,
		ResetFieldsStrategy: macosmachine.Strategy,

		TableConvertor: macosmachine.TableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: macosmachine.GetAttrs}); err != nil {
		return MachineStorage{}, err
	}
	// Creates and deletes (and, for machines, the move to Failed) go
	// through the identity ledger, which makes them in one transaction with
	// the index keys and the other object they change.
	store.Storage.Storage = ledger.MachineStorage(store.Storage.Storage)
	return MachineStorage{Machine: &REST{Store: store, ledger: ledger, authorizer: authz}, Status: statusrest.New(store, macosmachine.StatusStrategy)}, nil
}

// Create creates a machine if its user may use the identity pool its class
// draws from. The check runs after validation, so a malformed machine gets
// its 422 first.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	return r.Store.Create(ctx, obj, func(ctx context.Context, obj runtime.Object) error {
		m := obj.(*dockerio.MacOSMachine)
		pool, err := r.ledger.IdentityPoolOf(ctx, dockerio.Kind("MacOSMachine"), m.Name, m.Spec.ClassName)
		if err != nil {
			return err
		}
		if err := customverbs.Require(ctx, r.authorizer, customverbs.Use,
			customverbs.Target{Resource: "macosidentitypools", Name: pool},
			dockerio.Resource("macosmachines"), m.Name, "a machine draws an identity from its class's pool, which needs verb use on it"); err != nil {
			return err
		}
		if createValidation != nil {
			return createValidation(ctx, obj)
		}
		return nil
	}, options)
}

// ShortNames lets `kubectl get mm` work.
func (r *REST) ShortNames() []string { return []string{"mm"} }

// Categories puts machines in `kubectl get dockerios`.
func (r *REST) Categories() []string { return []string{"dockerios"} }
