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

// Package identity owns the values that make up an Apple identity (SMBIOS
// model, serial number, board serial, system UUID, MAC address and ROM):
// their canonical form and what makes one well-formed.
//
// It knows nothing of storage or of the API: registries call it to validate
// and canonicalize, and the transactional storage layer uses the canonical
// forms as uniqueness keys, so two spellings of one value can never both be
// stored.
package identity
