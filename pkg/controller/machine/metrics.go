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

package machine

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// Metrics are the reconciler's Prometheus metrics.
type Metrics struct {
	// CreateToReady is the time from a machine's creation to its first
	// Ready, observed when the controller writes that phase.
	CreateToReady prometheus.Histogram
	// Failures counts machines marked Failed, by reason.
	Failures *prometheus.CounterVec
	// ReconcilesToReady is how many reconciles a machine took from its
	// first to its first Ready, counted by this process (a machine that
	// was created before a restart is counted from the restart).
	ReconcilesToReady prometheus.Histogram

	mu     sync.Mutex
	counts map[types.UID]int
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		CreateToReady: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "dockerios_machine_create_to_ready_seconds",
			Help:    "Time from a MacOSMachine's creation to its first Ready.",
			Buckets: prometheus.ExponentialBuckets(5, 2, 12),
		}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dockerios_machine_failures_total",
			Help: "MacOSMachines marked Failed, by reason.",
		}, []string{"reason"}),
	}
	m.ReconcilesToReady = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "dockerios_machine_reconciles_to_ready",
		Help:    "Reconciles of a MacOSMachine from its first to its first Ready, by this controller process.",
		Buckets: []float64{5, 10, 15, 20, 30, 50, 100},
	})
	m.counts = map[types.UID]int{}
	reg.MustRegister(m.CreateToReady, m.Failures, m.ReconcilesToReady)
	return m
}

// reconciled counts one reconcile of a machine not yet Ready.
func (x *Metrics) reconciled(m *v1alpha1.MacOSMachine) {
	if x == nil || WasReady(m) {
		return
	}
	x.mu.Lock()
	x.counts[m.UID]++
	x.mu.Unlock()
}

// done ends the count of a machine: observed when it became Ready.
func (x *Metrics) done(uid types.UID, ready bool) {
	if x == nil {
		return
	}
	x.mu.Lock()
	n, ok := x.counts[uid]
	delete(x.counts, uid)
	x.mu.Unlock()
	if ok && ready {
		x.ReconcilesToReady.Observe(float64(n))
	}
}

// phaseChanged observes m (its status before the write) moving to st.
func (x *Metrics) phaseChanged(m *v1alpha1.MacOSMachine, st *v1alpha1.MacOSMachineStatus, now time.Time) {
	switch {
	case st.Phase == v1alpha1.MachineReady && !WasReady(m):
		x.CreateToReady.Observe(now.Sub(m.CreationTimestamp.Time).Seconds())
		x.done(m.UID, true)
	case st.Phase == v1alpha1.MachineFailed:
		x.done(m.UID, false)
		reason := "Unknown"
		for _, c := range st.Conditions {
			if c.Type == v1alpha1.MachineConditionReady {
				reason = c.Reason
			}
		}
		x.Failures.WithLabelValues(reason).Inc()
	}
}
