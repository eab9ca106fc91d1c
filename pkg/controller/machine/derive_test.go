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
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/client"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/bootdisk"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func testMachine() *v1alpha1.MacOSMachine {
	m := &v1alpha1.MacOSMachine{}
	m.Name, m.Namespace, m.UID, m.Generation = "mac-0", "ci", "uid-1", 1
	m.Spec.ClassName = "standard"
	m.Status.IdentityRef = &v1alpha1.LocalObjectReference{Name: "id-0"}
	return m
}

func testClass() *v1alpha1.MacOSMachineClass {
	c := &v1alpha1.MacOSMachineClass{}
	c.Name = "standard"
	c.Spec.StartTimeout = &metav1.Duration{Duration: 10 * time.Minute}
	return c
}

func job(cond batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{}
	j.Name = "mac-0-bootdisk-x"
	if cond != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "bootdisk: sfdisk failed",
			LastTransitionTime: metav1.NewTime(t0)}}
	}
	return j
}

func dv(phase cdiv1.DataVolumePhase) *cdiv1.DataVolume {
	d := &cdiv1.DataVolume{}
	d.Name = "mac-0-system"
	d.Status.Phase = phase
	if phase == cdiv1.Failed {
		d.Status.Conditions = []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Message: "no space left on device"}}
	}
	return d
}

func vmi(phase kubevirtv1.VirtualMachineInstancePhase, since time.Time) *kubevirtv1.VirtualMachineInstance {
	v := &kubevirtv1.VirtualMachineInstance{}
	v.Name = "mac-0"
	v.Status.Phase = phase
	v.Status.NodeName = "node-1"
	v.Status.PhaseTransitionTimestamps = []kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{{Phase: kubevirtv1.Running, PhaseTransitionTimestamp: metav1.NewTime(since)}}
	v.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: PodInterface, IP: "10.0.0.7"}}
	return v
}

// vm is the machine's VirtualMachine, created at created.
func vm(created time.Time, printable kubevirtv1.VirtualMachinePrintableStatus) *kubevirtv1.VirtualMachine {
	v := &kubevirtv1.VirtualMachine{}
	v.Name = "mac-0"
	v.CreationTimestamp = metav1.NewTime(created)
	v.Status.PrintableStatus = printable
	return v
}

func unschedulable(v *kubevirtv1.VirtualMachineInstance) *kubevirtv1.VirtualMachineInstance {
	v.Status.NodeName = ""
	v.Status.Conditions = append(v.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
		Type: kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled), Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient devices.kubevirt.io/kvm."})
	return v
}

func failedVMI(v *kubevirtv1.VirtualMachineInstance) *kubevirtv1.VirtualMachineInstance {
	v.Status.Conditions = append(v.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
		Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse,
		Reason: "GuestNotRunning", Message: "unsupported configuration: isa-applesmc device"})
	return v
}

// wasReady marks the machine Ready once, its agent answering as of
// agentSince (AgentReachable's transition) and last moving on at progress.
func wasReady(agentReachable metav1.ConditionStatus, agentSince, progress time.Time) func(*v1alpha1.MacOSMachine) {
	return func(m *v1alpha1.MacOSMachine) {
		m.Status.Conditions = []metav1.Condition{
			{Type: "Ready", Status: "True", Reason: "Ready", Message: "the guest agent reports Ready"},
			{Type: "GuestReady", Status: "True", Reason: "Ready", Message: "the guest agent reports Ready"},
			{Type: "AgentReachable", Status: agentReachable, Reason: "Unreachable", Message: "dial tcp: i/o timeout", LastTransitionTime: metav1.NewTime(agentSince)},
		}
		m.Status.Agent = &v1alpha1.AgentReport{Stage: "Ready", ObservedTime: &metav1.Time{Time: stuckAt}, LastProgressTime: &metav1.Time{Time: progress}}
	}
}

// notReadyImage is an image whose source the image controller did not find.
func notReadyImage() *v1alpha1.MacOSImage {
	img := &v1alpha1.MacOSImage{}
	img.Name = "sonoma"
	img.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "SourceNotFound",
		Message: "DataSource dockerios-images/sonoma-14-6 does not exist"}}
	return img
}

// stuckAt is when a stuck agent last computed its status.
var stuckAt = t0.Add(-time.Hour)

// A machine waiting for an image that does not exist names it, and says
// what makes it go on.
func TestDerive_ImageMissingNamesTheImage(t *testing.T) {
	class := testClass()
	class.Spec.ImageName = "sonoma"
	for name, tc := range map[string]struct {
		machine func(*v1alpha1.MacOSMachine)
		want    string
	}{
		"its class's image": {nil, "MacOSImage sonoma, which MacOSMachineClass standard names, does not exist: the machine waits, " +
			"and its system disk is made once the image is created (or delete the machine and claim one of a class whose image exists)"},
		"the image it names": {func(m *v1alpha1.MacOSMachine) { m.Spec.ImageName = "tahoe" },
			"MacOSImage tahoe, which the machine names, does not exist: the machine waits, and its system disk is made once the image is created"},
	} {
		t.Run(name, func(t *testing.T) {
			m := testMachine()
			if tc.machine != nil {
				tc.machine(m)
			}
			d := Derive(m, &Observed{Class: class, Job: job(batchv1.JobComplete)}, t0)
			c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.MachineSystemDiskReady)
			require.NotNil(t, c)
			assert.Equal(t, "False/"+ReasonImageMissing, string(c.Status)+"/"+c.Reason)
			assert.Equal(t, tc.want, c.Message)
		})
	}
}

func TestDerive_PhaseFromObservedObjects(t *testing.T) {
	ready := &api.Status{Stage: api.StageReady, AgentVersion: "v1", Disk: api.Disk{TotalBytes: 100, FreeBytes: 40}}
	booting := &api.Status{Stage: api.StageBooted, Reasons: []api.Reason{{Type: "SessionDown", Message: "no console user"}}}
	for _, tc := range []struct {
		name      string
		mut       func(*v1alpha1.MacOSMachine)
		o         Observed
		now       time.Time
		phase     v1alpha1.MacOSMachinePhase
		cond      string // type=Status/Reason that must hold
		failCause string
	}{
		{"no identity yet", func(m *v1alpha1.MacOSMachine) { m.Status.IdentityRef = nil }, Observed{Class: testClass()}, t0,
			v1alpha1.MachinePending, "BootdiskReady=False/WaitingForIdentity", ""},
		{"class missing", nil, Observed{}, t0, v1alpha1.MachinePending, "SystemDiskReady=False/ClassNotFound", ""},
		{"storage held back", nil, Observed{Class: testClass(), StorageHeldBack: "held back until X"}, t0,
			v1alpha1.MachinePending, "SystemDiskReady=False/StorageHeldBack", ""},
		{"bootdisk rendering", nil, Observed{Class: testClass(), Job: job("")}, t0,
			v1alpha1.MachineProvisioning, "BootdiskReady=False/Rendering", ""},
		{"bootdisk job failed keeps provisioning and the identity", nil,
			Observed{Class: testClass(), Job: job(batchv1.JobFailed), BootdiskRetry: "retry 2 in 20s (the identity is kept)"}, t0,
			v1alpha1.MachineProvisioning, "BootdiskReady=False/JobFailed", ""},
		{"bootdisk builder failed (retryable): its reason on the condition", nil,
			Observed{Class: testClass(), Job: job(batchv1.JobFailed), BootdiskRetry: "retry 2 in 20s (the identity is kept)",
				BootdiskExit: &BuilderExit{Code: bootdisk.ExitFailure, Message: "bootdisk: tool failed: sfdisk exited 1"}}, t0,
			v1alpha1.MachineProvisioning, "BootdiskReady=False/JobFailed", ""},
		{"bootdisk builder refused its input: failed at once", nil,
			Observed{Class: testClass(), Job: job(batchv1.JobFailed),
				BootdiskExit: &BuilderExit{Code: bootdisk.ExitInvalidInput, Message: "bootdisk: invalid identity: ROM does not match the MAC"}}, t0,
			v1alpha1.MachineFailed, "BootdiskReady=False/BootdiskInvalidInput", "BootdiskInvalidInput"},
		{"clone running", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.CloneInProgress)}, t0,
			v1alpha1.MachineProvisioning, "SystemDiskReady=False/Cloning", ""},
		{"clone waiting for an image that is not Ready says so", nil, Observed{Class: testClass(), Image: notReadyImage(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.CloneScheduled)}, t0,
			v1alpha1.MachineProvisioning, "SystemDiskReady=False/ImageNotReady", ""},
		{"no clone yet, image not Ready", nil, Observed{Class: testClass(), Image: notReadyImage(), Job: job(batchv1.JobComplete)}, t0,
			v1alpha1.MachineProvisioning, "SystemDiskReady=False/ImageNotReady", ""},
		{"clone failed fails the machine", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Failed)}, t0,
			v1alpha1.MachineFailed, "SystemDiskReady=False/CloneFailed", "CloneFailed"},
		{"disks ready, no OSK Secret", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			OSKSecretMissing: "Secret ci/dockerios-osk with Apple's SMC key does not exist"}, t0,
			v1alpha1.MachineStarting, "VirtualMachineRunning=False/OSKSecretMissing", ""},
		{"no bootdisk Job: the images' PodTemplate is missing", nil, Observed{Class: testClass(),
			ImagesUnavailable: "PodTemplate dockerios-system/dockerios-images, which names the images to run (--images-pod-template), does not exist"}, t0,
			v1alpha1.MachineProvisioning, "BootdiskReady=False/ImagesUnavailable", ""},
		{"disks ready, the images' PodTemplate is missing", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			ImagesUnavailable: "PodTemplate dockerios-system/dockerios-images, which names the images to run (--images-pod-template), does not exist"}, t0,
			v1alpha1.MachineStarting, "VirtualMachineRunning=False/ImagesUnavailable", ""},
		{"disks ready, VMI scheduling", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusStarting), VMI: vmi(kubevirtv1.Scheduling, t0)}, t0, v1alpha1.MachineStarting, "VirtualMachineRunning=False/Starting", ""},
		{"running, agent booting", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true, Agent: booting}, t0.Add(time.Minute),
			v1alpha1.MachineStarting, "GuestReady=False/Booted", ""},
		{"ready", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true, Agent: ready}, t0.Add(time.Minute),
			v1alpha1.MachineReady, "Ready=True/Ready", ""},
		{"ready, its finished bootdisk Job deleted since: still ready, not Provisioning", nil, Observed{Class: testClass(), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true, Agent: ready}, t0.Add(time.Minute),
			v1alpha1.MachineReady, "BootdiskReady=True/JobSucceeded", ""},
		{"ready, its system disk DataVolume deleted since: failed, to be replaced", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true, Agent: ready, SystemDiskLost: true}, t0.Add(time.Minute),
			v1alpha1.MachineFailed, "SystemDiskReady=False/SystemDiskLost", "SystemDiskLost"},
		{"ready, its bootdisk PVC deleted since: failed, to be replaced", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true, Agent: ready, BootdiskLost: true}, t0.Add(time.Minute),
			v1alpha1.MachineFailed, "BootdiskReady=False/BootdiskLost", "BootdiskLost"},
		{"ready, its agent token Secret deleted since: failed, to be replaced", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), TokenLost: true}, t0.Add(time.Minute),
			v1alpha1.MachineFailed, "AgentReachable=False/AgentTokenLost", "AgentTokenLost"},
		{"agent silent past startTimeout fails", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true, AgentErr: fmt.Errorf("%w: dial tcp: refused", client.ErrUnreachable)}, t0.Add(11 * time.Minute),
			v1alpha1.MachineFailed, "AgentReachable=False/Unreachable", "StartTimeout"},
		{"node lost with a GPU fails fast", nil, Observed{Class: func() *v1alpha1.MacOSMachineClass {
			c := testClass()
			c.Spec.HostDevices = []v1alpha1.HostDeviceSpec{{Name: "gpu", DeviceName: "nvidia.com/P40", GPU: true}}
			return c
		}(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded), VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true,
			AgentErr: client.ErrUnreachable, NodeNotReady: "Ready=Unknown NodeStatusUnknown: kubelet stopped posting"}, t0.Add(time.Minute),
			v1alpha1.MachineFailed, "Ready=False/NodeLost", "NodeLost"},
		{"node lost without passed-through devices: within the grace, nothing fails", wasReady(metav1.ConditionFalse, t0, t0), Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true, AgentErr: client.ErrUnreachable,
			NodeNotReady: "Ready=Unknown", NodeNotReadySince: t0}, t0.Add(4 * time.Minute),
			v1alpha1.MachineReady, "Ready=False/NodeNotReady", ""},
		{"node lost without passed-through devices: past the grace, failed", wasReady(metav1.ConditionFalse, t0, t0), Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true, AgentErr: client.ErrUnreachable,
			NodeNotReady: "Ready=Unknown", NodeNotReadySince: t0}, t0.Add(6 * time.Minute),
			v1alpha1.MachineFailed, "IdentityFenced=True/VirtualMachineMayRun", "NodeLost"},
		{"node lost, the VMI failed by KubeVirt (NodeUnresponsive): still the node's grace", wasReady(metav1.ConditionFalse, t0, t0), Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Failed, t0), NodeNotReady: "Ready=Unknown", NodeNotReadySince: t0}, t0.Add(4 * time.Minute),
			v1alpha1.MachineStarting, "Ready=False/NodeNotReady", ""},
		{"a class's zero grace fails at once", wasReady(metav1.ConditionFalse, t0, t0), Observed{Class: func() *v1alpha1.MacOSMachineClass {
			c := testClass()
			c.Spec.NodeLostGracePeriod = &metav1.Duration{}
			return c
		}(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true, AgentErr: client.ErrUnreachable,
			NodeNotReady: "Ready=Unknown", NodeNotReadySince: t0}, t0,
			v1alpha1.MachineFailed, "IdentityFenced=True/VirtualMachineMayRun", "NodeLost"},
		{"agent silent past startTimeout during a network fault waits", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true, AgentErr: client.ErrUnreachable, NetworkFault: true}, t0.Add(11 * time.Minute),
			v1alpha1.MachineStarting, "AgentReachable=False/Unreachable", ""},
		{"agent silent within startTimeout waits", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true, AgentErr: client.ErrUnreachable}, t0.Add(9 * time.Minute),
			v1alpha1.MachineStarting, "AgentReachable=False/Unreachable", ""},
		{"VMI never scheduled past startTimeout fails naming it", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusUnschedulable), VMI: unschedulable(vmi(kubevirtv1.Scheduling, t0))}, t0.Add(11 * time.Minute),
			v1alpha1.MachineFailed, "Ready=False/Unschedulable", "Unschedulable"},
		{"VMI not scheduled within startTimeout waits", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusUnschedulable), VMI: unschedulable(vmi(kubevirtv1.Scheduling, t0))}, t0.Add(9 * time.Minute),
			v1alpha1.MachineStarting, "VirtualMachineRunning=False/Starting", ""},
		{"VMI crash-looping past startTimeout fails naming it", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusCrashLoopBackOff), VMI: failedVMI(vmi(kubevirtv1.Failed, t0))}, t0.Add(11 * time.Minute),
			v1alpha1.MachineFailed, "Ready=False/CrashLoop", "CrashLoop"},
		{"VMI failed past startTimeout fails naming it", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusStopped), VMI: failedVMI(vmi(kubevirtv1.Failed, t0))}, t0.Add(11 * time.Minute),
			v1alpha1.MachineFailed, "Ready=False/VirtualMachineInstanceFailed", "VirtualMachineInstanceFailed"},
		{"no VMI past startTimeout fails", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusStopped)}, t0.Add(11 * time.Minute),
			v1alpha1.MachineFailed, "Ready=False/StartTimeout", "StartTimeout"},
		{"hung guest: agent silent past agentUnresponsiveTimeout", wasReady(metav1.ConditionFalse, t0, t0), Observed{Class: testClass(),
			Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded), VMI: vmi(kubevirtv1.Running, t0), VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning),
			AgentAsked: true, AgentErr: client.ErrUnreachable}, t0.Add(4 * time.Minute),
			v1alpha1.MachineReady, "Ready=False/AgentUnresponsive", ""},
		{"agent silent within agentUnresponsiveTimeout", wasReady(metav1.ConditionFalse, t0, t0), Observed{Class: testClass(),
			Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded), VMI: vmi(kubevirtv1.Running, t0), VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning),
			AgentAsked: true, AgentErr: client.ErrUnreachable}, t0.Add(2 * time.Minute),
			v1alpha1.MachineReady, "Ready=False/NoLongerReady", ""},
		{"agent silent past agentUnresponsiveTimeout during a network fault", wasReady(metav1.ConditionFalse, t0, t0), Observed{Class: testClass(),
			Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded), VMI: vmi(kubevirtv1.Running, t0), VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning),
			AgentAsked: true, AgentErr: client.ErrUnreachable, NetworkFault: true}, t0.Add(time.Hour),
			v1alpha1.MachineReady, "Ready=False/NoLongerReady", ""},
		{"hung guest: agent answers a status that stopped moving on", wasReady(metav1.ConditionTrue, t0, t0), Observed{Class: testClass(),
			Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded), VMI: vmi(kubevirtv1.Running, t0), VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning),
			AgentAsked: true, Agent: &api.Status{Stage: api.StageReady, ObservedAt: stuckAt}}, t0.Add(4 * time.Minute),
			v1alpha1.MachineReady, "Ready=False/AgentUnresponsive", ""},
		{"agent answers a status that moves on", wasReady(metav1.ConditionTrue, t0, t0), Observed{Class: testClass(),
			Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded), VMI: vmi(kubevirtv1.Running, t0), VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning),
			AgentAsked: true, Agent: &api.Status{Stage: api.StageReady, ObservedAt: t0.Add(4 * time.Minute)}}, t0.Add(4 * time.Minute),
			v1alpha1.MachineReady, "Ready=True/Ready", ""},
		{"impostor on the address", nil, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true, AgentErr: client.ErrWrongMachine}, t0.Add(time.Minute),
			v1alpha1.MachineStarting, "AgentReachable=False/WrongMachine", ""},
		{"was ready, agent unreachable: not failed, not guest's fault", func(m *v1alpha1.MacOSMachine) {
			meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: "Ready", Status: "True", Reason: "Ready"})
			meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: "GuestReady", Status: "True", Reason: "Ready", Message: "the guest agent reports Ready"})
		}, Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0), AgentAsked: true, AgentErr: client.ErrUnreachable}, t0.Add(time.Hour),
			v1alpha1.MachineReady, "GuestReady=True/Ready", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMachine()
			if tc.mut != nil {
				tc.mut(m)
			}
			d := Derive(m, &tc.o, tc.now)
			assert.Equal(t, tc.phase, d.Status.Phase)
			typ, rest, _ := strings.Cut(tc.cond, "=")
			status, reason, _ := strings.Cut(rest, "/")
			c := meta.FindStatusCondition(d.Status.Conditions, typ)
			if assert.NotNil(t, c, "condition %s", typ) {
				assert.Equal(t, metav1.ConditionStatus(status), c.Status, "%s: %s", typ, c.Message)
				assert.Equal(t, reason, c.Reason, "%s: %s", typ, c.Message)
				assert.NotEmpty(t, c.Message)
			}
			if tc.failCause == "" {
				assert.Nil(t, d.Fail)
				assert.Nil(t, meta.FindStatusCondition(d.Status.Conditions, v1alpha1.MachineIdentityFenced), "only a failing machine is fenced")
			} else if assert.NotNil(t, d.Fail) {
				assert.Equal(t, tc.failCause, d.Fail.Reason)
				r := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.MachineConditionReady)
				assert.Equal(t, tc.failCause, r.Reason, "Ready says why it failed")
				// Rule 9: a machine failing while a VMI of it exists keeps
				// its identity, fenced, until the VMI is gone.
				assert.Equal(t, tc.o.VMI != nil, Fenced(&v1alpha1.MacOSMachine{Status: d.Status}), "fenced exactly when a VMI exists")
			}
			if e := tc.o.BootdiskExit; e != nil {
				b := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.MachineBootdiskReady)
				assert.Contains(t, b.Message, e.Message, "the builder's own reason reaches the machine")
			}
			// Every condition on the way to Ready is present, with a message.
			for _, typ := range []string{"BootdiskReady", "SystemDiskReady", "VirtualMachineRunning", "AgentReachable", "GuestReady", "Ready"} {
				c := meta.FindStatusCondition(d.Status.Conditions, typ)
				if assert.NotNil(t, c, typ) {
					assert.NotEmpty(t, c.Message, typ)
				}
			}
		})
	}
}

func TestDerive_ReadyMachineReportsTheAgent(t *testing.T) {
	o := Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded), VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), VMI: vmi(kubevirtv1.Running, t0),
		AgentAsked: true, Agent: &api.Status{Stage: api.StageReady, AgentVersion: "v1.2", Disk: api.Disk{TotalBytes: 100, FreeBytes: 40}}}
	d := Derive(testMachine(), &o, t0.Add(time.Minute))
	assert.Equal(t, []v1alpha1.MachineAddress{{Type: v1alpha1.MachineAddressPod, Address: "10.0.0.7"}}, d.Status.Addresses)
	assert.Equal(t, "node-1", d.Status.NodeName)
	if assert.NotNil(t, d.Status.Agent) {
		assert.Equal(t, v1alpha1.AgentStageReady, d.Status.Agent.Stage)
		assert.Equal(t, "v1.2", d.Status.Agent.Version)
		assert.Equal(t, int64(40), *d.Status.Agent.DiskFreeBytes)
	}
}

func TestAgentReason(t *testing.T) {
	for err, want := range map[error]string{
		client.ErrUnreachable: ReasonAgentUnreachable, client.ErrUnauthenticated: ReasonAgentUnauth,
		client.ErrWrongMachine: ReasonWrongMachine, client.ErrBadResponse: ReasonBadResponse,
		errors.New("other"): ReasonAgentUnreachable,
	} {
		assert.Equal(t, want, agentReason(fmt.Errorf("wrapped: %w", err)))
	}
}

func TestStatusNews_TheAgentsTimesAlone(t *testing.T) {
	seen := metav1.NewTime(t0)
	old := v1alpha1.MacOSMachineStatus{Phase: v1alpha1.MachineReady, Agent: &v1alpha1.AgentReport{Stage: "Ready", LastSeenTime: &seen}}
	later := *old.DeepCopy()
	later.Agent.LastSeenTime = &metav1.Time{Time: t0.Add(30 * time.Second)}
	// The agent's status moved on: its times change with every poll.
	later.Agent.ObservedTime = &metav1.Time{Time: t0.Add(29 * time.Second)}
	later.Agent.LastProgressTime = &metav1.Time{Time: t0.Add(30 * time.Second)}
	assert.Equal(t, agentTimesOnly, statusNews(&old, &later))
	assert.Equal(t, nothingNew, statusNews(&old, old.DeepCopy()))
	later.Agent.Stage = "Degraded"
	assert.Equal(t, somethingNew, statusNews(&old, &later))
}

// Free disk space moves with every file the guest writes: alone, it waits
// for the refresh of the agent's times, as they do.
func TestStatusNews_FreeDiskSpaceAloneIsTheAgentsTimes(t *testing.T) {
	seen := metav1.NewTime(t0)
	old := v1alpha1.MacOSMachineStatus{Phase: v1alpha1.MachineReady, Agent: &v1alpha1.AgentReport{Stage: "Ready", LastSeenTime: &seen,
		DiskTotalBytes: ptr.To(int64(100 << 30)), DiskFreeBytes: ptr.To(int64(40 << 30))}}
	later := *old.DeepCopy()
	later.Agent.LastSeenTime = &metav1.Time{Time: t0.Add(30 * time.Second)}
	later.Agent.DiskFreeBytes = ptr.To(int64(40<<30 - 12345))
	assert.Equal(t, agentTimesOnly, statusNews(&old, &later))
	later.Agent.DiskTotalBytes = ptr.To(int64(200 << 30))
	assert.Equal(t, somethingNew, statusNews(&old, &later), "a resized disk is news")
	noDisk := *old.DeepCopy()
	noDisk.Agent.DiskTotalBytes, noDisk.Agent.DiskFreeBytes = nil, nil
	assert.Equal(t, somethingNew, statusNews(&noDisk, &later), "a first disk report is news")
}

// Only what a user acts on changes the status: KubeVirt's and CDI's steps
// in between say the same, so they cost no write.
func TestDerive_StepsThatChangeNothingWriteNothing(t *testing.T) {
	ready := func(o Observed) string {
		d := Derive(testMachine(), &o, t0)
		return fmt.Sprintf("%+v", d.Status.Conditions)
	}
	base := Observed{Class: testClass(), Job: job(batchv1.JobComplete)}
	withDV := func(phase cdiv1.DataVolumePhase, progress string) Observed {
		o := base
		o.DV = dv(phase)
		o.DV.Status.Progress = cdiv1.DataVolumeProgress(progress)
		return o
	}
	assert.Equal(t, ready(withDV("", "")), ready(withDV(cdiv1.CloneScheduled, "N/A")), "a clone scheduled is a clone not started")
	assert.Equal(t, ready(withDV(cdiv1.CloneInProgress, "31.2%")), ready(withDV(cdiv1.CloneInProgress, "38.9%")), "progress in steps of 10%")
	assert.NotEqual(t, ready(withDV(cdiv1.CloneInProgress, "38.9%")), ready(withDV(cdiv1.CloneInProgress, "41.0%")))

	withVMI := func(phase kubevirtv1.VirtualMachineInstancePhase) Observed {
		o := base
		o.DV = dv(cdiv1.Succeeded)
		o.VM = vm(t0, kubevirtv1.VirtualMachineStatusStarting)
		o.VMI = vmi(phase, t0)
		return o
	}
	assert.Equal(t, ready(withVMI(kubevirtv1.Pending)), ready(withVMI(kubevirtv1.Scheduling)))
	assert.Equal(t, ready(withVMI(kubevirtv1.Scheduling)), ready(withVMI(kubevirtv1.Scheduled)))
	// What holds a VMI up is still said.
	unsched := withVMI(kubevirtv1.Scheduling)
	unsched.VMI = unschedulable(unsched.VMI)
	assert.Contains(t, meta.FindStatusCondition(Derive(testMachine(), &unsched, t0).Status.Conditions, "VirtualMachineRunning").Message,
		"Insufficient devices.kubevirt.io/kvm")
}

// A hung machine says since when its agent has been silent, not for how
// long: a message that grows with every poll is a status write (an etcd
// write and a watch event to every client) at every poll for as long as
// the machine stays hung — for good, for a claimed one, which is left to
// its claim's owner. (A stuck agent that answers still refreshes
// lastSeenTime every agentSeenRefresh, as a Ready one does.)
func TestDerive_AHungMachineIsNotRewrittenWhileItStaysHung(t *testing.T) {
	for name, o := range map[string]Observed{
		"agent silent": {Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded), VMI: vmi(kubevirtv1.Running, t0),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), AgentAsked: true, AgentErr: client.ErrUnreachable},
		"agent stuck": {Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded), VMI: vmi(kubevirtv1.Running, t0),
			VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), AgentAsked: true, Agent: &api.Status{Stage: api.StageReady, ObservedAt: stuckAt},
			AgentSeen: t0.Add(4 * time.Minute)},
	} {
		t.Run(name, func(t *testing.T) {
			m := testMachine()
			wasReady(metav1.ConditionFalse, t0, t0)(m)
			if o.Agent != nil {
				wasReady(metav1.ConditionTrue, t0, t0)(m)
			}
			m.Status = Derive(m, &o, t0.Add(4*time.Minute)).Status
			require.True(t, Hung(m), "hung after agentUnresponsiveTimeout")
			since := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MachineConditionReady).Message
			assert.Contains(t, since, t0.UTC().Format(time.RFC3339), "says since when")

			o.AgentSeen = o.AgentSeen.Add(time.Hour)
			later := Derive(m, &o, t0.Add(64*time.Minute)).Status
			assert.Equal(t, since, meta.FindStatusCondition(later.Conditions, v1alpha1.MachineConditionReady).Message)
			if o.Agent == nil {
				assert.Equal(t, nothingNew, statusNews(&m.Status, &later), "an hour later, still silent: nothing new to write")
			}
		})
	}
}
