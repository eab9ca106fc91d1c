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
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	dlisters "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

// AgentNetworkFault is the Event reason on machines that lost their agent
// together with many others.
const AgentNetworkFault = "AgentNetworkFault"

// FleetWatch tells a network fault from guest faults: when many machines
// whose VMs run lose their agents at once, the agents are not at fault —
// the network between the controller and the guests is. While that holds,
// no machine is failed for an agent that does not answer (startTimeout is
// suspended), and an Event on each machine and a metric say why. Pools
// never dispose of a machine for an unreachable agent anyway.
//
// The state is derived every interval from the machines' conditions, which
// live in etcd: a restarted controller knows it again within one interval.
type FleetWatch struct {
	Machines dlisters.MacOSMachineLister
	Recorder record.EventRecorder
	Log      *slog.Logger
	// MinMachines and MinFraction: a fault needs at least MinMachines
	// unreachable agents that make up at least MinFraction of the machines
	// whose VMs run.
	MinMachines int
	MinFraction float64
	Interval    time.Duration

	fault atomic.Bool
	// over is when the last fault ended (UnixNano), zero while none has.
	over atomic.Int64
	// told are the machines (by UID) told of the current fault, so each
	// gets one Event however long it lasts; only Evaluate touches it.
	told        map[string]bool
	gauge       prometheus.Gauge
	unreachable prometheus.Gauge
}

// NewFleetWatch returns a watch with the defaults (3 machines, half the
// running fleet, every 5 s) and its metrics registered with reg.
func NewFleetWatch(machines dlisters.MacOSMachineLister, rec record.EventRecorder, log *slog.Logger, reg prometheus.Registerer) *FleetWatch {
	w := &FleetWatch{Machines: machines, Recorder: rec, Log: log, MinMachines: 3, MinFraction: 0.5, Interval: 5 * time.Second,
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dockerios_agent_network_fault",
			Help: "1 while many machines with running VMs lost their agents at once (a network fault): no machine is failed for it."}),
		unreachable: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dockerios_agents_unreachable",
			Help: "Machines whose VM runs and whose agent does not answer."}),
	}
	if reg != nil {
		reg.MustRegister(w.gauge, w.unreachable)
	}
	return w
}

// Fault reports whether a network fault is in effect.
func (w *FleetWatch) Fault() bool { return w != nil && w.fault.Load() }

// Over is when the last network fault ended (zero if none has in this
// process): an agent's silence heard before then was the fault's, and says
// nothing of its guest.
func (w *FleetWatch) Over() time.Time {
	if w == nil || w.over.Load() == 0 {
		return time.Time{}
	}
	return time.Unix(0, w.over.Load())
}

// Run evaluates the fleet every interval until ctx ends.
func (w *FleetWatch) Run(ctx context.Context) {
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		w.Evaluate()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Evaluate looks at the fleet once.
func (w *FleetWatch) Evaluate() {
	ms, err := w.Machines.List(everything)
	if err != nil {
		return
	}
	var running int
	var lost []*v1alpha1.MacOSMachine
	for _, m := range ms {
		// An install session's agent is silent until a person installs
		// it: that says nothing of the network.
		if m.DeletionTimestamp != nil || Installing(m) || !meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineVirtualMachineRunning) {
			continue
		}
		running++
		if c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MachineAgentReachable); c != nil &&
			c.Status == metav1.ConditionFalse && c.Reason == ReasonAgentUnreachable {
			lost = append(lost, m)
		}
	}
	w.unreachable.Set(float64(len(lost)))
	fault := len(lost) >= w.MinMachines && float64(len(lost)) >= w.MinFraction*float64(running)
	if !fault && w.fault.Load() {
		// Set before the flag drops: whoever sees no fault sees when it
		// ended.
		w.over.Store(time.Now().UnixNano())
	}
	was := w.fault.Swap(fault)
	switch {
	case fault && !was:
		w.gauge.Set(1)
		w.told = map[string]bool{}
		w.Log.Warn("agent network fault", "unreachable", len(lost), "running", running)
	case !fault && was:
		w.gauge.Set(0)
		w.told = nil
		w.Log.Info("agent network fault over", "unreachable", len(lost), "running", running)
	}
	if !fault {
		return
	}
	msg := fmt.Sprintf("%d of %d machines with running VMs lost their agents at once: treated as a network fault, not a guest fault; no machine is failed or replaced for it until agents answer again", len(lost), running)
	for _, m := range lost {
		if !w.told[string(m.UID)] {
			w.told[string(m.UID)] = true
			w.Recorder.Event(m, corev1.EventTypeWarning, AgentNetworkFault, msg)
		}
	}
}
