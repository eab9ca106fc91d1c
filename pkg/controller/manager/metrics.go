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

package manager

import (
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	dinformers "github.com/dockerios/dockerios/pkg/generated/informers/externalversions/dockerio/v1alpha1"
	listers "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

var (
	reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dockerios_controller_reconciles_total",
		Help: "Reconciles done, by queue (machines, pools, class-claims, class-machines).",
	}, []string{"queue"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dockerios_controller_reconcile_errors_total",
		Help: "Reconciles that failed and were retried, by queue.",
	}, []string{"queue"})
)

// registerMetrics adds the counters and gauges read from the caches at
// scrape time (never kept in step by hand, so they cannot drift).
func (q *queues) registerMetrics(reg prometheus.Registerer, d dinformers.Interface) {
	if reg == nil {
		return
	}
	c := newCacheCollector(cacheListers{
		machines: d.MacOSMachines().Lister(), pools: d.MacOSIdentityPools().Lister(),
		identities: d.MacOSIdentities().Lister(), claims: d.MacOSMachineClaims().Lister(),
	}, time.Now)
	c.reconciled = q.reconciled
	reg.MustRegister(reconciles, reconcileErrors, c)
}

// reconciledMachines are the machines (by UID) this process has reconciled
// without error at least once: how far a restarted controller's first pass
// over the fleet has come, which no queue metric says (a queue empties
// between passes, and agent polls keep adding to it).
type reconciledMachines struct {
	mu   sync.Mutex
	uids map[types.UID]bool
}

func newReconciledMachines() *reconciledMachines {
	return &reconciledMachines{uids: map[types.UID]bool{}}
}

func (r *reconciledMachines) add(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.uids[uid] = true
}

// count returns, by namespace, how many of ms have been reconciled, and
// forgets the machines no longer among ms.
func (r *reconciledMachines) count(ms []*v1alpha1.MacOSMachine) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out, live := map[string]int{}, make(map[types.UID]bool, len(ms))
	for _, m := range ms {
		live[m.UID] = true
		if r.uids[m.UID] {
			out[m.Namespace]++
		}
	}
	for uid := range r.uids {
		if !live[uid] {
			delete(r.uids, uid)
		}
	}
	return out
}

// cacheListers are the caches the gauges are read from.
type cacheListers struct {
	machines   listers.MacOSMachineLister
	pools      listers.MacOSIdentityPoolLister
	identities listers.MacOSIdentityLister
	claims     listers.MacOSMachineClaimLister
}

// cacheCollector computes its gauges from the caches at each scrape.
type cacheCollector struct {
	l   cacheListers
	now func() time.Time

	phase, pool, pastDeadline, claimsPending, claimsOldest, onHold *prometheus.Desc

	// reconciled, when set, gives dockerios_machines_reconciled.
	reconciled     *reconciledMachines
	reconciledDesc *prometheus.Desc
}

func newCacheCollector(l cacheListers, now func() time.Time) *cacheCollector {
	return &cacheCollector{l: l, now: now,
		phase: prometheus.NewDesc("dockerios_machines", "MacOSMachines by namespace and phase.", []string{"namespace", "phase"}, nil),
		pool: prometheus.NewDesc("dockerios_identity_pool_identities",
			"Identities of a MacOSIdentityPool by state (free, allocated), machines waiting for one (pending), "+
				"identities quarantined because another shares one of their values (quarantined; one held by a machine is also allocated), "+
				"and identities a VM unknown to the ledger runs with (heldOutsideLedger).",
			[]string{"pool", "state"}, nil),
		onHold: prometheus.NewDesc("dockerios_identity_pool_on_hold",
			"1 while a MacOSIdentityPool is on hold after a restore (it gives out no identity until the controller has compared the VMs that run with the ledger), else 0.",
			[]string{"pool"}, nil),
		pastDeadline: prometheus.NewDesc("dockerios_machines_past_start_deadline",
			"MacOSMachines not Ready yet (phase Pending, Provisioning or Starting, never Ready, not being deleted) created longer ago "+
				"than their class's startTimeout, by namespace and phase. startTimeout bounds a machine's VirtualMachine's creation to Ready, "+
				"and the machine is always created first: such a machine is past its class's bound.",
			[]string{"namespace", "phase"}, nil),
		claimsPending: prometheus.NewDesc("dockerios_claims_pending",
			"MacOSMachineClaims no machine answers yet (phase Pending), by namespace and the pool or class they name (the other label is empty).",
			[]string{"namespace", "pool", "class"}, nil),
		claimsOldest: prometheus.NewDesc("dockerios_claims_pending_oldest_seconds",
			"Age of the oldest Pending MacOSMachineClaim, by namespace and the pool or class it names; absent when none is Pending.",
			[]string{"namespace", "pool", "class"}, nil),
		reconciledDesc: prometheus.NewDesc("dockerios_machines_reconciled",
			"MacOSMachines this controller process has reconciled without error at least once since it started, by namespace: "+
				"after a restart, equal to dockerios_machines summed over phases once the first pass over the fleet is done.",
			[]string{"namespace"}, nil),
	}
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.phase
	ch <- c.pool
	ch <- c.pastDeadline
	ch <- c.claimsPending
	ch <- c.claimsOldest
	ch <- c.onHold
	ch <- c.reconciledDesc
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	c.collectMachines(ch, now)
	c.collectPools(ch)
	c.collectClaims(ch, now)
}

func (c *cacheCollector) collectMachines(ch chan<- prometheus.Metric, now time.Time) {
	ms, _ := c.l.machines.List(labels.Everything())
	counts, late := map[[2]string]int{}, map[[2]string]int{}
	for _, m := range ms {
		phase := m.Status.Phase
		if phase == "" {
			phase = v1alpha1.MachinePending
		}
		k := [2]string{m.Namespace, string(phase)}
		counts[k]++
		if pastStartDeadline(m, phase, now) {
			late[k]++
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.phase, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	if c.reconciled != nil {
		done := c.reconciled.count(ms)
		for ns := range namespaces(counts) {
			ch <- prometheus.MustNewConstMetric(c.reconciledDesc, prometheus.GaugeValue, float64(done[ns]), ns)
		}
	}
	// Every phase a machine can be late in is reported, at zero too, in
	// each namespace that has machines: an alert's for-clause then sees
	// the series end at zero rather than vanish.
	for ns := range namespaces(counts) {
		for _, phase := range []v1alpha1.MacOSMachinePhase{v1alpha1.MachinePending, v1alpha1.MachineProvisioning, v1alpha1.MachineStarting} {
			k := [2]string{ns, string(phase)}
			ch <- prometheus.MustNewConstMetric(c.pastDeadline, prometheus.GaugeValue, float64(late[k]), k[0], k[1])
		}
	}
}

// pastStartDeadline says whether m, in phase, is not Ready yet although
// it was created longer ago than its class's startTimeout.
func pastStartDeadline(m *v1alpha1.MacOSMachine, phase v1alpha1.MacOSMachinePhase, now time.Time) bool {
	switch phase {
	case v1alpha1.MachinePending, v1alpha1.MachineProvisioning, v1alpha1.MachineStarting:
	default:
		return false
	}
	if m.DeletionTimestamp != nil || machine.WasReady(m) {
		return false
	}
	timeout := v1alpha1.DefaultStartTimeout
	if s := m.Status.ClassSnapshot; s != nil && s.Spec.StartTimeout != nil {
		timeout = s.Spec.StartTimeout.Duration
	}
	return now.Sub(m.CreationTimestamp.Time) > timeout
}

func namespaces(counts map[[2]string]int) map[string]bool {
	out := map[string]bool{}
	for k := range counts {
		out[k[0]] = true
	}
	return out
}

func (c *cacheCollector) collectPools(ch chan<- prometheus.Metric) {
	quarantined, outside := map[string]int{}, map[string]int{}
	ids, _ := c.l.identities.List(labels.Everything())
	for _, id := range ids {
		if meta.IsStatusConditionTrue(id.Status.Conditions, v1alpha1.IdentityQuarantined) {
			quarantined[id.Spec.PoolName]++
		}
		if meta.IsStatusConditionTrue(id.Status.Conditions, v1alpha1.IdentityHeldOutsideLedger) {
			outside[id.Spec.PoolName]++
		}
	}
	ps, _ := c.l.pools.List(labels.Everything())
	for _, p := range ps {
		ch <- prometheus.MustNewConstMetric(c.pool, prometheus.GaugeValue, float64(p.Status.Free), p.Name, "free")
		ch <- prometheus.MustNewConstMetric(c.pool, prometheus.GaugeValue, float64(p.Status.Allocated), p.Name, "allocated")
		ch <- prometheus.MustNewConstMetric(c.pool, prometheus.GaugeValue, float64(p.Status.Pending), p.Name, "pending")
		ch <- prometheus.MustNewConstMetric(c.pool, prometheus.GaugeValue, float64(quarantined[p.Name]), p.Name, "quarantined")
		ch <- prometheus.MustNewConstMetric(c.pool, prometheus.GaugeValue, float64(outside[p.Name]), p.Name, "heldOutsideLedger")
		held := 0.0
		if meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.IdentityPoolOnHold) {
			held = 1
		}
		ch <- prometheus.MustNewConstMetric(c.onHold, prometheus.GaugeValue, held, p.Name)
	}
}

func (c *cacheCollector) collectClaims(ch chan<- prometheus.Metric, now time.Time) {
	type source struct{ namespace, pool, class string }
	pending, oldest := map[source]int{}, map[source]time.Time{}
	claims, _ := c.l.claims.List(labels.Everything())
	for _, cl := range claims {
		// A claim the apiserver has not given a phase yet waits as much
		// as a Pending one; a claim being deleted waits for nothing.
		if cl.DeletionTimestamp != nil || (cl.Status.Phase != "" && cl.Status.Phase != v1alpha1.ClaimPending) {
			continue
		}
		s := source{cl.Namespace, cl.Spec.PoolName, cl.Spec.ClassName}
		pending[s]++
		if t, ok := oldest[s]; !ok || cl.CreationTimestamp.Time.Before(t) {
			oldest[s] = cl.CreationTimestamp.Time
		}
	}
	for s, n := range pending {
		ch <- prometheus.MustNewConstMetric(c.claimsPending, prometheus.GaugeValue, float64(n), s.namespace, s.pool, s.class)
		ch <- prometheus.MustNewConstMetric(c.claimsOldest, prometheus.GaugeValue, now.Sub(oldest[s]).Seconds(), s.namespace, s.pool, s.class)
	}
}

func eventSource() corev1.EventSource {
	host, _ := os.Hostname()
	return corev1.EventSource{Component: "dockerios-controller", Host: host}
}
