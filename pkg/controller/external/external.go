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

// Package external reads and writes the kinds DockerIOS drives but does not
// own — KubeVirt's VirtualMachine and VirtualMachineInstance and CDI's
// DataVolume — with the typed structs of kubevirt.io/api and
// kubevirt.io/containerized-data-importer-api over a dynamic client:
// those modules ship types, not clientsets, and a dynamic client keeps
// KubeVirt's and CDI's client libraries (and their dependency trees) out
// of the controller.
package external

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// The resources, at the versions DockerIOS speaks.
var (
	VirtualMachines         = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	VirtualMachineInstances = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
	DataVolumes             = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}
	DataSources             = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datasources"}
)

// FromUnstructured converts to a typed object.
func FromUnstructured[T any](u *unstructured.Unstructured) (*T, error) {
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("decoding %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return out, nil
}

// ToUnstructured converts a typed object (with its TypeMeta set).
func ToUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// Get reads namespace/name from a dynamic informer's lister; nil when absent.
func Get[T any](l cache.GenericLister, namespace, name string) (*T, error) {
	obj, err := l.ByNamespace(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%s/%s: unexpected %T in the cache", namespace, name, obj)
	}
	return FromUnstructured[T](u)
}

// Object is a typed object with metadata.
type Object interface {
	GetNamespace() string
	GetName() string
}

// Create creates obj. kube-apiserver is asked for strict field validation:
// by default it drops a field KubeVirt's or CDI's schema does not have
// without a word, and the VM would run without it.
func Create(ctx context.Context, c dynamic.Interface, gvr schema.GroupVersionResource, obj Object) error {
	u, err := ToUnstructured(obj)
	if err != nil {
		return err
	}
	_, err = c.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, u, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	return err
}

// Delete deletes namespace/name if it still has uid; absent is success.
func Delete(ctx context.Context, c dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string, uid string) error {
	opts := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	if uid != "" {
		u := types.UID(uid)
		opts.Preconditions = &metav1.Preconditions{UID: &u}
	}
	err := c.Resource(gvr).Namespace(namespace).Delete(ctx, name, opts)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
