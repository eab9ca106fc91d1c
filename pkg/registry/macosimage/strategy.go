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

// Package macosimage holds the rules the apiserver applies to MacOSImage
// writes, and how images are printed and selected.
package macosimage

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

// imageStrategy implements the main resource's rules for MacOSImage.
type imageStrategy struct {
	defaultstrategy.Base
}

// Strategy is the logic for creating, updating and deleting images. An
// image may be pointed at a new source: machines already cloned keep their
// disks, machines cloned afterwards get the new one.
var Strategy = imageStrategy{defaultstrategy.New()}

var (
	_ rest.RESTCreateStrategy  = Strategy
	_ rest.RESTUpdateStrategy  = Strategy
	_ rest.RESTDeleteStrategy  = Strategy
	_ rest.ResetFieldsStrategy = Strategy
)

func (imageStrategy) NamespaceScoped() bool { return false }

func (imageStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	img := obj.(*dockerio.MacOSImage)
	img.Status = dockerio.MacOSImageStatus{}
	img.Generation = 1
}

// PrepareForUpdate keeps the stored status and bumps the generation on a
// spec change, so the controller knows its Ready condition is stale.
func (imageStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	img, oldImg := obj.(*dockerio.MacOSImage), old.(*dockerio.MacOSImage)
	img.Status = oldImg.Status
	if !apiequality.Semantic.DeepEqual(img.Spec, oldImg.Spec) {
		img.Generation = oldImg.Generation + 1
	}
}

func (imageStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateMacOSImage(obj.(*dockerio.MacOSImage))
}

func (imageStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMacOSImageUpdate(obj.(*dockerio.MacOSImage), old.(*dockerio.MacOSImage))
}

// imageStatusStrategy implements the status subresource's rules.
type imageStatusStrategy struct {
	imageStrategy
}

// StatusStrategy is the logic for writes to macosimages/status, where the
// controller says whether the source exists and is ready to clone.
var StatusStrategy = imageStatusStrategy{Strategy}

func (imageStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return defaultstrategy.StatusResetFields()
}

func (imageStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	img, oldImg := obj.(*dockerio.MacOSImage), old.(*dockerio.MacOSImage)
	img.Spec = oldImg.Spec
	defaultstrategy.KeepMetadataOnStatusWrite(img, oldImg)
}

func (imageStatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMacOSImageStatusUpdate(obj.(*dockerio.MacOSImage), old.(*dockerio.MacOSImage))
}

// GetAttrs returns an image's labels and the fields it can be selected by.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	img, ok := obj.(*dockerio.MacOSImage)
	if !ok {
		return nil, nil, fmt.Errorf("not a MacOSImage: %T", obj)
	}
	return img.Labels, SelectableFields(img), nil
}

// SelectableFields returns the fields of an image that field selectors match
// against; v1alpha1.SelectableFields lists the same keys.
func SelectableFields(img *dockerio.MacOSImage) fields.Set {
	return generic.AddObjectMetaFieldsSet(fields.Set{"spec.release": img.Spec.Release}, &img.ObjectMeta, false)
}

// Matcher selects images by label and field.
func Matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
