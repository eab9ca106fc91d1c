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

// Package storage wires the MacOSMachineClass rules of package
// macosmachineclass to etcd through the generic registry store.
package storage

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/macosmachineclass"
	"github.com/dockerios/dockerios/pkg/registry/statusrest"
)

// REST serves macosmachineclasses.
type REST struct {
	*genericregistry.Store
}

// ClassStorage bundles a class's resource and subresources.
type ClassStorage struct {
	Class  *REST
	Status *statusrest.REST
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// NewStorage returns the storage of macosmachineclasses and their status.
// images, when not nil, reads the image a class names, so that a class
// whose model cannot run that image's release is refused.
func NewStorage(optsGetter generic.RESTOptionsGetter, images macosmachineclass.ImageGetter) (ClassStorage, error) {
	strategy := macosmachineclass.Strategy.WithImages(images)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &dockerio.MacOSMachineClass{} },
		NewListFunc:               func() runtime.Object { return &dockerio.MacOSMachineClassList{} },
		PredicateFunc:             macosmachineclass.Matcher,
		DefaultQualifiedResource:  dockerio.Resource("macosmachineclasses"),
		SingularQualifiedResource: dockerio.Resource("macosmachineclass"),

		CreateStrategy:      strategy,
		UpdateStrategy:      strategy,
		DeleteStrategy:      strategy,
		ResetFieldsStrategy: strategy,

		TableConvertor: macosmachineclass.TableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: macosmachineclass.GetAttrs}); err != nil {
		return ClassStorage{}, err
	}
	return ClassStorage{Class: &REST{store}, Status: statusrest.New(store, macosmachineclass.StatusStrategy)}, nil
}

// ShortNames lets `kubectl get mmclass` work.
func (r *REST) ShortNames() []string { return []string{"mmclass"} }

// Categories puts classes in `kubectl get dockerios`.
func (r *REST) Categories() []string { return []string{"dockerios"} }
