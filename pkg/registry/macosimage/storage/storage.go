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

// Package storage wires the MacOSImage rules of package macosimage to etcd
// through the generic registry store.
package storage

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/macosimage"
	"github.com/dockerios/dockerios/pkg/registry/statusrest"
)

// REST serves macosimages.
type REST struct {
	*genericregistry.Store
}

// ImageStorage bundles an image's resource and subresources.
type ImageStorage struct {
	Image  *REST
	Status *statusrest.REST
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// NewStorage returns the storage of macosimages and their status.
func NewStorage(optsGetter generic.RESTOptionsGetter) (ImageStorage, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &dockerio.MacOSImage{} },
		NewListFunc:               func() runtime.Object { return &dockerio.MacOSImageList{} },
		PredicateFunc:             macosimage.Matcher,
		DefaultQualifiedResource:  dockerio.Resource("macosimages"),
		SingularQualifiedResource: dockerio.Resource("macosimage"),

		CreateStrategy:      macosimage.Strategy,
		UpdateStrategy:      macosimage.Strategy,
		DeleteStrategy:      macosimage.Strategy,
		ResetFieldsStrategy: macosimage.Strategy,

		TableConvertor: macosimage.TableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: macosimage.GetAttrs}); err != nil {
		return ImageStorage{}, err
	}
	return ImageStorage{Image: &REST{store}, Status: statusrest.New(store, macosimage.StatusStrategy)}, nil
}

// ShortNames lets `kubectl get mimg` work.
func (r *REST) ShortNames() []string { return []string{"mimg"} }

// Categories puts images in `kubectl get dockerios`.
func (r *REST) Categories() []string { return []string{"dockerios"} }
