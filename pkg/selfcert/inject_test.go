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
	"context"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var bundle = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")

func writes(actions []k8stesting.Action) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() != "get" {
			n++
		}
	}
	return n
}

func TestMutatingWebhookConfiguration_Inject(t *testing.T) {
	for _, tc := range []struct {
		name       string
		have       [][]byte // each webhook's caBundle
		wantWrites int
	}{
		{"empty bundles are filled", [][]byte{nil, []byte("")}, 1},
		{"one stale webhook of two", [][]byte{bundle, []byte("old")}, 1},
		{"already right: nothing is written", [][]byte{bundle, bundle}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// setup
			config := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "dockerios-launcher-pods"}}
			for _, b := range tc.have {
				config.Webhooks = append(config.Webhooks, admissionregistrationv1.MutatingWebhook{ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: b}})
			}
			client := fake.NewClientset(config)
			// execute
			changed, err := MutatingWebhookConfiguration(client, "dockerios-launcher-pods").Inject(context.Background(), bundle)
			// assert
			require.NoError(t, err)
			assert.Equal(t, tc.wantWrites > 0, changed)
			assert.Equal(t, tc.wantWrites, writes(client.Actions()))
			got, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), "dockerios-launcher-pods", metav1.GetOptions{})
			require.NoError(t, err)
			for i, w := range got.Webhooks {
				assert.Equal(t, bundle, w.ClientConfig.CABundle, "webhook %d", i)
			}
		})
	}
}

func TestAPIService_Inject(t *testing.T) {
	encoded := base64.StdEncoding.EncodeToString(bundle)
	for _, tc := range []struct {
		name       string
		have       string
		wantWrites int
	}{
		{"empty bundle is filled", "", 1},
		{"another CA is replaced", base64.StdEncoding.EncodeToString([]byte("old")), 1},
		{"already right: nothing is written", encoded, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
				"metadata": map[string]any{"name": "v1alpha1.dockerios.io"},
				"spec":     map[string]any{"group": "dockerios.io", "version": "v1alpha1", "caBundle": tc.have},
			}}
			client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), obj)

			changed, err := APIService(client, "v1alpha1.dockerios.io").Inject(context.Background(), bundle)

			require.NoError(t, err)
			assert.Equal(t, tc.wantWrites > 0, changed)
			assert.Equal(t, tc.wantWrites, writes(client.Actions()))
			got, err := client.Resource(apiServiceResource).Get(context.Background(), "v1alpha1.dockerios.io", metav1.GetOptions{})
			require.NoError(t, err)
			b, _, _ := unstructured.NestedString(got.Object, "spec", "caBundle")
			assert.Equal(t, encoded, b)
			group, _, _ := unstructured.NestedString(got.Object, "spec", "group")
			assert.Equal(t, "dockerios.io", group, "nothing but caBundle changes")
		})
	}
}

func TestTargets_ReportAMissingObject(t *testing.T) {
	_, err := MutatingWebhookConfiguration(fake.NewClientset(), "dockerios-launcher-pods").Inject(context.Background(), bundle)
	assert.ErrorContains(t, err, `"dockerios-launcher-pods" not found`)
	_, err = APIService(dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{apiServiceResource: "APIServiceList"}), "v1alpha1.dockerios.io").Inject(context.Background(), bundle)
	assert.ErrorContains(t, err, `"v1alpha1.dockerios.io" not found`)
}
