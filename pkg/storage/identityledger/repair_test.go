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

package identityledger_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

const indexRoot = "/registry/dockerios.io/identity-index/"

// raw edits etcd behind the ledger's back, as a crash between two
// non-transactional writes or a person with etcdctl would.
type raw struct {
	t          *testing.T
	client     *clientv3.Client
	identities *txn.Resource
	machines   *txn.Resource
}

func newRaw(t *testing.T, e *env) *raw {
	ids, err := txn.NewResource(e.getter, dockerio.Resource("macosidentities"), false, func() runtime.Object { return &dockerio.MacOSIdentity{} })
	require.NoError(t, err)
	ms, err := txn.NewResource(e.getter, dockerio.Resource("macosmachines"), true, func() runtime.Object { return &dockerio.MacOSMachine{} })
	require.NoError(t, err)
	return &raw{t: t, client: e.getter.Server.V3Client.Client, identities: ids, machines: ms}
}

func (r *raw) del(key string) {
	_, err := r.client.Delete(context.Background(), key)
	require.NoError(r.t, err)
}

func (r *raw) delPrefix(prefix string) {
	resp, err := r.client.Delete(context.Background(), prefix, clientv3.WithPrefix())
	require.NoError(r.t, err)
	require.NotZero(r.t, resp.Deleted, "nothing under %s", prefix)
}

func (r *raw) put(key, val string) {
	_, err := r.client.Put(context.Background(), key, val)
	require.NoError(r.t, err)
}

func (r *raw) putObject(res *txn.Resource, key string, obj runtime.Object) {
	data, err := res.Encode(context.Background(), key, obj)
	require.NoError(r.t, err)
	r.put(key, string(data))
}

func kinds(drifts []identityledger.Drift) []string {
	var out []string
	for _, d := range drifts {
		out = append(out, d.Kind)
	}
	return out
}

func TestRepair_FindsAndFixesEachKindOfDrift(t *testing.T) {
	cases := map[string]struct {
		// breakIt edits etcd, given pool imacpro with two identities:
		// id-0001 held by mac-1 and id-0002 free — or, when waiting is
		// set, held by mac-2, with mac-3 waiting.
		breakIt func(t *testing.T, e *env, r *raw)
		want    string
		waiting bool
	}{
		"a lost uniqueness key": {
			breakIt: func(t *testing.T, e *env, r *raw) {
				r.del(indexRoot + "values/serialNumber/" + e.identity(t, "id-0001").Spec.SerialNumber)
			},
			want: identityledger.DriftMissingValueKey,
		},
		"a uniqueness key of nobody": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.put(indexRoot+"values/serialNumber/C02ZZZZZZZZZ", "ghost") },
			want:    identityledger.DriftOrphanValueKey,
		},
		"a lost member key": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.del(indexRoot + "pools/imacpro/members/id-0002") },
			want:    identityledger.DriftMissingMember,
		},
		"a free-list entry for a held identity": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.put(indexRoot+"pools/imacpro/free/00/id-0001", "") },
			want:    identityledger.DriftOrphanFree,
		},
		"a free identity lost from the pool": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.delPrefix(indexRoot + "pools/imacpro/free/") },
			want:    identityledger.DriftMissingFree,
		},
		"an identity held by a machine deleted behind the ledger's back": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.del(r.machines.Key("default", "mac-1")) },
			want:    identityledger.DriftDanglingHolder,
		},
		"a machine whose identity was marked free": {
			breakIt: func(t *testing.T, e *env, r *raw) {
				id := e.identity(t, "id-0001")
				id.Status.Allocation = nil
				id.ResourceVersion = ""
				r.putObject(r.identities, r.identities.Key("", id.Name), id)
			},
			want: identityledger.DriftMachineRef,
		},
		"a waiting machine lost from the queue": {
			breakIt: func(t *testing.T, e *env, r *raw) { r.delPrefix(indexRoot + "pools/imacpro/pending/") },
			want:    identityledger.DriftMissingWaiting,
			waiting: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.addIdentity(t, e.nextIdentity())
			e.createMachine(t, "mac-1")
			e.addIdentity(t, e.nextIdentity())
			if tc.waiting {
				e.createMachine(t, "mac-2")
				e.createMachine(t, "mac-3")
			}
			e.assertConsistent(t)

			identityledger.RegisterMetrics()
			before := repairsCounted(t, tc.want)
			tc.breakIt(t, e, newRaw(t, e))

			drifts, err := e.ledger.Audit(context.Background())
			require.NoError(t, err)
			require.Contains(t, kinds(drifts), tc.want, "audit must find it; found %v", drifts)

			repaired, err := e.ledger.Repair(context.Background())
			require.NoError(t, err)
			assert.Contains(t, kinds(repaired), tc.want)
			assert.Greater(t, repairsCounted(t, tc.want), before, "each fix is counted")
			e.assertConsistent(t)
		})
	}
}

func TestRepair_ReportsButDoesNotGuessAtDuplicateValues(t *testing.T) {
	e := newEnv(t)
	first := e.addIdentity(t, e.nextIdentity())
	second := e.addIdentity(t, e.nextIdentity())
	r := newRaw(t, e)
	// Someone wrote the second identity with the first's serial, bypassing
	// the apiserver.
	dup := second.DeepCopy()
	dup.Spec.SerialNumber = first.Spec.SerialNumber
	dup.ResourceVersion = ""
	r.putObject(r.identities, r.identities.Key("", dup.Name), dup)
	drainEvents(e.events)

	drifts, err := e.ledger.Repair(context.Background())
	require.NoError(t, err)
	require.Contains(t, kinds(drifts), identityledger.DriftDuplicateValue)
	var events []string
	for _, ev := range drainEvents(e.events) {
		if strings.Contains(ev, identityledger.DriftDuplicateValue) {
			events = append(events, ev)
		}
	}
	require.Len(t, events, 1, "a person is told")
	assert.Contains(t, events[0], first.Name)

	// Still there: choosing which identity keeps the value is not the ledger's call.
	drifts, err = e.ledger.Audit(context.Background())
	require.NoError(t, err)
	assert.Contains(t, kinds(drifts), identityledger.DriftDuplicateValue)
}

// repairsCounted reads dockerios_identity_ledger_repairs_total{drift=kind}
// from the apiserver's metrics registry.
func repairsCounted(t *testing.T, kind string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "dockerios_identity_ledger_repairs_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "drift" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
