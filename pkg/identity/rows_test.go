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
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two serial sets exactly as generate-unique-machine-values.sh appends them
// to its CSV and TSV files (serials and board serials from macserial, MACs
// from Apple's OUIs).
const (
	csvRow1 = `"iMacPro1,1","C02TM2ZBHX87","C02717306J9JG361M","007076A6-F2A2-4461-BBE5-BAD019F8025A","00:0A:27:12:34:56","1920","1080",""`
	csvRow2 = `"iMacPro1,1","C02TX06XHX87","C02726902QXJG361F","3A1B6C0E-5D2F-4A8B-9C7D-1E2F3A4B5C6D","A4:83:E7:AB:CD:EF","2560","1440","-v keepsyms=1"`
	tsvRow1 = "iMacPro1,1\tC02TM2ZBHX87\tC02717306J9JG361M\t007076A6-F2A2-4461-BBE5-BAD019F8025A\t00:0A:27:12:34:56\t1920\t1080\t"
	tsvRow2 = "iMacPro1,1\tC02TX06XHX87\tC02726902QXJG361F\t3A1B6C0E-5D2F-4A8B-9C7D-1E2F3A4B5C6D\tA4:83:E7:AB:CD:EF\t2560\t1440\t-v keepsyms=1"
)

func wantRow1(line int) Row {
	return Row{
		Line: line,
		Values: Values{
			Model: "iMacPro1,1", SerialNumber: "C02TM2ZBHX87", BoardSerialNumber: "C02717306J9JG361M",
			SystemUUID: "007076A6-F2A2-4461-BBE5-BAD019F8025A", MACAddress: "00:0A:27:12:34:56", ROM: "000A27123456",
		},
		Width: 1920, Height: 1080,
	}
}

func wantRow2(line int) Row {
	return Row{
		Line: line,
		Values: Values{
			Model: "iMacPro1,1", SerialNumber: "C02TX06XHX87", BoardSerialNumber: "C02726902QXJG361F",
			SystemUUID: "3A1B6C0E-5D2F-4A8B-9C7D-1E2F3A4B5C6D", MACAddress: "A4:83:E7:AB:CD:EF", ROM: "A483E7ABCDEF",
		},
		Width: 2560, Height: 1440, KernelArgs: "-v keepsyms=1",
	}
}

func withKernelArgs(r Row, args string) Row {
	r.KernelArgs = args
	return r
}

func TestParseRows_ReadsWhatTheGeneratorWrites(t *testing.T) {
	cases := map[string]struct {
		in   string
		want []Row
	}{
		"CSV, every field quoted": {
			in:   csvRow1 + "\n" + csvRow2 + "\n",
			want: []Row{wantRow1(1), wantRow2(2)},
		},
		"TSV, no field quoted": {
			in:   tsvRow1 + "\n" + tsvRow2 + "\n",
			want: []Row{wantRow1(1), wantRow2(2)},
		},
		"CRLF line ends": {
			in:   csvRow1 + "\r\n" + csvRow2 + "\r\n",
			want: []Row{wantRow1(1), wantRow2(2)},
		},
		"no newline after the last row": {
			in:   tsvRow1 + "\n" + tsvRow2,
			want: []Row{wantRow1(1), wantRow2(2)},
		},
		"blank lines are skipped but counted": {
			in:   "\n  \n" + csvRow1 + "\n\r\n\t\n" + csvRow2 + "\n\n",
			want: []Row{wantRow1(3), wantRow2(6)},
		},
		"the header the script prints is skipped": {
			in:   "DEVICE_MODEL,SERIAL,BOARD_SERIAL,UUID,MAC_ADDRESS,WIDTH,HEIGHT,KERNEL_ARGS\n" + csvRow1 + "\n",
			want: []Row{wantRow1(2)},
		},
		"the TSV header is skipped": {
			in:   strings.Join(RowColumns[:], "\t") + "\n" + tsvRow1 + "\n",
			want: []Row{wantRow1(2)},
		},
		"a UTF-8 byte order mark is ignored": {
			in:   "\xEF\xBB\xBF" + csvRow1 + "\n",
			want: []Row{wantRow1(1)},
		},
		"unquoted CSV, the model split at its comma": {
			in:   "iMacPro1,1,C02TM2ZBHX87,C02717306J9JG361M,007076A6-F2A2-4461-BBE5-BAD019F8025A,00:0A:27:12:34:56,1920,1080,\n",
			want: []Row{wantRow1(1)},
		},
		"unquoted CSV, kernel arguments with commas": {
			in:   "iMacPro1,1,C02TM2ZBHX87,C02717306J9JG361M,007076A6-F2A2-4461-BBE5-BAD019F8025A,00:0A:27:12:34:56,1920,1080,a=1,b=2\n",
			want: []Row{withKernelArgs(wantRow1(1), "a=1,b=2")},
		},
		"quoted kernel arguments with commas": {
			in:   strings.TrimSuffix(csvRow1, `""`) + `"a=1,b=2"` + "\n",
			want: []Row{withKernelArgs(wantRow1(1), "a=1,b=2")},
		},
		"unescaped quotes in kernel arguments are kept": {
			in:   strings.TrimSuffix(csvRow1, `""`) + `"-v debug="0x100" x"` + "\n",
			want: []Row{withKernelArgs(wantRow1(1), `-v debug="0x100" x`)},
		},
		"an unescaped quote ending kernel arguments is kept": {
			in:   strings.TrimSuffix(csvRow1, `""`) + `"-v debug="0x100""` + "\n",
			want: []Row{withKernelArgs(wantRow1(1), `-v debug="0x100"`)},
		},
		"doubled quotes are one quote": {
			in:   strings.TrimSuffix(csvRow1, `""`) + `"a=""b"" c"` + "\n",
			want: []Row{withKernelArgs(wantRow1(1), `a="b" c`)},
		},
		"quoted TSV": {
			in:   `"iMacPro1,1"` + "\t" + `"C02TM2ZBHX87"` + "\t" + `"C02717306J9JG361M"` + "\t" + `"007076A6-F2A2-4461-BBE5-BAD019F8025A"` + "\t" + `"00:0A:27:12:34:56"` + "\t" + `"1920"` + "\t" + `"1080"` + "\t" + `""` + "\n",
			want: []Row{wantRow1(1)},
		},
		"spaces around fields and quotes are dropped": {
			in:   ` "iMacPro1,1" , C02TM2ZBHX87 ,"C02717306J9JG361M" , 007076A6-F2A2-4461-BBE5-BAD019F8025A,00:0A:27:12:34:56, 1920,1080 , ""` + "\n",
			want: []Row{wantRow1(1)},
		},
		"no kernel arguments column": {
			in:   strings.TrimSuffix(csvRow1, `,""`) + "\n",
			want: []Row{wantRow1(1)},
		},
		"UUID and MAC are canonicalized, the ROM derived": {
			in:   `"iMacPro1,1","C02TM2ZBHX87","C02717306J9JG361M","007076a6-f2a2-4461-bbe5-bad019f8025a","00-0a-27-12-34-56","1920","1080",""` + "\n",
			want: []Row{wantRow1(1)},
		},
		"empty input has no rows": {in: ""},
		"a header alone has no rows": {
			in: "DEVICE_MODEL,SERIAL,BOARD_SERIAL,UUID,MAC_ADDRESS,WIDTH,HEIGHT,KERNEL_ARGS\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// execute
			rows, rowErrs, err := ParseRows(strings.NewReader(tc.in))
			// assert
			require.NoError(t, err)
			assert.Empty(t, rowErrs)
			assert.Equal(t, tc.want, rows)
		})
	}
}

func TestParseRows_ReportsBadRowsAndReadsTheRest(t *testing.T) {
	replace := func(row, old, new string) string {
		require.Contains(t, row, old)
		return strings.Replace(row, old, new, 1)
	}
	cases := map[string]struct {
		bad        string
		wantReason []string
	}{
		"serial with an invalid week": {
			bad:        replace(csvRow2, "C02TX06XHX87", "C02TS06XHX87"),
			wantReason: []string{`serialNumber "C02TS06XHX87": character 5 (week) is 'S'`},
		},
		"board serial with a wrong checksum": {
			bad:        replace(csvRow2, "C02726902QXJG361F", "C02726902QXJG361G"),
			wantReason: []string{`boardSerialNumber "C02726902QXJG361G": fails the MLB checksum`},
		},
		"MAC outside Apple's OUIs": {
			bad:        replace(csvRow2, "A4:83:E7:AB:CD:EF", "52:54:00:12:34:56"),
			wantReason: []string{`macAddress "52:54:00:12:34:56": OUI 52:54:00 is not assigned to Apple`},
		},
		"malformed UUID": {
			bad:        replace(csvRow2, "3A1B6C0E-5D2F-4A8B-9C7D-1E2F3A4B5C6D", "not-a-uuid"),
			wantReason: []string{`systemUUID "NOT-A-UUID": must be a UUID`},
		},
		"malformed model": {
			bad:        replace(csvRow2, `"iMacPro1,1"`, `"iMac Pro"`),
			wantReason: []string{`model "iMac Pro": must be an SMBIOS model identifier`},
		},
		"every problem of a row is reported": {
			bad: replace(replace(csvRow2, "C02TX06XHX87", "C02TX06XHX8"), `"2560"`, `"0"`),
			wantReason: []string{
				`serialNumber "C02TX06XHX8": must be 12 characters, not 11`,
				`width "0": must be a positive whole number of pixels`,
			},
		},
		"missing serial": {
			bad:        replace(csvRow2, `"C02TX06XHX87"`, `""`),
			wantReason: []string{"serialNumber is missing"},
		},
		"negative height": {
			bad:        replace(csvRow2, `"1440"`, `"-1440"`),
			wantReason: []string{`height "-1440": must be a positive whole number of pixels`},
		},
		"width that is not a number": {
			bad:        replace(csvRow2, `"2560"`, `"wide"`),
			wantReason: []string{`width "wide": must be a positive`},
		},
		"width too large for a display": {
			bad:        replace(csvRow2, `"2560"`, `"99999999999"`),
			wantReason: []string{`width "99999999999": must be a positive`},
		},
		"too few fields": {
			bad:        `"iMacPro1,1","C02TX06XHX87","C02726902QXJG361F"`,
			wantReason: []string{"has 3 fields separated by commas, want 8: DEVICE_MODEL, SERIAL, BOARD_SERIAL, UUID, MAC_ADDRESS, WIDTH, HEIGHT, KERNEL_ARGS"},
		},
		"unclosed quote": {
			bad:        `"iMacPro1,1","C02TX06XHX87`,
			wantReason: []string{"field 2 opens a quote it never closes"},
		},
		"kernel arguments too long for boot-args": {
			bad:        replace(csvRow2, "-v keepsyms=1", strings.Repeat("x", 1025)),
			wantReason: []string{"kernel arguments are 1025 bytes long: must be at most 1024"},
		},
		"control character in kernel arguments": {
			bad:        replace(csvRow2, "-v keepsyms=1", "-v\x00"),
			wantReason: []string{`kernel arguments contain the control character '\x00'`},
		},
		"duplicate serial": {
			bad:        replace(replace(replace(csvRow1, "C02717306J9JG361M", "C02726902QXJG361F"), "007076A6", "117076A6"), "12:34:56", "12:34:57"),
			wantReason: []string{`serialNumber "C02TM2ZBHX87" is also on line 1`},
		},
		"duplicate of every unique value": {
			bad: csvRow1,
			wantReason: []string{
				`serialNumber "C02TM2ZBHX87" is also on line 1`, `boardSerialNumber "C02717306J9JG361M" is also on line 1`,
				`systemUUID "007076A6-F2A2-4461-BBE5-BAD019F8025A" is also on line 1`, `macAddress "00:0A:27:12:34:56" is also on line 1`,
			},
		},
		"MAC repeated in another spelling": {
			bad:        replace(csvRow2, "A4:83:E7:AB:CD:EF", "00-0a-27-12-34-56"),
			wantReason: []string{`macAddress "00:0A:27:12:34:56" is also on line 1`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// setup: a good row, the bad one, and a good row after it
			third := replace(replace(replace(replace(csvRow2, "C02TX06XHX87", "C02TM2ZBHX88"), "C02726902QXJG361F", "C02811401GUJG36JA"), "3A1B6C0E", "4A1B6C0E"), "AB:CD:EF", "AB:CD:F0")
			in := csvRow1 + "\n" + tc.bad + "\n" + third + "\n"
			// execute
			rows, rowErrs, err := ParseRows(strings.NewReader(in))
			// assert
			require.NoError(t, err)
			require.Len(t, rowErrs, 1, "%v", rowErrs)
			assert.Equal(t, 2, rowErrs[0].Line)
			for _, want := range tc.wantReason {
				assert.Contains(t, rowErrs[0].Reason, want)
			}
			assert.Equal(t, fmt.Sprintf("line 2: %s", rowErrs[0].Reason), rowErrs[0].Error())
			require.Len(t, rows, 2)
			assert.Equal(t, 1, rows[0].Line)
			assert.Equal(t, 3, rows[1].Line)
		})
	}
}

func TestParseRows_BadRowKeepsItsValidSerial(t *testing.T) {
	for name, tc := range map[string]struct {
		bad        string
		wantSerial string
	}{
		"another value invalid":   {strings.Replace(csvRow2, "C02726902QXJG361F", "C02726902QXJG361G", 1), "C02TX06XHX87"},
		"a value repeated":        {csvRow1, "C02TM2ZBHX87"},
		"the serial invalid":      {strings.Replace(csvRow2, "C02TX06XHX87", "C02TX06XHX8", 1), ""},
		"the fields not readable": {`"iMacPro1,1","C02TX06XHX87","C02726902QXJG361F"`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, rowErrs, err := ParseRows(strings.NewReader(csvRow1 + "\n" + tc.bad + "\n"))
			require.NoError(t, err)
			require.Len(t, rowErrs, 1)
			assert.Equal(t, tc.wantSerial, rowErrs[0].Serial)
		})
	}
}

func TestParseRows_DecidesTheFormatFromTheFirstLine(t *testing.T) {
	// A tab on a later line of a CSV file does not make it TSV.
	rows, rowErrs, err := ParseRows(strings.NewReader(csvRow1 + "\n" + tsvRow2 + "\n" + csvRow2 + "\n"))
	require.NoError(t, err)
	require.Len(t, rowErrs, 1)
	assert.Equal(t, 2, rowErrs[0].Line)
	assert.Contains(t, rowErrs[0].Reason, "has 2 fields separated by commas")
	assert.Equal(t, []Row{wantRow1(1), wantRow2(3)}, rows)
}

func TestParseRows_SkipsOverlongLinesWithoutHoldingThem(t *testing.T) {
	long := strings.Repeat("x", MaxRowLineLength+1)
	// Spaces after the last field's closing quote are allowed and dropped.
	exactlyMax := csvRow1 + strings.Repeat(" ", MaxRowLineLength-len(csvRow1))
	require.Equal(t, MaxRowLineLength, len(exactlyMax))
	cases := map[string]struct {
		in         string
		wantRows   []int
		wantErrors []int
	}{
		"long line between good rows":      {in: csvRow1 + "\n" + long + "\n" + csvRow2 + "\n", wantRows: []int{1, 3}, wantErrors: []int{2}},
		"very long line between good rows": {in: csvRow1 + "\n" + strings.Repeat(long, 5) + "\n" + csvRow2 + "\n", wantRows: []int{1, 3}, wantErrors: []int{2}},
		"long last line without newline":   {in: csvRow1 + "\n" + strings.Repeat(long, 3), wantRows: []int{1}, wantErrors: []int{2}},
		"long line with CRLF":              {in: long + "\r\n" + csvRow1 + "\r\n", wantRows: []int{2}, wantErrors: []int{1}},
		"a line of exactly the limit is read": {
			in: exactlyMax + "\r\n" + csvRow2 + "\n", wantRows: []int{1, 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rows, rowErrs, err := ParseRows(strings.NewReader(tc.in))
			require.NoError(t, err)
			var gotRows, gotErrs []int
			for _, r := range rows {
				gotRows = append(gotRows, r.Line)
			}
			for _, e := range rowErrs {
				gotErrs = append(gotErrs, e.Line)
				assert.Contains(t, e.Reason, "is longer than 65536 bytes")
			}
			assert.Equal(t, tc.wantRows, gotRows)
			assert.Equal(t, tc.wantErrors, gotErrs)
		})
	}
}

func TestParseRows_RefusesTooManyRows(t *testing.T) {
	// setup: three rows, a limit of two
	in := csvRow1 + "\n" + "bad\n" + csvRow2 + "\n"
	// execute
	rows, rowErrs, err := parseRows(strings.NewReader(in), 2, 10)
	// assert
	require.Error(t, err)
	assert.Equal(t, "more than 2 rows: split the file", err.Error())
	assert.Equal(t, []Row{wantRow1(1)}, rows, "rows read before the limit are returned")
	assert.Len(t, rowErrs, 1)
}

func TestParseRows_RefusesTooManyBadRows(t *testing.T) {
	// setup: two bad rows, a limit of one
	in := "bad\n" + csvRow1 + "\n" + "bad\n" + csvRow2 + "\n"
	// execute
	rows, rowErrs, err := parseRows(strings.NewReader(in), 10, 1)
	// assert
	require.Error(t, err)
	assert.Equal(t, "more than 1 bad rows, the last on line 3: is this a serial-set file from osx-serial-generator?", err.Error())
	assert.Equal(t, []Row{wantRow1(2)}, rows)
	assert.Len(t, rowErrs, 1)
}

func TestParseRows_ReportsReadErrors(t *testing.T) {
	boom := errors.New("disk on fire")
	r := io.MultiReader(strings.NewReader(csvRow1+"\n"), &failingReader{err: boom})
	rows, _, err := ParseRows(r)
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "reading line 2")
	assert.Equal(t, []Row{wantRow1(1)}, rows)
}

type failingReader struct{ err error }

func (f *failingReader) Read([]byte) (int, error) { return 0, f.err }

func TestParseRows_ShortensLongValuesInMessages(t *testing.T) {
	in := strings.Replace(csvRow1, "C02TM2ZBHX87", strings.Repeat("Z", 1000), 1)
	_, rowErrs, err := ParseRows(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, rowErrs, 1)
	assert.Contains(t, rowErrs[0].Reason, `serialNumber "`+strings.Repeat("Z", maxQuotedValue)+`"...: must be 12 characters, not 1000`)
	assert.Less(t, len(rowErrs[0].Reason), 200)
}

func TestSplitFields(t *testing.T) {
	cases := map[string]struct {
		in      string
		sep     byte
		want    []string
		wantErr string
	}{
		"plain":                        {in: "a,b,c", sep: ',', want: []string{"a", "b", "c"}},
		"empty line is one empty":      {in: "", sep: ',', want: []string{""}},
		"trailing separator":           {in: "a,", sep: ',', want: []string{"a", ""}},
		"quoted with separator inside": {in: `"a,b",c`, sep: ',', want: []string{"a,b", "c"}},
		"quoted then trailing sep":     {in: `"a",`, sep: ',', want: []string{"a", ""}},
		"empty quoted":                 {in: `"",""`, sep: ',', want: []string{"", ""}},
		"doubled quote":                {in: `"a""b"`, sep: ',', want: []string{`a"b`}},
		"stray quote kept":             {in: `"a"b",c`, sep: ',', want: []string{`a"b`, "c"}},
		"quote inside unquoted kept":   {in: `a"b,c`, sep: ',', want: []string{`a"b`, "c"}},
		"tabs":                         {in: "a\t\"b\tc\"\td", sep: '\t', want: []string{"a", "b\tc", "d"}},
		"commas are data in TSV":       {in: "a,b\tc", sep: '\t', want: []string{"a,b", "c"}},
		"unclosed quote":               {in: `a,"b`, sep: ',', wantErr: "field 2 opens a quote it never closes"},
		"lone quote":                   {in: `"`, sep: ',', wantErr: "field 1 opens a quote it never closes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := splitFields(tc.in, tc.sep)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tc.wantErr, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseRows_ReadsFilesTheGeneratorWrote(t *testing.T) {
	// testdata/osx-serial-generator.{csv,tsv} are the files
	// generate-unique-machine-values.sh (osx-serial-generator 3.1) wrote for
	// 5 identities each of iMacPro1,1, MacPro7,1 (2560x1440), iMac20,1 and
	// Macmini8,1, run with macserial 2.1.8 and Apple's OUIs as its vendor
	// list.
	read := func(name string) []Row {
		f, err := os.Open("testdata/" + name)
		require.NoError(t, err)
		defer f.Close()
		rows, rowErrs, err := ParseRows(f)
		require.NoError(t, err)
		require.Empty(t, rowErrs)
		return rows
	}
	csv, tsv := read("osx-serial-generator.csv"), read("osx-serial-generator.tsv")
	require.Len(t, csv, 20)
	assert.Equal(t, csv, tsv, "the CSV and TSV hold the same identities")
	models := map[string]int{}
	for _, r := range csv {
		models[r.Model]++
		assert.Equal(t, ROMFromMAC(r.MACAddress), r.ROM)
	}
	assert.Equal(t, map[string]int{"iMacPro1,1": 5, "MacPro7,1": 5, "iMac20,1": 5, "Macmini8,1": 5}, models)
	assert.Equal(t, 2560, csv[5].Width)
}
