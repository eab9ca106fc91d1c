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

package authz

import (
	"container/list"
	"context"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/utils/clock"
)

// FreshOptions says how long answers are kept and which are kept fresh.
type FreshOptions struct {
	// AllowTTL and DenyTTL bound how old an answer may be when it is given:
	// an allow no older than AllowTTL, anything else no older than DenyTTL,
	// counted from the moment the question was sent. Zero: never kept.
	AllowTTL, DenyTTL time.Duration
	// RefreshWindow: a question asked within it is asked again before its
	// answer expires, so that the next request finds it answered. Zero:
	// nothing is asked ahead.
	RefreshWindow time.Duration
	// MaxRefreshesPerPass bounds what one pass (every Tick) asks ahead,
	// the most recently asked first; the rest expire and are asked when
	// next needed, as without refreshing.
	MaxRefreshesPerPass int
	// Tick is how often due answers are looked for.
	Tick time.Duration
	// MaxEntries bounds the questions held; past it the least recently
	// asked is forgotten. Zero: nothing is kept.
	MaxEntries int
}

// DefaultFreshOptions are the delegated authorizer's own TTLs (10 s, as
// k8s.io/apiserver's --authorization-webhook-cache-*-ttl default them) and
// a minute of asking ahead.
func DefaultFreshOptions(allowTTL, denyTTL time.Duration) FreshOptions {
	return FreshOptions{AllowTTL: allowTTL, DenyTTL: denyTTL, RefreshWindow: time.Minute,
		MaxRefreshesPerPass: 32, Tick: time.Second, MaxEntries: 8192}
}

// maxQuestionLen is the longest question kept: a longer one is a request
// whose caller-controlled attributes (names, paths, selectors) are
// unusually large, and is asked every time, as the webhook authorizer
// does with its own cache (maxControlledAttrCacheSize).
const maxQuestionLen = 16 << 10

// Fresh keeps the delegated authorizer's answers for as long as its
// cache would, and asks again, ahead of expiry, the questions that were
// asked recently.
//
// Why: an aggregated apiserver asks kube-apiserver (a SubjectAccessReview)
// what kube-apiserver's own resources decide in memory. The webhook
// authorizer's cache holds an answer for 10 s and then forgets it, so the
// first claim after a quiet spell of ten seconds pays two round trips
// (create on claims, claim on the pool) — measured 6–9 ms on top of a
// 7 ms claim — and at 50 clients every claim of such a burst waits for
// them. Asking ahead changes none of the answers' bounds: no answer older
// than its TTL is ever given, so a revoked permission stops working as
// soon as it did before; it only moves the round trip off the request.
// The cost is at most one SubjectAccessReview per recently asked question
// per TTL, capped per pass.
type Fresh struct {
	inner authorizer.Authorizer
	opts  FreshOptions
	clock clock.PassiveClock

	mu      sync.Mutex
	entries map[string]*entry
	// byAsked orders the entries, most recently asked first, so that the
	// one to forget when full is found without a scan: it happens on a
	// request's path, under mu. Its elements hold the entries themselves,
	// so that a pass of Run over a full memory (8,192 by default) looks
	// nothing up while it holds mu.
	byAsked *list.List // of *entry
}

var _ authorizer.Authorizer = &Fresh{}

type entry struct {
	q          string
	attrs      authorizer.AttributesRecord
	answer     answer
	answerSent time.Time // when the question that answered it was sent
	lastAsked  time.Time // when a request last asked it
	asked      *list.Element
}

// NewFresh keeps inner's answers as opts says. Run asks ahead.
func NewFresh(inner authorizer.Authorizer, opts FreshOptions) *Fresh {
	return newFresh(inner, opts, clock.RealClock{})
}

func newFresh(inner authorizer.Authorizer, opts FreshOptions, c clock.PassiveClock) *Fresh {
	return &Fresh{inner: inner, opts: opts, clock: c, entries: map[string]*entry{}, byAsked: list.New()}
}

func (f *Fresh) ttl(a answer) time.Duration {
	if a.decision == authorizer.DecisionAllow {
		return f.opts.AllowTTL
	}
	return f.opts.DenyTTL
}

// Authorize answers from memory when it holds an answer younger than its
// TTL, and asks inner otherwise.
func (f *Fresh) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	q := question(attrs)
	now := f.clock.Now()
	f.mu.Lock()
	if e := f.entries[q]; e != nil {
		e.lastAsked = now
		f.byAsked.MoveToFront(e.asked)
		if now.Sub(e.answerSent) < f.ttl(e.answer) {
			a := e.answer
			f.mu.Unlock()
			metricDecisions.WithLabelValues("memory").Inc()
			return a.decision, a.reason, a.err
		}
	}
	f.mu.Unlock()

	d, reason, err := f.inner.Authorize(ctx, attrs)
	metricDecisions.WithLabelValues("asked").Inc()
	f.keep(q, attrs, answer{d, reason, err}, now, true)
	return d, reason, err
}

// keep stores an answer to q that was sent at sent, unless it is an error
// (asked again next time), too long to keep, or older than the one held.
// A request's answer (asked) may hold a new question; a refresh's answer
// is dropped when its question was forgotten meanwhile.
func (f *Fresh) keep(q string, attrs authorizer.Attributes, a answer, sent time.Time, asked bool) {
	if a.err != nil || len(q) > maxQuestionLen || f.ttl(a) <= 0 || f.opts.MaxEntries <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entries[q]
	if e == nil {
		if !asked {
			return
		}
		if len(f.entries) >= f.opts.MaxEntries {
			f.forget(f.byAsked.Back().Value.(*entry))
		}
		e = &entry{q: q, attrs: record(attrs), lastAsked: sent}
		e.asked = f.byAsked.PushFront(e)
		f.entries[q] = e
	}
	if sent.Before(e.answerSent) {
		return
	}
	e.answer, e.answerSent = a, sent
}

// forget drops e. The caller holds mu.
func (f *Fresh) forget(e *entry) {
	f.byAsked.Remove(e.asked)
	delete(f.entries, e.q)
}

// ConditionsAwareAuthorize is inner's, unkept: the delegated authorizer
// is not conditions-aware, and a conditional answer is evaluated against
// each request's own data.
func (f *Fresh) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return f.inner.ConditionsAwareAuthorize(ctx, attrs)
}

// EvaluateConditions is inner's.
func (f *Fresh) EvaluateConditions(ctx context.Context, d authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return f.inner.EvaluateConditions(ctx, d, data)
}

// Run asks ahead, and forgets expired answers nobody asked for within the
// window, every Tick until ctx is done.
func (f *Fresh) Run(ctx context.Context) {
	if f.opts.Tick <= 0 {
		return
	}
	t := time.NewTicker(f.opts.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.refreshDue(ctx)
		}
	}
}

// refreshDue forgets what has not been asked within the refresh window and
// has expired, and asks again, in the background, the questions asked
// within it whose answers have lived three quarters of their TTL. It
// returns once those questions are sent and answered, so that no question
// is asked ahead twice at once (Run calls it one pass after another).
func (f *Fresh) refreshDue(ctx context.Context) {
	now := f.clock.Now()
	type due struct {
		q     string
		attrs authorizer.AttributesRecord
	}
	var dues []due
	f.mu.Lock()
	// Most recently asked first: the pass's cap keeps those.
	for el := f.byAsked.Front(); el != nil; {
		e := el.Value.(*entry)
		el = el.Next()
		age, ttl := now.Sub(e.answerSent), f.ttl(e.answer)
		recent := f.opts.RefreshWindow > 0 && now.Sub(e.lastAsked) <= f.opts.RefreshWindow
		switch {
		case !recent && age >= ttl:
			f.forget(e)
		case recent && age >= ttl*3/4 && len(dues) < f.opts.MaxRefreshesPerPass:
			dues = append(dues, due{e.q, e.attrs})
		}
	}
	f.mu.Unlock()

	var wg sync.WaitGroup
	for _, d := range dues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := f.clock.Now()
			dec, reason, err := f.inner.Authorize(ctx, d.attrs)
			f.keep(d.q, d.attrs, answer{dec, reason, err}, sent, false)
			result := "answered"
			if err != nil {
				result = "error"
			}
			metricRefreshes.WithLabelValues(result).Inc()
		}()
	}
	wg.Wait()
}

// record copies what an authorizer may decide on out of a request's
// attributes, so that the question can be asked again after the request
// has ended.
func record(a authorizer.Attributes) authorizer.AttributesRecord {
	r := authorizer.AttributesRecord{
		User: a.GetUser(), Verb: a.GetVerb(), Namespace: a.GetNamespace(), APIGroup: a.GetAPIGroup(),
		APIVersion: a.GetAPIVersion(), Resource: a.GetResource(), Subresource: a.GetSubresource(),
		Name: a.GetName(), ResourceRequest: a.IsResourceRequest(), Path: a.GetPath(),
	}
	r.FieldSelectorRequirements, r.FieldSelectorParsingErr = a.GetFieldSelector()
	r.LabelSelectorRequirements, r.LabelSelectorParsingErr = a.GetLabelSelector()
	return r
}
