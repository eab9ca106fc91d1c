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
	"fmt"
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

// crd describes one stand-in CustomResourceDefinition.
type crd struct {
	group, version, kind, plural, singular string
	shortNames                             []string
	columns                                string // additionalPrinterColumns, YAML flow list
}

// stand-ins are the KubeVirt and CDI kinds the controller makes or reads.
//
// These are STAND-INS, not KubeVirt's or CDI's real CRDs: they carry the
// real group, version, kind, names and a status subresource, but open
// schemas (spec and status are `type: object` with
// `x-kubernetes-preserve-unknown-fields: true`). kube-apiserver therefore
// stores whatever the controller writes without KubeVirt's or CDI's
// validation, defaulting or webhooks; a shape error that the real CRDs
// would reject is caught by the controller's own unit tests against the
// typed kubevirt.io/api and CDI structs, not here.
var standIns = []crd{
	{group: "kubevirt.io", version: "v1", kind: "VirtualMachine", plural: "virtualmachines", singular: "virtualmachine",
		shortNames: []string{"vm", "vms"},
		columns:    `[{name: Status, type: string, jsonPath: .status.printableStatus}, {name: Ready, type: boolean, jsonPath: .status.ready}, {name: Age, type: date, jsonPath: .metadata.creationTimestamp}]`},
	{group: "kubevirt.io", version: "v1", kind: "VirtualMachineInstance", plural: "virtualmachineinstances", singular: "virtualmachineinstance",
		shortNames: []string{"vmi", "vmis"},
		columns:    `[{name: Phase, type: string, jsonPath: .status.phase}, {name: IP, type: string, jsonPath: ".status.interfaces[0].ipAddress"}, {name: NodeName, type: string, jsonPath: .status.nodeName}, {name: Age, type: date, jsonPath: .metadata.creationTimestamp}]`},
	{group: "cdi.kubevirt.io", version: "v1beta1", kind: "DataVolume", plural: "datavolumes", singular: "datavolume",
		shortNames: []string{"dv", "dvs"},
		columns:    `[{name: Phase, type: string, jsonPath: .status.phase}, {name: Progress, type: string, jsonPath: .status.progress}, {name: Age, type: date, jsonPath: .metadata.creationTimestamp}]`},
	{group: "cdi.kubevirt.io", version: "v1beta1", kind: "DataSource", plural: "datasources", singular: "datasource",
		shortNames: []string{"das"},
		columns:    `[{name: Age, type: date, jsonPath: .metadata.creationTimestamp}]`},
	// Multus's, for the agent network of artifacts/ (nothing plays Multus).
	{group: "k8s.cni.cncf.io", version: "v1", kind: "NetworkAttachmentDefinition", plural: "network-attachment-definitions", singular: "network-attachment-definition",
		shortNames: []string{"net-attach-def"},
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

// InstallCRDs creates (or updates) the stand-in CustomResourceDefinitions
// for KubeVirt's VirtualMachine and VirtualMachineInstance and CDI's
// DataVolume and DataSource, and waits until kube-apiserver serves them
// (condition Established). It is idempotent. See standIns for what these
// CRDs are and are not.
//
// It uses the dynamic client, so the harness needs no
// apiextensions-apiserver client library.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := dyn.Resource(crdGVR)
	var names []string
	for _, c := range standIns {
		obj, err := c.object()
		if err != nil {
			return err
		}
		names = append(names, obj.GetName())
		_, err = crds.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Bring an older stand-in up to date (idempotent install).
			var cur *unstructured.Unstructured
			if cur, err = crds.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
				cur.Object["spec"] = obj.Object["spec"]
				_, err = crds.Update(ctx, cur, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("installing stand-in CRD %s: %w", obj.GetName(), err)
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
			return fmt.Errorf("stand-in CRD %s not Established: %w", name, err)
		}
	}
	return nil
}
