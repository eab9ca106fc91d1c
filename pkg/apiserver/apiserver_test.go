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

package apiserver

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/registry/macosidentity"
	"github.com/dockerios/dockerios/pkg/registry/macosidentitypool"
	"github.com/dockerios/dockerios/pkg/registry/macosimage"
	"github.com/dockerios/dockerios/pkg/registry/macosmachine"
	"github.com/dockerios/dockerios/pkg/registry/macosmachineclaim"
	"github.com/dockerios/dockerios/pkg/registry/macosmachineclass"
	"github.com/dockerios/dockerios/pkg/registry/macosmachinepool"
)

// TestSelectableFields_RegistriesOfferWhatTheAPIAccepts holds together the
// two lists of field selectors: the labels the v1alpha1 scheme accepts and
// the fields each registry computes. A selector accepted but never computed
// would silently match nothing; one computed but not accepted is unusable.
func TestSelectableFields_RegistriesOfferWhatTheAPIAccepts(t *testing.T) {
	registries := map[string]fields.Set{
		"MacOSMachineClass": macosmachineclass.SelectableFields(&dockerio.MacOSMachineClass{}),
		"MacOSImage":        macosimage.SelectableFields(&dockerio.MacOSImage{}),
		"MacOSIdentityPool": macosidentitypool.SelectableFields(&dockerio.MacOSIdentityPool{}),
		"MacOSIdentity":     macosidentity.SelectableFields(&dockerio.MacOSIdentity{}),
		"MacOSMachine":      macosmachine.SelectableFields(&dockerio.MacOSMachine{}),
		"MacOSMachinePool":  macosmachinepool.SelectableFields(&dockerio.MacOSMachinePool{}),
		"MacOSMachineClaim": macosmachineclaim.SelectableFields(&dockerio.MacOSMachineClaim{}),
	}
	assert.Len(t, registries, len(v1alpha1.SelectableFields), "every kind has a field set")
	for kind, set := range registries {
		var computed []string
		for key := range set {
			if !strings.HasPrefix(key, "metadata.") {
				computed = append(computed, key)
			}
		}
		slices.Sort(computed)
		accepted := slices.Sorted(slices.Values(v1alpha1.SelectableFields[kind]))
		assert.Equal(t, accepted, computed, kind)
	}
}
