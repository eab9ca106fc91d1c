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
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// Two identities sharing a value can only come from a write that bypassed
// the apiserver (a manual etcd edit): every create checks the index keys.
// Which of the two is the real one is a person's call, so the repair does
// not delete either; it quarantines both, so that the value is never given
// to a second machine meanwhile.
//
// A quarantined identity is on no free list and is given to no machine. A
// machine already holding one keeps it (its VM runs with those values);
// when that machine goes, the identity is not given back to the pool. Once
// the values are unique again, the repair lifts the quarantine and returns
// the identity to its pool.

// Reasons of a MacOSIdentity's Quarantined condition.
const (
	ReasonDuplicateValue = "DuplicateValue"
	ReasonResolved       = "Resolved"
)

// Reasons of the Events the quarantine is reported with.
const (
	EventIdentityQuarantined      = "IdentityQuarantined"
	EventIdentityQuarantineLifted = "IdentityQuarantineLifted"
)

// isQuarantined says whether id shares a value with another identity, as
// the repair last found. Such an identity must never be put on the free
// list nor given to a machine; a machine that holds it keeps it.
func isQuarantined(id *dockerio.MacOSIdentity) bool {
	return meta.IsStatusConditionTrue(id.Status.Conditions, v1alpha1.IdentityQuarantined)
}

// valueHolders returns, by value key, the identities holding that value,
// in the order of names.
func (l *Ledger) valueHolders(names []string, ids map[string]*dockerio.MacOSIdentity) map[string][]string {
	holders := map[string][]string{}
	for _, name := range names {
		values := uniqueValues(&ids[name].Spec)
		for _, f := range uniqueFields {
			k := l.keys.value(f, values[f])
			holders[k] = append(holders[k], name)
		}
	}
	return holders
}

// duplicateMessage names each field of id whose value another identity
// shares, and those identities; "" when its values are its own. The values
// themselves are left out: Events of cluster-scoped objects are readable in
// the default namespace, and identity values are sensitive.
func (l *Ledger) duplicateMessage(id *dockerio.MacOSIdentity, holders map[string][]string) string {
	values := uniqueValues(&id.Spec)
	var parts []string
	for _, f := range uniqueFields {
		var others []string
		for _, name := range holders[l.keys.value(f, values[f])] {
			if name != id.Name {
				others = append(others, name)
			}
		}
		switch len(others) {
		case 0:
		case 1:
			parts = append(parts, fmt.Sprintf("spec.%s is shared with MacOSIdentity %s", f, others[0]))
		default:
			parts = append(parts, fmt.Sprintf("spec.%s is shared with MacOSIdentities %s", f, strings.Join(others, ", ")))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + ". The identity is given to no machine (one holding it keeps it) until a person deletes all but one of the identities sharing each value"
}

// setQuarantined sets id's Quarantined condition and says whether that
// changed anything.
func (l *Ledger) setQuarantined(id *dockerio.MacOSIdentity, status metav1.ConditionStatus, reason, message string) bool {
	return meta.SetStatusCondition(&id.Status.Conditions, metav1.Condition{
		Type: v1alpha1.IdentityQuarantined, Status: status, Reason: reason, Message: message,
		ObservedGeneration: id.Generation, LastTransitionTime: metav1.NewTime(l.clock.Now()),
	})
}

// quarantineDrift is an identity sharing a value with another. The fix
// writes the Quarantined condition and takes the identity off the free
// list; one held by a machine that is gone is released, but not to the
// pool. With nothing left to write, the drift needs a person.
func (l *Ledger) quarantineDrift(id *dockerio.MacOSIdentity, idRev int64, message string, onFreeList, dangling bool) Drift {
	d := Drift{Kind: DriftDuplicateValue, Subject: "MacOSIdentity " + id.Name, Message: message,
		event: &eventTarget{obj: id, kind: "MacOSIdentity"}}
	quarantined := id.DeepCopy()
	changed := l.setQuarantined(quarantined, metav1.ConditionTrue, ReasonDuplicateValue, message)
	if dangling {
		a := id.Status.Allocation
		quarantined.Status.Allocation = nil
		d.Message += fmt.Sprintf("; its holder MacOSMachine %s/%s (uid %s) is gone, and it stays out of the pool", a.MachineNamespace, a.MachineName, a.MachineUID)
		changed = true
	}
	if !changed && !onFreeList {
		return d
	}
	d.event.eventType, d.event.reason = corev1.EventTypeWarning, EventIdentityQuarantined
	d.fix = func(ctx context.Context) (bool, error) {
		idKey := l.identities.Key("", id.Name)
		var tx txn.Txn
		tx.IfUnchanged(idKey, idRev).Delete(l.keys.free(id.Spec.PoolName, id.Name))
		if changed {
			if err := tx.WriteObject(ctx, l.identities, idKey, quarantined); err != nil {
				return false, err
			}
		}
		res, err := txn.Commit(ctx, l.client, &tx)
		return err == nil && res.Succeeded, err
	}
	return d
}

// liftQuarantineDrift is a quarantined identity whose values are its own
// again (a person deleted the duplicates). The fix sets the condition False
// and, when nobody holds the identity, returns it to its pool: to the
// machine that has waited longest, or onto the free list.
func (l *Ledger) liftQuarantineDrift(id *dockerio.MacOSIdentity, idRev int64, onFreeList, claimed, dangling bool) Drift {
	lifted := id.DeepCopy()
	l.setQuarantined(lifted, metav1.ConditionFalse, ReasonResolved, "no other MacOSIdentity shares its values")
	d := Drift{Kind: DriftQuarantineResolved, Subject: "MacOSIdentity " + id.Name,
		Message: "no other MacOSIdentity shares its values any more; it is no longer quarantined",
		event:   &eventTarget{obj: id, kind: "MacOSIdentity", eventType: corev1.EventTypeNormal, reason: EventIdentityQuarantineLifted}}
	if dangling {
		a := id.Status.Allocation
		lifted.Status.Allocation = nil
		d.Message += fmt.Sprintf("; its holder MacOSMachine %s/%s (uid %s) is gone", a.MachineNamespace, a.MachineName, a.MachineUID)
	}
	// A machine naming it takes it back (see machineRefDrift); one already
	// on the free list stays there.
	toPool := lifted.Status.Allocation == nil && !claimed && !onFreeList
	switch {
	case toPool && lifted.DeletionTimestamp != nil:
		d.Message += "; it is being deleted, so it goes to no machine"
	case toPool:
		d.Message += "; it goes back to its pool"
	}
	d.fix = func(ctx context.Context) (bool, error) {
		if toPool {
			return l.returnToPool(ctx, lifted, idRev, func(*txn.Txn) {})
		}
		idKey := l.identities.Key("", id.Name)
		var tx txn.Txn
		tx.IfUnchanged(idKey, idRev)
		if err := tx.WriteObject(ctx, l.identities, idKey, lifted); err != nil {
			return false, err
		}
		res, err := txn.Commit(ctx, l.client, &tx)
		return err == nil && res.Succeeded, err
	}
	return d
}
