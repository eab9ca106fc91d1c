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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

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
		k.MustRun(t, launcherPod(), "-n", "launcher", "create", "-f", "-")
		var pod corev1.Pod
		require.NoError(t, json.Unmarshal([]byte(k.MustRun(t, "", "-n", "launcher", "get", "pod", "mac", "-o", "json")), &pod))
		require.Len(t, pod.Spec.Volumes, 2, "the webhook mutated the pod")
		assert.Equal(t, launcherwebhook.VolumeName, pod.Spec.Volumes[1].Name)
	})
}

// Certificates of seconds, so both components rotate their serving
// certificates several times and their CAs once while a client keeps
// reading and writing dockerios.io through kube-apiserver's aggregator
// and creating launcher pods that only the webhook (failurePolicy Fail)
// lets in. Not one request may fail: the new CA is in every caBundle
// before any certificate of it is served.
func TestPlainInstall_CertificatesRotateUnderLoadWithNoFailedRequest(t *testing.T) {
	rbac, err := os.ReadFile(filepath.Join(moduleRoot(t), "artifacts", "deploy", "12-certificates.yaml"))
	require.NoError(t, err)
	// The CA lives 45 s and is rotated with 15 s left; serving
	// certificates live 12 s and are renewed with 4 s left.
	validity := []string{"ca-validity=45s", "validity=12s", "overlap=4s"}
	var apiserverArgs, controllerArgs []string
	for _, v := range validity {
		apiserverArgs = append(apiserverArgs, "--cert-"+v)
		controllerArgs = append(controllerArgs, "--webhook-cert-"+v)
	}
	cp := framework.StartControlPlaneSelfCert(t, string(rbac), append([]string{
		"--cert-secret=dockerios-system/dockerios-apiserver-tls",
		"--service=dockerios-system/dockerios-apiserver",
		"--apiservice=v1alpha1.dockerios.io"}, apiserverArgs...)...)
	cp.StartControllerSelfCert(t, string(rbac), append([]string{"--reconcile=false",
		"--webhook-cert-secret=dockerios-system/dockerios-controller-webhook-tls",
		"--webhook-service=dockerios-system/dockerios-controller",
		"--webhook-configuration=dockerios-launcher-pods"}, controllerArgs...)...)
	k := framework.NewKubectl(t, cp.AdminKubeconfig)
	k.MustRun(t, "", "create", "namespace", "launcher")
	k.MustRun(t, "", "-n", "launcher", "create", "secret", "generic", "dockerios-osk",
		"--from-literal=osk=dummy-osk-for-tests-only-0123456789abcdef0123456789abcdef0123")
	caOf := func(secret string) string {
		return k.MustRun(t, "", "-n", "dockerios-system", "get", "secret", secret, "-o", `jsonpath={.data.ca\.crt}`)
	}
	firstCAs := []string{caOf("dockerios-apiserver-tls"), caOf("dockerios-controller-webhook-tls")}

	cfg := framework.RESTConfig(t, cp.AdminKubeconfig)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	pools := dyn.Resource(schema.GroupVersionResource{Group: "dockerios.io", Version: "v1alpha1", Resource: "macosidentitypools"})
	var pod corev1.Pod
	require.NoError(t, yaml.Unmarshal([]byte(launcherPod()), &pod))

	// execute: a minute of requests, one after another.
	ctx := t.Context()
	var failures []string
	requests := 0
	fail := func(what string, err error) {
		failures = append(failures, fmt.Sprintf("%s %s: %v", time.Now().Format(time.StampMilli), what, err))
	}
	start := time.Now()
	for i := 0; time.Since(start) < time.Minute; i++ {
		name := fmt.Sprintf("pool-%d", i)
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "dockerios.io/v1alpha1", "kind": "MacOSIdentityPool",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"model": "iMacPro1,1"}}}
		requests += 4
		if _, err := pools.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			fail("create "+name, err)
		}
		if _, err := pools.List(ctx, metav1.ListOptions{}); err != nil {
			fail("list", err)
		}
		if err := pools.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			fail("delete "+name, err)
		}
		p := pod.DeepCopy()
		p.Name = fmt.Sprintf("mac-%d", i)
		got, err := kube.CoreV1().Pods("launcher").Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err != nil:
			fail("launcher pod", err)
		case len(got.Spec.Volumes) != 2:
			fail("launcher pod", fmt.Errorf("not mutated: volumes %v", got.Spec.Volumes))
		}
	}

	// assert
	assert.Empty(t, failures, "of %d requests", requests)
	assert.NotEqual(t, firstCAs[0], caOf("dockerios-apiserver-tls"), "the apiserver's CA was rotated")
	assert.NotEqual(t, firstCAs[1], caOf("dockerios-controller-webhook-tls"), "the webhook's CA was rotated")
	t.Logf("%d requests through CA rotations of both components, %d failed", requests, len(failures))
}

// launcherPod is a virt-launcher pod of a macOS VM, as virt-controller
// makes it: admitted only through the webhook, which mounts the OSK.
func launcherPod() string {
	return fmt.Sprintf(`apiVersion: v1
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
`, launcherwebhook.KubeVirtLabel, launcherwebhook.LauncherValue, annotations.OSKSecretLabel, annotations.DefaultOSKFile)
}
