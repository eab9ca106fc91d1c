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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// slowAuthorizer answers after release is closed, allowing only the names
// in allow, and counts how often it was asked.
type slowAuthorizer struct {
	release chan struct{}
	allow   map[string]bool
	asked   atomic.Int32
}

func (s *slowAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	s.asked.Add(1)
	<-s.release
	if s.allow[a.GetName()] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionDeny, "not " + a.GetName(), nil
}

func (s *slowAuthorizer) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(s.Authorize(ctx, a))
}

func (s *slowAuthorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func bindOn(userName, machine string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{
		User: &user.DefaultInfo{Name: userName, Groups: []string{"system:authenticated"}},
		Verb: "bind", Namespace: "ci", APIGroup: "dockerios.io", APIVersion: "v1alpha1",
		Resource: "macosmachines", Name: machine, ResourceRequest: true,
	}
}

// ask asks every question at once and returns the answers once all came.
func ask(a authorizer.Authorizer, inner *slowAuthorizer, questions []authorizer.AttributesRecord, want int32) []authorizer.Decision {
	answers := make([]authorizer.Decision, len(questions))
	var wg sync.WaitGroup
	for i, q := range questions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], _, _ = a.Authorize(context.Background(), q)
		}()
	}
	// Let every asker reach the inner authorizer (or wait on another's
	// question) before it answers.
	deadline := time.Now().Add(5 * time.Second)
	for inner.asked.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(inner.release)
	wg.Wait()
	return answers
}

func TestCoalesce_AsksOnceForTheSameQuestionAskedTogether(t *testing.T) {
	inner := &slowAuthorizer{release: make(chan struct{}), allow: map[string]bool{"mac-a": true}}
	questions := make([]authorizer.AttributesRecord, 50)
	for i := range questions {
		questions[i] = bindOn("system:serviceaccount:dockerios-system:controller", "mac-a")
	}
	answers := ask(Coalesce(inner), inner, questions, 1)
	assert.Equal(t, int32(1), inner.asked.Load(), "one question, asked once")
	for _, d := range answers {
		assert.Equal(t, authorizer.DecisionAllow, d)
	}
}

// Questions that differ in anything — the name, the user, the user's
// groups, the verb — are never answered for one another: a deny of one
// name stays a deny however many allowed questions are in flight.
func TestCoalesce_NeverAnswersOneQuestionForAnother(t *testing.T) {
	inner := &slowAuthorizer{release: make(chan struct{}), allow: map[string]bool{"mac-a": true}}
	otherGroups := bindOn("alice", "mac-a")
	otherGroups.User = &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated", "admins"}}
	otherVerb := bindOn("alice", "mac-a")
	otherVerb.Verb = "get"
	questions := []authorizer.AttributesRecord{
		bindOn("alice", "mac-a"), bindOn("alice", "mac-a"),
		bindOn("alice", "mac-b"),
		bindOn("bob", "mac-a"),
		otherGroups, otherVerb,
	}
	answers := ask(Coalesce(inner), inner, questions, 5)
	assert.Equal(t, int32(5), inner.asked.Load(), "five different questions")
	assert.Equal(t, []authorizer.Decision{
		authorizer.DecisionAllow, authorizer.DecisionAllow,
		authorizer.DecisionDeny,
		authorizer.DecisionAllow, authorizer.DecisionAllow, authorizer.DecisionAllow,
	}, answers)
}

// Every attribute an authorizer may decide on tells two questions apart,
// and a value cannot pass for a separator.
func TestQuestion_DiffersInEveryAttribute(t *testing.T) {
	base := func() authorizer.AttributesRecord {
		q := bindOn("alice", "mac-a")
		q.User = &user.DefaultInfo{Name: "alice", UID: "u1", Groups: []string{"g1", "g2"}, Extra: map[string][]string{"scopes": {"a", "b"}}}
		return q
	}
	req, err := fields.ParseSelector("status.phase=Ready")
	if err != nil {
		t.Fatal(err)
	}
	lreq, err := labels.Parse("pool=warm")
	if err != nil {
		t.Fatal(err)
	}
	changes := map[string]func(q *authorizer.AttributesRecord){
		"user":        func(q *authorizer.AttributesRecord) { q.User.(*user.DefaultInfo).Name = "bob" },
		"uid":         func(q *authorizer.AttributesRecord) { q.User.(*user.DefaultInfo).UID = "u2" },
		"groups":      func(q *authorizer.AttributesRecord) { q.User.(*user.DefaultInfo).Groups = []string{"g1 g2"} },
		"group order": func(q *authorizer.AttributesRecord) { q.User.(*user.DefaultInfo).Groups = []string{"g2", "g1"} },
		"extra value": func(q *authorizer.AttributesRecord) {
			q.User.(*user.DefaultInfo).Extra = map[string][]string{"scopes": {"a b"}}
		},
		"extra key": func(q *authorizer.AttributesRecord) {
			q.User.(*user.DefaultInfo).Extra = map[string][]string{"scope": {"a", "b"}}
		},
		"verb":        func(q *authorizer.AttributesRecord) { q.Verb = "get" },
		"namespace":   func(q *authorizer.AttributesRecord) { q.Namespace = "other" },
		"group":       func(q *authorizer.AttributesRecord) { q.APIGroup = "other.io" },
		"version":     func(q *authorizer.AttributesRecord) { q.APIVersion = "v1" },
		"resource":    func(q *authorizer.AttributesRecord) { q.Resource = "macosmachinepools" },
		"subresource": func(q *authorizer.AttributesRecord) { q.Subresource = "status" },
		"name":        func(q *authorizer.AttributesRecord) { q.Name = `mac-a" name="mac-b` },
		"non-resource": func(q *authorizer.AttributesRecord) {
			q.ResourceRequest = false
		},
		"path":           func(q *authorizer.AttributesRecord) { q.Path = "/apis" },
		"field selector": func(q *authorizer.AttributesRecord) { q.FieldSelectorRequirements = req.Requirements() },
		"label selector": func(q *authorizer.AttributesRecord) {
			q.LabelSelectorRequirements, _ = lreq.Requirements()
		},
	}
	a := base()
	assert.Equal(t, question(a), question(base()), "the same question")
	for name, change := range changes {
		q := base()
		change(&q)
		assert.NotEqual(t, question(a), question(q), name)
	}
}
