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

package binding

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// metricBindings counts claims bound, by path: atCreate (in the
// transaction that created the claim), whenMachineFree (a waiting claim,
// in the write that freed a machine) or bindSubresource (bound by the
// controller: a class claim, or a repair).
var metricBindings = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace:      "dockerios",
	Subsystem:      "claim",
	Name:           "bindings_total",
	Help:           "Claims bound to machines, by path: atCreate (bound in the transaction that created the claim), whenMachineFree (a waiting claim bound in the write that freed a machine) or bindSubresource (bound through the bind subresource).",
	StabilityLevel: metrics.ALPHA,
}, []string{"path"})

var registerOnce sync.Once

// RegisterMetrics adds the binder's metrics to the apiserver's registry.
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(metricBindings) })
}
