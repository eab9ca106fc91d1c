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

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dockerios/dockerios/agent/api"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; it is 100 on
// every Linux ABI Go supports (reading it properly needs cgo's sysconf).
const clockTicks = 100

// BenchmarkAgentFootprint measures what the agent costs a machine: its
// resident memory and CPU while polled once a second with ten checks
// configured (goal: < 20 MiB, < 1% of one core). The measurement runs once
// whatever b.N is, so run it with -benchtime 1x. DOCKERIOS_FOOTPRINT_SECONDS
// overrides the 20-second window.
func BenchmarkAgentFootprint(b *testing.B) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skip("needs /proc")
	}
	window := 20 * time.Second
	if s := os.Getenv("DOCKERIOS_FOOTPRINT_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("DOCKERIOS_FOOTPRINT_SECONDS=%q", s)
		}
		window = time.Duration(n) * time.Second
	}

	world := b.TempDir()
	console := filepath.Join(world, "console")
	mustWrite(b, console, "")
	if os.Geteuid() == 0 {
		if err := os.Chown(console, 501, 20); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range []string{"a", "b"} {
		mustWrite(b, filepath.Join(world, f), "")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go acceptAndClose(ln)

	a := startAgent(b, fmt.Sprintf(`
listen: "%%ADDR%%"
token:
  file: "%%TOKENFILE%%"
pollInterval: 1s
session:
  consoleDevice: %[3]s
disk:
  path: %[1]s
  floor: 1Ki
checks:
  - {name: file-a, kind: pathExists, path: %[1]s/a}
  - {name: file-b, kind: pathExists, path: %[1]s/b}
  - {name: world, kind: pathExists, path: %[1]s}
  - {name: true, kind: command, command: ["true"], timeout: 5s}
  - {name: test-dir, kind: command, command: ["test", "-d", "/"], timeout: 5s}
  - {name: shell, kind: command, command: ["sh", "-c", "exit 0"], timeout: 5s}
  - {name: port-1, kind: tcpPort, address: "%[2]s", timeout: 2s}
  - {name: port-2, kind: tcpPort, address: "%[2]s", timeout: 2s}
  - {name: disk-world, kind: diskFree, path: %[1]s, floor: 1Ki}
  - {name: disk-root, kind: diskFree, path: /, floor: 1Ki}
`, world, ln.Addr().String(), console))
	c := a.client(b, testToken)
	ctx := context.Background()

	// Warm up: reach Ready so every check loop is running.
	deadline := time.Now().Add(waitTimeout)
	for {
		st, err := c.Status(ctx)
		if err == nil && st.Stage == api.StageReady {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("agent not Ready: %+v %v\n%s", st, err, a.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}

	pid := a.cmd.Process.Pid
	b.ResetTimer()
	cpu0, child0 := cpuTicks(b, pid)
	start := time.Now()
	for polls := 0; time.Since(start) < window; polls++ {
		if _, err := c.Status(ctx); err != nil {
			b.Fatalf("poll %d: %v", polls, err)
		}
		time.Sleep(time.Until(start.Add(time.Duration(polls+1) * time.Second)))
	}
	elapsed := time.Since(start).Seconds()
	cpu1, child1 := cpuTicks(b, pid)
	rss, peak := memory(b, pid)
	b.StopTimer()

	b.ReportMetric(rss, "MiB-RSS")
	b.ReportMetric(peak, "MiB-RSS-peak")
	b.ReportMetric(float64(cpu1-cpu0)/clockTicks/elapsed*100, "%-of-a-core")
	// Check commands run in child processes; their cost is the image's,
	// reported separately.
	b.ReportMetric(float64(child1-child0)/clockTicks/elapsed*100, "%-of-a-core-children")
}

// cpuTicks returns utime+stime and cutime+cstime of pid.
func cpuTicks(b *testing.B, pid int) (self, children int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the parenthesised command name, which may hold spaces:
	// state is field 3, utime..cstime are fields 14..17.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	n := func(field int) int64 {
		v, err := strconv.ParseInt(fields[field-3], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	return n(14) + n(15), n(16) + n(17)
}

// memory returns VmRSS and VmHWM of pid in MiB.
func memory(b *testing.B, pid int) (rss, peak float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			b.Fatal(err)
		}
		if k == "VmRSS" {
			rss = kb / 1024
		} else {
			peak = kb / 1024
		}
	}
	return rss, peak
}
