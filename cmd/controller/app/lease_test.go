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
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock is a lease lock whose writes fail when told to.
type fakeLock struct {
	fail bool
}

func (l *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return &resourcelock.LeaderElectionRecord{HolderIdentity: "me"}, []byte("me"), nil
}
func (l *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return l.err() }
func (l *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return l.err() }
func (l *fakeLock) RecordEvent(string)                                              {}
func (l *fakeLock) Identity() string                                                { return "me" }
func (l *fakeLock) Describe() string                                                { return "fake" }

func (l *fakeLock) err() error {
	if l.fail {
		return errors.New("conflict: the lease was taken")
	}
	return nil
}

// A replica may act as leader only while it wrote the lease naming itself
// within the renew deadline: a write that failed, a read of the lease (what
// client-go does first after a stall, and which resets its own clock of the
// lease) or a release naming no one does not count.
func TestLeadsNow_OnlyWithinTheRenewDeadlineOfItsLastWrite(t *testing.T) {
	mine := resourcelock.LeaderElectionRecord{HolderIdentity: "me"}
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	type step func(context.Context, *renewals, *fakeLock)
	at := func(d time.Duration) step {
		return func(_ context.Context, r *renewals, _ *fakeLock) { r.now = func() time.Time { return t0.Add(d) } }
	}
	update := func(ok bool) step {
		return func(ctx context.Context, r *renewals, l *fakeLock) { l.fail = !ok; _ = r.Update(ctx, mine) }
	}
	create := func(ctx context.Context, r *renewals, _ *fakeLock) { _ = r.Create(ctx, mine) }
	read := func(ctx context.Context, r *renewals, _ *fakeLock) { _, _, _ = r.Get(ctx) }
	release := func(ctx context.Context, r *renewals, _ *fakeLock) {
		_ = r.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1})
	}

	for _, tc := range []struct {
		name     string
		steps    []step
		isLeader bool
		want     bool
	}{
		{"never wrote the lease", []step{at(0), read}, true, false},
		{"created it just now", []step{at(0), create, at(time.Second)}, true, true},
		{"renewed it within the renew deadline", []step{at(0), update(true), at(renewDeadline - time.Millisecond)}, true, true},
		{"woke from a stall past the renew deadline", []step{at(0), update(true), at(renewDeadline + time.Second)}, true, false},
		{"woke from a stall and read the lease, still naming it", []step{at(0), update(true), at(16 * time.Second), read}, true, false},
		{"its renewal after the stall failed", []step{at(0), update(true), at(16 * time.Second), update(false)}, true, false},
		{"its renewal after the stall succeeded", []step{at(0), update(true), at(16 * time.Second), update(true)}, true, true},
		{"released the lease on shutdown", []step{at(0), update(true), at(renewDeadline + time.Second), release}, true, false},
		{"client-go saw another holder", []step{at(0), update(true)}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lock := &fakeLock{}
			r := newRenewals(lock)
			for _, s := range tc.steps {
				s(context.Background(), r, lock)
			}

			got := leadsNow(func() bool { return tc.isLeader }, r)

			assert.Equal(t, tc.want, got)
		})
	}
}

// dockerios_controller_leader follows leadsNow: 1 from the lease's write
// until the renew deadline passes without another, 0 before, after, and
// whenever client-go sees another holder.
func TestLeaderGauge_SaysWhetherThisReplicaLeadsNow(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	now := t0
	lock := &fakeLock{}
	r := newRenewals(lock)
	r.now = func() time.Time { return now }
	isLeader := true
	g := leaderGauge(func() bool { return leadsNow(func() bool { return isLeader }, r) })

	assert.Equal(t, 0.0, testutil.ToFloat64(g), "before the lease was ever written")

	assert.NoError(t, r.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}))
	now = t0.Add(time.Second)
	assert.Equal(t, 1.0, testutil.ToFloat64(g), "just after writing the lease")

	isLeader = false
	assert.Equal(t, 0.0, testutil.ToFloat64(g), "client-go sees another holder")

	isLeader = true
	now = t0.Add(renewDeadline + time.Second)
	assert.Equal(t, 0.0, testutil.ToFloat64(g), "past the renew deadline without a write")

	assert.NoError(t, r.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}))
	assert.Equal(t, 1.0, testutil.ToFloat64(g), "renewed again")

	reg := prometheus.NewPedanticRegistry()
	assert.NoError(t, reg.Register(g))
	n, err := testutil.GatherAndCount(reg, "dockerios_controller_leader")
	assert.NoError(t, err)
	assert.Equal(t, 1, n)
}
