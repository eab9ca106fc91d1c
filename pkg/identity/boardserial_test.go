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
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateBoardSerialNumber_AcceptsWhatMacserialGenerates(t *testing.T) {
	for _, s := range macserialSamples(t) {
		assert.NoError(t, ValidateBoardSerialNumber(s.boardSerial), "%s board serial %s", s.model, s.boardSerial)
	}
}

func TestValidateBoardSerialNumber_AnyOneCharacterChangeFailsTheChecksum(t *testing.T) {
	for _, s := range macserialSamples(t)[:20] {
		for i := range BoardSerialNumberLength {
			for _, c := range []byte(base34Alphabet) {
				if c == s.boardSerial[i] {
					continue
				}
				b := []byte(s.boardSerial)
				b[i] = c
				err := ValidateBoardSerialNumber(string(b))
				if assert.Error(t, err, "%s with character %d changed to %c", s.boardSerial, i+1, c) {
					assert.Contains(t, err.Error(), "checksum")
				}
			}
		}
	}
}

func TestBoardSerialWeight_IsOneForTheLastCharacterAndAlternates(t *testing.T) {
	cases := map[string]struct{ i, n, want int }{
		"last of 17":         {i: 16, n: 17, want: 1},
		"second last of 17":  {i: 15, n: 17, want: 3},
		"first of 17":        {i: 0, n: 17, want: 1},
		"second of 17":       {i: 1, n: 17, want: 3},
		"last of 13 (old)":   {i: 12, n: 13, want: 1},
		"first of 16 (even)": {i: 0, n: 16, want: 3},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, boardSerialWeight(tc.i, tc.n))
		})
	}
}

func TestBoardSerialCheckCharacter_CompletesAValidBoardSerial(t *testing.T) {
	cases := map[string]struct {
		prefix string
		want   byte
	}{
		"iMacPro1,1 MLB from macserial": {prefix: "C02717306J9JG361", want: 'M'},
		"MacPro7,1 MLB from macserial":  {prefix: "F5K212405QXK3F71", want: 'H'},
		"all zeros need a zero":         {prefix: "0000000000000000", want: '0'},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := boardSerialCheckCharacter(tc.prefix)
			assert.Equal(t, string(tc.want), string(got))
			require.NoError(t, ValidateBoardSerialNumber(tc.prefix+string(got)))
		})
	}
}
