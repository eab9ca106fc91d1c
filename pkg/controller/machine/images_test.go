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

package machine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/controller/containerimages"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/sidecar-hook/annotations"
)

var imagesAt = types.NamespacedName{Namespace: "dockerios-system", Name: "dockerios-images"}

// imagesTemplate is the release's PodTemplate naming the images.
func imagesTemplate(bootdiskImage, hookImage string, pullSecrets ...string) *corev1.PodTemplate {
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: imagesAt.Namespace, Name: imagesAt.Name}}
	pt.Template.Spec.Containers = []corev1.Container{
		{Name: containerimages.BootdiskContainer, Image: bootdiskImage},
		{Name: containerimages.HookSidecarContainer, Image: hookImage},
	}
	for _, s := range pullSecrets {
		pt.Template.Spec.ImagePullSecrets = append(pt.Template.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	return pt
}

// newImagesEnv is an actEnv whose machine waits for its bootdisk Job,
// reading its images from the PodTemplate (--images-pod-template). The
// flags' images are set too, to "stale" ones: they must never be used.
func newImagesEnv(t *testing.T) *actEnv {
	t.Helper()
	e := newActEnv(t, testMachine())
	e.o.Job = nil
	e.r.Settings = Settings{BootdiskImage: "stale.example/bootdisk:old", HookSidecarImage: "stale.example/hook:old",
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "stale"}}, OSKSecretName: "dockerios-osk"}
	e.r.Images = &containerimages.PodTemplate{Client: e.kube.CoreV1(), Template: imagesAt}
	return e
}

func (e *actEnv) jobs(t *testing.T) []batchv1.Job {
	t.Helper()
	jobs, err := e.kube.BatchV1().Jobs("ci").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return jobs.Items
}

// The bootdisk Job runs the PodTemplate's bootdisk image and pulls it with
// the PodTemplate's pull secrets.
func TestBootdiskJob_ImagesAndPullSecretsFromThePodTemplate(t *testing.T) {
	// setup
	e := newImagesEnv(t)
	_, err := e.kube.CoreV1().PodTemplates(imagesAt.Namespace).Create(context.Background(),
		imagesTemplate("registry.example/bootdisk@sha256:aa", "registry.example/hook@sha256:bb", "regcred"), metav1.CreateOptions{})
	require.NoError(t, err)

	// execute
	var requeue time.Duration
	require.NoError(t, e.r.bootdisk(context.Background(), testMachine(), e.o, true, &requeue))

	// assert
	jobs := e.jobs(t)
	require.Len(t, jobs, 1)
	spec := jobs[0].Spec.Template.Spec
	assert.Equal(t, "registry.example/bootdisk@sha256:aa", spec.Containers[0].Image)
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "regcred"}}, spec.ImagePullSecrets)
	assert.Empty(t, e.o.ImagesUnavailable)
	assert.Empty(t, e.events())
}

// Without a PodTemplate, the flags' images and pull secrets
// (--image-pull-secrets) reach the Job.
func TestBootdiskJob_PullSecretsFromFlags(t *testing.T) {
	e := newImagesEnv(t)
	e.r.Images = nil
	e.r.Settings.BootdiskImage = "registry.example/bootdisk:1"
	e.r.Settings.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}}

	var requeue time.Duration
	require.NoError(t, e.r.bootdisk(context.Background(), testMachine(), e.o, true, &requeue))

	jobs := e.jobs(t)
	require.Len(t, jobs, 1)
	assert.Equal(t, "registry.example/bootdisk:1", jobs[0].Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}}, jobs[0].Spec.Template.Spec.ImagePullSecrets)
}

// A PodTemplate that is missing, or names no bootdisk image, makes no Job
// from other images: the machine says why (a Warning Event, and its
// BootdiskReady condition through Derive) and looks again shortly.
func TestBootdiskJob_WaitsAndSaysWhyWhenThePodTemplateIsUnusable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		template *corev1.PodTemplate
		want     string
	}{
		{"missing", nil, "PodTemplate dockerios-system/dockerios-images, which names the images to run (--images-pod-template), does not exist; machines wait until it is fixed"},
		{"no bootdisk container", func() *corev1.PodTemplate {
			pt := imagesTemplate("", "registry.example/hook:1")
			pt.Template.Spec.Containers = pt.Template.Spec.Containers[1:]
			return pt
		}(), `lacks template.spec.containers[name="bootdisk"].image`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// setup
			e := newImagesEnv(t)
			if tc.template != nil {
				_, err := e.kube.CoreV1().PodTemplates(imagesAt.Namespace).Create(context.Background(), tc.template, metav1.CreateOptions{})
				require.NoError(t, err)
			}

			// execute
			var requeue time.Duration
			require.NoError(t, e.r.act(context.Background(), testMachine(), e.o, &requeue))

			// assert
			assert.Empty(t, e.jobs(t), "a bootdisk Job made from images the PodTemplate does not name")
			assert.Contains(t, e.o.ImagesUnavailable, tc.want)
			assert.Equal(t, imagesRetry, requeue, "nothing watches the PodTemplate: look again")
			var warnings []string
			for _, ev := range e.events() {
				if strings.HasPrefix(ev, "Warning ") {
					warnings = append(warnings, ev)
				}
			}
			require.Len(t, warnings, 1)
			assert.Contains(t, warnings[0], "Warning ImagesUnavailable PodTemplate dockerios-system/dockerios-images")
			c := condition(t, e, "BootdiskReady")
			assert.Equal(t, ReasonImagesUnavailable, c.Reason)
			assert.Equal(t, e.o.ImagesUnavailable, c.Message)
		})
	}
}

// A PodTemplate deleted after it served one machine is not remembered:
// the next machine waits rather than run the images it used to name.
func TestBootdiskJob_DeletedPodTemplateIsNotRemembered(t *testing.T) {
	e := newImagesEnv(t)
	_, err := e.kube.CoreV1().PodTemplates(imagesAt.Namespace).Create(context.Background(), imagesTemplate("registry.example/bootdisk:1", "registry.example/hook:1"), metav1.CreateOptions{})
	require.NoError(t, err)
	var requeue time.Duration
	require.NoError(t, e.r.bootdisk(context.Background(), testMachine(), e.o, true, &requeue))
	require.Len(t, e.jobs(t), 1)

	require.NoError(t, e.kube.CoreV1().PodTemplates(imagesAt.Namespace).Delete(context.Background(), imagesAt.Name, metav1.DeleteOptions{}))
	require.NoError(t, e.kube.BatchV1().Jobs("ci").Delete(context.Background(), e.jobs(t)[0].Name, metav1.DeleteOptions{}))
	e.o.Job = nil
	require.NoError(t, e.r.bootdisk(context.Background(), testMachine(), e.o, true, &requeue))
	assert.Empty(t, e.jobs(t))
	assert.Contains(t, e.o.ImagesUnavailable, "does not exist")
}

// The VirtualMachine names the PodTemplate's hook sidecar image; with no
// PodTemplate it is not made, and says why.
func TestVirtualMachine_HookImageFromThePodTemplate(t *testing.T) {
	for _, withTemplate := range []bool{true, false} {
		// setup: both disks ready, the OSK Secret there.
		e := newImagesEnv(t)
		e.o.Job = job(batchv1.JobComplete)
		e.o.DV = dv(cdiv1.Succeeded)
		_, err := e.kube.CoreV1().Secrets("ci").Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dockerios-osk", Namespace: "ci"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		if withTemplate {
			_, err := e.kube.CoreV1().PodTemplates(imagesAt.Namespace).Create(context.Background(), imagesTemplate("registry.example/bootdisk:1", "registry.example/hook:1"), metav1.CreateOptions{})
			require.NoError(t, err)
		}

		// execute
		var requeue time.Duration
		require.NoError(t, e.r.act(context.Background(), testMachine(), e.o, &requeue))

		// assert
		vms, err := e.dyn.Resource(external.VirtualMachines).Namespace("ci").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		if !withTemplate {
			assert.Empty(t, vms.Items, "a VirtualMachine made with a hook image the PodTemplate does not name")
			c := condition(t, e, "VirtualMachineRunning")
			assert.Equal(t, ReasonImagesUnavailable, c.Reason)
			assert.Contains(t, c.Message, "does not exist")
			continue
		}
		require.Len(t, vms.Items, 1)
		made, err := external.FromUnstructured[kubevirtv1.VirtualMachine](&vms.Items[0])
		require.NoError(t, err)
		assert.Contains(t, made.Spec.Template.ObjectMeta.Annotations[annotations.HookSidecarsAnnotation], `"image":"registry.example/hook:1"`)
	}
}

// condition is the condition typ of the status Derive writes from e's
// observations.
func condition(t *testing.T, e *actEnv, typ string) metav1.Condition {
	t.Helper()
	d := Derive(testMachine(), e.o, t0)
	c := meta.FindStatusCondition(d.Status.Conditions, typ)
	require.NotNil(t, c, "no %s condition", typ)
	return *c
}
