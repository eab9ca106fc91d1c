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

// Package defaultstrategy holds the answers every dockerios.io registry
// strategy gives the same way, so that each kind's strategy.go says only
// what is particular to that kind.
package defaultstrategy

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/dockerios/dockerios/pkg/scheme"
)

// apiVersion is the served version whose fields the reset sets name.
const apiVersion fieldpath.APIVersion = "dockerios.io/v1alpha1"

// Base is embedded by every strategy. Its answers:
//   - objects are typed by the server's scheme and named by generateName as usual;
//   - a PUT never creates (create is its own verb, with its own checks);
//   - updates without a resourceVersion are allowed, as for built-in kinds;
//   - nothing needs canonicalizing after validation, and there is nothing to warn about.
//
// A kind overrides any of these by defining the method itself.
type Base struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// New returns the Base of a dockerios.io strategy.
func New() Base { return Base{scheme.Scheme, names.SimpleNameGenerator} }

func (Base) AllowCreateOnUpdate(context.Context) bool { return false }

func (Base) AllowUnconditionalUpdate(context.Context) bool { return true }

func (Base) Canonicalize(runtime.Object) {}

func (Base) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }

func (Base) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// GetResetFields of a main resource: status is never a manifest's to set,
// so server-side apply of a manifest never claims ownership of it.
func (Base) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{apiVersion: fieldpath.NewSet(fieldpath.MakePathOrDie("status"))}
}

// StatusResetFields returns the fields a status write leaves alone: the
// spec, the metadata users and controllers manage through the main resource,
// and the given status fields, which another writer owns.
func StatusResetFields(ownedElsewhere ...fieldpath.Path) map[fieldpath.APIVersion]*fieldpath.Set {
	set := fieldpath.NewSet(append([]fieldpath.Path{
		fieldpath.MakePathOrDie("spec"),
		fieldpath.MakePathOrDie("metadata", "labels"),
		fieldpath.MakePathOrDie("metadata", "annotations"),
		fieldpath.MakePathOrDie("metadata", "finalizers"),
		fieldpath.MakePathOrDie("metadata", "ownerReferences"),
	}, ownedElsewhere...)...)
	return map[fieldpath.APIVersion]*fieldpath.Set{apiVersion: set}
}

// KeepMetadataOnStatusWrite restores what StatusResetFields says a status
// write leaves alone in metadata: labels, annotations, finalizers and owner
// references belong to the main resource. Owner references as for
// pods/status and a custom resource's /status: whoever may only write
// status must not orphan the object (so that the garbage collector never
// takes it away) nor give it another owner (so that it does).
func KeepMetadataOnStatusWrite(obj, old metav1.Object) {
	obj.SetLabels(old.GetLabels())
	obj.SetAnnotations(old.GetAnnotations())
	obj.SetFinalizers(old.GetFinalizers())
	obj.SetOwnerReferences(old.GetOwnerReferences())
}
