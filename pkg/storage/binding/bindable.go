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
	"context"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/storage"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// The bindable index is the machines' half of the hand-off, the mirror of
// the claim queue: one key per machine a pool claim could be bound to now
// (Ready, unbound, not Released, not being deleted),
//
//	<storage prefix>dockerios.io/bindable-machines/<ns>/<pool>/<machine> → ""
//
// written in the same transaction as every machine write that makes the
// machine bindable, changes the labels of a bindable machine (a selector
// may match it now) or ends its being bindable. With the index, "no claim
// of a pool waits while a machine it could take is free" is a condition
// etcd checks at every write, from both sides:
//
//   - a claim joins its pool's queue only if no key of the pool's index
//     changed since it read the index and found no machine it could take;
//   - a machine becomes bindable (its key appears) only if no queue key of
//     its pool changed since it read the queue and found no claim it could
//     serve — otherwise the oldest such claim is bound to it in that write.
//
// Whichever of two racing writes commits second has read too early, fails
// its condition and decides again on what the first wrote. No view, no
// controller and no lag: the invariant holds at every revision.

func (b *Binder) bindablePrefix(namespace, pool string) string {
	return b.bindableRoot + namespace + "/" + pool + "/"
}

func (b *Binder) bindableKey(m *dockerio.MacOSMachine) string {
	return b.bindablePrefix(m.Namespace, m.Spec.PoolName) + m.Name
}

// TouchesClaims says whether a write of a machine from old to updated (nil:
// deleted) changes what a claim of its pool could take, and so must be
// made through SettleMachine.
func (b *Binder) TouchesClaims(old, updated *dockerio.MacOSMachine) bool {
	return touchesClaims(old, updated)
}

func touchesClaims(old, updated *dockerio.MacOSMachine) bool {
	if updated != nil && updated.DeletionTimestamp != nil {
		// The generic store marks a machine deleted on the very object it
		// read, so old shows the mark too: a machine that would be free
		// but for the mark may be in the index, and leaves it. (Later
		// updates of it, removing finalizers, cost a no-op delete.)
		free := *updated
		free.DeletionTimestamp = nil
		return isBindable(&free)
	}
	was := old != nil && isBindable(old)
	is := updated != nil && isBindable(updated)
	if was != is {
		return true
	}
	return is && !labels.Equals(old.Labels, updated.Labels)
}

// settled is a hand-off SettleMachine added to a transaction, to report
// once it is committed.
type settled struct {
	b     *Binder
	claim *dockerio.MacOSMachineClaim // bound to the machine in the write
	to    *dockerio.MacOSMachine
}

// committed reports the hand-off: an Event on the claim, and the bindings
// metric.
func (s *settled) committed() {
	metricBindings.WithLabelValues("whenMachineFree").Inc()
	s.b.event(s.claim, "MacOSMachineClaim", corev1.EventTypeNormal, ReasonBound,
		"bound to MacOSMachine %s, which became free while the claim waited", s.to.Name)
}

// SettleMachine adds to tx, which writes a machine of a pool from old (nil:
// created) to updated (nil: deleted) and holds the machine unchanged since
// old was read, what that write owes the claims of the pool, and returns
// the machine to write:
//
//   - a machine that stops being bindable leaves the index;
//   - a machine that becomes bindable, or whose labels change while it is,
//     is bound to the oldest waiting claim of its pool it can serve, in this
//     write (the returned machine holds the claim's reference); with none,
//     it enters the index, on condition that no claim joined the queue
//     since it was read.
func (b *Binder) SettleMachine(ctx context.Context, tx *txn.Txn, old, updated *dockerio.MacOSMachine) (*dockerio.MacOSMachine, func(), error) {
	if !touchesClaims(old, updated) {
		return updated, nothingToReport, nil
	}
	if updated == nil || !isBindable(updated) {
		gone := old
		if gone == nil {
			gone = updated
		}
		tx.Delete(b.bindableKey(gone))
		return updated, nothingToReport, nil
	}
	queue := b.queuePrefix(updated.Namespace, updated.Spec.PoolName)
	resp, err := b.client.Get(ctx, queue, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, nil, err
	}
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), queue)
		cKey := b.claims.Key(updated.Namespace, name)
		obj, cRev, err := b.claims.Get(ctx, b.client, cKey)
		if storage.IsNotFound(err) {
			continue // a stale entry: the queue audit drops it
		}
		if err != nil {
			return nil, nil, err
		}
		c := obj.(*dockerio.MacOSMachineClaim)
		if string(c.UID) != string(kv.Value) || !waiting(c) || refusal(c, updated) != "" {
			continue
		}
		tx.IfUnchanged(cKey, cRev).IfUnchanged(string(kv.Key), kv.ModRevision).Delete(string(kv.Key))
		if err := tx.WriteObject(ctx, b.claims, cKey, b.boundTo(c, updated)); err != nil {
			return nil, nil, err
		}
		if old != nil && isBindable(old) {
			tx.Delete(b.bindableKey(old))
		}
		return heldBy(updated, c), (&settled{b: b, claim: c, to: updated}).committed, nil
	}
	tx.IfNothingUnderChangedSince(queue, resp.Header.Revision).Put(b.bindableKey(updated), "")
	return updated, nothingToReport, nil
}

func nothingToReport() {}
