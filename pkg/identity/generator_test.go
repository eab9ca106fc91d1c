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

func TestGenerator_First10000AreValidAndDistinctInEveryField(t *testing.T) {
	for _, model := range []string{"iMacPro1,1", "MacPro7,1"} {
		t.Run(model, func(t *testing.T) {
			g := NewGenerator(42, model)
			seen := map[string]map[string]int{}
			for i := range 10000 {
				v := g.Next()
				require.NoError(t, v.Validate(), "identity %d: %+v", i, v)
				require.Equal(t, model, v.Model)
				for field, value := range map[string]string{
					"serialNumber": v.SerialNumber, "boardSerialNumber": v.BoardSerialNumber,
					"systemUUID": v.SystemUUID, "macAddress": v.MACAddress, "rom": v.ROM,
				} {
					if seen[field] == nil {
						seen[field] = map[string]int{}
					}
					if j, dup := seen[field][value]; dup {
						t.Fatalf("identity %d repeats identity %d's %s %s", i, j, field, value)
					}
					seen[field][value] = i
				}
			}
		})
	}
}

func TestGenerator_IsReproducibleForASeed(t *testing.T) {
	a, b := NewGenerator(7, "iMacPro1,1"), NewGenerator(7, "iMacPro1,1")
	for range 100 {
		require.Equal(t, a.Next(), b.Next())
	}
}

func TestGenerator_GivesPinnedValuesForSeedOne(t *testing.T) {
	// Tests and benchmarks may record generated values; a change here
	// changes every seed's sequence and must be deliberate.
	g := NewGenerator(1, "iMacPro1,1")
	assert.Equal(t, Values{
		Model:             "iMacPro1,1",
		SerialNumber:      "MEJJ16WMN23E",
		BoardSerialNumber: "MEJ2271243NWCTLCH",
		SystemUUID:        "2EE03338-BF71-4A6A-9782-9B855C8818BF",
		MACAddress:        "2C:B4:3A:D8:2C:71",
		ROM:               "2CB43AD82C71",
	}, g.Next())
}

func TestGenerator_DiffersBetweenSeeds(t *testing.T) {
	a, b := NewGenerator(1, "iMacPro1,1").Next(), NewGenerator(2, "iMacPro1,1").Next()
	assert.NotEqual(t, a.SerialNumber, b.SerialNumber)
	assert.NotEqual(t, a.BoardSerialNumber, b.BoardSerialNumber)
	assert.NotEqual(t, a.SystemUUID, b.SystemUUID)
	assert.NotEqual(t, a.MACAddress, b.MACAddress)
}

func TestGenerator_UsesAppleOUIsAndVersion4UUIDs(t *testing.T) {
	g := NewGenerator(3, "Macmini8,1")
	ouis := map[string]bool{}
	for range 2000 {
		v := g.Next()
		require.True(t, IsAppleOUI(v.MACAddress), v.MACAddress)
		ouis[v.MACAddress[:8]] = true
		assert.Equal(t, byte('4'), v.SystemUUID[14], "version 4: %s", v.SystemUUID)
		assert.Contains(t, "89AB", string(v.SystemUUID[19]), "RFC 4122 variant: %s", v.SystemUUID)
	}
	assert.Greater(t, len(ouis), 1000, "MACs spread over Apple's OUIs")
}

func TestNewGenerator_PanicsOnAnInvalidModel(t *testing.T) {
	assert.PanicsWithValue(t,
		`identity.NewGenerator: model "iMac Pro" must be an SMBIOS model identifier such as iMacPro1,1 (letters, then major,minor)`,
		func() { NewGenerator(1, "iMac Pro") })
}

func TestGenerator_PanicsWhenExhausted(t *testing.T) {
	g := NewGenerator(1, "iMacPro1,1")
	g.next = generatorSpace - 1
	require.NoError(t, g.Next().Validate(), "the last identity is still valid")
	assert.PanicsWithValue(t, "identity.Generator: exhausted after 20831120 identities", func() { g.Next() })
}

func TestYearWeekCodes_SpellEveryValidPairOnce(t *testing.T) {
	seen := map[string]bool{}
	for i := range yearWeekPairs {
		y, w, yearOfDecade, week := yearWeekCodes(i)
		pair := string([]byte{y, w})
		require.False(t, seen[pair], "pair %s spelled twice", pair)
		seen[pair] = true
		info, err := DecodeSerialNumber("C02" + pair + "000ABCD")
		require.NoError(t, err, pair)
		assert.Equal(t, yearOfDecade, info.YearOfDecade, pair)
		assert.Equal(t, week, info.Week, pair)
	}
}

func BenchmarkGenerator_Next(b *testing.B) {
	g := NewGenerator(1, "iMacPro1,1")
	for b.Loop() {
		g.Next()
	}
}
