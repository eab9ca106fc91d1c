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

// Package storage wires the MacOSIdentityPool rules of package
// macosidentitypool to etcd through the generic registry store.
package storage

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/macosidentitypool"
	"github.com/dockerios/dockerios/pkg/registry/statusrest"
)

// REST serves macosidentitypools.
type REST struct {
	*genericregistry.Store
}

// IdentityPoolStorage bundles an identity pool's resource and subresources.
type IdentityPoolStorage struct {
	Pool   *REST
	Status *statusrest.REST
	Hold   *HoldREST
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// NewStorage returns the storage of macosidentitypools and their status.
func NewStorage(optsGetter generic.RESTOptionsGetter, lifter HoldLifter) (IdentityPoolStorage, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &dockerio.MacOSIdentityPool{} },
		NewListFunc:               func() runtime.Object { return &dockerio.MacOSIdentityPoolList{} },
		PredicateFunc:             macosidentitypool.Matcher,
		DefaultQualifiedResource:  dockerio.Resource("macosidentitypools"),
		SingularQualifiedResource: dockerio.Resource("macosidentitypool"),

		CreateStrategy:      macosidentitypool.Strategy,
		UpdateStrategy:      macosidentitypool.Strategy,
		DeleteStrategy:      macosidentitypool.Strategy,
		ResetFieldsStrategy: macosidentitypool.Strategy,

		TableConvertor: macosidentitypool.TableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: macosidentitypool.GetAttrs}); err != nil {
		return IdentityPoolStorage{}, err
	}
	return IdentityPoolStorage{Pool: &REST{store}, Status: statusrest.New(store, macosidentitypool.StatusStrategy), Hold: &HoldREST{pools: store, lifter: lifter}}, nil
}

// ShortNames lets `kubectl get mipool` work.
func (r *REST) ShortNames() []string { return []string{"mipool"} }

// Categories puts identity pools in `kubectl get dockerios`.
func (r *REST) Categories() []string { return []string{"dockerios"} }
