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

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/test/framework"
	"github.com/dockerios/dockerios/test/harness"
)

const (
	// probeFleet is how many Ready machines lose their agents in the fault.
	probeFleet = 200
	// probeRounds machines are made and deleted with and without the
	// fault; their medians are compared, so one slow round on a busy
	// machine does not decide.
	probeRounds = 3
	// probeFloor: durations under it count as it. Provisioning and
	// teardown take a few seconds here, and on a shared 2-core machine a
	// few hundred milliseconds of scheduling noise would otherwise move
	// the ratio by more than the effect it guards against.
	probeFloor = 2 * time.Second
	// probeMaxRatio is how much slower provisioning and teardown may be
	// during the fault.
	probeMaxRatio = 1.5
)

// TestAgentProbingDuringANetworkFault has an environment of its own: the
// controller calls agents with its default timeout (5 s, where the other
// tests use 2 s: 200 calls of 2 s every 30 s would hold only part of 16
// workers), its 200 guests' agents poll every second rather than every
// 200 ms, so they do not crowd out what is measured, and the other tests
// do not share the machine with them.
func TestAgentProbingDuringANetworkFault(t *testing.T) {
	e := startWith(t, []string{"--agent-timeout=5s"}, func(c *harness.Config) { c.AgentPollInterval = time.Second })
	e.testAgentProbingDuringNetworkFault(t)
}

// During a fault of the agent network (200 agents that accept connections
// and never answer, each call waiting out the controller's agent timeout),
// a new machine provisions and a deletion completes as fast as without the
// fault: calls to agents are made off the reconcile workers, on a bounded
// pool of their own, so the workers are never held by them.
func (e *env) testAgentProbingDuringNetworkFault(t *testing.T) {
	ns := e.namespace(t, "probe")
	// 200 machines started at once on a shared 2-core machine may take
	// longer than the fleet's default 2 minutes to start: what is tested
	// is probing once they are Ready, not how fast they start.
	e.fleet(t, "probe", probeFleet+2, func(c *v1alpha1.MacOSMachineClass) {
		c.Spec.StartTimeout = &metav1.Duration{Duration: 15 * time.Minute}
	})
	start := time.Now()
	e.createMachines(t, ns, "probe", "fleet-%03d", probeFleet)
	framework.Eventually(t, 15*time.Minute, func() string {
		if ready := e.countMachines(t, ns, func(m *v1alpha1.MacOSMachine) bool { return m.Status.Phase == v1alpha1.MachineReady }); ready < probeFleet {
			time.Sleep(2 * time.Second)
			return fmt.Sprintf("%d of %d machines Ready", ready, probeFleet)
		}
		return ""
	})
	t.Logf("%d machines Ready %s after the first create", probeFleet, time.Since(start).Round(time.Second))

	var calm, fault []provisionAndDeletion
	for i := range probeRounds {
		calm = append(calm, e.provisionAndDelete(t, ns, fmt.Sprintf("calm-%d", i)))
	}

	// Every fleet agent stops answering at once. The new machines' agents
	// must keep answering (a machine cannot become Ready otherwise), so the
	// agents are stopped one by one rather than with PartitionAgents, which
	// also stops agents started later.
	for _, m := range e.machines(t, ns) {
		require.NoError(t, e.h.HangGuest(ns, m.Status.VirtualMachineName))
	}
	defer e.h.PartitionAgents(false) // continues every stopped agent
	faultAt := time.Now()
	// Ready machines' agents are asked every 30 s; the fleet watch looks
	// every 5 s.
	framework.Eventually(t, 3*time.Minute, func() string {
		lost := e.countMachines(t, ns, func(m *v1alpha1.MacOSMachine) bool {
			c := condition(m, "AgentReachable")
			return c.Status == metav1.ConditionFalse && c.Reason == "Unreachable"
		})
		if lost < probeFleet*9/10 || !strings.Contains(e.metrics(t), "dockerios_agent_network_fault 1") {
			time.Sleep(time.Second)
			return fmt.Sprintf("%d of %d machines with AgentReachable=False/Unreachable; want 90%% and dockerios_agent_network_fault 1", lost, probeFleet)
		}
		return ""
	})
	t.Logf("the controller saw the network fault %s after %d agents stopped answering", time.Since(faultAt).Round(time.Second), probeFleet)
	for i := range probeRounds {
		fault = append(fault, e.provisionAndDelete(t, ns, fmt.Sprintf("fault-%d", i)))
	}
	metrics := e.metrics(t)
	assert.Contains(t, metrics, "dockerios_agent_network_fault 1", "the fault lasted through the measurement")
	assert.Contains(t, metrics, `dockerios_agent_probe_duration_seconds_count{result="Unreachable"}`, "the prober, not the workers, met the silence")

	for _, f := range []struct {
		what string
		get  func(provisionAndDeletion) time.Duration
	}{
		{"create → Ready", func(p provisionAndDeletion) time.Duration { return p.provision }},
		{"delete → gone", func(p provisionAndDeletion) time.Duration { return p.deletion }},
	} {
		without, with := median(calm, f.get), median(fault, f.get)
		ratio := float64(max(with, probeFloor)) / float64(max(without, probeFloor))
		t.Logf("%s: median %s without the fault (%s), %s during it (%s): ratio %.2f (durations under %s count as %s; at most %.1f)",
			f.what, without.Round(time.Millisecond), samples(calm, f.get), with.Round(time.Millisecond), samples(fault, f.get),
			ratio, probeFloor, probeFloor, probeMaxRatio)
		assert.LessOrEqual(t, ratio, probeMaxRatio, "%s is %.2f times slower during a network fault of %d agents", f.what, ratio, probeFleet)
	}
}

type provisionAndDeletion struct{ provision, deletion time.Duration }

// provisionAndDelete makes one machine, waits for it to be Ready, deletes
// it and waits for it to be gone, timing both.
func (e *env) provisionAndDelete(t *testing.T, ns, name string) provisionAndDeletion {
	t.Helper()
	var p provisionAndDeletion
	start := time.Now()
	e.createMachine(t, ns, name, "probe")
	e.waitMachine(t, ns, name, 5*time.Minute, "Ready", phaseIs(v1alpha1.MachineReady))
	p.provision = time.Since(start)
	start = time.Now()
	require.NoError(t, e.client.DockeriosV1alpha1().MacOSMachines(ns).Delete(context.Background(), name, metav1.DeleteOptions{}))
	e.gone(t, ns, name, 5*time.Minute)
	p.deletion = time.Since(start)
	t.Logf("%s: Ready %s after its create, gone %s after its delete", name, p.provision.Round(time.Millisecond), p.deletion.Round(time.Millisecond))
	return p
}

func (e *env) countMachines(t testing.TB, ns string, ok func(*v1alpha1.MacOSMachine) bool) int {
	n := 0
	for _, m := range e.machines(t, ns) {
		if ok(&m) {
			n++
		}
	}
	return n
}

func median(ps []provisionAndDeletion, get func(provisionAndDeletion) time.Duration) time.Duration {
	var ds []time.Duration
	for _, p := range ps {
		ds = append(ds, get(p))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func samples(ps []provisionAndDeletion, get func(provisionAndDeletion) time.Duration) string {
	var s []string
	for _, p := range ps {
		s = append(s, get(p).Round(time.Millisecond).String())
	}
	return strings.Join(s, ", ")
}
