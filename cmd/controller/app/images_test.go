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
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dockerios/dockerios/pkg/controller/containerimages"
)

func TestOptions_ParseImages(t *testing.T) {
	for _, tc := range []struct {
		name            string
		args            []string
		wantErr         string // "" means valid
		wantPodTemplate types.NamespacedName
		wantImages      containerimages.Images
	}{
		{
			name:       "defaults are this release's images",
			wantImages: containerimages.Images{Bootdisk: DefaultBootdiskImage(), HookSidecar: DefaultHookSidecarImage()},
		},
		{
			name: "images and pull secrets from flags",
			args: []string{"--bootdisk-image=registry.example/bootdisk:1", "--hook-sidecar-image=registry.example/hook:1", "--image-pull-secrets=regcred,mirror"},
			wantImages: containerimages.Images{Bootdisk: "registry.example/bootdisk:1", HookSidecar: "registry.example/hook:1",
				PullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}}},
		},
		{
			name:            "a PodTemplate replaces the default images",
			args:            []string{"--images-pod-template=dockerios-system/dockerios-images"},
			wantPodTemplate: types.NamespacedName{Namespace: "dockerios-system", Name: "dockerios-images"},
		},
		{
			name:    "a PodTemplate and an image flag",
			args:    []string{"--images-pod-template=dockerios-system/dockerios-images", "--bootdisk-image=registry.example/bootdisk:1", "--image-pull-secrets=regcred"},
			wantErr: "--bootdisk-image, --image-pull-secrets: not with --images-pod-template",
		},
		{
			name:    "a PodTemplate without its namespace",
			args:    []string{"--images-pod-template=dockerios-images"},
			wantErr: `--images-pod-template: "dockerios-images" is not NAMESPACE/NAME`,
		},
		{
			name:    "a PodTemplate name that is no name",
			args:    []string{"--images-pod-template=Dockerios_System/images"},
			wantErr: `--images-pod-template: "Dockerios_System/images": namespace a lowercase RFC 1123 label`,
		},
		{
			name:    "an empty pull secret",
			args:    []string{"--image-pull-secrets=regcred,,mirror"},
			wantErr: `--image-pull-secrets[1]: "" is not a Secret name`,
		},
		{
			name:    "no bootdisk image",
			args:    []string{"--bootdisk-image="},
			wantErr: "--bootdisk-image: required while --reconcile is on (or --images-pod-template)",
		},
		{
			name:       "no images needed by a webhook-only replica",
			args:       []string{"--reconcile=false", "--bootdisk-image=", "--hook-sidecar-image="},
			wantImages: containerimages.Images{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			err := o.Parse(tc.args)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			at, images := o.imageSettings()
			assert.Equal(t, tc.wantPodTemplate, at)
			assert.Equal(t, tc.wantImages, images)
		})
	}
}

// The default images are tagged with the controller's own version, never
// a version typed by hand.
func TestDefaultImages_AreThisReleases(t *testing.T) {
	assert.Equal(t, "ghcr.io/dockerios/dockerios-bootdisk:v0.0.0-dev", DefaultBootdiskImage())
	assert.Equal(t, "ghcr.io/dockerios/dockerios-sidecar-hook:v0.0.0-dev", DefaultHookSidecarImage())
}

// --version works alone and beside flags that would not validate.
func TestOptions_VersionNeedsNoOtherFlag(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"--version", "--health-bind-address=", "--machine-workers=0"}} {
		o := NewOptions()
		require.NoError(t, o.Parse(args), "%v", args)
		assert.True(t, o.PrintVersion)
	}
}
