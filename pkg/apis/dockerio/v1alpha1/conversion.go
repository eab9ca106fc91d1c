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
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

// SelectableFields lists, per kind, the fields a list or watch may select on
// with --field-selector, beyond metadata.name and metadata.namespace. They
// are part of the API: each registry's field set must offer exactly these
// (a registry test holds the two together).
var SelectableFields = map[string][]string{
	"MacOSMachineClass": {"spec.imageName", "spec.identityPoolName", "spec.smbiosModel"},
	"MacOSImage":        {"spec.release"},
	"MacOSIdentityPool": {"spec.model"},
	"MacOSIdentity": {
		"spec.poolName", "spec.model", "spec.serialNumber", "spec.macAddress",
		"status.allocated", "status.allocation.machineNamespace",
		"status.allocation.machineName", "status.allocation.machineUID",
	},
	"MacOSMachine": {
		"spec.className", "spec.poolName", "status.phase",
		"status.identityRef.name", "status.claimRef.name", "status.nodeName",
	},
	"MacOSMachinePool":  {"spec.className"},
	"MacOSMachineClaim": {"spec.poolName", "spec.className", "status.phase", "status.machineName"},
}

// canonicalMACAddress is pkg/identity's CanonicalMACAddress, which the
// registry stores addresses with (a test holds the two together), spelled
// out here so that the API package, which clients import, depends on no
// other DockerIOS package.
func canonicalMACAddress(s string) string {
	return strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", ":"))
}

// addFieldLabelConversionFuncs tells the scheme which field selectors each
// kind accepts; without it the apiserver refuses every selector but
// metadata.name and metadata.namespace.
func addFieldLabelConversionFuncs(scheme *runtime.Scheme) error {
	for kind, fields := range SelectableFields {
		allowed := map[string]bool{"metadata.name": true, "metadata.namespace": true}
		for _, f := range fields {
			allowed[f] = true
		}
		err := scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind(kind),
			func(label, value string) (string, string, error) {
				if !allowed[label] {
					return "", "", fmt.Errorf("field label not supported for %s: %s", kind, label)
				}
				if kind == "MacOSIdentity" && label == "spec.macAddress" {
					// Compared with what storage holds: a selector for
					// 74:71:8b:4f:d5:d9 (or 74-71-8B-…) matches the identity
					// stored with 74:71:8B:4F:D5:D9 instead of nothing.
					value = canonicalMACAddress(value)
				}
				return label, value, nil
			})
		if err != nil {
			return err
		}
	}
	return nil
}
