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
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/reference"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// Every typed object the controller reports an Event about has a kind in
// the recorder's scheme: objects from a lister carry no TypeMeta, and an
// Event about one whose kind the scheme lacks is dropped (the ledger
// guard's Event on an identity Secret outside the ledger was, before).
func TestEventSchemeKnowsEveryObjectEventsAreAbout(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "x", Namespace: "ci", UID: "uid-x"}
	for _, obj := range []runtime.Object{
		&corev1.Secret{ObjectMeta: meta},
		&corev1.PersistentVolumeClaim{ObjectMeta: meta},
		&batchv1.Job{ObjectMeta: meta},
		&v1alpha1.MacOSMachine{ObjectMeta: meta},
		&v1alpha1.MacOSIdentity{ObjectMeta: meta},
		&v1alpha1.MacOSIdentityPool{ObjectMeta: meta},
		&v1alpha1.MacOSMachineClaim{ObjectMeta: meta},
	} {
		ref, err := reference.GetReference(eventScheme(), obj)
		if assert.NoError(t, err, "%T", obj) {
			assert.NotEmpty(t, ref.Kind, "%T", obj)
		}
	}
}
