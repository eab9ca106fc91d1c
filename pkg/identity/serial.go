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
	"strings"
	"unicode/utf8"
)

// A system serial number in the 12-character format Macs have used since
// 2010, and the only one macserial generates for the models macOS VMs
// emulate, reads LLL Y W SSS PPPP:
//
//	LLL   manufacturing location (C02, F5K, ...)
//	Y     year within a decade, and which half of that year
//	W     week within that half-year
//	SSS   production line and copy, a base-34 number
//	PPPP  model code (HX87 is an iMacPro1,1)
//
// This reading is macserial's (OpenCorePkg, Utilities/macserial: FORMAT.md
// describes it, macserial.c's get_serial_info decodes it and modelinfo.h
// holds its tables). Locations and model codes are open-ended lists that
// macserial reports as "unknown" rather than invalid, so any base-34
// characters are accepted there; the year and week characters are closed
// encodings, and a serial whose year or week character decodes to nothing is
// one macserial calls invalid, so it is rejected here.
//
// The older 11-character format (LL Y WW SSS PPP, before 2013) and the random
// 10-character serials of recent Apple-silicon Macs are not accepted: neither
// fits SerialNumberLength, and no model a macOS VM emulates used them.

// Positions (0-based) of the fields of a serial number.
const (
	serialLocationEnd = 3
	serialYearPos     = 3
	serialWeekPos     = 4
	serialLineStart   = 5
	serialLineEnd     = 8
)

var (
	// serialYearCodes lists the year characters in order: the character at
	// 2k is the first half (weeks 1-26) of year k of a decade, the one at
	// 2k+1 its second half (weeks 27-53). The characters are the base-34
	// letters from C on, without E and U, which Apple does not use here.
	// Which decade (2010s or 2020s) is not encoded: macserial tells them
	// apart by model.
	serialYearCodes = base34Letters('C', 'Z', "EU")

	// serialWeekCodes lists the week characters in order: week w of a
	// half-year is serialWeekCodes[w-1]. The digits 1-9 come first, then the
	// base-34 letters from C to Y without E, S and U. A first half-year has
	// 26 weeks, so its last character is X; only a second half has a 27th
	// (week 53 of the year), written Y.
	serialWeekCodes = "123456789" + base34Letters('C', 'Y', "ESU")
)

const (
	weeksInFirstHalf  = 26
	weeksInSecondHalf = 27
)

// base34Letters returns the base-34 letters from first to last, in order,
// leaving out those in skip.
func base34Letters(first, last byte, skip string) string {
	var b strings.Builder
	for _, c := range []byte(base34Alphabet) {
		if c >= first && c <= last && c >= 'A' && strings.IndexByte(skip, c) < 0 {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// SerialNumberInfo is what a system serial number says about the machine,
// as macserial decodes it.
type SerialNumberInfo struct {
	// Location is the manufacturing location code, such as C02.
	Location string
	// YearOfDecade is the last digit of the manufacturing year (0-9). The
	// decade is not encoded; macserial infers it from the model.
	YearOfDecade int
	// Week is the manufacturing week of the year, 1-53, counted in 7-day
	// steps from 1 January.
	Week int
	// Line is the production line, 0-3399.
	Line int
	// Copy is the 1-based number of the unit on its line.
	Copy int
	// ModelCode is the product code, such as HX87 for an iMacPro1,1.
	ModelCode string
}

// DecodeSerialNumber reads a 12-character system serial number the way
// macserial does, and reports why s is not one.
func DecodeSerialNumber(s string) (SerialNumberInfo, error) {
	if n := utf8.RuneCountInString(s); n != SerialNumberLength {
		return SerialNumberInfo{}, fmt.Errorf("must be %d characters, not %d", SerialNumberLength, n)
	}
	if err := checkBase34(s); err != nil {
		return SerialNumberInfo{}, err
	}
	// Every character is now one byte.
	year, week := s[serialYearPos], s[serialWeekPos]
	y := strings.IndexByte(serialYearCodes, year)
	if y < 0 {
		return SerialNumberInfo{}, fmt.Errorf("character %d (year) is %q: must be a year code, one of %s (macserial's encoding of the year and its half)",
			serialYearPos+1, year, serialYearCodes)
	}
	secondHalf := y%2 == 1
	w := strings.IndexByte(serialWeekCodes, week) + 1
	switch {
	case w == 0:
		return SerialNumberInfo{}, fmt.Errorf("character %d (week) is %q: must be a week code, one of %s (macserial's encoding of the week within a half-year)",
			serialWeekPos+1, week, serialWeekCodes)
	case !secondHalf && w > weeksInFirstHalf:
		return SerialNumberInfo{}, fmt.Errorf("character %d (week) is %q, week %d of a half-year, but character %d (year) %q is a first-half code, whose weeks are %s",
			serialWeekPos+1, week, w, serialYearPos+1, year, serialWeekCodes[:weeksInFirstHalf])
	}
	if secondHalf {
		w += weeksInFirstHalf
	}
	// The three line characters are not a plain base-34 number: macserial
	// reads them as 68*a + 34*b + c. Several spellings give the same line;
	// the first character counts the copies made on it (see FORMAT.md,
	// "Production line and copy").
	a, b, c := base34Value(s[serialLineStart]), base34Value(s[serialLineStart+1]), base34Value(s[serialLineStart+2])
	line := 68*a + 34*b + c
	return SerialNumberInfo{
		Location:     s[:serialLocationEnd],
		YearOfDecade: y / 2,
		Week:         w,
		Line:         line,
		Copy:         a - firstLineCopy(line) + 1,
		ModelCode:    s[serialLineEnd:],
	}, nil
}

// maxLineRemainder is the largest 34*b + c the last two line characters can
// write.
const maxLineRemainder = 34*33 + 33

// firstLineCopy returns the smallest first line character that can spell
// line, given that the other two write at most maxLineRemainder.
func firstLineCopy(line int) int {
	if line <= maxLineRemainder {
		return 0
	}
	return (line - maxLineRemainder + 67) / 68
}

// checkBase34 reports the first character of s that is not a base-34 digit.
func checkBase34(s string) error {
	pos := 0
	for _, r := range s {
		pos++
		if r >= utf8.RuneSelf || base34Value(byte(r)) < 0 {
			return fmt.Errorf("character %d is %q: must use only digits and upper-case letters other than I and O", pos, r)
		}
	}
	return nil
}
