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
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/client"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// fakeAgents plays the agents a Prober asks: each address answers what
// answer says for it, after gate lets it (when set).
type fakeAgents struct {
	mu       sync.Mutex
	answer   map[string]func() (*api.Status, error)
	gate     map[string]chan struct{}
	calls    map[string]int
	inFlight int
	maxSeen  int
}

func newFakeAgents() *fakeAgents {
	return &fakeAgents{answer: map[string]func() (*api.Status, error){}, gate: map[string]chan struct{}{}, calls: map[string]int{}}
}

func (f *fakeAgents) ask(ctx context.Context, addr string, _ []byte) (*api.Status, error) {
	f.mu.Lock()
	f.calls[addr]++
	f.inFlight++
	f.maxSeen = max(f.maxSeen, f.inFlight)
	gate, answer := f.gate[addr], f.answer[addr]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if answer == nil {
		return &api.Status{Stage: api.StageReady}, nil
	}
	return answer()
}

func (f *fakeAgents) set(addr string, answer func() (*api.Status, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer[addr] = answer
}

// hold makes addr's calls wait until the returned func is called.
func (f *fakeAgents) hold(addr string) (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(chan struct{})
	f.gate[addr] = c
	var once sync.Once
	return func() { once.Do(func() { close(c) }) }
}

func (f *fakeAgents) callsTo(addr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[addr]
}

func (f *fakeAgents) stats() (inFlight, maxSeen int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inFlight, f.maxSeen
}

// enqueued records what a Prober put back on the work queue.
type enqueued struct {
	mu   sync.Mutex
	keys []string
}

func (q *enqueued) add(ns, name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.keys = append(q.keys, ns+"/"+name)
}

func (q *enqueued) count(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, k := range q.keys {
		if k == key {
			n++
		}
	}
	return n
}

func startProber(t *testing.T, cfg ProberConfig) *Prober {
	t.Helper()
	p := NewProber(cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

func target(i int) ProbeTarget {
	return ProbeTarget{Namespace: "ci", Name: fmt.Sprintf("mac-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
		Address: fmt.Sprintf("10.0.0.%d:8443", i), Token: []byte("token")}
}

// waitResult polls Result until an answer is in.
func waitResult(t *testing.T, p *Prober, tg ProbeTarget, every time.Duration) ProbeResult {
	t.Helper()
	var r ProbeResult
	require.Eventually(t, func() bool {
		var ok bool
		r, ok = p.Result(tg, every, time.Time{})
		return ok
	}, 5*time.Second, time.Millisecond)
	return r
}

func TestProber_OneProbePerMachineAtATime(t *testing.T) {
	agents := newFakeAgents()
	tg := target(1)
	release := agents.hold(tg.Address)
	p := startProber(t, ProberConfig{Workers: 8, Ask: agents.ask})

	_, ok := p.Result(tg, time.Hour, time.Time{})
	assert.False(t, ok, "no answer before the first probe is back: not asked yet, not unreachable")
	require.Eventually(t, func() bool { n, _ := agents.stats(); return n == 1 }, 5*time.Second, time.Millisecond)
	for range 50 {
		_, ok := p.Result(tg, time.Hour, time.Time{})
		assert.False(t, ok)
	}
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, 1, agents.callsTo(tg.Address), "asked once however often it was read")
	release()
	waitResult(t, p, tg, time.Hour)
	assert.Equal(t, 1, agents.callsTo(tg.Address))
	_, maxSeen := agents.stats()
	assert.Equal(t, 1, maxSeen)
}

func TestProber_BoundedPool(t *testing.T) {
	for _, tc := range []struct {
		name            string
		workers         int
		machines        int
		wantMaxInFlight int
	}{
		{"more machines than workers", 4, 20, 4},
		{"fewer machines than workers", 8, 3, 3},
		{"one worker", 1, 5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agents := newFakeAgents()
			var releases []func()
			for i := range tc.machines {
				releases = append(releases, agents.hold(target(i).Address))
			}
			p := startProber(t, ProberConfig{Workers: tc.workers, Ask: agents.ask})
			for i := range tc.machines {
				p.Result(target(i), time.Hour, time.Time{})
			}
			require.Eventually(t, func() bool { n, _ := agents.stats(); return n == tc.wantMaxInFlight }, 5*time.Second, time.Millisecond)
			time.Sleep(20 * time.Millisecond)
			for _, r := range releases {
				r()
			}
			for i := range tc.machines {
				waitResult(t, p, target(i), time.Hour)
			}
			_, maxSeen := agents.stats()
			assert.Equal(t, tc.wantMaxInFlight, maxSeen)
		})
	}
}

// Agents that ran into the timeout last time get at most half of the
// pool: a machine whose agent answers is asked at once however many of
// them there are.
func TestProber_UnreachableAgentsDoNotStarveTheOthers(t *testing.T) {
	const timeout = 40 * time.Millisecond
	agents := newFakeAgents()
	q := &enqueued{}
	p := startProber(t, ProberConfig{Workers: 4, Timeout: timeout, Ask: agents.ask, Enqueue: q.add})
	var silent []ProbeTarget
	for i := range 10 {
		tg := target(i)
		silent = append(silent, tg)
		agents.set(tg.Address, func() (*api.Status, error) {
			time.Sleep(timeout)
			return nil, fmt.Errorf("%w: i/o timeout", client.ErrUnreachable)
		})
		p.Result(tg, time.Hour, time.Time{})
	}
	for _, tg := range silent {
		waitResult(t, p, tg, time.Hour)
	}
	// Now every silent agent hangs, and each is due again.
	time.Sleep(5 * time.Millisecond)
	for _, tg := range silent {
		agents.hold(tg.Address)
		_, ok := p.Result(tg, time.Nanosecond, time.Time{})
		assert.True(t, ok)
	}
	require.Eventually(t, func() bool { n, _ := agents.stats(); return n == 2 }, 5*time.Second, time.Millisecond)

	fresh := target(100)
	start := time.Now()
	r := waitResult(t, p, fresh, time.Hour)
	assert.NoError(t, r.Err)
	assert.Less(t, time.Since(start), timeout, "the new machine's agent is asked while the silent ones wait")
	time.Sleep(20 * time.Millisecond)
	n, _ := agents.stats()
	assert.Equal(t, 2, n, "at most half of the pool waits on agents that did not answer")
}

func TestProber_FeedsAnswersBack(t *testing.T) {
	ready := func() (*api.Status, error) { return &api.Status{Stage: api.StageReady}, nil }
	booted := func() (*api.Status, error) {
		return &api.Status{Stage: api.StageBooted, Reasons: []api.Reason{{Type: "SessionDown", Message: "no console user"}}}, nil
	}
	bootedLater := func() (*api.Status, error) {
		return &api.Status{Stage: api.StageBooted, Reasons: []api.Reason{{Type: "SessionDown", Message: "no console user"}}, ObservedAt: t0}, nil
	}
	unreachable := func() (*api.Status, error) { return nil, fmt.Errorf("%w: refused", client.ErrUnreachable) }
	timedOut := func() (*api.Status, error) { return nil, fmt.Errorf("%w: i/o timeout", client.ErrUnreachable) }
	unauth := func() (*api.Status, error) { return nil, client.ErrUnauthenticated }
	for _, tc := range []struct {
		name    string
		answers []func() (*api.Status, error)
		// fedBack: whether each answer put the machine back on the queue.
		fedBack []bool
	}{
		{"the first answer always", []func() (*api.Status, error){booted}, []bool{true}},
		{"an unchanged answer waits for the next poll", []func() (*api.Status, error){booted, bootedLater, booted}, []bool{true, false, false}},
		{"a new stage", []func() (*api.Status, error){booted, ready, ready}, []bool{true, true, false}},
		{"reachable, then not, then again", []func() (*api.Status, error){ready, unreachable, timedOut, ready}, []bool{true, true, false, true}},
		{"another reason it did not answer", []func() (*api.Status, error){unreachable, unauth}, []bool{true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A fake clock: the prober asks again only when the test
			// makes the answer as old as the poll interval.
			now := t0
			var clock sync.Mutex
			agents := newFakeAgents()
			q := &enqueued{}
			p := startProber(t, ProberConfig{Workers: 2, Ask: agents.ask, Enqueue: q.add,
				Now: func() time.Time { clock.Lock(); defer clock.Unlock(); return now }})
			tg := target(1)
			key := tg.Namespace + "/" + tg.Name
			const every = 30 * time.Second
			for i, answer := range tc.answers {
				agents.set(tg.Address, answer)
				clock.Lock()
				now = now.Add(every)
				heard := now
				clock.Unlock()
				before := q.count(key)
				p.Result(tg, every, time.Time{})
				require.Eventually(t, func() bool {
					r, ok := p.Result(tg, every, time.Time{})
					return ok && r.At.Equal(heard)
				}, 5*time.Second, time.Millisecond)
				time.Sleep(10 * time.Millisecond) // the callback follows the store
				assert.Equal(t, i+1, agents.callsTo(tg.Address))
				assert.Equal(t, tc.fedBack[i], q.count(key) > before, "answer %d fed back", i)
			}
		})
	}
}

func TestProber_AsksAgainWhenDue(t *testing.T) {
	now := t0
	var clock sync.Mutex
	tick := func(d time.Duration) { clock.Lock(); now = now.Add(d); clock.Unlock() }
	for _, tc := range []struct {
		name      string
		age       time.Duration // of the answer when read
		every     time.Duration
		notBefore time.Duration // from the answer's time; 0: none
		wantOK    bool
		wantAsked bool
	}{
		{"fresh", 5 * time.Second, 30 * time.Second, 0, true, false},
		{"as old as the poll interval", 30 * time.Second, 30 * time.Second, 0, true, true},
		{"older", 45 * time.Second, 30 * time.Second, 0, true, true},
		{"fresh but taken before the deadline that decides", 5 * time.Second, 30 * time.Second, time.Second, false, true},
		{"taken at the deadline", 5 * time.Second, 30 * time.Second, -time.Second, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agents := newFakeAgents()
			q := &enqueued{}
			p := startProber(t, ProberConfig{Workers: 2, Ask: agents.ask, Enqueue: q.add,
				Now: func() time.Time { clock.Lock(); defer clock.Unlock(); return now }})
			tg := target(1)
			first := waitResult(t, p, tg, tc.every)
			require.Equal(t, 1, agents.callsTo(tg.Address))
			assert.Equal(t, now, first.At, "an answer carries the time it was heard")
			tick(tc.age)
			var notBefore time.Time
			if tc.notBefore != 0 {
				notBefore = first.At.Add(tc.notBefore)
			}
			fed := q.count("ci/mac-1")
			r, ok := p.Result(tg, tc.every, notBefore)
			assert.Equal(t, tc.wantOK, ok)
			if ok {
				assert.Equal(t, first.At, r.At)
			}
			if tc.wantAsked {
				require.Eventually(t, func() bool { return agents.callsTo(tg.Address) == 2 }, 5*time.Second, time.Millisecond)
			} else {
				time.Sleep(20 * time.Millisecond)
				assert.Equal(t, 1, agents.callsTo(tg.Address))
			}
			if !tc.wantOK {
				require.Eventually(t, func() bool { return q.count("ci/mac-1") > fed }, 5*time.Second, time.Millisecond,
					"a reconcile that could not use the answer is told when the next one is in")
			}
		})
	}
}

// Between reconciles the prober keeps a machine's answer as fresh as its
// poll interval on its own.
func TestProber_KeepsTheAnswerFresh(t *testing.T) {
	agents := newFakeAgents()
	p := startProber(t, ProberConfig{Workers: 2, Ask: agents.ask})
	tg := target(1)
	waitResult(t, p, tg, 20*time.Millisecond)
	require.Eventually(t, func() bool { return agents.callsTo(tg.Address) >= 4 }, 5*time.Second, time.Millisecond)
}

func TestProber_AnswerOfAnotherAgentIsNotUsed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*ProbeTarget)
	}{
		{"moved", func(tg *ProbeTarget) { tg.Address = "10.0.9.9:8443" }},
		{"another token", func(tg *ProbeTarget) { tg.Token = []byte("other") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agents := newFakeAgents()
			q := &enqueued{}
			p := startProber(t, ProberConfig{Workers: 2, Ask: agents.ask, Enqueue: q.add})
			tg := target(1)
			waitResult(t, p, tg, time.Hour)
			moved := tg
			tc.change(&moved)
			agents.set(moved.Address, func() (*api.Status, error) { return &api.Status{Stage: api.StageBooted}, nil })
			_, ok := p.Result(moved, time.Hour, time.Time{})
			assert.False(t, ok, "what the old agent said is not this one's answer")
			waitResult(t, p, moved, time.Hour)
			if moved.Address != tg.Address {
				assert.Equal(t, 1, agents.callsTo(tg.Address))
				assert.Equal(t, 1, agents.callsTo(moved.Address))
			} else {
				assert.Equal(t, 2, agents.callsTo(tg.Address))
			}
			assert.Equal(t, 1, p.Len())
		})
	}
}

func TestProber_DropsMachinesGone(t *testing.T) {
	t.Run("forgotten", func(t *testing.T) {
		agents := newFakeAgents()
		q := &enqueued{}
		p := startProber(t, ProberConfig{Workers: 2, Ask: agents.ask, Enqueue: q.add})
		tg := target(1)
		waitResult(t, p, tg, time.Hour)
		require.Equal(t, 1, p.Len())
		p.Forget(tg.UID)
		assert.Zero(t, p.Len())
		p.Forget(tg.UID) // twice is fine
	})
	t.Run("forgotten while asked: the answer is dropped", func(t *testing.T) {
		agents := newFakeAgents()
		q := &enqueued{}
		p := startProber(t, ProberConfig{Workers: 2, Ask: agents.ask, Enqueue: q.add})
		tg := target(1)
		release := agents.hold(tg.Address)
		p.Result(tg, time.Hour, time.Time{})
		require.Eventually(t, func() bool { n, _ := agents.stats(); return n == 1 }, 5*time.Second, time.Millisecond)
		p.Forget(tg.UID)
		release()
		require.Eventually(t, func() bool { n, _ := agents.stats(); return n == 0 }, 5*time.Second, time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		assert.Zero(t, p.Len())
		assert.Zero(t, q.count("ci/mac-1"), "nobody is told of a machine that is gone")
	})
	t.Run("never read again", func(t *testing.T) {
		now := t0
		var clock sync.Mutex
		agents := newFakeAgents()
		p := startProber(t, ProberConfig{Workers: 2, Timeout: time.Second, Ask: agents.ask,
			Now: func() time.Time { clock.Lock(); defer clock.Unlock(); return now }})
		for i := range 20 {
			waitResult(t, p, target(i), 10*time.Millisecond)
		}
		clock.Lock()
		now = now.Add(time.Hour) // nobody has read them for an hour
		clock.Unlock()
		require.Eventually(t, func() bool { return p.Len() == 0 }, 5*time.Second, time.Millisecond,
			"machines no reconcile reads any more are dropped at their next probe")
		calls := 0
		for i := range 20 {
			calls += agents.callsTo(target(i).Address)
		}
		time.Sleep(50 * time.Millisecond)
		after := 0
		for i := range 20 {
			after += agents.callsTo(target(i).Address)
		}
		assert.Equal(t, calls, after, "and their agents are not asked any more")
	})
}

func TestProber_NilAsksNothing(t *testing.T) {
	var p *Prober
	_, ok := p.Result(target(1), time.Second, time.Time{})
	assert.False(t, ok)
	p.Forget("uid-1")
}

// Derive, given the prober's answers: when the agent was seen is when it
// answered, and a machine whose agent's answer is not in yet is neither
// unreachable, nor failed, nor hung for it.
func TestDerive_WithTheProbersAnswers(t *testing.T) {
	running := func() Observed {
		return Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true}
	}
	heard := t0.Add(40 * time.Second)
	now := t0.Add(time.Minute)

	o := running()
	o.Agent, o.AgentSeen = &api.Status{Stage: api.StageReady, ObservedAt: heard}, heard
	d := Derive(testMachine(), &o, now)
	if assert.NotNil(t, d.Status.Agent) {
		assert.Equal(t, heard, d.Status.Agent.LastSeenTime.Time, "seen when it answered, not when the answer was read")
		assert.Equal(t, heard, d.Status.Agent.LastProgressTime.Time)
	}
	assert.Equal(t, v1alpha1.MachineReady, d.Status.Phase)

	for _, tc := range []struct {
		name  string
		mut   func(*v1alpha1.MacOSMachine)
		now   time.Time
		phase v1alpha1.MacOSMachinePhase
		conds []string // type=Status/Reason
	}{
		{"VM just running", nil, t0.Add(time.Second), v1alpha1.MachineStarting,
			[]string{"AgentReachable=Unknown/NotStarted", "GuestReady=Unknown/NotStarted", "Ready=False/NotReady"}},
		{"past its startTimeout: not failed before the answer is in", nil, t0.Add(11 * time.Minute), v1alpha1.MachineStarting,
			[]string{"AgentReachable=Unknown/NotStarted"}},
		{"a Ready machine stays Ready (a restarted controller)", wasReady(metav1.ConditionTrue, t0, t0), t0.Add(time.Hour), v1alpha1.MachineReady,
			[]string{"AgentReachable=True/Unreachable", "GuestReady=True/Ready", "Ready=True/Ready"}},
		{"a silent agent is not found hung before its answer is in", wasReady(metav1.ConditionFalse, t0, t0), t0.Add(time.Hour), v1alpha1.MachineReady,
			[]string{"AgentReachable=False/Unreachable", "Ready=False/NoLongerReady"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMachine()
			if tc.mut != nil {
				tc.mut(m)
			}
			o := running()
			d := Derive(m, &o, tc.now)
			assert.Nil(t, d.Fail)
			assert.Equal(t, tc.phase, d.Status.Phase)
			for _, want := range tc.conds {
				assert.Contains(t, conds(d.Status.Conditions), want)
			}
		})
	}
}

// The macOS version the agent reports reaches status.agent.osVersion,
// for a workload machine and an install session alike (a promotion
// records it as the image's status.macOSVersion).
func TestDerive_AgentOSVersion(t *testing.T) {
	for _, m := range []*v1alpha1.MacOSMachine{testMachine(), installSession(testMachine())} {
		o := Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded), RecoveryDV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true,
			Agent: &api.Status{Stage: api.StageReady, AgentVersion: "v1.4.0", OSVersion: "14.6.1", ObservedAt: t0}, AgentSeen: t0}
		d := Derive(m, &o, t0.Add(time.Minute))
		require.NotNil(t, d.Status.Agent, m.Spec.Purpose)
		assert.Equal(t, "14.6.1", d.Status.Agent.OSVersion, m.Spec.Purpose)
		assert.Equal(t, "v1.4.0", d.Status.Agent.Version, m.Spec.Purpose)

		// An agent that does not know (an older agent, another OS) says
		// nothing, and nothing is made up.
		o.Agent = &api.Status{Stage: api.StageReady, ObservedAt: t0}
		d = Derive(m, &o, t0.Add(time.Minute))
		require.NotNil(t, d.Status.Agent)
		assert.Empty(t, d.Status.Agent.OSVersion)
	}
}

func conds(cs []metav1.Condition) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return out
}

func TestAnswerNeededFrom(t *testing.T) {
	class := testClass() // startTimeout 10m
	class.Spec.AgentUnresponsiveTimeout = &metav1.Duration{Duration: 3 * time.Minute}
	o := &Observed{Class: class, VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning)}
	for _, tc := range []struct {
		name      string
		mut       func(*v1alpha1.MacOSMachine)
		faultOver time.Time
		now       time.Time
		want      time.Time
	}{
		{"starting, before its startTimeout", nil, time.Time{}, t0.Add(time.Minute), time.Time{}},
		{"starting, past its startTimeout", nil, time.Time{}, t0.Add(11 * time.Minute), t0.Add(10 * time.Minute)},
		{"starting, past its startTimeout, a fault ended since", nil, t0.Add(10*time.Minute + 30*time.Second), t0.Add(11 * time.Minute), t0.Add(10*time.Minute + 30*time.Second)},
		{"starting, past its startTimeout, a fault ended before", nil, t0.Add(5 * time.Minute), t0.Add(11 * time.Minute), t0.Add(10 * time.Minute)},
		{"starting, a fault ended, nothing due", nil, t0.Add(30 * time.Second), t0.Add(time.Minute), time.Time{}},
		{"ready, answering", wasReady(metav1.ConditionTrue, t0, t0.Add(time.Hour)), time.Time{}, t0.Add(time.Hour), time.Time{}},
		{"ready, silent, before its agentUnresponsiveTimeout", wasReady(metav1.ConditionFalse, t0, t0), time.Time{}, t0.Add(time.Minute), time.Time{}},
		{"ready, silent, past its agentUnresponsiveTimeout", wasReady(metav1.ConditionFalse, t0, t0), time.Time{}, t0.Add(time.Hour), t0.Add(3 * time.Minute)},
		{"ready, silent through a fault that ended since", wasReady(metav1.ConditionFalse, t0, t0), t0.Add(50 * time.Minute), t0.Add(time.Hour), t0.Add(50 * time.Minute)},
		// An install session has no startTimeout: no answer is ever due.
		{"install session, past its class's startTimeout", func(m *v1alpha1.MacOSMachine) { installSession(m) }, time.Time{}, t0.Add(11 * time.Hour), time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMachine()
			if tc.mut != nil {
				tc.mut(m)
			}
			assert.Equal(t, tc.want, answerNeededFrom(m, o, tc.faultOver, tc.now))
		})
	}
}

// Two answers in a row with one observedAt say the agent's poll loop did
// not run between them (Unmoved); the first answer, or one that moved on,
// cannot say so.
func TestProber_MarksAnAnswerThatDidNotMoveOn(t *testing.T) {
	now := t0
	var clock sync.Mutex
	agents := newFakeAgents()
	p := startProber(t, ProberConfig{Workers: 2, Ask: agents.ask,
		Now: func() time.Time { clock.Lock(); defer clock.Unlock(); return now }})
	tg := target(1)
	const every = 30 * time.Second
	for i, tc := range []struct {
		observed    time.Time
		err         error
		wantUnmoved bool
	}{
		{observed: t0, wantUnmoved: false},
		{observed: t0.Add(25 * time.Second), wantUnmoved: false},
		{observed: t0.Add(25 * time.Second), wantUnmoved: true},
		{observed: t0.Add(25 * time.Second), wantUnmoved: true},
		{err: client.ErrUnreachable, wantUnmoved: false},
		{observed: t0.Add(25 * time.Second), wantUnmoved: false},
		{observed: t0.Add(80 * time.Second), wantUnmoved: false},
	} {
		agents.set(tg.Address, func() (*api.Status, error) {
			if tc.err != nil {
				return nil, tc.err
			}
			return &api.Status{Stage: api.StageReady, ObservedAt: tc.observed}, nil
		})
		clock.Lock()
		now = now.Add(every)
		heard := now
		clock.Unlock()
		var r ProbeResult
		p.Result(tg, every, time.Time{})
		require.Eventually(t, func() bool {
			var ok bool
			r, ok = p.Result(tg, every, time.Time{})
			return ok && r.At.Equal(heard)
		}, 5*time.Second, time.Millisecond, "answer %d", i)
		assert.Equal(t, tc.wantUnmoved, r.Unmoved, "answer %d", i)
	}
}
