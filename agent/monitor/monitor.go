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

// Package monitor is the agent's poll loop: every poll interval it looks at
// the session, the disk and the latest check results, derives the stage and
// publishes an immutable Status. The API serves the last published Status
// and so never waits on a probe.
package monitor

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/checks"
	"github.com/dockerios/dockerios/agent/config"
	"github.com/dockerios/dockerios/agent/host"
	"github.com/dockerios/dockerios/agent/stage"
)

// Options configure a Monitor. Config is required; the probe functions
// default to the real host.
type Options struct {
	Config *config.Config
	// ConfigErr, when set, pins the machine to Degraded/ConfigInvalid and
	// no checks run: Config is then the bootstrap config.
	ConfigErr error
	Version   string
	// OSVersion is the operating system's version, read once at start
	// (host.OSVersion): it does not change under a running agent.
	OSVersion string
	Now       func() time.Time
	Logger    *slog.Logger

	ConsoleOwner func(path string) (uint32, error)
	MeasureDisk  func(path string, floor config.Floor) api.Disk
	BootTime     func() (time.Time, error)
}

type Monitor struct {
	opts      Options
	runner    *checks.Runner
	machine   stage.Machine
	started   time.Time
	bootTime  time.Time
	sessionUp bool
	status    atomic.Pointer[api.Status]
}

func New(opts Options) *Monitor {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ConsoleOwner == nil {
		opts.ConsoleOwner = host.ConsoleOwner
	}
	if opts.MeasureDisk == nil {
		opts.MeasureDisk = checks.MeasureDisk
	}
	if opts.BootTime == nil {
		opts.BootTime = host.BootTime
	}
	var list []config.Check
	if opts.ConfigErr == nil {
		list = opts.Config.Checks
	}
	m := &Monitor{
		opts:    opts,
		runner:  checks.NewRunner(list, opts.Config.PollInterval, opts.Now),
		started: opts.Now(),
	}
	if bt, err := opts.BootTime(); err == nil {
		m.bootTime = bt
	} else {
		opts.Logger.Warn("boot time unavailable", "err", err)
	}
	m.status.Store(&api.Status{
		Stage:          api.StageBooted,
		Reasons:        []api.Reason{{Type: api.ReasonSessionNotStarted, Message: "agent starting"}},
		Checks:         m.runner.Results(),
		ObservedAt:     m.started,
		BootTime:       m.bootTime,
		AgentStartedAt: m.started,
		AgentVersion:   opts.Version,
		OSVersion:      opts.OSVersion,
	})
	return m
}

// Status returns the last published status. Callers must not modify it.
func (m *Monitor) Status() *api.Status { return m.status.Load() }

// Run polls until ctx is done and the check loops have stopped.
func (m *Monitor) Run(ctx context.Context) {
	defer m.runner.Wait()
	t := time.NewTicker(m.opts.Config.PollInterval)
	defer t.Stop()
	for {
		m.Poll(ctx)
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// Poll observes once and publishes the result. Checks start on the first
// poll that sees the console session, because image checks typically
// depend on it; ctx bounds their lifetime.
func (m *Monitor) Poll(ctx context.Context) {
	cfg := m.opts.Config
	sess := m.session(cfg.Session.ConsoleDevice)
	// Results are read before checks start, so the poll that first sees the
	// session always publishes SessionStarted, however fast the checks are.
	results := m.runner.Results()
	if sess.Up && !m.sessionUp {
		m.sessionUp = true
		m.runner.Start(ctx)
	}
	obs := stage.Observation{
		ConfigErr: m.opts.ConfigErr,
		Session:   sess,
		Disk:      m.opts.MeasureDisk(cfg.Disk.Path, cfg.Disk.Floor),
		Checks:    results,
	}
	now := m.opts.Now()
	prev := m.status.Load().Stage
	s, reasons := m.machine.Observe(now, obs)
	st := &api.Status{
		Stage:          s,
		Reasons:        reasons,
		Session:        obs.Session,
		Disk:           obs.Disk,
		Checks:         obs.Checks,
		Transitions:    m.machine.Transitions(),
		ObservedAt:     now,
		BootTime:       m.bootTime,
		AgentStartedAt: m.started,
		AgentVersion:   m.opts.Version,
		OSVersion:      m.opts.OSVersion,
	}
	if !m.bootTime.IsZero() {
		st.UptimeSeconds = int64(now.Sub(m.bootTime) / time.Second)
	}
	m.status.Store(st)
	if s != prev {
		m.opts.Logger.Info("stage changed", "from", prev, "to", s, "reasons", reasons)
	}
}

func (m *Monitor) session(device string) api.Session {
	uid, err := m.opts.ConsoleOwner(device)
	switch {
	case err != nil:
		return api.Session{ConsoleUID: -1, Message: err.Error()}
	case uid == 0:
		return api.Session{Message: device + " is owned by root (login window)"}
	default:
		return api.Session{Up: true, ConsoleUID: int64(uid), Message: fmt.Sprintf("%s is owned by uid %d", device, uid)}
	}
}
