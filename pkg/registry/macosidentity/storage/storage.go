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

// Package storage wires the MacOSIdentity rules of package macosidentity to
// etcd through the generic registry store.
package storage

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/ledgerstore"
	"github.com/dockerios/dockerios/pkg/registry/macosidentity"
	"github.com/dockerios/dockerios/pkg/registry/statusrest"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
)

// REST serves macosidentities. Every write, dry runs included, goes through
// the identity ledger's storage (see package ledgerstore).
type REST struct {
	*ledgerstore.Store
}

// IdentityStorage bundles an identity's resource and subresources.
type IdentityStorage struct {
	Identity *REST
	Status   *statusrest.REST
}

var _ rest.ShortNamesProvider = &REST{}

// NewStorage returns the storage of macosidentities and their status.
func NewStorage(optsGetter generic.RESTOptionsGetter, ledger *identityledger.Ledger) (IdentityStorage, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &dockerio.MacOSIdentity{} },
		NewListFunc:               func() runtime.Object { return &dockerio.MacOSIdentityList{} },
		PredicateFunc:             macosidentity.Matcher,
		DefaultQualifiedResource:  dockerio.Resource("macosidentities"),
		SingularQualifiedResource: dockerio.Resource("macosidentity"),

		CreateStrategy:      macosidentity.Strategy,
		UpdateStrategy:      macosidentity.Strategy,
		DeleteStrategy:      macosidentity.Strategy,
		ResetFieldsStrategy: macosidentity.Strategy,

		TableConvertor: macosidentity.TableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: macosidentity.GetAttrs}); err != nil {
		return IdentityStorage{}, err
	}
	// Creates (whether POSTed or applied) and deletes go through the
	// identity ledger, which makes them in one transaction with the index
	// keys that keep values unique and the machine an identity is given to.
	store.Storage.Storage = ledger.IdentityStorage(store.Storage.Storage)
	return IdentityStorage{Identity: &REST{&ledgerstore.Store{Store: store}}, Status: statusrest.New(store, macosidentity.StatusStrategy)}, nil
}

// ShortNames lets `kubectl get mid` work. Identities are deliberately in no
// category: their values are sensitive, and `kubectl get dockerios` should
// not show them, or fail, for users who may only read machines.
func (r *REST) ShortNames() []string { return []string{"mid"} }
