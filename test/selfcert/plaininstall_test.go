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

package selfcert

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/dockerios/dockerios/pkg/launcherwebhook"
	"github.com/dockerios/dockerios/sidecar-hook/annotations"
	"github.com/dockerios/dockerios/test/framework"
)

// A plain install: the APIService and the MutatingWebhookConfiguration
// exactly as artifacts/deploy ships them, with no caBundle, the RBAC of
// artifacts/deploy/12-certificates.yaml, and both components started with the flags that make them
// keep their own certificates. Nobody hands them a certificate or a CA:
// dockerios.io must become Available through kube-apiserver's aggregator,
// and kube-apiserver must call the launcher pod webhook.
func TestPlainInstall_APIServiceAndWebhookWorkWithTheBundlesTheComponentsInject(t *testing.T) {
	rbac, err := os.ReadFile(filepath.Join(moduleRoot(t), "artifacts", "deploy", "12-certificates.yaml"))
	require.NoError(t, err)

	// StartControlPlaneSelfCert waits until kubectl reaches dockerios.io
	// through the aggregator, which trusts the caBundle alone.
	cp := framework.StartControlPlaneSelfCert(t, string(rbac),
		"--cert-secret=dockerios-system/dockerios-apiserver-tls",
		"--service=dockerios-system/dockerios-apiserver",
		"--apiservice=v1alpha1.dockerios.io")
	k := framework.NewKubectl(t, cp.AdminKubeconfig)

	t.Run("APIServiceAvailable", func(t *testing.T) {
		available := k.MustRun(t, "", "get", "apiservice", "v1alpha1.dockerios.io", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
		assert.Equal(t, "True", available)
		bundle := k.MustRun(t, "", "get", "apiservice", "v1alpha1.dockerios.io", "-o", "jsonpath={.spec.caBundle}")
		ca := k.MustRun(t, "", "-n", "dockerios-system", "get", "secret", "dockerios-apiserver-tls", "-o", `jsonpath={.data.ca\.crt}`)
		assert.NotEmpty(t, bundle)
		assert.Equal(t, ca, bundle, "the APIService carries the Secret's CA")
		k.MustRun(t, "", "get", "macosmachines", "-A") // answered through the aggregator
		assert.Contains(t, cp.DockerIOSOutput(), "Injected the CA bundle")
	})

	// The apiserver serves its key pair from memory (a dynamiccertificates
	// provider): a new one reaches secure serving without a restart.
	t.Run("NewCAFollowedWithoutRestart", func(t *testing.T) {
		before := k.MustRun(t, "", "get", "apiservice", "v1alpha1.dockerios.io", "-o", "jsonpath={.spec.caBundle}")
		k.MustRun(t, "", "-n", "dockerios-system", "delete", "secret", "dockerios-apiserver-tls")

		addr := strings.TrimPrefix(cp.DockerIOSURL, "https://")
		framework.Eventually(t, 30*time.Second, func() string {
			bundle := k.Run("", "get", "apiservice", "v1alpha1.dockerios.io", "-o", "jsonpath={.spec.caBundle}").Stdout
			if bundle == before {
				return "the APIService still has the old CA"
			}
			decoded, err := base64.StdEncoding.DecodeString(bundle)
			if err != nil {
				return err.Error()
			}
			if _, err := dial(addr, decoded, "dockerios-apiserver.dockerios-system.svc"); err != nil {
				return "the apiserver serves a certificate the new bundle does not verify: " + err.Error()
			}
			if res := k.Run("", "get", "--raw", "/apis/dockerios.io/v1alpha1"); res.Err != nil {
				return "through the aggregator: " + res.Stderr
			}
			return ""
		})
	})

	t.Run("LauncherWebhookCalled", func(t *testing.T) {
		// StartControllerSelfCert waits for /readyz, which waits for the
		// webhook's key pair.
		cp.StartControllerSelfCert(t, string(rbac), "--reconcile=false",
			"--webhook-cert-secret=dockerios-system/dockerios-controller-webhook-tls",
			"--webhook-service=dockerios-system/dockerios-controller",
			"--webhook-configuration=dockerios-launcher-pods")
		bundle := k.MustRun(t, "", "get", "mutatingwebhookconfiguration", "dockerios-launcher-pods", "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
		ca := k.MustRun(t, "", "-n", "dockerios-system", "get", "secret", "dockerios-controller-webhook-tls", "-o", `jsonpath={.data.ca\.crt}`)
		assert.NotEmpty(t, bundle)
		assert.Equal(t, ca, bundle, "the webhook configuration carries the Secret's CA")
		decoded, err := base64.StdEncoding.DecodeString(bundle)
		require.NoError(t, err)
		assert.Contains(t, string(decoded), "BEGIN CERTIFICATE")

		// A macOS launcher pod is admitted only through the webhook
		// (failurePolicy Fail): it comes back with the OSK volume.
		k.MustRun(t, "", "create", "namespace", "launcher")
		k.MustRun(t, "", "-n", "launcher", "create", "secret", "generic", "dockerios-osk",
			"--from-literal=osk=dummy-osk-for-tests-only-0123456789abcdef0123456789abcdef0123")
		k.MustRun(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: mac
  labels: {%s: %s, %s: dockerios-osk}
spec:
  volumes: [{name: hook-sidecar-sockets, emptyDir: {}}]
  containers:
  - name: compute
    image: registry.example/virt-launcher:v1
    volumeMounts: [{name: hook-sidecar-sockets, mountPath: /var/run/kubevirt-hooks}]
  - name: hook-sidecar-0
    image: registry.example/dockerios/sidecar-hook:v1
    args: ["--osk-file=%s"]
    volumeMounts: [{name: hook-sidecar-sockets, mountPath: /var/run/kubevirt-hooks}]
`, launcherwebhook.KubeVirtLabel, launcherwebhook.LauncherValue, annotations.OSKSecretLabel, annotations.DefaultOSKFile), "-n", "launcher", "create", "-f", "-")
		var pod corev1.Pod
		require.NoError(t, json.Unmarshal([]byte(k.MustRun(t, "", "-n", "launcher", "get", "pod", "mac", "-o", "json")), &pod))
		require.Len(t, pod.Spec.Volumes, 2, "the webhook mutated the pod")
		assert.Equal(t, launcherwebhook.VolumeName, pod.Spec.Volumes[1].Name)
	})
}
