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

package external

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Creates ask for strict field validation: kube-apiserver would otherwise
// drop a field KubeVirt's or CDI's schema lacks and report success.
func TestCreateIsStrict(t *testing.T) {
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{VirtualMachines: "VirtualMachineList"})
	vm := &kubevirtv1.VirtualMachine{TypeMeta: metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: "mac-1", Namespace: "ns"}}
	if err := Create(t.Context(), c, VirtualMachines, vm); err != nil {
		t.Fatal(err)
	}
	actions := c.Actions()
	if len(actions) != 1 {
		t.Fatalf("actions: %v", actions)
	}
	create, ok := actions[0].(clienttesting.CreateActionImpl)
	if !ok {
		t.Fatalf("action %T", actions[0])
	}
	if got := create.GetCreateOptions().FieldValidation; got != metav1.FieldValidationStrict {
		t.Errorf("fieldValidation %q, want %q", got, metav1.FieldValidationStrict)
	}
}
