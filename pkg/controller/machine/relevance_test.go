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
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

func TestVMIUpdateMatters(t *testing.T) {
	vmi := func(phase kubevirtv1.VirtualMachineInstancePhase, edit ...func(*kubevirtv1.VirtualMachineInstance)) *kubevirtv1.VirtualMachineInstance {
		v := &kubevirtv1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Name: "mac-1", Labels: map[string]string{MachineUIDLabel: "u1"}},
			Status:     kubevirtv1.VirtualMachineInstanceStatus{Phase: phase},
		}
		if phase == kubevirtv1.Scheduled || phase == kubevirtv1.Running {
			v.Status.NodeName = "node-a"
		}
		if phase == kubevirtv1.Running {
			v.Status.PhaseTransitionTimestamps = []kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{
				{Phase: kubevirtv1.Running, PhaseTransitionTimestamp: metav1.NewTime(t0)}}
			v.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: "10.0.0.7", IPs: []string{"10.0.0.7"}}}
		}
		for _, e := range edit {
			e(v)
		}
		return v
	}
	unschedulable := func(v *kubevirtv1.VirtualMachineInstance) {
		v.Status.Conditions = append(v.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
			Type: kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled), Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient devices.kubevirt.io/kvm."})
	}
	for _, tc := range []struct {
		name     string
		old, new *kubevirtv1.VirtualMachineInstance
		matters  bool
	}{
		{"a step on the way: Pending to Scheduling", vmi(kubevirtv1.Pending), vmi(kubevirtv1.Scheduling), false},
		{"the first step: no phase to Pending", vmi(kubevirtv1.VmPhaseUnset), vmi(kubevirtv1.Pending), false},
		{"scheduled onto a node", vmi(kubevirtv1.Scheduling), vmi(kubevirtv1.Scheduled), true},
		{"running", vmi(kubevirtv1.Scheduled), vmi(kubevirtv1.Running), true},
		{"cannot be scheduled", vmi(kubevirtv1.Scheduling), vmi(kubevirtv1.Scheduling, unschedulable), true},
		{"failed", vmi(kubevirtv1.Scheduled), vmi(kubevirtv1.Failed), true},
		{"stopped", vmi(kubevirtv1.Running), vmi(kubevirtv1.Succeeded), true},
		{"a running VMI's address changes", vmi(kubevirtv1.Running), vmi(kubevirtv1.Running, func(v *kubevirtv1.VirtualMachineInstance) {
			v.Status.Interfaces[0].IP, v.Status.Interfaces[0].IPs = "10.0.0.8", []string{"10.0.0.8"}
		}), true},
		{"an agent interface appears", vmi(kubevirtv1.Running), vmi(kubevirtv1.Running, func(v *kubevirtv1.VirtualMachineInstance) {
			v.Status.Interfaces = append(v.Status.Interfaces, kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: "agent", IP: "192.168.7.3"})
		}), true},
		{"moved to another node", vmi(kubevirtv1.Running), vmi(kubevirtv1.Running, func(v *kubevirtv1.VirtualMachineInstance) { v.Status.NodeName = "node-b" }), true},
		{"restarted: running from another time", vmi(kubevirtv1.Running), vmi(kubevirtv1.Running, func(v *kubevirtv1.VirtualMachineInstance) {
			v.Status.PhaseTransitionTimestamps[0].PhaseTransitionTimestamp = metav1.NewTime(t0.Add(time.Minute))
		}), true},
		{"relabelled to another machine", vmi(kubevirtv1.Running), vmi(kubevirtv1.Running, func(v *kubevirtv1.VirtualMachineInstance) { v.Labels[MachineUIDLabel] = "u2" }), true},
		{"a running VMI's conditions and guest info", vmi(kubevirtv1.Running), vmi(kubevirtv1.Running, func(v *kubevirtv1.VirtualMachineInstance) {
			v.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}}
			v.Status.GuestOSInfo = kubevirtv1.VirtualMachineInstanceGuestOSInfo{Name: "macOS"}
			v.Status.MigrationMethod = kubevirtv1.BlockMigration
		}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := VMIUpdateMatters(tc.old, tc.new); got != tc.matters {
				t.Errorf("VMIUpdateMatters = %v, want %v", got, tc.matters)
			}
		})
	}
}

func TestDataVolumeUpdateMatters(t *testing.T) {
	dv := func(phase cdiv1.DataVolumePhase, progress string, conds ...cdiv1.DataVolumeCondition) *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: "mac-1-system"},
			Status: cdiv1.DataVolumeStatus{Phase: phase, Progress: cdiv1.DataVolumeProgress(progress), Conditions: conds}}
	}
	running := func(s corev1.ConditionStatus, reason, msg string) cdiv1.DataVolumeCondition {
		return cdiv1.DataVolumeCondition{Type: cdiv1.DataVolumeRunning, Status: s, Reason: reason, Message: msg}
	}
	for _, tc := range []struct {
		name     string
		old, new *cdiv1.DataVolume
		matters  bool
	}{
		{"CDI's first status", dv("", ""), dv(cdiv1.Pending, "N/A"), false},
		{"a phase on the way", dv(cdiv1.CloneScheduled, "N/A"), dv(cdiv1.CSICloneInProgress, "N/A"), false},
		{"conditions while cloning", dv(cdiv1.CloneInProgress, "12.0%"), dv(cdiv1.CloneInProgress, "12.0%", running(corev1.ConditionTrue, "", "")), false},
		{"progress within a step", dv(cdiv1.CloneInProgress, "51.2%"), dv(cdiv1.CloneInProgress, "58.9%"), false},
		{"progress into the next step", dv(cdiv1.CloneInProgress, "58.9%"), dv(cdiv1.CloneInProgress, "60.1%"), true},
		{"first progress", dv(cdiv1.CloneScheduled, "N/A"), dv(cdiv1.CloneInProgress, "3.0%"), true},
		{"cloned", dv(cdiv1.CloneInProgress, "100.0%"), dv(cdiv1.Succeeded, "100.0%"), true},
		{"failed", dv(cdiv1.CloneInProgress, "40.0%"), dv(cdiv1.Failed, "40.0%"), true},
		{"a failure says more", dv(cdiv1.Failed, "40.0%", running(corev1.ConditionFalse, "Error", "")),
			dv(cdiv1.Failed, "40.0%", running(corev1.ConditionFalse, "Error", "no space left on device")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DataVolumeUpdateMatters(tc.old, tc.new); got != tc.matters {
				t.Errorf("DataVolumeUpdateMatters = %v, want %v", got, tc.matters)
			}
		})
	}
}

// What the filters drop, Derive does not say: for every pair of objects
// an update could go between, an update called irrelevant leaves the
// derived status as it was. (The reverse need not hold: a relevant update
// may change only what the reconciler does.)
func TestDerive_SaysNothingNewOnAnIrrelevantUpdate(t *testing.T) {
	derived := func(o Observed) v1alpha1.MacOSMachineStatus {
		return Derive(testMachine(), &o, t0.Add(time.Minute)).Status
	}
	base := Observed{Class: testClass(), Job: job(batchv1.JobComplete)}

	var vmis []*kubevirtv1.VirtualMachineInstance
	for _, p := range []kubevirtv1.VirtualMachineInstancePhase{kubevirtv1.VmPhaseUnset, kubevirtv1.Pending, kubevirtv1.Scheduling,
		kubevirtv1.Scheduled, kubevirtv1.Running, kubevirtv1.Failed, kubevirtv1.Succeeded} {
		v := vmi(p, t0)
		vmis = append(vmis, v, unschedulable(vmi(p, t0)), failedVMI(vmi(p, t0)))
		noNode := vmi(p, t0)
		noNode.Status.NodeName = ""
		vmis = append(vmis, noNode)
	}
	for _, a := range vmis {
		for _, b := range vmis {
			if VMIUpdateMatters(a, b) {
				continue
			}
			oa, ob := base, base
			oa.DV, ob.DV = dv(cdiv1.Succeeded), dv(cdiv1.Succeeded)
			oa.VM, ob.VM = vm(t0, kubevirtv1.VirtualMachineStatusStarting), vm(t0, kubevirtv1.VirtualMachineStatusStarting)
			oa.VMI, ob.VMI = a, b
			if sa, sb := derived(oa), derived(ob); statusNews(&sa, &sb) == somethingNew {
				t.Errorf("VMI %s (node %q) → %s (node %q): called irrelevant, yet the status goes from\n%+v\nto\n%+v",
					a.Status.Phase, a.Status.NodeName, b.Status.Phase, b.Status.NodeName, sa.Conditions, sb.Conditions)
			}
		}
	}

	var dvs []*cdiv1.DataVolume
	for _, p := range []cdiv1.DataVolumePhase{"", cdiv1.Pending, cdiv1.CloneScheduled, cdiv1.CloneInProgress, cdiv1.Succeeded, cdiv1.Failed} {
		for _, progress := range []string{"", "N/A", "3.0%", "38.9%", "41.0%", "100.0%"} {
			d := dv(p)
			d.Status.Progress = cdiv1.DataVolumeProgress(progress)
			dvs = append(dvs, d)
		}
	}
	for _, a := range dvs {
		for _, b := range dvs {
			if DataVolumeUpdateMatters(a, b) {
				continue
			}
			oa, ob := base, base
			oa.DV, ob.DV = a, b
			if sa, sb := derived(oa), derived(ob); statusNews(&sa, &sb) == somethingNew {
				t.Errorf("DataVolume %s %s → %s %s: called irrelevant, yet the status changes",
					a.Status.Phase, a.Status.Progress, b.Status.Phase, b.Status.Progress)
			}
		}
	}
}

func TestOwnWrites(t *testing.T) {
	mk := func(uid, rv string) *v1alpha1.MacOSMachine {
		return &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mac-1", UID: types.UID(uid), ResourceVersion: rv}}
	}
	var w ownWrites
	if got := w.freshest(mk("u1", "10")); got.ResourceVersion != "10" {
		t.Fatalf("nothing written: want the cache's copy, got rv %s", got.ResourceVersion)
	}
	w.remember("10", mk("u1", "12"))
	if got := w.freshest(mk("u1", "10")); got.ResourceVersion != "12" {
		t.Errorf("cache still at the replaced revision: want the write (12), got %s", got.ResourceVersion)
	}
	if got := w.freshest(mk("u2", "10")); got.ResourceVersion != "10" || got.UID != "u2" {
		t.Errorf("a new machine of the same name: want the cache's copy, got %s/%s", got.UID, got.ResourceVersion)
	}
	w.remember("10", mk("u1", "12"))
	if got := w.freshest(mk("u1", "14")); got.ResourceVersion != "14" {
		t.Errorf("cache past the write: want the cache's copy (14), got %s", got.ResourceVersion)
	}
	if got := w.freshest(mk("u1", "10")); got.ResourceVersion != "10" {
		t.Errorf("once the cache moved on the write is forgotten: want 10, got %s", got.ResourceVersion)
	}
}
