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
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// macserialSample is one line of testdata/macserial-generated.txt.
type macserialSample struct{ model, serial, boardSerial string }

// macserialSamples returns what macserial generated for every model it
// knows with a 12-character serial (see the file's header).
func macserialSamples(t testing.TB) []macserialSample {
	t.Helper()
	f, err := os.Open("testdata/macserial-generated.txt")
	require.NoError(t, err)
	defer f.Close()
	var out []macserialSample
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		require.Len(t, fields, 3, "testdata line %q", line)
		out = append(out, macserialSample{fields[0], fields[1], fields[2]})
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out)
	return out
}

func TestValidateSerialNumber_AcceptsWhatMacserialGenerates(t *testing.T) {
	samples := macserialSamples(t)
	models := map[string]bool{}
	for _, s := range samples {
		models[s.model] = true
		assert.NoError(t, ValidateSerialNumber(s.serial), "%s serial %s", s.model, s.serial)
	}
	for _, m := range []string{"iMacPro1,1", "MacPro7,1", "iMac20,1", "iMac20,2", "Macmini8,1", "MacBookPro16,1"} {
		assert.True(t, models[m], "testdata has no %s serials", m)
	}
}

func TestDecodeSerialNumber_ReadsEveryField(t *testing.T) {
	cases := map[string]struct {
		in   string
		want SerialNumberInfo
	}{
		// Expected values are what `macserial -i` prints for each serial.
		"iMacPro1,1, 2017 week 18, line 1269 copy 1": {
			in:   "C02TM2ZBHX87",
			want: SerialNumberInfo{Location: "C02", YearOfDecade: 7, Week: 18, Line: 1269, Copy: 1, ModelCode: "HX87"},
		},
		"MacPro7,1, year 3 of a decade, a line above 1155": {
			in:   "F5KK6JZKP7QM",
			want: SerialNumberInfo{Location: "F5K", YearOfDecade: 3, Week: 6, Line: 2365, Copy: 1, ModelCode: "P7QM"},
		},
		"first character of the line counts copies": {
			in:   "C02C1100ABCD",
			want: SerialNumberInfo{Location: "C02", YearOfDecade: 0, Week: 1, Line: 68, Copy: 2, ModelCode: "ABCD"},
		},
		"C is the first half of year 0, 1 its first week": {
			in:   "AAAC1000ZZZZ",
			want: SerialNumberInfo{Location: "AAA", YearOfDecade: 0, Week: 1, Line: 0, Copy: 1, ModelCode: "ZZZZ"},
		},
		"D is the second half of year 0, 1 its week 27": {
			in:   "AAAD1000ZZZZ",
			want: SerialNumberInfo{Location: "AAA", YearOfDecade: 0, Week: 27, Line: 0, Copy: 1, ModelCode: "ZZZZ"},
		},
		"X is week 26 of a first half": {
			in:   "AAAYX000ZZZZ",
			want: SerialNumberInfo{Location: "AAA", YearOfDecade: 9, Week: 26, Line: 0, Copy: 1, ModelCode: "ZZZZ"},
		},
		"Y is week 53 of a second half": {
			in:   "AAAZYZZZZZZZ",
			want: SerialNumberInfo{Location: "AAA", YearOfDecade: 9, Week: 53, Line: 68*33 + 34*33 + 33, Copy: 1, ModelCode: "ZZZZ"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeSerialNumber(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDecodeSerialNumber_ReportsWhyInvalid(t *testing.T) {
	_, err := DecodeSerialNumber("C02TS2ZBHX87")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "character 5 (week) is 'S'")
}

// The year and week characters, as OpenCorePkg's Utilities/macserial
// FORMAT.md tabulates them, written out independently of serial.go's
// derivation so that each checks the other.
const (
	wantYearCodes      = "CDFGHJKLMNPQRSTVWXYZ"
	wantFirstHalfWeeks = "123456789CDFGHJKLMNPQRTVWX"
)

func TestValidateSerialNumber_AcceptsExactlyMacserialsYearAndWeekCodes(t *testing.T) {
	accepted := 0
	for _, y := range []byte(base34Alphabet) {
		for _, w := range []byte(base34Alphabet) {
			serial := "C02" + string([]byte{y, w}) + "2ZBHX87"
			yi := strings.IndexByte(wantYearCodes, y)
			secondHalf := yi%2 == 1
			want := yi >= 0 && (strings.IndexByte(wantFirstHalfWeeks, w) >= 0 || (secondHalf && w == 'Y'))
			err := ValidateSerialNumber(serial)
			if want {
				accepted++
				if assert.NoError(t, err, serial) {
					info, _ := DecodeSerialNumber(serial)
					assert.Equal(t, yi/2, info.YearOfDecade, serial)
					wantWeek := strings.IndexByte(wantFirstHalfWeeks+"Y", w) + 1
					if secondHalf {
						wantWeek += 26
					}
					assert.Equal(t, wantWeek, info.Week, serial)
				}
			} else {
				assert.Error(t, err, serial)
			}
		}
	}
	assert.Equal(t, yearWeekPairs, accepted, "every valid pair, and no other, is accepted")
}

func TestValidateSerialNumber_AcceptsAnyLocationLineAndModelCode(t *testing.T) {
	// macserial reports unknown locations and model codes as unknown, not
	// invalid, and every line spelling decodes.
	for _, c := range []byte(base34Alphabet) {
		for _, pos := range []int{0, 1, 2, 5, 6, 7, 8, 9, 10, 11} {
			b := []byte("C02TM2ZBHX87")
			b[pos] = c
			assert.NoError(t, ValidateSerialNumber(string(b)), string(b))
		}
	}
}
