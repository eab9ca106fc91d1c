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
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Generator makes synthetic identities for tests and benchmarks: values
// that pass every validator in this package, never repeat within one
// Generator, and are the same for the same seed and model.
//
// It is not macserial. Its serials are well-formed but do not use the
// location, model and board codes of the model they claim, its years are
// not the model's production years, and its MACs, though in Apple's OUIs,
// may be those of real Apple devices. Never give its identities to a real
// or production machine: use values from macserial (through
// osx-serial-generator and ParseRows) there.
//
// A Generator is not safe for concurrent use.
type Generator struct {
	model string
	rng   *rand.Rand

	// Identity n is built from perm(n) = (mul*n + add) mod generatorSpace,
	// a bijection, so every field that encodes perm(n) is unique while n
	// stays below generatorSpace. The multiplier shuffles the order so that
	// consecutive identities do not look consecutive.
	mul, add uint64
	next     uint64

	location, modelCode, boardCode string
	ouiOffset                      int
	nicOffset                      uint32
	uuidMask                       uint64
}

// Each serial spells one of yearWeekPairs year-and-week characters and one of
// serialLines line spellings; that is the space of distinct serials one
// Generator can make.
const (
	yearWeekPairs  = 10*weeksInFirstHalf + 10*weeksInSecondHalf
	serialLines    = 34 * 34 * 34
	generatorSpace = yearWeekPairs * serialLines
)

// NewGenerator returns a Generator of identities of model (such as
// iMacPro1,1) whose values are determined by seed. It panics if model is not
// a valid SMBIOS model, as regexp.MustCompile does on a bad pattern: the
// model is a constant of the test that calls it.
func NewGenerator(seed int64, model string) *Generator {
	if err := ValidateModel(model); err != nil {
		panic(fmt.Sprintf("identity.NewGenerator: model %q %v", model, err))
	}
	// The PCG algorithm is fixed by math/rand/v2, and only its Uint64 output
	// is used, so a seed gives the same identities on every Go release.
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6d61637365726961)) // "maceria"
	g := &Generator{model: model, rng: rng}
	g.mul = g.coprimeMultiplier()
	g.add = rng.Uint64() % generatorSpace
	g.location = g.base34String(3)
	g.modelCode = g.base34String(4)
	g.boardCode = g.base34String(4)
	g.ouiOffset = int(rng.Uint64() % uint64(len(appleOUIs)))
	g.nicOffset = uint32(rng.Uint64()) & 0xFFFFFF
	g.uuidMask = rng.Uint64() & (1<<48 - 1)
	return g
}

// coprimeMultiplier returns a multiplier prime to generatorSpace, so that
// multiplying by it permutes the space.
func (g *Generator) coprimeMultiplier() uint64 {
	for {
		m := g.rng.Uint64()%(generatorSpace-1) + 1
		if gcd(m, generatorSpace) == 1 {
			return m
		}
	}
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func (g *Generator) base34String(n int) string {
	var b strings.Builder
	for range n {
		b.WriteByte(base34Digit(int(g.rng.Uint64() % 34)))
	}
	return b.String()
}

// Next returns the next identity. It panics once the Generator has made
// generatorSpace (about 20 million) identities, since the next one would
// repeat a serial.
func (g *Generator) Next() Values {
	if g.next >= generatorSpace {
		panic(fmt.Sprintf("identity.Generator: exhausted after %d identities", uint64(generatorSpace)))
	}
	// mul and the index are both below 2^25, so the product cannot overflow.
	p := (g.mul*g.next + g.add) % generatorSpace
	g.next++

	yearWeek, line := int(p%yearWeekPairs), int(p/yearWeekPairs)
	yearCode, weekCode, yearOfDecade, week := yearWeekCodes(yearWeek)

	serial := g.location + string([]byte{
		yearCode, weekCode,
		base34Digit(line / (34 * 34)), base34Digit(line / 34 % 34), base34Digit(line % 34),
	}) + g.modelCode

	// The board serial reads LLL Y WW III AA EEEE CC like a real one: its
	// year and week are the serial's, and the item, infix and first suffix
	// character spell p (1000 * 34^3 spellings, more than generatorSpace),
	// so it is unique too. The last character makes the checksum hold.
	rest := p / 1000
	board := fmt.Sprintf("%s%d%02d%03d%c%c%s%c", g.location, yearOfDecade, week, p%1000,
		base34Digit(int(rest/(34*34))), base34Digit(int(rest/34%34)), g.boardCode, base34Digit(int(rest%34)))
	board += string(boardSerialCheckCharacter(board))

	// The MAC spreads identities over Apple's OUIs: p picks the OUI and the
	// device part together, one to one.
	n := uint64(len(appleOUIs))
	oui := appleOUIs[(int(p%n)+g.ouiOffset)%len(appleOUIs)]
	// An odd multiplier permutes the 24-bit device part; it only stops
	// neighbouring identities from sharing their leading octets.
	nic := (uint32(p/n)*0x9E3779 + g.nicOffset) & 0xFFFFFF
	mac := fmt.Sprintf("%s:%02X:%02X:%02X", oui, byte(nic>>16), byte(nic>>8), byte(nic))

	return Values{
		Model:             g.model,
		SerialNumber:      serial,
		BoardSerialNumber: board,
		SystemUUID:        g.uuid(p),
		MACAddress:        mac,
		ROM:               ROMFromMAC(mac),
	}
}

// yearWeekCodes spells the i-th of the yearWeekPairs valid year-and-week
// character pairs, with the year of the decade and week of the year they
// mean.
func yearWeekCodes(i int) (yearCode, weekCode byte, yearOfDecade, week int) {
	if i < 10*weeksInFirstHalf {
		y, w := i/weeksInFirstHalf, i%weeksInFirstHalf
		return serialYearCodes[2*y], serialWeekCodes[w], y, w + 1
	}
	i -= 10 * weeksInFirstHalf
	y, w := i/weeksInSecondHalf, i%weeksInSecondHalf
	return serialYearCodes[2*y+1], serialWeekCodes[w], y, weeksInFirstHalf + w + 1
}

// uuid returns a version 4 UUID whose first ten bytes are random and whose
// last six encode p, so that no two identities share one.
func (g *Generator) uuid(p uint64) string {
	var u [16]byte
	binary.BigEndian.PutUint64(u[0:8], g.rng.Uint64())
	binary.BigEndian.PutUint16(u[8:10], uint16(g.rng.Uint64()))
	// An odd multiplier permutes the 48-bit tail, as for the MAC above.
	tail := ((p ^ g.uuidMask) * 0x9E3779B97F4B) & (1<<48 - 1)
	for i := 15; i >= 10; i-- {
		u[i] = byte(tail)
		tail >>= 8
	}
	u[6] = u[6]&0x0F | 0x40 // version 4
	u[8] = u[8]&0x3F | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%X-%X-%X-%X-%X", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
