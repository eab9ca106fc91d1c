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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of DockerIOS's machine layer.
const GroupName = "dockerios.io"

// SchemeGroupVersion is the group version of this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource takes an unqualified resource and returns a group-qualified GroupResource.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder registers the versioned types and their functions.
	SchemeBuilder      runtime.SchemeBuilder
	localSchemeBuilder = &SchemeBuilder
	// AddToScheme adds the v1alpha1 types, defaults and conversions to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	// Only hand-written functions are registered here; the generated files
	// register theirs, so this compiles before code generation has run.
	localSchemeBuilder.Register(addKnownTypes, addDefaultingFuncs, addFieldLabelConversionFuncs)
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&MacOSMachineClass{}, &MacOSMachineClassList{},
		&MacOSImage{}, &MacOSImageList{},
		&MacOSIdentityPool{}, &MacOSIdentityPoolList{},
		&MacOSIdentity{}, &MacOSIdentityList{},
		&MacOSMachine{}, &MacOSMachineList{},
		&MacOSMachinePool{}, &MacOSMachinePoolList{},
		&MacOSMachineClaim{}, &MacOSMachineClaimList{},
		&MacOSMachineBinding{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
