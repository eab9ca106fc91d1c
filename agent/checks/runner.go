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
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/config"
)

// shutdownGrace bounds how long stopping waits for a running probe.
const shutdownGrace = waitDelay + time.Second

// Runner runs every check in its own goroutine, once per interval, and
// keeps each one's latest result. A slow check delays only itself.
type Runner struct {
	checks   []config.Check
	interval time.Duration
	now      func() time.Time
	latest   []atomic.Pointer[api.CheckResult]
	once     sync.Once
	wg       sync.WaitGroup
}

// NewRunner prepares checks to run every interval; now is the clock that
// stamps results (time.Now if nil).
func NewRunner(checks []config.Check, interval time.Duration, now func() time.Time) *Runner {
	if now == nil {
		now = time.Now
	}
	return &Runner{checks: checks, interval: interval, now: now, latest: make([]atomic.Pointer[api.CheckResult], len(checks))}
}

// Start launches the check loops until ctx is done. Later calls do nothing.
func (r *Runner) Start(ctx context.Context) {
	r.once.Do(func() {
		for i := range r.checks {
			r.wg.Add(1)
			go r.loop(ctx, i)
		}
	})
}

// Wait returns once every loop started by Start has returned.
func (r *Runner) Wait() { r.wg.Wait() }

func (r *Runner) loop(ctx context.Context, i int) {
	defer r.wg.Done()
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		res, finished := start(ctx, r.checks[i], r.now)
		r.latest[i].Store(&res)
		select {
		case <-finished:
		case <-ctx.Done():
			// Let the probe kill its command on the way out, or the agent
			// could exit first and orphan it; a stat stuck in the kernel is
			// abandoned after a grace period.
			select {
			case <-finished:
			case <-time.After(shutdownGrace):
			}
			return
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// Results returns the latest result of every check, in config order; a
// check that has not finished a run yet is reported pending.
func (r *Runner) Results() []api.CheckResult {
	out := make([]api.CheckResult, len(r.checks))
	for i, c := range r.checks {
		if p := r.latest[i].Load(); p != nil {
			out[i] = *p
		} else {
			out[i] = api.CheckResult{Name: c.Name, Kind: c.Kind, Message: "not run yet"}
		}
	}
	return out
}
