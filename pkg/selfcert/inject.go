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
	"context"
	"encoding/base64"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// FieldManager is the manager name of the caBundle writes, so that
// managedFields say who keeps the field.
const FieldManager = "dockerios-selfcert"

// Target is a registration object whose caBundle must hold the CA.
type Target interface {
	// Inject makes the object's caBundle ca, writing only if it differs;
	// changed says whether it wrote.
	Inject(ctx context.Context, ca []byte) (changed bool, err error)
	// Trusts says whether the object's caBundle (every one of them, for
	// several webhooks) holds the PEM certificate ca.
	Trusts(ctx context.Context, ca []byte) (bool, error)
	// String names the object for logs and errors.
	String() string
}

// holds says whether the PEM bundle holds the PEM certificate ca.
func holds(bundle, ca []byte) bool {
	ca = bytes.TrimSpace(ca)
	return len(ca) > 0 && bytes.Contains(bundle, ca)
}

// Both targets read, compare and Update with the resourceVersion they
// read (retrying on a conflict) rather than patch: a JSON merge patch of
// a webhook configuration would replace its whole webhooks list, and the
// read is needed anyway to write nothing when the bundle is already
// right. RBAC therefore needs get and update, not patch.

var apiServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// APIService is the APIService name, whose spec.caBundle kube-apiserver's
// aggregator verifies the component's serving certificate with. It goes
// through the dynamic client: k8s.io/kube-aggregator's clientset is not a
// dependency of this module, and one field does not warrant it.
func APIService(client dynamic.Interface, name string) Target {
	return &apiService{client: client, name: name}
}

type apiService struct {
	client dynamic.Interface
	name   string
}

func (a *apiService) String() string { return "APIService " + a.name }

func (a *apiService) Trusts(ctx context.Context, ca []byte) (bool, error) {
	obj, err := a.client.Resource(apiServiceResource).Get(ctx, a.name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	have, _, err := unstructured.NestedString(obj.Object, "spec", "caBundle")
	if err != nil {
		return false, fmt.Errorf("reading spec.caBundle: %w", err)
	}
	bundle, err := base64.StdEncoding.DecodeString(have)
	if err != nil {
		return false, fmt.Errorf("spec.caBundle: %w", err)
	}
	return holds(bundle, ca), nil
}

func (a *apiService) Inject(ctx context.Context, ca []byte) (bool, error) {
	want := base64.StdEncoding.EncodeToString(ca)
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := a.client.Resource(apiServiceResource).Get(ctx, a.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		have, _, err := unstructured.NestedString(obj.Object, "spec", "caBundle")
		if err != nil {
			return fmt.Errorf("reading spec.caBundle: %w", err)
		}
		if have == want {
			return nil
		}
		if err := unstructured.SetNestedField(obj.Object, want, "spec", "caBundle"); err != nil {
			return err
		}
		if _, err := a.client.Resource(apiServiceResource).Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return err
		}
		changed = true
		return nil
	})
	return changed, err
}

// MutatingWebhookConfiguration is the configuration name, every webhook
// of which is served by the component: each one's clientConfig.caBundle
// is set.
func MutatingWebhookConfiguration(client kubernetes.Interface, name string) Target {
	return &mutatingWebhookConfiguration{client: client, name: name}
}

type mutatingWebhookConfiguration struct {
	client kubernetes.Interface
	name   string
}

func (m *mutatingWebhookConfiguration) String() string {
	return "MutatingWebhookConfiguration " + m.name
}

func (m *mutatingWebhookConfiguration) Trusts(ctx context.Context, ca []byte) (bool, error) {
	config, err := m.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, m.name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	for _, w := range config.Webhooks {
		if !holds(w.ClientConfig.CABundle, ca) {
			return false, nil
		}
	}
	return true, nil
}

func (m *mutatingWebhookConfiguration) Inject(ctx context.Context, ca []byte) (bool, error) {
	configs := m.client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		config, err := configs.Get(ctx, m.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		stale := false
		for i := range config.Webhooks {
			if !bytes.Equal(config.Webhooks[i].ClientConfig.CABundle, ca) {
				config.Webhooks[i].ClientConfig.CABundle = ca
				stale = true
			}
		}
		if !stale {
			return nil
		}
		if _, err := configs.Update(ctx, config, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return err
		}
		changed = true
		return nil
	})
	return changed, err
}
