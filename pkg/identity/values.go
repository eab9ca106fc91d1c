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
	"regexp"
	"strconv"
	"strings"
)

// Lengths of the fixed-size identity values.
const (
	SerialNumberLength      = 12
	BoardSerialNumberLength = 17
)

var (
	// Apple serials are written in base 34: digits and upper-case letters
	// without I and O, which read as 1 and 0.
	serialPattern      = regexp.MustCompile(`^[0-9A-HJ-NP-Z]{` + fmt.Sprint(SerialNumberLength) + `}$`)
	boardSerialPattern = regexp.MustCompile(`^[0-9A-HJ-NP-Z]{` + fmt.Sprint(BoardSerialNumberLength) + `}$`)
	uuidPattern        = regexp.MustCompile(`^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$`)
	macPattern         = regexp.MustCompile(`^[0-9A-F]{2}(:[0-9A-F]{2}){5}$`)
	romPattern         = regexp.MustCompile(`^[0-9A-F]{12}$`)
	// SMBIOS model identifiers: a family name and a major,minor revision,
	// as in iMacPro1,1, MacPro7,1 or MacBookPro16,2.
	modelPattern = regexp.MustCompile(`^[A-Za-z]{2,32}[0-9]{1,3},[0-9]{1,3}$`)
)

// CanonicalSystemUUID returns the upper-case form of a system UUID; the
// firmware and macOS report UUIDs in upper case.
func CanonicalSystemUUID(s string) string { return strings.ToUpper(strings.TrimSpace(s)) }

// CanonicalMACAddress returns a MAC address as upper-case hex pairs joined
// by colons, accepting '-' as a separator.
func CanonicalMACAddress(s string) string {
	return strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", ":"))
}

// CanonicalROM returns a ROM value as 12 upper-case hex digits, accepting the
// colon-separated form of a MAC address.
func CanonicalROM(s string) string {
	return strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), ":", ""))
}

// ROMFromMAC returns the ROM value that belongs to a MAC address: its six
// bytes as hex, which is what osx-serial-generator and OpenCore use.
func ROMFromMAC(mac string) string { return CanonicalROM(CanonicalMACAddress(mac)) }

// ValidateModel reports why s is not an SMBIOS model identifier.
func ValidateModel(s string) error {
	if !modelPattern.MatchString(s) {
		return fmt.Errorf("must be an SMBIOS model identifier such as iMacPro1,1 (letters, then major,minor)")
	}
	return nil
}

// ValidateSerialNumber reports why s is not a system serial number.
func ValidateSerialNumber(s string) error {
	if len(s) != SerialNumberLength {
		return fmt.Errorf("must be %d characters, not %d", SerialNumberLength, len(s))
	}
	if !serialPattern.MatchString(s) {
		return fmt.Errorf("must use only digits and upper-case letters other than I and O")
	}
	return nil
}

// ValidateBoardSerialNumber reports why s is not a main logic board serial (MLB).
func ValidateBoardSerialNumber(s string) error {
	if len(s) != BoardSerialNumberLength {
		return fmt.Errorf("must be %d characters, not %d", BoardSerialNumberLength, len(s))
	}
	if !boardSerialPattern.MatchString(s) {
		return fmt.Errorf("must use only digits and upper-case letters other than I and O")
	}
	return nil
}

// ValidateSystemUUID reports why s is not a canonical system UUID.
func ValidateSystemUUID(s string) error {
	if !uuidPattern.MatchString(s) {
		return fmt.Errorf("must be a UUID in upper case, as XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX")
	}
	return nil
}

// ValidateMACAddress reports why s is not a canonical unicast MAC address.
func ValidateMACAddress(s string) error {
	if !macPattern.MatchString(s) {
		return fmt.Errorf("must be six upper-case hex pairs joined by colons, as AA:BB:CC:DD:EE:FF")
	}
	// The low bit of the first octet marks a multicast group, which no
	// network interface may use as its own address.
	if first, _ := strconv.ParseUint(s[:2], 16, 8); first&1 == 1 {
		return fmt.Errorf("must be a unicast address (the first octet's lowest bit is set)")
	}
	return nil
}

// ValidateROM reports why rom is not a ROM value or does not belong to mac.
func ValidateROM(rom, mac string) error {
	if !romPattern.MatchString(rom) {
		return fmt.Errorf("must be 12 upper-case hex digits (the six bytes of the MAC address)")
	}
	if want := ROMFromMAC(mac); macPattern.MatchString(mac) && rom != want {
		return fmt.Errorf("must be the MAC address's six bytes, %s", want)
	}
	return nil
}
