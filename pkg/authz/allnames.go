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

// Package authz holds the apiserver's authorizer wrappers.
package authz

import (
	"context"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// AllNamesFirst asks the inner authorizer about a named object first as if
// for every object of its kind (name ""), and about the named object only
// when that is not allowed.
//
// Why: the delegated authorizer asks kube-apiserver (a SubjectAccessReview)
// and caches the answer by the request's attributes, name included. A
// controller binding 50 claims to 50 machines would cost 100 round trips
// (create macosmachineclaims/bind, bind on macosmachines) though one answer
// each — "yes, for all names" — covers them all. Allowed for all names
// implies allowed for each (that is what an empty name means in a
// SubjectAccessReview), so the answer is the same; users allowed only some
// names (RBAC resourceNames) get one extra, cached, question.
func AllNamesFirst(inner authorizer.Authorizer) authorizer.Authorizer {
	return allNamesFirst{inner}
}

type allNamesFirst struct{ inner authorizer.Authorizer }

var _ authorizer.Authorizer = allNamesFirst{}

func (a allNamesFirst) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if !attrs.IsResourceRequest() || attrs.GetName() == "" {
		return a.inner.Authorize(ctx, attrs)
	}
	if d, reason, err := a.inner.Authorize(ctx, withoutName{attrs}); err == nil && d == authorizer.DecisionAllow {
		return d, reason, nil
	}
	return a.inner.Authorize(ctx, attrs)
}

// ConditionsAwareAuthorize answers "allowed for all names" unconditionally
// and leaves everything else, conditions included, to the inner authorizer.
func (a allNamesFirst) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	if attrs.IsResourceRequest() && attrs.GetName() != "" {
		if d, reason, err := a.inner.Authorize(ctx, withoutName{attrs}); err == nil && d == authorizer.DecisionAllow {
			return authorizer.ConditionsAwareDecisionAllow(reason, nil)
		}
	}
	return a.inner.ConditionsAwareAuthorize(ctx, attrs)
}

// EvaluateConditions is the inner authorizer's: only it makes conditions.
func (a allNamesFirst) EvaluateConditions(ctx context.Context, d authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return a.inner.EvaluateConditions(ctx, d, data)
}

// withoutName is attrs for every object of the kind.
type withoutName struct{ authorizer.Attributes }

func (withoutName) GetName() string { return "" }
