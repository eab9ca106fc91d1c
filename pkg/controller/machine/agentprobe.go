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
	"bytes"
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/client"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// DefaultProbeWorkers is how many agents the prober asks at once when not
// told otherwise: with half of them waiting out unreachable agents, as
// many as the default machine workers are left for agents that answer.
const DefaultProbeWorkers = 32

// Prober asks the guest agents off the reconcile workers. A call to an
// agent that does not answer lasts the whole AgentTimeout; made by a
// reconcile worker, a fleet-wide fault of the agent network would hold
// every worker, and provisioning and teardown of every other machine would
// wait behind it. Instead a reconcile reads the last answer the prober
// holds (with the time it was heard), and the prober, on its own bounded
// pool, asks each agent again when that answer is as old as the machine's
// poll interval; an answer that changes what the machine's status says, or
// one a reconcile is waiting for, puts the machine back on the work queue.
//
// Agents whose last probe took at least half the timeout (black-holed, or
// a hung guest) are asked by at most half of the pool, so they can never
// take every worker from agents that answer: a new machine's agent is asked
// as quickly during a network fault as without it.
//
// The answers are only a cache: what one decides is written to the
// machine's status, and a restarted controller asks every agent again
// before it says anything new about it.
type Prober struct {
	workers, slowMax int
	timeout          time.Duration
	ask              func(ctx context.Context, addr string, token []byte) (*api.Status, error)
	enqueue          func(namespace, name string)
	now              func() time.Time

	mu      sync.Mutex
	cond    *sync.Cond
	entries map[types.UID]*probeEntry
	// fast and slow are the probes waiting for a worker, each entry at most
	// once; slow holds those whose last probe took at least half the
	// timeout, slowBusy how many of those are being probed.
	fast, slow list.List
	slowBusy   int
	stopped    bool

	inFlight prometheus.Gauge
	duration *prometheus.HistogramVec
}

// ProberConfig configures a Prober. Zero values take the defaults noted.
type ProberConfig struct {
	// Workers is how many agents are asked at once (DefaultProbeWorkers).
	Workers int
	// Timeout bounds one call to an agent (client.DefaultTimeout).
	Timeout time.Duration
	// Enqueue puts a machine back on the reconcile queue: called, outside
	// any lock, when an answer came that its reconcile should see.
	Enqueue func(namespace, name string)
	// Ask calls one agent; the agent client when nil. Tests replace it.
	Ask func(ctx context.Context, addr string, token []byte) (*api.Status, error)
	// Now stamps answers; time.Now when nil.
	Now func() time.Time
}

// ProbeTarget is a machine's agent: where it listens and the token it
// must prove.
type ProbeTarget struct {
	Namespace, Name string
	UID             types.UID
	Address         string
	Token           []byte
}

// ProbeResult is what an agent said, or why it said nothing, and when.
type ProbeResult struct {
	Status *api.Status
	Err    error
	// At is when the answer (or the failure) came back: the time the agent
	// was last seen, when it answered.
	At time.Time
	// Took is how long the call lasted.
	Took time.Duration
	// Unmoved: the agent answered the answer before this one with the
	// same observedAt. Its poll loop did not run between the two calls,
	// which are a poll interval apart: stuck, or slower than the poll.
	Unmoved bool
}

type probeEntry struct {
	target ProbeTarget
	// every is the machine's poll interval, observed when a reconcile last
	// read the entry: an entry nobody reads for long is dropped.
	every    time.Duration
	observed time.Time
	result   *ProbeResult
	// waited: a reconcile found no answer it could use and waits for the
	// next one, whatever it says.
	waited   bool
	inFlight bool
	// queued is the entry's element in fast or slow while it waits for a
	// worker.
	queued *list.Element
	lane   *list.List
	timer  *time.Timer
	armed  time.Time
	armSeq uint64
}

// NewProber returns a prober with its metrics registered with reg (when
// not nil). Run starts its workers.
func NewProber(cfg ProberConfig, reg prometheus.Registerer) *Prober {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultProbeWorkers
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = client.DefaultTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Enqueue == nil {
		cfg.Enqueue = func(string, string) {}
	}
	p := &Prober{workers: cfg.Workers, slowMax: max(cfg.Workers/2, 1), timeout: cfg.Timeout, ask: cfg.Ask,
		enqueue: cfg.Enqueue, now: cfg.Now, entries: map[types.UID]*probeEntry{},
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dockerios_agent_probes_in_flight",
			Help: "Calls to guest agents under way (the prober's pool)."}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dockerios_agent_probe_duration_seconds",
			Help:    "Time one call to a guest agent took, by the AgentReachable reason it gave (Answered, Unreachable, ...).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"result"}),
	}
	p.cond = sync.NewCond(&p.mu)
	if p.ask == nil {
		p.ask = func(ctx context.Context, addr string, token []byte) (*api.Status, error) {
			return askAgent(ctx, addr, token, p.timeout)
		}
	}
	if reg != nil {
		reg.MustRegister(p.inFlight, p.duration, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dockerios_agent_probes_queued",
			Help: "Machines whose agent is due to be asked, waiting for one of the prober's workers."}, func() float64 {
			p.mu.Lock()
			defer p.mu.Unlock()
			return float64(p.fast.Len() + p.slow.Len())
		}))
	}
	return p
}

// Run asks agents on the prober's workers until ctx ends.
func (p *Prober) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range p.workers {
		wg.Add(1)
		go func() { defer wg.Done(); p.work(ctx) }()
	}
	<-ctx.Done()
	p.mu.Lock()
	p.stopped = true
	for _, e := range p.entries {
		p.disarm(e)
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	wg.Wait()
}

// Result returns the last answer of the machine's agent, if there is one
// from notBefore on, and makes sure the agent is asked again: at once when
// there is none, or it is as old as every; else every after it was taken.
// ok is false while no usable answer is in (the machine's first probe, or
// its agent moved): the agent is then not known to be unreachable, only
// not asked yet, and the machine is put back on the queue when the answer
// comes.
//
// notBefore is for decisions that must not be taken on an old answer: a
// machine is failed for its startTimeout, or found hung, only on an answer
// taken after the deadline that decides it.
func (p *Prober) Result(t ProbeTarget, every time.Duration, notBefore time.Time) (ProbeResult, bool) {
	if p == nil {
		return ProbeResult{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	e := p.entries[t.UID]
	if e != nil && (e.target.Address != t.Address || !bytes.Equal(e.target.Token, t.Token)) {
		// The agent moved, or holds another token: what it said before is
		// not this agent's answer. A probe still out is dropped when it
		// comes back (its entry is gone).
		p.drop(e)
		e = nil
	}
	if e == nil {
		t.Token = bytes.Clone(t.Token)
		e = &probeEntry{target: t}
		p.entries[t.UID] = e
	}
	e.every, e.observed = max(every, time.Millisecond), now
	r := e.result
	usable := r != nil && !r.At.Before(notBefore)
	switch {
	case !usable:
		e.waited = true
		p.queue(e)
	case now.Sub(r.At) >= e.every:
		p.queue(e)
	default:
		p.arm(e, r.At.Add(e.every))
	}
	if !usable {
		return ProbeResult{}, false
	}
	return *r, true
}

// Forget drops what the prober holds of a machine: its VM stopped, or it
// is going or gone. A probe under way is let finish and its answer dropped.
func (p *Prober) Forget(uid types.UID) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.entries[uid]; e != nil {
		p.drop(e)
	}
}

// Len is how many machines the prober holds answers for (or asks).
func (p *Prober) Len() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

func (p *Prober) drop(e *probeEntry) {
	p.disarm(e)
	if e.queued != nil {
		e.lane.Remove(e.queued)
		e.queued, e.lane = nil, nil
	}
	delete(p.entries, e.target.UID)
}

// queue puts e in line for a worker now, unless it is in line or being
// probed already: one probe per machine at a time.
func (p *Prober) queue(e *probeEntry) {
	if e.inFlight || e.queued != nil || p.stopped {
		return
	}
	p.disarm(e)
	e.lane = &p.fast
	if e.result != nil && e.result.Took >= p.timeout/2 {
		e.lane = &p.slow
	}
	e.queued = e.lane.PushBack(e)
	p.cond.Signal()
}

// arm queues e at the given time, unless it is due sooner already.
func (p *Prober) arm(e *probeEntry, at time.Time) {
	if e.inFlight || e.queued != nil || p.stopped || (e.timer != nil && !e.armed.After(at)) {
		return
	}
	p.disarm(e)
	e.armSeq++
	seq := e.armSeq
	e.armed = at
	e.timer = time.AfterFunc(at.Sub(p.now()), func() { p.due(e, seq) })
}

func (p *Prober) disarm(e *probeEntry) {
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	e.armSeq++
}

func (p *Prober) due(e *probeEntry, seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.entries[e.target.UID] != e || e.armSeq != seq {
		return // re-armed, dropped or replaced meanwhile
	}
	e.timer = nil
	if p.unread(e, p.now()) {
		p.drop(e)
		return
	}
	p.queue(e)
}

// unread says whether no reconcile has read e for so long that nobody
// will: its machine is gone, stopped or not reconciled by this process
// any more. A reconcile reads every machine with a running VM at least
// every poll interval.
func (p *Prober) unread(e *probeEntry, now time.Time) bool {
	return now.Sub(e.observed) > 3*e.every+2*p.timeout+30*time.Second
}

func (p *Prober) work(ctx context.Context) {
	for {
		p.mu.Lock()
		var e *probeEntry
		slow := false
		for e == nil {
			switch {
			case p.stopped:
				p.mu.Unlock()
				return
			case p.fast.Len() > 0:
				e = p.fast.Remove(p.fast.Front()).(*probeEntry)
			case p.slow.Len() > 0 && p.slowBusy < p.slowMax:
				e = p.slow.Remove(p.slow.Front()).(*probeEntry)
				slow = true
				p.slowBusy++
			default:
				p.cond.Wait()
			}
		}
		e.queued, e.lane, e.inFlight = nil, nil, true
		t := e.target
		p.mu.Unlock()

		p.inFlight.Inc()
		start := time.Now()
		st, err := p.ask(ctx, t.Address, t.Token)
		took := time.Since(start)
		p.inFlight.Dec()
		reason := ReasonAgentAnswered
		if err != nil {
			reason = agentReason(err)
		}
		p.duration.WithLabelValues(reason).Observe(took.Seconds())

		p.mu.Lock()
		if slow {
			p.slowBusy--
			p.cond.Signal()
		}
		e.inFlight = false
		notify := false
		if p.entries[t.UID] == e && ctx.Err() == nil {
			r := &ProbeResult{Status: st, Err: err, At: p.now(), Took: took}
			if prev := e.result; st != nil && prev != nil && prev.Status != nil {
				r.Unmoved = st.ObservedAt.Equal(prev.Status.ObservedAt)
			}
			notify = e.waited || news(e.result, r)
			e.result, e.waited = r, false
			if p.unread(e, r.At) {
				p.drop(e)
			} else {
				p.arm(e, r.At.Add(e.every))
			}
		}
		p.mu.Unlock()
		if notify {
			p.enqueue(t.Namespace, t.Name)
		}
	}
}

// news says whether next changes what the machine's status says of its
// agent (reachable or not and why, its stage and first reason): only then
// is the machine reconciled for it. Anything else (the time it was seen,
// its disk) waits for the machine's next poll, which reads the answer
// then.
func news(prev, next *ProbeResult) bool {
	switch {
	case prev == nil || (prev.Err == nil) != (next.Err == nil):
		return true
	case next.Err != nil:
		return agentReason(prev.Err) != agentReason(next.Err)
	}
	return prev.Status.Stage != next.Status.Stage || firstReason(prev.Status) != firstReason(next.Status)
}

func firstReason(s *api.Status) api.Reason {
	if len(s.Reasons) == 0 {
		return api.Reason{}
	}
	return s.Reasons[0]
}

// agentPoll is how often a machine's agent is asked: every quarter of the
// time since its VM started running (between pollStartingMin and
// pollStartingMax) until the machine has been Ready, then every pollReady.
func agentPoll(m *v1alpha1.MacOSMachine, runningSince, now time.Time) time.Duration {
	if WasReady(m) {
		return pollReady
	}
	return min(max(now.Sub(runningSince)/4, pollStartingMin), pollStartingMax)
}

// answerNeededFrom is the time from which an agent's answer must have been
// taken for the decision due now: the machine's startTimeout deadline once
// it has passed (a machine never Ready), or the deadline by which a silent
// agent makes a Ready-once machine hung — and, when a network fault ended
// after that deadline, its end: the silence heard during the fault was the
// fault's. Zero when nothing is due.
func answerNeededFrom(m *v1alpha1.MacOSMachine, o *Observed, faultOver, now time.Time) time.Time {
	var deadline time.Time
	if WasReady(m) {
		at, ok := hungDeadline(&m.Status, o.Class)
		if !ok {
			return time.Time{}
		}
		deadline = at
	} else if o.VM != nil && o.Class != nil && !Installing(m) {
		// (An install session has no startTimeout: nothing is due.)
		deadline = o.VM.CreationTimestamp.Add(startTimeout(o.Class))
	}
	if deadline.IsZero() || now.Before(deadline) {
		return time.Time{}
	}
	if faultOver.After(deadline) {
		return faultOver
	}
	return deadline
}

// askAgent calls the guest agent once.
func askAgent(ctx context.Context, addr string, token []byte, timeout time.Duration) (*api.Status, error) {
	c, err := client.New(addr, token, client.Options{Timeout: timeout})
	if err != nil {
		return nil, err
	}
	defer c.CloseIdleConnections()
	return c.Status(ctx)
}
