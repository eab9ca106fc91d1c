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
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// fakeLeader answers as client-go's LeaderElector does: Check fails once
// the last renewal is older than the lease duration plus the tolerance.
type fakeLeader struct {
	leader       bool
	sinceRenewal time.Duration
}

func (f fakeLeader) IsLeader() bool { return f.leader }

func (f fakeLeader) Check(tolerance time.Duration) error {
	if f.leader && f.sinceRenewal > leaseDuration+tolerance {
		return errors.New("failed to renew")
	}
	return nil
}

// A replica leads only while no other can have taken its lease, with the
// renew deadline's margin for writes under way: not after a stall longer
// than that (its renewal is due and may fail), and not once it has seen
// another holder.
func TestLeadsNow_OnlyWithinTheRenewDeadlineOfTheLastRenewal(t *testing.T) {
	for _, tc := range []struct {
		name string
		le   fakeLeader
		want bool
	}{
		{"renewed just now", fakeLeader{leader: true, sinceRenewal: time.Second}, true},
		{"renewed within the renew deadline", fakeLeader{leader: true, sinceRenewal: renewDeadline - time.Second}, true},
		{"woke from a stall past the renew deadline, lease not yet expired", fakeLeader{leader: true, sinceRenewal: renewDeadline + time.Second}, false},
		{"woke from a stall past the lease", fakeLeader{leader: true, sinceRenewal: time.Minute}, false},
		{"saw another holder, before OnStoppedLeading", fakeLeader{leader: false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, leadsNow(tc.le))
		})
	}
}
