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
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/controller/machine"
)

// KubeVirt's and CDI's schemas are the ones installed: with strict field
// validation (the harness's, the e2e tests' and the controller's clients)
// kube-apiserver rejects a field they do not have; by default it drops the
// field without a word; a value of the wrong type is rejected either way.
func (e *testEnv) testUpstreamSchemas(t *testing.T) {
	vm := func(name string, domain map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{"runStrategy": "Halted", "template": map[string]any{
				"spec": map[string]any{"domain": domain}}},
		}}
	}
	typo := map[string]any{"devices": map[string]any{},
		"firmware": map[string]any{"bootloader": map[string]any{"efi": map[string]any{"secureBot": false}}}}

	_, err := e.dyn.Resource(VirtualMachineGVR).Namespace(e.ns).Create(t.Context(), vm("schema-strict", typo), metav1.CreateOptions{})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `unknown field "spec.template.spec.domain.firmware.bootloader.efi.secureBot"`) {
		t.Errorf("strict create of a VM with an unknown field: %v", err)
	}

	created, err := e.lax.Resource(VirtualMachineGVR).Namespace(e.ns).Create(t.Context(), vm("schema-lax", typo), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.lax.Resource(VirtualMachineGVR).Namespace(e.ns).Delete(t.Context(), "schema-lax", metav1.DeleteOptions{})
	})
	efi, found, _ := unstructured.NestedMap(created.Object, "spec", "template", "spec", "domain", "firmware", "bootloader", "efi")
	if !found || len(efi) != 0 {
		t.Errorf("the unknown field was not pruned: efi = %v (found %v)", efi, found)
	}

	wrongType := map[string]any{"devices": map[string]any{}, "cpu": map[string]any{"cores": "four"}}
	_, err = e.lax.Resource(VirtualMachineGVR).Namespace(e.ns).Create(t.Context(), vm("schema-type", wrongType), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.template.spec.domain.cpu.cores") {
		t.Errorf("create of a VM with a string for cpu.cores: %v", err)
	}

	dv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
		"metadata": map[string]any{"name": "schema-strict"},
		"spec": map[string]any{
			"sourceRef": map[string]any{"kind": "DataSource", "namespace": "images", "name": "sonoma"},
			"storage":   map[string]any{"resources": map[string]any{"request": map[string]any{"storage": "1Gi"}}},
		},
	}}
	_, err = e.dyn.Resource(DataVolumeGVR).Namespace(e.ns).Create(t.Context(), dv, metav1.CreateOptions{})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `unknown field "spec.storage.resources.request"`) {
		t.Errorf("strict create of a DataVolume with an unknown field: %v", err)
	}

	// Upstream's subresources, which decide how status is written.
	for gvr, want := range map[schema.GroupVersionResource]bool{VirtualMachineGVR: true, VirtualMachineInstanceGVR: false, DataVolumeGVR: true, DataSourceGVR: false} {
		if got := hasStatusSubresource(gvr); got != want {
			t.Errorf("%s has a status subresource: %v, want %v", gvr.Resource, got, want)
		}
	}

	t.Run("ControllerObjects", e.testControllerObjects)
}

// Every shape of VirtualMachine and DataVolume the controller makes
// (pkg/controller/machine) passes KubeVirt's and CDI's schemas with strict
// field validation, in server-side dry runs.
func (e *testEnv) testControllerObjects(t *testing.T) {
	m := &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: "schema-mac", Namespace: e.ns, UID: types.UID("0f8e6c1a-5b7d-4e2f-9a3c-1d2e3f4a5b6c")},
		Spec: v1alpha1.MacOSMachineSpec{ClassName: "c", VMLabels: map[string]string{"example.com/team": "ci"}}}
	id := &v1alpha1.MacOSIdentity{ObjectMeta: metav1.ObjectMeta{Name: "schema-id"}, Spec: testIdentity}
	s := machine.Settings{BootdiskImage: "example.com/bootdisk:1", HookSidecarImage: "example.com/hook:1", OSKSecretName: "dockerios-osk",
		TerminationGracePeriodSeconds: 180}
	classes := map[string]v1alpha1.MacOSMachineClassSpec{
		"defaults": {},
		"everything": {
			CPU:          v1alpha1.CPUSpec{Cores: 8, Model: "host-passthrough", Features: []v1alpha1.CPUFeature{{Name: "avx2", Policy: v1alpha1.CPUFeaturePolicyRequire}, {Name: "pcid"}}},
			Memory:       ptr.To(resource.MustParse("16Gi")),
			SystemDisk:   v1alpha1.SystemDiskSpec{Size: resource.MustParse("128Gi"), StorageClassName: ptr.To("fast"), Bus: v1alpha1.DiskBusVirtio},
			AgentNetwork: &v1alpha1.AgentNetworkSpec{NetworkName: "dockerios-system/dockerios-agent", Port: 9443},
			HostDevices: []v1alpha1.HostDeviceSpec{{Name: "gpu1", DeviceName: "nvidia.com/GP102GL_Tesla_P40", GPU: true},
				{Name: "nic1", DeviceName: "intel.com/sriov"}},
		},
		"nvme":   {SystemDisk: v1alpha1.SystemDiskSpec{Size: resource.MustParse("64Gi"), Bus: v1alpha1.DiskBusNVMe}},
		"sata":   {SystemDisk: v1alpha1.SystemDiskSpec{Size: resource.MustParse("64Gi"), Bus: v1alpha1.DiskBusSATA}},
		"agents": {AgentNetwork: &v1alpha1.AgentNetworkSpec{NetworkName: "dockerios-agent"}},
	}
	images := map[string]v1alpha1.ImageSource{
		"dataSource": {DataSource: &v1alpha1.NamespacedObjectReference{Namespace: "images", Name: "sonoma"}},
		"pvc":        {PVC: &v1alpha1.NamespacedObjectReference{Namespace: "images", Name: "sonoma-disk"}},
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for name, spec := range classes {
		if spec.SystemDisk.Size.IsZero() {
			spec.SystemDisk.Size = resource.MustParse("64Gi")
		}
		class := &v1alpha1.MacOSMachineClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
		for _, running := range []bool{true, false} {
			vm, err := machine.VirtualMachine(m, class, id, s, running)
			if err != nil {
				t.Fatal(err)
			}
			u, err := external.ToUnstructured(vm)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.dyn.Resource(VirtualMachineGVR).Namespace(e.ns).Create(t.Context(), u, dryRun); err != nil {
				t.Errorf("class %s, running %v: the controller's VirtualMachine: %v", name, running, err)
			}
		}
		for src, source := range images {
			dv, err := machine.SystemDisk(m, class, &v1alpha1.MacOSImage{ObjectMeta: metav1.ObjectMeta{Name: src}, Spec: v1alpha1.MacOSImageSpec{Source: source}})
			if err != nil {
				t.Fatal(err)
			}
			u, err := external.ToUnstructured(dv)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.dyn.Resource(DataVolumeGVR).Namespace(e.ns).Create(t.Context(), u, dryRun); err != nil {
				t.Errorf("class %s, image from %s: the controller's DataVolume: %v", name, src, err)
			}
		}
	}
}
