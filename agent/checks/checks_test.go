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

package checks

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/config"
)

func TestRun_EachKindPassesAndFails(t *testing.T) {
	dir := t.TempDir()
	exists := filepath.Join(dir, "exists")
	require.NoError(t, os.WriteFile(exists, nil, 0o644))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	closed.Close()

	sec := 5 * time.Second
	for _, tc := range []struct {
		name  string
		check config.Check
		ok    bool
		msg   string
	}{
		{"path present", config.Check{Kind: api.CheckPathExists, Path: exists}, true, "exists"},
		{"path absent", config.Check{Kind: api.CheckPathExists, Path: filepath.Join(dir, "nope")}, false, "does not exist"},
		{"command exits 0", config.Check{Kind: api.CheckCommand, Command: []string{"true"}}, true, "exit status 0"},
		{"command exits 1 with output", config.Check{Kind: api.CheckCommand, Command: []string{"sh", "-c", "echo broken >&2; exit 3"}}, false, "exit status 3: broken"},
		{"command missing", config.Check{Kind: api.CheckCommand, Command: []string{filepath.Join(dir, "no-such-binary")}}, false, "no such file"},
		{"disk above floor", config.Check{Kind: api.CheckDiskFree, Path: dir, Floor: config.Floor{Bytes: 1}}, true, dir + ":"},
		{"disk below floor", config.Check{Kind: api.CheckDiskFree, Path: dir, Floor: config.Floor{Bytes: 1 << 62}}, false, "floor 4096.0 PiB"},
		{"disk unreadable", config.Check{Kind: api.CheckDiskFree, Path: filepath.Join(dir, "nope"), Floor: config.Floor{Bytes: 1}}, false, "statfs"},
		{"port open", config.Check{Kind: api.CheckTCPPort, Address: ln.Addr().String()}, true, "accepts connections"},
		{"port closed", config.Check{Kind: api.CheckTCPPort, Address: closedAddr}, false, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check.Name, tc.check.Timeout = "c", sec
			before := time.Now()
			res := Run(context.Background(), tc.check)
			assert.Equal(t, tc.ok, res.OK, res.Message)
			assert.Contains(t, res.Message, tc.msg)
			assert.Equal(t, "c", res.Name)
			assert.Equal(t, tc.check.Kind, res.Kind)
			assert.False(t, res.CheckedAt.Before(before))
			assert.False(t, res.Pending())
		})
	}
}

func TestRun_HungCommandIsKilledWithItsChildrenAtTimeout(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := config.Check{
		Name: "hang", Kind: api.CheckCommand, Timeout: 300 * time.Millisecond,
		// The shell backgrounds a grandchild and waits: killing only the
		// shell would leave the sleep behind.
		Command: []string{"sh", "-c", "sleep 600 & echo $! > " + pidFile + "; wait"},
	}
	start := time.Now()
	res := Run(context.Background(), c)
	took := time.Since(start)
	assert.False(t, res.OK)
	assert.Contains(t, res.Message, "timed out after 300ms")
	assert.Less(t, took, 3*time.Second, "Run must return at the timeout")

	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 50*time.Millisecond, "grandchild %d survived", pid)
}

// alive reports whether pid runs; a zombie (no reaper in a container) is
// dead for our purpose.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

func TestRun_LongOutputIsBounded(t *testing.T) {
	res := Run(context.Background(), config.Check{Name: "loud", Kind: api.CheckCommand, Timeout: 5 * time.Second,
		Command: []string{"sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done; exit 1"}})
	assert.False(t, res.OK)
	assert.LessOrEqual(t, len(res.Message), maxMessage)
	assert.True(t, strings.HasPrefix(res.Message, "exit status 1: "), res.Message)
}

func TestRunner_HungCheckDoesNotBlockOthersOrResults(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	r := NewRunner([]config.Check{
		{Name: "hang", Kind: api.CheckCommand, Command: []string{"sh", "-c", "echo $$ > " + pidFile + "; exec sleep 600"}, Timeout: 2 * time.Second},
		{Name: "fast", Kind: api.CheckPathExists, Path: dir, Timeout: time.Second},
	}, 100*time.Millisecond, nil)

	before := r.Results()
	assert.True(t, before[0].Pending())
	assert.True(t, before[1].Pending())
	assert.Equal(t, "not run yet", before[0].Message)

	ctx, cancel := context.WithCancel(context.Background())
	r.Start(ctx)
	r.Start(ctx) // idempotent

	// The fast check reports, and keeps reporting, while the other hangs.
	var firstFast time.Time
	require.Eventually(t, func() bool {
		res := r.Results()
		if res[1].Pending() {
			return false
		}
		if firstFast.IsZero() {
			firstFast = res[1].CheckedAt
		}
		return res[0].Pending() && res[1].OK && res[1].CheckedAt.After(firstFast)
	}, 1500*time.Millisecond, 20*time.Millisecond)

	require.Eventually(t, func() bool { return !r.Results()[0].Pending() }, 10*time.Second, 50*time.Millisecond)
	hang := r.Results()[0]
	assert.False(t, hang.OK)
	assert.Contains(t, hang.Message, "timed out")
	assert.GreaterOrEqual(t, hang.DurationMillis, int64(2000))

	// Stopping mid-run kills the running command before Wait returns, so
	// an exiting agent leaves no orphans.
	var pid int
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil && alive(pid)
	}, 10*time.Second, 20*time.Millisecond)
	cancel()
	done := make(chan struct{})
	go func() { r.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("runner did not stop")
	}
	assert.Eventually(t, func() bool { return !alive(pid) }, 2*time.Second, 20*time.Millisecond, "command %d outlived the runner", pid)
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 8 << 20: "8.0 MiB", 3 << 30: "3.0 GiB"} {
		assert.Equal(t, want, FormatBytes(n))
	}
}
