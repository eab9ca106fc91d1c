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

// +k8s:deepcopy-gen=package
// +groupName=dockerios.io

// Package dockerio holds the internal types of the dockerios.io API group:
// the machine layer of DockerIOS (classes, images, identities, machines,
// pools and claims). Registries, validation and storage work on these types;
// clients only ever see a versioned form such as v1alpha1.
//
// This package must never learn about workloads (runners, CI systems):
// whatever holds a claim lives in a layer above.
package dockerio
