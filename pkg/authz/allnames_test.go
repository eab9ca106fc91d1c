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
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// rbacLike allows verb on resource for all names, or for the names listed.
type rbacLike struct {
	allNames bool
	names    map[string]bool
	asked    []string
}

func (r *rbacLike) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r.asked = append(r.asked, a.GetName())
	if r.allNames || (a.GetName() != "" && r.names[a.GetName()]) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no rule", nil
}

func (r *rbacLike) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(r.Authorize(ctx, a))
}

func (r *rbacLike) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func attrs(name string, resource bool) authorizer.Attributes {
	return authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "ctrl"}, Verb: "bind", Resource: "macosmachines",
		Namespace: "ci", Name: name, ResourceRequest: resource, Path: "/healthz"}
}

func TestAllNamesFirst(t *testing.T) {
	for _, tc := range []struct {
		name      string
		inner     *rbacLike
		attrs     authorizer.Attributes
		want      authorizer.Decision
		wantAsked []string
	}{
		{"allowed for all names: one question, without the name", &rbacLike{allNames: true}, attrs("mac-1", true), authorizer.DecisionAllow, []string{""}},
		{"allowed for this name only: asks again with it", &rbacLike{names: map[string]bool{"mac-1": true}}, attrs("mac-1", true), authorizer.DecisionAllow, []string{"", "mac-1"}},
		{"allowed for another name only: denied", &rbacLike{names: map[string]bool{"mac-2": true}}, attrs("mac-1", true), authorizer.DecisionNoOpinion, []string{"", "mac-1"}},
		{"no name: passed through", &rbacLike{}, attrs("", true), authorizer.DecisionNoOpinion, []string{""}},
		{"non-resource request: passed through", &rbacLike{allNames: true}, attrs("x", false), authorizer.DecisionAllow, []string{"x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _, err := AllNamesFirst(tc.inner).Authorize(context.Background(), tc.attrs)
			assert.NoError(t, err)
			assert.Equal(t, tc.want, d)
			assert.Equal(t, tc.wantAsked, tc.inner.asked)

			tc.inner.asked = nil
			cd := AllNamesFirst(tc.inner).ConditionsAwareAuthorize(context.Background(), tc.attrs)
			assert.Equal(t, tc.want == authorizer.DecisionAllow, cd.IsAllow(), "conditions-aware answer agrees")
			assert.Equal(t, tc.wantAsked, tc.inner.asked)
		})
	}
}
