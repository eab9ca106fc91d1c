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

// Package v1alpha1 is the workload layer's API of this example: the
// GitLabRunner kind, served by kube-apiserver as a CustomResourceDefinition
// (deploy/01-crd.yaml, generated from these types by hack/update-codegen.sh).
//
// It is a separate API group from DockerIOS's dockerios.io on purpose: the
// machine layer knows classes, machines, pools and claims, never what runs
// on a machine. A GitLabRunner holds MacOSMachineClaims the way any client
// of dockerios.io does, and nothing of dockerios.io changes for it.
//
// +kubebuilder:object:generate=true
// +groupName=gitlab.examples.dockerios.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupName is the API group of the example.
const GroupName = "gitlab.examples.dockerios.io"

var (
	// GroupVersion is the group and version of the types here.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeBuilder registers the types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
