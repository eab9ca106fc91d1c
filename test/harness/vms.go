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

package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// wantsRunning is KubeVirt's reading of a VM's run strategy (or of the
// deprecated spec.running): whether a VMI should exist. A VM being deleted
// never runs.
func wantsRunning(vm *kubevirtv1.VirtualMachine) bool {
	if vm.DeletionTimestamp != nil {
		return false
	}
	if s := vm.Spec.RunStrategy; s != nil {
		return *s == kubevirtv1.RunStrategyAlways || *s == kubevirtv1.RunStrategyRerunOnFailure
	}
	return vm.Spec.Running != nil && *vm.Spec.Running
}

// restarts says whether KubeVirt replaces a finished VMI of vm.
func restarts(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) bool {
	if vm.Spec.RunStrategy != nil && *vm.Spec.RunStrategy == kubevirtv1.RunStrategyRerunOnFailure {
		return vmi.Status.Phase == kubevirtv1.Failed
	}
	return true
}

func vmiFinal(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return vmi.Status.Phase == kubevirtv1.Failed || vmi.Status.Phase == kubevirtv1.Succeeded
}

// controllerUID is the UID of the VM that controls vmi ("" if none).
func controllerUID(vmi *kubevirtv1.VirtualMachineInstance) types.UID {
	if ref := metav1.GetControllerOf(vmi); ref != nil && ref.Kind == "VirtualMachine" {
		return ref.UID
	}
	return ""
}

// syncVM plays virt-controller's VM controller: it makes the VMI of a VM
// that should run, deletes it (after an ACPI shutdown of the guest) when
// the VM should not run or is deleted, replaces a failed one after
// RestartDelay, and keeps the VM's status (created, ready,
// printableStatus, Ready condition).
func (h *Harness) syncVM(ctx context.Context, namespace, name string) error {
	vmObj, err := getCached(h.vmLister, namespace, name)
	if err != nil {
		return err
	}
	vmiObj, err := getCached(h.vmiLister, namespace, name)
	if err != nil {
		return err
	}
	var vmi *kubevirtv1.VirtualMachineInstance
	if vmiObj != nil {
		if vmi, err = fromUnstructured[kubevirtv1.VirtualMachineInstance](vmiObj); err != nil {
			return err
		}
	}
	if vmObj == nil {
		// The VM is gone: its VMI goes too (KubeVirt's VM finalizer does
		// this; the garbage collector would too, through the owner
		// reference, whichever comes first).
		if vmi != nil && controllerUID(vmi) != "" && vmi.DeletionTimestamp == nil {
			return h.deleteVMI(ctx, vmi, "its VirtualMachine is gone")
		}
		return nil
	}
	vm, err := fromUnstructured[kubevirtv1.VirtualMachine](vmObj)
	if err != nil {
		return err
	}
	if vmi != nil && controllerUID(vmi) != vm.UID {
		if controllerUID(vmi) != "" && vmi.DeletionTimestamp == nil {
			// Left by an earlier VM of this name.
			return h.deleteVMI(ctx, vmi, "its VirtualMachine was replaced")
		}
		vmi = nil // not ours to manage
	}
	want := wantsRunning(vm)
	k := key{kindVM, namespace, name}
	switch {
	case vmi == nil && want:
		if err := h.createVMI(ctx, vm); err != nil {
			return err
		}
	case vmi != nil && !want && vmi.DeletionTimestamp == nil:
		if err := h.deleteVMI(ctx, vmi, "the VirtualMachine is stopped"); err != nil {
			return err
		}
	case vmi != nil && want && vmiFinal(vmi) && vmi.DeletionTimestamp == nil && restarts(vm, vmi) && h.cfg.RestartDelay >= 0:
		h.mu.Lock()
		due, ok := h.restartAt[vmi.UID]
		if !ok {
			due = time.Now().Add(h.cfg.RestartDelay)
			h.restartAt[vmi.UID] = due
		}
		h.mu.Unlock()
		if left := time.Until(due); left > 0 {
			h.after(k, left)
		} else if err := h.deleteVMI(ctx, vmi, "restarting it ("+string(vmi.Status.Phase)+")"); err != nil {
			return err
		}
	}
	return h.syncVMStatus(ctx, vm, vmi, want)
}

func (h *Harness) syncVMStatus(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, want bool) error {
	st := *vm.Status.DeepCopy()
	st.Created = vmi != nil
	readyCond := kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionFalse,
		Reason: "VMINotExists", Message: "VMI does not exist"}
	st.Ready = false
	switch {
	case vm.DeletionTimestamp != nil:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusTerminating
	case vmi == nil && want:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusStarting
	case vmi == nil:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusStopped
	case vmi.DeletionTimestamp != nil || !want:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusStopping
	case vmi.Status.Phase == kubevirtv1.Running:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusRunning
	case vmi.Status.Phase == kubevirtv1.Failed:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusCrashLoopBackOff
	case vmi.Status.Phase == kubevirtv1.Succeeded:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusStopped
	default:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusStarting
	}
	if vmi != nil {
		readyCond.Reason, readyCond.Message = "", ""
		for _, c := range vmi.Status.Conditions {
			if c.Type == kubevirtv1.VirtualMachineInstanceReady {
				readyCond.Status, readyCond.Reason, readyCond.Message = c.Status, c.Reason, c.Message
			}
		}
		st.Ready = vmi.Status.Phase == kubevirtv1.Running && readyCond.Status == corev1.ConditionTrue
	}
	var old *kubevirtv1.VirtualMachineCondition
	kept := st.Conditions[:0:0]
	for i := range st.Conditions {
		if st.Conditions[i].Type == kubevirtv1.VirtualMachineReady {
			old = &st.Conditions[i]
			continue
		}
		kept = append(kept, st.Conditions[i])
	}
	if old != nil && old.Status == readyCond.Status && old.Reason == readyCond.Reason && old.Message == readyCond.Message &&
		vm.Status.Created == st.Created && vm.Status.Ready == st.Ready && vm.Status.PrintableStatus == st.PrintableStatus {
		return nil
	}
	now := metav1.Now()
	readyCond.LastProbeTime, readyCond.LastTransitionTime = now, now
	if old != nil && old.Status == readyCond.Status {
		readyCond.LastTransitionTime = old.LastTransitionTime
	}
	st.Conditions = append(kept, readyCond)
	return h.updateStatus(ctx, VirtualMachineGVR, vm.Namespace, vm.Name, vm.UID, func(u *unstructured.Unstructured) (bool, error) {
		return true, setStatus(u, st)
	})
}

// createVMI makes the VMI of vm as virt-controller does
// (setupVMIFromVM): the template's metadata and spec, the VM's name and
// namespace, and the VM as controlling owner.
func (h *Harness) createVMI(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	if vm.Spec.Template == nil {
		return nil
	}
	vmi := &kubevirtv1.VirtualMachineInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.GroupVersion.String(), Kind: "VirtualMachineInstance"},
		ObjectMeta: *vm.Spec.Template.ObjectMeta.DeepCopy(),
		Spec:       *vm.Spec.Template.Spec.DeepCopy(),
	}
	vmi.Name, vmi.GenerateName, vmi.Namespace = vm.Name, "", vm.Namespace
	vmi.ResourceVersion, vmi.UID = "", ""
	vmi.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind)}
	// virt-controller removes it only once the VMI is final and its
	// launcher pod is gone: a VMI outlives every pod that could run it.
	vmi.Finalizers = append(vmi.Finalizers, kubevirtv1.VirtualMachineInstanceFinalizer)
	m, err := toMap(vmi)
	if err != nil {
		return err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	_, err = h.dyn.Resource(VirtualMachineInstanceGVR).Namespace(vm.Namespace).Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // the cache is behind; the VMI's event brings us back
	}
	if err != nil {
		return fmt.Errorf("creating the VirtualMachineInstance: %w", err)
	}
	h.mu.Lock()
	h.stats.VMIsCreated++
	h.mu.Unlock()
	h.logf("VirtualMachineInstance %s/%s created", vm.Namespace, vm.Name)
	return nil
}

// deleteVMI shuts the guest down (ACPI: the agent gets SIGTERM) and
// deletes the VMI, as virt-handler and virt-controller do together.
func (h *Harness) deleteVMI(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, why string) error {
	h.stopGuest(vmi.Namespace, vmi.Name, vmi.UID, false)
	err := h.dyn.Resource(VirtualMachineInstanceGVR).Namespace(vmi.Namespace).Delete(ctx, vmi.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &vmi.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting the VirtualMachineInstance: %w", err)
	}
	h.logf("VirtualMachineInstance %s/%s deleted: %s", vmi.Namespace, vmi.Name, why)
	return nil
}

// launcherPod says whether vmi's virt-launcher pod is gone because its
// node was deleted (the pod garbage collector removes the pods of a
// deleted node), or stuck: on a lost node that still exists, where the
// pod cannot be confirmed terminated.
func (h *Harness) launcherPod(vmi *kubevirtv1.VirtualMachineInstance) (gone, stuck bool) {
	node := vmi.Status.NodeName
	if node == "" {
		return false, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.deletedNodes[node] {
		return true, false
	}
	_, lost := h.lostNodes[node]
	return false, lost
}

// finalizeVMI removes KubeVirt's finalizer from vmi, as virt-controller
// does once the VMI is final and its pods are gone.
func (h *Harness) finalizeVMI(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	if !slices.Contains(vmi.Finalizers, kubevirtv1.VirtualMachineInstanceFinalizer) {
		return nil
	}
	kept := slices.DeleteFunc(slices.Clone(vmi.Finalizers), func(f string) bool { return f == kubevirtv1.VirtualMachineInstanceFinalizer })
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": kept, "resourceVersion": vmi.ResourceVersion}})
	if err != nil {
		return err
	}
	_, err = h.dyn.Resource(VirtualMachineInstanceGVR).Namespace(vmi.Namespace).Patch(ctx, vmi.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func setPhase(st *kubevirtv1.VirtualMachineInstanceStatus, p kubevirtv1.VirtualMachineInstancePhase, now metav1.Time) {
	st.Phase = p
	st.PhaseTransitionTimestamps = append(st.PhaseTransitionTimestamps,
		kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: p, PhaseTransitionTimestamp: now})
}

func setVMICondition(st *kubevirtv1.VirtualMachineInstanceStatus, c kubevirtv1.VirtualMachineInstanceCondition) {
	now := metav1.Now()
	c.LastProbeTime, c.LastTransitionTime = now, now
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status == c.Status {
				c.LastTransitionTime = st.Conditions[i].LastTransitionTime
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

func vmiReady(st *kubevirtv1.VirtualMachineInstanceStatus) corev1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// mutateVMI writes a VMI's status through mutate (which reports whether
// it changed anything).
func (h *Harness) mutateVMI(ctx context.Context, namespace, name string, uid types.UID,
	mutate func(*kubevirtv1.VirtualMachineInstance) bool) error {
	return h.updateStatus(ctx, VirtualMachineInstanceGVR, namespace, name, uid, func(u *unstructured.Unstructured) (bool, error) {
		vmi, err := fromUnstructured[kubevirtv1.VirtualMachineInstance](u)
		if err != nil {
			return false, err
		}
		if !mutate(vmi) {
			return false, nil
		}
		return true, setStatus(u, vmi.Status)
	})
}

// syncVMI plays virt-controller and virt-handler for one VMI: Pending (the
// launcher pod is made), Scheduling, Scheduled (on a node), Running (the
// domain runs; an address per network), one status write per step so
// watchers see each; then the guest boots. It also plays what KubeVirt
// does to VMIs on a lost node.
func (h *Harness) syncVMI(ctx context.Context, namespace, name string) error {
	obj, err := getCached(h.vmiLister, namespace, name)
	if err != nil {
		return err
	}
	if obj == nil {
		h.vmiGone(namespace, name, "")
		return nil
	}
	vmi, err := fromUnstructured[kubevirtv1.VirtualMachineInstance](obj)
	if err != nil {
		return err
	}
	h.vmiGone(namespace, name, vmi.UID) // a guest of an earlier VMI of this name
	h.mu.Lock()
	if _, seen := h.seenVMIs[vmi.UID]; !seen {
		h.seenVMIs[vmi.UID] = namespace + "/" + name
	}
	h.mu.Unlock()
	podGone, podStuck := h.launcherPod(vmi)
	if vmi.DeletionTimestamp != nil {
		h.stopGuest(namespace, name, vmi.UID, false)
		if podStuck {
			// The launcher pod stays Terminating on an unreachable node:
			// nothing can confirm the VM stopped, so the VMI stays.
			return nil
		}
		return h.finalizeVMI(ctx, vmi)
	}
	if podGone && !vmiFinal(vmi) {
		// The pod was removed under the VMI (its node deleted, so the pod
		// garbage collector removed it): virt-controller fails the VMI.
		return h.failVMI(ctx, vmi, "", corev1.ConditionFalse, kubevirtv1.PodNotExistsReason, "virt-launcher pod is gone")
	}
	if vmiFinal(vmi) && !podStuck {
		// Its launcher pod has ended: nothing holds the VMI any more.
		if err := h.finalizeVMI(ctx, vmi); err != nil {
			return err
		}
	}
	k := key{kindVMI, namespace, name}
	now := metav1.Now()
	switch vmi.Status.Phase {
	case kubevirtv1.VmPhaseUnset:
		return h.mutateVMI(ctx, namespace, name, vmi.UID, func(v *kubevirtv1.VirtualMachineInstance) bool {
			if v.Status.Phase != kubevirtv1.VmPhaseUnset {
				return false
			}
			setPhase(&v.Status, kubevirtv1.Pending, now)
			setVMICondition(&v.Status, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady,
				Status: corev1.ConditionFalse, Reason: kubevirtv1.PodNotExistsReason, Message: "virt-launcher pod has not yet been scheduled"})
			return true
		})
	case kubevirtv1.Pending:
		return h.mutateVMI(ctx, namespace, name, vmi.UID, func(v *kubevirtv1.VirtualMachineInstance) bool {
			if v.Status.Phase != kubevirtv1.Pending {
				return false
			}
			setPhase(&v.Status, kubevirtv1.Scheduling, now)
			return true
		})
	case kubevirtv1.Scheduling:
		if h.isUnschedulable(vmi.Labels[machineUIDLabel]) {
			h.after(k, time.Second)
			return h.mutateVMI(ctx, namespace, name, vmi.UID, func(v *kubevirtv1.VirtualMachineInstance) bool {
				for _, c := range v.Status.Conditions {
					if string(c.Type) == string(corev1.PodScheduled) && c.Reason == corev1.PodReasonUnschedulable {
						return false
					}
				}
				setVMICondition(&v.Status, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled),
					Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
					Message: fmt.Sprintf("0/%d nodes are available: %d Insufficient devices.kubevirt.io/kvm.", len(h.cfg.Nodes), len(h.cfg.Nodes))})
				return true
			})
		}
		node := h.pickNode()
		if node == "" {
			h.after(k, time.Second)
			return h.mutateVMI(ctx, namespace, name, vmi.UID, func(v *kubevirtv1.VirtualMachineInstance) bool {
				setVMICondition(&v.Status, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled),
					Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
					Message: fmt.Sprintf("0/%d nodes are available: %d node(s) had untolerated taint {node.kubernetes.io/unreachable: }.", len(h.cfg.Nodes), len(h.cfg.Nodes))})
				return true
			})
		}
		return h.mutateVMI(ctx, namespace, name, vmi.UID, func(v *kubevirtv1.VirtualMachineInstance) bool {
			if v.Status.Phase != kubevirtv1.Scheduling {
				return false
			}
			setPhase(&v.Status, kubevirtv1.Scheduled, now)
			v.Status.NodeName = node
			kept := v.Status.Conditions[:0]
			for _, c := range v.Status.Conditions {
				if string(c.Type) != string(corev1.PodScheduled) {
					kept = append(kept, c)
				}
			}
			v.Status.Conditions = kept
			return true
		})
	case kubevirtv1.Scheduled:
		return h.startVMI(ctx, vmi, now)
	case kubevirtv1.Running:
		return h.syncRunningVMI(ctx, vmi, now)
	default: // Failed, Succeeded: the domain is gone.
		h.stopGuest(namespace, name, vmi.UID, true)
		return nil
	}
}

// startVMI moves a Scheduled VMI to Running with an address per network
// and starts its guest.
func (h *Harness) startVMI(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, now metav1.Time) error {
	nets := networksOf(vmi)
	ips, err := h.allocIPs(len(nets))
	if err != nil {
		return err
	}
	wrote := false
	err = h.mutateVMI(ctx, vmi.Namespace, vmi.Name, vmi.UID, func(v *kubevirtv1.VirtualMachineInstance) bool {
		if v.Status.Phase != kubevirtv1.Scheduled {
			return false
		}
		v.Status.Interfaces = nil
		for i, n := range nets {
			v.Status.Interfaces = append(v.Status.Interfaces, kubevirtv1.VirtualMachineInstanceNetworkInterface{
				Name: n.name, IP: ips[i], IPs: []string{ips[i]}, MAC: n.mac, InfoSource: n.infoSource(),
			})
		}
		setPhase(&v.Status, kubevirtv1.Running, now)
		setVMICondition(&v.Status, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue})
		wrote = true
		return true
	})
	if err != nil || !wrote {
		h.releaseIPs(ips)
		return err
	}
	h.mu.Lock()
	h.stats.VMIsRunning++
	h.mu.Unlock()
	h.logf("VirtualMachineInstance %s/%s Running on %s at %v", vmi.Namespace, vmi.Name, vmi.Status.NodeName, ips)
	// The next event (this write) brings the VMI back as Running, and
	// syncRunningVMI boots its guest.
	return nil
}

// syncRunningVMI keeps a Running VMI's guest booted, and plays KubeVirt on
// a lost node: the launcher pod's readiness (mirrored on the VMI's Ready
// condition) goes False at once; after NodeUnresponsiveAfter (the
// virt-handler heartbeat timeout) the VMI is Failed with reason
// NodeUnresponsive.
func (h *Harness) syncRunningVMI(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, now metav1.Time) error {
	k := key{kindVMI, vmi.Namespace, vmi.Name}
	node := vmi.Status.NodeName
	h.mu.Lock()
	lostAt, lost := h.lostNodes[node]
	g := h.guests[vmi.Namespace+"/"+vmi.Name]
	diedWithNode := g != nil && g.uid == vmi.UID && g.lost
	h.mu.Unlock()
	if lost {
		if after := h.cfg.NodeUnresponsiveAfter; after > 0 {
			if left := time.Until(lostAt.Add(after)); left > 0 {
				h.after(k, left)
			} else {
				return h.failVMI(ctx, vmi, nodeUnresponsiveReason, corev1.ConditionFalse, "", "")
			}
		}
		if vmiReady(&vmi.Status) != corev1.ConditionFalse {
			// MarkPodsNotReady flips the pod's Ready condition and keeps
			// its (empty) reason; KubeVirt copies it to the VMI.
			return h.mutateVMI(ctx, vmi.Namespace, vmi.Name, vmi.UID, func(v *kubevirtv1.VirtualMachineInstance) bool {
				setVMICondition(&v.Status, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse})
				return true
			})
		}
		return nil
	}
	if diedWithNode {
		// The node came back without its domains: virt-handler finds
		// the domain gone and fails the VMI.
		return h.failVMI(ctx, vmi, "", corev1.ConditionFalse, kubevirtv1.GuestNotRunningReason, "Guest VM is not reported as running")
	}
	h.ensureGuest(vmi)
	return nil
}

// failVMI moves a VMI to Failed (reason on the VMI) with its Ready
// condition as given.
func (h *Harness) failVMI(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, reason string, ready corev1.ConditionStatus, condReason, condMsg string) error {
	h.stopGuest(vmi.Namespace, vmi.Name, vmi.UID, true)
	failed := false
	err := h.mutateVMI(ctx, vmi.Namespace, vmi.Name, vmi.UID, func(v *kubevirtv1.VirtualMachineInstance) bool {
		if vmiFinal(v) {
			return false
		}
		setPhase(&v.Status, kubevirtv1.Failed, metav1.Now())
		v.Status.Reason = reason
		setVMICondition(&v.Status, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady,
			Status: ready, Reason: condReason, Message: condMsg})
		failed = true
		return true
	})
	if err == nil && failed {
		h.mu.Lock()
		h.stats.VMIsFailed++
		h.mu.Unlock()
		h.logf("VirtualMachineInstance %s/%s Failed %s", vmi.Namespace, vmi.Name, reason)
	}
	return err
}

// nodeUnresponsiveReason is the VMI status.reason virt-controller's node
// controller writes when it fails the VMIs of a node whose virt-handler
// stopped sending heartbeats (KubeVirt's watch.NodeUnresponsiveReason; not
// in kubevirt.io/api).
const nodeUnresponsiveReason = "NodeUnresponsive"

// network is one network of a VMI, with its interface's MAC.
type network struct {
	name, mac string
	multus    bool
}

// infoSource is where virt-handler's netstat takes the interface's status
// from for a guest without qemu-guest-agent, as macOS is: the libvirt domain
// (name, MAC) and the launcher pod's interface cache (the address the CNI
// gave the pod's interface for that network: ipAddress), plus Multus's
// network-status for secondary networks. No interfaceName: only the guest
// agent reports that.
func (n network) infoSource() string {
	if n.multus {
		return "domain, multus-status"
	}
	return "domain"
}

// networksOf lists a VMI's networks; with none, KubeVirt attaches the pod
// network as "default".
func networksOf(vmi *kubevirtv1.VirtualMachineInstance) []network {
	macs := map[string]string{}
	for _, i := range vmi.Spec.Domain.Devices.Interfaces {
		macs[i.Name] = i.MacAddress
	}
	var out []network
	for i, n := range vmi.Spec.Networks {
		mac := macs[n.Name]
		if mac == "" {
			mac = fmt.Sprintf("02:00:00:%02x:%02x:%02x", len(vmi.UID)%256, i, len(out))
		}
		out = append(out, network{name: n.Name, mac: mac, multus: n.Multus != nil})
	}
	if len(out) == 0 {
		out = []network{{name: "default", mac: "02:00:00:00:00:01"}}
	}
	return out
}

// agentNetwork is the network the guest agent is reached on: "agent" when
// the VMI has it, else the pod network (pkg/controller/machine.AgentAddress).
func agentNetwork(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, n := range vmi.Spec.Networks {
		if n.Name == agentNetworkName {
			return n.Name
		}
	}
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			return n.Name
		}
	}
	if len(vmi.Spec.Networks) > 0 {
		return vmi.Spec.Networks[0].Name
	}
	return "default"
}
