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

// Package macosmachineclaim holds the rules the apiserver applies to
// MacOSMachineClaim writes, and how claims are printed and selected.
//
// Binding a claim to a machine is not written here: it changes the claim and
// the machine together, in the bind subresource. The status strategy keeps
// everyone else away from the fields bind owns.
package macosmachineclaim

import (
	"context"
	"fmt"

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

// claimStrategy implements the main resource's rules for MacOSMachineClaim.
type claimStrategy struct {
	defaultstrategy.Base
}

// Strategy is the logic for creating, updating and deleting claims. The
// spec is immutable: a claim may already be bound on its terms.
var Strategy = claimStrategy{defaultstrategy.New()}

var (
	_ rest.RESTCreateStrategy  = Strategy
	_ rest.RESTUpdateStrategy  = Strategy
	_ rest.RESTDeleteStrategy  = Strategy
	_ rest.ResetFieldsStrategy = Strategy
)

func (claimStrategy) NamespaceScoped() bool { return true }

// PrepareForCreate starts every claim Pending and unbound.
func (claimStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	c := obj.(*dockerio.MacOSMachineClaim)
	c.Status = dockerio.MacOSMachineClaimStatus{Phase: dockerio.ClaimPending}
	c.Generation = 1
}

func (claimStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	c, oldC := obj.(*dockerio.MacOSMachineClaim), old.(*dockerio.MacOSMachineClaim)
	c.Status = oldC.Status
}

func (claimStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateMacOSMachineClaim(obj.(*dockerio.MacOSMachineClaim))
}

func (claimStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMacOSMachineClaimUpdate(obj.(*dockerio.MacOSMachineClaim), old.(*dockerio.MacOSMachineClaim))
}

// claimStatusStrategy implements the status subresource's rules.
type claimStatusStrategy struct {
	claimStrategy
}

// StatusStrategy is the logic for writes to macosmachineclaims/status. The
// bound machine and bound time are written only by bind, in the same
// transaction as the machine's claimRef, so that claim and machine never
// disagree about who holds whom.
var StatusStrategy = claimStatusStrategy{Strategy}

func (claimStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return defaultstrategy.StatusResetFields(
		fieldpath.MakePathOrDie("status", "machineName"),
		fieldpath.MakePathOrDie("status", "boundTime"),
	)
}

func (claimStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	c, oldC := obj.(*dockerio.MacOSMachineClaim), old.(*dockerio.MacOSMachineClaim)
	c.Spec = oldC.Spec
	defaultstrategy.KeepMetadataOnStatusWrite(c, oldC)
	c.Status.MachineName = oldC.Status.MachineName
	c.Status.BoundTime = oldC.Status.BoundTime
}

func (claimStatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMacOSMachineClaimStatusUpdate(obj.(*dockerio.MacOSMachineClaim), old.(*dockerio.MacOSMachineClaim))
}

// GetAttrs returns a claim's labels and the fields it can be selected by.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	c, ok := obj.(*dockerio.MacOSMachineClaim)
	if !ok {
		return nil, nil, fmt.Errorf("not a MacOSMachineClaim: %T", obj)
	}
	return c.Labels, SelectableFields(c), nil
}

// SelectableFields returns the fields of a claim that field selectors match
// against; v1alpha1.SelectableFields lists the same keys.
func SelectableFields(c *dockerio.MacOSMachineClaim) fields.Set {
	return generic.AddObjectMetaFieldsSet(fields.Set{
		"spec.poolName":      c.Spec.PoolName,
		"spec.className":     c.Spec.ClassName,
		"status.phase":       string(c.Status.Phase),
		"status.machineName": c.Status.MachineName,
	}, &c.ObjectMeta, true)
}

// Matcher selects claims by label and field.
func Matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
