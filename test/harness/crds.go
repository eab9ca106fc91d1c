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

package harness

import (
	"context"
	"embed"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/dockerios/dockerios/pkg/controller/external"
)

// The resources the harness plays the owners of.
var (
	VirtualMachineGVR         = external.VirtualMachines
	VirtualMachineInstanceGVR = external.VirtualMachineInstances
	DataVolumeGVR             = external.DataVolumes
	DataSourceGVR             = external.DataSources

	crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// upstreamCRDs are KubeVirt's CRDs for VirtualMachine and
// VirtualMachineInstance and CDI's for DataVolume and DataSource, generated
// from the upstream API modules at the versions go.mod pins
// (hack/update-upstream-crds.sh; hack/verify-upstream-crds.sh checks them):
// kube-apiserver validates and prunes these kinds with KubeVirt's and CDI's
// schemas, and with fieldValidation=Strict (StrictFieldValidation) rejects
// a field they do not have. What the real CRDs cannot check is not checked:
// KubeVirt's and CDI's admission webhooks and defaulting do not run here.
//
//go:embed crds/*.yaml
var upstreamCRDs embed.FS

// monitoringCRDs are the Prometheus Operator's ServiceMonitor and
// PrometheusRule CRDs, generated the same way from its API module
// (hack/upstream-crds pins the version): artifacts/monitoring ships
// objects of these kinds. InstallCRDs does not install them (the harness
// plays no Prometheus); InstallMonitoringCRDs does, for the test that
// dry-runs artifacts/monitoring against their schemas.
//
//go:embed crds/monitoring/*.yaml
var monitoringCRDs embed.FS

// crd describes one stand-in CustomResourceDefinition.
type crd struct {
	group, version, kind, plural, singular string
	shortNames                             []string
	columns                                string // additionalPrinterColumns, YAML flow list
}

// standIns are the kinds with no upstream schema to install: Multus's
// NetworkAttachmentDefinition, for the agent network of artifacts/
// (nothing plays Multus), and the multi-networkpolicy project's
// MultiNetworkPolicy, the agent network's policy (nothing enforces it
// here; test/leastprivilege validates its spec as the NetworkPolicy spec
// it mirrors and evaluates what it allows). Their CRDs are hand-written
// manifests in those repositories, and no Go module generates them.
//
// These are STAND-INS: the real group, version, kind, names and a status
// subresource, but open schemas (spec and status are `type: object` with
// `x-kubernetes-preserve-unknown-fields: true`), so kube-apiserver stores
// whatever is written.
var standIns = []crd{
	{group: "k8s.cni.cncf.io", version: "v1", kind: "NetworkAttachmentDefinition", plural: "network-attachment-definitions", singular: "network-attachment-definition",
		shortNames: []string{"net-attach-def"},
		columns:    `[{name: Age, type: date, jsonPath: .metadata.creationTimestamp}]`},
	{group: "k8s.cni.cncf.io", version: "v1beta1", kind: "MultiNetworkPolicy", plural: "multi-networkpolicies", singular: "multi-networkpolicy",
		shortNames: []string{"multi-policy"},
		columns:    `[{name: Age, type: date, jsonPath: .metadata.creationTimestamp}]`},
}

func (c crd) object() (*unstructured.Unstructured, error) {
	doc := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[4]s.%[1]s
  labels:
    app.kubernetes.io/part-of: dockerios-test-harness
  annotations:
    dockerios.io/stand-in: "open-schema stand-in for tests, not the upstream CRD"
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: %[3]s, listKind: %[3]sList, plural: %[4]s, singular: %[5]s, shortNames: %[6]s, categories: [all]}
  versions:
  - name: %[2]s
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns: %[7]s
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, c.group, c.version, c.kind, c.plural, c.singular, flowList(c.shortNames), c.columns)
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		return nil, fmt.Errorf("stand-in CRD %s.%s: %w", c.plural, c.group, err)
	}
	return obj, nil
}

func flowList(items []string) string {
	s := "["
	for i, it := range items {
		if i > 0 {
			s += ", "
		}
		s += it
	}
	return s + "]"
}

// crdObjects are the CRDs InstallCRDs installs.
func crdObjects() ([]*unstructured.Unstructured, error) {
	objs, err := readCRDs(upstreamCRDs, "crds")
	if err != nil {
		return nil, err
	}
	for _, c := range standIns {
		obj, err := c.object()
		if err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// readCRDs reads the CRDs in dir of fsys.
func readCRDs(fsys embed.FS, dir string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	files, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.IsDir() {
			continue
		}
		data, err := fsys.ReadFile(path.Join(dir, f.Name()))
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			return nil, fmt.Errorf("upstream CRD %s: %w", f.Name(), err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// statusSubresources says, per resource of the installed CRDs, whether it
// has a status subresource: KubeVirt's VirtualMachineInstance and CDI's
// DataSource have none, so their status is written with the object.
var statusSubresources = sync.OnceValues(func() (map[schema.GroupResource]bool, error) {
	objs, err := crdObjects()
	if err != nil {
		return nil, err
	}
	out := map[schema.GroupResource]bool{}
	for _, o := range objs {
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(o.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for _, v := range versions {
			if vm, ok := v.(map[string]any); ok {
				if _, ok, _ := unstructured.NestedMap(vm, "subresources", "status"); ok {
					out[schema.GroupResource{Group: group, Resource: plural}] = true
				}
			}
		}
	}
	return out, nil
})

// hasStatusSubresource says whether gvr's CRD has a status subresource.
func hasStatusSubresource(gvr schema.GroupVersionResource) bool {
	m, err := statusSubresources()
	return err == nil && m[gvr.GroupResource()]
}

// strictGroups are the API groups StrictFieldValidation makes strict.
var strictGroups = []string{"kubevirt.io", "cdi.kubevirt.io"}

// StrictFieldValidation returns a copy of cfg whose creates, updates and
// patches of KubeVirt and CDI objects ask kube-apiserver for
// fieldValidation=Strict: a field the installed schema does not have is an
// error rather than silently dropped, as it would be by default.
func StrictFieldValidation(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if !strictRequest(req) {
				return rt.RoundTrip(req)
			}
			req = req.Clone(req.Context())
			q := req.URL.Query()
			q.Set("fieldValidation", metav1.FieldValidationStrict)
			req.URL.RawQuery = q.Encode()
			return rt.RoundTrip(req)
		})
	})
	return c
}

func strictRequest(req *http.Request) bool {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return false
	}
	for _, g := range strictGroups {
		if strings.HasPrefix(req.URL.Path, "/apis/"+g+"/") {
			return req.URL.Query().Get("fieldValidation") == ""
		}
	}
	return false
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// InstallCRDs creates (or updates) KubeVirt's VirtualMachine and
// VirtualMachineInstance CRDs, CDI's DataVolume and DataSource CRDs (see
// upstreamCRDs) and the stand-in NetworkAttachmentDefinition CRD, and
// waits until kube-apiserver serves them (condition Established). It is
// idempotent.
//
// It uses the dynamic client, so the harness needs no
// apiextensions-apiserver client library.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	objs, err := crdObjects()
	if err != nil {
		return err
	}
	return installCRDs(ctx, cfg, objs)
}

// InstallMonitoringCRDs creates (or updates) the Prometheus Operator's
// ServiceMonitor and PrometheusRule CRDs (see monitoringCRDs) and waits
// until kube-apiserver serves them. It is idempotent.
func InstallMonitoringCRDs(ctx context.Context, cfg *rest.Config) error {
	objs, err := readCRDs(monitoringCRDs, "crds/monitoring")
	if err != nil {
		return err
	}
	return installCRDs(ctx, cfg, objs)
}

func installCRDs(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := dyn.Resource(crdGVR)
	var names []string
	for _, obj := range objs {
		names = append(names, obj.GetName())
		_, err = crds.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Bring an older install (a stand-in, an older release) up to date.
			var cur *unstructured.Unstructured
			if cur, err = crds.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
				cur.Object["spec"] = obj.Object["spec"]
				cur.SetLabels(obj.GetLabels())
				cur.SetAnnotations(obj.GetAnnotations())
				_, err = crds.Update(ctx, cur, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", obj.GetName(), err)
		}
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			cur, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // keep polling through transient errors until the timeout
			}
			conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not Established: %w", name, err)
		}
	}
	return nil
}
