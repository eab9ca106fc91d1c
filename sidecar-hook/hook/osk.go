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

package hook

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"google.golang.org/grpc/codes"
)

// OSKLength is the length of Apple's SMC key ("OSK"): 64 ASCII characters
// (two 32-byte halves, OSK0 and OSK1, in the real SMC).
const OSKLength = 64

// maxOSKFileSize bounds what LoadOSK reads: a key and a line ending.
const maxOSKFileSize = 4096

// LoadOSK reads and validates the Apple SMC key from path. One trailing
// newline ("\n" or "\r\n") is dropped, as files made by editors and
// `kubectl create --from-file` often have one. Errors name the file and
// what is wrong with it, never its contents.
func LoadOSK(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", errorf(codes.FailedPrecondition,
			"cannot read the Apple SMC key (OSK) from %s: %v; mount it there (see artifacts/kubevirt/README.md) or point --osk-file at it", path, err)
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, maxOSKFileSize+1))
	if err != nil {
		return "", errorf(codes.FailedPrecondition, "cannot read the Apple SMC key (OSK) from %s: %v", path, err)
	}
	if len(buf) > maxOSKFileSize {
		return "", errorf(codes.FailedPrecondition, "the Apple SMC key (OSK) file %s is larger than %d bytes; it must hold exactly %d printable ASCII characters", path, maxOSKFileSize, OSKLength)
	}
	key := buf
	key = bytes.TrimSuffix(key, []byte("\n"))
	key = bytes.TrimSuffix(key, []byte("\r"))
	if err := ValidateOSK(key); err != nil {
		return "", errorf(codes.FailedPrecondition, "the Apple SMC key (OSK) in %s is invalid: %v", path, err)
	}
	return string(key), nil
}

// oskError describes an invalid key without quoting it.
type oskError string

func (e oskError) Error() string { return string(e) }

// ValidateOSK checks that key has the shape of Apple's SMC key: exactly
// OSKLength printable ASCII characters, none of them a comma (QEMU would
// read a comma as the end of the osk= property). The error never quotes
// the key.
func ValidateOSK(key []byte) error {
	if len(key) != OSKLength {
		return oskError(fmt.Sprintf("it is %d bytes long; the key is exactly %d printable ASCII characters", len(key), OSKLength))
	}
	for i, c := range key {
		if c < '!' || c > '~' {
			return oskError(fmt.Sprintf("byte %d is not a printable ASCII character (space, control or non-ASCII)", i+1))
		}
		if c == ',' {
			return oskError(fmt.Sprintf("byte %d is a comma, which QEMU's option syntax cannot carry in osk=", i+1))
		}
	}
	return nil
}
