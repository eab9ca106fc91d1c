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

// Package macosmachineclass holds the rules the apiserver applies to
// MacOSMachineClass writes, and how classes are printed and selected.
package macosmachineclass

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/dockerios/dockerios/pkg/macosreleases"
	"github.com/dockerios/dockerios/pkg/registry/defaultstrategy"
)

// classStrategy implements the main resource's rules for MacOSMachineClass.
type classStrategy struct {
	defaultstrategy.Base
	// images reads the image a class names, when set (WithImages).
	images ImageGetter
}

// ImageGetter reads a MacOSImage by name.
type ImageGetter func(ctx context.Context, name string) (*dockerio.MacOSImage, error)

// WithImages is the strategy that also refuses a class whose SMBIOS model
// cannot run the release of the image it names (pkg/macosreleases), at
// spec.imageName, when that image exists: a machine of it could never
// boot. An image created or changed later is not checked here (nothing
// transactional binds the two); the controller holds such machines with a
// condition naming the mismatch instead.
func (s classStrategy) WithImages(get ImageGetter) classStrategy {
	s.images = get
	return s
}

func (s classStrategy) imageRunsOnModel(ctx context.Context, c *dockerio.MacOSMachineClass) field.ErrorList {
	if s.images == nil || c.Spec.ImageName == "" {
		return nil
	}
	img, err := s.images(ctx, c.Spec.ImageName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	fld := field.NewPath("spec", "imageName")
	if err != nil {
		return field.ErrorList{field.InternalError(fld, fmt.Errorf("reading MacOSImage %s to check its release against spec.smbiosModel: %w", c.Spec.ImageName, err))}
	}
	// Defaulting has set the model by now (v1alpha1 defaults on decode).
	model := c.Spec.SMBIOSModel
	if err := macosreleases.Supports(model, img.Spec.Release); err != nil {
		return field.ErrorList{field.Invalid(fld, c.Spec.ImageName,
			fmt.Sprintf("MacOSImage %s holds macOS %q, which a machine of spec.smbiosModel %s cannot boot: %v (pkg/macosreleases, from OpenCorePkg's AppleModels)", img.Name, img.Spec.Release, model, err))}
	}
	return nil
}

// Strategy is the logic for creating, updating and deleting classes. A class
// is the shape of machines yet to be made: most of it may change, but the
// identity pool and SMBIOS model may not, since existing machines hold
// identities drawn under them.
var Strategy = classStrategy{Base: defaultstrategy.New()}

var (
	_ rest.RESTCreateStrategy  = Strategy
	_ rest.RESTUpdateStrategy  = Strategy
	_ rest.RESTDeleteStrategy  = Strategy
	_ rest.ResetFieldsStrategy = Strategy
)

func (classStrategy) NamespaceScoped() bool { return false }

func (classStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	c := obj.(*dockerio.MacOSMachineClass)
	c.Status = dockerio.MacOSMachineClassStatus{}
	c.Generation = 1
}

func (classStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	c, oldC := obj.(*dockerio.MacOSMachineClass), old.(*dockerio.MacOSMachineClass)
	c.Status = oldC.Status
	if !apiequality.Semantic.DeepEqual(c.Spec, oldC.Spec) {
		c.Generation = oldC.Generation + 1
	}
}

func (s classStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	c := obj.(*dockerio.MacOSMachineClass)
	allErrs := validation.ValidateMacOSMachineClass(c)
	return append(allErrs, s.imageRunsOnModel(ctx, c)...)
}

func (classStrategy) WarningsOnCreate(_ context.Context, obj runtime.Object) []string {
	return validation.WarningsForMacOSMachineClass(obj.(*dockerio.MacOSMachineClass))
}

// ValidateUpdate checks the image's release only when the class is pointed
// at another image: a class is not refused an unrelated edit because its
// image changed since.
func (s classStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	c, oldC := obj.(*dockerio.MacOSMachineClass), old.(*dockerio.MacOSMachineClass)
	allErrs := validation.ValidateMacOSMachineClassUpdate(c, oldC)
	if c.Spec.ImageName != oldC.Spec.ImageName {
		allErrs = append(allErrs, s.imageRunsOnModel(ctx, c)...)
	}
	return allErrs
}

func (classStrategy) WarningsOnUpdate(_ context.Context, obj, _ runtime.Object) []string {
	return validation.WarningsForMacOSMachineClass(obj.(*dockerio.MacOSMachineClass))
}

// classStatusStrategy implements the status subresource's rules.
type classStatusStrategy struct {
	classStrategy
}

// StatusStrategy is the logic for writes to macosmachineclasses/status,
// where the controller says whether new machines of the class are held back.
var StatusStrategy = classStatusStrategy{Strategy}

func (classStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return defaultstrategy.StatusResetFields()
}

func (classStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	c, oldC := obj.(*dockerio.MacOSMachineClass), old.(*dockerio.MacOSMachineClass)
	c.Spec = oldC.Spec
	defaultstrategy.KeepMetadataOnStatusWrite(c, oldC)
}

// WarningsOnUpdate is silent: the spec's warnings were given when it was
// written, and a status write cannot change the spec.
func (classStatusStrategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

func (classStatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMacOSMachineClassStatusUpdate(obj.(*dockerio.MacOSMachineClass), old.(*dockerio.MacOSMachineClass))
}

// GetAttrs returns a class's labels and the fields it can be selected by.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	c, ok := obj.(*dockerio.MacOSMachineClass)
	if !ok {
		return nil, nil, fmt.Errorf("not a MacOSMachineClass: %T", obj)
	}
	return c.Labels, SelectableFields(c), nil
}

// SelectableFields returns the fields of a class that field selectors match
// against; v1alpha1.SelectableFields lists the same keys.
func SelectableFields(c *dockerio.MacOSMachineClass) fields.Set {
	return generic.AddObjectMetaFieldsSet(fields.Set{
		"spec.imageName":        c.Spec.ImageName,
		"spec.identityPoolName": c.Spec.IdentityPoolName,
		"spec.smbiosModel":      c.Spec.SMBIOSModel,
	}, &c.ObjectMeta, false)
}

// Matcher selects classes by label and field.
func Matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
