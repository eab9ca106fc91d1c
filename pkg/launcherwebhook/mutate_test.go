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

package launcherwebhook

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"

	"github.com/dockerios/dockerios/sidecar-hook/annotations"
)

// launcherPod is shaped like the pod virt-controller makes for a VMI with
// the DockerIOS hook as its second sidecar.
func launcherPod(mut func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{}
	p.Name = "virt-launcher-mac-0-abcde"
	p.Labels = map[string]string{KubeVirtLabel: LauncherValue, annotations.OSKSecretLabel: "dockerios-osk"}
	p.Spec.Volumes = []corev1.Volume{{Name: "hook-sidecar-sockets", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	p.Spec.Containers = []corev1.Container{
		{Name: "compute", VolumeMounts: []corev1.VolumeMount{{Name: "hook-sidecar-sockets", MountPath: "/var/run/kubevirt-hooks"}}},
		{Name: "hook-sidecar-0", Args: []string{"--version", "v1alpha2"}},
		{Name: "hook-sidecar-1", Args: []string{"--osk-file=" + annotations.DefaultOSKFile},
			VolumeMounts: []corev1.VolumeMount{{Name: "hook-sidecar-sockets", MountPath: "/var/run/kubevirt-hooks"}}},
	}
	if mut != nil {
		mut(p)
	}
	return p
}

// apply applies Mutate's patch the way kube-apiserver does: as RFC 6902
// JSON Patch on the pod's JSON.
func apply(t *testing.T, pod *corev1.Pod, ops []PatchOp) *corev1.Pod {
	t.Helper()
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	patchJSON, err := json.Marshal(ops)
	require.NoError(t, err)
	patch, err := jsonpatch.DecodePatch(patchJSON)
	require.NoError(t, err)
	out, err := patch.Apply(raw)
	require.NoError(t, err)
	var got corev1.Pod
	require.NoError(t, json.Unmarshal(out, &got))
	return &got
}

func TestMutate_MountsTheSecretIntoTheHookContainerOnly(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mut       func(*corev1.Pod)
		mountPath string
		file      string
	}{
		{"default osk file", nil, "/var/run/dockerios/osk", "osk"},
		{"osk file as two arguments", func(p *corev1.Pod) {
			p.Spec.Containers[2].Args = []string{"--socket-dir", "/s", "--osk-file", "/etc/smc/key.txt"}
		}, "/etc/smc", "key.txt"},
		{"pod and container without volumes", func(p *corev1.Pod) {
			p.Spec.Volumes = nil
			p.Spec.Containers[2].VolumeMounts = nil
			p.Spec.Containers[2].Args = []string{"-osk-file=/osk/osk"}
		}, "/osk", "osk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := launcherPod(tc.mut)
			ops, err := Mutate(pod)
			require.NoError(t, err)
			got := apply(t, pod, ops)

			vol := got.Spec.Volumes[len(got.Spec.Volumes)-1]
			require.Equal(t, VolumeName, vol.Name)
			require.NotNil(t, vol.Secret)
			assert.Equal(t, "dockerios-osk", vol.Secret.SecretName)
			assert.Equal(t, []corev1.KeyToPath{{Key: "osk", Path: tc.file}}, vol.Secret.Items)
			assert.Equal(t, int32(0o444), *vol.Secret.DefaultMode)
			assert.Equal(t, len(pod.Spec.Volumes)+1, len(got.Spec.Volumes), "other volumes kept")

			hook := got.Spec.Containers[2]
			require.Contains(t, hook.VolumeMounts, corev1.VolumeMount{Name: VolumeName, MountPath: tc.mountPath, ReadOnly: true})
			assert.Equal(t, len(pod.Spec.Containers[2].VolumeMounts)+1, len(hook.VolumeMounts))
			assert.Equal(t, pod.Spec.Containers[0], got.Spec.Containers[0], "compute container untouched")
			assert.Equal(t, pod.Spec.Containers[1], got.Spec.Containers[1], "other sidecar untouched")

			again, err := Mutate(got)
			require.NoError(t, err)
			assert.Empty(t, again, "a mutated pod is left as it is")
		})
	}
}

func TestMutate_PodsWithoutTheLabelPassThrough(t *testing.T) {
	pod := launcherPod(func(p *corev1.Pod) { delete(p.Labels, annotations.OSKSecretLabel) })
	ops, err := Mutate(pod)
	require.NoError(t, err)
	assert.Empty(t, ops)
}

func TestMutate_Refusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*corev1.Pod)
		want string
	}{
		{"secret name that is no DNS subdomain", func(p *corev1.Pod) {
			p.Labels[annotations.OSKSecretLabel] = "OSK_key"
		}, `metadata.labels[hook.dockerios.io/osk-secret]: Invalid value: "OSK_key": must name a Secret`},
		{"no DockerIOS hook container", func(p *corev1.Pod) {
			p.Spec.Containers = p.Spec.Containers[:2]
		}, "spec.containers: Required value: label hook.dockerios.io/osk-secret names an OSK Secret, but no hook-sidecar-* container runs the DockerIOS hook with an --osk-file argument"},
		{"an --osk-file outside a hook sidecar does not count", func(p *corev1.Pod) {
			p.Spec.Containers[2].Name = "other"
		}, "no hook-sidecar-* container runs the DockerIOS hook"},
		{"two hook containers", func(p *corev1.Pod) {
			p.Spec.Containers[1].Args = []string{"--osk-file=/a/osk"}
		}, `spec.containers[2].args: Invalid value: ["--osk-file=/var/run/dockerios/osk/osk"]: container "hook-sidecar-0" also runs the DockerIOS hook`},
		{"relative osk file", func(p *corev1.Pod) {
			p.Spec.Containers[2].Args = []string{"--osk-file=osk"}
		}, `spec.containers[2].args: Invalid value: "osk": the hook's --osk-file must be an absolute path`},
		{"osk file in the root directory", func(p *corev1.Pod) {
			p.Spec.Containers[2].Args = []string{"--osk-file=/osk"}
		}, "below a directory of its own"},
		// The Secret's item path would be ".." (refused by pod validation)
		// or ".", and the hook would read a directory.
		{"osk file that is a .. step", func(p *corev1.Pod) {
			p.Spec.Containers[2].Args = []string{"--osk-file=/var/run/dockerios/osk/.."}
		}, "below a directory of its own"},
		{"osk file that is a . step", func(p *corev1.Pod) {
			p.Spec.Containers[2].Args = []string{"--osk-file=/var/run/dockerios/osk/."}
		}, "below a directory of its own"},
		// A second mount at one path is refused by pod validation, and
		// would hide KubeVirt's hook socket directory.
		{"osk file in a directory the hook container already mounts", func(p *corev1.Pod) {
			p.Spec.Containers[2].Args = []string{"--osk-file=/var/run/kubevirt-hooks/osk"}
		}, `spec.containers[2].volumeMounts[0].mountPath: Invalid value: "/var/run/kubevirt-hooks"`},
		{"--osk-file without a value", func(p *corev1.Pod) {
			p.Spec.Containers[2].Args = []string{"--osk-file"}
		}, `Invalid value: ""`},
		{"someone else's volume of our name", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: VolumeName})
		}, `spec.volumes[1].name: Duplicate value: "dockerios-osk (the DockerIOS webhook adds a volume of that name for Secret \"dockerios-osk\")"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := Mutate(launcherPod(tc.mut))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Empty(t, ops)
		})
	}
}
