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
	"strconv"

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
// questions share an answer only when they are the same question. Every
// value is quoted, so no value can pass for a separator. It is on every
// request's path, hence appends rather than fmt.
func question(a authorizer.Attributes) string {
	b := make([]byte, 0, 256)
	field := func(name, value string) {
		b = append(b, name...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, value)
		b = append(b, ' ')
	}
	if u := a.GetUser(); u != nil {
		field("user", u.GetName())
		field("uid", u.GetUID())
		b = append(b, "groups=["...)
		for _, g := range u.GetGroups() {
			b = strconv.AppendQuote(b, g)
			b = append(b, ' ')
		}
		b = append(b, "] "...)
		extra := u.GetExtra()
		keys := make([]string, 0, len(extra))
		for k := range extra {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b = append(b, "extra["...)
			b = strconv.AppendQuote(b, k)
			b = append(b, "]=["...)
			for _, v := range extra[k] {
				b = strconv.AppendQuote(b, v)
				b = append(b, ' ')
			}
			b = append(b, "] "...)
		}
	}
	field("verb", a.GetVerb())
	b = append(b, "readonly="...)
	b = strconv.AppendBool(b, a.IsReadOnly())
	b = append(b, " resource="...)
	b = strconv.AppendBool(b, a.IsResourceRequest())
	b = append(b, ' ')
	field("ns", a.GetNamespace())
	field("group", a.GetAPIGroup())
	field("version", a.GetAPIVersion())
	field("res", a.GetResource())
	field("sub", a.GetSubresource())
	field("name", a.GetName())
	field("path", a.GetPath())
	if fields, err := a.GetFieldSelector(); len(fields) > 0 || err != nil {
		field("fields", fmt.Sprintf("%v/%v", fields, err))
	}
	if labels, err := a.GetLabelSelector(); len(labels) > 0 || err != nil {
		field("labels", fmt.Sprintf("%v/%v", labels, err))
	}
	return string(b)
}
