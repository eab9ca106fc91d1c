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
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/customverbs"
	"github.com/dockerios/dockerios/pkg/registry/ledgerstore"
	"github.com/dockerios/dockerios/pkg/registry/macosmachine"
	"github.com/dockerios/dockerios/pkg/registry/statusrest"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
)

// REST serves macosmachines. Every write, dry runs included, goes through
// the identity ledger's storage (see package ledgerstore).
type REST struct {
	*ledgerstore.Store
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

		BeginUpdate: func(ctx context.Context, obj, old runtime.Object, _ *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
			return noFinish, mayRemoveTeardownFinalizer(ctx, authz, obj.(*dockerio.MacOSMachine), old.(*dockerio.MacOSMachine))
		},
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: macosmachine.GetAttrs}); err != nil {
		return MachineStorage{}, err
	}
	// Creates (whether POSTed or applied), deletes and the move to Failed
	// go through the identity ledger, which makes each in one transaction
	// with the index keys and the other objects it changes, and checks
	// there that the user may use the pool the machine draws from.
	store.Storage.Storage = ledger.MachineStorage(store.Storage.Storage, func(ctx context.Context, m *dockerio.MacOSMachine, pool string) error {
		return customverbs.Require(ctx, authz, customverbs.Use,
			customverbs.Target{Resource: "macosidentitypools", Name: pool},
			dockerio.Resource("macosmachines"), m.Name, "a machine draws an identity from its class's pool, which needs verb use on it")
	})
	return MachineStorage{Machine: &REST{Store: &ledgerstore.Store{Store: store}}, Status: statusrest.New(store, macosmachine.StatusStrategy)}, nil
}

func noFinish(context.Context, bool) {}

// mayRemoveTeardownFinalizer lets an update take the teardown finalizer off
// a machine being deleted only for a user who may update
// macosmachines/finalizers (the controller's role, and cluster admins; the
// permission kube-apiserver's OwnerReferencesPermissionEnforcement asks of
// whoever blocks an owner's deletion): taken off early, the machine goes
// before its VM is confirmed gone, and its identity with it (rules 6 and
// 9). On a machine not being deleted the strategy keeps it anyway.
func mayRemoveTeardownFinalizer(ctx context.Context, authz authorizer.Authorizer, m, old *dockerio.MacOSMachine) error {
	if old.DeletionTimestamp == nil || !slices.Contains(old.Finalizers, dockerio.MachineTeardownFinalizer) ||
		slices.Contains(m.Finalizers, dockerio.MachineTeardownFinalizer) {
		return nil
	}
	return customverbs.Require(ctx, authz, "update",
		customverbs.Target{Resource: "macosmachines", Subresource: "finalizers", Namespace: old.Namespace, Name: old.Name},
		dockerio.Resource("macosmachines"), old.Name,
		"removing "+dockerio.MachineTeardownFinalizer+" lets the machine go before its VirtualMachine is confirmed gone, and its identity with it; the controller removes it once the teardown is done")
}

// ShortNames lets `kubectl get mm` work.
func (r *REST) ShortNames() []string { return []string{"mm"} }

// Categories puts machines in `kubectl get dockerios`.
func (r *REST) Categories() []string { return []string{"dockerios"} }
