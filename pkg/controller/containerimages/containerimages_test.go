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

package containerimages

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

var at = types.NamespacedName{Namespace: "dockerios-system", Name: "dockerios-images"}

// podTemplate is the release's PodTemplate with the given containers
// (name=image) and pull secrets.
func podTemplate(containers map[string]string, pullSecrets ...string) *corev1.PodTemplate {
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: at.Namespace, Name: at.Name}}
	for _, name := range []string{BootdiskContainer, HookSidecarContainer, "other"} {
		if image, ok := containers[name]; ok {
			pt.Template.Spec.Containers = append(pt.Template.Spec.Containers, corev1.Container{Name: name, Image: image})
		}
	}
	for _, s := range pullSecrets {
		pt.Template.Spec.ImagePullSecrets = append(pt.Template.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	return pt
}

func TestPodTemplate_Images(t *testing.T) {
	both := map[string]string{BootdiskContainer: "registry.example/bootdisk@sha256:aa", HookSidecarContainer: "registry.example/hook@sha256:bb"}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		// err, when set, is what the API server answers a GET with.
		err             error
		want            Images
		wantUnavailable string
		wantErr         string
	}{
		{
			name:    "both containers and pull secrets",
			objects: []runtime.Object{podTemplate(both, "regcred", "mirror")},
			want: Images{Bootdisk: "registry.example/bootdisk@sha256:aa", HookSidecar: "registry.example/hook@sha256:bb",
				PullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}}},
		},
		{
			name:    "other containers are ignored",
			objects: []runtime.Object{podTemplate(map[string]string{BootdiskContainer: "b:1", HookSidecarContainer: "h:1", "other": "o:1"})},
			want:    Images{Bootdisk: "b:1", HookSidecar: "h:1"},
		},
		{
			name:            "missing",
			wantUnavailable: "PodTemplate dockerios-system/dockerios-images, which names the images to run (--images-pod-template), does not exist",
		},
		{
			name:            "no bootdisk container",
			objects:         []runtime.Object{podTemplate(map[string]string{HookSidecarContainer: "h:1"})},
			wantUnavailable: `lacks template.spec.containers[name="bootdisk"].image`,
		},
		{
			name:            "no hook-sidecar container",
			objects:         []runtime.Object{podTemplate(map[string]string{BootdiskContainer: "b:1"})},
			wantUnavailable: `lacks template.spec.containers[name="hook-sidecar"].image`,
		},
		{
			name:            "a container without an image",
			objects:         []runtime.Object{podTemplate(map[string]string{BootdiskContainer: "", HookSidecarContainer: "h:1"})},
			wantUnavailable: `lacks template.spec.containers[name="bootdisk"].image`,
		},
		{
			name:            "no containers",
			objects:         []runtime.Object{podTemplate(nil)},
			wantUnavailable: `lacks template.spec.containers[name="bootdisk"].image and template.spec.containers[name="hook-sidecar"].image`,
		},
		{
			name:            "an empty pull secret name",
			objects:         []runtime.Object{podTemplate(both, "regcred", "")},
			wantUnavailable: "has an empty name in template.spec.imagePullSecrets[1].name",
		},
		{
			name:            "no RBAC to read it",
			err:             apierrors.NewForbidden(schema.GroupResource{Resource: "podtemplates"}, at.Name, nil),
			wantUnavailable: "cannot be read by the controller",
		},
		{
			name:    "the API server not answering is passing",
			err:     apierrors.NewServiceUnavailable("etcd is down"),
			wantErr: "reading PodTemplate dockerios-system/dockerios-images: etcd is down",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// setup
			kube := fake.NewClientset(tc.objects...)
			if tc.err != nil {
				kube.PrependReactor("get", "podtemplates", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			}
			src := &PodTemplate{Client: kube.CoreV1(), Template: at}

			// execute
			got, err := src.Images(context.Background())

			// assert
			switch {
			case tc.wantUnavailable != "":
				require.Error(t, err)
				assert.True(t, IsUnavailable(err), "%v is not an UnavailableError", err)
				assert.Contains(t, err.Error(), tc.wantUnavailable)
			case tc.wantErr != "":
				require.Error(t, err)
				assert.False(t, IsUnavailable(err), "a passing error reported as a configuration to fix: %v", err)
				assert.Contains(t, err.Error(), tc.wantErr)
			default:
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
			}
		})
	}
}

// A PodTemplate re-applied (a new release, a kustomize retarget) applies
// to the next object made: nothing is cached.
func TestPodTemplate_ReappliedTemplateAppliesAtOnce(t *testing.T) {
	pt := podTemplate(map[string]string{BootdiskContainer: "b:1", HookSidecarContainer: "h:1"})
	kube := fake.NewClientset(pt)
	src := &PodTemplate{Client: kube.CoreV1(), Template: at}
	got, err := src.Images(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "b:1", got.Bootdisk)

	pt = pt.DeepCopy()
	pt.Template.Spec.Containers[0].Image = "b:2"
	pt.Template.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	_, err = kube.CoreV1().PodTemplates(at.Namespace).Update(context.Background(), pt, metav1.UpdateOptions{})
	require.NoError(t, err)

	got, err = src.Images(context.Background())
	require.NoError(t, err)
	assert.Equal(t, Images{Bootdisk: "b:2", HookSidecar: "h:1", PullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}}, got)
}

// Fixed hands out copies: a caller appending to one object's pull
// secrets never changes the next object's.
func TestFixed_HandsOutCopies(t *testing.T) {
	f := Fixed{Bootdisk: "b:1", HookSidecar: "h:1", PullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}}
	got, err := f.Images(context.Background())
	require.NoError(t, err)
	got.PullSecrets[0].Name = "changed"
	again, err := f.Images(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "regcred", again.PullSecrets[0].Name)
}
