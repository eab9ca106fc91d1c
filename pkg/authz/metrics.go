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
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// metricDecisions counts the authorization decisions Fresh gave, by where
// the answer came from: memory (kept, no older than its TTL) or asked (the
// request waited for the delegated authorizer). metricRefreshes counts the
// questions it asked ahead, by result.
var (
	metricDecisions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "dockerios",
		Subsystem:      "authorization",
		Name:           "decisions_total",
		Help:           "Authorization decisions, by source: memory (an answer kept no longer than the webhook cache TTLs) or asked (the request waited for the delegated authorizer, a SubjectAccessReview to kube-apiserver).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"source"})
	metricRefreshes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "dockerios",
		Subsystem:      "authorization",
		Name:           "refreshes_total",
		Help:           "Recently asked authorization questions asked again ahead of their answer's expiry, by result: answered or error.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
)

var registerOnce sync.Once

// RegisterMetrics adds Fresh's metrics to the apiserver's registry.
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(metricDecisions, metricRefreshes) })
}
