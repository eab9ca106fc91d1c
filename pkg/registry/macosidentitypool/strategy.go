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

// Package macosidentitypool holds the rules the apiserver applies to
// MacOSIdentityPool writes, and how pools are printed and selected.
package macosidentitypool

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/validation"
	"github.com/dockerios/dockerios/pkg/registry/defaultstrategy"
)

// poolStrategy implements the main resource's rules for MacOSIdentityPool.
type poolStrategy struct {
	defaultstrategy.Base
}

// Strategy is the logic for creating, updating and deleting identity pools.
// The model is fixed at create: every identity in the pool was made for it.
var Strategy = poolStrategy{defaultstrategy.New()}

var (
	_ rest.RESTCreateStrategy  = Strategy
	_ rest.RESTUpdateStrategy  = Strategy
	_ rest.RESTDeleteStrategy  = Strategy
	_ rest.ResetFieldsStrategy = Strategy
)

func (poolStrategy) NamespaceScoped() bool { return false }

func (poolStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	p := obj.(*dockerio.MacOSIdentityPool)
	p.Status = dockerio.MacOSIdentityPoolStatus{}
	p.Generation = 1
}

func (poolStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	p, oldP := obj.(*dockerio.MacOSIdentityPool), old.(*dockerio.MacOSIdentityPool)
	p.Status = oldP.Status
	if !apiequality.Semantic.DeepEqual(p.Spec, oldP.Spec) {
		p.Generation = oldP.Generation + 1
	}
}

func (poolStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateMacOSIdentityPool(obj.(*dockerio.MacOSIdentityPool))
}

func (poolStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMacOSIdentityPoolUpdate(obj.(*dockerio.MacOSIdentityPool), old.(*dockerio.MacOSIdentityPool))
}

// poolStatusStrategy implements the status subresource's rules.
type poolStatusStrategy struct {
	poolStrategy
}

// StatusStrategy is the logic for writes to macosidentitypools/status: the
// counts of total, free, allocated and pending.
var StatusStrategy = poolStatusStrategy{Strategy}

func (poolStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return defaultstrategy.StatusResetFields()
}

func (poolStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	p, oldP := obj.(*dockerio.MacOSIdentityPool), old.(*dockerio.MacOSIdentityPool)
	p.Spec = oldP.Spec
	defaultstrategy.KeepMetadataOnStatusWrite(p, oldP)
}

func (poolStatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMacOSIdentityPoolStatusUpdate(obj.(*dockerio.MacOSIdentityPool), old.(*dockerio.MacOSIdentityPool))
}

// GetAttrs returns a pool's labels and the fields it can be selected by.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	p, ok := obj.(*dockerio.MacOSIdentityPool)
	if !ok {
		return nil, nil, fmt.Errorf("not a MacOSIdentityPool: %T", obj)
	}
	return p.Labels, SelectableFields(p), nil
}

// SelectableFields returns the fields of a pool that field selectors match
// against; v1alpha1.SelectableFields lists the same keys.
func SelectableFields(p *dockerio.MacOSIdentityPool) fields.Set {
	return generic.AddObjectMetaFieldsSet(fields.Set{"spec.model": p.Spec.Model}, &p.ObjectMeta, false)
}

// Matcher selects pools by label and field.
func Matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
