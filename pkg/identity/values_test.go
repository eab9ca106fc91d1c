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
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCanonicalSystemUUID_UpperCasesAndTrims(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"canonical is unchanged":       {in: "007076A6-F2A2-4461-BBE5-BAD019F8025A", want: "007076A6-F2A2-4461-BBE5-BAD019F8025A"},
		"lower case is upper-cased":    {in: "007076a6-f2a2-4461-bbe5-bad019f8025a", want: "007076A6-F2A2-4461-BBE5-BAD019F8025A"},
		"surrounding space is trimmed": {in: " \t007076a6-F2A2-4461-BBE5-BAD019F8025A\n", want: "007076A6-F2A2-4461-BBE5-BAD019F8025A"},
		"empty stays empty":            {in: "", want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, CanonicalSystemUUID(tc.in))
		})
	}
}

func TestCanonicalMACAddress_UpperCasesAndUsesColons(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"canonical is unchanged":       {in: "00:0A:27:00:00:01", want: "00:0A:27:00:00:01"},
		"lower case is upper-cased":    {in: "00:0a:27:ab:cd:ef", want: "00:0A:27:AB:CD:EF"},
		"dashes become colons":         {in: "00-0a-27-00-00-01", want: "00:0A:27:00:00:01"},
		"surrounding space is trimmed": {in: "  00:0a:27:00:00:01\n", want: "00:0A:27:00:00:01"},
		"empty stays empty":            {in: "", want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, CanonicalMACAddress(tc.in))
		})
	}
}

func TestCanonicalROM_UpperCasesAndDropsColons(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"canonical is unchanged":          {in: "000A27000001", want: "000A27000001"},
		"lower case is upper-cased":       {in: "000a27abcdef", want: "000A27ABCDEF"},
		"MAC-style colons are dropped":    {in: "00:0a:27:00:00:01", want: "000A27000001"},
		"surrounding space is trimmed":    {in: " 000a27000001 ", want: "000A27000001"},
		"space before a colon is trimmed": {in: "000a27000001 :", want: "000A27000001"},
		"dashes are kept (not accepted)":  {in: "00-0a-27-00-00-01", want: "00-0A-27-00-00-01"},
		"empty stays empty":               {in: "", want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, CanonicalROM(tc.in))
		})
	}
}

func TestROMFromMAC_IsTheMACsSixBytes(t *testing.T) {
	cases := map[string]struct{ mac, want string }{
		"canonical MAC":            {mac: "00:0A:27:00:00:01", want: "000A27000001"},
		"lower-case MAC":           {mac: "a4:83:e7:12:34:56", want: "A483E7123456"},
		"dash-separated MAC":       {mac: "00-0a-27-00-00-01", want: "000A27000001"},
		"MAC with surrounding tab": {mac: "\t00:0A:27:00:00:01", want: "000A27000001"},
		"empty MAC gives no ROM":   {mac: "", want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ROMFromMAC(tc.mac)
			assert.Equal(t, tc.want, got)
			if tc.want != "" {
				assert.NoError(t, ValidateROM(got, CanonicalMACAddress(tc.mac)), "ROMFromMAC must give a ROM that ValidateROM accepts for its MAC")
			}
		})
	}
}

// checkCase is a value and the error it must draw: wantErr empty means
// valid, otherwise a substring of the message.
type checkCase struct {
	in      string
	wantErr string
}

func runChecks(t *testing.T, check func(string) error, cases map[string]checkCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := check(tc.in)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestValidateModel(t *testing.T) {
	const msg = "must be an SMBIOS model identifier"
	runChecks(t, ValidateModel, map[string]checkCase{
		"iMacPro1,1 is valid":                 {in: "iMacPro1,1"},
		"MacPro7,1 is valid":                  {in: "MacPro7,1"},
		"MacBookPro16,2 is valid":             {in: "MacBookPro16,2"},
		"three-digit revisions are valid":     {in: "Macmini123,456"},
		"empty is invalid":                    {in: "", wantErr: msg},
		"family alone is invalid":             {in: "iMacPro", wantErr: msg},
		"major without minor is invalid":      {in: "iMacPro1", wantErr: msg},
		"dot for comma is invalid":            {in: "iMacPro1.1", wantErr: msg},
		"space inside is invalid":             {in: "iMac Pro1,1", wantErr: msg},
		"trailing space is invalid":           {in: "iMacPro1,1 ", wantErr: msg},
		"one-letter family is invalid":        {in: "M1,1", wantErr: msg},
		"33-letter family is invalid":         {in: strings.Repeat("a", 33) + "1,1", wantErr: msg},
		"32-letter family is valid":           {in: strings.Repeat("a", 32) + "1,1"},
		"four-digit major is invalid":         {in: "iMacPro1234,1", wantErr: msg},
		"digits before the family is invalid": {in: "1iMacPro1,1", wantErr: msg},
	})
}

func TestValidateSerialNumber(t *testing.T) {
	const alphabet = "upper-case letters other than I and O"
	runChecks(t, ValidateSerialNumber, map[string]checkCase{
		"iMacPro1,1 serial from macserial is valid": {in: "C02TM2ZBHX87"},
		"MacPro7,1 serial from macserial is valid":  {in: "F5KK6JZKP7QM"},
		"iMac20,1 serial from macserial is valid":   {in: "C02FNZYZ046M"},
		"Macmini8,1 serial from macserial is valid": {in: "C07W20BVJYVX"},
		"week 53 (Y in a second half) is valid":     {in: "C02VY2ZBHX87"},
		"11 characters are too short":               {in: "C02TM2ZBHX8", wantErr: "must be 12 characters, not 11"},
		"13 characters are too long":                {in: "C02TM2ZBHX871", wantErr: "must be 12 characters, not 13"},
		"empty is too short":                        {in: "", wantErr: "must be 12 characters, not 0"},
		"length counts characters, not bytes":       {in: "C02TM2ZBHX8É", wantErr: "character 12 is 'É': must use only digits and " + alphabet},
		"lower case is invalid":                     {in: "c02tm2zbhx87", wantErr: "character 1 is 'c': must use only digits and " + alphabet},
		"the letter I is invalid":                   {in: "CI2TM2ZBHX87", wantErr: "character 2 is 'I'"},
		"the letter O is invalid":                   {in: "CO2TM2ZBHX87", wantErr: "other than I and O"},
		"a dash is invalid":                         {in: "C02TM2-BHX87", wantErr: "character 7 is '-'"},
		"a digit is no year code":                   {in: "C027M2ZBHX87", wantErr: "character 4 (year) is '7': must be a year code, one of CDFGHJKLMNPQRSTVWXYZ"},
		"A is no year code":                         {in: "C02AM2ZBHX87", wantErr: "character 4 (year) is 'A'"},
		"E is no year code":                         {in: "C02EM2ZBHX87", wantErr: "character 4 (year) is 'E'"},
		"U is no year code":                         {in: "C02UM2ZBHX87", wantErr: "character 4 (year) is 'U'"},
		"0 is no week code":                         {in: "C02T02ZBHX87", wantErr: "character 5 (week) is '0': must be a week code"},
		"S is no week code":                         {in: "C02TS2ZBHX87", wantErr: "character 5 (week) is 'S'"},
		"Z is no week code":                         {in: "C02TZ2ZBHX87", wantErr: "character 5 (week) is 'Z'"},
		"Y in a first half-year is invalid":         {in: "C02TY2ZBHX87", wantErr: "character 5 (week) is 'Y', week 27 of a half-year, but character 4 (year) 'T' is a first-half code"},
	})
}

func TestValidateBoardSerialNumber(t *testing.T) {
	runChecks(t, ValidateBoardSerialNumber, map[string]checkCase{
		"iMacPro1,1 MLB from macserial is valid":  {in: "C02717306J9JG361M"},
		"MacPro7,1 MLB from macserial is valid":   {in: "F5K212405QXK3F71H"},
		"iMac20,1 MLB from macserial is valid":    {in: "C02118306CD00008C"},
		"Macmini8,1 MLB from macserial is valid":  {in: "C071435014NKXPG1M"},
		"16 characters are too short":             {in: "C02717306J9JG361", wantErr: "must be 17 characters, not 16"},
		"18 characters are too long":              {in: "C02717306J9JG361MM", wantErr: "must be 17 characters, not 18"},
		"a system serial is too short":            {in: "C02TM2ZBHX87", wantErr: "must be 17 characters, not 12"},
		"lower case is invalid":                   {in: "c02717306j9jg361m", wantErr: "character 1 is 'c': must use only digits and upper-case letters other than I and O"},
		"the letter O is invalid":                 {in: "C02717306J9JGO61M", wantErr: "character 14 is 'O'"},
		"last character changed fails checksum":   {in: "C02717306J9JG361N", wantErr: "fails the MLB checksum"},
		"first character changed fails checksum":  {in: "D02717306J9JG361M", wantErr: "checksum"},
		"swapped neighbours fail the checksum":    {in: "C02713706J9JG361M", wantErr: "checksum"},
		"a 3-weighted character changed fails it": {in: "C12717306J9JG361M", wantErr: "checksum"},
	})
}

func TestValidateSystemUUID(t *testing.T) {
	const msg = "must be a UUID in upper case"
	runChecks(t, ValidateSystemUUID, map[string]checkCase{
		"upper-case UUID is valid": {in: "007076A6-F2A2-4461-BBE5-BAD019F8025A"},
		"lower case is invalid":    {in: "007076a6-f2a2-4461-bbe5-bad019f8025a", wantErr: msg},
		"no dashes is invalid":     {in: "007076A6F2A24461BBE5BAD019F8025A", wantErr: msg},
		"braces are invalid":       {in: "{007076A6-F2A2-4461-BBE5-BAD019F8025A}", wantErr: msg},
		"short group is invalid":   {in: "007076A-F2A2-4461-BBE5-BAD019F8025A", wantErr: msg},
		"non-hex digit is invalid": {in: "007076G6-F2A2-4461-BBE5-BAD019F8025A", wantErr: msg},
		"empty is invalid":         {in: "", wantErr: msg},
	})
}

func TestValidateMACAddress(t *testing.T) {
	const format = "six upper-case hex pairs joined by colons"
	const multicast = "must be a unicast address"
	runChecks(t, ValidateMACAddress, map[string]checkCase{
		"Apple unicast MAC is valid":                {in: "00:0A:27:00:00:01"},
		"another Apple OUI is valid":                {in: "A4:83:E7:12:34:56"},
		"the first Apple OUI is valid":              {in: "00:03:93:FF:FF:FF"},
		"the last Apple OUI is valid":               {in: "FC:FC:48:00:00:00"},
		"lower case is invalid":                     {in: "00:0a:27:00:00:01", wantErr: format},
		"dashes are invalid":                        {in: "00-0A-27-00-00-01", wantErr: format},
		"five octets are invalid":                   {in: "00:0A:27:00:00", wantErr: format},
		"seven octets are invalid":                  {in: "00:0A:27:00:00:01:02", wantErr: format},
		"no separators are invalid":                 {in: "000A27000001", wantErr: format},
		"empty is invalid":                          {in: "", wantErr: format},
		"multicast bit set (01)":                    {in: "01:0A:27:00:00:01", wantErr: multicast},
		"multicast bit set (A5)":                    {in: "A5:83:E7:12:34:56", wantErr: multicast},
		"broadcast is multicast":                    {in: "FF:FF:FF:FF:FF:FF", wantErr: multicast},
		"QEMU's OUI is not Apple's":                 {in: "52:54:00:12:34:56", wantErr: "OUI 52:54:00 is not assigned to Apple in the IEEE MA-L registry"},
		"locally administered is not Apple's":       {in: "02:00:00:00:00:01", wantErr: "OUI 02:00:00 is not assigned to Apple"},
		"all zeros is not Apple's":                  {in: "00:00:00:00:00:00", wantErr: "OUI 00:00:00"},
		"Apple OUI with the local bit is not Apple": {in: "02:0A:27:00:00:01", wantErr: "OUI 02:0A:27"},
		"the message names an OUI to use instead":   {in: "52:54:00:12:34:56", wantErr: "must begin with one of Apple's 1053 OUIs, such as 00:03:93"},
	})
}

func TestValidateROM(t *testing.T) {
	const mac = "00:0A:27:00:00:01"
	const format = "must be 12 upper-case hex digits"
	cases := map[string]struct {
		rom, mac string
		wantErr  string
	}{
		"ROM of the MAC is valid":                   {rom: "000A27000001", mac: mac},
		"ROM of another MAC names the expected ROM": {rom: "000A27000002", mac: mac, wantErr: "must be the MAC address's six bytes, 000A27000001"},
		"lower-case ROM is invalid":                 {rom: "000a27000001", mac: mac, wantErr: format},
		"11 digits are invalid":                     {rom: "000A2700000", mac: mac, wantErr: format},
		"13 digits are invalid":                     {rom: "000A270000010", mac: mac, wantErr: format},
		"colon-separated ROM is invalid":            {rom: "00:0A:27:00:00:01", mac: mac, wantErr: format},
		"empty ROM is invalid":                      {rom: "", mac: mac, wantErr: format},
		"non-canonical MAC skips the match check":   {rom: "FFFFFFFFFFFF", mac: "00:0a:27:00:00:01"},
		"missing MAC skips the match check":         {rom: "000A27000001", mac: ""},
		"bad ROM is reported even without a MAC":    {rom: "XYZ", mac: "", wantErr: format},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidateROM(tc.rom, tc.mac)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}
