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

package identity

import "strings"

// Apple writes serial numbers and board serials in base 34: the ten digits,
// then the upper-case letters without I and O (they read as 1 and 0), in
// that order, so '0' is 0, 'A' is 10, 'H' is 17, 'J' is 18 and 'Z' is 33.
// The format is documented in OpenCorePkg, Utilities/macserial/FORMAT.md.
var base34Alphabet = func() string {
	var b strings.Builder
	for c := byte('0'); c <= '9'; c++ {
		b.WriteByte(c)
	}
	for c := byte('A'); c <= 'Z'; c++ {
		if c != 'I' && c != 'O' {
			b.WriteByte(c)
		}
	}
	return b.String()
}()

// base34Value returns c's value in Apple's base 34, or -1 if c is not one of
// its digits.
func base34Value(c byte) int {
	return strings.IndexByte(base34Alphabet, c)
}

// base34Digit returns the character for v, 0 <= v < 34.
func base34Digit(v int) byte { return base34Alphabet[v] }
