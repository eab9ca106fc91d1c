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

package machine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
)

var everything = labels.Everything()

// teardown takes a deleted machine apart in the finalizer's order: the
// claim learns it is Lost from the apiserver in the write that removes the
// machine; before that the VM is stopped with an ACPI shutdown (KubeVirt
// gives it the VMI's termination grace period), then deleted, then the
// volumes (unless preserved), the Job, PVC and Secrets; last the finalizer
// goes, and with it — in the same transaction — the identity. Every step
// is read back from the caches, so a restart resumes where it was.
func (r *Reconciler) teardown(ctx context.Context, m *v1alpha1.MacOSMachine) (Result, error) {
	if !slices.Contains(m.Finalizers, v1alpha1.MachineTeardownFinalizer) {
		return Result{}, nil
	}
	o, err := r.observe(m)
	if err != nil {
		return Result{}, err
	}
	st := m.Status.DeepCopy()
	if m.Status.Phase != v1alpha1.MachineFailed {
		st.Phase = v1alpha1.MachineTerminating
	}
	if o.VMI != nil && o.NodeNotReady != "" && st.IdentityRef != nil && !Fenced(m) {
		// The identity goes with the finalizer, which waits for the VMI:
		// say why that may take until the node is dealt with.
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.MachineIdentityFenced, Status: metav1.ConditionTrue,
			Reason: ReasonVMMayRun, ObservedGeneration: m.Generation, LastTransitionTime: metav1.NewTime(r.now()),
			Message: fenceMessage(st.IdentityRef.Name, o)})
	}
	// The finalizer's removal below is conditioned on the machine's
	// resourceVersion: the one this write leaves, not the one it replaced.
	if m, err = r.writeStatus(ctx, m, *st, false); err != nil {
		return Result{}, err
	}
	waiting, err := r.removeOwned(ctx, m, o)
	if err != nil || waiting != "" {
		if waiting != "" {
			r.Log.Debug("teardown waiting", "namespace", m.Namespace, "machine", m.Name, "for", waiting)
		}
		return Result{RequeueAfter: teardownPoll}, err
	}
	return Result{}, r.removeFinalizer(ctx, m)
}

// removeOwned deletes the machine's objects in order and says what it
// still waits for ("" when everything is gone).
func (r *Reconciler) removeOwned(ctx context.Context, m *v1alpha1.MacOSMachine, o *Observed) (string, error) {
	n := NamesFor(m)
	if o.VMI != nil {
		// ACPI shutdown: a Halted run strategy stops the VMI gracefully.
		if o.VM != nil && (o.VM.Spec.RunStrategy == nil || *o.VM.Spec.RunStrategy != kubevirtv1.RunStrategyHalted) {
			patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"runStrategy": kubevirtv1.RunStrategyHalted, "running": nil}})
			if _, err := r.Dynamic.Resource(external.VirtualMachines).Namespace(m.Namespace).Patch(ctx, o.VM.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return "", fmt.Errorf("stopping VirtualMachine %s: %w", o.VM.Name, err)
			}
			r.Recorder.Eventf(m, corev1.EventTypeNormal, "Stopping", "stopping VirtualMachine %s (ACPI shutdown)", o.VM.Name)
		}
		// KubeVirt enforces the grace period itself; a VMI that outlives it
		// by far (a lost node) is deleted so teardown cannot hang.
		grace := time.Duration(r.Settings.TerminationGracePeriodSeconds)*time.Second + time.Minute
		if o.VM == nil || (m.DeletionTimestamp != nil && r.now().Sub(m.DeletionTimestamp.Time) > grace) {
			if err := external.Delete(ctx, r.Dynamic, external.VirtualMachineInstances, m.Namespace, o.VMI.Name, string(o.VMI.UID)); err != nil {
				return "", err
			}
		}
		return "VirtualMachineInstance " + o.VMI.Name + " to stop", nil
	}
	if o.VM != nil {
		if err := external.Delete(ctx, r.Dynamic, external.VirtualMachines, m.Namespace, o.VM.Name, string(o.VM.UID)); err != nil {
			return "", err
		}
		return "VirtualMachine " + o.VM.Name + " to go", nil
	}
	var waiting []string
	if o.DV != nil && o.DV.Labels[PreservedLabel] == "" {
		if BrokenGuest(m) && o.Class != nil && o.Class.Spec.PreserveDiskOnFailure {
			// Keep it, detached from the machine so nothing collects it.
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
				"labels": map[string]any{PreservedLabel: "true", MachineUIDLabel: nil}, "ownerReferences": nil}})
			if _, err := r.Dynamic.Resource(external.DataVolumes).Namespace(m.Namespace).Patch(ctx, o.DV.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return "", fmt.Errorf("preserving DataVolume %s: %w", o.DV.Name, err)
			}
			r.Recorder.Eventf(m, corev1.EventTypeNormal, "DiskPreserved", "kept system disk DataVolume %s of the broken machine for inspection (class preserveDiskOnFailure); delete it when done", o.DV.Name)
		} else if err := external.Delete(ctx, r.Dynamic, external.DataVolumes, m.Namespace, n.SystemDisk, string(o.DV.UID)); err != nil {
			return "", err
		}
		waiting = append(waiting, "DataVolume "+o.DV.Name)
	}
	if o.RecoveryDV != nil {
		// An install session's recovery disk: a clone of its image's
		// recovery volume, of no use once the session goes.
		if err := external.Delete(ctx, r.Dynamic, external.DataVolumes, m.Namespace, n.RecoveryDisk, string(o.RecoveryDV.UID)); err != nil {
			return "", err
		}
		waiting = append(waiting, "DataVolume "+o.RecoveryDV.Name)
	}
	bg := metav1.DeletePropagationBackground
	if o.Job != nil {
		if err := ignoreGone(r.Kube.BatchV1().Jobs(m.Namespace).Delete(ctx, o.Job.Name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &o.Job.UID}})); err != nil {
			return "", err
		}
		waiting = append(waiting, "Job "+o.Job.Name)
	}
	// Jobs of an earlier identity or display (their names differ) go too.
	jobs, err := r.Listers.Jobs.Jobs(m.Namespace).List(labels.SelectorFromSet(labels.Set{MachineUIDLabel: string(m.UID)}))
	if err != nil {
		return "", err
	}
	for _, j := range jobs {
		if o.Job != nil && j.Name == o.Job.Name {
			continue
		}
		if err := ignoreGone(r.Kube.BatchV1().Jobs(m.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &j.UID}})); err != nil {
			return "", err
		}
		waiting = append(waiting, "Job "+j.Name)
	}
	if o.PVC != nil {
		if err := ignoreGone(r.Kube.CoreV1().PersistentVolumeClaims(m.Namespace).Delete(ctx, o.PVC.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &o.PVC.UID}})); err != nil {
			return "", err
		}
		waiting = append(waiting, "PersistentVolumeClaim "+o.PVC.Name)
	}
	if o.Secret != nil {
		if err := ignoreGone(r.Kube.CoreV1().Secrets(m.Namespace).Delete(ctx, o.Secret.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &o.Secret.UID}})); err != nil {
			return "", err
		}
		waiting = append(waiting, "Secret "+o.Secret.Name)
	}
	// The identity Secret is not observed for the phase (nothing derives
	// from it): read it here.
	idSecret, err := getOrNil(r.Listers.Secrets.Secrets(m.Namespace).Get(n.IdentitySecret))
	if err != nil {
		return "", err
	}
	if idSecret != nil && mine(m, idSecret) {
		if err := ignoreGone(r.Kube.CoreV1().Secrets(m.Namespace).Delete(ctx, idSecret.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &idSecret.UID}})); err != nil {
			return "", err
		}
		waiting = append(waiting, "Secret "+idSecret.Name)
	}
	if len(waiting) > 0 {
		return fmt.Sprint(waiting), nil
	}
	return "", nil
}

// BrokenGuest says whether the machine failed, or was Ready and lost its
// guest (the VM stopped, the agent said the guest is not Ready, or the
// agent hung past the class's agentUnresponsiveTimeout): the machines
// whose disks a class's preserveDiskOnFailure keeps.
func BrokenGuest(m *v1alpha1.MacOSMachine) bool {
	if m.Status.Phase == v1alpha1.MachineFailed || Hung(m) {
		return true
	}
	if !WasReady(m) {
		return false
	}
	vm := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MachineVirtualMachineRunning)
	guest := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MachineGuestReady)
	return (vm != nil && vm.Status == metav1.ConditionFalse) || (guest != nil && guest.Status == metav1.ConditionFalse)
}

func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// removeFinalizer lets the machine go; the apiserver releases its identity
// (and marks its claim Lost) in the same transaction.
func (r *Reconciler) removeFinalizer(ctx context.Context, m *v1alpha1.MacOSMachine) error {
	var kept []string
	for _, f := range m.Finalizers {
		if f != v1alpha1.MachineTeardownFinalizer {
			kept = append(kept, f)
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": kept, "resourceVersion": m.ResourceVersion}})
	_, err := r.Client.DockeriosV1alpha1().MacOSMachines(m.Namespace).Patch(ctx, m.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	r.Log.Info("machine torn down", "namespace", m.Namespace, "machine", m.Name)
	return nil
}

// disposeFailed stops a Failed machine's VM: nothing of a failed machine
// keeps running. A machine that failed while its VM could still run keeps
// its identity, fenced, until the VMI is gone — which KubeVirt allows only
// once the launcher pod is — and then lifts the fence in a status write,
// in which the apiserver gives the identity back. The machine object
// stays, Failed, until its pool or its user deletes it; teardown then
// removes the rest.
func (r *Reconciler) disposeFailed(ctx context.Context, m *v1alpha1.MacOSMachine, o *Observed) (Result, error) {
	if o.VMI == nil && Fenced(m) {
		st := m.Status.DeepCopy()
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.MachineIdentityFenced, Status: metav1.ConditionFalse,
			Reason: ReasonVMGone, ObservedGeneration: m.Generation, LastTransitionTime: metav1.NewTime(r.now()),
			Message: fmt.Sprintf("VirtualMachineInstance %s is gone (KubeVirt removes it only once its launcher pod is): the identity is given back", NamesFor(m).VirtualMachine)})
		if _, err := r.writeStatus(ctx, m, *st, false); err != nil {
			return Result{}, err
		}
		r.Recorder.Eventf(m, corev1.EventTypeNormal, "IdentityUnfenced", "VirtualMachineInstance %s is gone: the identity is given back", NamesFor(m).VirtualMachine)
	}
	if o.VMI == nil && o.VM == nil {
		return Result{}, nil
	}
	if o.VM != nil {
		if err := external.Delete(ctx, r.Dynamic, external.VirtualMachines, m.Namespace, o.VM.Name, string(o.VM.UID)); err != nil {
			return Result{}, err
		}
		r.Recorder.Eventf(m, corev1.EventTypeNormal, "Stopping", "deleting VirtualMachine %s of the failed machine", o.VM.Name)
	}
	return Result{RequeueAfter: teardownPoll}, nil
}
