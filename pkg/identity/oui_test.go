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
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppleOUIs_IsTheEmbeddedRegistryExtract(t *testing.T) {
	ouis := AppleOUIs()
	assert.Len(t, ouis, 1053, "apple_ouis.txt from ieee-data 20220827.1 lists 1053 OUIs; update this count with the file")
	assert.True(t, slices.IsSorted(ouis), "sorted")
	assert.Equal(t, len(ouis), len(slices.Compact(slices.Clone(ouis))), "no duplicates")
	for _, o := range []string{"00:03:93", "00:0A:27", "00:17:F2", "A4:83:E7", "F0:18:98", "FC:FC:48"} {
		assert.Contains(t, ouis, o, "a well-known Apple OUI")
	}
	for _, o := range []string{"52:54:00", "00:50:56", "08:00:27", "00:00:00"} {
		assert.NotContains(t, ouis, o, "QEMU, VMware, VirtualBox and Xerox are not Apple")
	}
	assert.Contains(t, AppleOUISource(), "ieee-data 20220827.1")
}

func TestAppleOUIs_AreUniversalUnicastBlocks(t *testing.T) {
	// The generator and the MAC validator rely on this: a MAC built on an
	// Apple OUI is unicast and globally administered.
	for _, o := range AppleOUIs() {
		first, err := strconv.ParseUint(o[:2], 16, 8)
		require.NoError(t, err)
		assert.Zero(t, first&0b11, "OUI %s has the multicast or local bit set", o)
	}
}

func TestAppleOUIs_ReturnsACopy(t *testing.T) {
	ouis := AppleOUIs()
	ouis[0] = "XX:XX:XX"
	assert.NotEqual(t, "XX:XX:XX", AppleOUIs()[0])
}

func TestIsAppleOUI(t *testing.T) {
	cases := map[string]struct {
		in   string
		want bool
	}{
		"Apple MAC":                 {in: "00:0A:27:00:00:01", want: true},
		"Apple OUI alone":           {in: "A4:83:E7", want: true},
		"QEMU MAC":                  {in: "52:54:00:12:34:56"},
		"lower case is not matched": {in: "a4:83:e7:12:34:56"},
		"too short":                 {in: "00:0A:2"},
		"empty":                     {in: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, IsAppleOUI(tc.in))
		})
	}
}

func TestMustParseOUIs(t *testing.T) {
	t.Run("reads OUIs and the source, skipping comments and blank lines", func(t *testing.T) {
		ouis, source := mustParseOUIs("# header\n# Source: somewhere 1.0\n\nFC:FC:48\n00:0A:27\r\n00:0A:27\n")
		assert.Equal(t, []string{"00:0A:27", "FC:FC:48"}, ouis)
		assert.Equal(t, "somewhere 1.0", source)
	})
	t.Run("panics on a malformed line", func(t *testing.T) {
		assert.PanicsWithValue(t, `identity: apple_ouis.txt line 2 is "00-0A-27", not an OUI such as 00:0A:27`, func() {
			mustParseOUIs("# header\n00-0A-27\n")
		})
	})
	t.Run("panics on an empty list", func(t *testing.T) {
		assert.Panics(t, func() { mustParseOUIs("# only a header\n") })
	})
}
