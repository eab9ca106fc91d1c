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

// Package validation checks dockerios.io objects (internal form) and
// reports every problem with its field path, so the apiserver can answer
// 422 Invalid with something a person can act on. It never reads storage:
// rules that need other objects (uniqueness, allocation, binding) belong to
// the registry's storage.
package validation

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/identity"
)

// Names that end up in label values or in the names of KubeVirt objects and
// Services derived from them (machines, pools, classes, identity pools) must
// be DNS-1123 labels; the rest may be DNS subdomains, like most Kubernetes
// objects.
var (
	// ValidateLabelName validates names of objects whose name becomes a label value.
	ValidateLabelName = apimachineryvalidation.NameIsDNSLabel
	// ValidateSubdomainName validates names of the other objects.
	ValidateSubdomainName = apimachineryvalidation.NameIsDNSSubdomain
)

// Bounds on a machine's shape. They reject values no macOS guest can run
// with; what a cluster can actually schedule is for the scheduler to say.
const (
	maxCPUCores       = 256
	minDisplayWidth   = 640
	minDisplayHeight  = 480
	maxDisplaySide    = 8192
	maxStartTimeout   = 24 * time.Hour
	maxReleaseLength  = 63
	maxImageRefLength = 512
	// maxCPUNameLength bounds CPU model and feature names: KubeVirt makes
	// them the name part of node label keys.
	maxCPUNameLength = 63
)

var minRecommendedMemory = resource.MustParse("4Gi")

// minMemory is the least memory KubeVirt's admission lets a VirtualMachine
// have; a class asking less could make no machine.
var minMemory = resource.MustParse("1M")

var (
	// cpuNamePattern is a label name's form: KubeVirt makes the CPU model
	// and the names of required and forbidden features node label keys on
	// the launcher pod (cpu-model.node.kubevirt.io/<model>,
	// cpu-feature.node.kubevirt.io/<name>). Every libvirt name fits it.
	cpuNamePattern   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$`)
	boardIDPattern   = regexp.MustCompile(`^Mac-[0-9A-F]{16}$`)
	checksumPattern  = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	releasePattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 ._-]*$`)
	imageRefIllegals = " \t\r\n"

	cpuFeaturePolicies = sets.New(
		dockerio.CPUFeaturePolicyForce, dockerio.CPUFeaturePolicyRequire, dockerio.CPUFeaturePolicyOptional,
		dockerio.CPUFeaturePolicyDisable, dockerio.CPUFeaturePolicyForbid)
	diskBuses     = sets.New(dockerio.DiskBusNVMe, dockerio.DiskBusSATA, dockerio.DiskBusVirtio)
	machinePhases = sets.New(dockerio.MachinePending, dockerio.MachineProvisioning, dockerio.MachineStarting, dockerio.MachineReady, dockerio.MachineTerminating, dockerio.MachineFailed)
	claimPhases   = sets.New(dockerio.ClaimPending, dockerio.ClaimBound, dockerio.ClaimLost)
	agentStages   = sets.New(dockerio.AgentStageBooted, dockerio.AgentStageSessionStarted, dockerio.AgentStageProvisioning, dockerio.AgentStageReady, dockerio.AgentStageDegraded)
	addressTypes  = sets.New(dockerio.MachineAddressPod, dockerio.MachineAddressAgent)
	// reservedLabels are set by DockerIOS on machines, never by a pool's
	// template: what each means.
	reservedLabels = map[string]string{
		dockerio.MachinePoolLabel: "is set by DockerIOS on every machine of a pool",
		dockerio.ClaimUIDLabel:    "is set by DockerIOS on the machine made for a class claim, never on a pool's",
	}
)

// ---------------------------------------------------------------------------
// MacOSMachineClass

// ValidateMacOSMachineClass validates a class on create.
func ValidateMacOSMachineClass(c *dockerio.MacOSMachineClass) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&c.ObjectMeta, false, ValidateLabelName, field.NewPath("metadata"))
	allErrs = append(allErrs, validateMachineClassSpec(&c.Spec, field.NewPath("spec"))...)
	return allErrs
}

// ValidateMacOSMachineClassUpdate validates a class update. The identity
// pool and SMBIOS model are fixed: existing machines hold identities drawn
// under them.
func ValidateMacOSMachineClassUpdate(c, old *dockerio.MacOSMachineClass) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	allErrs = append(allErrs, validateMachineClassSpec(&c.Spec, spec)...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(c.Spec.IdentityPoolName, old.Spec.IdentityPoolName, spec.Child("identityPoolName"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(c.Spec.SMBIOSModel, old.Spec.SMBIOSModel, spec.Child("smbiosModel"))...)
	return allErrs
}

// ValidateMacOSMachineClassStatusUpdate validates a write to a class's status.
func ValidateMacOSMachineClassStatusUpdate(c, old *dockerio.MacOSMachineClass) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	status := field.NewPath("status")
	allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(c.Status.ObservedGeneration, status.Child("observedGeneration"))...)
	allErrs = append(allErrs, metav1validation.ValidateConditions(c.Status.Conditions, status.Child("conditions"))...)
	if h := c.Status.StorageHoldBack; h != nil {
		hb := status.Child("storageHoldBack")
		if h.Failures < 1 {
			allErrs = append(allErrs, field.Invalid(hb.Child("failures"), h.Failures, "must be at least 1: a hold-back follows a failed clone"))
		}
		if h.Probe != "" {
			if ns, name, ok := strings.Cut(h.Probe, "/"); !ok || ns == "" || name == "" {
				allErrs = append(allErrs, field.Invalid(hb.Child("probe"), h.Probe, "must be <namespace>/<machine>"))
			}
		}
	}
	return allErrs
}

func validateMachineClassSpec(s *dockerio.MacOSMachineClassSpec, fld *field.Path) field.ErrorList {
	var allErrs field.ErrorList

	cpu := fld.Child("cpu")
	if s.CPU.Cores < 1 || s.CPU.Cores > maxCPUCores {
		allErrs = append(allErrs, field.Invalid(cpu.Child("cores"), s.CPU.Cores, fmt.Sprintf("must be between 1 and %d", maxCPUCores)))
	}
	if s.CPU.Model == "" {
		allErrs = append(allErrs, field.Required(cpu.Child("model"), ""))
	} else if len(s.CPU.Model) > maxCPUNameLength {
		allErrs = append(allErrs, field.TooLong(cpu.Child("model"), "", maxCPUNameLength))
	} else if !cpuNamePattern.MatchString(s.CPU.Model) {
		allErrs = append(allErrs, field.Invalid(cpu.Child("model"), s.CPU.Model, "must be a libvirt CPU model name such as Penryn or host-passthrough (letters, digits, '-', '_' or '.', beginning and ending with a letter or digit)"))
	}
	seenFeatures := sets.New[string]()
	for i, f := range s.CPU.Features {
		p := cpu.Child("features").Index(i)
		switch {
		case f.Name == "":
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		case len(f.Name) > maxCPUNameLength:
			allErrs = append(allErrs, field.TooLong(p.Child("name"), "", maxCPUNameLength))
		case !cpuNamePattern.MatchString(f.Name):
			allErrs = append(allErrs, field.Invalid(p.Child("name"), f.Name, "must be a libvirt CPU feature name such as avx2 (letters, digits, '-', '_' or '.', beginning and ending with a letter or digit)"))
		case seenFeatures.Has(f.Name):
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), f.Name))
		}
		seenFeatures.Insert(f.Name)
		if !cpuFeaturePolicies.Has(f.Policy) {
			allErrs = append(allErrs, field.NotSupported(p.Child("policy"), f.Policy, sets.List(cpuFeaturePolicies)))
		}
	}

	if s.Memory == nil {
		allErrs = append(allErrs, field.Required(fld.Child("memory"), ""))
	} else {
		allErrs = append(allErrs, validatePositiveQuantity(*s.Memory, fld.Child("memory"))...)
		if s.Memory.Sign() > 0 && s.Memory.Cmp(minMemory) < 0 {
			allErrs = append(allErrs, field.Invalid(fld.Child("memory"), s.Memory.String(),
				"must be at least "+minMemory.String()+": KubeVirt refuses a VirtualMachine with less"))
		}
	}

	disk := fld.Child("systemDisk")
	allErrs = append(allErrs, validatePositiveQuantity(s.SystemDisk.Size, disk.Child("size"))...)
	if sc := s.SystemDisk.StorageClassName; sc != nil {
		allErrs = append(allErrs, validateReferenceName(*sc, ValidateSubdomainName, disk.Child("storageClassName"))...)
	}
	if !diskBuses.Has(s.SystemDisk.Bus) {
		allErrs = append(allErrs, field.NotSupported(disk.Child("bus"), s.SystemDisk.Bus, sets.List(diskBuses)))
	}

	allErrs = append(allErrs, validateRequiredReference(s.ImageName, ValidateSubdomainName, fld.Child("imageName"))...)
	allErrs = append(allErrs, validateRequiredReference(s.IdentityPoolName, ValidateLabelName, fld.Child("identityPoolName"))...)
	allErrs = append(allErrs, validateModel(s.SMBIOSModel, fld.Child("smbiosModel"))...)

	display := fld.Child("display")
	if s.Display.Width < minDisplayWidth || s.Display.Width > maxDisplaySide {
		allErrs = append(allErrs, field.Invalid(display.Child("width"), s.Display.Width, fmt.Sprintf("must be between %d and %d", minDisplayWidth, maxDisplaySide)))
	}
	if s.Display.Height < minDisplayHeight || s.Display.Height > maxDisplaySide {
		allErrs = append(allErrs, field.Invalid(display.Child("height"), s.Display.Height, fmt.Sprintf("must be between %d and %d", minDisplayHeight, maxDisplaySide)))
	}

	if n := s.AgentNetwork; n != nil {
		p := fld.Child("agentNetwork")
		allErrs = append(allErrs, validateNetworkName(n.NetworkName, p.Child("networkName"))...)
		for _, msg := range utilvalidation.IsValidPortNum(int(n.Port)) {
			allErrs = append(allErrs, field.Invalid(p.Child("port"), n.Port, msg))
		}
	}

	seenDevices := sets.New[string]()
	for i, d := range s.HostDevices {
		p := fld.Child("hostDevices").Index(i)
		allErrs = append(allErrs, validateRequiredReference(d.Name, ValidateLabelName, p.Child("name"))...)
		if seenDevices.Has(d.Name) {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), d.Name))
		}
		seenDevices.Insert(d.Name)
		if d.DeviceName == "" {
			allErrs = append(allErrs, field.Required(p.Child("deviceName"), "the resource name the device plugin advertises"))
		} else {
			allErrs = append(allErrs, validateDeviceResourceName(d.DeviceName, p.Child("deviceName"))...)
		}
	}

	if s.StartTimeout == nil {
		allErrs = append(allErrs, field.Required(fld.Child("startTimeout"), ""))
	} else if d := s.StartTimeout.Duration; d <= 0 || d > maxStartTimeout {
		allErrs = append(allErrs, field.Invalid(fld.Child("startTimeout"), s.StartTimeout.Duration.String(), fmt.Sprintf("must be more than 0 and at most %s", maxStartTimeout)))
	}
	if s.AgentUnresponsiveTimeout != nil {
		if d := s.AgentUnresponsiveTimeout.Duration; d <= 0 || d > maxStartTimeout {
			allErrs = append(allErrs, field.Invalid(fld.Child("agentUnresponsiveTimeout"), d.String(), fmt.Sprintf("must be more than 0 and at most %s", maxStartTimeout)))
		}
	}
	if s.NodeLostGracePeriod != nil {
		if d := s.NodeLostGracePeriod.Duration; d < 0 || d > maxStartTimeout {
			allErrs = append(allErrs, field.Invalid(fld.Child("nodeLostGracePeriod"), d.String(), fmt.Sprintf("must be at least 0 (fail at once) and at most %s", maxStartTimeout)))
		}
	}

	allErrs = append(allErrs, validateImageRef(s.BootdiskBuilderImage, fld.Child("bootdiskBuilderImage"))...)
	return allErrs
}

// WarningsForMacOSMachineClass returns what is legal but unlikely to work,
// so that a person hears about it when they write the class rather than
// when a machine fails to boot.
func WarningsForMacOSMachineClass(c *dockerio.MacOSMachineClass) []string {
	var warnings []string
	if m := c.Spec.Memory; m != nil && m.Cmp(minRecommendedMemory) < 0 {
		warnings = append(warnings, fmt.Sprintf("spec.memory: %s is below the %s recent macOS releases need to boot", m.String(), minRecommendedMemory.String()))
	}
	if c.Spec.CPU.Cores == 1 {
		warnings = append(warnings, "spec.cpu.cores: macOS with a single core is very slow to boot and may exceed startTimeout")
	}
	return warnings
}

// ---------------------------------------------------------------------------
// MacOSImage

// ValidateMacOSImage validates an image on create.
func ValidateMacOSImage(img *dockerio.MacOSImage) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&img.ObjectMeta, false, ValidateSubdomainName, field.NewPath("metadata"))
	allErrs = append(allErrs, validateImageSpec(&img.Spec, field.NewPath("spec"))...)
	return allErrs
}

// ValidateMacOSImageUpdate validates an image update. Pointing an image at a
// new source is allowed: it affects machines cloned afterwards.
func ValidateMacOSImageUpdate(img, old *dockerio.MacOSImage) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&img.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateImageSpec(&img.Spec, field.NewPath("spec"))...)
	return allErrs
}

// ValidateMacOSImageStatusUpdate validates a write to an image's status.
func ValidateMacOSImageStatusUpdate(img, old *dockerio.MacOSImage) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&img.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	status := field.NewPath("status")
	allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(img.Status.ObservedGeneration, status.Child("observedGeneration"))...)
	allErrs = append(allErrs, metav1validation.ValidateConditions(img.Status.Conditions, status.Child("conditions"))...)
	allErrs = append(allErrs, validateImageStatus(&img.Status, status)...)
	return allErrs
}

func validateImageSpec(s *dockerio.MacOSImageSpec, fld *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	src := fld.Child("source")
	switch {
	case s.Source.DataSource == nil && s.Source.PVC == nil:
		allErrs = append(allErrs, field.Required(src, "exactly one of dataSource or pvc"))
	case s.Source.DataSource != nil && s.Source.PVC != nil:
		allErrs = append(allErrs, field.Forbidden(src.Child("pvc"), "may not be set together with dataSource"))
	case s.Source.DataSource != nil:
		allErrs = append(allErrs, validateNamespacedReference(*s.Source.DataSource, src.Child("dataSource"))...)
	default:
		allErrs = append(allErrs, validateNamespacedReference(*s.Source.PVC, src.Child("pvc"))...)
	}
	switch {
	case s.Release == "":
		allErrs = append(allErrs, field.Required(fld.Child("release"), "the macOS release, such as 14.6 or sonoma"))
	case len(s.Release) > maxReleaseLength:
		allErrs = append(allErrs, field.TooLong(fld.Child("release"), "", maxReleaseLength))
	case !releasePattern.MatchString(s.Release):
		allErrs = append(allErrs, field.Invalid(fld.Child("release"), s.Release, "must be letters, digits, spaces, '.', '_' or '-'"))
	}
	if s.BoardID != "" && !boardIDPattern.MatchString(s.BoardID) {
		allErrs = append(allErrs, field.Invalid(fld.Child("boardID"), s.BoardID, "must be an Apple board-id such as Mac-7BA5B2D9E42DDD94"))
	}
	if s.Checksum != "" && !checksumPattern.MatchString(s.Checksum) {
		allErrs = append(allErrs, field.Invalid(fld.Child("checksum"), s.Checksum, "must be sha256: followed by 64 lower-case hex digits"))
	}
	allErrs = append(allErrs, validateGoldenImage(s, fld)...)
	return allErrs
}

// ---------------------------------------------------------------------------
// MacOSIdentityPool

// ValidateMacOSIdentityPool validates an identity pool on create.
func ValidateMacOSIdentityPool(p *dockerio.MacOSIdentityPool) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&p.ObjectMeta, false, ValidateLabelName, field.NewPath("metadata"))
	allErrs = append(allErrs, validateModel(p.Spec.Model, field.NewPath("spec", "model"))...)
	return allErrs
}

// ValidateMacOSIdentityPoolUpdate validates a pool update. The model is
// fixed: every identity in the pool was made for it.
func ValidateMacOSIdentityPoolUpdate(p, old *dockerio.MacOSIdentityPool) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&p.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateModel(p.Spec.Model, field.NewPath("spec", "model"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(p.Spec.Model, old.Spec.Model, field.NewPath("spec", "model"))...)
	return allErrs
}

// ValidateMacOSIdentityPoolStatusUpdate validates a write to a pool's status.
func ValidateMacOSIdentityPoolStatusUpdate(p, old *dockerio.MacOSIdentityPool) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&p.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	status := field.NewPath("status")
	for name, v := range map[string]int32{"total": p.Status.Total, "free": p.Status.Free, "allocated": p.Status.Allocated, "pending": p.Status.Pending} {
		allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(v), status.Child(name))...)
	}
	allErrs = append(allErrs, metav1validation.ValidateConditions(p.Status.Conditions, status.Child("conditions"))...)
	return allErrs
}

// ---------------------------------------------------------------------------
// MacOSIdentity

// ValidateMacOSIdentity validates an identity on create. Values are expected
// in canonical form (the strategy canonicalizes before validating), so that
// uniqueness is decided on one spelling of each value.
func ValidateMacOSIdentity(id *dockerio.MacOSIdentity) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&id.ObjectMeta, false, ValidateSubdomainName, field.NewPath("metadata"))
	allErrs = append(allErrs, validateIdentitySpec(&id.Spec, field.NewPath("spec"))...)
	return allErrs
}

// ValidateMacOSIdentityUpdate validates an identity update: the spec is
// immutable, because a machine may already boot with these values.
func ValidateMacOSIdentityUpdate(id, old *dockerio.MacOSIdentity) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&id.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(id.Spec, old.Spec, field.NewPath("spec"))...)
	return allErrs
}

// ValidateMacOSIdentityStatusUpdate validates a write to an identity's status.
func ValidateMacOSIdentityStatusUpdate(id, old *dockerio.MacOSIdentity) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&id.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	if a := id.Status.Allocation; a != nil {
		p := field.NewPath("status", "allocation")
		if a.MachineNamespace == "" {
			allErrs = append(allErrs, field.Required(p.Child("machineNamespace"), ""))
		}
		if a.MachineName == "" {
			allErrs = append(allErrs, field.Required(p.Child("machineName"), ""))
		}
		if a.MachineUID == "" {
			allErrs = append(allErrs, field.Required(p.Child("machineUID"), ""))
		}
	}
	allErrs = append(allErrs, metav1validation.ValidateConditions(id.Status.Conditions, field.NewPath("status", "conditions"))...)
	return allErrs
}

func validateIdentitySpec(s *dockerio.MacOSIdentitySpec, fld *field.Path) field.ErrorList {
	allErrs := validateRequiredReference(s.PoolName, ValidateLabelName, fld.Child("poolName"))
	allErrs = append(allErrs, validateModel(s.Model, fld.Child("model"))...)
	for _, v := range []struct {
		path  string
		value string
		check func(string) error
	}{
		{"serialNumber", s.SerialNumber, identity.ValidateSerialNumber},
		{"boardSerialNumber", s.BoardSerialNumber, identity.ValidateBoardSerialNumber},
		{"systemUUID", s.SystemUUID, identity.ValidateSystemUUID},
		{"macAddress", s.MACAddress, identity.ValidateMACAddress},
		{"rom", s.ROM, func(rom string) error { return identity.ValidateROM(rom, s.MACAddress) }},
	} {
		if v.value == "" {
			allErrs = append(allErrs, field.Required(fld.Child(v.path), ""))
		} else if err := v.check(v.value); err != nil {
			allErrs = append(allErrs, field.Invalid(fld.Child(v.path), v.value, err.Error()))
		}
	}
	return allErrs
}

// ---------------------------------------------------------------------------
// MacOSMachine

// ValidateMacOSMachine validates a machine on create.
func ValidateMacOSMachine(m *dockerio.MacOSMachine) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&m.ObjectMeta, true, ValidateLabelName, field.NewPath("metadata"))
	allErrs = append(allErrs, validateMachineSpec(&m.Spec, field.NewPath("spec"))...)
	allErrs = append(allErrs, validateMachinePoolLabel(m)...)
	if _, ok := m.Labels[dockerio.ClaimUIDLabel]; ok && m.Spec.PoolName != "" {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("metadata", "labels").Key(dockerio.ClaimUIDLabel),
			"is set by DockerIOS on the machine made for a class claim; a pool's machine is never one"))
	}
	if _, ok := m.Labels[dockerio.ClaimUIDLabel]; ok && m.Spec.Purpose == dockerio.MachinePurposeInstall {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("metadata", "labels").Key(dockerio.ClaimUIDLabel),
			"is set by DockerIOS on the machine made for a class claim; an install session (spec.purpose Install) is never bound to a claim"))
	}
	return allErrs
}

// validateMachinePoolLabel holds a machine's dockerios.io/pool label to
// its spec.poolName: the pool counts and disposes of its machines by the
// label, the apiserver binds them by spec.poolName, and a machine whose
// two disagreed (the label removed by hand) could be bound for its pool
// and then, released, never be disposed of, its identity held for good.
func validateMachinePoolLabel(m *dockerio.MacOSMachine) field.ErrorList {
	fld := field.NewPath("metadata", "labels").Key(dockerio.MachinePoolLabel)
	v, ok := m.Labels[dockerio.MachinePoolLabel]
	switch {
	case m.Spec.PoolName == "" && ok:
		return field.ErrorList{field.Forbidden(fld, "is set by DockerIOS on a pool's machines, to spec.poolName; this machine is of no pool")}
	case m.Spec.PoolName != "" && v != m.Spec.PoolName:
		return field.ErrorList{field.Invalid(fld, v, fmt.Sprintf("must name the machine's pool, spec.poolName (%s): the pool counts its machines by this label", m.Spec.PoolName))}
	}
	return nil
}

// ValidateMacOSMachineUpdate validates a machine update: the spec is
// immutable, since a different machine is a new machine.
func ValidateMacOSMachineUpdate(m, old *dockerio.MacOSMachine) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&m.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(m.Spec, old.Spec, field.NewPath("spec"))...)
	oldLabel, hadLabel := old.Labels[dockerio.MachinePoolLabel]
	if label, hasLabel := m.Labels[dockerio.MachinePoolLabel]; label != oldLabel || hasLabel != hadLabel {
		// Only a change is checked: a machine stored before the rule with
		// a label that disagrees must still take the writes that let it
		// go (its finalizer's removal, the garbage collector's).
		allErrs = append(allErrs, validateMachinePoolLabel(m)...)
	}
	// The claim-uid label ties a machine to the class claim it was made
	// for, at create, for good: the controller disposes of a machine whose
	// label names no claim of its name, and the bind subresource binds a
	// class claim only to the machine carrying its UID. Added, changed or
	// removed later, it would have a machine (a bound one too) torn down,
	// or a claim bound to a machine not made for it.
	oldUID, hadUID := old.Labels[dockerio.ClaimUIDLabel]
	if uid, hasUID := m.Labels[dockerio.ClaimUIDLabel]; uid != oldUID || hasUID != hadUID {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("metadata", "labels").Key(dockerio.ClaimUIDLabel),
			"is set by DockerIOS when it creates the machine for a class claim, and cannot be added, changed or removed"))
	}
	return allErrs
}

// ValidateMacOSMachineStatusUpdate validates a write to a machine's status.
// Failed is final: the machine's identity was released when it failed.
func ValidateMacOSMachineStatusUpdate(m, old *dockerio.MacOSMachine) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&m.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	s, fld := &m.Status, field.NewPath("status")
	allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(s.ObservedGeneration, fld.Child("observedGeneration"))...)
	if s.Phase != "" && !machinePhases.Has(s.Phase) {
		allErrs = append(allErrs, field.NotSupported(fld.Child("phase"), s.Phase, sets.List(machinePhases)))
	}
	if old.Status.Phase == dockerio.MachineFailed && s.Phase != dockerio.MachineFailed {
		allErrs = append(allErrs, field.Forbidden(fld.Child("phase"), "a Failed machine has given back its identity and stays Failed; delete it and create another"))
	}
	allErrs = append(allErrs, metav1validation.ValidateConditions(s.Conditions, fld.Child("conditions"))...)
	for i, a := range s.Addresses {
		p := fld.Child("addresses").Index(i)
		if !addressTypes.Has(a.Type) {
			allErrs = append(allErrs, field.NotSupported(p.Child("type"), a.Type, sets.List(addressTypes)))
		}
		if _, err := netip.ParseAddr(a.Address); err != nil {
			allErrs = append(allErrs, field.Invalid(p.Child("address"), a.Address, "must be an IPv4 or IPv6 address"))
		}
	}
	if s.NodeName != "" {
		allErrs = append(allErrs, validateReferenceName(s.NodeName, ValidateSubdomainName, fld.Child("nodeName"))...)
	}
	if s.VirtualMachineName != "" {
		allErrs = append(allErrs, validateReferenceName(s.VirtualMachineName, ValidateLabelName, fld.Child("virtualMachineName"))...)
	}
	if a := s.Agent; a != nil {
		p := fld.Child("agent")
		if a.Stage != "" && !agentStages.Has(a.Stage) {
			allErrs = append(allErrs, field.NotSupported(p.Child("stage"), a.Stage, sets.List(agentStages)))
		}
		if a.DiskTotalBytes != nil {
			allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(*a.DiskTotalBytes, p.Child("diskTotalBytes"))...)
		}
		if a.DiskFreeBytes != nil {
			allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(*a.DiskFreeBytes, p.Child("diskFreeBytes"))...)
		}
		if a.DiskTotalBytes != nil && a.DiskFreeBytes != nil && *a.DiskFreeBytes > *a.DiskTotalBytes {
			allErrs = append(allErrs, field.Invalid(p.Child("diskFreeBytes"), *a.DiskFreeBytes, "may not exceed diskTotalBytes"))
		}
	}
	return allErrs
}

func validateMachineSpec(s *dockerio.MacOSMachineSpec, fld *field.Path) field.ErrorList {
	allErrs := validateRequiredReference(s.ClassName, ValidateLabelName, fld.Child("className"))
	if s.ImageName != "" {
		allErrs = append(allErrs, validateReferenceName(s.ImageName, ValidateSubdomainName, fld.Child("imageName"))...)
	}
	if s.PoolName != "" {
		allErrs = append(allErrs, validateReferenceName(s.PoolName, ValidateLabelName, fld.Child("poolName"))...)
	}
	allErrs = append(allErrs, metav1validation.ValidateLabels(s.VMLabels, fld.Child("vmLabels"))...)
	switch s.Purpose {
	case "", dockerio.MachinePurposeWorkload:
	case dockerio.MachinePurposeInstall:
		// An install session boots its image's recovery volume so a person
		// installs macOS at the console; promoting it makes its disk that
		// image. Which image is never left to the class: the session is
		// made for one image, explicitly.
		if s.ImageName == "" {
			allErrs = append(allErrs, field.Required(fld.Child("imageName"),
				"an install session (spec.purpose Install) names the MacOSImage it installs, whose source.recovery it boots and which promoting it replaces"))
		}
		if s.PoolName != "" {
			allErrs = append(allErrs, field.Forbidden(fld.Child("poolName"),
				"an install session never joins a pool: it is never bound to a claim, and a pool would count it as a machine to serve one"))
		}
	default:
		allErrs = append(allErrs, field.NotSupported(fld.Child("purpose"), s.Purpose, machinePurposes))
	}
	return allErrs
}

// machinePurposes are the values spec.purpose takes ("" is Workload).
var machinePurposes = []string{string(dockerio.MachinePurposeWorkload), string(dockerio.MachinePurposeInstall)}

// ---------------------------------------------------------------------------
// MacOSMachinePool

// ValidateMacOSMachinePool validates a pool on create.
func ValidateMacOSMachinePool(p *dockerio.MacOSMachinePool) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&p.ObjectMeta, true, ValidateLabelName, field.NewPath("metadata"))
	allErrs = append(allErrs, validateMachinePoolSpec(&p.Spec, field.NewPath("spec"))...)
	return allErrs
}

// ValidateMacOSMachinePoolUpdate validates a pool update. The class is
// fixed: a pool of another class is another pool.
func ValidateMacOSMachinePoolUpdate(p, old *dockerio.MacOSMachinePool) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&p.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateMachinePoolSpec(&p.Spec, field.NewPath("spec"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(p.Spec.ClassName, old.Spec.ClassName, field.NewPath("spec", "className"))...)
	return allErrs
}

// ValidateMacOSMachinePoolStatusUpdate validates a write to a pool's status.
func ValidateMacOSMachinePoolStatusUpdate(p, old *dockerio.MacOSMachinePool) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&p.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	s, fld := &p.Status, field.NewPath("status")
	allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(s.ObservedGeneration, fld.Child("observedGeneration"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(s.Replicas), fld.Child("replicas"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(s.ReadyReplicas), fld.Child("readyReplicas"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(s.BoundMachines), fld.Child("boundMachines"))...)
	if s.ReadyReplicas > s.Replicas {
		allErrs = append(allErrs, field.Invalid(fld.Child("readyReplicas"), s.ReadyReplicas, "may not exceed replicas"))
	}
	allErrs = append(allErrs, metav1validation.ValidateConditions(s.Conditions, fld.Child("conditions"))...)
	return allErrs
}

func validateMachinePoolSpec(s *dockerio.MacOSMachinePoolSpec, fld *field.Path) field.ErrorList {
	allErrs := validateRequiredReference(s.ClassName, ValidateLabelName, fld.Child("className"))
	if s.Replicas == nil {
		allErrs = append(allErrs, field.Required(fld.Child("replicas"), ""))
	} else {
		allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(*s.Replicas), fld.Child("replicas"))...)
	}
	if s.MaxMachines != nil {
		allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(*s.MaxMachines), fld.Child("maxMachines"))...)
		if s.Replicas != nil && *s.Replicas > *s.MaxMachines {
			allErrs = append(allErrs, field.Invalid(fld.Child("replicas"), *s.Replicas, fmt.Sprintf("may not exceed maxMachines (%d)", *s.MaxMachines)))
		}
	}
	tmpl := fld.Child("template")
	meta := tmpl.Child("metadata")
	allErrs = append(allErrs, metav1validation.ValidateLabels(s.Template.Metadata.Labels, meta.Child("labels"))...)
	for k := range s.Template.Metadata.Labels {
		if why, ok := reservedLabels[k]; ok {
			allErrs = append(allErrs, field.Forbidden(meta.Child("labels").Key(k), why))
		}
	}
	allErrs = append(allErrs, apimachineryvalidation.ValidateAnnotations(s.Template.Metadata.Annotations, meta.Child("annotations"))...)
	if s.Template.Spec.ImageName != "" {
		allErrs = append(allErrs, validateReferenceName(s.Template.Spec.ImageName, ValidateSubdomainName, tmpl.Child("spec", "imageName"))...)
	}
	allErrs = append(allErrs, metav1validation.ValidateLabels(s.Template.Spec.VMLabels, tmpl.Child("spec", "vmLabels"))...)
	return allErrs
}

// ---------------------------------------------------------------------------
// MacOSMachineClaim

// ValidateMacOSMachineClaim validates a claim on create.
func ValidateMacOSMachineClaim(c *dockerio.MacOSMachineClaim) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&c.ObjectMeta, true, ValidateSubdomainName, field.NewPath("metadata"))
	allErrs = append(allErrs, validateMachineClaimSpec(&c.Spec, field.NewPath("spec"))...)
	return allErrs
}

// ValidateMacOSMachineClaimUpdate validates a claim update: the spec is
// immutable, since the claim may already be bound on its terms.
func ValidateMacOSMachineClaimUpdate(c, old *dockerio.MacOSMachineClaim) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(c.Spec, old.Spec, field.NewPath("spec"))...)
	return allErrs
}

// ValidateMacOSMachineClaimStatusUpdate validates a write to a claim's status.
func ValidateMacOSMachineClaimStatusUpdate(c, old *dockerio.MacOSMachineClaim) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	fld := field.NewPath("status")
	if c.Status.Phase != "" && !claimPhases.Has(c.Status.Phase) {
		allErrs = append(allErrs, field.NotSupported(fld.Child("phase"), c.Status.Phase, sets.List(claimPhases)))
	}
	switch {
	case c.Status.Phase == dockerio.ClaimBound && (c.Status.MachineName == "" || old.Status.Phase != dockerio.ClaimBound):
		allErrs = append(allErrs, field.Invalid(fld.Child("phase"), c.Status.Phase, "a claim becomes Bound only through the bind subresource, which sets status.machineName"))
	case c.Status.Phase == dockerio.ClaimPending && c.Status.MachineName != "":
		allErrs = append(allErrs, field.Invalid(fld.Child("phase"), c.Status.Phase, fmt.Sprintf("the claim was bound to MacOSMachine %s; a claim that was bound is never Pending again", c.Status.MachineName)))
	case old.Status.Phase == dockerio.ClaimLost && c.Status.Phase != dockerio.ClaimLost:
		// A claim made Lost left its pool's queue in that write; made
		// Pending again it would wait in no queue, overtaken by every
		// newer claim.
		allErrs = append(allErrs, field.Invalid(fld.Child("phase"), c.Status.Phase, "a Lost claim stays Lost; delete it and create another to ask for a machine again"))
	case c.Status.Phase == dockerio.ClaimLost && old.Status.Phase == dockerio.ClaimBound:
		// The machine would stay bound to a claim that says it has none.
		allErrs = append(allErrs, field.Invalid(fld.Child("phase"), c.Status.Phase, fmt.Sprintf("a bound claim becomes Lost only when its machine goes, in the write that deletes MacOSMachine %s; delete the machine, or the claim to release it", c.Status.MachineName)))
	}
	allErrs = append(allErrs, metav1validation.ValidateConditions(c.Status.Conditions, fld.Child("conditions"))...)
	return allErrs
}

func validateMachineClaimSpec(s *dockerio.MacOSMachineClaimSpec, fld *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch {
	case s.PoolName == "" && s.ClassName == "":
		allErrs = append(allErrs, field.Required(fld, "exactly one of poolName or className"))
	case s.PoolName != "" && s.ClassName != "":
		allErrs = append(allErrs, field.Forbidden(fld.Child("className"), "may not be set together with poolName"))
	case s.PoolName != "":
		allErrs = append(allErrs, validateReferenceName(s.PoolName, ValidateLabelName, fld.Child("poolName"))...)
	default:
		allErrs = append(allErrs, validateReferenceName(s.ClassName, ValidateLabelName, fld.Child("className"))...)
	}
	if s.Selector != nil {
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, fld.Child("selector"))...)
	}
	return allErrs
}

// ValidateMacOSMachineBinding validates the body of a bind of the claim
// namespace/claimName.
func ValidateMacOSMachineBinding(b *dockerio.MacOSMachineBinding, namespace, claimName string) field.ErrorList {
	allErrs := validateRequiredReference(b.MachineName, ValidateLabelName, field.NewPath("machineName"))
	if b.MachineNamespace != "" && b.MachineNamespace != namespace {
		allErrs = append(allErrs, field.Invalid(field.NewPath("machineNamespace"), b.MachineNamespace,
			fmt.Sprintf("must be the claim's namespace, %s: a claim is bound only to a machine of its own namespace", namespace)))
	}
	if b.Name != "" && b.Name != claimName {
		allErrs = append(allErrs, field.Invalid(field.NewPath("metadata", "name"), b.Name, fmt.Sprintf("must be the claim's name, %s", claimName)))
	}
	return allErrs
}

// ---------------------------------------------------------------------------
// shared

func validateRequiredReference(name string, nameFn apimachineryvalidation.ValidateNameFunc, fld *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	return validateReferenceName(name, nameFn, fld)
}

func validateReferenceName(name string, nameFn apimachineryvalidation.ValidateNameFunc, fld *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range nameFn(name, false) {
		allErrs = append(allErrs, field.Invalid(fld, name, msg))
	}
	return allErrs
}

func validateNamespacedReference(ref dockerio.NamespacedObjectReference, fld *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	allErrs = append(allErrs, validateRequiredReference(ref.Namespace, ValidateLabelName, fld.Child("namespace"))...)
	allErrs = append(allErrs, validateRequiredReference(ref.Name, ValidateSubdomainName, fld.Child("name"))...)
	return allErrs
}

// validateNetworkName accepts Multus's two spellings: "name" and "namespace/name".
func validateNetworkName(name string, fld *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "a NetworkAttachmentDefinition, as name or namespace/name")}
	}
	ns, n, found := strings.Cut(name, "/")
	if !found {
		return validateReferenceName(name, ValidateSubdomainName, fld)
	}
	var allErrs field.ErrorList
	for _, msg := range ValidateLabelName(ns, false) {
		allErrs = append(allErrs, field.Invalid(fld, name, "namespace: "+msg))
	}
	for _, msg := range ValidateSubdomainName(n, false) {
		allErrs = append(allErrs, field.Invalid(fld, name, "name: "+msg))
	}
	return allErrs
}

func validateModel(model string, fld *field.Path) field.ErrorList {
	if model == "" {
		return field.ErrorList{field.Required(fld, "an SMBIOS model such as iMacPro1,1")}
	}
	if err := identity.ValidateModel(model); err != nil {
		return field.ErrorList{field.Invalid(fld, model, err.Error())}
	}
	return nil
}

func validatePositiveQuantity(q resource.Quantity, fld *field.Path) field.ErrorList {
	if q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(fld, q.String(), "must be greater than zero")}
	}
	return nil
}

// validateDeviceResourceName checks that name is an extended resource name,
// as a device plugin advertises it (domain/name, the domain not
// kubernetes.io's): KubeVirt requests it on the launcher pod, whose
// validation refuses any other name, or reads one without a domain as a
// standard resource such as cpu or memory. The rules are Kubernetes'
// (IsExtendedResourceName in pkg/apis/core/v1/helper).
func validateDeviceResourceName(name string, fld *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(name) {
		allErrs = append(allErrs, field.Invalid(fld, name, msg))
	}
	if len(allErrs) > 0 {
		return allErrs
	}
	switch {
	case !strings.Contains(name, "/"):
		return field.ErrorList{field.Invalid(fld, name, "must be a device plugin's extended resource name, domain/name such as nvidia.com/GP102GL_Tesla_P40: without a domain it is a standard resource (cpu, memory) or none")}
	case strings.Contains(name, corev1.ResourceDefaultNamespacePrefix):
		return field.ErrorList{field.Invalid(fld, name, "is in the kubernetes.io domain, which is Kubernetes' own; a device plugin's resource name has its vendor's domain")}
	case strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix):
		return field.ErrorList{field.Invalid(fld, name, "may not start with "+corev1.DefaultResourceRequestsPrefix+", which Kubernetes reserves for quota")}
	}
	for _, msg := range utilvalidation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix + name) {
		allErrs = append(allErrs, field.Invalid(fld, name, "is not an extended resource name: with the "+corev1.DefaultResourceRequestsPrefix+" prefix Kubernetes gives it in quotas, "+msg))
	}
	return allErrs
}

func validateImageRef(ref string, fld *field.Path) field.ErrorList {
	switch {
	case ref == "":
		return nil
	case len(ref) > maxImageRefLength:
		return field.ErrorList{field.TooLong(fld, "", maxImageRefLength)}
	case strings.ContainsAny(ref, imageRefIllegals):
		return field.ErrorList{field.Invalid(fld, ref, "must be a container image reference without whitespace")}
	}
	return nil
}
