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
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// Kinds of drift the audit finds. Each is a label of the repairs metric.
const (
	DriftMissingValueKey    = "MissingValueKey"    // an identity's value has no index key
	DriftOrphanValueKey     = "OrphanValueKey"     // an index key names no identity with that value
	DriftDuplicateValue     = "DuplicateValue"     // two identities share a value: both are quarantined until a person deletes one
	DriftQuarantineResolved = "QuarantineResolved" // a quarantined identity shares no value any more
	DriftMissingMember      = "MissingMember"      // an identity is not in its pool's member list
	DriftOrphanMember       = "OrphanMember"       // a member key names no identity of that pool
	DriftMissingFree        = "MissingFree"        // a free identity is neither on the free list nor given to a waiting machine
	DriftOrphanFree         = "OrphanFree"         // a free-list entry names an identity that is held or gone
	DriftDanglingHolder     = "DanglingHolder"     // an identity is held by a machine that is gone
	DriftMachineRef         = "MachineRef"         // a machine names an identity that does not name it back
	DriftMissingWaiting     = "MissingWaiting"     // a machine without identity is not in the waiting queue
	DriftOrphanWaiting      = "OrphanWaiting"      // a waiting-queue entry is for no waiting machine
	DriftWaitingWhileFree   = "WaitingWhileFree"   // a machine waits for an identity while one of its pool is free
	DriftUnresolvableClass  = "UnresolvableClass"  // a waiting machine's class or pool is gone (cannot be fixed here)
)

// Drift is one disagreement between objects and index keys.
type Drift struct {
	Kind    string
	Subject string
	Message string
	// fix makes the repair, in one transaction conditioned on what the
	// audit saw; nil when a person must decide.
	fix func(ctx context.Context) (bool, error)
	// event names the object to tell about it.
	event *eventTarget
}

type eventTarget struct {
	obj  metav1.Object
	kind string
	// eventType and reason of the Event a fix is reported with; empty for
	// the Warning LedgerRepaired that most fixes are.
	eventType, reason string
}

func identityEvent(id *dockerio.MacOSIdentity) *eventTarget {
	return &eventTarget{obj: id, kind: "MacOSIdentity"}
}

func machineEvent(m *dockerio.MacOSMachine) *eventTarget {
	return &eventTarget{obj: m, kind: "MacOSMachine"}
}

func (d Drift) String() string { return d.Kind + " " + d.Subject + ": " + d.Message }

// snapshot is every ledger object and key, read at one etcd revision.
type snapshot struct {
	rev        int64
	identities map[string]*dockerio.MacOSIdentity
	idRevs     map[string]int64
	machines   map[string]*dockerio.MacOSMachine // by namespace/name
	mRevs      map[string]int64
	classes    map[string]*dockerio.MacOSMachineClass
	pools      map[string]*dockerio.MacOSIdentityPool
	index      map[string]txn.KeyValue
	holds      map[string]*Hold // pools on hold, by name
}

// pool returns the pool named name, or a reference to it when it is gone,
// for an Event about an index key of that pool.
func (s *snapshot) pool(name string) *eventTarget {
	p, ok := s.pools[name]
	if !ok {
		p = &dockerio.MacOSIdentityPool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	return &eventTarget{obj: p, kind: "MacOSIdentityPool"}
}

func (l *Ledger) read(ctx context.Context) (*snapshot, error) {
	s := &snapshot{
		identities: map[string]*dockerio.MacOSIdentity{}, idRevs: map[string]int64{},
		machines: map[string]*dockerio.MacOSMachine{}, mRevs: map[string]int64{},
		classes: map[string]*dockerio.MacOSMachineClass{}, pools: map[string]*dockerio.MacOSIdentityPool{},
		index: map[string]txn.KeyValue{},
	}
	// The first read fixes the revision; the others read at it, so the
	// audit compares one consistent state however long it takes.
	resp, err := l.client.Get(ctx, l.identities.KeyPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	s.rev = resp.Header.Revision
	for _, kv := range resp.Kvs {
		obj, err := l.identities.Decode(ctx, string(kv.Key), kv.Value, kv.ModRevision)
		if err != nil {
			klog.ErrorS(err, "Identity ledger audit skips an undecodable identity", "key", string(kv.Key))
			continue
		}
		id := obj.(*dockerio.MacOSIdentity)
		s.identities[id.Name], s.idRevs[id.Name] = id, kv.ModRevision
	}
	at := clientv3.WithRev(s.rev)
	if resp, err = l.client.Get(ctx, l.machines.KeyPrefix(), clientv3.WithPrefix(), at); err != nil {
		return nil, err
	}
	for _, kv := range resp.Kvs {
		obj, err := l.machines.Decode(ctx, string(kv.Key), kv.Value, kv.ModRevision)
		if err != nil {
			klog.ErrorS(err, "Identity ledger audit skips an undecodable machine", "key", string(kv.Key))
			continue
		}
		m := obj.(*dockerio.MacOSMachine)
		s.machines[m.Namespace+"/"+m.Name], s.mRevs[m.Namespace+"/"+m.Name] = m, kv.ModRevision
	}
	if resp, err = l.client.Get(ctx, l.classes.KeyPrefix(), clientv3.WithPrefix(), at); err != nil {
		return nil, err
	}
	for _, kv := range resp.Kvs {
		if obj, err := l.classes.Decode(ctx, string(kv.Key), kv.Value, kv.ModRevision); err == nil {
			c := obj.(*dockerio.MacOSMachineClass)
			s.classes[c.Name] = c
		}
	}
	if resp, err = l.client.Get(ctx, l.pools.KeyPrefix(), clientv3.WithPrefix(), at); err != nil {
		return nil, err
	}
	for _, kv := range resp.Kvs {
		if obj, err := l.pools.Decode(ctx, string(kv.Key), kv.Value, kv.ModRevision); err == nil {
			p := obj.(*dockerio.MacOSIdentityPool)
			s.pools[p.Name] = p
		}
	}
	if resp, err = l.client.Get(ctx, l.keys.root, clientv3.WithPrefix(), at); err != nil {
		return nil, err
	}
	for _, kv := range resp.Kvs {
		s.index[string(kv.Key)] = txn.KeyValue{Value: kv.Value, ModRevision: kv.ModRevision, CreateRevision: kv.CreateRevision}
	}
	if s.holds, err = l.holds(ctx, at); err != nil {
		return nil, err
	}
	return s, nil
}

// Audit compares every identity and machine with the index keys and
// returns each disagreement. It changes nothing.
func (l *Ledger) Audit(ctx context.Context) ([]Drift, error) {
	s, err := l.read(ctx)
	if err != nil {
		return nil, err
	}
	var drifts []Drift
	expected := map[string]bool{}

	// Identities some machine says it holds: when the identity itself says
	// it is free, the machine's side of the audit decides.
	claimed := map[string]bool{}
	for _, m := range s.machines {
		if ref := m.Status.IdentityRef; ref != nil {
			claimed[ref.Name] = true
		}
	}

	names := make([]string, 0, len(s.identities))
	for name := range s.identities {
		names = append(names, name)
	}
	sort.Strings(names)
	// Duplicates are found from the values themselves, not from the keys:
	// a key names one identity, however many share its value.
	holders := l.valueHolders(names, s.identities)
	// Free identities on their pool's free list, which the repair may give
	// to machines waiting in that pool.
	free := map[string][]freeEntry{}
	for _, name := range names {
		id := s.identities[name]
		pool := id.Spec.PoolName
		idKey, idRev := l.identities.Key("", name), s.idRevs[name]
		values := uniqueValues(&id.Spec)
		// A value's key is expected to name its first holder; only that
		// one reports it, so that a shared value's key is written once.
		for _, field := range uniqueFields {
			k := l.keys.value(field, values[field])
			expected[k] = true
			kv, ok := s.index[k]
			first := holders[k][0] == name
			switch {
			case !ok && first:
				d := l.putKeyDrift(DriftMissingValueKey, "MacOSIdentity "+name,
					fmt.Sprintf("its %s has no uniqueness key; it gets it again", field), k, name, idKey, idRev)
				d.event = identityEvent(id)
				drifts = append(drifts, d)
			case ok && first && !slices.Contains(holders[k], string(kv.Value)):
				drifts = append(drifts, l.staleKeyDrift(id, idRev, field, k, kv))
			}
		}
		member := l.keys.member(pool, name)
		expected[member] = true
		if _, ok := s.index[member]; !ok {
			d := l.putKeyDrift(DriftMissingMember, "MacOSIdentity "+name,
				"is not counted in its pool; it is again", member, "", idKey, idRev)
			d.event = identityEvent(id)
			drifts = append(drifts, d)
		}
		freeKey := l.keys.free(pool, name)
		freeKV, onFreeList := s.index[freeKey]
		a := id.Status.Allocation
		dangling := false
		if a != nil {
			holder, ok := s.machines[a.MachineNamespace+"/"+a.MachineName]
			dangling = !ok || string(holder.UID) != a.MachineUID
		}
		if msg := l.duplicateMessage(id, holders); msg != "" {
			// Its free-list entry is the quarantine's to remove.
			expected[freeKey] = true
			drifts = append(drifts, l.quarantineDrift(id, idRev, msg, onFreeList, dangling))
			continue
		}
		// An identity marked for deletion is on no free list: an entry
		// left for it is an orphan, removed below.
		// Nor is one a VM unknown to the ledger runs with, nor one of a
		// pool on hold after a restore.
		offList := id.DeletionTimestamp != nil || heldOutsideLedger(id) || s.holds[pool] != nil
		if a == nil && !offList {
			expected[freeKey] = true
		}
		if isQuarantined(id) {
			drifts = append(drifts, l.liftQuarantineDrift(id, idRev, onFreeList, claimed[name], dangling))
			continue
		}
		switch {
		case a == nil && offList:
		case a == nil && !onFreeList && !claimed[name]:
			drifts = append(drifts, l.missingFreeDrift(id, idRev))
		case a == nil && onFreeList && !claimed[name]:
			free[pool] = append(free[pool], freeEntry{id: id, idRev: idRev, key: freeKey, rev: freeKV.ModRevision})
		case dangling:
			drifts = append(drifts, l.danglingHolderDrift(id, idRev))
		}
	}

	heldBy := map[string]*dockerio.MacOSIdentity{} // machine uid → identity naming it
	for _, id := range s.identities {
		if a := id.Status.Allocation; a != nil {
			heldBy[a.MachineUID] = id
		}
	}

	mNames := make([]string, 0, len(s.machines))
	for k := range s.machines {
		mNames = append(mNames, k)
	}
	sort.Strings(mNames)
	waiting := map[string][]waiter{} // by pool
	for _, key := range mNames {
		m := s.machines[key]
		if ref := m.Status.IdentityRef; ref != nil {
			id, ok := s.identities[ref.Name]
			if !ok || id.Status.Allocation == nil || id.Status.Allocation.MachineUID != string(m.UID) {
				drifts = append(drifts, l.machineRefDrift(m, s.mRevs[key], id, s.idRevs[ref.Name]))
			}
			continue
		}
		if id, ok := heldBy[string(m.UID)]; ok {
			drifts = append(drifts, l.forgottenIdentityDrift(m, s.mRevs[key], id, s.idRevs[id.Name]))
			continue
		}
		if m.Status.Phase == dockerio.MachineFailed {
			continue
		}
		class, ok := s.classes[m.Spec.ClassName]
		waitingKey := l.keys.waiting(m.Namespace, m.Name)
		if kv, has := s.index[waitingKey]; has {
			// The machine says where it waits; that is where it is counted.
			expected[waitingKey] = true
			pool := string(kv.Value)
			pending := l.keys.pending(pool, m.Namespace, m.Name)
			expected[pending] = true
			if pkv, ok := s.index[pending]; ok {
				// A machine being deleted no longer needs an identity.
				if m.DeletionTimestamp == nil && string(pkv.Value) == string(m.UID) {
					waiting[pool] = append(waiting[pool], waiter{machine: m, machineRev: s.mRevs[key],
						pendingKey: pending, pending: pkv, waitingKey: waitingKey, waitingRev: kv.ModRevision})
				}
				continue
			}
		}
		if m.DeletionTimestamp != nil {
			// Being deleted, it needs no identity: not queued again once
			// its entry was dropped.
			continue
		}
		if !ok {
			drifts = append(drifts, Drift{Kind: DriftUnresolvableClass, Subject: "MacOSMachine " + key,
				Message: fmt.Sprintf("waits for an identity but its class %s is gone", m.Spec.ClassName),
				event:   machineEvent(m)})
			continue
		}
		pool := class.Spec.IdentityPoolName
		expected[waitingKey], expected[l.keys.pending(pool, m.Namespace, m.Name)] = true, true
		// Queued now, it is served by the next pass if its pool has a free identity.
		drifts = append(drifts, l.missingWaitingDrift(m, s.mRevs[key], pool))
	}

	// Machines wait while identities of their pool are free: the oldest
	// waiting machine takes the first free identity, and so on.
	pools := make([]string, 0, len(waiting))
	for pool := range waiting {
		pools = append(pools, pool)
	}
	sort.Strings(pools)
	for _, pool := range pools {
		ws := waiting[pool]
		sort.Slice(ws, func(i, j int) bool {
			if a, b := ws[i].pending.CreateRevision, ws[j].pending.CreateRevision; a != b {
				return a < b
			}
			return ws[i].pendingKey < ws[j].pendingKey
		})
		for i := 0; i < len(ws) && i < len(free[pool]); i++ {
			drifts = append(drifts, l.waitingWhileFreeDrift(ws[i], free[pool][i]))
		}
	}

	var keys []string
	for k := range s.index {
		if !expected[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		drifts = append(drifts, l.orphanKeyDrift(s, k))
	}
	return drifts, nil
}

// staleKeyDrift is a value's uniqueness key naming an identity that does
// not hold the value (only possible after a manual etcd edit): it names
// the identity that does.
func (l *Ledger) staleKeyDrift(id *dockerio.MacOSIdentity, idRev int64, field, key string, kv txn.KeyValue) Drift {
	return Drift{Kind: DriftMissingValueKey, Subject: "MacOSIdentity " + id.Name,
		Message: fmt.Sprintf("its %s uniqueness key named MacOSIdentity %s, which does not hold that value; it names this identity again", field, kv.Value),
		event:   identityEvent(id),
		fix: func(ctx context.Context) (bool, error) {
			var tx txn.Txn
			tx.IfUnchanged(key, kv.ModRevision).IfUnchanged(l.identities.Key("", id.Name), idRev).Put(key, id.Name)
			res, err := txn.Commit(ctx, l.client, &tx)
			return err == nil && res.Succeeded, err
		}}
}

// orphanKeyDrift is an index key no object stands behind: it is removed.
// It is reported on the object it names, or on its pool when that is gone.
func (l *Ledger) orphanKeyDrift(s *snapshot, k string) Drift {
	kv := s.index[k]
	d := Drift{Subject: strings.TrimPrefix(k, l.keys.root),
		fix: func(ctx context.Context) (bool, error) {
			var tx txn.Txn
			tx.IfUnchanged(k, kv.ModRevision).Delete(k)
			res, err := txn.Commit(ctx, l.client, &tx)
			return err == nil && res.Succeeded, err
		}}
	machine := func(ns, name, otherwisePool string) *eventTarget {
		if m, ok := s.machines[ns+"/"+name]; ok {
			return machineEvent(m)
		}
		return s.pool(otherwisePool)
	}
	switch pool, what, rest, isPoolKey := l.keys.parsePoolKey(k); {
	case strings.HasPrefix(k, l.keys.waitingPrefix()):
		ns, name := splitNamespaced(strings.TrimSuffix(strings.TrimPrefix(k, l.keys.waitingPrefix()), "/waiting-in"))
		d.Kind, d.event = DriftOrphanWaiting, machine(ns, name, string(kv.Value))
		d.Message = fmt.Sprintf("MacOSMachine %s/%s was recorded as waiting in pool %s, but it does not wait; the record is removed", ns, name, kv.Value)
	case isPoolKey && what == "pending":
		ns, name := splitNamespaced(rest)
		d.Kind, d.event = DriftOrphanWaiting, machine(ns, name, pool)
		d.Message = fmt.Sprintf("pool %s queued MacOSMachine %s/%s for an identity, but it does not wait there; the entry is removed", pool, ns, name)
	case isPoolKey && (what == "members" || what == "free"):
		name := rest
		d.Kind, d.Message = DriftOrphanMember, fmt.Sprintf("pool %s counted MacOSIdentity %s as a member, which is not one of its identities; the entry is removed", pool, name)
		if what == "free" {
			_, name, _ = strings.Cut(rest, "/") // past the bucket
			d.Kind, d.Message = DriftOrphanFree, fmt.Sprintf("pool %s listed MacOSIdentity %s as free, which is not a free identity of the pool; the entry is removed", pool, name)
		}
		d.event = s.pool(pool)
		if id, ok := s.identities[name]; ok {
			d.event = identityEvent(id)
		}
	case isPoolKey:
		d.Kind, d.event = DriftOrphanMember, s.pool(pool)
		d.Message = fmt.Sprintf("pool %s had an index key of no known kind (%s); it is removed", pool, what)
	case !strings.HasPrefix(k, l.keys.valuesPrefix()):
		// Not of the layout at all, so about no object: the fix is logged.
		d.Kind, d.Message = DriftOrphanValueKey, "an index key of no known kind is removed"
	default:
		// values/<field>/<value> → identity. The value stays out of the
		// message: it is sensitive, and the message becomes an Event.
		field, _, _ := strings.Cut(strings.TrimPrefix(k, l.keys.valuesPrefix()), "/")
		name := string(kv.Value)
		d.Kind = DriftOrphanValueKey
		d.Message = fmt.Sprintf("a %s uniqueness key named MacOSIdentity %s, which does not hold that value; the key is removed", field, name)
		id, ok := s.identities[name]
		if !ok {
			// Gone: the Event still names it, which is what the key was about.
			id = &dockerio.MacOSIdentity{ObjectMeta: metav1.ObjectMeta{Name: name}}
		}
		d.event = identityEvent(id)
	}
	return d
}

// putKeyDrift is a missing key to add, if the object is unchanged.
func (l *Ledger) putKeyDrift(kind, subject, message, key, val, objKey string, objRev int64) Drift {
	return Drift{Kind: kind, Subject: subject, Message: message,
		fix: func(ctx context.Context) (bool, error) {
			var tx txn.Txn
			tx.IfAbsent(key).IfUnchanged(objKey, objRev).Put(key, val)
			res, err := txn.Commit(ctx, l.client, &tx)
			return err == nil && res.Succeeded, err
		}}
}

// missingFreeDrift is a free identity lost to the pool: it goes to the
// longest-waiting machine, or onto the free list.
func (l *Ledger) missingFreeDrift(id *dockerio.MacOSIdentity, idRev int64) Drift {
	return Drift{Kind: DriftMissingFree, Subject: "MacOSIdentity " + id.Name,
		Message: "was free but neither on the free list nor given to a waiting machine; it goes back to the pool",
		event:   identityEvent(id),
		fix: func(ctx context.Context) (bool, error) {
			return l.returnToPool(ctx, id, idRev, func(tx *txn.Txn) {})
		}}
}

// danglingHolderDrift is an identity held by a machine that is gone.
func (l *Ledger) danglingHolderDrift(id *dockerio.MacOSIdentity, idRev int64) Drift {
	a := id.Status.Allocation
	return Drift{Kind: DriftDanglingHolder, Subject: "MacOSIdentity " + id.Name,
		Message: fmt.Sprintf("is held by MacOSMachine %s/%s (uid %s), which is gone; it goes back to the pool", a.MachineNamespace, a.MachineName, a.MachineUID),
		event:   identityEvent(id),
		fix: func(ctx context.Context) (bool, error) {
			released := id.DeepCopy()
			released.Status.Allocation = nil
			return l.returnToPool(ctx, released, idRev, func(tx *txn.Txn) {})
		}}
}

// returnToPool writes a free identity (unchanged since idRev) to the oldest
// waiting machine of its pool, or onto the free list.
func (l *Ledger) returnToPool(ctx context.Context, id *dockerio.MacOSIdentity, idRev int64, extra func(*txn.Txn)) (bool, error) {
	if isQuarantined(id) {
		// The audit never asks for it; should a caller, a duplicate is
		// still never handed out.
		return false, nil
	}
	pool := id.Spec.PoolName
	idKey := l.identities.Key("", id.Name)
	hold, _, err := l.hold(ctx, pool)
	if err != nil {
		return false, err
	}
	var next *waitingMachine
	if !withheld(id) && hold == nil {
		var err error
		if next, err = l.oldestWaiting(ctx, pool); err != nil {
			return false, err
		}
	}
	var tx txn.Txn
	tx.IfUnchanged(idKey, idRev)
	extra(&tx)
	stored := id
	switch {
	case withheld(id) || hold != nil:
		// Going away, in use by a VM the ledger does not know, or its
		// pool on hold: written released, but given to nobody.
	case next == nil:
		tx.IfNothingUnder(l.keys.pendingPrefix(pool)).Put(l.keys.free(pool, id.Name), "")
	default:
		n := next.machine
		nKey := l.machines.Key(n.Namespace, n.Name)
		tx.IfUnchanged(nKey, next.machineRev).IfUnchanged(next.pendingKey, next.pendingRev)
		if err := tx.WriteObject(ctx, l.machines, nKey, l.allocatedTo(n, id)); err != nil {
			return false, err
		}
		tx.Delete(next.pendingKey).Delete(l.keys.waiting(n.Namespace, n.Name))
		stored = l.holding(id, n)
	}
	if err := tx.WriteObject(ctx, l.identities, idKey, stored); err != nil {
		return false, err
	}
	res, err := txn.Commit(ctx, l.client, &tx)
	if err != nil || !res.Succeeded {
		return false, err
	}
	if next != nil {
		(&handoff{identity: id, to: next.machine}).announce(l)
	}
	return true, nil
}

// machineRefDrift is a machine naming an identity that does not name it.
// A free identity is given back to the machine (which is probably running
// with its values); one held by another machine, or gone, is taken from it.
func (l *Ledger) machineRefDrift(m *dockerio.MacOSMachine, mRev int64, id *dockerio.MacOSIdentity, idRev int64) Drift {
	key := m.Namespace + "/" + m.Name
	ref := m.Status.IdentityRef.Name
	d := Drift{Kind: DriftMachineRef, Subject: "MacOSMachine " + key, event: machineEvent(m)}
	mKey := l.machines.Key(m.Namespace, m.Name)
	if id != nil && id.Status.Allocation == nil {
		d.Message = fmt.Sprintf("holds MacOSIdentity %s, which had been marked free; it is the machine's again", ref)
		d.fix = func(ctx context.Context) (bool, error) {
			idKey := l.identities.Key("", ref)
			var tx txn.Txn
			tx.IfUnchanged(mKey, mRev).IfUnchanged(idKey, idRev).Delete(l.keys.free(id.Spec.PoolName, id.Name))
			if err := tx.WriteObject(ctx, l.identities, idKey, l.holding(id, m)); err != nil {
				return false, err
			}
			res, err := txn.Commit(ctx, l.client, &tx)
			return err == nil && res.Succeeded, err
		}
		return d
	}
	reason := "IdentityMissing"
	d.Message = fmt.Sprintf("names MacOSIdentity %s, which does not exist; the machine no longer holds an identity", ref)
	if id != nil {
		reason = "IdentityConflict"
		a := id.Status.Allocation
		d.Message = fmt.Sprintf("names MacOSIdentity %s, which is held by MacOSMachine %s/%s; the machine no longer holds an identity", ref, a.MachineNamespace, a.MachineName)
	}
	d.fix = func(ctx context.Context) (bool, error) {
		lost := m.DeepCopy()
		lost.Status.IdentityRef = nil
		l.setIdentityCondition(lost, metav1.ConditionFalse, reason, d.Message)
		var tx txn.Txn
		tx.IfUnchanged(mKey, mRev)
		if err := tx.WriteObject(ctx, l.machines, mKey, lost); err != nil {
			return false, err
		}
		res, err := txn.Commit(ctx, l.client, &tx)
		return err == nil && res.Succeeded, err
	}
	return d
}

// forgottenIdentityDrift is a machine that lost the reference to the
// identity that still names it: the reference is written back.
func (l *Ledger) forgottenIdentityDrift(m *dockerio.MacOSMachine, mRev int64, id *dockerio.MacOSIdentity, idRev int64) Drift {
	return Drift{Kind: DriftMachineRef, Subject: "MacOSMachine " + m.Namespace + "/" + m.Name,
		Message: fmt.Sprintf("is held by MacOSIdentity %s but did not name it; it does again", id.Name),
		event:   machineEvent(m),
		fix: func(ctx context.Context) (bool, error) {
			mKey := l.machines.Key(m.Namespace, m.Name)
			var tx txn.Txn
			tx.IfUnchanged(mKey, mRev).IfUnchanged(l.identities.Key("", id.Name), idRev)
			if err := tx.WriteObject(ctx, l.machines, mKey, l.allocatedTo(m, id)); err != nil {
				return false, err
			}
			res, err := txn.Commit(ctx, l.client, &tx)
			return err == nil && res.Succeeded, err
		}}
}

// missingWaitingDrift is a machine without identity that nobody would give one.
func (l *Ledger) missingWaitingDrift(m *dockerio.MacOSMachine, mRev int64, pool string) Drift {
	return Drift{Kind: DriftMissingWaiting, Subject: "MacOSMachine " + m.Namespace + "/" + m.Name,
		Message: fmt.Sprintf("has no identity and was not waiting for one of pool %s; it waits now", pool),
		event:   machineEvent(m),
		fix: func(ctx context.Context) (bool, error) {
			var tx txn.Txn
			tx.IfUnchanged(l.machines.Key(m.Namespace, m.Name), mRev).
				Put(l.keys.pending(pool, m.Namespace, m.Name), string(m.UID)).
				Put(l.keys.waiting(m.Namespace, m.Name), pool)
			res, err := txn.Commit(ctx, l.client, &tx)
			return err == nil && res.Succeeded, err
		}}
}

// waiter is a machine the audit saw waiting for an identity of a pool.
type waiter struct {
	machine    *dockerio.MacOSMachine
	machineRev int64
	pendingKey string
	pending    txn.KeyValue // its create revision is the machine's place in the queue
	waitingKey string
	waitingRev int64
}

// freeEntry is a free identity the audit saw on its pool's free list.
type freeEntry struct {
	id    *dockerio.MacOSIdentity
	idRev int64
	key   string
	rev   int64
}

// waitingWhileFreeDrift is a machine waiting for an identity while one of
// its pool is free, which no write would ever give it. It takes that
// identity as a release hands one over: machine, identity, free-list entry
// and queue entries in one transaction, on the revisions the audit read.
func (l *Ledger) waitingWhileFreeDrift(w waiter, f freeEntry) Drift {
	m, id := w.machine, f.id
	return Drift{Kind: DriftWaitingWhileFree, Subject: "MacOSMachine " + m.Namespace + "/" + m.Name,
		Message: fmt.Sprintf("waited for an identity of pool %s while MacOSIdentity %s was free; it takes that identity", id.Spec.PoolName, id.Name),
		event:   &eventTarget{obj: m, kind: "MacOSMachine", eventType: corev1.EventTypeNormal, reason: ReasonAllocated},
		fix: func(ctx context.Context) (bool, error) {
			mKey, idKey := l.machines.Key(m.Namespace, m.Name), l.identities.Key("", id.Name)
			var tx txn.Txn
			tx.IfUnchanged(mKey, w.machineRev).IfUnchanged(w.pendingKey, w.pending.ModRevision).IfUnchanged(w.waitingKey, w.waitingRev).
				IfUnchanged(idKey, f.idRev).IfUnchanged(f.key, f.rev)
			if err := tx.WriteObject(ctx, l.machines, mKey, l.allocatedTo(m, id)); err != nil {
				return false, err
			}
			if err := tx.WriteObject(ctx, l.identities, idKey, l.holding(id, m)); err != nil {
				return false, err
			}
			tx.Delete(f.key).Delete(w.pendingKey).Delete(w.waitingKey)
			res, err := txn.Commit(ctx, l.client, &tx)
			return err == nil && res.Succeeded, err
		}}
}

// Repair audits the ledger and fixes every drift it can, each in a
// transaction that only applies if nothing changed since the audit saw it.
// Each fix is reported as an Event on the object it concerns (the pool
// when that object is gone) and counted in
// dockerios_identity_ledger_repairs_total. It returns what was found; a
// drift that needs a person is reported again on every pass, and only made
// safe meanwhile: identities sharing a value are quarantined, never deleted.
func (l *Ledger) Repair(ctx context.Context) ([]Drift, error) {
	drifts, err := l.Audit(ctx)
	if err != nil {
		return nil, err
	}
	for _, d := range drifts {
		if d.fix == nil {
			klog.InfoS("Identity ledger drift needs a person", "drift", d.Kind, "subject", d.Subject, "message", d.Message)
			if d.event != nil {
				l.event(d.event.obj, d.event.kind, corev1.EventTypeWarning, d.Kind, "%s", d.Message)
			}
			continue
		}
		fixed, err := d.fix(ctx)
		if err != nil {
			return drifts, fmt.Errorf("repairing %s: %w", d, err)
		}
		if !fixed {
			continue // the state moved on since the audit; the next pass looks again
		}
		metricRepairs.WithLabelValues(d.Kind).Inc()
		klog.InfoS("Identity ledger repaired", "drift", d.Kind, "subject", d.Subject, "message", d.Message)
		switch e := d.event; {
		case e == nil:
		case e.reason != "":
			l.event(e.obj, e.kind, e.eventType, e.reason, "%s", d.Message)
		default:
			l.event(e.obj, e.kind, corev1.EventTypeWarning, "LedgerRepaired", "%s: %s", d.Kind, d.Message)
		}
	}
	return drifts, nil
}

// RunRepair repairs the ledger now and then every interval until ctx ends,
// like Kubernetes' ClusterIP repair controller.
func (l *Ledger) RunRepair(ctx context.Context, interval time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if _, err := l.Repair(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Identity ledger repair failed; retrying at the next interval")
		}
	}, interval)
}
