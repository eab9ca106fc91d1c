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

// Package annotations is the contract between the DockerIOS controller and
// the DockerIOS KubeVirt hook sidecar: the VirtualMachineInstance annotations
// the controller writes and the sidecar reads, and the KubeVirt annotation
// that asks virt-controller to run the sidecar at all. It has no dependencies
// so the controller can import it freely.
package annotations

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Prefix starts every annotation the hook reads. A VMI with no annotation
// under it passes through the hook untouched; an annotation under it that
// the hook does not know fails the VM start (a controller newer than its
// hook must not be silently ignored).
const Prefix = "hook.dockerios.io/"

const (
	// AppleSMC, set to "true", adds Apple's System Management Controller
	// to the machine: the QEMU arguments `-device isa-applesmc,osk=<OSK>`
	// and `-smbios type=2`, with the OSK read by the hook from its
	// --osk-file. "false" (or absent) adds nothing. Any other value is an
	// error. macOS does not boot without it.
	AppleSMC = Prefix + "apple-smc"

	// SystemDisk names the VMI disk (spec.domain.devices.disks[].name)
	// macOS is installed on. The hook moves that disk onto the bus
	// SystemDiskBus asks for. KubeVirt names the disk's libvirt alias
	// "ua-<name>"; a name with no such disk in the domain is an error.
	SystemDisk = Prefix + "system-disk"

	// SystemDiskBus is the bus SystemDisk is moved to: "nvme" (what Apple
	// ships, and the default when SystemDisk is set without it), "sata" or
	// "virtio". Any other value is an error; so is SystemDiskBus without
	// SystemDisk.
	SystemDiskBus = Prefix + "system-disk-bus"

	// CPU, when set, is appended as `-cpu <value>` to QEMU's command line,
	// overriding the CPU libvirt derived from the VMI (QEMU uses the last
	// -cpu). It is the whole QEMU -cpu argument, e.g.
	// "Haswell-noTSX,vendor=GenuineIntel,+invtsc,kvm=on": the model,
	// vendor and flags a machine class needs that KubeVirt cannot express.
	// The topology stays KubeVirt's (-smp is not touched). It must be
	// printable ASCII without spaces, at most MaxCPULength characters.
	CPU = Prefix + "cpu"
)

// MaxCPULength bounds the CPU annotation.
const MaxCPULength = 1024

// Known lists every annotation under Prefix the hook understands.
var Known = []string{AppleSMC, CPU, SystemDisk, SystemDiskBus}

// Buses the system disk can be moved to.
const (
	BusNVMe   = "nvme"
	BusSATA   = "sata"
	BusVirtio = "virtio"
)

// Buses lists the values SystemDiskBus accepts.
var Buses = []string{BusNVMe, BusSATA, BusVirtio}

// DefaultSystemDiskBus is the bus used when SystemDisk is set without
// SystemDiskBus.
const DefaultSystemDiskBus = BusNVMe

// IsKnown reports whether key is one of the hook's annotations.
func IsKnown(key string) bool { return slices.Contains(Known, key) }

// HookSidecarsAnnotation is KubeVirt's annotation that makes
// virt-controller add hook sidecar containers to a VMI's virt-launcher
// pod. It needs KubeVirt's "Sidecar" feature gate.
const HookSidecarsAnnotation = "hooks.kubevirt.io/hookSidecars"

// Defaults for the sidecar's own paths; the binary's flags default to them.
const (
	// HookSocketsDir is where virt-controller mounts each sidecar's own
	// directory of the pod's shared hook-sockets emptyDir.
	HookSocketsDir = "/var/run/kubevirt-hooks"
	// SocketName is the sidecar's socket inside HookSocketsDir.
	SocketName = "dockerios.sock"
	// DefaultOSKFile is where the sidecar reads the Apple SMC key.
	DefaultOSKFile = "/var/run/dockerios/osk/osk"

	// OSKSecretLabel, on a VMI (KubeVirt copies VMI labels to its
	// virt-launcher pod), names the Secret in the VMI's namespace whose key
	// OSKSecretKey holds Apple's SMC key. The DockerIOS launcher pod webhook
	// (pkg/launcherwebhook) mounts that key, read-only, into the hook's
	// sidecar container alone, at the file the hook's --osk-file names.
	// It is a label, not an annotation, so the webhook's objectSelector
	// sends kube-apiserver only these pods: no other pod's creation waits on
	// DockerIOS. Secret names used here must fit a label value (63
	// characters).
	OSKSecretLabel = Prefix + "osk-secret"
	// OSKSecretKey is the key of the OSK Secret holding the 64-character
	// key (a trailing newline is allowed).
	OSKSecretKey = "osk"
)

// HookSidecar configures the sidecar entry of HookSidecarsAnnotation.
type HookSidecar struct {
	// Image of the DockerIOS sidecar hook (required).
	Image string
	// ImagePullPolicy, e.g. "IfNotPresent"; empty leaves KubeVirt's default.
	ImagePullPolicy string
	// Args are extra arguments for the sidecar binary. HookSidecarsValue
	// adds --osk-file=DefaultOSKFile unless they set --osk-file.
	Args []string
}

// hookSidecarJSON mirrors the fields of KubeVirt's pkg/hooks.HookSidecar
// the controller sets.
type hookSidecarJSON struct {
	Image           string   `json:"image"`
	ImagePullPolicy string   `json:"imagePullPolicy,omitempty"`
	Args            []string `json:"args"`
}

// HookSidecarsValue is the value of HookSidecarsAnnotation that runs the
// DockerIOS hook as a sidecar of a VMI, e.g.
//
//	[{"image":"registry.example/dockerios-sidecar-hook:v1","imagePullPolicy":"IfNotPresent",
//	  "args":["--osk-file=/var/run/dockerios/osk/osk"]}]
//
// The --osk-file argument is always there: it is how the DockerIOS launcher
// pod webhook (pkg/launcherwebhook) recognises the hook's container and
// where it mounts the Secret named by OSKSecretLabel.
func HookSidecarsValue(s HookSidecar) (string, error) {
	if s.Image == "" {
		return "", fmt.Errorf("hook sidecar image is required")
	}
	args := slices.Clone(s.Args)
	if !slices.ContainsFunc(args, isOSKFileArg) {
		args = append(args, "--osk-file="+DefaultOSKFile)
	}
	b, err := json.Marshal([]hookSidecarJSON{{Image: s.Image, ImagePullPolicy: s.ImagePullPolicy, Args: args}})
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func isOSKFileArg(a string) bool {
	for _, p := range []string{"-osk-file", "--osk-file"} {
		if a == p || strings.HasPrefix(a, p+"=") {
			return true
		}
	}
	return false
}
