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
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The rows read here are the serial sets osx-serial-generator
// (generate-unique-machine-values.sh) appends to its .csv and .tsv files,
// one identity a line and no header line:
//
//	"iMacPro1,1","C02TM2ZBHX87","C02717306J9JG361M","007076A6-...","00:0A:27:12:34:56","1920","1080",""
//	iMacPro1,1<TAB>C02TM2ZBHX87<TAB>C02717306J9JG361M<TAB>...<TAB>1920<TAB>1080<TAB>
//
// The CSV quotes every field but escapes nothing, and the TSV quotes none.
// Files edited by hand or by a spreadsheet drift from that, so the reader is
// lenient where it can be without guessing: fields may be quoted or not, a
// doubled quote inside a quoted field is one quote, a quote that does not
// end a field is kept, surrounding spaces are dropped, blank lines, a UTF-8
// byte order mark and CRLF line ends are ignored, and a first line that is
// the column header the script prints is skipped. The ROM is not in the
// file: the script derives it from the MAC, and so does ParseRows.

// RowColumns are the columns of a row, in order, as osx-serial-generator
// names them.
var RowColumns = [...]string{"DEVICE_MODEL", "SERIAL", "BOARD_SERIAL", "UUID", "MAC_ADDRESS", "WIDTH", "HEIGHT", "KERNEL_ARGS"}

// Bounds on what ParseRows reads, so that a hostile or mistaken file costs a
// bounded amount of memory (tens of megabytes for a full file of long
// rows): a line longer than MaxRowLineLength is reported and skipped without
// being held, kernel arguments longer than MaxKernelArgsLength are an error,
// and a file of more than MaxRows rows, or with more than MaxRowErrors bad
// ones, is refused. MaxRows is twice the largest identity pool DockerIOS is
// designed for; a file with thousands of bad rows is the wrong file.
const (
	MaxRowLineLength    = 64 << 10
	MaxRows             = 200_000
	MaxRowErrors        = 1000
	MaxKernelArgsLength = 1024
)

// Row is one identity read from a serial-set file.
type Row struct {
	// Line is the 1-based line number of the row in its file.
	Line int
	// Values are canonical and valid; ROM is derived from the MAC address.
	Values
	// Width and Height are the display size in pixels.
	Width, Height int
	// KernelArgs are extra boot-args, possibly empty.
	KernelArgs string
}

// RowError says why the row on a line was not read.
type RowError struct {
	Line int
	// Serial is the row's serial number when its fields could be read and
	// the serial is valid, so that a report can name the row by it; an
	// invalid one is only in Reason, quoted and shortened.
	Serial string
	Reason string
}

func (e RowError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

var (
	// An SMBIOS model written without quotes splits at its comma: the first
	// part is the family and major revision, the second the minor.
	unquotedModelMajor = regexp.MustCompile(`^[A-Za-z]{2,32}[0-9]{1,3}$`)
	unquotedModelMinor = regexp.MustCompile(`^[0-9]{1,3}$`)
	positiveInteger    = regexp.MustCompile(`^[0-9]{1,9}$`)

	utf8BOM = []byte("\xEF\xBB\xBF")
)

// ParseRows reads serial sets in osx-serial-generator's CSV or TSV format
// (decided once per file: TSV if its first non-blank line has a tab). It
// returns the rows that hold a valid identity, in order, and for every
// other non-blank line a RowError; one bad row never stops the rest being
// read. A row whose serial, board serial, system UUID or MAC address repeats
// an earlier row's is an error too, since no two identities may share one.
// The error is for the file as a whole (a read error, or more than MaxRows
// rows); the rows and row errors read until then are returned with it.
func ParseRows(r io.Reader) ([]Row, []RowError, error) {
	return parseRows(r, MaxRows, MaxRowErrors)
}

// parseRows is ParseRows with limits tests can lower.
func parseRows(r io.Reader, maxRows, maxErrors int) ([]Row, []RowError, error) {
	p := rowParser{maxRows: maxRows, maxErrors: maxErrors, seen: map[string]map[string]int{}}
	// Room for a longest line and its CRLF, so that ReadSlice only fails
	// with ErrBufferFull on a line that is too long anyway.
	br := bufio.NewReaderSize(r, MaxRowLineLength+2)
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		tooLong := false
		for errors.Is(err, bufio.ErrBufferFull) {
			// Drop the rest of the line without keeping it.
			tooLong = true
			_, err = br.ReadSlice('\n')
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return p.rows, p.errs, fmt.Errorf("reading line %d: %w", lineNo, err)
		}
		eof := err != nil
		if eof && len(line) == 0 && !tooLong {
			return p.rows, p.errs, nil
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if lineNo == 1 {
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		if tooLong || len(line) > MaxRowLineLength {
			if ferr := p.fail(lineNo, "", fmt.Sprintf("is longer than %d bytes; a row is a few hundred", MaxRowLineLength)); ferr != nil {
				return p.rows, p.errs, ferr
			}
		} else if ferr := p.parseLine(lineNo, string(line)); ferr != nil {
			return p.rows, p.errs, ferr
		}
		if eof {
			return p.rows, p.errs, nil
		}
	}
}

type rowParser struct {
	maxRows, maxErrors int
	// sep is the field separator, 0 until the first non-blank line decides.
	sep byte
	// started is set once a non-blank line has been read.
	started bool
	// seen maps a field name to the values valid rows have used, and the
	// line that used each.
	seen map[string]map[string]int
	rows []Row
	errs []RowError
}

// fail records a row error, or returns a file error once there are too many
// rows to keep.
func (p *rowParser) fail(line int, serial, reason string) error {
	if err := p.checkCount(); err != nil {
		return err
	}
	if len(p.errs) >= p.maxErrors {
		return fmt.Errorf("more than %d bad rows, the last on line %d: is this a serial-set file from osx-serial-generator?", p.maxErrors, line)
	}
	p.errs = append(p.errs, RowError{Line: line, Serial: serial, Reason: reason})
	return nil
}

func (p *rowParser) checkCount() error {
	if len(p.rows)+len(p.errs) >= p.maxRows {
		return fmt.Errorf("more than %d rows: split the file", p.maxRows)
	}
	return nil
}

func (p *rowParser) parseLine(lineNo int, line string) error {
	if strings.TrimSpace(line) == "" {
		return nil
	}
	first := !p.started
	p.started = true
	if p.sep == 0 {
		p.sep = ','
		if strings.IndexByte(line, '\t') >= 0 {
			p.sep = '\t'
		}
	}
	fields, err := splitFields(line, p.sep)
	if err != nil {
		return p.fail(lineNo, "", err.Error())
	}
	if first && isHeader(fields) {
		return nil
	}
	fields, err = p.normalize(fields)
	if err != nil {
		return p.fail(lineNo, "", err.Error())
	}
	row, problems := buildRow(lineNo, fields)
	if len(problems) == 0 {
		problems = p.duplicates(row)
	}
	if len(problems) > 0 {
		serial := row.SerialNumber
		if ValidateSerialNumber(serial) != nil {
			serial = ""
		}
		return p.fail(lineNo, serial, strings.Join(problems, "; "))
	}
	if err := p.checkCount(); err != nil {
		return err
	}
	p.remember(row)
	p.rows = append(p.rows, row)
	return nil
}

// isHeader reports whether fields are the column names the script prints
// above the file's contents.
func isHeader(fields []string) bool {
	return len(fields) > 0 && strings.EqualFold(strings.TrimSpace(fields[0]), RowColumns[0])
}

// normalize returns exactly len(RowColumns) fields, undoing what an
// unquoted CSV does to the model and to kernel arguments with commas.
func (p *rowParser) normalize(fields []string) ([]string, error) {
	n := len(RowColumns)
	if p.sep == ',' && len(fields) > n && unquotedModelMajor.MatchString(fields[0]) && unquotedModelMinor.MatchString(fields[1]) {
		fields = append([]string{fields[0] + "," + fields[1]}, fields[2:]...)
	}
	switch {
	case len(fields) > n:
		// Only the last column is free text, so extra separators belong
		// to it.
		fields = append(fields[:n-1:n-1], strings.Join(fields[n-1:], string(p.sep)))
	case len(fields) == n-1:
		// No kernel arguments column at all: the same as an empty one.
		fields = append(fields, "")
	case len(fields) < n-1:
		sepName := "commas"
		if p.sep == '\t' {
			sepName = "tabs"
		}
		return nil, fmt.Errorf("has %d fields separated by %s, want %d: %s", len(fields), sepName, n, strings.Join(RowColumns[:], ", "))
	}
	return fields, nil
}

// buildRow canonicalizes and validates the fields of a row, returning every
// problem found.
func buildRow(lineNo int, f []string) (Row, []string) {
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	mac := CanonicalMACAddress(f[4])
	row := Row{
		Line: lineNo,
		Values: Values{
			Model:             f[0],
			SerialNumber:      f[1],
			BoardSerialNumber: f[2],
			SystemUUID:        CanonicalSystemUUID(f[3]),
			MACAddress:        mac,
			ROM:               ROMFromMAC(mac),
		},
		KernelArgs: f[7],
	}
	problems := row.Values.problems()
	var err error
	if row.Width, err = parseDimension(f[5]); err != nil {
		problems = append(problems, "width "+err.Error())
	}
	if row.Height, err = parseDimension(f[6]); err != nil {
		problems = append(problems, "height "+err.Error())
	}
	if err := checkKernelArgs(row.KernelArgs); err != nil {
		problems = append(problems, "kernel arguments "+err.Error())
	}
	return row, problems
}

// parseDimension reads a display width or height in pixels.
func parseDimension(s string) (int, error) {
	if !positiveInteger.MatchString(s) {
		return 0, fmt.Errorf("%s: must be a positive whole number of pixels", quoteValue(s))
	}
	n, _ := strconv.Atoi(s)
	if n == 0 {
		return 0, fmt.Errorf("%s: must be a positive whole number of pixels", quoteValue(s))
	}
	return n, nil
}

// checkKernelArgs rejects what cannot be a boot-args string: it ends up in
// an NVRAM variable and on a kernel command line, which macOS reads up to
// 1024 bytes of.
func checkKernelArgs(s string) error {
	if len(s) > MaxKernelArgsLength {
		return fmt.Errorf("are %d bytes long: must be at most %d", len(s), MaxKernelArgsLength)
	}
	if !utf8.ValidString(s) {
		return errors.New("are not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("contain the control character %q", r)
		}
	}
	return nil
}

// uniqueFields name the values no two identities may share, with a way to
// read each from a row. The ROM is the MAC's bytes, so it repeats exactly
// when the MAC does.
var uniqueFields = []struct {
	name string
	get  func(*Row) string
}{
	{"serialNumber", func(r *Row) string { return r.SerialNumber }},
	{"boardSerialNumber", func(r *Row) string { return r.BoardSerialNumber }},
	{"systemUUID", func(r *Row) string { return r.SystemUUID }},
	{"macAddress", func(r *Row) string { return r.MACAddress }},
}

func (p *rowParser) duplicates(row Row) []string {
	var out []string
	for _, f := range uniqueFields {
		v := f.get(&row)
		if line, ok := p.seen[f.name][v]; ok {
			out = append(out, fmt.Sprintf("%s %s is also on line %d", f.name, quoteValue(v), line))
		}
	}
	return out
}

func (p *rowParser) remember(row Row) {
	for _, f := range uniqueFields {
		if p.seen[f.name] == nil {
			p.seen[f.name] = map[string]int{}
		}
		p.seen[f.name][f.get(&row)] = row.Line
	}
}

// splitFields splits a line at sep, honouring double quotes: a field that
// starts with a quote (after spaces) runs to the quote that is followed by
// spaces and then sep or the end of the line. Inside it, "" is one quote and
// any other quote is kept as it is, since osx-serial-generator does not
// escape quotes in kernel arguments. An unclosed quote is an error.
func splitFields(line string, sep byte) ([]string, error) {
	var fields []string
	i := 0
	for {
		j := i
		for j < len(line) && line[j] == ' ' {
			j++
		}
		if j == len(line) || line[j] != '"' {
			k := strings.IndexByte(line[i:], sep)
			if k < 0 {
				return append(fields, line[i:]), nil
			}
			fields = append(fields, line[i:i+k])
			i += k + 1
			continue
		}
		var b strings.Builder
		closed := false
		for j++; j < len(line); j++ {
			if line[j] != '"' {
				b.WriteByte(line[j])
				continue
			}
			if j+1 < len(line) && line[j+1] == '"' {
				// A doubled quote is one quote; but at the end of the
				// line it is an unescaped quote that ends the field, as
				// in "-v debug="0x100"", since reading it as an escape
				// would leave the field unclosed.
				b.WriteByte('"')
				j++
				if next, ok := endOfQuoted(line, j+1, sep); ok && next > len(line) {
					fields = append(fields, b.String())
					closed = true
					i = next
					break
				}
				continue
			}
			if next, ok := endOfQuoted(line, j+1, sep); ok {
				fields = append(fields, b.String())
				closed = true
				i = next
				break
			}
			b.WriteByte('"')
		}
		if !closed {
			return nil, fmt.Errorf("field %d opens a quote it never closes", len(fields)+1)
		}
		if i > len(line) {
			return fields, nil
		}
	}
}

// endOfQuoted reports whether a quote just before position j closes a
// field: only spaces may follow it before sep or the end of the line. It
// returns where the next field starts, past the end of the line if none.
func endOfQuoted(line string, j int, sep byte) (int, bool) {
	for j < len(line) && line[j] == ' ' {
		j++
	}
	switch {
	case j == len(line):
		return j + 1, true
	case line[j] == sep:
		return j + 1, true
	}
	return 0, false
}
