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

// Package macosmachinepool holds the rules the apiserver applies to
// MacOSMachinePool writes, and how pools are printed, selected and scaled.
package macosmachinepool

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

// poolStrategy implements the main resource's rules for MacOSMachinePool.
type poolStrategy struct {
	defaultstrategy.Base
}

// Strategy is the logic for creating, updating and deleting machine pools.
// Replicas, the cap and the template may change; the class may not, since
// the pool's machines were made from it.
var Strategy = poolStrategy{defaultstrategy.New()}

var (
	_ rest.RESTCreateStrategy  = Strategy
	_ rest.RESTUpdateStrategy  = Strategy
	_ rest.RESTDeleteStrategy  = Strategy
	_ rest.ResetFieldsStrategy = Strategy
)

func (poolStrategy) NamespaceScoped() bool { return true }

// PrepareForCreate starts with empty counts and the selector of the pool's
// machines, so that the scale subresource and HPA work before the
// controller first reports.
func (poolStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	p := obj.(*dockerio.MacOSMachinePool)
	p.Status = dockerio.MacOSMachinePoolStatus{Selector: Selector(p.Name).String()}
	p.Generation = 1
}

func (poolStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	p, oldP := obj.(*dockerio.MacOSMachinePool), old.(*dockerio.MacOSMachinePool)
	p.Status = oldP.Status
	if !apiequality.Semantic.DeepEqual(p.Spec, oldP.Spec) {
		p.Generation = oldP.Generation + 1
	}
}

func (poolStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateMacOSMachinePool(obj.(*dockerio.MacOSMachinePool))
}

func (poolStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMacOSMachinePoolUpdate(obj.(*dockerio.MacOSMachinePool), old.(*dockerio.MacOSMachinePool))
}

// poolStatusStrategy implements the status subresource's rules.
type poolStatusStrategy struct {
	poolStrategy
}

// StatusStrategy is the logic for writes to macosmachinepools/status, where
// the controller counts the pool's machines. The selector is not the
// controller's to choose: it follows from the pool's name.
var StatusStrategy = poolStatusStrategy{Strategy}

func (poolStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return defaultstrategy.StatusResetFields(fieldpath.MakePathOrDie("status", "selector"))
}

func (poolStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	p, oldP := obj.(*dockerio.MacOSMachinePool), old.(*dockerio.MacOSMachinePool)
	p.Spec = oldP.Spec
	defaultstrategy.KeepMetadataOnStatusWrite(p, oldP)
	p.Status.Selector = Selector(p.Name).String()
}

func (poolStatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMacOSMachinePoolStatusUpdate(obj.(*dockerio.MacOSMachinePool), old.(*dockerio.MacOSMachinePool))
}

// Selector selects the machines of the pool named name.
func Selector(name string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{dockerio.MachinePoolLabel: name})
}

// GetAttrs returns a pool's labels and the fields it can be selected by.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	p, ok := obj.(*dockerio.MacOSMachinePool)
	if !ok {
		return nil, nil, fmt.Errorf("not a MacOSMachinePool: %T", obj)
	}
	return p.Labels, SelectableFields(p), nil
}

// SelectableFields returns the fields of a pool that field selectors match
// against; v1alpha1.SelectableFields lists the same keys.
func SelectableFields(p *dockerio.MacOSMachinePool) fields.Set {
	return generic.AddObjectMetaFieldsSet(fields.Set{"spec.className": p.Spec.ClassName}, &p.ObjectMeta, true)
}

// Matcher selects pools by label and field.
func Matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
