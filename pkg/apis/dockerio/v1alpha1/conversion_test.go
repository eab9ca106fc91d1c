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

package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/identity"
)

// A field selector's value is compared with what storage holds, so a value
// the registry canonicalizes on write must be canonicalized in the
// selector too, or the selector silently matches nothing.
func TestConvertFieldLabel(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))

	cases := map[string]struct {
		kind         string
		label, value string
		wantValue    string
		wantErr      string
	}{
		"a MAC address in lower case":      {kind: "MacOSIdentity", label: "spec.macAddress", value: "74:71:8b:4f:d5:d9", wantValue: "74:71:8B:4F:D5:D9"},
		"a MAC address with dashes":        {kind: "MacOSIdentity", label: "spec.macAddress", value: "74-71-8b-4f-d5-d9", wantValue: "74:71:8B:4F:D5:D9"},
		"a MAC address as stored":          {kind: "MacOSIdentity", label: "spec.macAddress", value: "74:71:8B:4F:D5:D9", wantValue: "74:71:8B:4F:D5:D9"},
		"a MAC address with spaces around": {kind: "MacOSIdentity", label: "spec.macAddress", value: " 74:71:8b:4f:d5:d9 ", wantValue: "74:71:8B:4F:D5:D9"},
		"a serial number is kept as given": {kind: "MacOSIdentity", label: "spec.serialNumber", value: "c02tm2zbhx87", wantValue: "c02tm2zbhx87"},
		"another kind's field is kept":     {kind: "MacOSMachine", label: "status.phase", value: "ready", wantValue: "ready"},
		"metadata.name":                    {kind: "MacOSIdentity", label: "metadata.name", value: "Demo-0", wantValue: "Demo-0"},
		"an unsupported field":             {kind: "MacOSIdentity", label: "spec.rom", value: "74718B4FD5D9", wantErr: "field label not supported for MacOSIdentity: spec.rom"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			label, value, err := scheme.ConvertFieldLabel(v1alpha1.SchemeGroupVersion.WithKind(tc.kind), tc.label, tc.value)

			if tc.wantErr != "" {
				assert.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.label, label)
			assert.Equal(t, tc.wantValue, value)
			if tc.label == "spec.macAddress" {
				assert.Equal(t, identity.CanonicalMACAddress(tc.value), value, "spelled as the registry stores it")
			}
		})
	}
}
