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

// +k8s:openapi-gen=true
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/dockerios/dockerios/pkg/apis/dockerio
// +k8s:defaulter-gen=TypeMeta
// +groupName=dockerios.io
// +k8s:openapi-model-package=io.dockerios.v1alpha1

// Package v1alpha1 is the first served version of the dockerios.io API:
// the types clients read and write, their defaults, and their conversion to
// the internal types in package dockerio.
package v1alpha1
