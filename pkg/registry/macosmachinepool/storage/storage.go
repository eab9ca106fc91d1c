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

// Package storage wires the MacOSMachinePool rules of package
// macosmachinepool to etcd through the generic registry store, and serves
// the pool's scale subresource so that `kubectl scale` and autoscalers work.
package storage

import (
	"context"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/registry/customverbs"
	"github.com/dockerios/dockerios/pkg/registry/macosmachinepool"
	"github.com/dockerios/dockerios/pkg/registry/statusrest"
)

// REST serves macosmachinepools.
type REST struct {
	*genericregistry.Store
	classes    customverbs.ClassPools
	authorizer authorizer.Authorizer
}

// ScaleREST serves macosmachinepools/scale.
type ScaleREST struct {
	store *genericregistry.Store
}

// PoolStorage bundles a pool's resource and subresources.
type PoolStorage struct {
	Pool   *REST
	Status *statusrest.REST
	Scale  *ScaleREST
}

var (
	_ rest.ShortNamesProvider       = &REST{}
	_ rest.CategoriesProvider       = &REST{}
	_ rest.Patcher                  = &ScaleREST{}
	_ rest.GroupVersionKindProvider = &ScaleREST{}
)

// NewStorage returns the storage of macosmachinepools, their status and scale.
func NewStorage(optsGetter generic.RESTOptionsGetter, classes customverbs.ClassPools, authz authorizer.Authorizer) (PoolStorage, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &dockerio.MacOSMachinePool{} },
		NewListFunc:               func() runtime.Object { return &dockerio.MacOSMachinePoolList{} },
		PredicateFunc:             macosmachinepool.Matcher,
		DefaultQualifiedResource:  dockerio.Resource("macosmachinepools"),
		SingularQualifiedResource: dockerio.Resource("macosmachinepool"),

		CreateStrategy:      macosmachinepool.Strategy,
		UpdateStrategy:      macosmachinepool.Strategy,
		DeleteStrategy:      macosmachinepool.Strategy,
		ResetFieldsStrategy: macosmachinepool.Strategy,

		TableConvertor: macosmachinepool.TableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: macosmachinepool.GetAttrs}); err != nil {
		return PoolStorage{}, err
	}
	return PoolStorage{
		Pool:   &REST{Store: store, classes: classes, authorizer: authz},
		Status: statusrest.New(store, macosmachinepool.StatusStrategy),
		Scale:  &ScaleREST{store: store},
	}, nil
}

// Create creates a pool if its user may use the identity pool its class
// draws from: the pool's machines will hold identities from it. The check
// runs after validation, so a malformed pool gets its 422 first.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	return r.Store.Create(ctx, obj, r.checkingUse(createValidation), options)
}

// Update updates a pool. Server-side apply of a pool that does not exist
// creates it here, and is checked exactly as Create is; a pool's class is
// immutable, so no update changes what its machines draw from.
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.Store.Update(ctx, name, objInfo, r.checkingUse(createValidation), updateValidation, forceAllowCreate, options)
}

// checkingUse is createValidation preceded by the check of verb use on
// the class's identity pool: the generic store calls it on every path that
// creates a pool.
func (r *REST) checkingUse(createValidation rest.ValidateObjectFunc) rest.ValidateObjectFunc {
	return func(ctx context.Context, obj runtime.Object) error {
		p := obj.(*dockerio.MacOSMachinePool)
		identityPool, err := r.classes.IdentityPoolOf(ctx, dockerio.Kind("MacOSMachinePool"), p.Name, p.Spec.ClassName)
		if err != nil {
			return err
		}
		if err := customverbs.Require(ctx, r.authorizer, customverbs.Use,
			customverbs.Target{Resource: "macosidentitypools", Name: identityPool},
			dockerio.Resource("macosmachinepools"), p.Name, "a pool's machines draw identities from its class's pool, which needs verb use on it"); err != nil {
			return err
		}
		if createValidation != nil {
			return createValidation(ctx, obj)
		}
		return nil
	}
}

// ShortNames lets `kubectl get mmpool` work.
func (r *REST) ShortNames() []string { return []string{"mmpool"} }

// Categories puts pools in `kubectl get dockerios`.
func (r *REST) Categories() []string { return []string{"dockerios"} }

// replicasPath says where a Scale's spec.replicas lives in a pool, so that
// field ownership moves between the two (a manager scaling through /scale
// owns the pool's spec.replicas afterwards).
var replicasPath = managedfields.ResourcePathMappings{
	v1alpha1.SchemeGroupVersion.String(): fieldpath.MakePathOrDie("spec", "replicas"),
}

// GroupVersionKind says the subresource speaks autoscaling/v1 Scale.
func (r *ScaleREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

// New returns an empty Scale.
func (r *ScaleREST) New() runtime.Object { return &autoscalingv1.Scale{} }

// Destroy does nothing: the store is shared with the main resource.
func (r *ScaleREST) Destroy() {}

// Get returns the pool's scale.
func (r *ScaleREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.store.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	return scaleFromPool(obj.(*dockerio.MacOSMachinePool)), nil
}

// Update changes the pool's spec.replicas through its scale. The pool's own
// validation still runs, so a scale past maxMachines is refused with the
// pool's field path.
func (r *ScaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	obj, _, err := r.store.Update(ctx, name,
		&scaleUpdatedObjectInfo{name: name, reqObjInfo: objInfo},
		toScaleCreateValidation(createValidation),
		toScaleUpdateValidation(updateValidation),
		false, options)
	if err != nil {
		return nil, false, err
	}
	return scaleFromPool(obj.(*dockerio.MacOSMachinePool)), false, nil
}

// ConvertToTable prints the pool the way the main resource does.
func (r *ScaleREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

func toScaleCreateValidation(f rest.ValidateObjectFunc) rest.ValidateObjectFunc {
	return func(ctx context.Context, obj runtime.Object) error {
		return f(ctx, scaleFromPool(obj.(*dockerio.MacOSMachinePool)))
	}
}

func toScaleUpdateValidation(f rest.ValidateObjectUpdateFunc) rest.ValidateObjectUpdateFunc {
	return func(ctx context.Context, obj, old runtime.Object) error {
		return f(ctx, scaleFromPool(obj.(*dockerio.MacOSMachinePool)), scaleFromPool(old.(*dockerio.MacOSMachinePool)))
	}
}

func scaleFromPool(p *dockerio.MacOSMachinePool) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         p.Namespace,
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			CreationTimestamp: p.CreationTimestamp,
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: ptr.Deref(p.Spec.Replicas, 0)},
		Status: autoscalingv1.ScaleStatus{Replicas: p.Status.Replicas, Selector: macosmachinepool.Selector(p.Name).String()},
	}
}

// scaleUpdatedObjectInfo turns the stored pool into its scale, lets the
// request change that scale, and carries the new replicas back to the pool.
type scaleUpdatedObjectInfo struct {
	name       string
	reqObjInfo rest.UpdatedObjectInfo
}

func (i *scaleUpdatedObjectInfo) Preconditions() *metav1.Preconditions {
	return i.reqObjInfo.Preconditions()
}

func (i *scaleUpdatedObjectInfo) UpdatedObject(ctx context.Context, oldObj runtime.Object) (runtime.Object, error) {
	pool, ok := oldObj.DeepCopyObject().(*dockerio.MacOSMachinePool)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a MacOSMachinePool, got %T", oldObj))
	}
	if pool.ResourceVersion == "" {
		return nil, apierrors.NewNotFound(dockerio.Resource("macosmachinepools/scale"), i.name)
	}

	managedFieldsHandler := managedfields.NewScaleHandler(pool.ManagedFields, v1alpha1.SchemeGroupVersion, replicasPath)
	oldScale := scaleFromPool(pool)
	scaleManagedFields, err := managedFieldsHandler.ToSubresource()
	if err != nil {
		return nil, err
	}
	oldScale.ManagedFields = scaleManagedFields

	newObj, err := i.reqObjInfo.UpdatedObject(ctx, oldScale)
	if err != nil {
		return nil, err
	}
	scale, ok := newObj.(*autoscalingv1.Scale)
	if !ok || scale == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected an autoscaling/v1 Scale, got %T", newObj))
	}
	if errs := validateScale(scale); len(errs) > 0 {
		return nil, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), pool.Name, errs)
	}
	if scale.UID != "" && scale.UID != pool.UID {
		return nil, apierrors.NewConflict(dockerio.Resource("macosmachinepools/scale"), pool.Name,
			fmt.Errorf("precondition failed: uid in scale %s does not match pool uid %s", scale.UID, pool.UID))
	}

	pool.Spec.Replicas = ptr.To(scale.Spec.Replicas)
	pool.ResourceVersion = scale.ResourceVersion
	if pool.ManagedFields, err = managedFieldsHandler.ToParent(scale.ManagedFields); err != nil {
		return nil, err
	}
	return pool, nil
}

func validateScale(scale *autoscalingv1.Scale) field.ErrorList {
	allErrs := metav1validation.ValidateManagedFields(scale.ManagedFields, field.NewPath("metadata", "managedFields"))
	allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(scale.Spec.Replicas), field.NewPath("spec", "replicas"))...)
	return allErrs
}
