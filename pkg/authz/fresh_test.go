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
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	clocktesting "k8s.io/utils/clock/testing"
)

// rbac stands in for kube-apiserver: it allows what allowed holds (by
// user and name), counts the questions it is sent, and fails while down.
type rbac struct {
	mu      sync.Mutex
	allowed map[string]bool
	asked   map[string]int
	down    bool
}

func newRBAC(allowed ...string) *rbac {
	r := &rbac{allowed: map[string]bool{}, asked: map[string]int{}}
	for _, a := range allowed {
		r.allowed[a] = true
	}
	return r
}

func (r *rbac) set(who string, allowed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.allowed[who] = allowed
}

func (r *rbac) count(who string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked[who]
}

func (r *rbac) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	who := a.GetUser().GetName() + "/" + a.GetName()
	r.asked[who]++
	if r.down {
		return authorizer.DecisionNoOpinion, "", errors.New("kube-apiserver unreachable")
	}
	if r.allowed[who] {
		return authorizer.DecisionAllow, "bound", nil
	}
	return authorizer.DecisionNoOpinion, "no binding", nil
}

func (r *rbac) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(r.Authorize(ctx, a))
}

func (r *rbac) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func claimOn(userName, pool string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{
		User: &user.DefaultInfo{Name: userName, Groups: []string{"system:authenticated"}},
		Verb: "claim", Namespace: "ci", APIGroup: "dockerios.io", APIVersion: "v1alpha1",
		Resource: "macosmachinepools", Name: pool, ResourceRequest: true,
	}
}

var testTTLs = FreshOptions{AllowTTL: 10 * time.Second, DenyTTL: 5 * time.Second, RefreshWindow: time.Minute,
	MaxRefreshesPerPass: 32, Tick: time.Second, MaxEntries: 100}

// run advances the clock by d a second at a time, passing over the
// questions due at each tick as Run would.
func run(f *Fresh, clk *clocktesting.FakeClock, d time.Duration) {
	for end := clk.Now().Add(d); clk.Now().Before(end); {
		clk.Step(time.Second)
		f.refreshDue(context.Background())
	}
}

func decide(t *testing.T, f *Fresh, q authorizer.AttributesRecord) authorizer.Decision {
	t.Helper()
	d, _, _ := f.Authorize(context.Background(), q)
	return d
}

func TestFresh_AnswersFromMemoryWithinTheTTLOnly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	inner := newRBAC("alice/warm")
	opts := testTTLs
	opts.RefreshWindow = 0 // nothing asked ahead: the TTL alone
	f := newFresh(inner, opts, clk)

	assert.Equal(t, authorizer.DecisionAllow, decide(t, f, claimOn("alice", "warm")))
	inner.set("alice/warm", false) // the RoleBinding is deleted
	clk.Step(9 * time.Second)
	assert.Equal(t, authorizer.DecisionAllow, decide(t, f, claimOn("alice", "warm")), "within the TTL: the answer held")
	assert.Equal(t, 1, inner.count("alice/warm"))
	clk.Step(time.Second)
	assert.Equal(t, authorizer.DecisionNoOpinion, decide(t, f, claimOn("alice", "warm")), "an answer as old as its TTL is never given")
	assert.Equal(t, 2, inner.count("alice/warm"))

	// A no, kept for the shorter DenyTTL.
	inner.set("alice/warm", true)
	clk.Step(4 * time.Second)
	assert.Equal(t, authorizer.DecisionNoOpinion, decide(t, f, claimOn("alice", "warm")))
	clk.Step(time.Second)
	assert.Equal(t, authorizer.DecisionAllow, decide(t, f, claimOn("alice", "warm")))
	assert.Equal(t, 3, inner.count("alice/warm"))
}

// The point of Fresh: a question asked within the refresh window finds
// its answer in memory however long the pauses between requests, and a
// revoked permission still stops working within the TTL.
func TestFresh_KeepsRecentlyAskedQuestionsAnsweredAndNoOlderThanTheTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	inner := newRBAC("alice/warm")
	f := newFresh(inner, testTTLs, clk)

	assert.Equal(t, authorizer.DecisionAllow, decide(t, f, claimOn("alice", "warm")))
	for range 3 { // requests 25 s apart: each would miss a plain 10 s cache
		run(f, clk, 25*time.Second)
		asked := inner.count("alice/warm")
		assert.Equal(t, authorizer.DecisionAllow, decide(t, f, claimOn("alice", "warm")))
		assert.Equal(t, asked, inner.count("alice/warm"), "the request found its answer in memory")
	}
	// About one question per 3/4 of the TTL while kept fresh, no more.
	assert.LessOrEqual(t, inner.count("alice/warm"), 1+75/7+1)

	inner.set("alice/warm", false)
	run(f, clk, testTTLs.AllowTTL)
	assert.Equal(t, authorizer.DecisionNoOpinion, decide(t, f, claimOn("alice", "warm")), "revoked within the TTL")
}

func TestFresh_StopsAskingOnceTheRefreshWindowPasses(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	inner := newRBAC("alice/warm")
	f := newFresh(inner, testTTLs, clk)
	decide(t, f, claimOn("alice", "warm"))
	run(f, clk, testTTLs.RefreshWindow+testTTLs.AllowTTL)
	asked := inner.count("alice/warm")
	run(f, clk, 10*time.Minute)
	assert.Equal(t, asked, inner.count("alice/warm"), "nobody asked for a minute: nothing is asked ahead")
	f.mu.Lock()
	assert.Empty(t, f.entries, "and the expired answer is forgotten")
	f.mu.Unlock()
}

func TestFresh_NeverAnswersOneQuestionForAnother(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	inner := newRBAC("alice/warm")
	f := newFresh(inner, testTTLs, clk)
	otherGroups := claimOn("alice", "warm")
	otherGroups.User = &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated", "admins"}}
	otherVerb := claimOn("alice", "warm")
	otherVerb.Verb = "create"
	assert.Equal(t, authorizer.DecisionAllow, decide(t, f, claimOn("alice", "warm")))
	assert.Equal(t, authorizer.DecisionNoOpinion, decide(t, f, claimOn("alice", "cold")))
	assert.Equal(t, authorizer.DecisionNoOpinion, decide(t, f, claimOn("bob", "warm")))
	decide(t, f, otherGroups)
	decide(t, f, otherVerb)
	assert.Equal(t, 3, inner.count("alice/warm"), "three questions about alice/warm, each asked")
}

// A failed round trip is not an answer: it is neither kept nor replaces a
// good answer, and the next request asks again.
func TestFresh_KeepsNoErrors(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	inner := newRBAC("alice/warm")
	f := newFresh(inner, testTTLs, clk)
	inner.down = true
	_, _, err := f.Authorize(context.Background(), claimOn("alice", "warm"))
	require.Error(t, err)
	inner.down = false
	assert.Equal(t, authorizer.DecisionAllow, decide(t, f, claimOn("alice", "warm")))
	assert.Equal(t, 2, inner.count("alice/warm"))

	inner.down = true // the refresh fails: the held answer serves out its TTL
	run(f, clk, 9*time.Second)
	assert.Equal(t, authorizer.DecisionAllow, decide(t, f, claimOn("alice", "warm")))
	clk.Step(time.Second)
	_, _, err = f.Authorize(context.Background(), claimOn("alice", "warm"))
	assert.Error(t, err, "past its TTL the answer is not given, even with kube-apiserver down")
}

func TestFresh_BoundsWhatItHoldsAndAsksAhead(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	inner := newRBAC()
	opts := testTTLs
	opts.MaxEntries, opts.MaxRefreshesPerPass = 10, 3
	f := newFresh(inner, opts, clk)
	for i := range 25 {
		decide(t, f, claimOn("alice", "pool-"+strings.Repeat("x", i)))
		clk.Step(time.Millisecond)
	}
	f.mu.Lock()
	assert.Len(t, f.entries, 10)
	f.mu.Unlock()
	before := 0
	for i := range 25 {
		before += inner.count("alice/pool-" + strings.Repeat("x", i))
	}
	clk.Step(8 * time.Second)
	f.refreshDue(context.Background())
	after := 0
	for i := range 25 {
		after += inner.count("alice/pool-" + strings.Repeat("x", i))
	}
	assert.Equal(t, 3, after-before, "one pass asks at most MaxRefreshesPerPass")
	assert.Equal(t, before/25+1, inner.count("alice/pool-"+strings.Repeat("x", 24)), "the most recently asked first")

	// Full, the question asked least recently is forgotten, not the one
	// held longest.
	opts.MaxEntries = 3
	f = newFresh(inner, opts, clk)
	for _, pool := range []string{"a", "b", "c", "a", "d"} {
		decide(t, f, claimOn("carol", pool))
		clk.Step(time.Millisecond)
	}
	decide(t, f, claimOn("carol", "a"))
	decide(t, f, claimOn("carol", "b"))
	assert.Equal(t, 1, inner.count("carol/a"), "asked again lately: still held")
	assert.Equal(t, 2, inner.count("carol/b"), "asked least recently: forgotten")

	long := claimOn("alice", strings.Repeat("p", maxQuestionLen))
	decide(t, f, long)
	decide(t, f, long)
	assert.Equal(t, 2, inner.count("alice/"+strings.Repeat("p", maxQuestionLen)), "an outsized question is asked every time")
}

// A refresh whose question was forgotten while it was out (the cap evicted
// it) must not bring it back: it would look asked just now and be kept
// fresh for another window that nobody asked for.
func TestFresh_ARefreshDoesNotReviveAForgottenQuestion(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	f := newFresh(newRBAC(), testTTLs, clk)
	q := claimOn("alice", "warm")
	f.keep(question(q), q, answer{decision: authorizer.DecisionAllow}, clk.Now(), false)
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Empty(t, f.entries)
	assert.Zero(t, f.byAsked.Len())
}

// BenchmarkFresh_APassOverAFullMemory is one pass of Run over 8,192 kept
// answers, none due: it holds the lock every request's lookup takes.
func BenchmarkFresh_APassOverAFullMemory(b *testing.B) {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	opts := DefaultFreshOptions(10*time.Second, 10*time.Second)
	f := newFresh(newRBAC(), opts, clk)
	for i := range opts.MaxEntries {
		q := claimOn("alice", fmt.Sprintf("pool-%05d", i))
		f.Authorize(context.Background(), q)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f.refreshDue(context.Background())
	}
}
