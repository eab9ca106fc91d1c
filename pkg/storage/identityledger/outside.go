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

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/storage/door"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// An identity held outside the ledger is one a running VM uses while the
// ledger records another holder, or none: only a restore of an older
// snapshot makes that, and only the controller, which sees the VMs, can
// tell. It reports it with the HeldOutsideLedger condition through
// macosidentities/status; from that write on the identity is withheld like
// a quarantined one — off the free list, given to no machine — until the
// controller reports the VM gone.

// heldOutsideLedger says whether the controller found id in use by a VM
// the ledger does not record as its holder.
func heldOutsideLedger(id *dockerio.MacOSIdentity) bool {
	return meta.IsStatusConditionTrue(id.Status.Conditions, v1alpha1.IdentityHeldOutsideLedger)
}

// outsideWrite makes a status write that changes whether a free identity
// is held outside the ledger (unchanged since rev): withheld, it leaves the
// free list in the same transaction; released, it goes to the oldest
// waiting machine of its pool or back onto the free list, unless it is
// withheld for another reason or its pool is on hold.
func (s *identityStorage) outsideWrite(updated *dockerio.MacOSIdentity, rev int64) func(context.Context, runtime.Object) (bool, error) {
	l := s.l
	return func(ctx context.Context, destination runtime.Object) (bool, error) {
		pool := updated.Spec.PoolName
		idKey := l.identities.Key("", updated.Name)
		var tx txn.Txn
		tx.IfUnchanged(idKey, rev)
		stored := updated
		var next *waitingMachine
		switch {
		case withheld(updated):
			tx.Delete(l.keys.free(pool, updated.Name))
		default:
			hold, _, err := l.hold(ctx, pool)
			if err != nil {
				return false, err
			}
			if hold != nil {
				break // the lift of the hold gives it back
			}
			if next, err = l.oldestWaiting(ctx, pool); err != nil {
				return false, err
			}
			if next == nil {
				tx.IfNothingUnder(l.keys.pendingPrefix(pool)).Put(l.keys.free(pool, updated.Name), "")
				break
			}
			n := next.machine
			nKey := l.machines.Key(n.Namespace, n.Name)
			tx.IfUnchanged(nKey, next.machineRev).IfUnchanged(next.pendingKey, next.pendingRev)
			if err := tx.WriteObject(ctx, l.machines, nKey, l.allocatedTo(n, updated)); err != nil {
				return false, err
			}
			tx.Delete(next.pendingKey).Delete(l.keys.waiting(n.Namespace, n.Name))
			stored = l.holding(updated, n)
		}
		written, err := tx.PutObject(ctx, l.identities, idKey, stored)
		if err != nil {
			return false, err
		}
		res, err := txn.Commit(ctx, l.client, &tx)
		if err != nil || !res.Succeeded {
			return false, err
		}
		if door.IsDryRun(ctx) {
			return true, written.Into(destination, rev)
		}
		if withheld(updated) {
			l.free.forget(pool, l.keys.free(pool, updated.Name))
		}
		if next != nil {
			(&handoff{identity: updated, to: next.machine}).announce(l)
		}
		return true, written.Into(destination, res.Revision)
	}
}
