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

// Package containerimages says which container images the controller
// hands to the objects it makes for a machine — the bootdisk builder's,
// run by each bootdisk Job, and the KubeVirt hook sidecar's, named in each
// VirtualMachine — and which image pull secrets the bootdisk Jobs' pods use.
//
// They come either from flags (Fixed), or from a core/v1 PodTemplate the
// release ships (PodTemplate): its containers are named "bootdisk" and
// "hook-sidecar", so kustomize's images transformer, which rewrites
// containers[].image in any kind, retargets them as it retargets the
// Deployments' own images, and a re-applied PodTemplate applies to the
// next Job or VirtualMachine made without a restart.
//
// It only reads. It never falls back from a PodTemplate to the flags'
// images: a machine built from an image nobody named is worse than one
// that waits and says why (UnavailableError).
package containerimages

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// The PodTemplate's containers, by name.
const (
	BootdiskContainer    = "bootdisk"
	HookSidecarContainer = "hook-sidecar"
)

// Images are what the controller runs for every machine.
type Images struct {
	// Bootdisk is the bootdisk builder's image, for classes that name none.
	Bootdisk string
	// HookSidecar is the KubeVirt hook sidecar's image.
	HookSidecar string
	// PullSecrets are named in each bootdisk Job's pod. A pod can only use
	// Secrets of its own namespace, so each must exist in every namespace
	// machines are made in.
	PullSecrets []corev1.LocalObjectReference
}

// Source gives the images to use now.
type Source interface {
	// Images returns the images to use for an object made now. An
	// *UnavailableError says they cannot be known until someone changes
	// the configuration; any other error is passing (the API server did
	// not answer) and worth a retry.
	Images(ctx context.Context) (Images, error)
}

// UnavailableError says why the images cannot be known: the PodTemplate
// is missing, unreadable to the controller, or lacks a container. A
// machine waits, and says so, until it is fixed.
type UnavailableError struct {
	// Template is the PodTemplate read.
	Template types.NamespacedName
	Message  string
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("PodTemplate %s, which names the images to run (--images-pod-template), %s", e.Template, e.Message)
}

// IsUnavailable says whether err is (or wraps) an *UnavailableError.
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}

// Fixed are images given by flags: the same for every object.
type Fixed Images

// Images returns a copy of f, so a caller may change it.
func (f Fixed) Images(context.Context) (Images, error) {
	out := Images(f)
	out.PullSecrets = append([]corev1.LocalObjectReference(nil), f.PullSecrets...)
	return out, nil
}

// PodTemplate reads the images from a PodTemplate each time they are
// asked for.
//
// A direct GET rather than an informer: the images are asked for only
// when a bootdisk Job or a VirtualMachine is about to be created, once or
// a few times in a machine's life, so a GET then costs less than a watch
// held open for ever; it needs only the "get" verb on one named object;
// and it reads the PodTemplate as it is now, so a re-applied one applies
// to the very next object, with no cache to lag behind it.
type PodTemplate struct {
	Client   corev1client.PodTemplatesGetter
	Template types.NamespacedName
}

// Images reads the PodTemplate.
func (p *PodTemplate) Images(ctx context.Context) (Images, error) {
	pt, err := p.Client.PodTemplates(p.Template.Namespace).Get(ctx, p.Template.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Images{}, &UnavailableError{Template: p.Template, Message: "does not exist"}
	case apierrors.IsForbidden(err):
		// No RBAC to read it is a configuration to fix, not a passing
		// failure: the machine says so rather than the log alone.
		return Images{}, &UnavailableError{Template: p.Template, Message: fmt.Sprintf("cannot be read by the controller: %v", err)}
	case err != nil:
		return Images{}, fmt.Errorf("reading PodTemplate %s: %w", p.Template, err)
	}
	return FromPodTemplate(pt)
}

// FromPodTemplate reads the images out of pt: the images of its
// containers named BootdiskContainer and HookSidecarContainer, and its
// imagePullSecrets. Both containers are required even for an object that
// uses one of them, so that a PodTemplate that lacks one is reported at
// the first bootdisk Job, not at the first VirtualMachine, after a clone
// of many minutes.
func FromPodTemplate(pt *corev1.PodTemplate) (Images, error) {
	at := types.NamespacedName{Namespace: pt.Namespace, Name: pt.Name}
	containers := map[string]string{}
	for _, c := range pt.Template.Spec.Containers {
		containers[c.Name] = c.Image
	}
	var missing []string
	for _, name := range []string{BootdiskContainer, HookSidecarContainer} {
		if containers[name] == "" {
			missing = append(missing, fmt.Sprintf("template.spec.containers[name=%q].image", name))
		}
	}
	if len(missing) > 0 {
		return Images{}, &UnavailableError{Template: at, Message: fmt.Sprintf("lacks %s", joinAnd(missing))}
	}
	var secrets []corev1.LocalObjectReference
	for i, s := range pt.Template.Spec.ImagePullSecrets {
		if s.Name == "" {
			return Images{}, &UnavailableError{Template: at, Message: fmt.Sprintf("has an empty name in template.spec.imagePullSecrets[%d].name", i)}
		}
		secrets = append(secrets, corev1.LocalObjectReference{Name: s.Name})
	}
	return Images{Bootdisk: containers[BootdiskContainer], HookSidecar: containers[HookSidecarContainer], PullSecrets: secrets}, nil
}

func joinAnd(s []string) string {
	if len(s) == 2 {
		return s[0] + " and " + s[1]
	}
	return s[0]
}
