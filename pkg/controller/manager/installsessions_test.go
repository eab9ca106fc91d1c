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

package manager

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// An install session waits on its image's recovery volume and on a
// promotion naming it; both arrive as changes of the image, which must
// reach the session and no other machine.
func TestInstallSessionsOf(t *testing.T) {
	mac := func(ns, name, image string, purpose v1alpha1.MachinePurpose) *v1alpha1.MacOSMachine {
		return &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.MacOSMachineSpec{ImageName: image, Purpose: purpose}}
	}
	fleet := []*v1alpha1.MacOSMachine{
		mac("builds", "sonoma-install-a", "sonoma", v1alpha1.MachinePurposeInstall),
		mac("lab", "sonoma-install-b", "sonoma", v1alpha1.MachinePurposeInstall),
		mac("builds", "sequoia-install", "sequoia", v1alpha1.MachinePurposeInstall),
		mac("builds", "worker", "sonoma", v1alpha1.MachinePurposeWorkload),
		mac("builds", "defaulted", "sonoma", ""),
	}
	for name, tc := range map[string]struct {
		image string
		want  []string
	}{
		"every session of the image, in any namespace": {image: "sonoma", want: []string{"builds/sonoma-install-a", "lab/sonoma-install-b"}},
		"only the image's own sessions":                {image: "sequoia", want: []string{"builds/sequoia-install"}},
		"an image no session installs":                 {image: "ventura", want: nil},
	} {
		t.Run(name, func(t *testing.T) {
			assert.ElementsMatch(t, tc.want, installSessionsOf(fleet, tc.image))
		})
	}
}
