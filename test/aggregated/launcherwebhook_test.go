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

package aggregated

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/dockerios/dockerios/pkg/launcherwebhook"
	"github.com/dockerios/dockerios/sidecar-hook/annotations"
)

// launcherPodYAML is a pod shaped like the one virt-controller makes for a
// VMI whose template carries the DockerIOS hook sidecar: a compute
// container, a sidecar container per hookSidecars entry named
// hook-sidecar-<i> with the entry's args, the VMI's labels copied.
func launcherPodYAML(name string, labels map[string]string, hookArgs []string) string {
	var l strings.Builder
	for k, v := range labels {
		fmt.Fprintf(&l, "    %s: %q\n", k, v)
	}
	args, _ := json.Marshal(hookArgs)
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels:
%s
spec:
  volumes:
  - name: hook-sidecar-sockets
    emptyDir: {}
  containers:
  - name: compute
    image: registry.example/virt-launcher:v1
    volumeMounts: [{name: hook-sidecar-sockets, mountPath: /var/run/kubevirt-hooks}]
  - name: hook-sidecar-0
    image: registry.example/dockerios/sidecar-hook:v1
    args: %s
    volumeMounts: [{name: hook-sidecar-sockets, mountPath: /var/run/kubevirt-hooks}]
`, name, l.String(), args)
}

// The webhook, served by the real controller binary and called by the real
// kube-apiserver, mounts the OSK Secret into the hook's container alone;
// pods it must refuse are refused with the reason; with the controller
// down, macOS launcher pods wait and every other pod is created as before.
func (e *env) testLauncherPodWebhook(t *testing.T) {
	ns := e.namespace(t, "launcher-pods")
	ctrl := e.cp.StartController(t, "--reconcile=false")
	e.admin.MustRun(t, "", "-n", ns, "create", "secret", "generic", "dockerios-osk",
		"--from-literal=osk=dummy-osk-for-tests-only-0123456789abcdef0123456789abcdef0123")
	launcher := map[string]string{launcherwebhook.KubeVirtLabel: launcherwebhook.LauncherValue, annotations.OSKSecretLabel: "dockerios-osk"}
	hookArgs := []string{"--osk-file=" + annotations.DefaultOSKFile}

	e.admin.MustRun(t, launcherPodYAML("mac", launcher, hookArgs), "-n", ns, "create", "-f", "-")
	pod := e.getPod(t, ns, "mac")
	require.Len(t, pod.Spec.Volumes, 2)
	vol := pod.Spec.Volumes[1]
	assert.Equal(t, launcherwebhook.VolumeName, vol.Name)
	require.NotNil(t, vol.Secret, "volume %+v", vol)
	assert.Equal(t, "dockerios-osk", vol.Secret.SecretName)
	assert.Equal(t, []corev1.KeyToPath{{Key: annotations.OSKSecretKey, Path: "osk"}}, vol.Secret.Items)
	assert.Contains(t, pod.Spec.Containers[1].VolumeMounts,
		corev1.VolumeMount{Name: launcherwebhook.VolumeName, MountPath: "/var/run/dockerios/osk", ReadOnly: true})
	assert.Len(t, pod.Spec.Containers[0].VolumeMounts, 1, "the compute container does not see the key")

	// A pod naming an OSK Secret but running no DockerIOS hook is refused
	// with the field and the reason.
	res := e.admin.Run(launcherPodYAML("no-hook", launcher, []string{"--version", "v1alpha3"}), "-n", ns, "create", "-f", "-")
	require.Error(t, res.Err)
	assert.Contains(t, res.Stderr, `admission webhook "launcher-pods.dockerios.io" denied the request`)
	assert.Contains(t, res.Stderr, "no hook-sidecar-* container runs the DockerIOS hook with an --osk-file argument")

	// Launcher pods without the label are none of DockerIOS's business.
	plain := map[string]string{launcherwebhook.KubeVirtLabel: launcherwebhook.LauncherValue}
	e.admin.MustRun(t, launcherPodYAML("linux", plain, []string{"--version", "v1alpha3"}), "-n", ns, "create", "-f", "-")
	assert.Len(t, e.getPod(t, ns, "linux").Spec.Volumes, 1)

	// Controller down: the webhook fails closed for macOS launcher pods
	// only; the objectSelector keeps it off every other pod.
	ctrl.Kill(t)
	res = e.admin.Run(launcherPodYAML("mac-2", launcher, hookArgs), "-n", ns, "create", "-f", "-")
	require.Error(t, res.Err, "a macOS launcher pod created without its OSK")
	assert.Contains(t, res.Stderr, `failed calling webhook "launcher-pods.dockerios.io"`)
	e.admin.MustRun(t, launcherPodYAML("linux-2", plain, nil), "-n", ns, "create", "-f", "-")

	ctrl.Start(t)
	e.admin.MustRun(t, launcherPodYAML("mac-2", launcher, hookArgs), "-n", ns, "create", "-f", "-")
	assert.Equal(t, launcherwebhook.VolumeName, e.getPod(t, ns, "mac-2").Spec.Volumes[1].Name)
}

func (e *env) getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	require.NoError(t, json.Unmarshal([]byte(e.admin.MustRun(t, "", "-n", ns, "get", "pod", name, "-o", "json")), &pod))
	return &pod
}
