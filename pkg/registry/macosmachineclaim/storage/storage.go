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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/macosmachineclaim"
	"github.com/dockerios/dockerios/pkg/registry/statusrest"
)

// REST serves macosmachineclaims.
type REST struct {
	*genericregistry.Store
}

// ClaimStorage bundles a claim's resource and subresources.
type ClaimStorage struct {
	Claim  *REST
	Status *statusrest.REST
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// NewStorage returns the storage of macosmachineclaims and their status.
func NewStorage(optsGetter generic.RESTOptionsGetter) (ClaimStorage, error) {
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
	return ClaimStorage{Claim: &REST{store}, Status: statusrest.New(store, macosmachineclaim.StatusStrategy)}, nil
}

// ShortNames lets `kubectl get mmclaim` work.
func (r *REST) ShortNames() []string { return []string{"mmclaim"} }

// Categories puts claims in `kubectl get dockerios`.
func (r *REST) Categories() []string { return []string{"dockerios"} }
