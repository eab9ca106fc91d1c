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

package dockerio

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ---------------------------------------------------------------------------
// MacOSMachineClass

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSMachineClass is the shape of a macOS machine: CPU, memory, disks,
// golden image, identity pool and the limits that bound its start. Machines
// and pools name a class; a change to a class affects machines created after
// it, never machines that already exist.
type MacOSMachineClass struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the machines of this class.
	Spec MacOSMachineClassSpec `json:"spec"`
	// status reports whether machines of this class can be made right now.
	// +optional
	Status MacOSMachineClassStatus `json:"status,omitempty"`
}

// MacOSMachineClassSpec is the shape of every machine of a class.
type MacOSMachineClassSpec struct {
	// cpu is the virtual CPU presented to macOS.
	// +optional
	CPU CPUSpec `json:"cpu,omitempty"`
	// memory is the guest memory, for example "16Gi". Defaults to 8Gi.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// systemDisk is the disk macOS is installed on, cloned from the image.
	SystemDisk SystemDiskSpec `json:"systemDisk"`
	// imageName is the MacOSImage machines of this class are cloned from,
	// unless a machine names its own.
	ImageName string `json:"imageName"`
	// identityPoolName is the MacOSIdentityPool machines of this class draw
	// their Apple identity from. Immutable: machines hold identities from
	// this pool for their whole life.
	IdentityPoolName string `json:"identityPoolName"`
	// smbiosModel is the Mac model the firmware reports, for example
	// "iMacPro1,1". It must equal the model of the identity pool. Immutable.
	// Defaults to "iMacPro1,1".
	// +optional
	SMBIOSModel string `json:"smbiosModel,omitempty"`
	// display is the resolution the bootdisk sets for the guest console.
	// +optional
	Display DisplaySpec `json:"display,omitempty"`
	// agentNetwork is the network the guest agent is reached on. When unset,
	// the agent is reached on the pod network.
	// +optional
	AgentNetwork *AgentNetworkSpec `json:"agentNetwork,omitempty"`
	// hostDevices are devices passed through to the guest, such as GPUs,
	// provisioned by a device plugin. A machine with host devices cannot be
	// live-migrated: when its node is lost, the machine is failed and replaced.
	// +optional
	// +listType=map
	// +listMapKey=name
	HostDevices []HostDeviceSpec `json:"hostDevices,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
	// startTimeout bounds the time from the virtual machine's creation to
	// the guest agent reporting Ready, whatever holds the machine up on the
	// way: a VirtualMachineInstance that is not scheduled, that fails or
	// crash-loops, or a guest that never reports. A machine that exceeds it
	// fails, says what it saw, and gives back what it holds. Defaults to 20m.
	// +optional
	StartTimeout *metav1.Duration `json:"startTimeout,omitempty"`
	// agentUnresponsiveTimeout bounds how long a machine that was Ready may
	// have a guest agent that does not answer, or answers with a status its
	// poll loop stopped updating, while its VirtualMachineInstance runs:
	// past it the machine is not Ready (reason AgentUnresponsive), and an
	// unbound one is disposed of and replaced like a crashed guest. It does
	// not apply while many agents are unreachable at once (a fault of the
	// agent network, not of the guests). Defaults to 3m.
	// +optional
	AgentUnresponsiveTimeout *metav1.Duration `json:"agentUnresponsiveTimeout,omitempty"`
	// nodeLostGracePeriod is how long a machine whose node stopped being
	// Ready is given for the node to come back before it is failed and
	// replaced. Its VM may still run on the lost node, so the failed
	// machine keeps its identity, fenced (condition IdentityFenced), until
	// its VirtualMachineInstance and launcher pod are confirmed gone; the
	// replacement takes another identity. A machine with host devices
	// cannot move and is failed at once, without this grace. Zero fails
	// at once too. Defaults to 5m.
	// +optional
	NodeLostGracePeriod *metav1.Duration `json:"nodeLostGracePeriod,omitempty"`
	// preserveDiskOnFailure keeps the system disk of a failed machine for
	// inspection instead of deleting it with the machine.
	// +optional
	PreserveDiskOnFailure bool `json:"preserveDiskOnFailure,omitempty"`
	// bootdiskBuilderImage is the container image that renders each
	// machine's OpenCore bootdisk. When empty, the controller's default is used.
	// +optional
	BootdiskBuilderImage string `json:"bootdiskBuilderImage,omitempty"`
}

// CPUSpec is the virtual CPU of a machine.
type CPUSpec struct {
	// cores is the number of CPU cores. Defaults to 4.
	// +optional
	Cores int32 `json:"cores,omitempty"`
	// model is the CPU model KubeVirt asks libvirt for, for example "Penryn"
	// or "host-passthrough". Defaults to "Penryn", the model known to boot
	// macOS under QEMU.
	// +optional
	Model string `json:"model,omitempty"`
	// features adjusts single CPU feature flags of the model.
	// +optional
	// +listType=map
	// +listMapKey=name
	Features []CPUFeature `json:"features,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
}

// CPUFeature turns one CPU feature flag on or off.
type CPUFeature struct {
	// name of the feature, as libvirt names it, for example "avx2".
	Name string `json:"name"`
	// policy is one of force, require, optional, disable, forbid, with
	// libvirt's meaning. Defaults to require.
	// +optional
	Policy CPUFeaturePolicy `json:"policy,omitempty"`
}

// CPUFeaturePolicy says how a CPU feature flag is applied.
// +enum
type CPUFeaturePolicy string

// CPU feature policies, as libvirt and KubeVirt define them.
const (
	CPUFeaturePolicyForce    CPUFeaturePolicy = "force"
	CPUFeaturePolicyRequire  CPUFeaturePolicy = "require"
	CPUFeaturePolicyOptional CPUFeaturePolicy = "optional"
	CPUFeaturePolicyDisable  CPUFeaturePolicy = "disable"
	CPUFeaturePolicyForbid   CPUFeaturePolicy = "forbid"
)

// SystemDiskSpec is the disk macOS runs from.
type SystemDiskSpec struct {
	// size of the system disk, at least the size of the image, for example "128Gi".
	Size resource.Quantity `json:"size"`
	// storageClassName is the StorageClass the disk is cloned into. When
	// unset, the cluster's default StorageClass is used.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// bus is the controller the disk sits on: nvme, sata or virtio.
	// Defaults to sata, which macOS drives natively and every KubeVirt
	// launcher can start; nvme needs a launcher whose libvirt (11.5 or
	// later) and QEMU both have emulated NVMe.
	// +optional
	Bus DiskBus `json:"bus,omitempty"`
}

// DiskBus is the controller a disk is attached to.
// +enum
type DiskBus string

// Disk buses macOS can boot from. KubeVirt has no NVMe bus; the DockerIOS
// domain hook moves an nvme system disk onto an NVMe controller.
const (
	DiskBusNVMe   DiskBus = "nvme"
	DiskBusSATA   DiskBus = "sata"
	DiskBusVirtio DiskBus = "virtio"
)

// DisplaySpec is the resolution of the guest console.
type DisplaySpec struct {
	// width in pixels. Defaults to 1920.
	// +optional
	Width int32 `json:"width,omitempty"`
	// height in pixels. Defaults to 1080.
	// +optional
	Height int32 `json:"height,omitempty"`
}

// AgentNetworkSpec is the dedicated network of the guest agent.
type AgentNetworkSpec struct {
	// networkName is the Multus NetworkAttachmentDefinition, as "name" (in
	// the machine's namespace) or "namespace/name".
	NetworkName string `json:"networkName"`
	// port the guest agent listens on. Defaults to 8443.
	// +optional
	Port int32 `json:"port,omitempty"`
}

// HostDeviceSpec is one device passed through to the guest.
type HostDeviceSpec struct {
	// name of the device in the virtual machine.
	Name string `json:"name"`
	// deviceName is the resource name the device plugin advertises, for
	// example "nvidia.com/GP102GL_Tesla_P40".
	DeviceName string `json:"deviceName"`
	// gpu marks the device as a GPU (KubeVirt's gpus list rather than hostDevices).
	// +optional
	GPU bool `json:"gpu,omitempty"`
}

// MacOSMachineClassStatus reports whether machines of a class can be made.
type MacOSMachineClassStatus struct {
	// observedGeneration is the generation the controller last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: StorageAvailable is False while new machines of this class
	// are held back because cloning into its StorageClass failed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
	// storageHoldBack is set while cloning into the class's StorageClass
	// fails: new machines of the class wait until until, then one of them
	// (probe) tries a clone while the others wait for its outcome. Each
	// failure in a row doubles the wait; a success clears it.
	// +optional
	StorageHoldBack *StorageHoldBack `json:"storageHoldBack,omitempty"`
}

// StorageHoldBack is how new system disks of a class wait for storage that
// failed a clone.
type StorageHoldBack struct {
	// failures is how many clones into the StorageClass failed in a row.
	Failures int32 `json:"failures"`
	// until is when one machine may try a clone again.
	Until metav1.Time `json:"until"`
	// probe is the machine (namespace/name) trying that clone; empty
	// until one does.
	// +optional
	Probe string `json:"probe,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSMachineClassList is a list of MacOSMachineClass.
type MacOSMachineClassList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []MacOSMachineClass `json:"items"`
}

// ---------------------------------------------------------------------------
// MacOSImage

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSImage is a golden macOS disk image that system disks are cloned from.
type MacOSImage struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the image's source.
	Spec MacOSImageSpec `json:"spec"`
	// status says whether the source exists and can be cloned.
	// +optional
	Status MacOSImageStatus `json:"status,omitempty"`
}

// MacOSImageSpec names a golden image and describes what is in it.
type MacOSImageSpec struct {
	// source is where CDI clones the image from.
	Source ImageSource `json:"source"`
	// release is the macOS release the image holds, for example "14.6" or "sonoma".
	Release string `json:"release"`
	// boardID is the Apple board-id the image was installed for, for
	// example "Mac-7BA5B2D9E42DDD94". Informational.
	// +optional
	BoardID string `json:"boardID,omitempty"`
	// checksum of the image content, as "sha256:<64 hex digits>". Informational.
	// +optional
	Checksum string `json:"checksum,omitempty"`
	// promoteFrom is the install-session machine whose system disk becomes
	// the image: setting it shuts that machine's guest down, clones its
	// system disk into a new volume beside the DataSource, points the
	// DataSource at it, records the macOS version the agent reported, and
	// deletes the machine, releasing its identity. status.promotion says how
	// far it has come. Requires source.dataSource.
	// +optional
	PromoteFrom *NamespacedObjectReference `json:"promoteFrom,omitempty"`
}

// ImageSource is a CDI clone source. Exactly one member is set.
type ImageSource struct {
	// dataSource is a CDI DataSource.
	// +optional
	DataSource *NamespacedObjectReference `json:"dataSource,omitempty"`
	// pvc is a PersistentVolumeClaim.
	// +optional
	PVC *NamespacedObjectReference `json:"pvc,omitempty"`
	// recovery makes the image from Apple's recovery service instead of
	// from a disk someone already has: the controller fetches the release's
	// recovery image into a volume beside dataSource (which it requires),
	// install sessions boot it so a person installs macOS, and promoting
	// one points dataSource at the installed disk. Until then the image is
	// not Ready.
	// +optional
	Recovery *RecoverySource `json:"recovery,omitempty"`
}

// RecoverySource is what to ask Apple's recovery service for.
type RecoverySource struct {
	// release is the macOS release to fetch, by the name OSX-KVM's
	// fetch-macOS-v2.py gives it: high-sierra, mojave, catalina, big-sur,
	// monterey, ventura, sonoma, sequoia or tahoe. It must be the release
	// spec.release names.
	Release string `json:"release"`
	// boardID is the board the service is asked as, for example
	// "Mac-827FAC58A8FDFA22". The service answers each board with the
	// releases that board can run, so it must be a board of a model that
	// runs the release. Defaults to the board fetch-macOS-v2.py asks for
	// the release.
	// +optional
	BoardID string `json:"boardID,omitempty"`
}

// NamespacedObjectReference names an object in a namespace.
type NamespacedObjectReference struct {
	// namespace of the object.
	Namespace string `json:"namespace"`
	// name of the object.
	Name string `json:"name"`
}

// MacOSImageStatus reports whether an image can be cloned.
type MacOSImageStatus struct {
	// observedGeneration is the generation the controller last checked.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready is True when the source exists and is ready to
	// clone; RecoveryReady, for an image with source.recovery, is True once
	// the recovery image is fetched, verified and converted; Promoted
	// reports the last promotion.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
	// recovery reports the fetch of the recovery image.
	// +optional
	Recovery *RecoveryStatus `json:"recovery,omitempty"`
	// promotion reports the last promotion of an install session's disk.
	// +optional
	Promotion *PromotionStatus `json:"promotion,omitempty"`
	// macOSVersion is the macOS version the image's system runs, as the
	// guest agent of the machine it was promoted from reported it.
	// +optional
	MacOSVersion string `json:"macOSVersion,omitempty"`
}

// RecoveryStatus is how far the fetch of a recovery image has come.
type RecoveryStatus struct {
	// volumeName is the PersistentVolumeClaim, in the namespace of
	// spec.source.dataSource, that holds the recovery image as a raw disk.
	// +optional
	VolumeName string `json:"volumeName,omitempty"`
	// boardID is the board the service was asked as.
	// +optional
	BoardID string `json:"boardID,omitempty"`
	// product is the product the service answered with, for example
	// "041-88800".
	// +optional
	Product string `json:"product,omitempty"`
	// bytesDone is how much of the recovery image the current attempt has
	// downloaded.
	// +optional
	BytesDone int64 `json:"bytesDone,omitempty"`
	// bytesTotal is the size of the recovery image, as the service said.
	// +optional
	BytesTotal int64 `json:"bytesTotal,omitempty"`
	// imageSHA256 is the sha256 of the downloaded BaseSystem.dmg, verified
	// chunk by chunk against the chunklist the service signed.
	// +optional
	ImageSHA256 string `json:"imageSHA256,omitempty"`
	// attempts counts the fetches that failed in a row; each doubles the
	// wait before the next.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// nextAttemptTime is when the next fetch starts after a failure.
	// +optional
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`
}

// PromotionPhase is where a promotion is.
// +enum
type PromotionPhase string

// Phases of a promotion.
const (
	// PromotionStopping: the install session's guest is being shut down.
	PromotionStopping PromotionPhase = "Stopping"
	// PromotionCloning: its system disk is being cloned into the golden volume.
	PromotionCloning PromotionPhase = "Cloning"
	// PromotionSucceeded: the DataSource points at the golden volume.
	PromotionSucceeded PromotionPhase = "Succeeded"
	// PromotionFailed: see the Promoted condition.
	PromotionFailed PromotionPhase = "Failed"
)

// PromotionStatus is the last promotion of an install session's disk.
type PromotionStatus struct {
	// machine is the install session promoted from.
	Machine NamespacedObjectReference `json:"machine"`
	// phase of the promotion.
	// +optional
	Phase PromotionPhase `json:"phase,omitempty"`
	// volumeName is the golden PersistentVolumeClaim, in the DataSource's
	// namespace.
	// +optional
	VolumeName string `json:"volumeName,omitempty"`
	// completionTime is when the DataSource was pointed at the volume.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSImageList is a list of MacOSImage.
type MacOSImageList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []MacOSImage `json:"items"`
}

// ---------------------------------------------------------------------------
// MacOSIdentityPool

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSIdentityPool is a finite set of Apple identities of one Mac model.
// Identities join a pool by naming it; machines draw from the pool of their class.
type MacOSIdentityPool struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the identities the pool holds.
	Spec MacOSIdentityPoolSpec `json:"spec"`
	// status counts the pool's identities and the demand on them.
	// +optional
	Status MacOSIdentityPoolStatus `json:"status,omitempty"`
}

// MacOSIdentityPoolSpec describes a pool of identities.
type MacOSIdentityPoolSpec struct {
	// model is the SMBIOS model every identity of the pool is of, for
	// example "iMacPro1,1". Immutable.
	Model string `json:"model"`
}

// MacOSIdentityPoolStatus counts a pool's identities.
type MacOSIdentityPoolStatus struct {
	// total is the number of identities in the pool.
	// +optional
	Total int32 `json:"total"`
	// free is the number of identities no machine holds.
	// +optional
	Free int32 `json:"free"`
	// allocated is the number of identities held by a machine.
	// +optional
	Allocated int32 `json:"allocated"`
	// pending is the number of machines waiting for an identity from this pool.
	// +optional
	Pending int32 `json:"pending"`
	// conditions of the pool.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSIdentityPoolList is a list of MacOSIdentityPool.
type MacOSIdentityPoolList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []MacOSIdentityPool `json:"items"`
}

// ---------------------------------------------------------------------------
// MacOSIdentity

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSIdentity is one Apple identity: the serial numbers, UUID and network
// address a Mac is known by. Its values are unique across the fleet and it is
// held by at most one machine at a time. The spec is immutable.
type MacOSIdentity struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the identity's values. Immutable.
	Spec MacOSIdentitySpec `json:"spec"`
	// status says which machine holds the identity.
	// +optional
	Status MacOSIdentityStatus `json:"status,omitempty"`
}

// MacOSIdentitySpec holds the values of one Apple identity.
type MacOSIdentitySpec struct {
	// poolName is the MacOSIdentityPool the identity belongs to.
	PoolName string `json:"poolName"`
	// model is the SMBIOS model, for example "iMacPro1,1"; it must equal the pool's.
	Model string `json:"model"`
	// serialNumber is the 12-character system serial number.
	SerialNumber string `json:"serialNumber"`
	// boardSerialNumber is the 17-character main logic board serial (MLB).
	BoardSerialNumber string `json:"boardSerialNumber"`
	// systemUUID is the SMBIOS system UUID, upper-case.
	SystemUUID string `json:"systemUUID"`
	// macAddress is the primary network interface's address, with an Apple
	// OUI, as "AA:BB:CC:DD:EE:FF".
	MACAddress string `json:"macAddress"`
	// rom is the six bytes of the MAC address as 12 upper-case hex digits;
	// OpenCore presents it as the firmware ROM value.
	ROM string `json:"rom"`
}

// MacOSIdentityStatus says who holds an identity.
type MacOSIdentityStatus struct {
	// allocation names the machine that holds the identity; absent while free.
	// Written only by the apiserver, in the same transaction as the machine.
	// +optional
	Allocation *IdentityAllocation `json:"allocation,omitempty"`
	// conditions: Quarantined is True while another MacOSIdentity shares one
	// of this identity's values (only possible after a manual etcd edit); a
	// quarantined identity is never given to a machine, and one already held
	// stays with its machine. Written only by the apiserver's identity
	// ledger repair, which sets it False (reason Resolved) once a person has
	// deleted the duplicates. HeldOutsideLedger is True while a VM the
	// ledger does not record as the holder runs with the identity (after a
	// restore of an older snapshot); the identity is given to no machine
	// until the controller sets it False, once that VM is gone. It is the
	// one condition a write to macosidentities/status sets.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// IdentityAllocation names the machine holding an identity.
type IdentityAllocation struct {
	// machineNamespace is the namespace of the holding MacOSMachine.
	MachineNamespace string `json:"machineNamespace"`
	// machineName is the name of the holding MacOSMachine.
	MachineName string `json:"machineName"`
	// machineUID is the uid of the holding MacOSMachine.
	MachineUID string `json:"machineUID"`
	// allocatedTime is when the machine took the identity.
	// +optional
	AllocatedTime *metav1.Time `json:"allocatedTime,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSIdentityList is a list of MacOSIdentity.
type MacOSIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []MacOSIdentity `json:"items"`
}

// ---------------------------------------------------------------------------
// MacOSMachine

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSMachine is one macOS virtual machine: booted, identified, addressable
// and disposable. Deleting it stops the VM, reclaims its storage and gives its
// identity back.
type MacOSMachine struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says what machine to make.
	Spec MacOSMachineSpec `json:"spec"`
	// status is what DockerIOS observed of the machine.
	// +optional
	Status MacOSMachineStatus `json:"status,omitempty"`
}

// MacOSMachineSpec says what machine to make. It is immutable: a different
// machine is a new machine.
type MacOSMachineSpec struct {
	// className is the MacOSMachineClass giving the machine its shape.
	ClassName string `json:"className"`
	// imageName overrides the class's MacOSImage.
	// +optional
	ImageName string `json:"imageName,omitempty"`
	// poolName is the MacOSMachinePool the machine belongs to, if any. Set by
	// the pool controller on machines it makes.
	// +optional
	PoolName string `json:"poolName,omitempty"`
	// vmLabels are added to the KubeVirt VirtualMachine's instance, for
	// Services and network policies that select the machine's pod.
	// +optional
	VMLabels map[string]string `json:"vmLabels,omitempty"`
	// purpose is Workload (the default, when empty): a machine claims are
	// bound to; or Install: an install session, which boots its image's
	// recovery volume beside an empty system disk of the class's size so a
	// person installs macOS at the console. An install session holds an
	// identity like any machine, never joins a pool, is never bound, and
	// is never Ready by agent checks; promoting it (MacOSImage
	// spec.promoteFrom) makes its disk the image.
	// +optional
	Purpose MachinePurpose `json:"purpose,omitempty"`
}

// MachinePurpose is what a machine is for.
// +enum
type MachinePurpose string

// Purposes of a machine.
const (
	MachinePurposeWorkload MachinePurpose = "Workload"
	MachinePurposeInstall  MachinePurpose = "Install"
)

// MacOSMachinePhase is where a machine is in its life.
// +enum
type MacOSMachinePhase string

// Phases of a MacOSMachine. The phase is derived from the machine's
// conditions and owned objects; it is a summary, never the only record.
const (
	// MachinePending: waiting for an identity or for its class's prerequisites.
	MachinePending MacOSMachinePhase = "Pending"
	// MachineProvisioning: bootdisk and system disk are being made.
	MachineProvisioning MacOSMachinePhase = "Provisioning"
	// MachineStarting: the VM runs; the guest has not reported Ready yet.
	MachineStarting MacOSMachinePhase = "Starting"
	// MachineReady: the guest agent reports Ready.
	MachineReady MacOSMachinePhase = "Ready"
	// MachineTerminating: the machine is being torn down.
	MachineTerminating MacOSMachinePhase = "Terminating"
	// MachineFailed: the machine will not become Ready; see its conditions.
	MachineFailed MacOSMachinePhase = "Failed"
)

// Condition types of a MacOSMachine.
const (
	MachineIdentityAllocated     = "IdentityAllocated"
	MachineBootdiskReady         = "BootdiskReady"
	MachineSystemDiskReady       = "SystemDiskReady"
	MachineVirtualMachineRunning = "VirtualMachineRunning"
	MachineAgentReachable        = "AgentReachable"
	MachineGuestReady            = "GuestReady"
	MachineConditionReady        = "Ready"
	// MachineIdentityFenced is True while a machine that failed or is being
	// torn down keeps its identity because its VM may still run (its node
	// is lost, or its VirtualMachineInstance is not confirmed gone): the
	// identity is given back only once the VM is, so that no two running
	// VMs ever carry the same identity.
	MachineIdentityFenced = "IdentityFenced"
	// MachineReleased is True once the claim the machine served was
	// deleted. Written only by the apiserver, in the transaction that
	// deletes the claim, and never removed: a released machine has had a
	// workload on it, is never bound again, and is disposed of.
	MachineReleased = "Released"
)

// MachineTeardownFinalizer is put on every machine at create, so that its
// VM, volumes and identity are released in order before it goes.
const MachineTeardownFinalizer = "dockerios.io/teardown"

// MacOSMachineStatus is what DockerIOS observed of a machine.
type MacOSMachineStatus struct {
	// observedGeneration is the generation the controller last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// phase summarises the conditions.
	// +optional
	Phase MacOSMachinePhase `json:"phase,omitempty"`
	// conditions: IdentityAllocated, BootdiskReady, SystemDiskReady,
	// VirtualMachineRunning, AgentReachable, GuestReady, Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
	// identityRef names the MacOSIdentity the machine holds. Written only by
	// the apiserver's allocator; the identity's values are not copied here.
	// +optional
	IdentityRef *LocalObjectReference `json:"identityRef,omitempty"`
	// claimRef names the MacOSMachineClaim, in the machine's namespace, the
	// machine is bound to. Written only by the bind subresource.
	// +optional
	ClaimRef *ClaimReference `json:"claimRef,omitempty"`
	// classSnapshot is the class's spec as it was when the machine was
	// created, recorded by the apiserver in the write that creates the
	// machine and never changed after: the machine is made from it, so
	// editing the class changes only machines made afterwards.
	// +optional
	ClassSnapshot *ClassSnapshot `json:"classSnapshot,omitempty"`
	// virtualMachineName is the KubeVirt VirtualMachine (and its instance)
	// in the machine's namespace.
	// +optional
	VirtualMachineName string `json:"virtualMachineName,omitempty"`
	// nodeName is the node the virtual machine runs on.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// addresses the machine is reached at.
	// +optional
	// +listType=atomic
	Addresses []MachineAddress `json:"addresses,omitempty"`
	// agent is the last report of the guest agent.
	// +optional
	Agent *AgentReport `json:"agent,omitempty"`
}

// ClassSnapshot is a MacOSMachineClass's spec at one moment.
type ClassSnapshot struct {
	// generation of the class the spec was taken at.
	Generation int64 `json:"generation"`
	// spec of the class at that generation.
	Spec MacOSMachineClassSpec `json:"spec"`
}

// LocalObjectReference names an object by name alone.
type LocalObjectReference struct {
	// name of the object.
	Name string `json:"name"`
}

// ClaimReference names a claim, with its uid so a recreated claim of the
// same name is not mistaken for it.
type ClaimReference struct {
	// name of the MacOSMachineClaim.
	Name string `json:"name"`
	// uid of the MacOSMachineClaim.
	UID string `json:"uid"`
}

// MachineAddressType says which network an address is on.
// +enum
type MachineAddressType string

// Address types of a machine.
const (
	// MachineAddressPod is the address on the pod network, for workloads.
	MachineAddressPod MachineAddressType = "PodNetwork"
	// MachineAddressAgent is the address on the agent network.
	MachineAddressAgent MachineAddressType = "AgentNetwork"
)

// MachineAddress is one address of a machine.
type MachineAddress struct {
	// type of the address: PodNetwork or AgentNetwork.
	Type MachineAddressType `json:"type"`
	// address, an IPv4 or IPv6 address.
	Address string `json:"address"`
}

// AgentStage is how far the guest has come towards accepting work.
// +enum
type AgentStage string

// Stages the guest agent reports.
const (
	AgentStageBooted         AgentStage = "Booted"
	AgentStageSessionStarted AgentStage = "SessionStarted"
	AgentStageProvisioning   AgentStage = "Provisioning"
	AgentStageReady          AgentStage = "Ready"
	AgentStageDegraded       AgentStage = "Degraded"
)

// AgentReport is what the guest agent last said.
type AgentReport struct {
	// stage the guest agent reported.
	// +optional
	Stage AgentStage `json:"stage,omitempty"`
	// lastSeenTime is when the agent last answered, as last written: while
	// nothing else in the status changes it is rewritten only about every
	// ten minutes (each rewrite is an etcd write and a watch event to every
	// client). Whether the agent answers now is the AgentReachable
	// condition.
	// +optional
	LastSeenTime *metav1.Time `json:"lastSeenTime,omitempty"`
	// version of the agent.
	// +optional
	Version string `json:"version,omitempty"`
	// osVersion is the macOS version the guest runs, as sw_vers
	// -productVersion prints it, for example "14.6.1".
	// +optional
	OSVersion string `json:"osVersion,omitempty"`
	// diskTotalBytes is the size of the system volume.
	// +optional
	DiskTotalBytes *int64 `json:"diskTotalBytes,omitempty"`
	// diskFreeBytes is the free space on the system volume.
	// +optional
	DiskFreeBytes *int64 `json:"diskFreeBytes,omitempty"`
	// message is the agent's explanation of its stage, such as a failing check.
	// +optional
	Message string `json:"message,omitempty"`
	// observedTime is when the agent computed the status it last answered
	// with, by the guest's clock.
	// +optional
	ObservedTime *metav1.Time `json:"observedTime,omitempty"`
	// lastProgressTime is when the controller last saw the agent's status
	// move on (a new observedTime), by the controller's clock: an agent
	// that keeps answering with a status its poll loop stopped updating is
	// as hung as one that does not answer.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSMachineList is a list of MacOSMachine.
type MacOSMachineList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []MacOSMachine `json:"items"`
}

// ---------------------------------------------------------------------------
// MacOSMachinePool

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSMachinePool keeps a number of Ready, unbound machines of one class
// warm, so that a claim is answered in seconds rather than the minutes a Mac
// takes to boot.
type MacOSMachinePool struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says how many machines to keep warm.
	Spec MacOSMachinePoolSpec `json:"spec"`
	// status counts the pool's machines.
	// +optional
	Status MacOSMachinePoolStatus `json:"status,omitempty"`
}

// MacOSMachinePoolSpec says how many machines of which class to keep warm.
type MacOSMachinePoolSpec struct {
	// className is the MacOSMachineClass of the pool's machines. Immutable.
	ClassName string `json:"className"`
	// replicas is the number of Ready, unbound machines to keep. Defaults to 1.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// maxMachines caps the pool's machines, bound and unbound together.
	// Unset means no cap.
	// +optional
	MaxMachines *int32 `json:"maxMachines,omitempty"`
	// template is what the pool's machines are made from.
	// +optional
	Template MacOSMachineTemplate `json:"template,omitempty"`
}

// MacOSMachineTemplate is what a pool's machines are made from.
type MacOSMachineTemplate struct {
	// metadata of the pool's machines: labels and annotations.
	// +optional
	Metadata MachineTemplateMetadata `json:"metadata,omitempty"`
	// spec of the pool's machines.
	// +optional
	Spec MachineTemplateSpec `json:"spec,omitempty"`
}

// MachineTemplateMetadata is the metadata a pool puts on its machines.
type MachineTemplateMetadata struct {
	// labels put on each machine; claims select machines by them.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// annotations put on each machine.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// MachineTemplateSpec is the part of a machine's spec a pool lets users set;
// the class and pool come from the pool itself.
type MachineTemplateSpec struct {
	// imageName overrides the class's MacOSImage.
	// +optional
	ImageName string `json:"imageName,omitempty"`
	// vmLabels are added to each machine's VirtualMachine instance.
	// +optional
	VMLabels map[string]string `json:"vmLabels,omitempty"`
}

// MachinePoolLabel is put on every machine a pool makes; the pool's scale
// selector selects on it.
const MachinePoolLabel = "dockerios.io/pool"

// ClaimUIDLabel is put on the machine made for one claim that names a
// class, with the claim's UID, when the machine is created; it never
// changes after (the controller disposes of a machine whose label names no
// claim of the machine's name).
const ClaimUIDLabel = "dockerios.io/claim-uid"

// MacOSMachinePoolStatus counts a pool's machines.
type MacOSMachinePoolStatus struct {
	// observedGeneration is the generation the controller last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// replicas is the number of unbound machines of the pool, Ready or not.
	// +optional
	Replicas int32 `json:"replicas"`
	// readyReplicas is the number of unbound machines that are Ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// boundMachines is the number of machines bound to a claim.
	// +optional
	BoundMachines int32 `json:"boundMachines"`
	// selector is the label selector of the pool's machines, in the string
	// form the scale subresource reports.
	// +optional
	Selector string `json:"selector,omitempty"`
	// conditions of the pool.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSMachinePoolList is a list of MacOSMachinePool.
type MacOSMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []MacOSMachinePool `json:"items"`
}

// ---------------------------------------------------------------------------
// MacOSMachineClaim

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSMachineClaim asks for a Mac. It is answered from a warm pool or, when
// it names a class, by a machine made for it; either way it is Bound to one
// machine, which goes away when the claim does.
type MacOSMachineClaim struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says what machine is wanted.
	Spec MacOSMachineClaimSpec `json:"spec"`
	// status says which machine answers the claim.
	// +optional
	Status MacOSMachineClaimStatus `json:"status,omitempty"`
}

// MacOSMachineClaimSpec says what machine is wanted. Exactly one of poolName
// and className is set. Immutable.
type MacOSMachineClaimSpec struct {
	// poolName asks for a warm machine of this MacOSMachinePool.
	// +optional
	PoolName string `json:"poolName,omitempty"`
	// className asks for a machine made for this claim from this MacOSMachineClass.
	// +optional
	ClassName string `json:"className,omitempty"`
	// selector narrows the machines that may answer the claim by their labels.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// MacOSMachineClaimPhase is where a claim is.
// +enum
type MacOSMachineClaimPhase string

// Phases of a MacOSMachineClaim.
const (
	// ClaimPending: no machine answers the claim yet.
	ClaimPending MacOSMachineClaimPhase = "Pending"
	// ClaimBound: status.machineName answers the claim.
	ClaimBound MacOSMachineClaimPhase = "Bound"
	// ClaimLost: the bound machine failed or went away.
	ClaimLost MacOSMachineClaimPhase = "Lost"
)

// MacOSMachineClaimStatus says which machine answers a claim.
type MacOSMachineClaimStatus struct {
	// phase of the claim: Pending, Bound or Lost.
	// +optional
	Phase MacOSMachineClaimPhase `json:"phase,omitempty"`
	// machineName is the MacOSMachine, in the claim's namespace, bound to the
	// claim. Written only by the bind subresource.
	// +optional
	MachineName string `json:"machineName,omitempty"`
	// boundTime is when the claim was bound.
	// +optional
	BoundTime *metav1.Time `json:"boundTime,omitempty"`
	// conditions of the claim.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSMachineClaimList is a list of MacOSMachineClaim.
type MacOSMachineClaimList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []MacOSMachineClaim `json:"items"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MacOSMachineBinding is the body of POST macosmachineclaims/{name}/bind:
// it binds the claim named in the URL to one machine, in the claim's
// namespace. The claim and the machine change together or not at all.
type MacOSMachineBinding struct {
	metav1.TypeMeta `json:",inline"`
	// metadata.name, when set, must be the claim's name.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// machineName is the MacOSMachine to bind the claim to.
	MachineName string `json:"machineName"`
	// machineNamespace, when set, must be the claim's namespace: a claim
	// is only ever bound to a machine of its own namespace.
	// +optional
	MachineNamespace string `json:"machineNamespace,omitempty"`
}
