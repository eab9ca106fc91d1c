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

// Package binding keeps claims and machines agreeing about who holds whom:
// a claim's status.machineName and its machine's status.claimRef are only
// ever written together, in one etcd transaction (rule 4 of docs/reference/api.md) — when
// a claim is created Bound or bound later, when it is deleted (the machine
// is freed), and when its machine goes (the claim is Lost).
//
// A claim for a pool is Bound in the transaction that creates it whenever
// a Ready, unbound machine of the pool that it may take exists (the one
// Ready longest); otherwise it is created Pending and joins its pool's
// queue, an index key per waiting claim beside the resources' own keys:
//
//	<storage prefix>dockerios.io/claim-queue/<ns>/<pool>/<claim> → claim uid
//
// and the write that later frees a machine it may take — the status write
// that makes the machine Ready, a label change, another claim's bind
// failing — binds the oldest such claim to it in that same transaction.
// The bindable index (bindable.go) makes both sides conditions etcd
// checks, so no claim of a pool is ever Pending while a machine of the pool
// it could take is free, whatever the controller is doing. The controller's
// bind subresource is left as a repair.
package binding

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// ConditionBound is the claim condition that says whether, and to which
// machine, the claim is bound.
const ConditionBound = "Bound"

// Reasons of the Bound condition.
const (
	ReasonBound       = "Bound"
	ReasonMachineGone = "MachineGone"
	// ReasonWaitingForMachine: the claim was created Pending; its message
	// says what it waits for.
	ReasonWaitingForMachine = "WaitingForMachine"
	// ReasonClaimDeleted is the reason of a machine's Released condition.
	ReasonClaimDeleted = "ClaimDeleted"
)

// maxAttempts bounds the retries of a bind that lost a race; each lost
// race is another write to the claim or the machine.
const maxAttempts = 100

// Binder binds claims to machines.
type Binder struct {
	client   *clientv3.Client
	claims   *txn.Resource
	machines *txn.Resource
	// pools are read only to say why a pool claim waits.
	pools    *txn.Resource
	clock    clock.PassiveClock
	recorder record.EventRecorder
	// queueRoot is where the queues of waiting pool claims live.
	queueRoot string
	// bindableRoot is where the index of bindable machines lives (see
	// bindable.go).
	bindableRoot string
	// view holds the machines a claim can be bound to at create (see
	// RunMachineView).
	view machineView
}

// New returns the Binder of the etcd client talks to, with objects laid out
// and encoded as optsGetter says.
func New(client *clientv3.Client, optsGetter generic.RESTOptionsGetter, clk clock.PassiveClock, recorder record.EventRecorder) (*Binder, error) {
	claims, err := txn.NewResource(optsGetter, dockerio.Resource("macosmachineclaims"), true, func() runtime.Object { return &dockerio.MacOSMachineClaim{} })
	if err != nil {
		return nil, err
	}
	machines, err := txn.NewResource(optsGetter, dockerio.Resource("macosmachines"), true, func() runtime.Object { return &dockerio.MacOSMachine{} })
	if err != nil {
		return nil, err
	}
	pools, err := txn.NewResource(optsGetter, dockerio.Resource("macosmachinepools"), true, func() runtime.Object { return &dockerio.MacOSMachinePool{} })
	if err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	return &Binder{client: client, claims: claims, machines: machines, pools: pools, clock: clk, recorder: recorder,
		queueRoot:    claims.StoragePrefix() + "dockerios.io/claim-queue/",
		bindableRoot: claims.StoragePrefix() + "dockerios.io/bindable-machines/"}, nil
}

// Bind binds the claim namespace/claimName to machineName, writing both in
// one transaction conditioned on both being as they were checked. A claim
// that is bound or being deleted, or a machine that is bound, not Ready,
// being deleted, or not what the claim asks for, is refused with 409
// saying which.
//
// With dryRun, every check is made and the claim as it would be bound is
// returned, but nothing is written.
func (b *Binder) Bind(ctx context.Context, namespace, claimName, machineName string, dryRun bool) (*dockerio.MacOSMachineClaim, error) {
	claimKey, machineKey := b.claims.Key(namespace, claimName), b.machines.Key(namespace, machineName)
	for range maxAttempts {
		obj, claimRev, err := b.claims.Get(ctx, b.client, claimKey)
		if storage.IsNotFound(err) {
			return nil, apierrors.NewNotFound(dockerio.Resource("macosmachineclaims"), claimName)
		}
		if err != nil {
			return nil, err
		}
		claim := obj.(*dockerio.MacOSMachineClaim)
		obj, machineRev, err := b.machines.Get(ctx, b.client, machineKey)
		if storage.IsNotFound(err) {
			return nil, apierrors.NewNotFound(dockerio.Resource("macosmachines"), machineName)
		}
		if err != nil {
			return nil, err
		}
		m := obj.(*dockerio.MacOSMachine)
		if reason := refusal(claim, m); reason != "" {
			return nil, apierrors.NewConflict(dockerio.Resource("macosmachineclaims"), claimName, fmt.Errorf("cannot bind to MacOSMachine %s: %s", machineName, reason))
		}

		bound := b.boundTo(claim, m)
		if dryRun {
			return bound, nil
		}
		var tx txn.Txn
		tx.IfUnchanged(claimKey, claimRev).IfUnchanged(machineKey, machineRev)
		written, err := tx.PutObject(ctx, b.claims, claimKey, bound)
		if err != nil {
			return nil, err
		}
		if err := tx.WriteObject(ctx, b.machines, machineKey, heldBy(m, claim)); err != nil {
			return nil, err
		}
		if isBindable(m) {
			tx.Delete(b.bindableKey(m))
		}
		if claim.Spec.PoolName != "" {
			// Served: the claim leaves its pool's queue.
			tx.Delete(b.queueKey(claim))
		}
		res, err := txn.Commit(ctx, b.client, &tx)
		if err != nil {
			return nil, err
		}
		if !res.Succeeded {
			continue // claim or machine changed since read: check again
		}
		out, err := written.Object(res.Revision)
		if err != nil {
			return nil, err
		}
		result := out.(*dockerio.MacOSMachineClaim)
		metricBindings.WithLabelValues("bindSubresource").Inc()
		b.event(result, "MacOSMachineClaim", corev1.EventTypeNormal, ReasonBound, "bound to MacOSMachine %s", m.Name)
		return result, nil
	}
	return nil, apierrors.NewConflict(dockerio.Resource("macosmachineclaims"), claimName,
		fmt.Errorf("the claim or MacOSMachine %s kept changing while it was being bound; retry", machineName))
}

// boundTo returns claim as it is once bound to m.
func (b *Binder) boundTo(claim *dockerio.MacOSMachineClaim, m *dockerio.MacOSMachine) *dockerio.MacOSMachineClaim {
	now := metav1.NewTime(b.clock.Now())
	bound := claim.DeepCopy()
	bound.Status.Phase = dockerio.ClaimBound
	bound.Status.MachineName = m.Name
	bound.Status.BoundTime = &now
	meta.SetStatusCondition(&bound.Status.Conditions, metav1.Condition{
		Type: ConditionBound, Status: metav1.ConditionTrue, Reason: ReasonBound,
		Message: "bound to MacOSMachine " + m.Name, ObservedGeneration: claim.Generation, LastTransitionTime: now,
	})
	return bound
}

// heldBy returns m as it is once bound to claim.
func heldBy(m *dockerio.MacOSMachine, claim *dockerio.MacOSMachineClaim) *dockerio.MacOSMachine {
	held := m.DeepCopy()
	held.Status.ClaimRef = &dockerio.ClaimReference{Name: claim.Name, UID: string(claim.UID)}
	return held
}

// refusal says why claim cannot be bound to m, or "" if it can.
func refusal(claim *dockerio.MacOSMachineClaim, m *dockerio.MacOSMachine) string {
	switch {
	case claim.DeletionTimestamp != nil:
		return "the claim is being deleted"
	case claim.Status.MachineName != "":
		return fmt.Sprintf("the claim is already bound to MacOSMachine %s; a bound claim is never re-bound", claim.Status.MachineName)
	case claim.Status.Phase == dockerio.ClaimLost:
		return "the claim is Lost, and a Lost claim stays Lost; create another claim"
	case m.DeletionTimestamp != nil:
		return "the machine is being deleted"
	case m.Status.ClaimRef != nil:
		return fmt.Sprintf("the machine is already bound to MacOSMachineClaim %s", m.Status.ClaimRef.Name)
	case m.Spec.Purpose == dockerio.MachinePurposeInstall:
		return "the machine is an install session (spec.purpose Install), which is never bound: promote it into its MacOSImage, then claim a machine made from the image"
	case m.Namespace != claim.Namespace:
		return fmt.Sprintf("the machine is in namespace %s, the claim in %s", m.Namespace, claim.Namespace)
	case claim.Spec.PoolName != "" && m.Spec.PoolName != claim.Spec.PoolName:
		return fmt.Sprintf("the claim asks for pool %s, the machine is of pool %q", claim.Spec.PoolName, m.Spec.PoolName)
	case claim.Spec.ClassName != "" && m.Spec.ClassName != claim.Spec.ClassName:
		return fmt.Sprintf("the claim asks for class %s, the machine is of class %s", claim.Spec.ClassName, m.Spec.ClassName)
	case claim.Spec.ClassName != "" && m.Labels[v1alpha1.ClaimUIDLabel] != string(claim.UID):
		// Otherwise the machine made for the claim would sit unused,
		// holding an identity, while the claim took a pool's warm machine
		// or another claim's own.
		return fmt.Sprintf("the machine was not made for this claim: a claim for a class is bound only to the machine made for it (label %s=%s)", v1alpha1.ClaimUIDLabel, claim.UID)
	case meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineReleased):
		return "the machine served a claim that was deleted and is being disposed of"
	case !ready(m):
		return "the machine is not Ready"
	}
	if sel := claim.Spec.Selector; sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return "the claim's selector is invalid: " + err.Error()
		}
		if !s.Matches(labels.Set(m.Labels)) {
			return fmt.Sprintf("the machine's labels do not match the claim's selector %s", s)
		}
	}
	return ""
}

func ready(m *dockerio.MacOSMachine) bool {
	return m.Status.Phase == dockerio.MachineReady && meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineConditionReady)
}

func (b *Binder) event(obj metav1.Object, kind, eventType, reason, format string, args ...interface{}) {
	b.recorder.Eventf(&corev1.ObjectReference{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: kind,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
	}, eventType, reason, format, args...)
}

// MachineGone adds to tx, which deletes m or marks it for deletion, that
// m's claim (if it still names m and is not Lost already) becomes Lost: a
// workload learns from its claim that its machine is going, in the same
// write as the machine's teardown starting.
func (b *Binder) MachineGone(ctx context.Context, tx *txn.Txn, m *dockerio.MacOSMachine) error {
	ref := m.Status.ClaimRef
	if ref == nil {
		return nil
	}
	claimKey := b.claims.Key(m.Namespace, ref.Name)
	obj, rev, err := b.claims.Get(ctx, b.client, claimKey)
	if storage.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	claim := obj.(*dockerio.MacOSMachineClaim)
	if string(claim.UID) != ref.UID || claim.Status.MachineName != m.Name || claim.Status.Phase == dockerio.ClaimLost {
		return nil
	}
	lost := claim.DeepCopy()
	lost.Status.Phase = dockerio.ClaimLost
	meta.SetStatusCondition(&lost.Status.Conditions, metav1.Condition{
		Type: ConditionBound, Status: metav1.ConditionFalse, Reason: ReasonMachineGone,
		Message: "MacOSMachine " + m.Name + " is being deleted", ObservedGeneration: claim.Generation,
		LastTransitionTime: metav1.NewTime(b.clock.Now()),
	})
	tx.IfUnchanged(claimKey, rev)
	err = tx.WriteObject(ctx, b.claims, claimKey, lost)
	return err
}
