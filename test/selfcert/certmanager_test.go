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
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	controllerapp "github.com/dockerios/dockerios/cmd/controller/app"
	"github.com/dockerios/dockerios/pkg/selfcert"
)

// With cert-manager, artifacts/cert-manager makes both servers serve the
// certificates cert-manager issues and has cainjector fill the caBundles;
// every name in it must meet the name it depends on.
func TestCertManagerComponent(t *testing.T) {
	objs := renderWithCertManager(t, filepath.Join(moduleRoot(t), "artifacts", "deploy"))

	certs := map[string]*unstructured.Unstructured{}
	issuers := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Certificate":
			certs[o.GetName()] = o
		case "Issuer":
			issuers[o.GetName()] = o
		}
	}
	for name, c := range certs {
		ref, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "name")
		assert.Contains(t, issuers, ref, "Certificate %s's issuer", name)
	}
	caIssuerSecret, _, _ := unstructured.NestedString(issuers["dockerios-ca"].Object, "spec", "ca", "secretName")
	caSecret, _, _ := unstructured.NestedString(certs["dockerios-ca"].Object, "spec", "secretName")
	isCA, _, _ := unstructured.NestedBool(certs["dockerios-ca"].Object, "spec", "isCA")
	assert.True(t, isCA)
	assert.Equal(t, caSecret, caIssuerSecret, "the CA Issuer signs with the CA Certificate's Secret")

	// served checks that a server is given Certificate name's Secret and
	// that the Certificate covers the Service kube-apiserver dials.
	served := func(t *testing.T, name string, pod corev1.PodSpec, dir string, service string) {
		c := certs[name]
		require.NotNil(t, c, "Certificate %s", name)
		secret, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
		dnsNames, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
		ns, svc, _ := strings.Cut(service, "/")
		for _, want := range selfcert.ServiceDNSNames(types.NamespacedName{Namespace: ns, Name: svc}) {
			assert.Contains(t, dnsNames, want, "Certificate %s", name)
		}
		var volume string
		for _, m := range pod.Containers[0].VolumeMounts {
			if m.MountPath == dir {
				volume = m.Name
			}
		}
		require.NotEmpty(t, volume, "%s is mounted", dir)
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == volume })
		require.GreaterOrEqual(t, i, 0)
		require.NotNil(t, pod.Volumes[i].Secret)
		assert.Equal(t, secret, pod.Volumes[i].Secret.SecretName, "%s holds Certificate %s's Secret", dir, name)
	}

	t.Run("apiserver", func(t *testing.T) {
		d := deployment(t, objs, "dockerios-apiserver")
		args := d.Spec.Template.Spec.Containers[0].Args
		assert.Contains(t, args, "--tls-cert-file=/var/run/dockerios/serving/tls.crt")
		assert.Contains(t, args, "--tls-private-key-file=/var/run/dockerios/serving/tls.key")
		for _, a := range args {
			assert.False(t, strings.HasPrefix(a, "--cert-secret") || strings.HasPrefix(a, "--apiservice"), "the apiserver keeps no certificate of its own: %s", a)
		}
		var svc string
		for _, o := range objs {
			if o.GetKind() == "APIService" {
				assert.Equal(t, "dockerios-system/dockerios-apiserver", o.GetAnnotations()["cert-manager.io/inject-ca-from"])
				ns, _, _ := unstructured.NestedString(o.Object, "spec", "service", "namespace")
				name, _, _ := unstructured.NestedString(o.Object, "spec", "service", "name")
				svc = ns + "/" + name
			}
		}
		served(t, "dockerios-apiserver", d.Spec.Template.Spec, "/var/run/dockerios/serving", svc)
	})
	t.Run("controller", func(t *testing.T) {
		d := deployment(t, objs, "dockerios-controller")
		args := d.Spec.Template.Spec.Containers[0].Args
		o := controllerapp.NewOptions()
		require.NoError(t, o.Parse(args), "the controller accepts its arguments")
		assert.Equal(t, "/var/run/dockerios/webhook", o.WebhookCertDir)
		assert.Empty(t, o.WebhookCertSecret, "the controller keeps no certificate of its own")
		assert.Empty(t, o.WebhookConfiguration, "nor injects a CA")
		var svc string
		for _, obj := range objs {
			if obj.GetKind() == "MutatingWebhookConfiguration" {
				assert.Equal(t, "dockerios-system/dockerios-controller-webhook", obj.GetAnnotations()["cert-manager.io/inject-ca-from"])
				var w admissionregistrationv1.MutatingWebhookConfiguration
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &w))
				svc = w.Webhooks[0].ClientConfig.Service.Namespace + "/" + w.Webhooks[0].ClientConfig.Service.Name
			}
		}
		served(t, "dockerios-controller-webhook", d.Spec.Template.Spec, o.WebhookCertDir, svc)
	})
}

// The component's patches check the arguments they replace: when the
// Deployments change, the build fails rather than render a server that
// still keeps its own certificate beside cert-manager's.
func TestCertManagerComponent_RefusesArgumentsItDoesNotKnow(t *testing.T) {
	deploy := filepath.Join(t.TempDir(), "deploy")
	require.NoError(t, os.CopyFS(deploy, os.DirFS(filepath.Join(moduleRoot(t), "artifacts", "deploy"))))
	path := filepath.Join(deploy, "07-deployment.yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	changed := bytes.Replace(data, []byte("--cert-secret=dockerios-system/dockerios-apiserver-tls"), []byte("--cert-secret=dockerios-system/other"), 1)
	require.NotEqual(t, data, changed)
	require.NoError(t, os.WriteFile(path, changed, 0o644))

	_, err = kustomize(t, deploy)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "testing value")
}

func renderWithCertManager(t *testing.T, deploy string) []*unstructured.Unstructured {
	t.Helper()
	out, err := kustomize(t, deploy)
	require.NoError(t, err)
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		if len(o.Object) > 0 {
			objs = append(objs, o)
		}
	}
	return objs
}

// kustomize renders an overlay of deploy with the cert-manager component,
// as an operator's would be, with the real kubectl.
func kustomize(t *testing.T, deploy string) ([]byte, error) {
	t.Helper()
	overlay := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(overlay, p)
		require.NoError(t, err)
		return r
	}
	component := filepath.Join(moduleRoot(t), "artifacts", "cert-manager")
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"),
		[]byte("resources: ["+rel(deploy)+"]\ncomponents: ["+rel(component)+"]\n"), 0o644))
	var stderr bytes.Buffer
	cmd := exec.Command("kubectl", "kustomize", overlay)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New(stderr.String())
	}
	return out, nil
}

func deployment(t *testing.T, objs []*unstructured.Unstructured, name string) *appsv1.Deployment {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == name {
			var d appsv1.Deployment
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d))
			return &d
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil
}
