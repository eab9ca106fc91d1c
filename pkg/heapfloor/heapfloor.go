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

// Package heapfloor keeps a process whose live heap is small from
// collecting garbage every few MiB it allocates.
//
// Go starts a collection when the heap has grown by GOGC percent (100 by
// default) of what the last one found live. The apiserver of a small fleet
// keeps 20–30 MiB live and allocates about 100 KiB per request, so it
// collects every couple of hundred requests. Each collection's mark phase
// lasts tens of milliseconds, and for all of it the runtime puts a mark
// worker on every processor the process has nothing else to run on. The
// operating system cannot tell those workers from work: on a node whose
// cores the apiserver shares with kube-apiserver and etcd, they take the
// CPU that the requests in flight are waiting for, and those requests are
// the slowest of the day.
//
// Keep raises the percent after each collection so that the next one
// starts no earlier than when the heap reaches a floor, and never earlier
// than GOGC alone would start it. Once GOGC's own goal is over the floor
// (from a live heap of half the floor on, at GOGC=100) the percent is
// GOGC's again: a large heap is collected as it always was, and a small one
// costs at most the floor in memory.
//
// The package owns the process's GC percent while it keeps a floor; it
// never lowers the percent below the one the process started with, never
// turns collection back on when GOGC=off turned it off, and never sets a
// floor above half of the process's memory limit (GOMEMLIMIT or its
// cgroup's), so a floor cannot be what brings a container to its limit.
package heapfloor

import (
	"errors"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The runtime/metrics samples a floor is computed from. The heap goal Go
// aims for after a collection is live + (live + stacks + globals) × GOGC/100.
const (
	liveHeap = "/gc/heap/live:bytes"
	stacks   = "/gc/scan/stack:bytes"
	globals  = "/gc/scan/globals:bytes"
	gogc     = "/gc/gogc:percent"
	memLimit = "/gc/gomemlimit:bytes"
	cycles   = "/gc/cycles/total:gc-cycles"
)

// cgroupLimitFiles are where a container's memory limit is read from:
// cgroup v2, then v1.
var cgroupLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// keeping is held by the one Keep that owns the GC percent: two floors
// would undo each other's percent after every collection.
var keeping sync.Mutex

// pollEvery is how often a Floor looks for a finished collection.
//
// Why a poll and not a finalizer or cleanup, which would run once per
// collection: an object allocated while a collection marks survives it, so
// a cleanup armed then fires a collection late, and for that collection
// the percent set for the last live heap applies to the new one. At
// startup, when the live heap grows from a few MiB to hundreds, that
// percent (64 times for a 256 MiB floor over 4 MiB) would let the heap
// grow without bound. A poll is at most pollEvery late, so what the heap
// can outgrow its goal by is what the process allocates in that time.
const pollEvery = 50 * time.Millisecond

// Floor is a heap floor being kept.
type Floor struct {
	// Bytes is the floor kept: the one asked for, or half the memory limit
	// if that is lower. 0 when nothing is kept.
	Bytes uint64
	// Base is the GC percent the process started with, which the floor
	// never goes below and Stop restores.
	Base int

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Keep keeps a heap floor of floor bytes until Stop. A floor of 0, or a
// process started with GOGC=off, keeps nothing (and Stop does nothing).
// It fails if another floor is kept.
func Keep(floor uint64) (*Floor, error) {
	// GOGC=off reads as the int32 -1, widened to a uint64.
	base := int(int64(readUint64(gogc)))
	f := &Floor{Base: base, stop: make(chan struct{}), done: make(chan struct{})}
	f.Bytes = capFloor(floor, readUint64(memLimit), cgroupLimit())
	if f.Bytes == 0 || base < 0 {
		f.Bytes = 0
		close(f.done)
		return f, nil
	}
	if !keeping.TryLock() {
		return nil, errors.New("a heap floor is already kept in this process")
	}
	cycles := readUint64(cycles)
	f.adjust()
	go f.follow(cycles)
	return f, nil
}

// Stop stops keeping the floor and gives the process its GC percent back.
func (f *Floor) Stop() {
	if f == nil || f.Bytes == 0 {
		return
	}
	f.once.Do(func() {
		close(f.stop)
		<-f.done
		debug.SetGCPercent(f.Base)
		keeping.Unlock()
	})
}

// follow adjusts the percent after each collection, seen as the count of
// collections changing, until Stop.
func (f *Floor) follow(seen uint64) {
	defer close(f.done)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
		}
		if n := readUint64(cycles); n != seen {
			seen = n
			f.adjust()
		}
	}
}

// adjust sets the percent whose heap goal, after the collection that just
// ran, is at least the floor.
func (f *Floor) adjust() {
	s := read(liveHeap, stacks, globals)
	debug.SetGCPercent(percentFor(f.Bytes, s[0], s[1]+s[2], f.Base))
}

// percentFor is the smallest GC percent, not below base, whose heap goal
// with live bytes live and roots bytes of stacks and globals is at least
// floor.
//
// The goal is the larger of two, both growing with the percent: live +
// (live + roots) × percent/100, and the runtime's minimum heap, which it
// scales with the percent too (4 MiB at 100). The smallest percent that
// lifts either to the floor lifts the goal to it.
func percentFor(floor, live, roots uint64, base int) int {
	if floor <= live {
		return base
	}
	p := ceilDiv(floor*100, minimumHeapAt100)
	if live+roots > 0 {
		p = min(p, ceilDiv((floor-live)*100, live+roots))
	}
	if p > math.MaxInt32 {
		p = math.MaxInt32
	}
	return max(base, int(p))
}

// minimumHeapAt100 is the runtime's minimum heap goal at GOGC=100
// (runtime.defaultHeapMinimum).
const minimumHeapAt100 = 4 << 20

func ceilDiv(a, b uint64) uint64 { return (a + b - 1) / b }

// capFloor is floor, lowered to half of the smaller of the Go memory limit
// and the cgroup's (0: none) when that is lower.
func capFloor(floor, goLimit, cgroup uint64) uint64 {
	limit := goLimit
	if cgroup > 0 && cgroup < limit {
		limit = cgroup
	}
	return min(floor, limit/2)
}

// cgroupLimit is this process's cgroup memory limit, 0 if it has none or
// it cannot be read.
func cgroupLimit() uint64 {
	for _, path := range cgroupLimitFiles {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(data))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n >= 1<<62 { // cgroup v1 says "none" with a page-rounded MaxInt64
			return 0
		}
		return n
	}
	return 0
}

func readUint64(name string) uint64 { return read(name)[0] }

func read(names ...string) []uint64 {
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	metrics.Read(samples)
	out := make([]uint64, len(names))
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			out[i] = s.Value.Uint64()
		}
	}
	return out
}
