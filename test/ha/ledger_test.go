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

package ha

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/test/framework"
)

func dockerioResource(resource string) schema.GroupResource { return dockerio.Resource(resource) }

func newObject(resource string) func() runtime.Object {
	return map[string]func() runtime.Object{
		"macosidentities":    func() runtime.Object { return &dockerio.MacOSIdentity{} },
		"macosmachines":      func() runtime.Object { return &dockerio.MacOSMachine{} },
		"macosmachineclaims": func() runtime.Object { return &dockerio.MacOSMachineClaim{} },
		"macosidentitypools": func() runtime.Object { return &dockerio.MacOSIdentityPool{} },
	}[resource]
}

// snapshot is the ledger as etcd holds it at one revision: identities,
// pools, and the machines and claims of the test's namespace (by name).
type snapshot struct {
	rev        int64
	identities map[string]*dockerio.MacOSIdentity
	pools      map[string]*dockerio.MacOSIdentityPool
	machines   map[string]*dockerio.MacOSMachine
	claims     map[string]*dockerio.MacOSMachineClaim
	// waitingIn: the machines of the test's namespace with an entry in
	// their pool's queue of machines waiting for an identity.
	waitingIn map[string]bool
}

// waitingInSuffix ends the ledger's key that says which pool a waiting
// machine waits in (see pkg/storage/identityledger/layout.go).
const waitingInSuffix = "/waiting-in"

func (c *cluster) snapshot(ctx context.Context) (*snapshot, error) {
	resp, err := c.etcd.Get(ctx, "/registry/dockerios.io/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	s := &snapshot{rev: resp.Header.Revision, identities: map[string]*dockerio.MacOSIdentity{}, pools: map[string]*dockerio.MacOSIdentityPool{},
		machines: map[string]*dockerio.MacOSMachine{}, claims: map[string]*dockerio.MacOSMachineClaim{}, waitingIn: map[string]bool{}}
	waitingPrefix := "/registry/dockerios.io/identity-index/machines/" + testNS + "/"
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		switch {
		case strings.HasPrefix(key, waitingPrefix) && strings.HasSuffix(key, waitingInSuffix):
			s.waitingIn[strings.TrimSuffix(strings.TrimPrefix(key, waitingPrefix), waitingInSuffix)] = true
		case strings.HasPrefix(key, c.res.identities.KeyPrefix()):
			obj, err := c.res.identities.Decode(ctx, key, kv.Value, kv.ModRevision)
			if err != nil {
				return nil, err
			}
			s.identities[obj.(*dockerio.MacOSIdentity).Name] = obj.(*dockerio.MacOSIdentity)
		case strings.HasPrefix(key, c.res.pools.KeyPrefix()):
			obj, err := c.res.pools.Decode(ctx, key, kv.Value, kv.ModRevision)
			if err != nil {
				return nil, err
			}
			s.pools[obj.(*dockerio.MacOSIdentityPool).Name] = obj.(*dockerio.MacOSIdentityPool)
		case strings.HasPrefix(key, c.res.machines.KeyPrefix()+testNS+"/"):
			obj, err := c.res.machines.Decode(ctx, key, kv.Value, kv.ModRevision)
			if err != nil {
				return nil, err
			}
			s.machines[obj.(*dockerio.MacOSMachine).Name] = obj.(*dockerio.MacOSMachine)
		case strings.HasPrefix(key, c.res.claims.KeyPrefix()+testNS+"/"):
			obj, err := c.res.claims.Decode(ctx, key, kv.Value, kv.ModRevision)
			if err != nil {
				return nil, err
			}
			s.claims[obj.(*dockerio.MacOSMachineClaim).Name] = obj.(*dockerio.MacOSMachineClaim)
		}
	}
	return s, nil
}

// violations lists the ledger's invariants the snapshot breaks:
// each identity is held by at most one machine, which holds it back; no
// value is in two identities; a claim is bound to at most one machine,
// which is bound to it back.
func (s *snapshot) violations() []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	out = append(out, framework.LedgerViolations(testNS, s.machines, s.identities)...)

	boundTo := map[string][]string{}
	for _, m := range s.machines {
		if ref := m.Status.ClaimRef; ref != nil {
			boundTo[ref.UID] = append(boundTo[ref.UID], m.Name)
		}
	}
	for uid, ms := range boundTo {
		if len(ms) > 1 {
			add("claim uid %s is bound to %d machines: %v", uid, len(ms), ms)
		}
	}
	for _, cl := range s.claims {
		if cl.Status.Phase != dockerio.ClaimBound {
			continue
		}
		m := s.machines[cl.Status.MachineName]
		switch {
		case m == nil:
			add("claim %s is Bound to %s, which is gone", cl.Name, cl.Status.MachineName)
		case m.Status.ClaimRef == nil || m.Status.ClaimRef.UID != string(cl.UID):
			add("claim %s is Bound to %s, whose claimRef is %v", cl.Name, m.Name, m.Status.ClaimRef)
		}
	}
	sort.Strings(out)
	return out
}

// poolCountsMismatch compares every identity pool's status with a
// recount from the objects; "" if all agree.
func (s *snapshot) poolCountsMismatch() string {
	type counts struct{ total, free, allocated, pending int32 }
	want := map[string]*counts{}
	for p := range s.pools {
		want[p] = &counts{}
	}
	for _, id := range s.identities {
		c := want[id.Spec.PoolName]
		if c == nil {
			return fmt.Sprintf("identity %s is of pool %s, which does not exist", id.Name, id.Spec.PoolName)
		}
		c.total++
		if id.Status.Allocation == nil {
			c.free++
		} else {
			c.allocated++
		}
	}
	for _, m := range s.machines {
		// Every machine of the test draws from the one pool. A machine
		// being deleted no longer needs an identity: the ledger drops its
		// queue entry when the queue next meets it, and counts it pending
		// only until then.
		if m.Status.IdentityRef == nil && m.Status.Phase != dockerio.MachineFailed && (m.DeletionTimestamp == nil || s.waitingIn[m.Name]) {
			want[identityPool].pending++
		}
	}
	var bad []string
	for p, w := range want {
		st := s.pools[p].Status
		got := counts{st.Total, st.Free, st.Allocated, st.Pending}
		if got != *w {
			bad = append(bad, fmt.Sprintf("pool %s's status says total/free/allocated/pending %d/%d/%d/%d, the objects %d/%d/%d/%d",
				p, got.total, got.free, got.allocated, got.pending, w.total, w.free, w.allocated, w.pending))
		}
	}
	sort.Strings(bad)
	return strings.Join(bad, "; ")
}

// checkLedger checks, at one revision, the invariants and, within a
// while, that the pools' status equals a recount; then the audit of
// objects against index keys. It returns the snapshot read last.
func (c *cluster) checkLedger(ctx context.Context, when string) *snapshot {
	c.t.Helper()
	s, err := c.snapshot(ctx)
	if err != nil {
		c.t.Errorf("%s: reading etcd: %v", when, err)
		return nil
	}
	if v := s.violations(); len(v) > 0 {
		c.t.Errorf("%s, at revision %d, %d invariants broken:\n  %s", when, s.rev, len(v), strings.Join(v[:min(len(v), 10)], "\n  "))
	}
	// The pools' status is written a moment after each change.
	deadline := time.Now().Add(15 * time.Second)
	for {
		mismatch := s.poolCountsMismatch()
		if mismatch == "" {
			break
		}
		if time.Now().After(deadline) {
			c.t.Errorf("%s: %s", when, mismatch)
			break
		}
		time.Sleep(200 * time.Millisecond)
		if s, err = c.snapshot(ctx); err != nil {
			c.t.Errorf("%s: reading etcd: %v", when, err)
			return nil
		}
	}
	c.audit(ctx, when)
	return s
}

// audit fails the test if the ledger's audit finds any index key that
// disagrees with the objects.
func (c *cluster) audit(ctx context.Context, when string) {
	c.t.Helper()
	drifts, err := c.ledger.Audit(ctx)
	if err != nil {
		c.t.Errorf("%s: audit: %v", when, err)
		return
	}
	if len(drifts) > 0 {
		var out []string
		for _, d := range drifts[:min(len(drifts), 5)] {
			out = append(out, d.String())
		}
		c.t.Errorf("%s: the audit found %d drifts:\n  %s", when, len(drifts), strings.Join(out, "\n  "))
	}
}
