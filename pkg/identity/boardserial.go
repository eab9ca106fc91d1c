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

import (
	"fmt"
	"unicode/utf8"
)

// A main logic board serial (MLB) in the 17-character format reads
// LLL Y WW III AA EEEE CC (location, year, week, item, infix, board code,
// suffix), but little of it is understood. What is known for certain is its
// checksum, which Apple's diagnostics check and which macserial reproduces
// (OpenCorePkg, Utilities/macserial: verify_mlb_checksum in macserial.c,
// described in FORMAT.md). macserial's --verify checks nothing else, and
// recovery servers reject an MLB that fails it, so the checksum is the rule.
//
// The checksum works like the check digit of a barcode, in base 34: read
// each character as its base-34 value, weigh the last character 1, the one
// before it 3, the one before that 1, and so on, alternating from the end;
// the weighted sum must be a multiple of 34. Because 1 and 3 are both prime
// to 34, changing any single character always breaks the checksum.

// boardSerialWeight returns the checksum weight of position i (0-based) in a
// board serial of length n: 1 for the last character, alternating with 3
// towards the first.
func boardSerialWeight(i, n int) int {
	if (n-1-i)%2 == 0 {
		return 1
	}
	return 3
}

// boardSerialSum returns the checksum's weighted sum modulo 34 for a string
// of base-34 digits. Zero means the checksum holds.
func boardSerialSum(s string, n int) int {
	sum := 0
	for i := 0; i < len(s); i++ {
		sum += boardSerialWeight(i, n) * base34Value(s[i])
	}
	return sum % 34
}

// boardSerialCheckCharacter returns the last character that completes
// prefix, the first BoardSerialNumberLength-1 characters of a board serial
// (all base-34 digits), into one whose checksum holds.
func boardSerialCheckCharacter(prefix string) byte {
	// The last character weighs 1, so it is whatever brings the sum to a
	// multiple of 34.
	return base34Digit((34 - boardSerialSum(prefix, BoardSerialNumberLength)) % 34)
}

// ValidateBoardSerialNumber reports why s is not a main logic board serial
// (MLB) whose checksum holds.
func ValidateBoardSerialNumber(s string) error {
	if n := utf8.RuneCountInString(s); n != BoardSerialNumberLength {
		return fmt.Errorf("must be %d characters, not %d", BoardSerialNumberLength, n)
	}
	if err := checkBase34(s); err != nil {
		return err
	}
	if r := boardSerialSum(s, len(s)); r != 0 {
		return fmt.Errorf("fails the MLB checksum: its base-34 digits, weighted 1 and 3 alternately from the last character, sum to %d modulo 34, not 0, so a character is wrong", r)
	}
	return nil
}
