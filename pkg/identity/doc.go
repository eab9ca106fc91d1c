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
// their canonical form and exactly what makes one valid.
//
//   - A serial number is 12 base-34 characters whose year and week
//     characters decode the way macserial decodes them (DecodeSerialNumber).
//   - A board serial (MLB) is 17 base-34 characters whose checksum holds.
//   - A MAC address is a unicast address from one of Apple's OUIs, listed in
//     apple_ouis.txt (from the IEEE MA-L registry; hack/update-apple-ouis.sh
//     regenerates it), and the ROM is its six bytes.
//
// It also reads the serial-set files osx-serial-generator writes (ParseRows),
// and makes synthetic identities for tests and benchmarks (Generator).
//
// It knows nothing of storage or of the API: registries call it to validate
// and canonicalize, and the transactional storage layer uses the canonical
// forms as uniqueness keys, so two spellings of one value can never both be
// stored. It must never invent identities for real machines: the Generator's
// values are well-formed but are not macserial's, and belong in tests only.
package identity
