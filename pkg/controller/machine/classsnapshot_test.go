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

package machine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// A machine is made from its snapshot of its class (rule 10): an edit of
// the class, or its deletion, takes nothing from it; only the class's
// status (the storage hold-back) is read as it is now, while it exists.
func TestMadeOf(t *testing.T) {
	snapshotted := func() *v1alpha1.MacOSMachine {
		m := testMachine()
		spec := testClass().Spec
		spec.StartTimeout = &metav1.Duration{Duration: 20 * time.Minute}
		m.Status.ClassSnapshot = &v1alpha1.ClassSnapshot{Generation: 1, Spec: spec}
		return m
	}
	edited := testClass() // a 10m startTimeout, and a hold-back on its status
	edited.Status.StorageHoldBack = &v1alpha1.StorageHoldBack{Failures: 1, Until: metav1.NewTime(t0)}

	for name, tc := range map[string]struct {
		m           *v1alpha1.MacOSMachine
		class       *v1alpha1.MacOSMachineClass
		wantTimeout string // "" for no class
		wantHold    bool
	}{
		"class as it is, spec from the snapshot":   {snapshotted(), edited, "20m0s", true},
		"class deleted: the snapshot alone":        {snapshotted(), nil, "20m0s", false},
		"no snapshot (recorded before them): live": {testMachine(), edited, "10m0s", true},
		"no snapshot, class deleted: none":         {testMachine(), nil, "", false},
	} {
		t.Run(name, func(t *testing.T) {
			got := madeOf(tc.m, tc.class)
			if tc.wantTimeout == "" {
				assert.Nil(t, got)
				return
			}
			if assert.NotNil(t, got) {
				assert.Equal(t, tc.m.Spec.ClassName, got.Name)
				assert.Equal(t, tc.wantTimeout, got.Spec.StartTimeout.Duration.String())
				assert.Equal(t, tc.wantHold, got.Status.StorageHoldBack != nil)
			}
		})
	}
	assert.Equal(t, "10m0s", edited.Spec.StartTimeout.Duration.String(), "the class as it is is not changed")
}
