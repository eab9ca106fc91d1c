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

// Package stage derives a machine's stage from what the agent observed in
// one poll. It is a pure state machine: the only memory it keeps is whether
// the machine has ever been Ready (so that a later failure reads Degraded,
// not "still provisioning") and the recent transitions.
package stage

import (
	"time"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/checks"
)

// MaxTransitions bounds the history carried in every status.
const MaxTransitions = 32

// Observation is everything one poll saw.
type Observation struct {
	ConfigErr error
	Session   api.Session
	Disk      api.Disk
	Checks    []api.CheckResult
}

// Machine remembers across polls. The zero value is ready to use.
type Machine struct {
	stage       api.Stage
	everReady   bool
	transitions []api.Transition
}

// Observe folds in one poll's observation and returns the stage with the
// reasons it is not Ready, most important first.
func (m *Machine) Observe(now time.Time, o Observation) (api.Stage, []api.Reason) {
	var degraded, waiting []api.Reason
	if o.ConfigErr != nil {
		degraded = append(degraded, api.Reason{Type: api.ReasonConfigInvalid, Message: o.ConfigErr.Error()})
	}
	if ok, msg := checks.DiskAboveFloor(o.Disk); !ok {
		t := api.ReasonDiskBelowFloor
		if o.Disk.Message != "" {
			t = api.ReasonDiskUnreadable
		}
		degraded = append(degraded, api.Reason{Type: t, Message: msg})
	}
	if !o.Session.Up {
		r := api.Reason{Type: api.ReasonSessionNotStarted, Message: o.Session.Message}
		if m.everReady {
			r.Type = api.ReasonSessionLost
			degraded = append(degraded, r)
		} else {
			waiting = append(waiting, r)
		}
	}
	pending, failing := false, false
	for _, c := range o.Checks {
		switch {
		case c.Pending():
			pending = true
			waiting = append(waiting, api.Reason{Type: api.ReasonCheckPending, Message: c.Name + ": " + c.Message})
		case !c.OK:
			failing = true
			r := api.Reason{Type: api.ReasonCheckFailed, Message: c.Name + ": " + c.Message}
			if m.everReady {
				degraded = append(degraded, r)
			} else {
				waiting = append(waiting, r)
			}
		}
	}

	var s api.Stage
	switch {
	case len(degraded) > 0:
		s = api.StageDegraded
	case !o.Session.Up:
		s = api.StageBooted
	case pending:
		s = api.StageSessionStarted
	case failing:
		s = api.StageProvisioning
	default:
		s = api.StageReady
		m.everReady = true
	}
	if s != m.stage {
		m.stage = s
		m.transitions = append(m.transitions, api.Transition{Stage: s, At: now})
		if len(m.transitions) > MaxTransitions {
			m.transitions = append(m.transitions[:0], m.transitions[len(m.transitions)-MaxTransitions:]...)
		}
	}
	return s, append(degraded, waiting...)
}

// Transitions returns the recent stage changes, oldest first.
func (m *Machine) Transitions() []api.Transition {
	return append([]api.Transition(nil), m.transitions...)
}
