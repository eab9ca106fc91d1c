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

package machine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned/fake"
)

// statusWrites answers every machine status write as the apiserver would
// (the written object, its resourceVersion moved on) and counts them.
type statusWrites struct {
	mu sync.Mutex
	n  int
}

func (s *statusWrites) react(a k8stesting.Action) (bool, runtime.Object, error) {
	u, ok := a.(k8stesting.UpdateAction)
	if !ok || a.GetSubresource() != "status" {
		return false, nil, nil
	}
	m := u.GetObject().(*v1alpha1.MacOSMachine).DeepCopy()
	rv, _ := strconv.Atoi(m.ResourceVersion)
	m.ResourceVersion = strconv.Itoa(rv + 1)
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
	return true, m, nil
}

func (s *statusWrites) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// readyGuest is what a Ready machine's controller observes: everything
// made, the VM running, its agent answering at seen with a status it
// computed at observed.
func readyGuest(seen, observed time.Time, unmoved bool) *Observed {
	return &Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded), VMI: vmi(kubevirtv1.Running, t0.Add(-24*time.Hour)),
		VM: vm(t0.Add(-24*time.Hour), kubevirtv1.VirtualMachineStatusRunning), AgentAsked: true,
		Agent: &api.Status{Stage: api.StageReady, ObservedAt: observed}, AgentSeen: seen, AgentUnmoved: unmoved}
}

func quietReconciler(writes *statusWrites, now *time.Time) *Reconciler {
	c := fake.NewClientset()
	c.PrependReactor("update", "macosmachines", writes.react)
	return &Reconciler{Client: c, Recorder: record.NewFakeRecorder(1000), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return *now }}
}

// readyMachine is machine i, Ready, its status last written at lastSeen.
func readyMachine(t *testing.T, i int, lastSeen time.Time) *v1alpha1.MacOSMachine {
	m := testMachine()
	m.Name, m.UID, m.ResourceVersion = fmt.Sprintf("mac-%d", i), types.UID(fmt.Sprintf("uid-%d", i)), "1"
	for range 2 {
		m.Status = Derive(m, readyGuest(lastSeen, lastSeen.Add(-time.Second), false), lastSeen).Status
	}
	require.Equal(t, v1alpha1.MachineReady, m.Status.Phase)
	return m
}

// A restarted controller's first pass over a Ready fleet writes nothing
// when nothing changed, though the agent times of half the fleet are
// overdue: it waits at least half agentSeenRefresh, then refreshes the
// overdue machines spread over agentSeenRefresh, at the rate a running
// controller refreshes them — no write storm — and from then on each
// machine is refreshed every agentSeenRefresh.
func TestAgentRefresh_ARestartedControllerWritesNothingNewInItsFirstPass(t *testing.T) {
	const n = 300
	const poll = 30 * time.Second
	now := t0
	writes := &statusWrites{}
	r := quietReconciler(writes, &now)
	fleet := make([]*v1alpha1.MacOSMachine, n)
	overdue := 0
	for i := range fleet {
		// Stored lastSeenTimes spread over the last two refresh intervals,
		// as after a controller that was down for one.
		lastSeen := t0.Add(-time.Duration(i) * 2 * agentSeenRefresh / n).Truncate(time.Second)
		fleet[i] = readyMachine(t, i, lastSeen)
		if t0.Sub(lastSeen) > agentSeenRefresh {
			overdue++
		}
	}
	require.Greater(t, overdue, n/3)

	perMinute := map[int]int{}
	end := t0.Add(4 * agentSeenRefresh)
	for pass := 0; now.Before(end); pass++ {
		for i, m := range fleet {
			now = t0.Add(time.Duration(pass)*poll + time.Duration(i)*poll/n)
			before := writes.count()
			st := Derive(m, readyGuest(now, now.Add(-time.Second), false), now).Status
			written, err := r.writeStatus(context.Background(), m, st, false)
			require.NoError(t, err)
			fleet[i] = written
			if writes.count() > before {
				perMinute[int(now.Sub(t0)/time.Minute)]++
			}
		}
		if now.Sub(t0) < agentSeenRefresh/2-poll {
			require.Zero(t, writes.count(), "pass %d, %s after the start: the agent times alone were rewritten", pass, now.Sub(t0))
		}
	}
	steady := float64(n) / agentSeenRefresh.Minutes()
	for minute, w := range perMinute {
		assert.LessOrEqual(t, float64(w), 2*steady, "minute %d after the start: %d refreshes, a running controller makes %.0f a minute", minute, w, steady)
	}
	for _, m := range fleet {
		age := now.Sub(m.Status.Agent.LastSeenTime.Time)
		assert.LessOrEqual(t, age, agentSeenRefresh+poll, "machine %s last refreshed %s ago", m.Name, age)
	}
	// Steady state: each machine about once per agentSeenRefresh.
	last := 0
	for minute := int((end.Sub(t0) - 2*agentSeenRefresh) / time.Minute); minute < int(end.Sub(t0)/time.Minute); minute++ {
		last += perMinute[minute]
	}
	assert.InDelta(t, 2*n, last, 0.1*float64(2*n), "refreshes over the last two intervals")
}

// The machine's own delay: at least half agentSeenRefresh, below one and a
// half, and different machines' different.
func TestFirstRefreshDelay(t *testing.T) {
	seen := map[time.Duration]bool{}
	for i := range 1000 {
		d := firstRefreshDelay(types.UID(fmt.Sprintf("uid-%d", i)))
		require.GreaterOrEqual(t, d, agentSeenRefresh/2)
		require.Less(t, d, 3*agentSeenRefresh/2)
		seen[d.Truncate(agentSeenRefresh/10)] = true
	}
	assert.Len(t, seen, 10, "spread over the whole interval")
	at := refreshAt("uid-1", t0, t0.Add(-time.Hour))
	assert.Equal(t, t0.Add(agentSeenRefresh), at, "a process that has known the machine long refreshes it every agentSeenRefresh")
	met := t0.Add(time.Hour)
	assert.Equal(t, met.Add(firstRefreshDelay("uid-1")), refreshAt("uid-1", t0, met), "an overdue refresh waits for the machine's delay")
}

// An agent that answers but stopped moving on (its poll loop stuck) is
// stored at once, not at the next refresh: its lastProgressTime stops
// there, and the machine is found hung agentUnresponsiveTimeout later —
// minutes, where waiting for the refresh would add up to agentSeenRefresh.
func TestWriteStatus_AnAgentThatStoppedMovingOnIsStoredAtOnce(t *testing.T) {
	now := t0
	writes := &statusWrites{}
	r := quietReconciler(writes, &now)
	m := readyMachine(t, 1, t0)
	stuck := t0.Add(10 * time.Second)
	var hungAt time.Time
	for now = t0.Add(30 * time.Second); now.Before(t0.Add(agentSeenRefresh)); now = now.Add(30 * time.Second) {
		// The first answer after it stuck cannot tell: the one before moved.
		unmoved := now.After(t0.Add(30 * time.Second))
		var err error
		m, err = r.writeStatus(context.Background(), m, Derive(m, readyGuest(now, stuck, unmoved), now).Status, unmoved)
		require.NoError(t, err)
		if Hung(m) {
			hungAt = now
			break
		}
	}
	require.False(t, hungAt.IsZero(), "never found hung")
	timeout := agentUnresponsiveTimeout(testClass())
	assert.LessOrEqual(t, hungAt.Sub(stuck), timeout+90*time.Second, "found hung %s after the agent stuck", hungAt.Sub(stuck))
	assert.Equal(t, 2, writes.count(), "one write storing the status the agent repeats, one saying the machine hangs")

	// Once stored, an agent that stays stuck is not rewritten at every poll.
	for i := range 4 {
		now = now.Add(30 * time.Second)
		var err error
		m, err = r.writeStatus(context.Background(), m, Derive(m, readyGuest(now, stuck, true), now).Status, true)
		require.NoError(t, err, "poll %d", i)
	}
	assert.Equal(t, 2, writes.count())
}

// While a machine starts its agent is asked every 2 to 15 seconds, often
// twice within one of the agent's own polls: two answers with one
// observedAt say nothing there (only a machine that has been Ready can be
// found hung), and are not a write.
func TestWriteStatus_AStartingMachinesRepeatedAnswerIsNoWrite(t *testing.T) {
	now := t0
	writes := &statusWrites{}
	r := quietReconciler(writes, &now)
	m := testMachine()
	m.ResourceVersion = "1"
	o := readyGuest(t0, t0.Add(-time.Second), false)
	o.Agent.Stage = api.StageBooted
	m.Status = Derive(m, o, t0).Status
	require.False(t, WasReady(m))
	for i := range 5 {
		now = t0.Add(time.Duration(i+1) * 2 * time.Second)
		o := readyGuest(now, t0.Add(time.Duration(i)*2*time.Second), true)
		o.Agent.Stage = api.StageBooted
		var err error
		m, err = r.writeStatus(context.Background(), m, Derive(m, o, now).Status, true)
		require.NoError(t, err)
	}
	assert.Zero(t, writes.count())
}
