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

package hook

import (
	"encoding/json"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/dockerios/dockerios/sidecar-hook/annotations"
)

// Settings is what a VMI's DockerIOS annotations ask of its domain.
type Settings struct {
	// AppleSMC adds -device isa-applesmc,osk=… and -smbios type=2.
	AppleSMC bool
	// SystemDisk is the VMI disk name to move; empty leaves disks alone.
	SystemDisk string
	// SystemDiskBus is the bus SystemDisk moves to.
	SystemDiskBus string
	// CPU, when not empty, is appended as -cpu CPU.
	CPU string
}

// IsZero reports whether the settings ask for no change at all.
func (s Settings) IsZero() bool { return s == Settings{} }

// vmiMeta is the part of a VirtualMachineInstance the hook reads. Decoding
// only this keeps the sidecar independent of KubeVirt's API version.
type vmiMeta struct {
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// VMI identifies the VMI a request is for, for logs and errors.
type VMI struct {
	Namespace, Name string
	Annotations     map[string]string
}

func (v VMI) String() string { return v.Namespace + "/" + v.Name }

// DecodeVMI reads the VMI JSON virt-launcher sends.
func DecodeVMI(vmiJSON []byte) (VMI, error) {
	var m vmiMeta
	if err := json.Unmarshal(vmiJSON, &m); err != nil {
		return VMI{}, errorf(codes.InvalidArgument, "cannot decode the VirtualMachineInstance JSON sent by virt-launcher: %v", err)
	}
	return VMI{Namespace: m.Metadata.Namespace, Name: m.Metadata.Name, Annotations: m.Metadata.Annotations}, nil
}

// ParseSettings reads the DockerIOS annotations. present is false when the
// VMI has none of them (the domain then passes through untouched).
func ParseSettings(ann map[string]string) (s Settings, present bool, err error) {
	var unknown []string
	for k := range ann {
		if !strings.HasPrefix(k, annotations.Prefix) {
			continue
		}
		present = true
		if !annotations.IsKnown(k) {
			unknown = append(unknown, k)
		}
	}
	if !present {
		return Settings{}, false, nil
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return Settings{}, true, errorf(codes.InvalidArgument,
			"unknown annotation %s on the VirtualMachineInstance; this DockerIOS sidecar hook knows %s (is the hook older than the controller?)",
			strings.Join(unknown, ", "), strings.Join(annotations.Known, ", "))
	}

	if v, ok := ann[annotations.AppleSMC]; ok {
		switch v {
		case "true":
			s.AppleSMC = true
		case "false":
		default:
			return Settings{}, true, errorf(codes.InvalidArgument, "annotation %s is %q; it must be \"true\" or \"false\"", annotations.AppleSMC, v)
		}
	}

	disk, hasDisk := ann[annotations.SystemDisk]
	bus, hasBus := ann[annotations.SystemDiskBus]
	switch {
	case hasDisk && disk == "":
		return Settings{}, true, errorf(codes.InvalidArgument, "annotation %s is empty; it must name a disk of the VirtualMachineInstance", annotations.SystemDisk)
	case hasBus && !hasDisk:
		return Settings{}, true, errorf(codes.InvalidArgument, "annotation %s is set but %s is not; the hook needs to know which disk to move", annotations.SystemDiskBus, annotations.SystemDisk)
	}
	if hasDisk {
		if !hasBus {
			bus = annotations.DefaultSystemDiskBus
		}
		if !isBus(bus) {
			return Settings{}, true, errorf(codes.InvalidArgument, "annotation %s is %q, an unknown bus; supported buses: %s",
				annotations.SystemDiskBus, bus, strings.Join(annotations.Buses, ", "))
		}
		s.SystemDisk, s.SystemDiskBus = disk, bus
	}

	if v, ok := ann[annotations.CPU]; ok {
		if err := validateCPU(v); err != nil {
			return Settings{}, true, err
		}
		s.CPU = v
	}
	return s, true, nil
}

func isBus(b string) bool {
	for _, x := range annotations.Buses {
		if b == x {
			return true
		}
	}
	return false
}

func validateCPU(v string) error {
	if v == "" {
		return errorf(codes.InvalidArgument, "annotation %s is empty; remove it or give a QEMU -cpu value", annotations.CPU)
	}
	if len(v) > annotations.MaxCPULength {
		return errorf(codes.InvalidArgument, "annotation %s is %d characters long; at most %d are allowed", annotations.CPU, len(v), annotations.MaxCPULength)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c > '~' {
			return errorf(codes.InvalidArgument, "annotation %s has a space, control or non-ASCII character at byte %d; a QEMU -cpu value is printable ASCII without spaces", annotations.CPU, i)
		}
	}
	return nil
}
