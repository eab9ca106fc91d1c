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

package validation

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
)

// fieldErr is what a case asserts of each error: its type and its path.
type fieldErr struct {
	Type  field.ErrorType
	Field string
}

func invalid(path string) fieldErr      { return fieldErr{field.ErrorTypeInvalid, path} }
func required(path string) fieldErr     { return fieldErr{field.ErrorTypeRequired, path} }
func forbidden(path string) fieldErr    { return fieldErr{field.ErrorTypeForbidden, path} }
func notSupported(path string) fieldErr { return fieldErr{field.ErrorTypeNotSupported, path} }
func duplicate(path string) fieldErr    { return fieldErr{field.ErrorTypeDuplicate, path} }
func tooLong(path string) fieldErr      { return fieldErr{field.ErrorTypeTooLong, path} }

// assertErrors asserts that got holds exactly want, in any order. A nil want
// means the object is valid.
func assertErrors(t *testing.T, want []fieldErr, got field.ErrorList) {
	t.Helper()
	gotErrs := []fieldErr{}
	for _, e := range got {
		gotErrs = append(gotErrs, fieldErr{e.Type, e.Field})
	}
	if want == nil {
		want = []fieldErr{}
	}
	assert.ElementsMatch(t, want, gotErrs, "all errors: %v", got)
}

// condition returns a well-formed condition of type t.
func condition(t string) metav1.Condition {
	return metav1.Condition{
		Type: t, Status: metav1.ConditionTrue, Reason: "Observed", Message: "observed",
		LastTransitionTime: metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)),
	}
}

func TestNameValidators_LabelAndSubdomain(t *testing.T) {
	cases := map[string]struct {
		name          string
		wantLabel     bool
		wantSubdomain bool
	}{
		"plain label is both":             {name: "imacpro", wantLabel: true, wantSubdomain: true},
		"dotted name is only a subdomain": {name: "sonoma.14-6", wantLabel: false, wantSubdomain: true},
		"upper case is neither":           {name: "iMacPro", wantLabel: false, wantSubdomain: false},
		"underscore is neither":           {name: "imac_pro", wantLabel: false, wantSubdomain: false},
		"64 characters is not a label":    {name: strings.Repeat("a", 64), wantLabel: false, wantSubdomain: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.wantLabel, len(ValidateLabelName(tc.name, false)) == 0, "label: %v", ValidateLabelName(tc.name, false))
			assert.Equal(t, tc.wantSubdomain, len(ValidateSubdomainName(tc.name, false)) == 0, "subdomain: %v", ValidateSubdomainName(tc.name, false))
		})
	}
}

// ---------------------------------------------------------------------------
// MacOSMachineClass

func TestValidateMacOSMachineClass(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSMachineClass)
		want   []fieldErr
	}{
		"fixture is valid": {mutate: func(*dockerio.MacOSMachineClass) {}},
		"name that is a subdomain but not a label is Invalid at metadata.name": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Name = "standard.large" },
			want:   []fieldErr{invalid("metadata.name")},
		},
		"namespace on a cluster-scoped class is Forbidden": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Namespace = "default" },
			want:   []fieldErr{forbidden("metadata.namespace")},
		},
		"zero cores is Invalid":               {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Cores = 0 }, want: []fieldErr{invalid("spec.cpu.cores")}},
		"257 cores is Invalid":                {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Cores = 257 }, want: []fieldErr{invalid("spec.cpu.cores")}},
		"256 cores is the upper bound":        {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Cores = 256 }},
		"one core is legal":                   {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Cores = 1 }},
		"missing CPU model is Required":       {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Model = "" }, want: []fieldErr{required("spec.cpu.model")}},
		"CPU model with a space is Invalid":   {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Model = "Pen ryn" }, want: []fieldErr{invalid("spec.cpu.model")}},
		"host-passthrough CPU model is legal": {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Model = "host-passthrough" }},
		// KubeVirt makes the model and each required or forbidden feature
		// a node label key (cpu-model.node.kubevirt.io/<model>) on the
		// launcher pod: they must be label names.
		"CPU model ending with a dash is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Model = "Penryn-" },
			want:   []fieldErr{invalid("spec.cpu.model")},
		},
		"CPU model longer than 63 characters is TooLong": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Model = "Skylake-" + strings.Repeat("x", 56) },
			want:   []fieldErr{tooLong("spec.cpu.model")},
		},
		"CPU model of 63 characters is legal": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Model = "Skylake-" + strings.Repeat("x", 55) },
		},
		"CPU feature name ending with a dot is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Features[0].Name = "sse4." },
			want:   []fieldErr{invalid("spec.cpu.features[0].name")},
		},
		"CPU feature name longer than 63 characters is TooLong": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Features[0].Name = "vmx-" + strings.Repeat("x", 60) },
			want:   []fieldErr{tooLong("spec.cpu.features[0].name")},
		},
		"CPU feature without a name is Required": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Features[0].Name = "" },
			want:   []fieldErr{required("spec.cpu.features[0].name")},
		},
		"CPU feature name with a slash is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Features[0].Name = "avx/2" },
			want:   []fieldErr{invalid("spec.cpu.features[0].name")},
		},
		"duplicate CPU feature names are Duplicate at the second": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.CPU.Features = append(c.Spec.CPU.Features,
					dockerio.CPUFeature{Name: "sse4.2", Policy: dockerio.CPUFeaturePolicyForce},
					dockerio.CPUFeature{Name: "avx2", Policy: dockerio.CPUFeaturePolicyDisable})
			},
			want: []fieldErr{duplicate("spec.cpu.features[2].name")},
		},
		"unknown CPU feature policy is NotSupported": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Features[0].Policy = "prefer" },
			want:   []fieldErr{notSupported("spec.cpu.features[0].policy")},
		},
		"empty CPU feature policy (not defaulted) is NotSupported": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Features[0].Policy = "" },
			want:   []fieldErr{notSupported("spec.cpu.features[0].policy")},
		},
		"every libvirt policy is accepted": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.CPU.Features = nil
				for i, p := range []dockerio.CPUFeaturePolicy{"force", "require", "optional", "disable", "forbid"} {
					c.Spec.CPU.Features = append(c.Spec.CPU.Features, dockerio.CPUFeature{Name: "f" + string(rune('a'+i)), Policy: p})
				}
			},
		},
		"missing memory is Required": {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.Memory = nil }, want: []fieldErr{required("spec.memory")}},
		"zero memory is Invalid":     {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.Memory = ptr.To(resource.MustParse("0")) }, want: []fieldErr{invalid("spec.memory")}},
		"negative memory is Invalid": {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.Memory = ptr.To(resource.MustParse("-1Gi")) }, want: []fieldErr{invalid("spec.memory")}},
		// KubeVirt's admission refuses a VirtualMachine with less than 1M.
		"memory below 1M is Invalid":  {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.Memory = ptr.To(resource.MustParse("512Ki")) }, want: []fieldErr{invalid("spec.memory")}},
		"memory of 1M is legal":       {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.Memory = ptr.To(resource.MustParse("1M")) }},
		"zero system disk is Invalid": {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.SystemDisk.Size = resource.MustParse("0") }, want: []fieldErr{invalid("spec.systemDisk.size")}},
		"storage class that is not a DNS subdomain is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.SystemDisk.StorageClassName = ptr.To("Fast_SSD") },
			want:   []fieldErr{invalid("spec.systemDisk.storageClassName")},
		},
		"dotted storage class is legal": {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.SystemDisk.StorageClassName = ptr.To("fast.ssd") }},
		"unknown disk bus is NotSupported": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.SystemDisk.Bus = "ide" },
			want:   []fieldErr{notSupported("spec.systemDisk.bus")},
		},
		"empty disk bus (not defaulted) is NotSupported": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.SystemDisk.Bus = "" },
			want:   []fieldErr{notSupported("spec.systemDisk.bus")},
		},
		"sata bus is legal":   {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.SystemDisk.Bus = dockerio.DiskBusSATA }},
		"virtio bus is legal": {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.SystemDisk.Bus = dockerio.DiskBusVirtio }},
		"missing image is Required": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.ImageName = "" },
			want:   []fieldErr{required("spec.imageName")},
		},
		"image name with upper case is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.ImageName = "Sonoma" },
			want:   []fieldErr{invalid("spec.imageName")},
		},
		"missing identity pool is Required": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.IdentityPoolName = "" },
			want:   []fieldErr{required("spec.identityPoolName")},
		},
		"identity pool name with a dot is Invalid (pool names are labels)": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.IdentityPoolName = "imac.pro" },
			want:   []fieldErr{invalid("spec.identityPoolName")},
		},
		"missing SMBIOS model is Required": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.SMBIOSModel = "" },
			want:   []fieldErr{required("spec.smbiosModel")},
		},
		"SMBIOS model without revision is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.SMBIOSModel = "iMacPro" },
			want:   []fieldErr{invalid("spec.smbiosModel")},
		},
		"display narrower than 640 is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.Display.Width = 639 },
			want:   []fieldErr{invalid("spec.display.width")},
		},
		"display wider than 8192 is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.Display.Width = 8193 },
			want:   []fieldErr{invalid("spec.display.width")},
		},
		"display lower than 480 is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.Display.Height = 479 },
			want:   []fieldErr{invalid("spec.display.height")},
		},
		"display 640x480 is the lower bound": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.Display = dockerio.DisplaySpec{Width: 640, Height: 480} },
		},
		"undefaulted display reports both sides": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.Display = dockerio.DisplaySpec{} },
			want:   []fieldErr{invalid("spec.display.width"), invalid("spec.display.height")},
		},
		"agentNetwork networkName as name is accepted": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.AgentNetwork = &dockerio.AgentNetworkSpec{NetworkName: "macos-agent", Port: 8443}
			},
		},
		"agentNetwork networkName ns/name accepted": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.AgentNetwork = &dockerio.AgentNetworkSpec{NetworkName: "infra/macos-agent", Port: 8443}
			},
		},
		"agentNetwork networkName with bad namespace rejected": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.AgentNetwork = &dockerio.AgentNetworkSpec{NetworkName: "Infra_NS/macos-agent", Port: 8443}
			},
			want: []fieldErr{invalid("spec.agentNetwork.networkName")},
		},
		"agentNetwork networkName with a dotted namespace rejected": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.AgentNetwork = &dockerio.AgentNetworkSpec{NetworkName: "infra.example/macos-agent", Port: 8443}
			},
			want: []fieldErr{invalid("spec.agentNetwork.networkName")},
		},
		"agentNetwork networkName with bad name after the namespace rejected": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.AgentNetwork = &dockerio.AgentNetworkSpec{NetworkName: "infra/Macos_Agent", Port: 8443}
			},
			want: []fieldErr{invalid("spec.agentNetwork.networkName")},
		},
		"agentNetwork networkName with two slashes rejected": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.AgentNetwork = &dockerio.AgentNetworkSpec{NetworkName: "infra/agents/macos", Port: 8443}
			},
			want: []fieldErr{invalid("spec.agentNetwork.networkName")},
		},
		"agentNetwork networkName with an empty namespace rejected": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.AgentNetwork = &dockerio.AgentNetworkSpec{NetworkName: "/macos-agent", Port: 8443}
			},
			want: []fieldErr{invalid("spec.agentNetwork.networkName")},
		},
		"agentNetwork networkName with an empty name rejected": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.AgentNetwork = &dockerio.AgentNetworkSpec{NetworkName: "infra/", Port: 8443}
			},
			want: []fieldErr{invalid("spec.agentNetwork.networkName")},
		},
		"agentNetwork networkName as a dotted name is accepted": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.AgentNetwork = &dockerio.AgentNetworkSpec{NetworkName: "macos.agent", Port: 8443}
			},
		},
		"agentNetwork without a networkName is Required": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.AgentNetwork = &dockerio.AgentNetworkSpec{Port: 8443} },
			want:   []fieldErr{required("spec.agentNetwork.networkName")},
		},
		"agentNetwork port 0 (not defaulted) is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.AgentNetwork = &dockerio.AgentNetworkSpec{NetworkName: "agent"}
			},
			want: []fieldErr{invalid("spec.agentNetwork.port")},
		},
		"agentNetwork port above 65535 is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.AgentNetwork = &dockerio.AgentNetworkSpec{NetworkName: "agent", Port: 65536}
			},
			want: []fieldErr{invalid("spec.agentNetwork.port")},
		},
		"GPU host device is accepted": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.HostDevices = []dockerio.HostDeviceSpec{{Name: "gpu0", DeviceName: "nvidia.com/GP102GL_Tesla_P40", GPU: true}}
			},
		},
		"host device without a name is Required": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.HostDevices = []dockerio.HostDeviceSpec{{DeviceName: "nvidia.com/P40"}}
			},
			want: []fieldErr{required("spec.hostDevices[0].name")},
		},
		"host device name that is not a label is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.HostDevices = []dockerio.HostDeviceSpec{{Name: "GPU_0", DeviceName: "nvidia.com/P40"}}
			},
			want: []fieldErr{invalid("spec.hostDevices[0].name")},
		},
		"duplicate host device names are Duplicate at the second": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.HostDevices = []dockerio.HostDeviceSpec{{Name: "gpu0", DeviceName: "nvidia.com/P40"}, {Name: "gpu0", DeviceName: "nvidia.com/P40"}}
			},
			want: []fieldErr{duplicate("spec.hostDevices[1].name")},
		},
		"host device without a deviceName is Required": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.HostDevices = []dockerio.HostDeviceSpec{{Name: "gpu0"}}
			},
			want: []fieldErr{required("spec.hostDevices[0].deviceName")},
		},
		"host device deviceName that is not a qualified name is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.HostDevices = []dockerio.HostDeviceSpec{{Name: "gpu0", DeviceName: "nvidia.com/Tesla P40"}}
			},
			want: []fieldErr{invalid("spec.hostDevices[0].deviceName")},
		},
		// KubeVirt requests deviceName on the launcher pod (requests and
		// limits, 1 each), where only an extended resource name is legal.
		"host device deviceName without a domain is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.HostDevices = []dockerio.HostDeviceSpec{{Name: "gpu0", DeviceName: "gpu"}}
			},
			want: []fieldErr{invalid("spec.hostDevices[0].deviceName")},
		},
		"host device deviceName that is a standard resource is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.HostDevices = []dockerio.HostDeviceSpec{{Name: "gpu0", DeviceName: "memory"}}
			},
			want: []fieldErr{invalid("spec.hostDevices[0].deviceName")},
		},
		"host device deviceName in the kubernetes.io domain is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.HostDevices = []dockerio.HostDeviceSpec{{Name: "gpu0", DeviceName: "devices.kubernetes.io/gpu"}}
			},
			want: []fieldErr{invalid("spec.hostDevices[0].deviceName")},
		},
		"host device deviceName with the requests. prefix is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.HostDevices = []dockerio.HostDeviceSpec{{Name: "gpu0", DeviceName: "requests.nvidia.com/P40"}}
			},
			want: []fieldErr{invalid("spec.hostDevices[0].deviceName")},
		},
		"host device deviceName whose quota name would be too long is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.HostDevices = []dockerio.HostDeviceSpec{{Name: "gpu0", DeviceName: strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 55) + ".com/gpu"}}
			},
			want: []fieldErr{invalid("spec.hostDevices[0].deviceName")},
		},
		"host device deviceName of a device plugin is accepted": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.HostDevices = []dockerio.HostDeviceSpec{{Name: "usb0", DeviceName: "devices.example.com/usb-key"}}
			},
		},
		"missing startTimeout is Required": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.StartTimeout = nil },
			want:   []fieldErr{required("spec.startTimeout")},
		},
		"zero startTimeout is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.StartTimeout = &metav1.Duration{} },
			want:   []fieldErr{invalid("spec.startTimeout")},
		},
		"startTimeout above 24h is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.StartTimeout = &metav1.Duration{Duration: 24*time.Hour + time.Second}
			},
			want: []fieldErr{invalid("spec.startTimeout")},
		},
		"startTimeout of exactly 24h is legal": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.StartTimeout = &metav1.Duration{Duration: 24 * time.Hour} },
		},
		"bootdisk builder image reference is accepted": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.BootdiskBuilderImage = "ghcr.io/dockerios/bootdisk:v1.2.3" },
		},
		"bootdisk builder image with whitespace is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.BootdiskBuilderImage = "ghcr.io/dockerios/bootdisk :v1" },
			want:   []fieldErr{invalid("spec.bootdiskBuilderImage")},
		},
		"bootdisk builder image longer than 512 is TooLong": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.BootdiskBuilderImage = "ghcr.io/" + strings.Repeat("a", 510)
			},
			want: []fieldErr{tooLong("spec.bootdiskBuilderImage")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := registrytest.MachineClass("standard")
			tc.mutate(c)
			assertErrors(t, tc.want, ValidateMacOSMachineClass(c))
		})
	}
}

func TestValidateMacOSMachineClassUpdate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSMachineClass)
		want   []fieldErr
	}{
		"unchanged class is valid": {mutate: func(*dockerio.MacOSMachineClass) {}},
		"memory and image may change": {mutate: func(c *dockerio.MacOSMachineClass) {
			c.Spec.Memory = ptr.To(resource.MustParse("16Gi"))
			c.Spec.ImageName = "sequoia"
		}},
		"labels may change":             {mutate: func(c *dockerio.MacOSMachineClass) { c.Labels = map[string]string{"tier": "gpu"} }},
		"identityPoolName is immutable": {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.IdentityPoolName = "macpro" }, want: []fieldErr{invalid("spec.identityPoolName")}},
		"smbiosModel is immutable":      {mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.SMBIOSModel = "MacPro7,1" }, want: []fieldErr{invalid("spec.smbiosModel")}},
		"spec is still validated on update": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.SystemDisk.Bus = "ide" },
			want:   []fieldErr{notSupported("spec.systemDisk.bus")},
		},
		"name is immutable": {mutate: func(c *dockerio.MacOSMachineClass) { c.Name = "other" }, want: []fieldErr{invalid("metadata.name")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.MachineClass("standard")
			old.ResourceVersion = "1"
			c := old.DeepCopy()
			tc.mutate(c)
			assertErrors(t, tc.want, ValidateMacOSMachineClassUpdate(c, old))
		})
	}
}

func TestValidateMacOSMachineClassStatusUpdate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSMachineClass)
		want   []fieldErr
	}{
		"condition and observedGeneration are accepted": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Status.ObservedGeneration = 3
				c.Status.Conditions = []metav1.Condition{condition("StorageAvailable")}
			},
		},
		"negative observedGeneration is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Status.ObservedGeneration = -1 },
			want:   []fieldErr{invalid("status.observedGeneration")},
		},
		"condition without a reason is Required": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				cond := condition("StorageAvailable")
				cond.Reason = ""
				c.Status.Conditions = []metav1.Condition{cond}
			},
			want: []fieldErr{required("status.conditions[0].reason")},
		},
		"condition with an unknown status is NotSupported": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				cond := condition("StorageAvailable")
				cond.Status = "Maybe"
				c.Status.Conditions = []metav1.Condition{cond}
			},
			want: []fieldErr{notSupported("status.conditions[0].status")},
		},
		"two conditions of one type are Duplicate": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Status.Conditions = []metav1.Condition{condition("StorageAvailable"), condition("StorageAvailable")}
			},
			want: []fieldErr{duplicate("status.conditions[1]")},
		},
		"a storage hold-back with its probe is accepted": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Status.StorageHoldBack = &dockerio.StorageHoldBack{Failures: 2, Until: metav1.Now(), Probe: "ci/mac-1"}
			},
		},
		"a storage hold-back without a failure is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Status.StorageHoldBack = &dockerio.StorageHoldBack{Failures: -3, Until: metav1.Now()}
			},
			want: []fieldErr{invalid("status.storageHoldBack.failures")},
		},
		"a probe that names no machine is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Status.StorageHoldBack = &dockerio.StorageHoldBack{Failures: 1, Until: metav1.Now(), Probe: "mac-1"}
			},
			want: []fieldErr{invalid("status.storageHoldBack.probe")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.MachineClass("standard")
			old.ResourceVersion = "1"
			c := old.DeepCopy()
			tc.mutate(c)
			assertErrors(t, tc.want, ValidateMacOSMachineClassStatusUpdate(c, old))
		})
	}
}

func TestWarningsForMacOSMachineClass(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSMachineClass)
		want   []string // substrings, one per expected warning, in order
	}{
		"fixture draws no warning": {mutate: func(*dockerio.MacOSMachineClass) {}},
		"memory below 4Gi warns at spec.memory": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.Memory = ptr.To(resource.MustParse("2Gi")) },
			want:   []string{"spec.memory: 2Gi is below the 4Gi"},
		},
		"exactly 4Gi draws no warning": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.Memory = ptr.To(resource.MustParse("4Gi")) },
		},
		"missing memory draws no warning (validation reports it)": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.Memory = nil },
		},
		"a single core warns at spec.cpu.cores": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Cores = 1 },
			want:   []string{"spec.cpu.cores"},
		},
		"two cores draw no warning": {
			mutate: func(c *dockerio.MacOSMachineClass) { c.Spec.CPU.Cores = 2 },
		},
		"little memory and one core warn twice": {
			mutate: func(c *dockerio.MacOSMachineClass) {
				c.Spec.Memory = ptr.To(resource.MustParse("3Gi"))
				c.Spec.CPU.Cores = 1
			},
			want: []string{"spec.memory", "spec.cpu.cores"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := registrytest.MachineClass("standard")
			tc.mutate(c)
			got := WarningsForMacOSMachineClass(c)
			require.Len(t, got, len(tc.want), "warnings: %q", got)
			for i, w := range tc.want {
				assert.Contains(t, got[i], w)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// MacOSImage

func TestValidateMacOSImage(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSImage)
		want   []fieldErr
	}{
		"fixture is valid": {mutate: func(*dockerio.MacOSImage) {}},
		"dotted name is legal (images are subdomains)": {
			mutate: func(img *dockerio.MacOSImage) { img.Name = "sonoma.14-6" },
		},
		"name with upper case is Invalid": {
			mutate: func(img *dockerio.MacOSImage) { img.Name = "Sonoma" },
			want:   []fieldErr{invalid("metadata.name")},
		},
		"PVC source is accepted": {
			mutate: func(img *dockerio.MacOSImage) {
				img.Spec.Source = dockerio.ImageSource{PVC: &dockerio.NamespacedObjectReference{Namespace: "golden", Name: "sonoma"}}
			},
		},
		"no source is Required": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.Source = dockerio.ImageSource{} },
			want:   []fieldErr{required("spec.source")},
		},
		"dataSource and pvc together are Forbidden at spec.source.pvc": {
			mutate: func(img *dockerio.MacOSImage) {
				img.Spec.Source.PVC = &dockerio.NamespacedObjectReference{Namespace: "golden", Name: "sonoma"}
			},
			want: []fieldErr{forbidden("spec.source.pvc")},
		},
		"dataSource without namespace is Required": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.Source.DataSource.Namespace = "" },
			want:   []fieldErr{required("spec.source.dataSource.namespace")},
		},
		"dataSource without name is Required": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.Source.DataSource.Name = "" },
			want:   []fieldErr{required("spec.source.dataSource.name")},
		},
		"dataSource namespace that is not a label is Invalid": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.Source.DataSource.Namespace = "golden.images" },
			want:   []fieldErr{invalid("spec.source.dataSource.namespace")},
		},
		"pvc name with upper case is Invalid": {
			mutate: func(img *dockerio.MacOSImage) {
				img.Spec.Source = dockerio.ImageSource{PVC: &dockerio.NamespacedObjectReference{Namespace: "golden", Name: "Sonoma"}}
			},
			want: []fieldErr{invalid("spec.source.pvc.name")},
		},
		"missing release is Required": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.Release = "" },
			want:   []fieldErr{required("spec.release")},
		},
		"release with spaces is legal": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.Release = "macOS 14.6 Sonoma" },
		},
		"release with a slash is Invalid": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.Release = "14.6/beta" },
			want:   []fieldErr{invalid("spec.release")},
		},
		"release longer than 63 is TooLong": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.Release = strings.Repeat("1", 64) },
			want:   []fieldErr{tooLong("spec.release")},
		},
		"empty boardID is legal": {mutate: func(img *dockerio.MacOSImage) { img.Spec.BoardID = "" }},
		"lower-case boardID is Invalid": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.BoardID = "Mac-7ba5b2d9e42ddd94" },
			want:   []fieldErr{invalid("spec.boardID")},
		},
		"sha256 checksum is accepted": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.Checksum = "sha256:" + strings.Repeat("0a", 32) },
		},
		"md5 checksum is Invalid": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.Checksum = "md5:" + strings.Repeat("0a", 16) },
			want:   []fieldErr{invalid("spec.checksum")},
		},
		"upper-case sha256 checksum is Invalid": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.Checksum = "sha256:" + strings.Repeat("0A", 32) },
			want:   []fieldErr{invalid("spec.checksum")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			img := registrytest.Image("sonoma")
			tc.mutate(img)
			assertErrors(t, tc.want, ValidateMacOSImage(img))
		})
	}
}

func TestValidateMacOSImageUpdate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSImage)
		want   []fieldErr
	}{
		"unchanged image is valid": {mutate: func(*dockerio.MacOSImage) {}},
		"source may be repointed": {
			mutate: func(img *dockerio.MacOSImage) {
				img.Spec.Source = dockerio.ImageSource{PVC: &dockerio.NamespacedObjectReference{Namespace: "golden", Name: "sonoma-14-7"}}
				img.Spec.Release = "14.7"
			},
		},
		"spec is still validated on update": {
			mutate: func(img *dockerio.MacOSImage) { img.Spec.Release = "" },
			want:   []fieldErr{required("spec.release")},
		},
		"name is immutable": {mutate: func(img *dockerio.MacOSImage) { img.Name = "sequoia" }, want: []fieldErr{invalid("metadata.name")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.Image("sonoma")
			old.ResourceVersion = "1"
			img := old.DeepCopy()
			tc.mutate(img)
			assertErrors(t, tc.want, ValidateMacOSImageUpdate(img, old))
		})
	}
}

func TestValidateMacOSImageStatusUpdate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSImage)
		want   []fieldErr
	}{
		"Ready condition is accepted": {
			mutate: func(img *dockerio.MacOSImage) {
				img.Status.ObservedGeneration = 1
				img.Status.Conditions = []metav1.Condition{condition("Ready")}
			},
		},
		"negative observedGeneration is Invalid": {
			mutate: func(img *dockerio.MacOSImage) { img.Status.ObservedGeneration = -2 },
			want:   []fieldErr{invalid("status.observedGeneration")},
		},
		"condition without a type is Required": {
			mutate: func(img *dockerio.MacOSImage) { img.Status.Conditions = []metav1.Condition{condition("")} },
			want:   []fieldErr{required("status.conditions[0].type")},
		},
		"condition without lastTransitionTime is Required": {
			mutate: func(img *dockerio.MacOSImage) {
				cond := condition("Ready")
				cond.LastTransitionTime = metav1.Time{}
				img.Status.Conditions = []metav1.Condition{cond}
			},
			want: []fieldErr{required("status.conditions[0].lastTransitionTime")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.Image("sonoma")
			old.ResourceVersion = "1"
			img := old.DeepCopy()
			tc.mutate(img)
			assertErrors(t, tc.want, ValidateMacOSImageStatusUpdate(img, old))
		})
	}
}

// ---------------------------------------------------------------------------
// MacOSIdentityPool

func TestValidateMacOSIdentityPool(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSIdentityPool)
		want   []fieldErr
	}{
		"fixture is valid":            {mutate: func(*dockerio.MacOSIdentityPool) {}},
		"MacPro7,1 model is accepted": {mutate: func(p *dockerio.MacOSIdentityPool) { p.Spec.Model = "MacPro7,1" }},
		"missing model is Required": {
			mutate: func(p *dockerio.MacOSIdentityPool) { p.Spec.Model = "" },
			want:   []fieldErr{required("spec.model")},
		},
		"model with a dot for a comma is Invalid": {
			mutate: func(p *dockerio.MacOSIdentityPool) { p.Spec.Model = "iMacPro1.1" },
			want:   []fieldErr{invalid("spec.model")},
		},
		"name that is not a label is Invalid": {
			mutate: func(p *dockerio.MacOSIdentityPool) { p.Name = "imac.pro" },
			want:   []fieldErr{invalid("metadata.name")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := registrytest.IdentityPool("imacpro")
			tc.mutate(p)
			assertErrors(t, tc.want, ValidateMacOSIdentityPool(p))
		})
	}
}

func TestValidateMacOSIdentityPoolUpdate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSIdentityPool)
		want   []fieldErr
	}{
		"labels may change": {mutate: func(p *dockerio.MacOSIdentityPool) { p.Labels = map[string]string{"fleet": "prod"} }},
		"model is immutable": {
			mutate: func(p *dockerio.MacOSIdentityPool) { p.Spec.Model = "MacPro7,1" },
			want:   []fieldErr{invalid("spec.model")},
		},
		"a malformed new model is reported as malformed and as changed": {
			mutate: func(p *dockerio.MacOSIdentityPool) { p.Spec.Model = "mac pro" },
			want:   []fieldErr{invalid("spec.model"), invalid("spec.model")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.IdentityPool("imacpro")
			old.ResourceVersion = "1"
			p := old.DeepCopy()
			tc.mutate(p)
			assertErrors(t, tc.want, ValidateMacOSIdentityPoolUpdate(p, old))
		})
	}
}

func TestValidateMacOSIdentityPoolStatusUpdate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSIdentityPool)
		want   []fieldErr
	}{
		"counts are accepted": {
			mutate: func(p *dockerio.MacOSIdentityPool) {
				p.Status = dockerio.MacOSIdentityPoolStatus{Total: 10, Free: 7, Allocated: 3, Pending: 1}
			},
		},
		"negative total is Invalid":     {mutate: func(p *dockerio.MacOSIdentityPool) { p.Status.Total = -1 }, want: []fieldErr{invalid("status.total")}},
		"negative free is Invalid":      {mutate: func(p *dockerio.MacOSIdentityPool) { p.Status.Free = -1 }, want: []fieldErr{invalid("status.free")}},
		"negative allocated is Invalid": {mutate: func(p *dockerio.MacOSIdentityPool) { p.Status.Allocated = -1 }, want: []fieldErr{invalid("status.allocated")}},
		"negative pending is Invalid":   {mutate: func(p *dockerio.MacOSIdentityPool) { p.Status.Pending = -1 }, want: []fieldErr{invalid("status.pending")}},
		"every negative count is reported": {
			mutate: func(p *dockerio.MacOSIdentityPool) {
				p.Status = dockerio.MacOSIdentityPoolStatus{Total: -1, Free: -1, Allocated: -1, Pending: -1}
			},
			want: []fieldErr{invalid("status.total"), invalid("status.free"), invalid("status.allocated"), invalid("status.pending")},
		},
		"condition with a bad reason is Invalid": {
			mutate: func(p *dockerio.MacOSIdentityPool) {
				cond := condition("Exhausted")
				cond.Reason = "no identities left"
				p.Status.Conditions = []metav1.Condition{cond}
			},
			want: []fieldErr{invalid("status.conditions[0].reason")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.IdentityPool("imacpro")
			old.ResourceVersion = "1"
			p := old.DeepCopy()
			tc.mutate(p)
			assertErrors(t, tc.want, ValidateMacOSIdentityPoolStatusUpdate(p, old))
		})
	}
}

// ---------------------------------------------------------------------------
// MacOSIdentity

func TestValidateMacOSIdentity(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSIdentity)
		want   []fieldErr
	}{
		"fixture is valid": {mutate: func(*dockerio.MacOSIdentity) {}},
		"dotted name is legal (identities are subdomains)": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Name = "imacpro.0001" },
		},
		"missing poolName is Required": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.PoolName = "" },
			want:   []fieldErr{required("spec.poolName")},
		},
		"poolName that is not a label is Invalid": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.PoolName = "imac.pro" },
			want:   []fieldErr{invalid("spec.poolName")},
		},
		"missing model is Required": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.Model = "" },
			want:   []fieldErr{required("spec.model")},
		},
		"missing serial is Required": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.SerialNumber = "" },
			want:   []fieldErr{required("spec.serialNumber")},
		},
		"11-character serial is Invalid": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.SerialNumber = "C02TM2ZBHX8" },
			want:   []fieldErr{invalid("spec.serialNumber")},
		},
		"serial with the letter O is Invalid": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.SerialNumber = "CO2TM2ZBHX87" },
			want:   []fieldErr{invalid("spec.serialNumber")},
		},
		"lower-case serial is Invalid (serials are not canonicalized)": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.SerialNumber = "c02tm2zbhx87" },
			want:   []fieldErr{invalid("spec.serialNumber")},
		},
		"serial whose week character macserial cannot decode is Invalid": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.SerialNumber = "C02TS2ZBHX87" },
			want:   []fieldErr{invalid("spec.serialNumber")},
		},
		"serial whose year character macserial cannot decode is Invalid": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.SerialNumber = "C027M2ZBHX87" },
			want:   []fieldErr{invalid("spec.serialNumber")},
		},
		"missing board serial is Required": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.BoardSerialNumber = "" },
			want:   []fieldErr{required("spec.boardSerialNumber")},
		},
		"16-character board serial is Invalid": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.BoardSerialNumber = "C02717306J9JG361" },
			want:   []fieldErr{invalid("spec.boardSerialNumber")},
		},
		"board serial failing the MLB checksum is Invalid": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.BoardSerialNumber = "C02717306J9JG361N" },
			want:   []fieldErr{invalid("spec.boardSerialNumber")},
		},
		"missing system UUID is Required": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.SystemUUID = "" },
			want:   []fieldErr{required("spec.systemUUID")},
		},
		"lower-case system UUID is Invalid (validation expects canonical form)": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.SystemUUID = "007076a6-f2a2-4461-bbe5-bad019f8025a" },
			want:   []fieldErr{invalid("spec.systemUUID")},
		},
		"system UUID without dashes is Invalid": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.SystemUUID = "007076A6F2A24461BBE5BAD019F8025A" },
			want:   []fieldErr{invalid("spec.systemUUID")},
		},
		"missing MAC is Required (and ROM is not checked against it)": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.MACAddress = "" },
			want:   []fieldErr{required("spec.macAddress")},
		},
		"lower-case MAC is Invalid (and ROM is not checked against it)": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.MACAddress = "00:0a:27:00:00:01" },
			want:   []fieldErr{invalid("spec.macAddress")},
		},
		"multicast MAC is Invalid": {
			mutate: func(id *dockerio.MacOSIdentity) {
				id.Spec.MACAddress, id.Spec.ROM = "01:0A:27:00:00:01", "010A27000001"
			},
			want: []fieldErr{invalid("spec.macAddress")},
		},
		"MAC outside Apple's OUIs is Invalid (its ROM still matches it)": {
			mutate: func(id *dockerio.MacOSIdentity) {
				id.Spec.MACAddress, id.Spec.ROM = "52:54:00:12:34:56", "525400123456"
			},
			want: []fieldErr{invalid("spec.macAddress")},
		},
		"missing ROM is Required": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.ROM = "" },
			want:   []fieldErr{required("spec.rom")},
		},
		"ROM that disagrees with MAC is Invalid at spec.rom": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.ROM = "000A27000002" },
			want:   []fieldErr{invalid("spec.rom")},
		},
		"lower-case ROM is Invalid at spec.rom": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.ROM = "000a27000001" },
			want:   []fieldErr{invalid("spec.rom")},
		},
		"changing MAC alone leaves the ROM disagreeing": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.MACAddress = "00:0A:27:00:00:02" },
			want:   []fieldErr{invalid("spec.rom")},
		},
		"everything missing is reported field by field": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec = dockerio.MacOSIdentitySpec{} },
			want: []fieldErr{
				required("spec.poolName"), required("spec.model"), required("spec.serialNumber"),
				required("spec.boardSerialNumber"), required("spec.systemUUID"), required("spec.macAddress"), required("spec.rom"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			id := registrytest.Identity("id-1")
			tc.mutate(id)
			assertErrors(t, tc.want, ValidateMacOSIdentity(id))
		})
	}
}

func TestValidateMacOSIdentity_SaysWhyAValueIsInvalid(t *testing.T) {
	cases := map[string]struct {
		mutate     func(*dockerio.MacOSIdentity)
		wantField  string
		wantDetail string
	}{
		"serial week character": {
			mutate:     func(id *dockerio.MacOSIdentity) { id.Spec.SerialNumber = "C02TS2ZBHX87" },
			wantField:  "spec.serialNumber",
			wantDetail: "character 5 (week) is 'S': must be a week code",
		},
		"board serial checksum": {
			mutate:     func(id *dockerio.MacOSIdentity) { id.Spec.BoardSerialNumber = "C02717306J9JG361N" },
			wantField:  "spec.boardSerialNumber",
			wantDetail: "fails the MLB checksum",
		},
		"MAC OUI": {
			mutate: func(id *dockerio.MacOSIdentity) {
				id.Spec.MACAddress, id.Spec.ROM = "52:54:00:12:34:56", "525400123456"
			},
			wantField:  "spec.macAddress",
			wantDetail: "OUI 52:54:00 is not assigned to Apple",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			id := registrytest.Identity("id-1")
			tc.mutate(id)
			errs := ValidateMacOSIdentity(id)
			require.Len(t, errs, 1, "%v", errs)
			assert.Equal(t, tc.wantField, errs[0].Field)
			assert.Contains(t, errs[0].Detail, tc.wantDetail)
		})
	}
}

func TestValidateMacOSIdentityUpdate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSIdentity)
		want   []fieldErr
	}{
		"labels may change": {mutate: func(id *dockerio.MacOSIdentity) { id.Labels = map[string]string{"fleet": "prod"} }},
		"serial is immutable": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.SerialNumber = "C02TM2ZBHX88" },
			want:   []fieldErr{invalid("spec")},
		},
		"pool is immutable": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Spec.PoolName = "macpro" },
			want:   []fieldErr{invalid("spec")},
		},
		"MAC and ROM together are immutable": {
			mutate: func(id *dockerio.MacOSIdentity) {
				id.Spec.MACAddress, id.Spec.ROM = "00:0A:27:00:00:02", "000A27000002"
			},
			want: []fieldErr{invalid("spec")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.Identity("id-1")
			old.ResourceVersion = "1"
			id := old.DeepCopy()
			tc.mutate(id)
			assertErrors(t, tc.want, ValidateMacOSIdentityUpdate(id, old))
		})
	}
}

func TestValidateMacOSIdentityStatusUpdate(t *testing.T) {
	full := func() *dockerio.IdentityAllocation {
		return &dockerio.IdentityAllocation{MachineNamespace: "default", MachineName: "mac-1", MachineUID: "uid-1"}
	}
	cases := map[string]struct {
		mutate func(*dockerio.MacOSIdentity)
		want   []fieldErr
	}{
		"no allocation is valid":       {mutate: func(*dockerio.MacOSIdentity) {}},
		"complete allocation is valid": {mutate: func(id *dockerio.MacOSIdentity) { id.Status.Allocation = full() }},
		"allocation without namespace is Required": {
			mutate: func(id *dockerio.MacOSIdentity) { a := full(); a.MachineNamespace = ""; id.Status.Allocation = a },
			want:   []fieldErr{required("status.allocation.machineNamespace")},
		},
		"allocation without machine name is Required": {
			mutate: func(id *dockerio.MacOSIdentity) { a := full(); a.MachineName = ""; id.Status.Allocation = a },
			want:   []fieldErr{required("status.allocation.machineName")},
		},
		"allocation without machine uid is Required": {
			mutate: func(id *dockerio.MacOSIdentity) { a := full(); a.MachineUID = ""; id.Status.Allocation = a },
			want:   []fieldErr{required("status.allocation.machineUID")},
		},
		"empty allocation reports all three": {
			mutate: func(id *dockerio.MacOSIdentity) { id.Status.Allocation = &dockerio.IdentityAllocation{} },
			want: []fieldErr{
				required("status.allocation.machineNamespace"), required("status.allocation.machineName"), required("status.allocation.machineUID"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.Identity("id-1")
			old.ResourceVersion = "1"
			id := old.DeepCopy()
			tc.mutate(id)
			assertErrors(t, tc.want, ValidateMacOSIdentityStatusUpdate(id, old))
		})
	}
}

// ---------------------------------------------------------------------------
// MacOSMachine

// installSession makes a machine an install session of image.
func installSession(image string) func(*dockerio.MacOSMachine) {
	return func(m *dockerio.MacOSMachine) {
		m.Spec.Purpose = dockerio.MachinePurposeInstall
		m.Spec.ImageName = image
	}
}

// inPool makes a machine one of pool's, as a pool makes it.
func inPool(pool string) func(*dockerio.MacOSMachine) {
	return func(m *dockerio.MacOSMachine) {
		m.Spec.PoolName = pool
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[dockerio.MachinePoolLabel] = pool
	}
}

func TestValidateMacOSMachine(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSMachine)
		want   []fieldErr
	}{
		"fixture is valid": {mutate: func(*dockerio.MacOSMachine) {}},
		"missing namespace is Required": {
			mutate: func(m *dockerio.MacOSMachine) { m.Namespace = "" },
			want:   []fieldErr{required("metadata.namespace")},
		},
		"name that is not a label is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) { m.Name = "mac.1" },
			want:   []fieldErr{invalid("metadata.name")},
		},
		"missing class is Required": {
			mutate: func(m *dockerio.MacOSMachine) { m.Spec.ClassName = "" },
			want:   []fieldErr{required("spec.className")},
		},
		"class name that is not a label is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) { m.Spec.ClassName = "Standard" },
			want:   []fieldErr{invalid("spec.className")},
		},
		"image override is accepted": {mutate: func(m *dockerio.MacOSMachine) { m.Spec.ImageName = "sonoma.14-6" }},
		"image override with upper case is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) { m.Spec.ImageName = "Sonoma" },
			want:   []fieldErr{invalid("spec.imageName")},
		},
		"pool name with its label is accepted": {mutate: inPool("warm")},
		"pool name without its label is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) { m.Spec.PoolName = "warm" },
			want:   []fieldErr{invalid("metadata.labels[dockerios.io/pool]")},
		},
		"pool label naming another pool is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) { inPool("warm")(m); m.Labels[dockerio.MachinePoolLabel] = "cold" },
			want:   []fieldErr{invalid("metadata.labels[dockerios.io/pool]")},
		},
		"pool label on a machine of no pool is Forbidden": {
			mutate: func(m *dockerio.MacOSMachine) { m.Labels = map[string]string{dockerio.MachinePoolLabel: "warm"} },
			want:   []fieldErr{forbidden("metadata.labels[dockerios.io/pool]")},
		},
		"claim-uid label on a machine of no pool is accepted (a class claim's machine)": {
			mutate: func(m *dockerio.MacOSMachine) { m.Labels = map[string]string{dockerio.ClaimUIDLabel: "c0ffee"} },
		},
		// The controller disposes of a machine labelled for a claim that is
		// not its own: a pool's machine so labelled would be deleted at once.
		"claim-uid label on a pool's machine is Forbidden": {
			mutate: func(m *dockerio.MacOSMachine) { inPool("warm")(m); m.Labels[dockerio.ClaimUIDLabel] = "c0ffee" },
			want:   []fieldErr{forbidden("metadata.labels[dockerios.io/claim-uid]")},
		},
		"pool name that is not a label is Invalid": {
			mutate: inPool("warm.pool"),
			want:   []fieldErr{invalid("spec.poolName")},
		},
		"VM label with a bad key is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) { m.Spec.VMLabels = map[string]string{"a b": "c"} },
			want:   []fieldErr{invalid("spec.vmLabels")},
		},
		"purpose Workload is accepted":                 {mutate: func(m *dockerio.MacOSMachine) { m.Spec.Purpose = dockerio.MachinePurposeWorkload }},
		"purpose Install naming its image is accepted": {mutate: installSession("sonoma")},
		"an unknown purpose is NotSupported": {
			mutate: func(m *dockerio.MacOSMachine) { m.Spec.Purpose = "Build" },
			want:   []fieldErr{notSupported("spec.purpose")},
		},
		"purpose in lower case is NotSupported": {
			mutate: func(m *dockerio.MacOSMachine) { m.Spec.Purpose = "install"; m.Spec.ImageName = "sonoma" },
			want:   []fieldErr{notSupported("spec.purpose")},
		},
		// The class's image is not enough: the session installs one image,
		// named on it, which promoting it replaces.
		"an install session without spec.imageName is Required": {
			mutate: installSession(""),
			want:   []fieldErr{required("spec.imageName")},
		},
		"an install session in a pool is Forbidden": {
			mutate: func(m *dockerio.MacOSMachine) { inPool("warm")(m); installSession("sonoma")(m) },
			want:   []fieldErr{forbidden("spec.poolName")},
		},
		"an install session labelled for a class claim is Forbidden": {
			mutate: func(m *dockerio.MacOSMachine) {
				installSession("sonoma")(m)
				m.Labels = map[string]string{dockerio.ClaimUIDLabel: "c0ffee"}
			},
			want: []fieldErr{forbidden("metadata.labels[dockerios.io/claim-uid]")},
		},
		"VM label with a bad value is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) { m.Spec.VMLabels = map[string]string{"app": "a b"} },
			want:   []fieldErr{invalid("spec.vmLabels")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := registrytest.Machine("mac-1")
			tc.mutate(m)
			assertErrors(t, tc.want, ValidateMacOSMachine(m))
		})
	}
}

func TestValidateMacOSMachineUpdate(t *testing.T) {
	cases := map[string]struct {
		old    func(*dockerio.MacOSMachine)
		mutate func(*dockerio.MacOSMachine)
		want   []fieldErr
	}{
		"labels and finalizers may change": {
			mutate: func(m *dockerio.MacOSMachine) {
				m.Labels = map[string]string{"team": "macos"}
				m.Finalizers = []string{dockerio.MachineTeardownFinalizer}
			},
		},
		"class is immutable":      {mutate: func(m *dockerio.MacOSMachine) { m.Spec.ClassName = "gpu" }, want: []fieldErr{invalid("spec")}},
		"image is immutable":      {mutate: func(m *dockerio.MacOSMachine) { m.Spec.ImageName = "sequoia" }, want: []fieldErr{invalid("spec")}},
		"VM labels are immutable": {mutate: func(m *dockerio.MacOSMachine) { m.Spec.VMLabels["app"] = "runner" }, want: []fieldErr{invalid("spec")}},
		"purpose is immutable":    {mutate: installSession("sonoma"), want: []fieldErr{invalid("spec")}},
		"an install session stays one": {
			old:    installSession("sonoma"),
			mutate: func(m *dockerio.MacOSMachine) { m.Spec.Purpose = dockerio.MachinePurposeWorkload },
			want:   []fieldErr{invalid("spec")},
		},
		"namespace is immutable": {mutate: func(m *dockerio.MacOSMachine) { m.Namespace = "other" }, want: []fieldErr{invalid("metadata.namespace")}},
		// The pool counts its machines by the label: removed, the machine
		// would still be bound for the pool, and never disposed of by it.
		"a pool machine's pool label may not be removed": {
			old:    inPool("warm"),
			mutate: func(m *dockerio.MacOSMachine) { delete(m.Labels, dockerio.MachinePoolLabel) },
			want:   []fieldErr{invalid("metadata.labels[dockerios.io/pool]")},
		},
		"a pool machine's other labels may change": {
			old:    inPool("warm"),
			mutate: func(m *dockerio.MacOSMachine) { m.Labels["team"] = "macos" },
		},
		"a pool machine's pool label may not name another pool": {
			old:    inPool("warm"),
			mutate: func(m *dockerio.MacOSMachine) { m.Labels[dockerio.MachinePoolLabel] = "cold" },
			want:   []fieldErr{invalid("metadata.labels[dockerios.io/pool]")},
		},
		// Stored before the label was held to spec.poolName: its finalizer
		// must still come off, or it would never go.
		"a machine stored without its pool label still takes other writes": {
			old: func(m *dockerio.MacOSMachine) {
				m.Spec.PoolName = "warm"
				m.Finalizers = []string{dockerio.MachineTeardownFinalizer}
			},
			mutate: func(m *dockerio.MacOSMachine) { m.Finalizers = nil },
		},
		// The controller deletes a machine whose claim-uid label names no
		// claim of the machine's name: added to a bound pool machine, the
		// label would have it torn down under its workload.
		"the claim-uid label may not be added": {
			old:    inPool("warm"),
			mutate: func(m *dockerio.MacOSMachine) { m.Labels[dockerio.ClaimUIDLabel] = "c0ffee" },
			want:   []fieldErr{forbidden("metadata.labels[dockerios.io/claim-uid]")},
		},
		"the claim-uid label may not be changed": {
			old:    func(m *dockerio.MacOSMachine) { m.Labels = map[string]string{dockerio.ClaimUIDLabel: "c0ffee"} },
			mutate: func(m *dockerio.MacOSMachine) { m.Labels[dockerio.ClaimUIDLabel] = "decade" },
			want:   []fieldErr{forbidden("metadata.labels[dockerios.io/claim-uid]")},
		},
		"the claim-uid label may not be removed": {
			old:    func(m *dockerio.MacOSMachine) { m.Labels = map[string]string{dockerio.ClaimUIDLabel: "c0ffee"} },
			mutate: func(m *dockerio.MacOSMachine) { delete(m.Labels, dockerio.ClaimUIDLabel) },
			want:   []fieldErr{forbidden("metadata.labels[dockerios.io/claim-uid]")},
		},
		"a class claim's machine takes other label changes": {
			old:    func(m *dockerio.MacOSMachine) { m.Labels = map[string]string{dockerio.ClaimUIDLabel: "c0ffee"} },
			mutate: func(m *dockerio.MacOSMachine) { m.Labels["team"] = "macos"; m.Finalizers = nil },
		},
		"a machine stored without its pool label may get it": {
			old:    func(m *dockerio.MacOSMachine) { m.Spec.PoolName = "warm" },
			mutate: func(m *dockerio.MacOSMachine) { m.Labels[dockerio.MachinePoolLabel] = "warm" },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.Machine("mac-1")
			if tc.old != nil {
				tc.old(old)
			}
			old.ResourceVersion = "1"
			m := old.DeepCopy()
			tc.mutate(m)
			assertErrors(t, tc.want, ValidateMacOSMachineUpdate(m, old))
		})
	}
}

func TestValidateMacOSMachineStatusUpdate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSMachine)
		want   []fieldErr
	}{
		"full observed status is accepted": {
			mutate: func(m *dockerio.MacOSMachine) {
				m.Status = dockerio.MacOSMachineStatus{
					ObservedGeneration: 1,
					Phase:              dockerio.MachineReady,
					Conditions:         []metav1.Condition{condition(dockerio.MachineConditionReady)},
					VirtualMachineName: "mac-1",
					NodeName:           "node-1.example.com",
					Addresses: []dockerio.MachineAddress{
						{Type: dockerio.MachineAddressPod, Address: "10.0.0.7"},
						{Type: dockerio.MachineAddressAgent, Address: "fd00::7"},
					},
					Agent: &dockerio.AgentReport{Stage: dockerio.AgentStageReady, DiskTotalBytes: ptr.To[int64](100), DiskFreeBytes: ptr.To[int64](100)},
				}
			},
		},
		"empty phase is accepted": {mutate: func(m *dockerio.MacOSMachine) { m.Status.Phase = "" }},
		"unknown phase is NotSupported": {
			mutate: func(m *dockerio.MacOSMachine) { m.Status.Phase = "Sleeping" },
			want:   []fieldErr{notSupported("status.phase")},
		},
		"negative observedGeneration is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) { m.Status.ObservedGeneration = -1 },
			want:   []fieldErr{invalid("status.observedGeneration")},
		},
		"unknown address type is NotSupported": {
			mutate: func(m *dockerio.MacOSMachine) {
				m.Status.Addresses = []dockerio.MachineAddress{{Type: "Hostname", Address: "10.0.0.7"}}
			},
			want: []fieldErr{notSupported("status.addresses[0].type")},
		},
		"address that is not an IP is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) {
				m.Status.Addresses = []dockerio.MachineAddress{{Type: dockerio.MachineAddressPod, Address: "10.0.0.7"}, {Type: dockerio.MachineAddressPod, Address: "mac-1.local"}}
			},
			want: []fieldErr{invalid("status.addresses[1].address")},
		},
		"node name with upper case is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) { m.Status.NodeName = "Node_1" },
			want:   []fieldErr{invalid("status.nodeName")},
		},
		"VM name with a dot is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) { m.Status.VirtualMachineName = "mac.1" },
			want:   []fieldErr{invalid("status.virtualMachineName")},
		},
		"unknown agent stage is NotSupported": {
			mutate: func(m *dockerio.MacOSMachine) { m.Status.Agent = &dockerio.AgentReport{Stage: "Panicked"} },
			want:   []fieldErr{notSupported("status.agent.stage")},
		},
		"negative disk total is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) {
				m.Status.Agent = &dockerio.AgentReport{DiskTotalBytes: ptr.To[int64](-1)}
			},
			want: []fieldErr{invalid("status.agent.diskTotalBytes")},
		},
		"negative disk free is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) {
				m.Status.Agent = &dockerio.AgentReport{DiskFreeBytes: ptr.To[int64](-1)}
			},
			want: []fieldErr{invalid("status.agent.diskFreeBytes")},
		},
		"disk free above disk total is Invalid": {
			mutate: func(m *dockerio.MacOSMachine) {
				m.Status.Agent = &dockerio.AgentReport{DiskTotalBytes: ptr.To[int64](100), DiskFreeBytes: ptr.To[int64](101)}
			},
			want: []fieldErr{invalid("status.agent.diskFreeBytes")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.Machine("mac-1")
			old.ResourceVersion = "1"
			m := old.DeepCopy()
			tc.mutate(m)
			assertErrors(t, tc.want, ValidateMacOSMachineStatusUpdate(m, old))
		})
	}
}

func TestValidateMacOSMachineStatusUpdate_FailedIsFinal(t *testing.T) {
	failed := registrytest.Machine("mac-1")
	failed.ResourceVersion = "7"
	failed.Status.Phase = dockerio.MachineFailed
	for phase, want := range map[dockerio.MacOSMachinePhase][]fieldErr{
		dockerio.MachineFailed:   nil,
		dockerio.MachineReady:    {forbidden("status.phase")},
		dockerio.MachinePending:  {forbidden("status.phase")},
		dockerio.MachineStarting: {forbidden("status.phase")},
	} {
		t.Run(string(phase), func(t *testing.T) {
			m := failed.DeepCopy()
			m.Status.Phase = phase
			assertErrors(t, want, ValidateMacOSMachineStatusUpdate(m, failed))
		})
	}
	// Anything may become Failed.
	ready := registrytest.Machine("mac-1")
	ready.ResourceVersion = "6"
	ready.Status.Phase = dockerio.MachineReady
	assertErrors(t, nil, ValidateMacOSMachineStatusUpdate(failed, ready))
}

// ---------------------------------------------------------------------------
// MacOSMachinePool

func TestValidateMacOSMachinePool(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSMachinePool)
		want   []fieldErr
	}{
		"fixture is valid": {mutate: func(*dockerio.MacOSMachinePool) {}},
		"name that is not a label is Invalid": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Name = "warm.pool" },
			want:   []fieldErr{invalid("metadata.name")},
		},
		"missing class is Required": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.ClassName = "" },
			want:   []fieldErr{required("spec.className")},
		},
		"missing replicas (not defaulted) is Required": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.Replicas = nil },
			want:   []fieldErr{required("spec.replicas")},
		},
		"negative replicas is Invalid": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.Replicas = ptr.To[int32](-1) },
			want:   []fieldErr{invalid("spec.replicas")},
		},
		"zero replicas is legal": {mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.Replicas = ptr.To[int32](0) }},
		"replicas above maxMachines": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.Replicas = ptr.To[int32](11) },
			want:   []fieldErr{invalid("spec.replicas")},
		},
		"replicas equal to maxMachines is legal": {mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.Replicas = ptr.To[int32](10) }},
		"no cap allows any replicas": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.MaxMachines, p.Spec.Replicas = nil, ptr.To[int32](1000) },
		},
		"negative maxMachines is Invalid, and replicas then exceed it": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.MaxMachines = ptr.To[int32](-1) },
			want:   []fieldErr{invalid("spec.maxMachines"), invalid("spec.replicas")},
		},
		"template label with a bad key is Invalid": {
			mutate: func(p *dockerio.MacOSMachinePool) {
				p.Spec.Template.Metadata.Labels = map[string]string{"x code": "16"}
			},
			want: []fieldErr{invalid("spec.template.metadata.labels")},
		},
		"reserved label dockerios.io/pool in pool template is Forbidden": {
			mutate: func(p *dockerio.MacOSMachinePool) {
				p.Spec.Template.Metadata.Labels[dockerio.MachinePoolLabel] = "other"
			},
			want: []fieldErr{forbidden("spec.template.metadata.labels[dockerios.io/pool]")},
		},
		"reserved label dockerios.io/claim-uid in pool template is Forbidden": {
			mutate: func(p *dockerio.MacOSMachinePool) {
				p.Spec.Template.Metadata.Labels[dockerio.ClaimUIDLabel] = "c0ffee"
			},
			want: []fieldErr{forbidden("spec.template.metadata.labels[dockerios.io/claim-uid]")},
		},
		"template annotation with a bad key is Invalid": {
			mutate: func(p *dockerio.MacOSMachinePool) {
				p.Spec.Template.Metadata.Annotations = map[string]string{"not/a/key": "v"}
			},
			want: []fieldErr{invalid("spec.template.metadata.annotations")},
		},
		"template image with upper case is Invalid": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.Template.Spec.ImageName = "Sonoma" },
			want:   []fieldErr{invalid("spec.template.spec.imageName")},
		},
		"template VM label with a bad value is Invalid": {
			mutate: func(p *dockerio.MacOSMachinePool) {
				p.Spec.Template.Spec.VMLabels = map[string]string{"app": "-builder"}
			},
			want: []fieldErr{invalid("spec.template.spec.vmLabels")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := registrytest.MachinePool("warm")
			tc.mutate(p)
			assertErrors(t, tc.want, ValidateMacOSMachinePool(p))
		})
	}
}

func TestValidateMacOSMachinePoolUpdate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSMachinePool)
		want   []fieldErr
	}{
		"replicas, cap and template may change": {
			mutate: func(p *dockerio.MacOSMachinePool) {
				p.Spec.Replicas, p.Spec.MaxMachines = ptr.To[int32](5), ptr.To[int32](20)
				p.Spec.Template.Metadata.Labels = map[string]string{"xcode": "16.1"}
			},
		},
		"className is immutable": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.ClassName = "gpu" },
			want:   []fieldErr{invalid("spec.className")},
		},
		"replicas above maxMachines on update": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.Replicas = ptr.To[int32](11) },
			want:   []fieldErr{invalid("spec.replicas")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.MachinePool("warm")
			old.ResourceVersion = "1"
			p := old.DeepCopy()
			tc.mutate(p)
			assertErrors(t, tc.want, ValidateMacOSMachinePoolUpdate(p, old))
		})
	}
}

func TestValidateMacOSMachinePoolStatusUpdate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSMachinePool)
		want   []fieldErr
	}{
		"counts are accepted": {
			mutate: func(p *dockerio.MacOSMachinePool) {
				p.Status = dockerio.MacOSMachinePoolStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, BoundMachines: 4, Selector: "dockerios.io/pool=warm"}
			},
		},
		"negative observedGeneration is Invalid": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Status.ObservedGeneration = -1 },
			want:   []fieldErr{invalid("status.observedGeneration")},
		},
		"negative replicas is Invalid, and readyReplicas 0 then exceeds it": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Status.Replicas = -1 },
			want:   []fieldErr{invalid("status.replicas"), invalid("status.readyReplicas")},
		},
		"negative boundMachines is Invalid": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Status.BoundMachines = -1 },
			want:   []fieldErr{invalid("status.boundMachines")},
		},
		"negative readyReplicas is Invalid": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Status.ReadyReplicas = -1 },
			want:   []fieldErr{invalid("status.readyReplicas")},
		},
		"readyReplicas above replicas is Invalid": {
			mutate: func(p *dockerio.MacOSMachinePool) { p.Status.Replicas, p.Status.ReadyReplicas = 2, 3 },
			want:   []fieldErr{invalid("status.readyReplicas")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.MachinePool("warm")
			old.ResourceVersion = "1"
			p := old.DeepCopy()
			tc.mutate(p)
			assertErrors(t, tc.want, ValidateMacOSMachinePoolStatusUpdate(p, old))
		})
	}
}

// ---------------------------------------------------------------------------
// MacOSMachineClaim

func TestValidateMacOSMachineClaim(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSMachineClaim)
		want   []fieldErr
	}{
		"pool claim fixture is valid": {mutate: func(*dockerio.MacOSMachineClaim) {}},
		"class claim is valid": {
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Spec.PoolName, c.Spec.ClassName = "", "standard" },
		},
		"dotted claim name is legal (claims are subdomains)": {
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Name = "ci.job-42" },
		},
		"missing namespace is Required": {
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Namespace = "" },
			want:   []fieldErr{required("metadata.namespace")},
		},
		"claim with both poolName and className": {
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Spec.ClassName = "standard" },
			want:   []fieldErr{forbidden("spec.className")},
		},
		"claim with neither poolName nor className is Required at spec": {
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Spec.PoolName = "" },
			want:   []fieldErr{required("spec")},
		},
		"pool name that is not a label is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Spec.PoolName = "warm.pool" },
			want:   []fieldErr{invalid("spec.poolName")},
		},
		"class name that is not a label is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Spec.PoolName, c.Spec.ClassName = "", "Standard" },
			want:   []fieldErr{invalid("spec.className")},
		},
		"no selector is legal": {mutate: func(c *dockerio.MacOSMachineClaim) { c.Spec.Selector = nil }},
		"selector with a bad label key is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Spec.Selector.MatchLabels = map[string]string{"x code": "16"} },
			want:   []fieldErr{invalid("spec.selector.matchLabels")},
		},
		"selector with an unknown operator is Invalid": {
			mutate: func(c *dockerio.MacOSMachineClaim) {
				c.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "xcode", Operator: "Near", Values: []string{"16"}}}
			},
			want: []fieldErr{invalid("spec.selector.matchExpressions[0].operator")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := registrytest.MachineClaim("ci-42")
			tc.mutate(c)
			assertErrors(t, tc.want, ValidateMacOSMachineClaim(c))
		})
	}
}

func TestValidateMacOSMachineClaimUpdate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*dockerio.MacOSMachineClaim)
		want   []fieldErr
	}{
		"labels may change": {mutate: func(c *dockerio.MacOSMachineClaim) { c.Labels = map[string]string{"team": "macos"} }},
		"pool is immutable": {
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Spec.PoolName = "cold" },
			want:   []fieldErr{invalid("spec")},
		},
		"switching from pool to class is immutable": {
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Spec.PoolName, c.Spec.ClassName = "", "standard" },
			want:   []fieldErr{invalid("spec")},
		},
		"selector is immutable": {
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Spec.Selector.MatchLabels["xcode"] = "15" },
			want:   []fieldErr{invalid("spec")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.MachineClaim("ci-42")
			old.ResourceVersion = "1"
			c := old.DeepCopy()
			tc.mutate(c)
			assertErrors(t, tc.want, ValidateMacOSMachineClaimUpdate(c, old))
		})
	}
}

func TestValidateMacOSMachineClaimStatusUpdate(t *testing.T) {
	bound := func(c *dockerio.MacOSMachineClaim) {
		c.Status.Phase, c.Status.MachineName = dockerio.ClaimBound, "mac-1"
	}
	lost := func(c *dockerio.MacOSMachineClaim) {
		c.Status.Phase, c.Status.MachineName = dockerio.ClaimLost, "mac-1"
	}
	cases := map[string]struct {
		old    func(*dockerio.MacOSMachineClaim)
		mutate func(*dockerio.MacOSMachineClaim)
		want   []fieldErr
	}{
		"Pending is accepted":                   {mutate: func(c *dockerio.MacOSMachineClaim) { c.Status.Phase = dockerio.ClaimPending }},
		"Lost is accepted":                      {mutate: func(c *dockerio.MacOSMachineClaim) { c.Status.Phase = dockerio.ClaimLost }},
		"Bound claim staying Bound is accepted": {old: bound, mutate: bound},
		"Lost claim made Bound again": {
			old:    lost,
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Status.Phase = dockerio.ClaimBound },
			want:   []fieldErr{invalid("status.phase")},
		},
		"Bound claim made Pending": {
			old:    bound,
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Status.Phase = dockerio.ClaimPending },
			want:   []fieldErr{invalid("status.phase")},
		},
		"Bound claim made Lost": {
			old:    bound,
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Status.Phase = dockerio.ClaimLost },
			want:   []fieldErr{invalid("status.phase")},
		},
		"Lost claim staying Lost is accepted": {old: lost, mutate: lost},
		"unbound Lost claim made Pending again": {
			old:    func(c *dockerio.MacOSMachineClaim) { c.Status.Phase = dockerio.ClaimLost },
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Status.Phase = dockerio.ClaimPending },
			want:   []fieldErr{invalid("status.phase")},
		},
		"unbound Lost claim given no phase": {
			old:    func(c *dockerio.MacOSMachineClaim) { c.Status.Phase = dockerio.ClaimLost },
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Status.Phase = "" },
			want:   []fieldErr{invalid("status.phase")},
		},
		"claim Bound without machineName": {
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Status.Phase = dockerio.ClaimBound },
			want:   []fieldErr{invalid("status.phase")},
		},
		"unknown phase is NotSupported": {
			mutate: func(c *dockerio.MacOSMachineClaim) { c.Status.Phase = "Released" },
			want:   []fieldErr{notSupported("status.phase")},
		},
		"condition without a status is Required": {
			mutate: func(c *dockerio.MacOSMachineClaim) {
				cond := condition("Satisfiable")
				cond.Status = ""
				c.Status.Conditions = []metav1.Condition{cond}
			},
			want: []fieldErr{required("status.conditions[0].status")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := registrytest.MachineClaim("ci-42")
			old.ResourceVersion = "1"
			if tc.old != nil {
				tc.old(old)
			}
			c := old.DeepCopy()
			tc.mutate(c)
			assertErrors(t, tc.want, ValidateMacOSMachineClaimStatusUpdate(c, old))
		})
	}
}
