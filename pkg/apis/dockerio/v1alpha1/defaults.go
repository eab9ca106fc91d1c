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

package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// Defaults of a MacOSMachineClass. They are the known-good QEMU shape for
// macOS (Docker-OSX and OSX-KVM boot q35 + Penryn + iMacPro1,1, system disk
// on SATA). The system disk is not NVMe by default because KubeVirt v1.9's
// launchers cannot start an emulated NVMe disk: their QEMU is built without
// the nvme device (see sidecar-hook/README.md).
const (
	DefaultCPUCores      = 4
	DefaultCPUModel      = "Penryn"
	DefaultSMBIOSModel   = "iMacPro1,1"
	DefaultDisplayWidth  = 1920
	DefaultDisplayHeight = 1080
	DefaultAgentPort     = 8443
	DefaultStartTimeout  = 20 * time.Minute
	// DefaultAgentUnresponsiveTimeout is a few of the controller's agent
	// polls, long enough that a busy guest is not replaced on a blip.
	DefaultAgentUnresponsiveTimeout = 3 * time.Minute
	// DefaultNodeLostGracePeriod matches how long Kubernetes lets pods
	// tolerate an unreachable node before evicting them, and KubeVirt's
	// virt-handler heartbeat timeout: a kubelet or network hiccup shorter
	// than that never costs a workload its Mac.
	DefaultNodeLostGracePeriod = 5 * time.Minute
	DefaultPoolReplicas        = 1
	DefaultMemory              = "8Gi"
	DefaultSystemDiskBus       = DiskBusSATA
	DefaultFeaturePolicy       = CPUFeaturePolicyRequire
)

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// SetDefaults_MacOSMachineClassSpec fills in the shape a class leaves out.
func SetDefaults_MacOSMachineClassSpec(obj *MacOSMachineClassSpec) {
	if obj.CPU.Cores == 0 {
		obj.CPU.Cores = DefaultCPUCores
	}
	if obj.CPU.Model == "" {
		obj.CPU.Model = DefaultCPUModel
	}
	for i := range obj.CPU.Features {
		if obj.CPU.Features[i].Policy == "" {
			obj.CPU.Features[i].Policy = DefaultFeaturePolicy
		}
	}
	if obj.Memory == nil {
		obj.Memory = ptr.To(resource.MustParse(DefaultMemory))
	}
	if obj.SystemDisk.Bus == "" {
		obj.SystemDisk.Bus = DefaultSystemDiskBus
	}
	if obj.SMBIOSModel == "" {
		obj.SMBIOSModel = DefaultSMBIOSModel
	}
	if obj.Display.Width == 0 {
		obj.Display.Width = DefaultDisplayWidth
	}
	if obj.Display.Height == 0 {
		obj.Display.Height = DefaultDisplayHeight
	}
	if obj.AgentNetwork != nil && obj.AgentNetwork.Port == 0 {
		obj.AgentNetwork.Port = DefaultAgentPort
	}
	if obj.StartTimeout == nil {
		obj.StartTimeout = &metav1.Duration{Duration: DefaultStartTimeout}
	}
	if obj.AgentUnresponsiveTimeout == nil {
		obj.AgentUnresponsiveTimeout = &metav1.Duration{Duration: DefaultAgentUnresponsiveTimeout}
	}
	if obj.NodeLostGracePeriod == nil {
		obj.NodeLostGracePeriod = &metav1.Duration{Duration: DefaultNodeLostGracePeriod}
	}
}

// SetDefaults_MacOSMachinePoolSpec keeps one machine warm unless told otherwise.
func SetDefaults_MacOSMachinePoolSpec(obj *MacOSMachinePoolSpec) {
	if obj.Replicas == nil {
		obj.Replicas = ptr.To[int32](DefaultPoolReplicas)
	}
}
