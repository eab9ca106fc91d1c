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

// Package macosmachine holds the rules the apiserver applies to MacOSMachine
// writes: what a create and an update may change, what the status
// subresource may change, how machines are printed and selected.
//
// Identity allocation and binding are not written here: they change a
// machine together with another object, and live in the transactional
// storage layer. The status strategy keeps users and the controller away
// from the fields that layer owns.
package macosmachine

import (
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/api/meta"
	"slices"

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

// machineStrategy implements the main resource's rules for MacOSMachine.
type machineStrategy struct {
	defaultstrategy.Base
}

// Strategy is the logic for creating, updating and deleting MacOSMachine
// objects through the main resource. It never writes status: status is what
// the controller observed, and reaches storage only through StatusStrategy.
var Strategy = machineStrategy{defaultstrategy.New()}

var (
	_ rest.RESTCreateStrategy  = Strategy
	_ rest.RESTUpdateStrategy  = Strategy
	_ rest.RESTDeleteStrategy  = Strategy
	_ rest.ResetFieldsStrategy = Strategy
)

func (machineStrategy) NamespaceScoped() bool { return true }

// PrepareForCreate starts every machine Pending with no observed status and
// with the teardown finalizer, so that no machine can vanish before its VM,
// volumes and identity have been released.
func (machineStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	m := obj.(*dockerio.MacOSMachine)
	m.Status = dockerio.MacOSMachineStatus{Phase: dockerio.MachinePending}
	m.Generation = 1
	if !slices.Contains(m.Finalizers, dockerio.MachineTeardownFinalizer) {
		m.Finalizers = append(m.Finalizers, dockerio.MachineTeardownFinalizer)
	}
	if _, ok := m.Labels[dockerio.MachinePoolLabel]; !ok && m.Spec.PoolName != "" {
		// The label its pool counts it by, defaulted from spec.poolName
		// (validation holds the two together).
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[dockerio.MachinePoolLabel] = m.Spec.PoolName
	}
}

// PrepareForUpdate keeps the stored status and counts spec changes in the
// generation (validation then refuses them: the spec is immutable). The
// teardown finalizer stays on a machine that is not being deleted,
// whatever the request carried (rule 6): removed from a live machine, its
// delete would skip the teardown and free its identity at once, while its
// VM may still run. Once the machine is being deleted it may go (the
// controller removes it when its teardown is done).
func (machineStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	m, oldM := obj.(*dockerio.MacOSMachine), old.(*dockerio.MacOSMachine)
	m.Status = oldM.Status
	if oldM.DeletionTimestamp == nil && slices.Contains(oldM.Finalizers, dockerio.MachineTeardownFinalizer) &&
		!slices.Contains(m.Finalizers, dockerio.MachineTeardownFinalizer) {
		m.Finalizers = append(m.Finalizers, dockerio.MachineTeardownFinalizer)
	}
	if !apiequality.Semantic.DeepEqual(m.Spec, oldM.Spec) {
		m.Generation = oldM.Generation + 1
	}
}

func (machineStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateMacOSMachine(obj.(*dockerio.MacOSMachine))
}

func (machineStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMacOSMachineUpdate(obj.(*dockerio.MacOSMachine), old.(*dockerio.MacOSMachine))
}

// machineStatusStrategy implements the status subresource's rules.
type machineStatusStrategy struct {
	machineStrategy
}

// StatusStrategy is the logic for writes to macosmachines/status. It may
// change only what the controller observes; the identity and claim
// references belong to the allocator and to bind, which change them in the
// same transaction as the identity or the claim.
var StatusStrategy = machineStatusStrategy{Strategy}

var _ rest.ResetFieldsStrategy = StatusStrategy

func (machineStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return defaultstrategy.StatusResetFields(
		fieldpath.MakePathOrDie("status", "identityRef"),
		fieldpath.MakePathOrDie("status", "claimRef"),
		fieldpath.MakePathOrDie("status", "classSnapshot"),
	)
}

func (machineStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	m, oldM := obj.(*dockerio.MacOSMachine), old.(*dockerio.MacOSMachine)
	m.Spec = oldM.Spec
	defaultstrategy.KeepMetadataOnStatusWrite(m, oldM)
	m.Status.IdentityRef = oldM.Status.IdentityRef
	m.Status.ClaimRef = oldM.Status.ClaimRef
	// The class snapshot is what the machine is made of: recorded at
	// create, never rewritten.
	m.Status.ClassSnapshot = oldM.Status.ClassSnapshot
	// Released belongs to claim deletion, like claimRef: a status write
	// can neither set nor clear it.
	meta.RemoveStatusCondition(&m.Status.Conditions, dockerio.MachineReleased)
	if c := meta.FindStatusCondition(oldM.Status.Conditions, dockerio.MachineReleased); c != nil {
		m.Status.Conditions = append(m.Status.Conditions, *c)
	}
}

func (machineStatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMacOSMachineStatusUpdate(obj.(*dockerio.MacOSMachine), old.(*dockerio.MacOSMachine))
}

// GetAttrs returns a machine's labels and the fields it can be selected by.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, ok := obj.(*dockerio.MacOSMachine)
	if !ok {
		return nil, nil, fmt.Errorf("not a MacOSMachine: %T", obj)
	}
	return m.Labels, SelectableFields(m), nil
}

// SelectableFields returns the fields of a machine that field selectors
// match against; v1alpha1.SelectableFields lists the same keys.
func SelectableFields(m *dockerio.MacOSMachine) fields.Set {
	set := fields.Set{
		"spec.className":          m.Spec.ClassName,
		"spec.poolName":           m.Spec.PoolName,
		"status.phase":            string(m.Status.Phase),
		"status.identityRef.name": "",
		"status.claimRef.name":    "",
		"status.nodeName":         m.Status.NodeName,
	}
	if ref := m.Status.IdentityRef; ref != nil {
		set["status.identityRef.name"] = ref.Name
	}
	if ref := m.Status.ClaimRef; ref != nil {
		set["status.claimRef.name"] = ref.Name
	}
	return generic.AddObjectMetaFieldsSet(set, &m.ObjectMeta, true)
}

// Matcher selects machines by label and field.
func Matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
