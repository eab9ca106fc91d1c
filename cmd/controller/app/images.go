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

package app

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dockerios/dockerios/pkg/controller/containerimages"
	"github.com/dockerios/dockerios/pkg/version"
)

// Repositories of the images the controller hands to bootdisk Jobs and
// VirtualMachines when told nothing else. The tag is the controller's own
// version: a controller runs the bootdisk builder and hook sidecar of its
// own release, never whichever was typed into a default last.
const (
	BootdiskRepository    = "ghcr.io/dockerios/dockerios-bootdisk"
	HookSidecarRepository = "ghcr.io/dockerios/dockerios-sidecar-hook"
)

// DefaultBootdiskImage is --bootdisk-image's default.
func DefaultBootdiskImage() string { return BootdiskRepository + ":" + version.String() }

// DefaultHookSidecarImage is --hook-sidecar-image's default.
func DefaultHookSidecarImage() string { return HookSidecarRepository + ":" + version.String() }

// validateImages checks where the images come from: a PodTemplate, or the
// image flags, never both (which would leave a reader guessing which one
// runs).
func (o *Options) validateImages() []error {
	var errs []error
	for i, name := range o.ImagePullSecrets {
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, fmt.Errorf("--image-pull-secrets[%d]: %q is not a Secret name: %s", i, name, msg))
		}
	}
	if o.ImagesPodTemplate == "" {
		if o.BootdiskImage == "" {
			errs = append(errs, fmt.Errorf("--bootdisk-image: required while --reconcile is on (or --images-pod-template)"))
		}
		if o.HookSidecarImage == "" {
			errs = append(errs, fmt.Errorf("--hook-sidecar-image: required while --reconcile is on (or --images-pod-template)"))
		}
		return errs
	}
	if _, err := parsePodTemplate(o.ImagesPodTemplate); err != nil {
		errs = append(errs, err)
	}
	var both []string
	if o.BootdiskImage != "" {
		both = append(both, "--bootdisk-image")
	}
	if o.HookSidecarImage != "" {
		both = append(both, "--hook-sidecar-image")
	}
	if len(o.ImagePullSecrets) > 0 {
		both = append(both, "--image-pull-secrets")
	}
	if len(both) > 0 {
		errs = append(errs, fmt.Errorf("%s: not with --images-pod-template, whose PodTemplate names the images and pull secrets", strings.Join(both, ", ")))
	}
	return errs
}

// parsePodTemplate reads --images-pod-template's NAMESPACE/NAME.
func parsePodTemplate(s string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, fmt.Errorf("--images-pod-template: %q is not NAMESPACE/NAME", s)
	}
	var msgs []string
	for _, msg := range validation.IsDNS1123Label(ns) {
		msgs = append(msgs, "namespace "+msg)
	}
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		msgs = append(msgs, "name "+msg)
	}
	if len(msgs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("--images-pod-template: %q: %s", s, strings.Join(msgs, "; "))
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// imageSettings are what the manager needs of the image options: the
// PodTemplate to read (zero when none), or the images and pull secrets to
// give every object.
func (o *Options) imageSettings() (types.NamespacedName, containerimages.Images) {
	if o.ImagesPodTemplate != "" {
		at, _ := parsePodTemplate(o.ImagesPodTemplate) // checked by Validate
		return at, containerimages.Images{}
	}
	var secrets []corev1.LocalObjectReference
	for _, name := range o.ImagePullSecrets {
		secrets = append(secrets, corev1.LocalObjectReference{Name: name})
	}
	return types.NamespacedName{}, containerimages.Images{Bootdisk: o.BootdiskImage, HookSidecar: o.HookSidecarImage, PullSecrets: secrets}
}
