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

// Package hook is what the DockerIOS sidecar does to a VMI's libvirt domain
// before virt-launcher defines it: Apple's SMC device and key, the system
// disk's bus, and an optional QEMU -cpu override, all driven by the VMI's
// hook.dockerios.io/ annotations (package annotations).
package hook

import (
	"fmt"
	"strings"
)

// Hook handles OnDefineDomain calls. It holds no state between calls.
type Hook struct {
	// OSKFile is read on every call that needs the key, so a remounted key
	// is picked up without a restart.
	OSKFile string
}

// Result tells the caller what OnDefineDomain did, for logging. It never
// holds the key.
type Result struct {
	VMI      VMI
	Settings Settings
	// Present is false when the VMI has no DockerIOS annotation.
	Present bool
	// Changed is false when the domain came back exactly as received.
	Changed bool
}

// Summary describes the result in one line without secrets.
func (r Result) Summary() string {
	if !r.Present {
		return "no DockerIOS annotations; domain passed through"
	}
	var parts []string
	if r.Settings.AppleSMC {
		parts = append(parts, "apple-smc")
	}
	if r.Settings.SystemDisk != "" {
		parts = append(parts, fmt.Sprintf("system-disk %s on %s", r.Settings.SystemDisk, r.Settings.SystemDiskBus))
	}
	if r.Settings.CPU != "" {
		parts = append(parts, "cpu override")
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing requested")
	}
	state := "domain rewritten"
	if !r.Changed {
		state = "domain already as requested"
	}
	return strings.Join(parts, ", ") + "; " + state
}

// OnDefineDomain returns the domain XML virt-launcher should define for the
// VMI. Errors are *Error values with a gRPC code and a message for the VMI's
// owner; neither the result nor the error is safe to log in full except
// through Result.Summary and Error.Error.
func (h Hook) OnDefineDomain(domainXML, vmiJSON []byte) ([]byte, Result, error) {
	vmi, err := DecodeVMI(vmiJSON)
	if err != nil {
		return nil, Result{}, err
	}
	res := Result{VMI: vmi}
	s, present, err := ParseSettings(vmi.Annotations)
	if err != nil {
		return nil, res, err
	}
	res.Settings, res.Present = s, present
	if !present {
		return domainXML, res, nil
	}
	var osk string
	if s.AppleSMC {
		if osk, err = LoadOSK(h.OSKFile); err != nil {
			return nil, res, err
		}
	}
	out, err := Rewrite(domainXML, s, osk)
	if err != nil {
		return nil, res, err
	}
	res.Changed = string(out) != string(domainXML)
	return out, res, nil
}
