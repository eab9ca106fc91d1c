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

// Package machine is the MacOSMachine reconciler: it makes, per machine, the
// agent-token and identity Secrets, the bootdisk PersistentVolumeClaim and
// Job, the system disk DataVolume and the KubeVirt VirtualMachine, derives
// the machine's conditions and phase from what it observes of them on every
// pass, and tears them down in order when the machine is deleted.
//
// This file holds the desired objects: pure functions of the machine, its
// class, image and identity, so the same inputs always give the same
// objects and a reconcile after a crash makes exactly what the one before
// would have.
package machine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/bootdisk"
	"github.com/dockerios/dockerios/sidecar-hook/annotations"
)

// Labels on every object the controller makes for a machine.
const (
	// MachineUIDLabel ties an object to its machine (by UID, so a
	// recreated machine of the same name never adopts its predecessor's
	// objects). The same key the bootdisk Job carries.
	MachineUIDLabel = bootdisk.MachineUIDLabel
	// MachineNameLabel is informational (names can exceed a label value;
	// those are shortened like Names.Base).
	MachineNameLabel = "dockerios.io/machine"
	ManagedByLabel   = "app.kubernetes.io/managed-by"
	ManagedByValue   = "dockerios-controller"
)

// Volume, disk and interface names inside the VirtualMachine.
const (
	BootdiskVolume   = "bootdisk"
	SystemDiskVolume = "system"
	// RecoveryVolume is an install session's recovery disk.
	RecoveryVolume = "recovery"
	// TabletInput is the install session's USB tablet, so the pointer of
	// a VNC console (virtctl vnc) lands where it points.
	TabletInput    = "tablet"
	PodInterface   = "default"
	AgentInterface = "agent"
	// TokenSecretKey is the key of the agent token in its Secret.
	TokenSecretKey = bootdisk.DefaultTokenSecretKey
)

// BootdiskSize is the bootdisk PVC's request: the builder's image is a
// few hundred MiB of EFI system partition.
var BootdiskSize = resource.MustParse("1Gi")

// Names are the names of a machine's objects in its namespace.
type Names struct {
	// Base is the machine's name when it fits a DNS label with room for
	// the suffixes below, else a prefix of it and a hash of the whole.
	// The VirtualMachine is named Base: KubeVirt makes it a hostname.
	Base           string
	TokenSecret    string
	IdentitySecret string
	BootdiskPVC    string
	SystemDisk     string
	// RecoveryDisk is an install session's DataVolume holding its image's
	// recovery image.
	RecoveryDisk   string
	VirtualMachine string
}

// longestSuffix is the longest suffix Names adds ("-system-" and eight
// characters of the UID).
const longestSuffix = len("-system-") + 8

// NamesFor returns machine's object names.
func NamesFor(m *v1alpha1.MacOSMachine) Names {
	base := m.Name
	if max := validation.DNS1123LabelMaxLength - longestSuffix; len(base) > max {
		sum := sha256.Sum256([]byte(m.Name))
		h := "-" + hex.EncodeToString(sum[:])[:8]
		base = strings.TrimRight(base[:max-len(h)], "-.") + h
	}
	// The system disk may outlive its machine (preserveDiskOnFailure), so
	// its name carries the machine's UID: a later machine of the same name
	// never meets its predecessor's disk.
	uid := strings.ReplaceAll(string(m.UID), "-", "")
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return Names{Base: base, TokenSecret: base + "-agent", IdentitySecret: base + "-identity", BootdiskPVC: base + "-bootdisk",
		SystemDisk: base + "-system-" + uid, RecoveryDisk: base + "-recovery", VirtualMachine: base}
}

// Settings are what the controller decides for every machine, from its
// flags. The images and pull secrets may instead come from a PodTemplate
// (Reconciler.Images), read as each object is made.
type Settings struct {
	// BootdiskImage is the default builder image (a class may name its own).
	BootdiskImage string
	// HookSidecarImage is the DockerIOS domain hook's image.
	HookSidecarImage string
	// ImagePullSecrets are named in each bootdisk Job's pod. Pods can only
	// use pull secrets of their own namespace: each must exist in every
	// namespace machines are made in.
	ImagePullSecrets []corev1.LocalObjectReference
	// OSKSecretName is the Secret, in each machine's namespace, holding
	// Apple's SMC key under "osk" (see sidecar-hook/annotations.OSKSecretLabel).
	OSKSecretName string
	// TerminationGracePeriodSeconds is how long an ACPI shutdown may take
	// before KubeVirt stops the VM hard.
	TerminationGracePeriodSeconds int64
}

func labelsFor(m *v1alpha1.MacOSMachine) map[string]string {
	return map[string]string{
		MachineUIDLabel:  string(m.UID),
		MachineNameLabel: NamesFor(m).Base,
		ManagedByLabel:   ManagedByValue,
	}
}

// objectMeta is the metadata of a machine's object: its labels, and no
// owner reference. The machine's finalizer takes its objects apart; an
// owner reference would add the garbage collector, which deletes an
// object as soon as its owner answers 404 — and after a restore of an
// older ledger, or an apiserver started on empty storage, a running
// machine's MacOSMachine answers 404. The collector would then stop the VM
// and delete its disks on a guess; instead, the ledger guard reports such
// objects and a person decides (docs/operators/backup-restore.md).
func objectMeta(m *v1alpha1.MacOSMachine, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: m.Namespace, Labels: labelsFor(m)}
}

// TokenSecret is the machine's agent token Secret. The token is chosen once,
// by the caller, and never changes while the Secret exists.
func TokenSecret(m *v1alpha1.MacOSMachine, token []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: objectMeta(m, NamesFor(m).TokenSecret),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		Data:       map[string][]byte{TokenSecretKey: token},
	}
}

// IdentitySecret holds the values of the identity the machine holds, for
// the bootdisk builder (pkg/bootdisk.IdentitySecretData). They travel in a
// Secret because everything else of the machine's in its namespace (the
// Job, its pods, Events) is readable by users who may not read the
// identity. It is derived from the identity alone, so a lost one is made
// again exactly as it was.
func IdentitySecret(m *v1alpha1.MacOSMachine, id *v1alpha1.MacOSIdentity) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: objectMeta(m, NamesFor(m).IdentitySecret),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		Data:       bootdisk.IdentitySecretData(id),
	}
}

// BootdiskPVC is the volume the builder writes the OpenCore image to and
// the VirtualMachine boots from (KubeVirt boots disk.img on a file-system
// PVC).
func BootdiskPVC(m *v1alpha1.MacOSMachine, class *v1alpha1.MacOSMachineClass) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: objectMeta(m, NamesFor(m).BootdiskPVC),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: class.Spec.SystemDisk.StorageClassName,
			VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: BootdiskSize}},
		},
	}
}

// BootdiskJob is the builder Job (pkg/bootdisk's contract).
func BootdiskJob(m *v1alpha1.MacOSMachine, id *v1alpha1.MacOSIdentity, class *v1alpha1.MacOSMachineClass, s Settings) (*batchv1.Job, error) {
	image := class.Spec.BootdiskBuilderImage
	if image == "" {
		image = s.BootdiskImage
	}
	n := NamesFor(m)
	job, err := bootdisk.Job(m, id, class, bootdisk.JobOptions{Image: image, OutputPVCName: n.BootdiskPVC, TokenSecretName: n.TokenSecret,
		IdentitySecretName: n.IdentitySecret, ImagePullSecrets: s.ImagePullSecrets})
	if err != nil {
		return nil, err
	}
	for k, v := range labelsFor(m) {
		job.Labels[k] = v
	}
	return job, nil
}

// SystemDisk is the DataVolume cloning the image into the class's storage.
func SystemDisk(m *v1alpha1.MacOSMachine, class *v1alpha1.MacOSMachineClass, image *v1alpha1.MacOSImage) (*cdiv1.DataVolume, error) {
	spec := cdiv1.DataVolumeSpec{Storage: &cdiv1.StorageSpec{
		StorageClassName: class.Spec.SystemDisk.StorageClassName,
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: class.Spec.SystemDisk.Size}},
	}}
	switch src := image.Spec.Source; {
	case src.DataSource != nil:
		spec.SourceRef = &cdiv1.DataVolumeSourceRef{Kind: cdiv1.DataVolumeDataSource, Namespace: ptr.To(src.DataSource.Namespace), Name: src.DataSource.Name}
	case src.PVC != nil:
		spec.Source = &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: src.PVC.Namespace, Name: src.PVC.Name}}
	default:
		return nil, fmt.Errorf("MacOSImage %s has no source", image.Name)
	}
	dv := &cdiv1.DataVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume"},
		ObjectMeta: objectMeta(m, NamesFor(m).SystemDisk),
		Spec:       spec,
	}
	return dv, nil
}

// InstallSystemDisk is an install session's system disk: a blank
// DataVolume of the class's size and StorageClass, which the person at the
// console installs macOS onto and promoting the session clones.
func InstallSystemDisk(m *v1alpha1.MacOSMachine, class *v1alpha1.MacOSMachineClass) *cdiv1.DataVolume {
	return &cdiv1.DataVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume"},
		ObjectMeta: objectMeta(m, NamesFor(m).SystemDisk),
		Spec: cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{
				StorageClassName: class.Spec.SystemDisk.StorageClassName,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: class.Spec.SystemDisk.Size}},
			},
		},
	}
}

// RecoveryDisk is an install session's recovery disk: a DataVolume in the
// machine's namespace cloning the PersistentVolumeClaim the image's
// controller fetched the recovery image into (status.recovery.volumeName,
// in the namespace of spec.source.dataSource). Its size is the source's:
// CDI takes it from the source PVC when the storage request names none.
func RecoveryDisk(m *v1alpha1.MacOSMachine, class *v1alpha1.MacOSMachineClass, image *v1alpha1.MacOSImage) (*cdiv1.DataVolume, error) {
	if image.Spec.Source.DataSource == nil || image.Status.Recovery == nil || image.Status.Recovery.VolumeName == "" {
		return nil, fmt.Errorf("MacOSImage %s has no recovery volume yet", image.Name)
	}
	return &cdiv1.DataVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume"},
		ObjectMeta: objectMeta(m, NamesFor(m).RecoveryDisk),
		Spec: cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{
				Namespace: image.Spec.Source.DataSource.Namespace, Name: image.Status.Recovery.VolumeName}},
			Storage: &cdiv1.StorageSpec{StorageClassName: class.Spec.SystemDisk.StorageClassName},
		},
	}, nil
}

// VirtualMachine is the KubeVirt VM of the machine. running says whether
// KubeVirt should run it (false stops it with an ACPI shutdown).
//
// An install session's VM boots the same OpenCore bootdisk first (macOS
// boots under QEMU only through it; it boots the recovery, its only
// bootable entry while the system disk is blank),
// then has the recovery disk (SATA) and the blank system disk (the
// class's bus), and a graphics device and USB tablet for virtctl vnc.
func VirtualMachine(m *v1alpha1.MacOSMachine, class *v1alpha1.MacOSMachineClass, id *v1alpha1.MacOSIdentity, s Settings, running bool) (*kubevirtv1.VirtualMachine, error) {
	n := NamesFor(m)
	c := class.Spec
	hook, err := annotations.HookSidecarsValue(annotations.HookSidecar{Image: s.HookSidecarImage, ImagePullPolicy: "IfNotPresent"})
	if err != nil {
		return nil, err
	}
	bus := c.SystemDisk.Bus
	if bus == "" {
		bus = v1alpha1.DefaultSystemDiskBus
	}
	// KubeVirt has no NVMe bus: the disk is defined on SATA and the hook
	// moves it (annotations.SystemDiskBus).
	kvBus := kubevirtv1.DiskBusSATA
	if bus == v1alpha1.DiskBusVirtio {
		kvBus = kubevirtv1.DiskBusVirtio
	}

	templateLabels := map[string]string{}
	for k, v := range m.Spec.VMLabels {
		templateLabels[k] = v
	}
	for k, v := range labelsFor(m) {
		templateLabels[k] = v
	}
	templateLabels[annotations.OSKSecretLabel] = s.OSKSecretName

	var features []kubevirtv1.CPUFeature
	for _, f := range c.CPU.Features {
		features = append(features, kubevirtv1.CPUFeature{Name: f.Name, Policy: string(f.Policy)})
	}
	memory := resource.MustParse(v1alpha1.DefaultMemory)
	if c.Memory != nil {
		memory = *c.Memory
	}
	cores := uint32(c.CPU.Cores)
	if cores == 0 {
		cores = v1alpha1.DefaultCPUCores
	}

	// The identity's MAC goes on the interface macOS sees first as en0
	// when there is no agent network, else on the agent interface: the
	// ROM in the bootdisk is that MAC's bytes.
	ifaces := []kubevirtv1.Interface{{Name: PodInterface, Model: "e1000e",
		InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}}
	networks := []kubevirtv1.Network{{Name: PodInterface, NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}}
	if an := c.AgentNetwork; an != nil {
		ifaces = append(ifaces, kubevirtv1.Interface{Name: AgentInterface, Model: "e1000e", MacAddress: id.Spec.MACAddress,
			InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}})
		networks = append(networks, kubevirtv1.Network{Name: AgentInterface,
			NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: an.NetworkName}}})
	} else {
		ifaces[0].MacAddress = id.Spec.MACAddress
	}

	var gpus []kubevirtv1.GPU
	var hostDevices []kubevirtv1.HostDevice
	for _, d := range c.HostDevices {
		if d.GPU {
			gpus = append(gpus, kubevirtv1.GPU{Name: d.Name, DeviceName: d.DeviceName})
		} else {
			hostDevices = append(hostDevices, kubevirtv1.HostDevice{Name: d.Name, DeviceName: d.DeviceName})
		}
	}

	strategy := kubevirtv1.RunStrategyHalted
	if running {
		strategy = kubevirtv1.RunStrategyAlways
	}
	disks := []kubevirtv1.Disk{
		{Name: BootdiskVolume, BootOrder: ptr.To[uint](1),
			DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSATA}}},
		{Name: SystemDiskVolume, BootOrder: ptr.To[uint](2),
			DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kvBus}}},
	}
	volumes := []kubevirtv1.Volume{
		{Name: BootdiskVolume, VolumeSource: kubevirtv1.VolumeSource{
			PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: n.BootdiskPVC}}}},
		{Name: SystemDiskVolume, VolumeSource: kubevirtv1.VolumeSource{
			DataVolume: &kubevirtv1.DataVolumeSource{Name: n.SystemDisk}}},
	}
	var autoattachGraphics *bool
	var inputs []kubevirtv1.Input
	if Installing(m) {
		disks = []kubevirtv1.Disk{disks[0],
			{Name: RecoveryVolume, BootOrder: ptr.To[uint](2),
				DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSATA}}},
			{Name: SystemDiskVolume, BootOrder: ptr.To[uint](3),
				DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kvBus}}},
		}
		volumes = []kubevirtv1.Volume{volumes[0],
			{Name: RecoveryVolume, VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: n.RecoveryDisk}}},
			volumes[1]}
		autoattachGraphics = ptr.To(true)
		inputs = []kubevirtv1.Input{{Name: TabletInput, Type: kubevirtv1.InputTypeTablet, Bus: kubevirtv1.InputBusUSB}}
	}

	vm := &kubevirtv1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: objectMeta(m, n.VirtualMachine),
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &strategy,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: templateLabels,
					Annotations: map[string]string{
						annotations.HookSidecarsAnnotation: hook,
						annotations.AppleSMC:               "true",
						annotations.SystemDisk:             SystemDiskVolume,
						annotations.SystemDiskBus:          string(bus),
					},
				},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Hostname:                      n.Base,
					TerminationGracePeriodSeconds: ptr.To(s.TerminationGracePeriodSeconds),
					Domain: kubevirtv1.DomainSpec{
						Machine: &kubevirtv1.Machine{Type: "q35"},
						Firmware: &kubevirtv1.Firmware{
							UUID:       types.UID(strings.ToLower(id.Spec.SystemUUID)),
							Serial:     id.Spec.SerialNumber,
							Bootloader: &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: ptr.To(false)}},
						},
						CPU:       &kubevirtv1.CPU{Cores: cores, Model: c.CPU.Model, Features: features},
						Memory:    &kubevirtv1.Memory{Guest: &memory},
						Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: memory}},
						Devices: kubevirtv1.Devices{
							Disks:                    disks,
							AutoattachGraphicsDevice: autoattachGraphics,
							Inputs:                   inputs,
							Interfaces:               ifaces,
							GPUs:                     gpus,
							HostDevices:              hostDevices,
						},
					},
					Networks: networks,
					Volumes:  volumes,
				},
			},
		},
	}
	return vm, nil
}

// Installing says whether m is an install session (spec.purpose Install).
func Installing(m *v1alpha1.MacOSMachine) bool {
	return m.Spec.Purpose == v1alpha1.MachinePurposeInstall
}
