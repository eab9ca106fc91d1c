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

package machine

import (
	"encoding/json"
	"fmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/sidecar-hook/annotations"
)

// exampleClass is artifacts/examples/03-class.yaml as the apiserver stores
// it: decoded and defaulted.
func exampleClass(t *testing.T) *v1alpha1.MacOSMachineClass {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "artifacts", "examples", "03-class.yaml"))
	require.NoError(t, err)
	c := &v1alpha1.MacOSMachineClass{}
	require.NoError(t, yaml.UnmarshalStrict(raw, c))
	v1alpha1.SetObjectDefaults_MacOSMachineClass(c)
	return c
}

// TestVirtualMachine_Shape checks, field by field, the VirtualMachine made
// for the example class and its variants against what the architecture
// requires of a macOS VM on KubeVirt: q35 with EFI and no secure boot, the
// class's CPU (Penryn by default) and memory, SMBIOS UUID and serial from
// the identity, the bootdisk first and the system disk on the class's bus
// (NVMe through the hook), the hook sidecar and its annotations, the OSK
// Secret label, the identity's MAC on the interface the ROM names, the
// agent network through Multus, and passed-through devices.
func TestVirtualMachine_Shape(t *testing.T) {
	settings := Settings{BootdiskImage: "example.com/bootdisk:1", HookSidecarImage: "example.com/hook:1",
		OSKSecretName: "dockerios-osk", TerminationGracePeriodSeconds: 120}
	id := testIdentity()
	for _, tc := range []struct {
		name  string
		class func(*v1alpha1.MacOSMachineClass)
	}{
		{"example", nil},
		{"agent network", func(c *v1alpha1.MacOSMachineClass) {
			c.Spec.AgentNetwork = &v1alpha1.AgentNetworkSpec{NetworkName: "dockerios-system/dockerios-agent", Port: 8443}
		}},
		{"host devices", func(c *v1alpha1.MacOSMachineClass) {
			c.Spec.HostDevices = []v1alpha1.HostDeviceSpec{{Name: "gpu0", DeviceName: "nvidia.com/GP102GL_Tesla_P40", GPU: true},
				{Name: "usb0", DeviceName: "example.com/usb-key"}}
		}},
		{"preserve disk", func(c *v1alpha1.MacOSMachineClass) { c.Spec.PreserveDiskOnFailure = true }},
		{"virtio system disk", func(c *v1alpha1.MacOSMachineClass) { c.Spec.SystemDisk.Bus = v1alpha1.DiskBusVirtio }},
		{"sata system disk, more CPU features", func(c *v1alpha1.MacOSMachineClass) {
			c.Spec.SystemDisk.Bus = v1alpha1.DiskBusSATA
			c.Spec.CPU.Model = "host-passthrough"
			c.Spec.CPU.Features = append(c.Spec.CPU.Features, v1alpha1.CPUFeature{Name: "avx2", Policy: v1alpha1.CPUFeaturePolicyDisable})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			class := exampleClass(t)
			if tc.class != nil {
				tc.class(class)
			}
			m := testMachine()
			m.Spec.VMLabels = map[string]string{"team": "ios"}
			c := class.Spec
			vm, err := VirtualMachine(m, class, id, settings, true)
			require.NoError(t, err)
			n := NamesFor(m)

			assert.Equal(t, "kubevirt.io/v1", vm.APIVersion)
			assert.Equal(t, "VirtualMachine", vm.Kind)
			assert.Equal(t, n.VirtualMachine, vm.Name)
			assert.Equal(t, m.Namespace, vm.Namespace)
			assert.Equal(t, labelsFor(m), vm.Labels)
			assert.Empty(t, vm.OwnerReferences, "no owner reference: the garbage collector must not stop a VM whose machine a restored ledger lacks")
			assert.Equal(t, kubevirtv1.RunStrategyAlways, *vm.Spec.RunStrategy)
			assert.Nil(t, vm.Spec.Running, "runStrategy alone: KubeVirt refuses both")

			tmpl := vm.Spec.Template
			for k, v := range labelsFor(m) {
				assert.Equal(t, v, tmpl.ObjectMeta.Labels[k])
			}
			assert.Equal(t, "ios", tmpl.ObjectMeta.Labels["team"], "the machine's vmLabels reach the VMI")
			assert.Equal(t, settings.OSKSecretName, tmpl.ObjectMeta.Labels[annotations.OSKSecretLabel], "the launcher webhook mounts this Secret's OSK")
			var hooks []map[string]any
			require.NoError(t, json.Unmarshal([]byte(tmpl.ObjectMeta.Annotations[annotations.HookSidecarsAnnotation]), &hooks))
			require.Len(t, hooks, 1)
			assert.Equal(t, settings.HookSidecarImage, hooks[0]["image"])
			assert.Equal(t, "true", tmpl.ObjectMeta.Annotations[annotations.AppleSMC])
			assert.Equal(t, SystemDiskVolume, tmpl.ObjectMeta.Annotations[annotations.SystemDisk])
			assert.Equal(t, string(c.SystemDisk.Bus), tmpl.ObjectMeta.Annotations[annotations.SystemDiskBus])

			spec := tmpl.Spec
			assert.Equal(t, n.Base, spec.Hostname)
			assert.Equal(t, settings.TerminationGracePeriodSeconds, *spec.TerminationGracePeriodSeconds, "the ACPI shutdown's grace")
			d := spec.Domain
			assert.Equal(t, "q35", d.Machine.Type)
			require.NotNil(t, d.Firmware)
			assert.Equal(t, strings.ToLower(id.Spec.SystemUUID), string(d.Firmware.UUID), "SMBIOS type 1 UUID")
			assert.Equal(t, id.Spec.SerialNumber, d.Firmware.Serial, "SMBIOS type 1 serial")
			require.NotNil(t, d.Firmware.Bootloader)
			require.NotNil(t, d.Firmware.Bootloader.EFI, "OpenCore is an EFI application")
			assert.Nil(t, d.Firmware.Bootloader.BIOS)
			assert.False(t, *d.Firmware.Bootloader.EFI.SecureBoot, "OpenCore is not signed for secure boot")
			assert.Equal(t, uint32(c.CPU.Cores), d.CPU.Cores)
			assert.Equal(t, c.CPU.Model, d.CPU.Model)
			require.Len(t, d.CPU.Features, len(c.CPU.Features))
			for i, f := range c.CPU.Features {
				assert.Equal(t, kubevirtv1.CPUFeature{Name: f.Name, Policy: string(f.Policy)}, d.CPU.Features[i])
			}
			assert.Zero(t, c.Memory.Cmp(*d.Memory.Guest), "guest memory %s", d.Memory.Guest)
			assert.Zero(t, c.Memory.Cmp(d.Resources.Requests[corev1.ResourceMemory]))

			// Disks: the bootdisk first (OpenCore), then the system disk.
			require.Len(t, d.Devices.Disks, 2)
			boot, system := d.Devices.Disks[0], d.Devices.Disks[1]
			assert.Equal(t, BootdiskVolume, boot.Name)
			assert.Equal(t, uint(1), *boot.BootOrder)
			assert.Equal(t, kubevirtv1.DiskBusSATA, boot.Disk.Bus)
			assert.Equal(t, SystemDiskVolume, system.Name)
			assert.Equal(t, uint(2), *system.BootOrder)
			wantBus := kubevirtv1.DiskBusSATA // NVMe: defined on SATA, moved by the hook
			if c.SystemDisk.Bus == v1alpha1.DiskBusVirtio {
				wantBus = kubevirtv1.DiskBusVirtio
			}
			assert.Equal(t, wantBus, system.Disk.Bus)
			require.Len(t, spec.Volumes, 2)
			assert.Equal(t, n.BootdiskPVC, spec.Volumes[0].PersistentVolumeClaim.ClaimName)
			assert.Equal(t, n.SystemDisk, spec.Volumes[1].DataVolume.Name)

			// Interfaces: the pod network (masquerade) always; the agent
			// network, when the class has one, carries the identity's MAC
			// (the ROM in the bootdisk is its bytes), else the pod one does.
			ifaces, nets := d.Devices.Interfaces, spec.Networks
			require.NotEmpty(t, ifaces)
			assert.Equal(t, PodInterface, ifaces[0].Name)
			assert.NotNil(t, ifaces[0].Masquerade)
			assert.Equal(t, "e1000e", ifaces[0].Model, "macOS has a driver for it")
			assert.NotNil(t, nets[0].Pod)
			if an := c.AgentNetwork; an != nil {
				require.Len(t, ifaces, 2)
				require.Len(t, nets, 2)
				assert.Empty(t, ifaces[0].MacAddress)
				assert.Equal(t, AgentInterface, ifaces[1].Name)
				assert.Equal(t, id.Spec.MACAddress, ifaces[1].MacAddress)
				assert.NotNil(t, ifaces[1].Bridge)
				assert.Equal(t, "e1000e", ifaces[1].Model)
				assert.Equal(t, AgentInterface, nets[1].Name)
				require.NotNil(t, nets[1].Multus)
				assert.Equal(t, an.NetworkName, nets[1].Multus.NetworkName)
			} else {
				require.Len(t, ifaces, 1)
				require.Len(t, nets, 1)
				assert.Equal(t, id.Spec.MACAddress, ifaces[0].MacAddress)
			}

			// Passed-through devices: GPUs as GPUs, the rest as host devices.
			var gpus, hostDevices []string
			for _, hd := range c.HostDevices {
				if hd.GPU {
					gpus = append(gpus, hd.Name+"="+hd.DeviceName)
				} else {
					hostDevices = append(hostDevices, hd.Name+"="+hd.DeviceName)
				}
			}
			var gotGPUs, gotHost []string
			for _, g := range d.Devices.GPUs {
				gotGPUs = append(gotGPUs, g.Name+"="+g.DeviceName)
			}
			for _, h := range d.Devices.HostDevices {
				gotHost = append(gotHost, h.Name+"="+h.DeviceName)
			}
			assert.Equal(t, gpus, gotGPUs)
			assert.Equal(t, hostDevices, gotHost)

			// preserveDiskOnFailure is the teardown's business, not the VM's.
			plain := class.DeepCopy()
			plain.Spec.PreserveDiskOnFailure = !plain.Spec.PreserveDiskOnFailure
			other, err := VirtualMachine(m, plain, id, settings, true)
			require.NoError(t, err)
			assert.Equal(t, vm, other)

			halted, err := VirtualMachine(m, class, id, settings, false)
			require.NoError(t, err)
			assert.Equal(t, kubevirtv1.RunStrategyHalted, *halted.Spec.RunStrategy)
		})
	}
}

func TestExampleClass_IsTheDocumentedShape(t *testing.T) {
	c := exampleClass(t)
	assert.Equal(t, v1alpha1.DefaultCPUModel, c.Spec.CPU.Model)
	assert.Equal(t, v1alpha1.DefaultSMBIOSModel, c.Spec.SMBIOSModel)
	want := resource.MustParse("16Gi")
	assert.Zero(t, want.Cmp(*c.Spec.Memory))
	assert.Equal(t, ptr.To(v1alpha1.DefaultStartTimeout), ptr.To(c.Spec.StartTimeout.Duration))
}

// installSession makes testMachine an install session of image sonoma.
func installSession(m *v1alpha1.MacOSMachine) *v1alpha1.MacOSMachine {
	m.Spec.Purpose, m.Spec.ImageName = v1alpha1.MachinePurposeInstall, "sonoma"
	return m
}

// recoveryImage is image sonoma made from Apple's recovery service, its
// recovery image fetched into PVC dockerios-images/sonoma-recovery.
func recoveryImage() *v1alpha1.MacOSImage {
	img := &v1alpha1.MacOSImage{}
	img.Name, img.UID = "sonoma", "img-uid"
	img.Spec.Release = "sonoma"
	img.Spec.Source.DataSource = &v1alpha1.NamespacedObjectReference{Namespace: "dockerios-images", Name: "sonoma"}
	img.Spec.Source.Recovery = &v1alpha1.RecoverySource{Release: "sonoma"}
	img.Status.Conditions = []metav1.Condition{{Type: "RecoveryReady", Status: metav1.ConditionTrue, Reason: "Fetched", Message: "BaseSystem.dmg verified and converted"}}
	img.Status.Recovery = &v1alpha1.RecoveryStatus{VolumeName: "sonoma-recovery"}
	return img
}

// TestVirtualMachine_InstallSessionShape: an install session's VM is the
// workload VM of its class and identity (identity, hook sidecar and its
// annotations, OSK label, networks, CPU, memory) with the recovery disk
// between the OpenCore bootdisk (still first: macOS boots under QEMU only
// through it, and it boots the recovery while the system disk is blank) and the system disk,
// and a graphics device and USB tablet for virtctl vnc.
func TestVirtualMachine_InstallSessionShape(t *testing.T) {
	settings := Settings{BootdiskImage: "example.com/bootdisk:1", HookSidecarImage: "example.com/hook:1",
		OSKSecretName: "dockerios-osk", TerminationGracePeriodSeconds: 120}
	id := testIdentity()
	for _, bus := range []v1alpha1.DiskBus{v1alpha1.DiskBusNVMe, v1alpha1.DiskBusVirtio, v1alpha1.DiskBusSATA} {
		t.Run(string(bus), func(t *testing.T) {
			class := exampleClass(t)
			class.Spec.SystemDisk.Bus = bus
			m := installSession(testMachine())
			n := NamesFor(m)
			vm, err := VirtualMachine(m, class, id, settings, true)
			require.NoError(t, err)

			d := vm.Spec.Template.Spec.Domain.Devices
			require.Len(t, d.Disks, 3)
			boot, recovery, system := d.Disks[0], d.Disks[1], d.Disks[2]
			assert.Equal(t, BootdiskVolume, boot.Name)
			assert.Equal(t, uint(1), *boot.BootOrder, "OpenCore boots first, or macOS does not boot at all")
			assert.Equal(t, kubevirtv1.DiskBusSATA, boot.Disk.Bus)
			assert.Equal(t, RecoveryVolume, recovery.Name)
			assert.Equal(t, uint(2), *recovery.BootOrder)
			assert.Equal(t, kubevirtv1.DiskBusSATA, recovery.Disk.Bus)
			assert.Equal(t, SystemDiskVolume, system.Name)
			assert.Equal(t, uint(3), *system.BootOrder)
			wantBus := kubevirtv1.DiskBusSATA
			if bus == v1alpha1.DiskBusVirtio {
				wantBus = kubevirtv1.DiskBusVirtio
			}
			assert.Equal(t, wantBus, system.Disk.Bus)
			vols := vm.Spec.Template.Spec.Volumes
			require.Len(t, vols, 3)
			assert.Equal(t, n.BootdiskPVC, vols[0].PersistentVolumeClaim.ClaimName)
			assert.Equal(t, RecoveryVolume, vols[1].Name)
			assert.Equal(t, n.RecoveryDisk, vols[1].DataVolume.Name)
			assert.Equal(t, SystemDiskVolume, vols[2].Name)
			assert.Equal(t, n.SystemDisk, vols[2].DataVolume.Name)
			require.NotNil(t, d.AutoattachGraphicsDevice)
			assert.True(t, *d.AutoattachGraphicsDevice, "virtctl vnc needs a graphics device")
			assert.Equal(t, []kubevirtv1.Input{{Name: TabletInput, Type: kubevirtv1.InputTypeTablet, Bus: kubevirtv1.InputBusUSB}}, d.Inputs,
				"a USB tablet: the VNC pointer lands where it points")
			assert.Equal(t, SystemDiskVolume, vm.Spec.Template.ObjectMeta.Annotations[annotations.SystemDisk], "the hook moves the system disk, not the recovery")

			// Everything else is the workload machine's.
			workload := testMachine()
			want, err := VirtualMachine(workload, class, id, settings, true)
			require.NoError(t, err)
			got := vm.DeepCopy()
			gd := &got.Spec.Template.Spec.Domain.Devices
			gd.Disks = []kubevirtv1.Disk{gd.Disks[0], gd.Disks[2]}
			gd.Disks[1].BootOrder = ptr.To[uint](2)
			gd.AutoattachGraphicsDevice, gd.Inputs = nil, nil
			gv := &got.Spec.Template.Spec
			gv.Volumes = []kubevirtv1.Volume{gv.Volumes[0], gv.Volumes[2]}
			assert.Equal(t, want, got)

			halted, err := VirtualMachine(m, class, id, settings, false)
			require.NoError(t, err)
			assert.Equal(t, kubevirtv1.RunStrategyHalted, *halted.Spec.RunStrategy)
		})
	}
}

// upstreamSchema is the openAPIV3Schema of one of the KubeVirt or CDI CRDs
// the e2e harness installs (test/harness/crds, generated from the API
// modules go.mod pins).
func upstreamSchema(t *testing.T, file string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "test", "harness", "crds", file))
	require.NoError(t, err)
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &crd))
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1" || v.Name == "v1beta1" {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("%s has no v1 or v1beta1 schema", file)
	return nil
}

// schemaErrors lists where obj (as JSON decodes it) strays from schema:
// fields the schema does not have (kube-apiserver rejects them under
// strict field validation, and drops them otherwise), values of another
// type, values outside an enum, and required fields missing.
func schemaErrors(path string, obj any, schema map[string]any) []string {
	if schema["x-kubernetes-preserve-unknown-fields"] == true {
		return nil
	}
	var errs []string
	typ, _ := schema["type"].(string)
	if enum, ok := schema["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if e == obj {
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Sprintf("%s: %v is not one of %v", path, obj, enum))
		}
	}
	if schema["x-kubernetes-int-or-string"] == true {
		return errs
	}
	switch v := obj.(type) {
	case map[string]any:
		if typ != "object" {
			return append(errs, fmt.Sprintf("%s: an object where the schema has %q", path, typ))
		}
		props, _ := schema["properties"].(map[string]any)
		additional, _ := schema["additionalProperties"].(map[string]any)
		for k, val := range v {
			switch sub, ok := props[k].(map[string]any); {
			case path == "" && (k == "apiVersion" || k == "kind" || k == "metadata"):
				// The apiserver's own, not the CRD's.
			case ok:
				errs = append(errs, schemaErrors(path+"."+k, val, sub)...)
			case additional != nil:
				errs = append(errs, schemaErrors(path+"."+k, val, additional)...)
			default:
				errs = append(errs, fmt.Sprintf("%s: unknown field %q", path, k))
			}
		}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if _, ok := v[r.(string)]; !ok {
					errs = append(errs, fmt.Sprintf("%s: required field %q missing", path, r))
				}
			}
		}
	case []any:
		if typ != "array" {
			return append(errs, fmt.Sprintf("%s: an array where the schema has %q", path, typ))
		}
		items, _ := schema["items"].(map[string]any)
		for i, it := range v {
			errs = append(errs, schemaErrors(fmt.Sprintf("%s[%d]", path, i), it, items)...)
		}
	case string:
		if typ != "string" {
			errs = append(errs, fmt.Sprintf("%s: a string where the schema has %q", path, typ))
		}
	case bool:
		if typ != "boolean" {
			errs = append(errs, fmt.Sprintf("%s: a boolean where the schema has %q", path, typ))
		}
	case float64:
		if typ != "integer" && typ != "number" {
			errs = append(errs, fmt.Sprintf("%s: a number where the schema has %q", path, typ))
		}
	}
	return errs
}

func asJSON(t *testing.T, obj any) any {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// The VirtualMachines and DataVolumes the controller makes — a workload
// machine's and an install session's — are valid against KubeVirt's and
// CDI's real CRD schemas.
func TestObjects_ValidAgainstTheUpstreamSchemas(t *testing.T) {
	vmSchema, dvSchema := upstreamSchema(t, "kubevirt.io_virtualmachines.yaml"), upstreamSchema(t, "cdi.kubevirt.io_datavolumes.yaml")
	settings := Settings{HookSidecarImage: "example.com/hook:1", OSKSecretName: "dockerios-osk", TerminationGracePeriodSeconds: 120}
	class := exampleClass(t)
	class.Spec.AgentNetwork = &v1alpha1.AgentNetworkSpec{NetworkName: "dockerios-system/dockerios-agent"}
	image := recoveryImage()

	workloadVM, err := VirtualMachine(testMachine(), class, testIdentity(), settings, true)
	require.NoError(t, err)
	installVM, err := VirtualMachine(installSession(testMachine()), class, testIdentity(), settings, false)
	require.NoError(t, err)
	clone, err := SystemDisk(testMachine(), class, image)
	require.NoError(t, err)
	recovery, err := RecoveryDisk(installSession(testMachine()), class, image)
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		obj    any
		schema map[string]any
	}{
		"workload VirtualMachine":             {workloadVM, vmSchema},
		"install session's VirtualMachine":    {installVM, vmSchema},
		"system disk clone DataVolume":        {clone, dvSchema},
		"install session's blank system disk": {InstallSystemDisk(installSession(testMachine()), class), dvSchema},
		"install session's recovery disk":     {recovery, dvSchema},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Empty(t, schemaErrors("", asJSON(t, tc.obj), tc.schema))
		})
	}

	// The check itself finds what the apiserver would refuse.
	bad := asJSON(t, installVM).(map[string]any)
	devices := bad["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["domain"].(map[string]any)["devices"].(map[string]any)
	devices["autoAttachGraphicsDevice"] = true
	devices["inputs"] = []any{map[string]any{"type": "tablet", "bus": "usb"}}
	assert.ElementsMatch(t, []string{
		`.spec.template.spec.domain.devices: unknown field "autoAttachGraphicsDevice"`,
		`.spec.template.spec.domain.devices.inputs[0]: required field "name" missing`,
	}, schemaErrors("", bad, vmSchema))
}
