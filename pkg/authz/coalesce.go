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

// Package authz holds the apiserver's authorizer wrappers. None may change
// an answer: each only changes how often the same question is asked.
package authz

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/singleflight"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Coalesce asks inner once for questions asked at the same time, and gives
// every asker that one answer.
//
// Why: the delegating authorizer asks kube-apiserver (a SubjectAccessReview)
// and caches each answer, but only once it has arrived. When 50 claims
// against one pool arrive together, all 50 miss the cache and ask the same
// question — claim on macosmachinepools/warm for the same user — 50 times.
// The questions are identical in every attribute a SubjectAccessReview
// carries, so the one answer is each one's answer; nothing is answered that
// was not asked.
func Coalesce(inner authorizer.Authorizer) authorizer.Authorizer {
	return &coalesce{inner: inner}
}

type coalesce struct {
	inner       authorizer.Authorizer
	plain, cond singleflight.Group
}

var _ authorizer.Authorizer = &coalesce{}

type answer struct {
	decision authorizer.Decision
	reason   string
	err      error
}

func (c *coalesce) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	v, _, _ := c.plain.Do(question(attrs), func() (any, error) {
		// The answer is shared: it must not end with the first asker's
		// request. The authorizer bounds its own round trip.
		d, reason, err := c.inner.Authorize(context.WithoutCancel(ctx), attrs)
		return answer{d, reason, err}, nil
	})
	a := v.(answer)
	return a.decision, a.reason, a.err
}

func (c *coalesce) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	v, _, _ := c.cond.Do(question(attrs), func() (any, error) {
		return c.inner.ConditionsAwareAuthorize(context.WithoutCancel(ctx), attrs), nil
	})
	return v.(authorizer.ConditionsAwareDecision)
}

// EvaluateConditions is the inner authorizer's: conditions are evaluated
// against each request's own data, never shared.
func (c *coalesce) EvaluateConditions(ctx context.Context, d authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return c.inner.EvaluateConditions(ctx, d, data)
}

// question spells out every attribute an authorizer may decide on, so two
// questions share an answer only when they are the same question.
func question(a authorizer.Attributes) string {
	var b strings.Builder
	if u := a.GetUser(); u != nil {
		fmt.Fprintf(&b, "user=%q uid=%q groups=%q ", u.GetName(), u.GetUID(), u.GetGroups())
		extra := u.GetExtra()
		keys := make([]string, 0, len(extra))
		for k := range extra {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "extra[%q]=%q ", k, extra[k])
		}
	}
	fmt.Fprintf(&b, "verb=%q readonly=%t resource=%t ns=%q group=%q version=%q res=%q sub=%q name=%q path=%q",
		a.GetVerb(), a.IsReadOnly(), a.IsResourceRequest(), a.GetNamespace(), a.GetAPIGroup(), a.GetAPIVersion(),
		a.GetResource(), a.GetSubresource(), a.GetName(), a.GetPath())
	fields, fieldsErr := a.GetFieldSelector()
	labels, labelsErr := a.GetLabelSelector()
	fmt.Fprintf(&b, " fields=%q/%v labels=%q/%v", fmt.Sprint(fields), fieldsErr, fmt.Sprint(labels), labelsErr)
	return b.String()
}
