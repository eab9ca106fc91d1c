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

package monitor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/config"
)

// fakeHost stands in for the machine; tests flip its fields between polls.
type fakeHost struct {
	mu       sync.Mutex
	owner    uint32
	ownerErr error
	free     uint64
}

func (h *fakeHost) consoleOwner(string) (uint32, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.owner, h.ownerErr
}

func (h *fakeHost) measureDisk(path string, floor config.Floor) api.Disk {
	h.mu.Lock()
	defer h.mu.Unlock()
	return api.Disk{Path: path, TotalBytes: 1000, FreeBytes: h.free, FloorBytes: floor.Resolve(1000)}
}

func (h *fakeHost) set(f func(*fakeHost)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h)
}

var boot = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newMonitor(t *testing.T, h *fakeHost, cfgErr error, checks ...config.Check) (*Monitor, *time.Time) {
	now := boot.Add(time.Minute)
	cfg, err := config.Parse(nil)
	require.NoError(t, err)
	cfg.Checks = checks
	cfg.PollInterval = 50 * time.Millisecond
	cfg.Disk.Floor = config.Floor{Bytes: 100}
	m := New(Options{
		Config: cfg, ConfigErr: cfgErr, Version: "v-test", OSVersion: "14.6.1",
		Now:          func() time.Time { return now },
		ConsoleOwner: h.consoleOwner,
		MeasureDisk:  h.measureDisk,
		BootTime:     func() (time.Time, error) { return boot, nil },
	})
	return m, &now
}

func TestMonitor_InitialStatusBeforeFirstPoll(t *testing.T) {
	m, _ := newMonitor(t, &fakeHost{}, nil)
	st := m.Status()
	assert.Equal(t, api.StageBooted, st.Stage)
	assert.Equal(t, "v-test", st.AgentVersion)
	assert.Equal(t, "14.6.1", st.OSVersion, "read once at start, reported from the first status")
	assert.Equal(t, boot, st.BootTime)
}

func TestMonitor_EveryPollReportsTheOSVersion(t *testing.T) {
	m, _ := newMonitor(t, &fakeHost{free: 500}, nil)
	m.Poll(context.Background())
	assert.Equal(t, "14.6.1", m.Status().OSVersion)
}

func TestMonitor_ChecksStartOnceSessionIsUp(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "marker")
	h := &fakeHost{owner: 0, free: 500}
	m, now := newMonitor(t, h, nil, config.Check{Name: "marker", Kind: api.CheckPathExists, Path: marker, Timeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.runner.Wait() }()
	require.NoError(t, os.WriteFile(marker, nil, 0o644))

	m.Poll(ctx)
	st := m.Status()
	assert.Equal(t, api.StageBooted, st.Stage)
	assert.False(t, st.Session.Up)
	assert.True(t, st.Checks[0].Pending(), "checks must wait for the session")
	assert.Equal(t, int64(60), st.UptimeSeconds)

	h.set(func(h *fakeHost) { h.owner = 501 })
	*now = now.Add(time.Second)
	m.Poll(ctx)
	st = m.Status()
	assert.Equal(t, api.StageSessionStarted, st.Stage)
	assert.Equal(t, int64(501), st.Session.ConsoleUID)

	require.Eventually(t, func() bool { return !m.runner.Results()[0].Pending() }, 10*time.Second, 10*time.Millisecond)
	m.Poll(ctx)
	st = m.Status()
	assert.Equal(t, api.StageReady, st.Stage)
	assert.Equal(t, []api.Stage{api.StageBooted, api.StageSessionStarted, api.StageReady}, stages(st.Transitions))

	h.set(func(h *fakeHost) { h.free = 50 })
	m.Poll(ctx)
	st = m.Status()
	assert.Equal(t, api.StageDegraded, st.Stage)
	require.Len(t, st.Reasons, 1)
	assert.Equal(t, api.ReasonDiskBelowFloor, st.Reasons[0].Type)
	assert.Equal(t, uint64(50), st.Disk.FreeBytes)
}

func TestMonitor_ConfigErrorIsDegradedAndRunsNoChecks(t *testing.T) {
	h := &fakeHost{owner: 501, free: 500}
	m, _ := newMonitor(t, h, errors.New("checks[0].kind: required"), config.Check{Name: "x", Kind: api.CheckPathExists, Path: "/", Timeout: time.Second})
	m.Poll(context.Background())
	st := m.Status()
	assert.Equal(t, api.StageDegraded, st.Stage)
	assert.Equal(t, []api.Reason{{Type: api.ReasonConfigInvalid, Message: "checks[0].kind: required"}}, st.Reasons)
	assert.Empty(t, st.Checks)
}

func TestMonitor_ConsoleProbeErrorMeansNoSession(t *testing.T) {
	h := &fakeHost{ownerErr: errors.New("stat /dev/console: no such file"), free: 500}
	m, _ := newMonitor(t, h, nil)
	m.Poll(context.Background())
	st := m.Status()
	assert.Equal(t, api.StageBooted, st.Stage)
	assert.Equal(t, int64(-1), st.Session.ConsoleUID)
	assert.Contains(t, st.Session.Message, "no such file")
}

func TestMonitor_RunStopsWithContext(t *testing.T) {
	h := &fakeHost{owner: 501, free: 500}
	m, _ := newMonitor(t, h, nil, config.Check{Name: "x", Kind: api.CheckCommand, Command: []string{"sleep", "600"}, Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return m.Status().Stage == api.StageSessionStarted }, 10*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}

func stages(tr []api.Transition) []api.Stage {
	var out []api.Stage
	for _, x := range tr {
		out = append(out, x.Stage)
	}
	return out
}
