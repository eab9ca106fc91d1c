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

package stage

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/dockerios/dockerios/agent/api"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

var (
	up       = api.Session{Up: true, ConsoleUID: 501}
	down     = api.Session{Message: "/dev/console is owned by root (login window)"}
	roomy    = api.Disk{Path: "/", TotalBytes: 100, FreeBytes: 50, FloorBytes: 10}
	full     = api.Disk{Path: "/", TotalBytes: 100, FreeBytes: 5, FloorBytes: 10}
	pending  = api.CheckResult{Name: "a", Message: "not run yet"}
	passing  = api.CheckResult{Name: "a", OK: true, CheckedAt: t0}
	failing  = api.CheckResult{Name: "a", Message: "nope", CheckedAt: t0}
	passingB = api.CheckResult{Name: "b", OK: true, CheckedAt: t0}
)

func obs(s api.Session, d api.Disk, cs ...api.CheckResult) Observation {
	return Observation{Session: s, Disk: d, Checks: cs}
}

func TestMachine_Sequences(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []Observation
		want  []api.Stage
		last  []string // reason types of the last step
	}{
		{
			name:  "full progression",
			steps: []Observation{obs(down, roomy, pending), obs(up, roomy, pending), obs(up, roomy, failing), obs(up, roomy, passing)},
			want:  []api.Stage{api.StageBooted, api.StageSessionStarted, api.StageProvisioning, api.StageReady},
		},
		{
			name:  "no checks: session up is ready",
			steps: []Observation{obs(down, roomy), obs(up, roomy)},
			want:  []api.Stage{api.StageBooted, api.StageReady},
		},
		{
			name:  "failure before ready is provisioning",
			steps: []Observation{obs(up, roomy, passing, pending), obs(up, roomy, failing, passingB)},
			want:  []api.Stage{api.StageSessionStarted, api.StageProvisioning},
			last:  []string{api.ReasonCheckFailed},
		},
		{
			name:  "failure after ready is degraded, and recovers",
			steps: []Observation{obs(up, roomy, passing), obs(up, roomy, failing), obs(up, roomy, passing)},
			want:  []api.Stage{api.StageReady, api.StageDegraded, api.StageReady},
		},
		{
			name:  "session lost after ready is degraded",
			steps: []Observation{obs(up, roomy, passing), obs(down, roomy, passing)},
			want:  []api.Stage{api.StageReady, api.StageDegraded},
			last:  []string{api.ReasonSessionLost},
		},
		{
			name:  "session lost before ready is booted",
			steps: []Observation{obs(up, roomy, failing), obs(down, roomy, failing)},
			want:  []api.Stage{api.StageProvisioning, api.StageBooted},
			last:  []string{api.ReasonSessionNotStarted, api.ReasonCheckFailed},
		},
		{
			name:  "disk below floor is degraded at any stage",
			steps: []Observation{obs(down, full), obs(up, roomy, passing), obs(up, full, passing), obs(up, roomy, passing)},
			want:  []api.Stage{api.StageDegraded, api.StageReady, api.StageDegraded, api.StageReady},
		},
		{
			name:  "unreadable disk is degraded",
			steps: []Observation{obs(up, api.Disk{Path: "/", Message: "statfs /: EIO"})},
			want:  []api.Stage{api.StageDegraded},
			last:  []string{api.ReasonDiskUnreadable},
		},
		{
			name:  "config error pins degraded",
			steps: []Observation{{ConfigErr: errors.New("checks[0].kind: required"), Session: up, Disk: roomy}},
			want:  []api.Stage{api.StageDegraded},
			last:  []string{api.ReasonConfigInvalid},
		},
		{
			name:  "degraded reasons come before waiting ones",
			steps: []Observation{obs(down, full, pending)},
			want:  []api.Stage{api.StageDegraded},
			last:  []string{api.ReasonDiskBelowFloor, api.ReasonSessionNotStarted, api.ReasonCheckPending},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Machine
			var got []api.Stage
			var reasons []api.Reason
			for i, o := range tc.steps {
				var s api.Stage
				s, reasons = m.Observe(t0.Add(time.Duration(i)*time.Second), o)
				got = append(got, s)
			}
			assert.Equal(t, tc.want, got)
			if tc.last != nil {
				var types []string
				for _, r := range reasons {
					types = append(types, r.Type)
				}
				assert.Equal(t, tc.last, types)
			}
			if got[len(got)-1] == api.StageReady {
				assert.Empty(t, reasons)
			}
		})
	}
}

func TestMachine_DiskReasonNamesTheVolume(t *testing.T) {
	var m Machine
	_, reasons := m.Observe(t0, obs(up, full))
	if assert.Len(t, reasons, 1) {
		assert.Equal(t, api.ReasonDiskBelowFloor, reasons[0].Type)
		assert.Contains(t, reasons[0].Message, "/:")
	}
}

func TestMachine_RecordsTransitionsOnlyOnChange(t *testing.T) {
	var m Machine
	m.Observe(t0, obs(down, roomy, pending))
	m.Observe(t0.Add(time.Second), obs(down, roomy, pending))
	m.Observe(t0.Add(2*time.Second), obs(up, roomy, passing))
	assert.Equal(t, []api.Transition{
		{Stage: api.StageBooted, At: t0},
		{Stage: api.StageReady, At: t0.Add(2 * time.Second)},
	}, m.Transitions())
}

func TestMachine_TransitionHistoryIsBounded(t *testing.T) {
	var m Machine
	for i := 0; i < 3*MaxTransitions; i++ {
		o := obs(up, roomy, passing)
		if i%2 == 1 {
			o = obs(up, full, passing)
		}
		m.Observe(t0.Add(time.Duration(i)*time.Second), o)
	}
	tr := m.Transitions()
	assert.Len(t, tr, MaxTransitions)
	assert.Equal(t, t0.Add(time.Duration(3*MaxTransitions-1)*time.Second), tr[len(tr)-1].At)
}
