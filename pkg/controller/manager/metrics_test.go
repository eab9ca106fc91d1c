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
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	listers "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

var metricsNow = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// collectorOver is the cache collector over caches holding objs, at
// metricsNow.
func collectorOver(t *testing.T, objs ...any) *cacheCollector {
	t.Helper()
	indexer := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	m, p, i, c := indexer(), indexer(), indexer(), indexer()
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *v1alpha1.MacOSMachine:
			err = m.Add(o)
		case *v1alpha1.MacOSIdentityPool:
			err = p.Add(o)
		case *v1alpha1.MacOSIdentity:
			err = i.Add(o)
		case *v1alpha1.MacOSMachineClaim:
			err = c.Add(o)
		default:
			t.Fatalf("no cache for %T", o)
		}
		require.NoError(t, err)
	}
	return newCacheCollector(cacheListers{
		machines: listers.NewMacOSMachineLister(m), pools: listers.NewMacOSIdentityPoolLister(p),
		identities: listers.NewMacOSIdentityLister(i), claims: listers.NewMacOSMachineClaimLister(c),
	}, func() time.Time { return metricsNow })
}

func mac(ns, name string, age time.Duration, phase v1alpha1.MacOSMachinePhase, startTimeout time.Duration) *v1alpha1.MacOSMachine {
	m := &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(metricsNow.Add(-age))}}
	m.Status.Phase = phase
	if startTimeout != 0 {
		m.Status.ClassSnapshot = &v1alpha1.ClassSnapshot{Spec: v1alpha1.MacOSMachineClassSpec{
			StartTimeout: &metav1.Duration{Duration: startTimeout}}}
	}
	return m
}

// A machine is past its start deadline when it is not Ready and was made
// longer ago than its class's startTimeout (the default without one);
// one that was Ready, is Ready, failed or is being deleted never is.
func TestCacheCollector_MachinesPastStartDeadline(t *testing.T) {
	wasReady := mac("ci", "was-ready", time.Hour, v1alpha1.MachineStarting, 10*time.Minute)
	wasReady.Status.Conditions = []metav1.Condition{{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse, Reason: machine.ReasonNoLongerReady}}
	deleting := mac("ci", "deleting", time.Hour, v1alpha1.MachineProvisioning, 10*time.Minute)
	deleting.DeletionTimestamp = &metav1.Time{Time: metricsNow}
	c := collectorOver(t,
		mac("ci", "starting-late", 11*time.Minute, v1alpha1.MachineStarting, 10*time.Minute),
		mac("ci", "starting-in-time", 9*time.Minute, v1alpha1.MachineStarting, 10*time.Minute),
		mac("ci", "provisioning-late", 31*time.Minute, v1alpha1.MachineProvisioning, 30*time.Minute),
		mac("ci", "no-phase-yet-late", 21*time.Minute, "", 0), // the default startTimeout, 20m
		mac("ci", "pending-in-time", 19*time.Minute, v1alpha1.MachinePending, 0),
		mac("ci", "ready", 2*time.Hour, v1alpha1.MachineReady, 10*time.Minute),
		mac("ci", "failed", 2*time.Hour, v1alpha1.MachineFailed, 10*time.Minute),
		wasReady, deleting,
		mac("lab", "starting-late", 2*time.Hour, v1alpha1.MachineStarting, time.Hour),
	)

	err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP dockerios_machines_past_start_deadline `+helpOf(t, c, "dockerios_machines_past_start_deadline")+`
# TYPE dockerios_machines_past_start_deadline gauge
dockerios_machines_past_start_deadline{namespace="ci",phase="Pending"} 1
dockerios_machines_past_start_deadline{namespace="ci",phase="Provisioning"} 1
dockerios_machines_past_start_deadline{namespace="ci",phase="Starting"} 1
dockerios_machines_past_start_deadline{namespace="lab",phase="Pending"} 0
dockerios_machines_past_start_deadline{namespace="lab",phase="Provisioning"} 0
dockerios_machines_past_start_deadline{namespace="lab",phase="Starting"} 1
`), "dockerios_machines_past_start_deadline")
	require.NoError(t, err)
}

// Quarantined identities are counted per pool from the identities'
// Quarantined condition, beside the pool's own counts; a pool with none
// says 0.
func TestCacheCollector_PoolIdentitiesCountQuarantined(t *testing.T) {
	pool := func(name string, free, allocated, pending int32) *v1alpha1.MacOSIdentityPool {
		return &v1alpha1.MacOSIdentityPool{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: v1alpha1.MacOSIdentityPoolStatus{Free: free, Allocated: allocated, Pending: pending}}
	}
	identity := func(name, pool string, quarantined metav1.ConditionStatus) *v1alpha1.MacOSIdentity {
		id := &v1alpha1.MacOSIdentity{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MacOSIdentitySpec{PoolName: pool}}
		if quarantined != "" {
			id.Status.Conditions = []metav1.Condition{{Type: v1alpha1.IdentityQuarantined, Status: quarantined, Reason: "DuplicateValue"}}
		}
		return id
	}
	outside := func(name, pool string, status metav1.ConditionStatus) *v1alpha1.MacOSIdentity {
		id := identity(name, pool, "")
		id.Status.Conditions = []metav1.Condition{{Type: v1alpha1.IdentityHeldOutsideLedger, Status: status, Reason: v1alpha1.ReasonInUseByUnrecordedVM}}
		return id
	}
	held := pool("lab", 0, 4, 2)
	held.Status.Conditions = []metav1.Condition{{Type: "OnHold", Status: metav1.ConditionTrue, Reason: "Restored"}}
	c := collectorOver(t, pool("ci", 3, 2, 0), held,
		identity("ci-1", "ci", metav1.ConditionTrue), identity("ci-2", "ci", metav1.ConditionTrue),
		identity("ci-3", "ci", metav1.ConditionFalse), // the quarantine was lifted
		identity("ci-4", "ci", ""),
		identity("lab-1", "lab", ""),
		outside("lab-2", "lab", metav1.ConditionTrue), outside("lab-3", "lab", metav1.ConditionFalse))

	err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP dockerios_identity_pool_identities `+helpOf(t, c, "dockerios_identity_pool_identities")+`
# TYPE dockerios_identity_pool_identities gauge
dockerios_identity_pool_identities{pool="ci",state="allocated"} 2
dockerios_identity_pool_identities{pool="ci",state="free"} 3
dockerios_identity_pool_identities{pool="ci",state="pending"} 0
dockerios_identity_pool_identities{pool="ci",state="quarantined"} 2
dockerios_identity_pool_identities{pool="lab",state="allocated"} 4
dockerios_identity_pool_identities{pool="lab",state="free"} 0
dockerios_identity_pool_identities{pool="lab",state="pending"} 2
dockerios_identity_pool_identities{pool="lab",state="quarantined"} 0
dockerios_identity_pool_identities{pool="ci",state="heldOutsideLedger"} 0
dockerios_identity_pool_identities{pool="lab",state="heldOutsideLedger"} 1
# HELP dockerios_identity_pool_on_hold `+helpOf(t, c, "dockerios_identity_pool_on_hold")+`
# TYPE dockerios_identity_pool_on_hold gauge
dockerios_identity_pool_on_hold{pool="ci"} 0
dockerios_identity_pool_on_hold{pool="lab"} 1
`), "dockerios_identity_pool_identities", "dockerios_identity_pool_on_hold")
	require.NoError(t, err)
}

// Pending claims are counted by namespace and the pool or class they
// name, with the age of the oldest; Bound and Lost claims and claims
// being deleted are not pending.
func TestCacheCollector_PendingClaimsAndTheOldestAge(t *testing.T) {
	claim := func(ns, name string, age time.Duration, pool, class string, phase v1alpha1.MacOSMachineClaimPhase) *v1alpha1.MacOSMachineClaim {
		return &v1alpha1.MacOSMachineClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(metricsNow.Add(-age))},
			Spec:       v1alpha1.MacOSMachineClaimSpec{PoolName: pool, ClassName: class},
			Status:     v1alpha1.MacOSMachineClaimStatus{Phase: phase}}
	}
	deleting := claim("ci", "deleting", time.Hour, "warm", "", v1alpha1.ClaimPending)
	deleting.DeletionTimestamp = &metav1.Time{Time: metricsNow}
	c := collectorOver(t,
		claim("ci", "a", 90*time.Second, "warm", "", v1alpha1.ClaimPending),
		claim("ci", "b", 30*time.Second, "warm", "", ""), // no phase yet
		claim("ci", "bound", 2*time.Hour, "warm", "", v1alpha1.ClaimBound),
		claim("ci", "lost", 2*time.Hour, "warm", "", v1alpha1.ClaimLost),
		deleting,
		claim("ci", "own", 10*time.Minute, "", "big", v1alpha1.ClaimPending),
		claim("lab", "c", 5*time.Second, "warm", "", v1alpha1.ClaimPending),
	)

	err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP dockerios_claims_pending `+helpOf(t, c, "dockerios_claims_pending")+`
# TYPE dockerios_claims_pending gauge
dockerios_claims_pending{class="",namespace="ci",pool="warm"} 2
dockerios_claims_pending{class="big",namespace="ci",pool=""} 1
dockerios_claims_pending{class="",namespace="lab",pool="warm"} 1
# HELP dockerios_claims_pending_oldest_seconds `+helpOf(t, c, "dockerios_claims_pending_oldest_seconds")+`
# TYPE dockerios_claims_pending_oldest_seconds gauge
dockerios_claims_pending_oldest_seconds{class="",namespace="ci",pool="warm"} 90
dockerios_claims_pending_oldest_seconds{class="big",namespace="ci",pool=""} 600
dockerios_claims_pending_oldest_seconds{class="",namespace="lab",pool="warm"} 5
`), "dockerios_claims_pending", "dockerios_claims_pending_oldest_seconds")
	require.NoError(t, err)
}

// With no claims, no claim series is exported.
func TestCacheCollector_NoPendingClaimsNoSeries(t *testing.T) {
	c := collectorOver(t)

	n, err := testutil.GatherAndCount(registryWith(t, c), "dockerios_claims_pending", "dockerios_claims_pending_oldest_seconds")

	require.NoError(t, err)
	require.Zero(t, n)
}

// helpOf is the HELP text c gives name.
func helpOf(t *testing.T, c *cacheCollector, name string) string {
	t.Helper()
	mfs, err := registryWith(t, c).Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetHelp()
		}
	}
	t.Fatalf("%s is not collected", name)
	return ""
}

func registryWith(t *testing.T, c *cacheCollector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	return reg
}

// A restarted controller's first pass is done when every machine counts
// as reconciled; a machine that went away stops counting (and is
// forgotten), and a namespace none of whose machines is reconciled yet
// says 0.
func TestCacheCollector_MachinesReconciledSinceStart(t *testing.T) {
	a, b, c := mac("ci", "a", time.Hour, v1alpha1.MachineReady, 0), mac("ci", "b", time.Hour, v1alpha1.MachineReady, 0), mac("lab", "c", time.Hour, v1alpha1.MachineReady, 0)
	a.UID, b.UID, c.UID = "uid-a", "uid-b", "uid-c"
	col := collectorOver(t, a, b, c)
	col.reconciled = newReconciledMachines()
	col.reconciled.add("uid-a")
	col.reconciled.add("uid-gone")

	err := testutil.CollectAndCompare(col, strings.NewReader(`
# HELP dockerios_machines_reconciled `+helpOf(t, col, "dockerios_machines_reconciled")+`
# TYPE dockerios_machines_reconciled gauge
dockerios_machines_reconciled{namespace="ci"} 1
dockerios_machines_reconciled{namespace="lab"} 0
`), "dockerios_machines_reconciled")
	require.NoError(t, err)
	require.NotContains(t, col.reconciled.uids, types.UID("uid-gone"))
}
