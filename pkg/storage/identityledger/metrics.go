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

package identityledger

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the ledger, served on the apiserver's /metrics.
var (
	metricAllocations = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "dockerios",
		Subsystem:      "identity",
		Name:           "allocations_total",
		Help:           "Identities given to machines: atCreate (free at the machine's create), handedOver (given back and taken by a waiting machine), and machines that started waiting (waiting).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	metricReleases = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "dockerios",
		Subsystem:      "identity",
		Name:           "releases_total",
		Help:           "Machines that gave back their identity (or stopped waiting), by cause: delete or failed.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cause"})
	metricRepairs = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "dockerios",
		Subsystem:      "identity",
		Name:           "ledger_repairs_total",
		Help:           "Drift between identities, machines and their index keys found and fixed by the repair loop, by kind of drift.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"drift"})
)

var registerOnce sync.Once

// driftKinds are the kinds of drift the repair loop may fix.
var driftKinds = []string{
	DriftMissingValueKey, DriftOrphanValueKey, DriftDuplicateValue, DriftQuarantineResolved,
	DriftMissingMember, DriftOrphanMember, DriftMissingFree, DriftOrphanFree, DriftDanglingHolder,
	DriftMachineRef, DriftMissingWaiting, DriftOrphanWaiting, DriftWaitingWhileFree, DriftUnresolvableClass,
}

// RegisterMetrics adds the ledger's metrics to the apiserver's registry.
// The repairs counter starts at zero for every kind of drift: a series
// that is born at 1 hides its first repair from increase() and rate(),
// and so from the alert on repairs (artifacts/monitoring).
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(metricAllocations, metricReleases, metricRepairs)
		for _, kind := range driftKinds {
			metricRepairs.WithLabelValues(kind).Add(0)
		}
	})
}
