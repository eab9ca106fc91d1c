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

package defaultstrategy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

func TestStatusResetFields_LeaveSpecMetadataAndOwnedFieldsAlone(t *testing.T) {
	set := StatusResetFields(fieldpath.MakePathOrDie("status", "claimRef"))[apiVersion]
	for _, p := range [][]interface{}{{"spec"}, {"metadata", "labels"}, {"metadata", "annotations"}, {"metadata", "finalizers"}, {"metadata", "ownerReferences"}, {"status", "claimRef"}} {
		assert.True(t, set.Has(fieldpath.MakePathOrDie(p...)), "%v must be reset", p)
	}
	assert.False(t, set.Has(fieldpath.MakePathOrDie("status", "phase")), "the rest of status is the status writer's")
}

func TestBase_MainResourceNeverOwnsStatus(t *testing.T) {
	set := New().GetResetFields()[apiVersion]
	assert.True(t, set.Has(fieldpath.MakePathOrDie("status")))
	assert.False(t, set.Has(fieldpath.MakePathOrDie("spec")))
}

func TestKeepMetadataOnStatusWrite_RestoresLabelsAnnotationsFinalizersOwners(t *testing.T) {
	pool := metav1.OwnerReference{APIVersion: "dockerios.io/v1alpha1", Kind: "MacOSMachinePool", Name: "ci", UID: "uid-ci"}
	old := &metav1.ObjectMeta{Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"b": "2"}, Finalizers: []string{"dockerios.io/teardown"},
		OwnerReferences: []metav1.OwnerReference{pool}}
	obj := &metav1.ObjectMeta{Labels: map[string]string{"a": "changed"}, Finalizers: nil, Generation: 7}
	KeepMetadataOnStatusWrite(obj, old)
	assert.Equal(t, old.Labels, obj.Labels)
	assert.Equal(t, old.Annotations, obj.Annotations)
	assert.Equal(t, old.Finalizers, obj.Finalizers)
	assert.Equal(t, old.OwnerReferences, obj.OwnerReferences, "a status write neither orphans the object nor gives it another owner")
	assert.Equal(t, int64(7), obj.Generation, "other metadata is untouched")

	obj = &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "uid-other"}}}
	KeepMetadataOnStatusWrite(obj, old)
	assert.Equal(t, old.OwnerReferences, obj.OwnerReferences)
}
