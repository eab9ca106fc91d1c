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
	"bytes"
	"strings"
	"testing"
)

// The fuzz targets below feed arbitrary input to everything that reads
// identity values from outside: whatever the input, the answer is a value
// or an error, never a panic, and what is accepted satisfies the package's
// promises. Run one longer with, for example:
//
//	go test -run XXX -fuzz FuzzParseRows -fuzztime 1m ./pkg/identity

func FuzzValidateSerialNumber(f *testing.F) {
	for _, s := range macserialSamples(f) {
		f.Add(s.serial)
	}
	for _, s := range []string{"", "C02TY2ZBHX87", "C02VY2ZBHX87", "C02T02ZBHX87", "c02tm2zbhx87", "C02TM2ZBHX8É", "ZZZZZZZZZZZZ", "000000000000", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		info, err := DecodeSerialNumber(s)
		if (ValidateSerialNumber(s) == nil) != (err == nil) {
			t.Fatalf("ValidateSerialNumber and DecodeSerialNumber disagree on %q", s)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("empty error for %q", s)
			}
			return
		}
		if len(s) != SerialNumberLength {
			t.Fatalf("accepted %q of %d bytes", s, len(s))
		}
		if info.YearOfDecade < 0 || info.YearOfDecade > 9 || info.Week < 1 || info.Week > 53 ||
			info.Line < 0 || info.Line > 3399 || info.Copy < 1 || info.Copy > 34 {
			t.Fatalf("%q decodes out of range: %+v", s, info)
		}
		if got := encodeSerialForTest(info); got != s {
			t.Fatalf("%q decodes to %+v, which encodes back as %q", s, info, got)
		}
	})
}

// encodeSerialForTest writes info back as a serial, the inverse of
// DecodeSerialNumber, to check that decoding loses nothing.
func encodeSerialForTest(info SerialNumberInfo) string {
	half, w := 0, info.Week-1
	if info.Week > weeksInFirstHalf {
		half, w = 1, info.Week-weeksInFirstHalf-1
	}
	a := info.Copy - 1 + firstLineCopy(info.Line)
	rem := info.Line - 68*a
	return info.Location + string([]byte{
		serialYearCodes[2*info.YearOfDecade+half], serialWeekCodes[w],
		base34Digit(a), base34Digit(rem / 34), base34Digit(rem % 34),
	}) + info.ModelCode
}

func FuzzValidateBoardSerialNumber(f *testing.F) {
	for _, s := range macserialSamples(f) {
		f.Add(s.boardSerial)
	}
	for _, s := range []string{"", "C02717306J9JG361N", "00000000000000000", "C02717306J9JGO61M", "c02717306j9jg361m", "ÉÉÉÉÉÉÉÉÉÉÉÉÉÉÉÉÉ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if err := ValidateBoardSerialNumber(s); err != nil {
			return
		}
		if len(s) != BoardSerialNumberLength {
			t.Fatalf("accepted %q of %d bytes", s, len(s))
		}
		// Any single changed character must break the checksum.
		for i := range len(s) {
			b := []byte(s)
			b[i] = base34Digit((base34Value(b[i]) + 1 + i%33) % 34)
			err := ValidateBoardSerialNumber(string(b))
			if err == nil || !strings.Contains(err.Error(), "checksum") {
				t.Fatalf("%q is valid and so is %q, one character apart (%v)", s, b, err)
			}
		}
	})
}

func FuzzValidateMACAddress(f *testing.F) {
	for _, s := range []string{"00:0A:27:00:00:01", "A4:83:E7:12:34:56", "52:54:00:12:34:56", "01:0A:27:00:00:01", "00-0a-27-00-00-01", "", "FF:FF:FF:FF:FF:FF", "00:0A:27:00:00:0G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		canonical := CanonicalMACAddress(s)
		if CanonicalMACAddress(canonical) != canonical {
			t.Fatalf("CanonicalMACAddress is not idempotent on %q", s)
		}
		if err := ValidateMACAddress(s); err != nil {
			return
		}
		if !IsAppleOUI(s) {
			t.Fatalf("accepted %q outside Apple's OUIs", s)
		}
		if canonical != s {
			t.Fatalf("accepted %q, which is not canonical (%q)", s, canonical)
		}
		if err := ValidateROM(ROMFromMAC(s), s); err != nil {
			t.Fatalf("ROMFromMAC(%q) = %q is not a valid ROM for it: %v", s, ROMFromMAC(s), err)
		}
	})
}

func FuzzValidateROM(f *testing.F) {
	f.Add("000A27000001", "00:0A:27:00:00:01")
	f.Add("000A27000002", "00:0A:27:00:00:01")
	f.Add("00:0a:27:00:00:01", "")
	f.Fuzz(func(t *testing.T, rom, mac string) {
		if ValidateROM(rom, mac) == nil && !romPattern.MatchString(rom) {
			t.Fatalf("accepted ROM %q", rom)
		}
		canonical := CanonicalROM(rom)
		if CanonicalROM(canonical) != canonical {
			t.Fatalf("CanonicalROM is not idempotent on %q", rom)
		}
	})
}

func FuzzParseRows(f *testing.F) {
	var csv, tsv strings.Builder
	g := NewGenerator(1, "iMacPro1,1")
	for i := range 3 {
		v := g.Next()
		csv.WriteString(`"` + strings.Join([]string{v.Model, v.SerialNumber, v.BoardSerialNumber, v.SystemUUID, v.MACAddress, "1920", "1080", ""}, `","`) + "\"\n")
		tsv.WriteString(strings.Join([]string{v.Model, v.SerialNumber, v.BoardSerialNumber, v.SystemUUID, v.MACAddress, "1920", "1080", strings.Repeat("-v ", i)}, "\t") + "\r\n")
	}
	for _, s := range []string{
		csv.String(), tsv.String(),
		csvRow1 + "\n" + csvRow2 + "\n", tsvRow1 + "\n" + tsvRow2,
		"DEVICE_MODEL,SERIAL,BOARD_SERIAL,UUID,MAC_ADDRESS,WIDTH,HEIGHT,KERNEL_ARGS\n" + csvRow1,
		"iMacPro1,1,C02TM2ZBHX87,C02717306J9JG361M,007076A6-F2A2-4461-BBE5-BAD019F8025A,00:0A:27:12:34:56,1920,1080,a,b\n",
		csvRow1 + "\n" + csvRow1 + "\n",
		`"iMacPro1,1","C02TX06XHX87`, `""""`, "\"\t\"\n\"", "\xEF\xBB\xBF\n\n\r\n", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, rowErrs, err := ParseRows(bytes.NewReader(data))
		if err != nil && len(rowErrs) != MaxRowErrors {
			// Only too many bad rows may stop an in-memory file.
			t.Fatalf("a file of %d bytes failed as a whole after %d row errors: %v", len(data), len(rowErrs), err)
		}
		lines := map[int]bool{}
		unique := map[string]bool{}
		last := 0
		for _, r := range rows {
			if r.Line <= last {
				t.Fatalf("row lines out of order: %d after %d", r.Line, last)
			}
			last = r.Line
			lines[r.Line] = true
			if err := r.Values.Validate(); err != nil {
				t.Fatalf("line %d was returned but is invalid: %v", r.Line, err)
			}
			if r.Width <= 0 || r.Height <= 0 {
				t.Fatalf("line %d has display %dx%d", r.Line, r.Width, r.Height)
			}
			for _, v := range []string{"s" + r.SerialNumber, "b" + r.BoardSerialNumber, "u" + r.SystemUUID, "m" + r.MACAddress} {
				if unique[v] {
					t.Fatalf("line %d repeats %s of an earlier row", r.Line, v[1:])
				}
				unique[v] = true
			}
		}
		last = 0
		for _, e := range rowErrs {
			if e.Line <= last || lines[e.Line] {
				t.Fatalf("row error on line %d out of order or on a returned row", e.Line)
			}
			last = e.Line
			if e.Reason == "" || len(e.Reason) > 2000 {
				t.Fatalf("line %d: reason of %d bytes", e.Line, len(e.Reason))
			}
		}
	})
}

func FuzzValidateSystemUUID(f *testing.F) {
	for _, s := range []string{"007076A6-F2A2-4461-BBE5-BAD019F8025A", "007076a6-f2a2-4461-bbe5-bad019f8025a", " 007076A6-F2A2-4461-BBE5-BAD019F8025A\n", "", "{007076A6-F2A2-4461-BBE5-BAD019F8025A}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		canonical := CanonicalSystemUUID(s)
		if CanonicalSystemUUID(canonical) != canonical {
			t.Fatalf("CanonicalSystemUUID is not idempotent on %q", s)
		}
		if ValidateSystemUUID(s) == nil && canonical != s {
			t.Fatalf("accepted %q, which is not canonical (%q)", s, canonical)
		}
	})
}
