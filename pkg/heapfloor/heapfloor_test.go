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

package heapfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mib = 1 << 20

func TestPercentFor(t *testing.T) {
	for _, tc := range []struct {
		name               string
		floor, live, roots uint64
		base, want         int
	}{
		{name: "a small heap waits for the floor", floor: 256 * mib, live: 25 * mib, roots: 0, base: 100, want: 924},
		{name: "stacks and globals count towards the goal", floor: 200 * mib, live: 20 * mib, roots: 20 * mib, base: 100, want: 450},
		{name: "the goal reaches the floor, not a byte short", floor: 100*mib + 1, live: 10 * mib, roots: 0, base: 100, want: 901},
		{name: "a tiny heap: the runtime's minimum heap reaches the floor first", floor: 64 * mib, live: 100 << 10, roots: 100 << 10, base: 100, want: 1600},
		{name: "nothing measured yet", floor: 64 * mib, live: 0, roots: 0, base: 100, want: 1600},
		{name: "a heap over the floor is GOGC's", floor: 64 * mib, live: 100 * mib, roots: mib, base: 100, want: 100},
		{name: "never below the process's own GOGC", floor: 64 * mib, live: 30 * mib, roots: 0, base: 400, want: 400},
		{name: "a floor GOGC already reaches", floor: 2 * mib, live: 0, roots: 0, base: 100, want: 100},
		{name: "capped, not overflowed", floor: math.MaxUint64 / 200, live: 1, roots: 0, base: 100, want: math.MaxInt32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := percentFor(tc.floor, tc.live, tc.roots, tc.base)
			assert.Equal(t, tc.want, got)
			// The runtime's heap goal at a percent (mgcpacer.go, commit).
			goal := func(p int) uint64 {
				return max(tc.live+(tc.live+tc.roots)*uint64(p)/100, minimumHeapAt100*uint64(p)/100)
			}
			if got > tc.base && got < math.MaxInt32 {
				assert.GreaterOrEqual(t, goal(got), tc.floor, "heap goal at %d%%", got)
				assert.Less(t, goal(got-1), tc.floor, "a percent lower would do at %d%%", got-1)
			}
		})
	}
}

func TestCapFloor(t *testing.T) {
	none := uint64(math.MaxInt64) // what Go reports without GOMEMLIMIT
	for _, tc := range []struct {
		name                   string
		floor, goLimit, cgroup uint64
		want                   uint64
	}{
		{name: "no limit", floor: 256 * mib, goLimit: none, cgroup: 0, want: 256 * mib},
		{name: "a roomy container", floor: 256 * mib, goLimit: none, cgroup: 2048 * mib, want: 256 * mib},
		{name: "a tight container halves the floor", floor: 256 * mib, goLimit: none, cgroup: 256 * mib, want: 128 * mib},
		{name: "GOMEMLIMIT is a limit too", floor: 256 * mib, goLimit: 300 * mib, cgroup: 2048 * mib, want: 150 * mib},
		{name: "the lower limit decides", floor: 256 * mib, goLimit: 400 * mib, cgroup: 200 * mib, want: 100 * mib},
		{name: "no floor", floor: 0, goLimit: none, cgroup: 0, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, capFloor(tc.floor, tc.goLimit, tc.cgroup))
		})
	}
}

// sink keeps allocations from being optimised away or kept on the stack.
var sink []byte

// collectionsWhileAllocating is how many collections run while total
// bytes of garbage are allocated, 32 KiB at a time, at about 200 MiB/s: a
// busy server's pace, which a Floor follows (its goal for a live heap a
// collection found is set within pollEvery, while the process allocates
// some 10 MiB).
func collectionsWhileAllocating(total int) uint64 {
	before := readUint64(cycles)
	for i := range total / (32 << 10) {
		sink = make([]byte, 32<<10)
		if i%32 == 31 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	sink = nil
	return readUint64(cycles) - before
}

// percentSettles waits until the GC percent is want, as the poll after a
// collection sets it.
func percentSettles(t *testing.T, want func(int) bool) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := int(int64(readUint64(gogc)))
		if want(p) || time.Now().After(deadline) {
			return p
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestKeep_CollectsOnlyOnceTheHeapReachesTheFloor(t *testing.T) {
	runtime.GC()
	// The control: this test binary's few MiB of live heap are collected
	// every few MiB allocated.
	without := collectionsWhileAllocating(256 * mib)
	require.GreaterOrEqual(t, without, uint64(20), "without a floor, 256 MiB of garbage should take many collections")

	runtime.GC()
	f, err := Keep(64 * mib)
	require.NoError(t, err)
	defer f.Stop()
	require.Equal(t, uint64(64*mib), f.Bytes)
	with := collectionsWhileAllocating(256 * mib)
	t.Logf("collections while allocating 256 MiB: %d without a floor, %d with a 64 MiB floor", without, with)
	// About one per 64 MiB (the runtime starts one somewhat before the
	// heap reaches its goal); a floor, not collection turned off.
	assert.LessOrEqual(t, with, uint64(256/64+2))
	assert.GreaterOrEqual(t, with, uint64(256/64-1))
}

func TestKeep_GivesGOGCBackOnceTheLiveHeapIsOverTheFloor(t *testing.T) {
	runtime.GC()
	f, err := Keep(32 * mib)
	require.NoError(t, err)
	defer f.Stop()
	require.Greater(t, int(int64(readUint64(gogc))), f.Base, "a small live heap gets a higher percent")

	live := make([]byte, 48*mib)
	for i := range live {
		live[i] = 1 // touch it, so the heap really holds it
	}
	runtime.GC()
	assert.Equal(t, f.Base, percentSettles(t, func(p int) bool { return p == f.Base }),
		"with 48 MiB live over a 32 MiB floor the percent is GOGC's")
	runtime.KeepAlive(live)

	live = nil
	runtime.GC()
	assert.Greater(t, percentSettles(t, func(p int) bool { return p > f.Base }), f.Base,
		"once the heap is small again the floor is kept again")
}

// A heap that grows past the floor, as a server's does while it loads a
// large fleet at startup, gets GOGC's percent back within a collection or
// so: the percent set for a few MiB live (1600% for 64 MiB) would let the
// heap grow to seventeen times its live size before the next collection.
func TestKeep_AHeapGrowingPastTheFloorIsCollectedAsGOGCSays(t *testing.T) {
	runtime.GC()
	f, err := Keep(64 * mib)
	require.NoError(t, err)
	defer f.Stop()
	require.GreaterOrEqual(t, int(int64(readUint64(gogc))), 1000)

	// 256 MiB live, grown 1 MiB at a time with 8 MiB of garbage beside
	// each, over about half a second.
	var kept [][]byte
	var peak uint64
	for len(kept) < 256 {
		kept = append(kept, make([]byte, mib))
		for range 8 {
			sink = make([]byte, mib)
		}
		peak = max(peak, readUint64("/memory/classes/heap/objects:bytes"))
		time.Sleep(2 * time.Millisecond)
	}
	sink = nil
	t.Logf("peak heap %d MiB with %d MiB live", peak/mib, len(kept))
	// GOGC=100 lets the heap reach twice its live size; allow for a
	// collection that was under way at the old percent.
	assert.LessOrEqual(t, peak, uint64(256*mib)*5/2)
	runtime.KeepAlive(kept)
}

func TestKeep_StopGivesThePercentBack(t *testing.T) {
	runtime.GC()
	f, err := Keep(64 * mib)
	require.NoError(t, err)
	require.Greater(t, int(int64(readUint64(gogc))), f.Base)
	f.Stop()
	assert.Equal(t, f.Base, int(int64(readUint64(gogc))))
	runtime.GC()
	runtime.GC()
	time.Sleep(3 * pollEvery) // a poll that still ran would set it here
	assert.Equal(t, f.Base, int(int64(readUint64(gogc))), "no collection after Stop raises it again")
	f.Stop() // twice is harmless

	g, err := Keep(64 * mib)
	require.NoError(t, err, "a stopped floor lets another be kept")
	g.Stop()
}

func TestKeep_OneFloorAtATime(t *testing.T) {
	f, err := Keep(64 * mib)
	require.NoError(t, err)
	defer f.Stop()
	_, err = Keep(64 * mib)
	assert.Error(t, err)
}

func TestKeep_LeavesGOGCOffAlone(t *testing.T) {
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	f, err := Keep(64 * mib)
	require.NoError(t, err)
	defer f.Stop()
	assert.Zero(t, f.Bytes)
	assert.Equal(t, -1, int(int64(readUint64(gogc))), "collection stays off")
}

func TestKeep_FloorIsAtMostHalfTheMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(100 * mib)
	defer debug.SetMemoryLimit(old)
	f, err := Keep(1024 * mib)
	require.NoError(t, err)
	defer f.Stop()
	assert.Equal(t, uint64(50*mib), f.Bytes)
}

func TestKeep_ZeroKeepsNothing(t *testing.T) {
	f, err := Keep(0)
	require.NoError(t, err)
	f.Stop()
	assert.Equal(t, f.Base, int(int64(readUint64(gogc))))
	g, err := Keep(64 * mib)
	require.NoError(t, err, "a zero floor holds nothing")
	g.Stop()
}
