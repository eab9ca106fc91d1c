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
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Lengths of the fixed-size identity values.
const (
	SerialNumberLength      = 12
	BoardSerialNumberLength = 17
)

var (
	uuidPattern = regexp.MustCompile(`^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$`)
	macPattern  = regexp.MustCompile(`^[0-9A-F]{2}(:[0-9A-F]{2}){5}$`)
	romPattern  = regexp.MustCompile(`^[0-9A-F]{12}$`)
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
// colon-separated form of a MAC address. Colons go before surrounding space
// is trimmed, so that canonicalizing twice changes nothing ("0 :" is "0").
func CanonicalROM(s string) string {
	return strings.ToUpper(strings.TrimSpace(strings.ReplaceAll(s, ":", "")))
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

// ValidateSerialNumber reports why s is not a 12-character system serial
// number whose year and week characters macserial can decode (see
// DecodeSerialNumber).
func ValidateSerialNumber(s string) error {
	_, err := DecodeSerialNumber(s)
	return err
}

// ValidateSystemUUID reports why s is not a canonical system UUID.
func ValidateSystemUUID(s string) error {
	if !uuidPattern.MatchString(s) {
		return fmt.Errorf("must be a UUID in upper case, as XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX")
	}
	return nil
}

// ValidateMACAddress reports why s is not a canonical unicast MAC address
// from one of Apple's OUIs (see AppleOUIs).
func ValidateMACAddress(s string) error {
	if !macPattern.MatchString(s) {
		return fmt.Errorf("must be six upper-case hex pairs joined by colons, as AA:BB:CC:DD:EE:FF")
	}
	// The low bit of the first octet marks a multicast group, which no
	// network interface may use as its own address.
	if first, _ := strconv.ParseUint(s[:2], 16, 8); first&1 == 1 {
		return fmt.Errorf("must be a unicast address (the first octet's lowest bit is set)")
	}
	// macOS services tie a Mac to its built-in network interface, whose
	// address Apple assigns from its own blocks.
	if !IsAppleOUI(s) {
		return fmt.Errorf("OUI %s is not assigned to Apple in the IEEE MA-L registry: must begin with one of Apple's %d OUIs, such as %s", s[:8], len(appleOUIs), appleOUIs[0])
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

// Values are the six values of one Apple identity, as a MacOSIdentity's
// spec holds them.
type Values struct {
	Model             string
	SerialNumber      string
	BoardSerialNumber string
	SystemUUID        string
	MACAddress        string
	ROM               string
}

// Validate reports every value of v that is not well-formed, each named by
// its MacOSIdentity spec field, or nil if all are. Values are expected in
// canonical form, as for the validators it calls.
func (v Values) Validate() error {
	var errs []error
	for _, p := range v.problems() {
		errs = append(errs, errors.New(p))
	}
	return errors.Join(errs...)
}

// problems returns one message per invalid value of v.
func (v Values) problems() []string {
	var out []string
	for _, f := range []struct {
		name, value string
		check       func(string) error
	}{
		{"model", v.Model, ValidateModel},
		{"serialNumber", v.SerialNumber, ValidateSerialNumber},
		{"boardSerialNumber", v.BoardSerialNumber, ValidateBoardSerialNumber},
		{"systemUUID", v.SystemUUID, ValidateSystemUUID},
		{"macAddress", v.MACAddress, ValidateMACAddress},
		{"rom", v.ROM, func(rom string) error { return ValidateROM(rom, v.MACAddress) }},
	} {
		if f.value == "" {
			out = append(out, f.name+" is missing")
		} else if err := f.check(f.value); err != nil {
			out = append(out, fmt.Sprintf("%s %s: %v", f.name, quoteValue(f.value), err))
		}
	}
	return out
}

// maxQuotedValue bounds how much of a value an error message repeats, so a
// hostile input cannot make messages as large as itself.
const maxQuotedValue = 40

// quoteValue quotes s for an error message, shortened to maxQuotedValue
// characters.
func quoteValue(s string) string {
	if utf8.RuneCountInString(s) <= maxQuotedValue {
		return strconv.Quote(s)
	}
	r := []rune(s)
	return strconv.Quote(string(r[:maxQuotedValue])) + "..."
}
