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

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/sidecar-hook/annotations"
	"github.com/dockerios/dockerios/test/framework"
)

// imagesRBAC lets the controller read the images' PodTemplate, and only
// it: what a release must grant beside --images-pod-template.
const imagesRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: dockerios-controller-images
  namespace: dockerios-system
rules:
- apiGroups: [""]
  resources: [podtemplates]
  resourceNames: [dockerios-images]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: dockerios-controller-images
  namespace: dockerios-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: dockerios-controller-images
subjects:
- kind: ServiceAccount
  name: dockerios-controller
  namespace: dockerios-system
`

// imagesPodTemplate is the release's PodTemplate, with the images a
// release names, before kustomize retargets them.
const imagesPodTemplate = `apiVersion: v1
kind: PodTemplate
metadata:
  name: dockerios-images
  namespace: dockerios-system
template:
  spec:
    imagePullSecrets:
    - name: regcred
    containers:
    - name: bootdisk
      image: ghcr.io/dockerios/dockerios-bootdisk:v0.2.0
    - name: hook-sidecar
      image: ghcr.io/dockerios/dockerios-sidecar-hook:v0.2.0
`

// imagesKustomization retargets them, as an install from a mirror does.
const imagesKustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [podtemplate.yaml]
images:
- name: ghcr.io/dockerios/dockerios-bootdisk
  newName: registry.test/mirror/dockerios-bootdisk
  newTag: v9.8.7
- name: ghcr.io/dockerios/dockerios-sidecar-hook
  newName: registry.test/mirror/dockerios-sidecar-hook
  newTag: v9.8.7
`

// With --images-pod-template, a machine waits, saying why, while the
// PodTemplate is missing; once it is applied through kustomize with an
// images: retarget, the machine's bootdisk Job runs the retargeted builder
// image with the PodTemplate's pull secret, its VirtualMachine names the
// retargeted hook image, and it goes Ready — without a controller restart.
func TestImagesFromAPodTemplateRetargetedByKustomize(t *testing.T) {
	e := startWith(t, []string{"--images-pod-template=dockerios-system/dockerios-images", "--bootdisk-image=", "--hook-sidecar-image="})
	ctx := context.Background()
	e.admin.MustRun(t, imagesRBAC, "apply", "-f", "-")
	// Whatever artifacts/deploy holds, this test says when it exists.
	e.admin.MustRun(t, "", "-n", framework.SystemNamespace, "delete", "podtemplate", "dockerios-images", "--ignore-not-found")

	ns := e.namespace(t, "images")
	e.fleet(t, "images", 1, nil)
	m := e.createMachine(t, ns, "mac", "images")
	waiting := e.waitMachine(t, ns, "mac", 60*time.Second, "waiting for the images' PodTemplate", func(m *v1alpha1.MacOSMachine) bool {
		return condition(m, "BootdiskReady").Reason == machine.ReasonImagesUnavailable
	})
	assert.Contains(t, condition(waiting, "BootdiskReady").Message, "PodTemplate dockerios-system/dockerios-images, which names the images to run (--images-pod-template), does not exist")
	e.waitEvent(t, ns, "MacOSMachine", "mac", machine.ReasonImagesUnavailable, "does not exist")
	assert.Zero(t, e.ownedObjects(t, ns, string(m.UID))["Job"], "no bootdisk Job from images nobody named")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "podtemplate.yaml"), []byte(imagesPodTemplate), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(imagesKustomization), 0o644))
	e.admin.MustRun(t, "", "apply", "-k", dir)

	e.waitMachine(t, ns, "mac", 90*time.Second, "Ready", phaseIs(v1alpha1.MachineReady))
	sel := metav1.ListOptions{LabelSelector: labels.Set{machine.MachineUIDLabel: string(m.UID)}.String()}
	jobs, err := e.kube.BatchV1().Jobs(ns).List(ctx, sel)
	require.NoError(t, err)
	require.Len(t, jobs.Items, 1)
	pod := jobs.Items[0].Spec.Template.Spec
	assert.Equal(t, "registry.test/mirror/dockerios-bootdisk:v9.8.7", pod.Containers[0].Image)
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "regcred"}}, pod.ImagePullSecrets)
	vms, err := e.dynamic(t).Resource(external.VirtualMachines).Namespace(ns).List(ctx, sel)
	require.NoError(t, err)
	require.Len(t, vms.Items, 1)
	hooks, _, err := unstructured.NestedString(vms.Items[0].Object, "spec", "template", "metadata", "annotations", annotations.HookSidecarsAnnotation)
	require.NoError(t, err)
	assert.Contains(t, hooks, `"image":"registry.test/mirror/dockerios-sidecar-hook:v9.8.7"`)
}
