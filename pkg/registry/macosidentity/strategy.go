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

// Package macosidentity holds the rules the apiserver applies to
// MacOSIdentity writes, and how identities are printed and selected.
//
// Uniqueness of identity values and allocation to machines are not decided
// here: they need other objects and are enforced by the transactional
// storage layer. This package makes sure every value reaches that layer in
// one canonical spelling, and keeps the allocation out of users' hands.
package macosidentity

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/validation"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/pkg/registry/defaultstrategy"
)

// identityStrategy implements the main resource's rules for MacOSIdentity.
type identityStrategy struct {
	defaultstrategy.Base
}

// Strategy is the logic for creating, updating and deleting identities. The
// spec is immutable: a machine may already boot with its values.
var Strategy = identityStrategy{defaultstrategy.New()}

var (
	_ rest.RESTCreateStrategy  = Strategy
	_ rest.RESTUpdateStrategy  = Strategy
	_ rest.RESTDeleteStrategy  = Strategy
	_ rest.ResetFieldsStrategy = Strategy
)

func (identityStrategy) NamespaceScoped() bool { return false }

// PrepareForCreate drops any allocation the request carried (only the
// allocator allocates) and canonicalizes the values, so that "aa:bb…" and
// "AA:BB…" can never both be stored.
func (identityStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	id := obj.(*dockerio.MacOSIdentity)
	id.Status = dockerio.MacOSIdentityStatus{}
	id.Generation = 1
	canonicalize(&id.Spec)
}

// PrepareForUpdate keeps the stored status, and canonicalizes the incoming
// spec so that re-applying the original manifest is not mistaken for a change.
func (identityStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	id, oldID := obj.(*dockerio.MacOSIdentity), old.(*dockerio.MacOSIdentity)
	id.Status = oldID.Status
	canonicalize(&id.Spec)
}

func canonicalize(s *dockerio.MacOSIdentitySpec) {
	s.SystemUUID = identity.CanonicalSystemUUID(s.SystemUUID)
	s.MACAddress = identity.CanonicalMACAddress(s.MACAddress)
	s.ROM = identity.CanonicalROM(s.ROM)
}

func (identityStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateMacOSIdentity(obj.(*dockerio.MacOSIdentity))
}

func (identityStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMacOSIdentityUpdate(obj.(*dockerio.MacOSIdentity), old.(*dockerio.MacOSIdentity))
}

// identityStatusStrategy implements the status subresource's rules.
type identityStatusStrategy struct {
	identityStrategy
}

// StatusStrategy is the logic for writes to macosidentities/status. The
// allocation is written only by the allocator, in the same etcd transaction
// as the machine that takes or gives back the identity; a status write can
// never move an identity between machines. Quarantined is the identity
// ledger repair's: a status write can neither quarantine an identity nor
// lift a quarantine, which would let a duplicate be allocated. The one
// condition a status write sets is HeldOutsideLedger: the controller, which
// alone sees the VMs that run, reports an identity in use by a VM the
// ledger does not know of (and that it is gone again); the identity ledger
// takes the identity off, or puts it back on, its pool's free list in the
// same transaction.
var StatusStrategy = identityStatusStrategy{Strategy}

func (identityStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return defaultstrategy.StatusResetFields(
		fieldpath.MakePathOrDie("status", "allocation"),
	)
}

func (identityStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	id, oldID := obj.(*dockerio.MacOSIdentity), old.(*dockerio.MacOSIdentity)
	id.Spec = oldID.Spec
	defaultstrategy.KeepMetadataOnStatusWrite(id, oldID)
	id.Status.Allocation = oldID.Status.Allocation
	conditions := append([]metav1.Condition(nil), oldID.Status.Conditions...)
	if c := meta.FindStatusCondition(id.Status.Conditions, v1alpha1.IdentityHeldOutsideLedger); c != nil {
		// SetStatusCondition keeps the transition time of an unchanged
		// status, and stamps a changed one that came without.
		meta.SetStatusCondition(&conditions, *c)
	} else {
		meta.RemoveStatusCondition(&conditions, v1alpha1.IdentityHeldOutsideLedger)
	}
	id.Status.Conditions = conditions
}

func (identityStatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMacOSIdentityStatusUpdate(obj.(*dockerio.MacOSIdentity), old.(*dockerio.MacOSIdentity))
}

// GetAttrs returns an identity's labels and the fields it can be selected by.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	id, ok := obj.(*dockerio.MacOSIdentity)
	if !ok {
		return nil, nil, fmt.Errorf("not a MacOSIdentity: %T", obj)
	}
	return id.Labels, SelectableFields(id), nil
}

// SelectableFields returns the fields of an identity that field selectors
// match against; v1alpha1.SelectableFields lists the same keys.
// status.allocated ("true"/"false") lets `kubectl get mid
// --field-selector status.allocated=false` list the free identities.
func SelectableFields(id *dockerio.MacOSIdentity) fields.Set {
	set := fields.Set{
		"spec.poolName":                      id.Spec.PoolName,
		"spec.model":                         id.Spec.Model,
		"spec.serialNumber":                  id.Spec.SerialNumber,
		"spec.macAddress":                    id.Spec.MACAddress,
		"status.allocated":                   strconv.FormatBool(id.Status.Allocation != nil),
		"status.allocation.machineNamespace": "",
		"status.allocation.machineName":      "",
		"status.allocation.machineUID":       "",
	}
	if a := id.Status.Allocation; a != nil {
		set["status.allocation.machineNamespace"] = a.MachineNamespace
		set["status.allocation.machineName"] = a.MachineName
		set["status.allocation.machineUID"] = a.MachineUID
	}
	return generic.AddObjectMetaFieldsSet(set, &id.ObjectMeta, false)
}

// Matcher selects identities by label and field.
func Matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
