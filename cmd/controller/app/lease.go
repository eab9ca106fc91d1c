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

package app

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The controller's lease: another replica may take it once it has seen it
// unrenewed for leaseDuration; the leader gives up after failing to renew
// it for renewDeadline.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
)

// renewals is the lease lock, noting when this replica last wrote the
// lease naming itself. That write, not what client-go observes, is what
// keeps other replicas off: one may take the lease only once it has seen
// the lease unchanged for leaseDuration, counted from no earlier than the
// write. (client-go's own clock of the lease, observedTime, is also reset
// when it merely reads a changed record — as it does on its first read
// after a stall, still naming this replica while another is about to take
// it over.)
type renewals struct {
	resourcelock.Interface
	now func() time.Time

	mu sync.Mutex
	// last is when the last successful write of the lease was sent.
	last time.Time
}

func newRenewals(lock resourcelock.Interface) *renewals {
	return &renewals{Interface: lock, now: time.Now}
}

func (r *renewals) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent := r.now()
	err := r.Interface.Create(ctx, rec)
	r.noteIf(err, rec, sent)
	return err
}

func (r *renewals) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent := r.now()
	err := r.Interface.Update(ctx, rec)
	r.noteIf(err, rec, sent)
	return err
}

// noteIf notes a write sent at sent, if it succeeded and named this
// replica: releasing the lease on shutdown writes it naming no one.
func (r *renewals) noteIf(err error, rec resourcelock.LeaderElectionRecord, sent time.Time) {
	if err != nil || rec.HolderIdentity != r.Identity() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if sent.After(r.last) {
		r.last = sent
	}
}

// within says whether the last successful write of the lease was sent
// less than d ago.
func (r *renewals) within(d time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.last.IsZero() && r.now().Sub(r.last) < d
}

// leadsNow says whether this replica may act as the leader now: client-go
// calls it leader, and it renewed the lease within the renew deadline. A
// leader that wakes from a stall longer than that (a paused VM, SIGSTOP, a
// long GC) is still leader to client-go until a renewal fails, while
// another replica may have taken over; it acts on nothing until it has
// renewed. The margin between renewDeadline and leaseDuration covers
// writes already under way.
func leadsNow(isLeader func() bool, r *renewals) bool {
	return isLeader() && r.within(renewDeadline)
}

// leaderGauge is dockerios_controller_leader: 1 while this replica may act
// as the leader now (leads), else 0. Every replica exports it, so the sum
// over replicas says how many lead: 0 means no reconciler runs.
func leaderGauge(leads func() bool) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "dockerios_controller_leader",
		Help: "1 while this controller replica holds the leader lease and renewed it within the renew deadline (its reconcilers run), else 0.",
	}, func() float64 {
		if leads() {
			return 1
		}
		return 0
	})
}
