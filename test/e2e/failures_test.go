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

package e2e

// One test per failure rule of the design ("Failure rules" in
// docs/reference/machine-lifecycle.md), each checking what a user sees: the phase, the
// condition with its reason, and the Event.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/test/framework"
	"github.com/dockerios/dockerios/test/harness"
)

func (e *env) testFailureRules(t *testing.T) {
	t.Run("PoolExhaustedThenBootdiskJobFailsAndIsRetried", e.testPoolExhaustedAndBootdiskRetry)
	t.Run("BootdiskInvalidInputFailsAtOnce", e.testBootdiskInvalidInput)
	t.Run("CloneFailsHoldsTheStorageClassBack", e.testCloneFails)
	t.Run("HeldBackMachinesProbeWithOne", e.testStorageProbe)
	t.Run("AgentNeverReportsFailsAfterStartTimeout", e.testStartTimeout)
	t.Run("VMNeverScheduledFailsAfterStartTimeout", e.testUnschedulable)
	t.Run("GuestHangsOrCrashesIsReplaced", e.testGuestFaults)
	t.Run("HungAgentIsReplaced", e.testHungGuest)
	t.Run("NodeLostWithGPUFailsFast", e.testNodeLostWithGPU)
	t.Run("NodePartitionFencesTheIdentity", e.testNodePartition)
	t.Run("ClassEditsReachOnlyNewMachines", e.testClassEdit)
	t.Run("ControllerRestartsMidProvision", e.testControllerRestart)
	t.Run("MachineDeletedWhileClaimed", e.testDeletedWhileClaimed)
	t.Run("ManyAgentsUnreachableIsANetworkFault", e.testNetworkFault)
	t.Run("ChildrenDeletedUnderARunningMachine", e.testChildrenDeletedUnderRunningMachine)
	t.Run("ClassDeletedUnderItsMachines", e.testClassDeleted)
}

// Identity pool exhausted: Pending, PoolExhausted, an Event, no identity
// invented. Then, with an identity, a failing bootdisk Job is retried with
// backoff while the machine keeps its identity, and the failure is on
// BootdiskReady.
func (e *env) testPoolExhaustedAndBootdiskRetry(t *testing.T) {
	ns := e.namespace(t, "exhausted")
	e.fleet(t, "exhausted", 0, nil)
	m := e.createMachine(t, ns, "mac", "exhausted")
	pending := e.waitMachine(t, ns, "mac", 20*time.Second, "Pending with PoolExhausted", func(m *v1alpha1.MacOSMachine) bool {
		return m.Status.Phase == v1alpha1.MachinePending && condition(m, "IdentityAllocated").Reason == "PoolExhausted"
	})
	assert.Nil(t, pending.Status.IdentityRef)
	assert.Equal(t, metav1.ConditionFalse, condition(pending, "IdentityAllocated").Status)
	e.waitEvent(t, ns, "MacOSMachine", "mac", "PoolExhausted", "")
	assert.Empty(t, e.ownedObjects(t, ns, string(m.UID)), "nothing is made without an identity")

	e.h.FailBootdiskJobs(string(m.UID), 1)
	e.addIdentities(t, "exhausted", 1)
	failed := e.waitMachine(t, ns, "mac", 30*time.Second, "showing the bootdisk Job failure", func(m *v1alpha1.MacOSMachine) bool {
		return condition(m, "BootdiskReady").Reason == "JobFailed"
	})
	assert.Equal(t, v1alpha1.MachineProvisioning, failed.Status.Phase)
	require.NotNil(t, failed.Status.IdentityRef)
	held := failed.Status.IdentityRef.Name
	assert.Contains(t, condition(failed, "BootdiskReady").Message, "BackoffLimitExceeded")
	assert.Contains(t, condition(failed, "BootdiskReady").Message, "the builder exited 1: "+harness.DefaultJobFailure.Message,
		"the builder's own reason, from its pod's termination message")
	e.waitEvent(t, ns, "MacOSMachine", "mac", "BootdiskJobFailed", "retrying")

	ready := e.waitMachine(t, ns, "mac", 90*time.Second, "Ready after the retry", phaseIs(v1alpha1.MachineReady))
	assert.Equal(t, held, ready.Status.IdentityRef.Name, "the identity is kept through the retry")
	e.waitEvent(t, ns, "MacOSMachine", "mac", "BootdiskRetry", "attempt 2")
	pvc, err := e.kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), "mac-bootdisk", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "1", pvc.Annotations["dockerios.io/bootdisk-failures"], "the failure count lives on the PVC")
	assert.Equal(t, 1, e.ownedObjects(t, ns, string(m.UID))["Job"], "the failed Job is replaced, not kept beside")
}

// A builder that refuses its input (exit 2) fails its Job at once (the
// Job's podFailurePolicy) and the machine with it, saying what the builder
// said, and gives its identity back: the same input would fail again.
func (e *env) testBootdiskInvalidInput(t *testing.T) {
	ns := e.namespace(t, "invalid-input")
	e.fleet(t, "invalid", 1, nil)
	const said = "bootdisk: invalid identity: ROM does not match the MAC address"
	m := e.createMachine(t, ns, "mac", "invalid")
	e.h.FailBootdiskJobsWith(string(m.UID), 1, harness.JobFailure{ExitCode: 2, Message: said})
	failed := e.waitMachine(t, ns, "mac", 30*time.Second, "Failed", phaseIs(v1alpha1.MachineFailed))
	r := condition(failed, "Ready")
	assert.Equal(t, "BootdiskInvalidInput", r.Reason)
	assert.Contains(t, r.Message, said)
	assert.Equal(t, "BootdiskInvalidInput", condition(failed, "BootdiskReady").Reason)
	assert.Nil(t, failed.Status.IdentityRef, "a failed machine gives its identity back")
	e.waitEvent(t, ns, "MacOSMachine", "mac", "BootdiskInvalidInput", said)
	e.waitPoolCounts(t, "invalid", 1, 0)
	// Not retried: past the first retry's backoff (10 s from the Job's
	// failure), no second attempt is made or counted.
	time.Sleep(12 * time.Second)
	events, err := e.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=mac"})
	require.NoError(t, err)
	for _, ev := range events.Items {
		assert.NotEqual(t, "BootdiskRetry", ev.Reason, "invalid input is not retried: %s", ev.Message)
		assert.NotEqual(t, "BootdiskJobFailed", ev.Reason, "invalid input is not retried: %s", ev.Message)
	}
}

// After a failed clone, the machines held back do not all clone when the
// hold-back ends: one tries (the probe) while the others wait for its
// outcome; while the storage stays full, each failed probe doubles the
// wait; when it recovers, the probe's success releases the rest.
func (e *env) testStorageProbe(t *testing.T) {
	ns := e.namespace(t, "probe")
	e.fleet(t, "probe", 12, nil)
	e.h.FailClones("probe", true)
	defer e.h.FailClones("probe", false)
	e.createMachine(t, ns, "first", "probe")
	e.waitMachine(t, ns, "first", 30*time.Second, "Failed", phaseIs(v1alpha1.MachineFailed))
	failedBefore := e.h.Stats().DataVolumesFailed
	for i := range 10 {
		e.createMachine(t, ns, fmt.Sprintf("held-%d", i), "probe")
	}
	for i := range 10 {
		e.waitMachine(t, ns, fmt.Sprintf("held-%d", i), 20*time.Second, "held back", func(m *v1alpha1.MacOSMachine) bool {
			return condition(m, "SystemDiskReady").Reason == "StorageHeldBack"
		})
	}
	// The hold-back ends: one machine probes, fails, and the wait doubles.
	var class *v1alpha1.MacOSMachineClass
	framework.Eventually(t, storageHoldBack+60*time.Second, func() string {
		var err error
		class, err = e.client.DockeriosV1alpha1().MacOSMachineClasses().Get(context.Background(), "probe", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if h := class.Status.StorageHoldBack; h == nil || h.Failures < 2 {
			return fmt.Sprintf("no second failure yet: %+v", h)
		}
		return ""
	})
	h := class.Status.StorageHoldBack
	assert.Equal(t, int32(2), h.Failures)
	assert.Empty(t, h.Probe, "a new round has no probe until its hold-back ends")
	c := meta.FindStatusCondition(class.Status.Conditions, "StorageAvailable")
	require.NotNil(t, c)
	assert.Contains(t, c.Message, "2 time(s) in a row")
	assert.Contains(t, c.Message, (2 * storageHoldBack).String(), "the second wait is twice the first")
	assert.Equal(t, 1, e.h.Stats().DataVolumesFailed-failedBefore, "one clone tried while the storage stayed full, not ten")
	failed := 0
	for _, m := range e.machines(t, ns) {
		if m.Name != "first" && m.Status.Phase == v1alpha1.MachineFailed {
			failed++
		}
	}
	assert.Equal(t, 1, failed, "only the probe failed")

	// The storage recovers: the next probe succeeds and releases the rest.
	e.h.FailClones("probe", false)
	for i := range 10 {
		name := fmt.Sprintf("held-%d", i)
		if m := e.machine(t, ns, name); m.Status.Phase == v1alpha1.MachineFailed {
			continue
		}
		e.waitMachine(t, ns, name, 2*storageHoldBack+90*time.Second, "Ready", phaseIs(v1alpha1.MachineReady))
	}
	e.waitEvent(t, metav1.NamespaceDefault, "MacOSMachineClass", "probe", "StorageProbe", "tries StorageClass probe again")
}

// A failed clone fails the machine, releases its identity and holds new
// machines of that StorageClass back with a condition on the class, until
// a clone succeeds again.
func (e *env) testCloneFails(t *testing.T) {
	ns := e.namespace(t, "clonefail")
	e.fleet(t, "clonefail", 3, nil)
	e.h.FailClones("clonefail", true)
	e.createMachine(t, ns, "first", "clonefail")
	failed := e.waitMachine(t, ns, "first", 30*time.Second, "Failed", phaseIs(v1alpha1.MachineFailed))
	assert.Equal(t, "CloneFailed", condition(failed, "SystemDiskReady").Reason)
	assert.Equal(t, "CloneFailed", condition(failed, "Ready").Reason)
	assert.Contains(t, condition(failed, "SystemDiskReady").Message, "no space left on device")
	assert.Nil(t, failed.Status.IdentityRef, "a failed machine gives its identity back")
	e.waitEvent(t, ns, "MacOSMachine", "first", "CloneFailed", "machine failed")

	class, err := e.client.DockeriosV1alpha1().MacOSMachineClasses().Get(context.Background(), "clonefail", metav1.GetOptions{})
	require.NoError(t, err)
	c := meta.FindStatusCondition(class.Status.Conditions, "StorageAvailable")
	require.NotNil(t, c, "the class says why new machines wait")
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Contains(t, c.Message, "StorageClass clonefail")

	// A new machine is held back: no DataVolume, Pending, and it says why.
	second := e.createMachine(t, ns, "second", "clonefail")
	e.h.FailClones("clonefail", false) // storage recovers; the hold-back still applies
	held := e.waitMachine(t, ns, "second", 20*time.Second, "held back", func(m *v1alpha1.MacOSMachine) bool {
		return condition(m, "SystemDiskReady").Reason == "StorageHeldBack"
	})
	assert.Equal(t, v1alpha1.MachinePending, held.Status.Phase)
	assert.Zero(t, e.ownedObjects(t, ns, string(second.UID))["DataVolume"])

	// After the hold-back one clone is tried; it succeeds and clears it.
	e.waitMachine(t, ns, "second", storageHoldBack+90*time.Second, "Ready", phaseIs(v1alpha1.MachineReady))
	framework.Eventually(t, 20*time.Second, func() string {
		class, err := e.client.DockeriosV1alpha1().MacOSMachineClasses().Get(context.Background(), "clonefail", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if c := meta.FindStatusCondition(class.Status.Conditions, "StorageAvailable"); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("StorageAvailable still %+v", c)
		}
		return ""
	})
}

// The VM boots but the agent never reports: Failed after startTimeout,
// identity released, nothing running.
func (e *env) testStartTimeout(t *testing.T) {
	ns := e.namespace(t, "stall")
	e.fleet(t, "stall", 1, func(c *v1alpha1.MacOSMachineClass) {
		c.Spec.StartTimeout = &metav1.Duration{Duration: 10 * time.Second}
	})
	m := e.createMachine(t, ns, "mac", "stall")
	e.h.StallBoot(string(m.UID), true)
	defer e.h.StallBoot(string(m.UID), false)
	failed := e.waitMachine(t, ns, "mac", 60*time.Second, "Failed", phaseIs(v1alpha1.MachineFailed))
	r := condition(failed, "Ready")
	assert.Equal(t, "StartTimeout", r.Reason)
	assert.Contains(t, r.Message, "startTimeout 10s")
	e.assertReleasedOnceTheVMIsGone(t, ns, "mac")
	e.waitEvent(t, ns, "MacOSMachine", "mac", "StartTimeout", "did not report Ready")
	framework.Eventually(t, 20*time.Second, func() string {
		if n := e.ownedObjects(t, ns, string(m.UID))["VirtualMachine"]; n > 0 {
			return "the failed machine's VirtualMachine is still there"
		}
		return ""
	})
	e.waitPoolCounts(t, "stall", 1, 0)
}

// assertReleasedOnceTheVMIsGone checks that a machine that failed while a
// VMI of it existed kept its identity, fenced, until the VMI was gone, and
// then gave it back.
func (e *env) assertReleasedOnceTheVMIsGone(t *testing.T, ns, name string) {
	t.Helper()
	released := e.waitMachine(t, ns, name, 30*time.Second, "its identity given back", func(m *v1alpha1.MacOSMachine) bool {
		return m.Status.IdentityRef == nil
	})
	c := condition(released, "IdentityFenced")
	assert.Equal(t, metav1.ConditionFalse, c.Status, "fenced while its VMI existed, lifted once it was gone: %s", c.Message)
	assert.Equal(t, "VirtualMachineGone", c.Reason)
	assert.Equal(t, "Released", condition(released, "IdentityAllocated").Reason)
	assert.Contains(t, condition(released, "IdentityAllocated").Message, "confirmed gone")
}

// startTimeout bounds the whole way from the VirtualMachine's creation to
// Ready: a VM no node can take fails when it runs out, saying why, and gives
// its identity back.
func (e *env) testUnschedulable(t *testing.T) {
	ns := e.namespace(t, "unschedulable")
	e.fleet(t, "unsched", 1, func(c *v1alpha1.MacOSMachineClass) {
		c.Spec.StartTimeout = &metav1.Duration{Duration: 10 * time.Second}
	})
	m := e.createMachine(t, ns, "mac", "unsched")
	e.h.Unschedulable(string(m.UID), true)
	defer e.h.Unschedulable(string(m.UID), false)
	failed := e.waitMachine(t, ns, "mac", 90*time.Second, "Failed", phaseIs(v1alpha1.MachineFailed))
	r := condition(failed, "Ready")
	assert.Equal(t, "Unschedulable", r.Reason)
	assert.Contains(t, r.Message, "startTimeout 10s")
	assert.Contains(t, r.Message, "Insufficient devices.kubevirt.io/kvm", "the message says what the scheduler said")
	e.assertReleasedOnceTheVMIsGone(t, ns, "mac")
	e.waitEvent(t, ns, "MacOSMachine", "mac", "Unschedulable", "is not scheduled")
	e.waitPoolCounts(t, "unsched", 1, 0)
}

// A Ready machine whose agent stops answering while its VM keeps running
// (a hung guest) is not Ready after the class's agentUnresponsiveTimeout,
// says so with a Warning Event, and its pool disposes of it and replaces it.
func (e *env) testHungGuest(t *testing.T) {
	ns := e.namespace(t, "hung")
	e.fleet(t, "hung", 3, func(c *v1alpha1.MacOSMachineClass) {
		c.Spec.AgentUnresponsiveTimeout = &metav1.Duration{Duration: 4 * time.Second}
	})
	e.createPool(t, ns, "warm", v1alpha1.MacOSMachinePoolSpec{ClassName: "hung", Replicas: ptr.To[int32](1)})
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })
	victim := e.machines(t, ns)[0]
	require.Equal(t, v1alpha1.MachineReady, victim.Status.Phase)
	require.NoError(t, e.h.HangGuest(ns, victim.Status.VirtualMachineName))
	hung := time.Now()
	ev := e.waitEvent(t, ns, "MacOSMachine", victim.Name, "AgentUnresponsive", "agentUnresponsiveTimeout 4s")
	assert.Equal(t, "Warning", ev.Type)
	ev = e.waitEvent(t, ns, "MacOSMachine", victim.Name, "Disposed", "AgentUnresponsive")
	assert.Contains(t, ev.Message, "agentUnresponsiveTimeout 4s")
	t.Logf("hung guest disposed of %s after its agent stopped answering", time.Since(hung).Round(time.Millisecond))
	e.gone(t, ns, victim.Name, 60*time.Second)
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })
}

// A Ready machine whose guest degrades, or whose VM crashes, leaves its pool
// and is replaced; with preserveDiskOnFailure its disk is kept.
func (e *env) testGuestFaults(t *testing.T) {
	ns := e.namespace(t, "guest")
	e.fleet(t, "guest", 4, func(c *v1alpha1.MacOSMachineClass) { c.Spec.PreserveDiskOnFailure = true })
	e.createPool(t, ns, "warm", v1alpha1.MacOSMachinePoolSpec{ClassName: "guest", Replicas: ptr.To[int32](1)})

	for _, fault := range []struct {
		name   string
		inject func(ns, vmi string) error
		reason string
	}{
		{"degraded guest", e.h.DegradeGuest, "GuestReady=False"},
		{"crashed guest", e.h.CrashGuest, "VirtualMachineRunning=False"},
	} {
		t.Run(fault.name, func(t *testing.T) {
			e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })
			ms := e.machines(t, ns)
			var victim *v1alpha1.MacOSMachine
			for i := range ms {
				if ms[i].DeletionTimestamp == nil && ms[i].Status.Phase == v1alpha1.MachineReady {
					victim = &ms[i]
				}
			}
			require.NotNil(t, victim)
			require.NoError(t, fault.inject(ns, victim.Status.VirtualMachineName))
			e.gone(t, ns, victim.Name, 60*time.Second)
			e.waitEvent(t, ns, "MacOSMachine", victim.Name, "Disposed", "it was Ready and its guest is not")
			e.waitEvent(t, ns, "MacOSMachine", victim.Name, "DiskPreserved", "DataVolume")
			dv, err := e.dynamic(t).Resource(harness.DataVolumeGVR).Namespace(ns).Get(context.Background(), machine.NamesFor(victim).SystemDisk, metav1.GetOptions{})
			require.NoError(t, err, "the broken machine's disk is kept")
			assert.Equal(t, "true", dv.GetLabels()["dockerios.io/preserved-from-failed-machine"])
			assert.Empty(t, dv.GetOwnerReferences(), "nothing collects the preserved disk")
			e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })
		})
	}
}

// A node dies under a machine with a passed-through GPU: it fails at once
// (no waiting for the node) and its pool replaces it with another
// identity; the lost machine's identity stays fenced until its VM is
// confirmed gone — here, until the Node is deleted.
func (e *env) testNodeLostWithGPU(t *testing.T) {
	ns := e.namespace(t, "gpu")
	e.fleet(t, "gpu", 3, func(c *v1alpha1.MacOSMachineClass) {
		c.Spec.HostDevices = []v1alpha1.HostDeviceSpec{{Name: "gpu0", DeviceName: "nvidia.com/GP102GL_Tesla_P40", GPU: true}}
	})
	e.createPool(t, ns, "warm", v1alpha1.MacOSMachinePoolSpec{ClassName: "gpu", Replicas: ptr.To[int32](1)})
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })
	victim := e.machines(t, ns)[0]
	node := victim.Status.NodeName
	require.NotEmpty(t, node)
	require.NoError(t, e.h.LoseNode(node))
	defer func() { require.NoError(t, e.h.RestoreNode(node)) }()
	lost := time.Now()
	e.waitEvent(t, ns, "MacOSMachine", victim.Name, "NodeLost", "cannot move")
	t.Logf("machine failed %s after its node was lost", time.Since(lost).Round(time.Millisecond))
	assert.Less(t, time.Since(lost), 30*time.Second, "fails fast, without waiting for KubeVirt's node timeout")
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })
	for _, m := range e.machines(t, ns) {
		if m.UID != victim.UID {
			assert.NotEqual(t, node, m.Status.NodeName, "the replacement runs elsewhere")
			assert.NotEqual(t, victim.Status.IdentityRef.Name, m.Status.IdentityRef.Name, "the replacement takes another identity")
		}
	}
	e.assertFenced(t, ns, victim)
	require.NoError(t, e.kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}))
	e.gone(t, ns, victim.Name, 60*time.Second)
	e.assertIdentityLetGo(t, victim)
}

// assertFenced checks that the lost machine still holds its identity, says
// so on IdentityFenced, and keeps it for a while longer.
func (e *env) assertFenced(t *testing.T, ns string, victim v1alpha1.MacOSMachine) {
	t.Helper()
	ctx := context.Background()
	fenced := e.waitMachine(t, ns, victim.Name, 30*time.Second, "fenced", func(m *v1alpha1.MacOSMachine) bool {
		return condition(m, "IdentityFenced").Status == metav1.ConditionTrue
	})
	c := condition(fenced, "IdentityFenced")
	assert.Equal(t, "VirtualMachineMayRun", c.Reason)
	assert.Contains(t, c.Message, fenced.Status.IdentityRef.Name)
	assert.Contains(t, c.Message, victim.Status.NodeName)
	require.NotNil(t, fenced.Status.IdentityRef, "a fenced machine holds its identity")
	for range 3 {
		id, err := e.client.DockeriosV1alpha1().MacOSIdentities().Get(ctx, victim.Status.IdentityRef.Name, metav1.GetOptions{})
		require.NoError(t, err)
		if assert.NotNil(t, id.Status.Allocation, "identity %s let go while its VM may run", id.Name) {
			assert.Equal(t, string(victim.UID), id.Status.Allocation.MachineUID)
		}
		time.Sleep(time.Second)
	}
}

// assertIdentityLetGo checks that the gone machine's identity is no longer
// its.
func (e *env) assertIdentityLetGo(t *testing.T, victim v1alpha1.MacOSMachine) {
	t.Helper()
	framework.Eventually(t, 20*time.Second, func() string {
		id, err := e.client.DockeriosV1alpha1().MacOSIdentities().Get(context.Background(), victim.Status.IdentityRef.Name, metav1.GetOptions{})
		require.NoError(t, err)
		if a := id.Status.Allocation; a != nil && a.MachineUID == string(victim.UID) {
			return "identity " + id.Name + " still held by the gone machine"
		}
		return ""
	})
}

// Rule 9, the partition case: a node stops reporting while the VM on it
// may still run (its VMI stays Running; nothing confirms it stopped). The
// claimed machine keeps serving through the class's nodeLostGracePeriod,
// then fails and is replaced with another identity; the lost machine's
// identity is fenced — a new machine waits rather than take it — until the
// Node is deleted, and then it is given back.
func (e *env) testNodePartition(t *testing.T) {
	const grace = 6 * time.Second
	ns := e.namespace(t, "partition")
	e.fleet(t, "partition", 2, func(c *v1alpha1.MacOSMachineClass) {
		c.Spec.NodeLostGracePeriod = &metav1.Duration{Duration: grace}
	})
	ctx := context.Background()
	e.createPool(t, ns, "warm", v1alpha1.MacOSMachinePoolSpec{ClassName: "partition", Replicas: ptr.To[int32](1)})
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })
	e.createClaim(t, ns, "job", "warm")
	framework.Eventually(t, 20*time.Second, func() string {
		if e.boundClaims(t, ns)["job"] == "" {
			return "claim not bound"
		}
		return ""
	})
	victim := *e.machine(t, ns, e.boundClaims(t, ns)["job"])
	node := victim.Status.NodeName
	require.NotEmpty(t, node)

	require.NoError(t, e.h.LoseNode(node))
	defer func() { require.NoError(t, e.h.RestoreNode(node)) }()
	// Within the grace: not Ready, says why and until when, still Bound.
	waiting := e.waitMachine(t, ns, victim.Name, 20*time.Second, "NodeNotReady", func(m *v1alpha1.MacOSMachine) bool {
		return condition(m, "Ready").Reason == "NodeNotReady"
	})
	assert.Contains(t, condition(waiting, "Ready").Message, "nodeLostGracePeriod")
	assert.NotEqual(t, v1alpha1.MachineFailed, waiting.Status.Phase)
	claim, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).Get(ctx, "job", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.ClaimBound, claim.Status.Phase, "a node's blip does not take the workload's Mac")

	// Past the grace: failed, fenced, replaced with the other identity.
	e.waitEvent(t, ns, "MacOSMachine", victim.Name, "NodeLost", "nodeLostGracePeriod")
	e.assertFenced(t, ns, victim)
	framework.Eventually(t, 30*time.Second, func() string {
		c, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).Get(ctx, "job", metav1.GetOptions{})
		require.NoError(t, err)
		if c.Status.Phase != v1alpha1.ClaimLost {
			return "claim " + string(c.Status.Phase)
		}
		return ""
	})
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })
	// The one identity left is the fenced one: a new machine waits for it.
	e.createMachine(t, ns, "next", "partition")
	e.waitMachine(t, ns, "next", 20*time.Second, "Pending with PoolExhausted", func(m *v1alpha1.MacOSMachine) bool {
		return condition(m, "IdentityAllocated").Reason == "PoolExhausted"
	})
	e.assertFenced(t, ns, victim)
	assert.Nil(t, e.machine(t, ns, "next").Status.IdentityRef, "the fenced identity is not reused while the node exists")

	// A person who knows the host is off deletes the Node: the launcher
	// pod goes with it, KubeVirt lets go of the VMI, the teardown ends and
	// the identity goes to the machine waiting for it.
	require.NoError(t, e.kube.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}))
	e.gone(t, ns, victim.Name, 60*time.Second)
	next := e.waitMachine(t, ns, "next", 30*time.Second, "holding the freed identity", func(m *v1alpha1.MacOSMachine) bool {
		return m.Status.IdentityRef != nil
	})
	assert.Equal(t, victim.Status.IdentityRef.Name, next.Status.IdentityRef.Name)
}

// Rule 10: a machine is made from its class as it was when the machine was
// created. Editing the class's display and CPU while machines run changes
// nothing of theirs — no new bootdisk Job (its name hashes the display), no
// VM change, no step back from Ready — and a machine made afterwards gets
// the new shape.
func (e *env) testClassEdit(t *testing.T) {
	ns := e.namespace(t, "classedit")
	e.fleet(t, "classedit", 3, nil)
	ctx := context.Background()
	e.createPool(t, ns, "warm", v1alpha1.MacOSMachinePoolSpec{ClassName: "classedit", Replicas: ptr.To[int32](2)})
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 2 })

	type made struct {
		jobs      []string // name/uid
		vmGen     int64
		cores     int64
		snapWidth int32
	}
	madeOf := func(m *v1alpha1.MacOSMachine) made {
		jobs, err := e.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: machine.MachineUIDLabel + "=" + string(m.UID)})
		require.NoError(t, err)
		var out made
		for _, j := range jobs.Items {
			out.jobs = append(out.jobs, j.Name+"/"+string(j.UID))
		}
		vm, err := e.dynamic(t).Resource(harness.VirtualMachineGVR).Namespace(ns).Get(ctx, m.Status.VirtualMachineName, metav1.GetOptions{})
		require.NoError(t, err)
		out.vmGen = vm.GetGeneration()
		out.cores, _, _ = unstructured.NestedInt64(vm.Object, "spec", "template", "spec", "domain", "cpu", "cores")
		if s := m.Status.ClassSnapshot; s != nil {
			out.snapWidth = s.Spec.Display.Width
		}
		return out
	}
	before := map[string]made{}
	for _, m := range e.machines(t, ns) {
		before[m.Name] = madeOf(&m)
		require.Equal(t, int32(1920), before[m.Name].snapWidth, "machine %s records its class at create", m.Name)
		require.Len(t, before[m.Name].jobs, 1)
	}

	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := e.client.DockeriosV1alpha1().MacOSMachineClasses().Get(ctx, "classedit", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Spec.Display = v1alpha1.DisplaySpec{Width: 1280, Height: 800}
		c.Spec.CPU.Cores = 8
		_, err = e.client.DockeriosV1alpha1().MacOSMachineClasses().Update(ctx, c, metav1.UpdateOptions{})
		return err
	}))
	// The edit brings every machine of the class back to the controller;
	// for a while after it, nothing of theirs may change.
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		for name, was := range before {
			m := e.machine(t, ns, name)
			require.Equal(t, v1alpha1.MachineReady, m.Status.Phase, "machine %s left Ready after its class was edited: %s", name, describe(m))
			require.Equal(t, metav1.ConditionTrue, condition(m, "Ready").Status, "machine %s: %s", name, describe(m))
			require.Equal(t, was, madeOf(m), "machine %s changed after its class was edited", name)
		}
	}

	e.createMachine(t, ns, "fresh", "classedit")
	fresh := e.waitMachine(t, ns, "fresh", 90*time.Second, "Ready", phaseIs(v1alpha1.MachineReady))
	got := madeOf(fresh)
	assert.Equal(t, int32(1280), got.snapWidth, "a machine made after the edit records the class as edited")
	assert.Equal(t, int64(8), got.cores, "and is made from it")
	for name, was := range before {
		assert.Equal(t, int64(4), was.cores, "machine %s", name)
		assert.NotEqual(t, strings.SplitN(was.jobs[0], "/", 2)[0], strings.SplitN(got.jobs[0], "/", 2)[0], "the new display renders its own bootdisk")
	}
}

// The controller is killed while machines provision; after it restarts
// every machine converges with exactly one of each object.
func (e *env) testControllerRestart(t *testing.T) {
	ns := e.namespace(t, "restart")
	e.fleet(t, "restart", 6, nil)
	var uids []string
	for i := range 6 {
		uids = append(uids, string(e.createMachine(t, ns, fmt.Sprintf("mac-%d", i), "restart").UID))
	}
	time.Sleep(300 * time.Millisecond)
	e.ctrl.Kill(t)
	time.Sleep(time.Second)
	e.ctrl.Start(t)
	for i := range 6 {
		e.waitMachine(t, ns, fmt.Sprintf("mac-%d", i), 2*time.Minute, "Ready", phaseIs(v1alpha1.MachineReady))
	}
	for _, uid := range uids {
		assert.Equal(t, map[string]int{"Secret": 2, "PersistentVolumeClaim": 1, "Job": 1, "DataVolume": 1, "VirtualMachine": 1, "VirtualMachineInstance": 1},
			e.ownedObjects(t, ns, uid), "machine %s", uid)
	}
}

// Deleting a bound machine: its claim becomes Lost (in the same write that
// removes the machine), the machine is torn down in order, its identity
// comes back.
func (e *env) testDeletedWhileClaimed(t *testing.T) {
	ns := e.namespace(t, "claimed")
	e.fleet(t, "claimed", 2, nil)
	ctx := context.Background()
	e.createPool(t, ns, "warm", v1alpha1.MacOSMachinePoolSpec{ClassName: "claimed", Replicas: ptr.To[int32](1), MaxMachines: ptr.To[int32](1)})
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })
	e.createClaim(t, ns, "job", "warm")
	framework.Eventually(t, 20*time.Second, func() string {
		if len(e.boundClaims(t, ns)) != 1 {
			return "claim not bound"
		}
		return ""
	})
	name := e.boundClaims(t, ns)["job"]
	m := e.machine(t, ns, name)
	log, err := e.h.RecordTeardown(harness.Teardown{Namespace: ns, Machine: name, MachineUID: string(m.UID), Claim: "job", Identity: m.Status.IdentityRef.Name})
	require.NoError(t, err)
	require.NoError(t, e.client.DockeriosV1alpha1().MacOSMachines(ns).Delete(ctx, name, metav1.DeleteOptions{}))
	e.gone(t, ns, name, 60*time.Second)
	framework.Eventually(t, 10*time.Second, func() string {
		if log.At("identity released") == 0 {
			return fmt.Sprintf("the identity's release not seen yet: %v", log.Writes())
		}
		return ""
	})
	log.Stop()
	e.assertTeardownOrder(t, log, true)
	claim, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).Get(ctx, "job", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.ClaimLost, claim.Status.Phase)
	if c := meta.FindStatusCondition(claim.Status.Conditions, "Bound"); assert.NotNil(t, c) {
		assert.Equal(t, "MachineGone", c.Reason)
	}
	assert.Empty(t, e.ownedObjects(t, ns, string(m.UID)))
	id, err := e.client.DockeriosV1alpha1().MacOSIdentities().Get(ctx, m.Status.IdentityRef.Name, metav1.GetOptions{})
	require.NoError(t, err)
	if a := id.Status.Allocation; a != nil {
		// The pool's replacement may already have taken it.
		assert.NotEqual(t, string(m.UID), a.MachineUID, "identity %s still held by the deleted machine", id.Name)
	}
}

// assertTeardownOrder checks, on etcd's own order of the writes, that a
// machine's teardown went as the controller promises: its claim Lost in
// the write that marks the machine (when claimed), the VirtualMachine
// halted, then deleted, and only then its VMI, disks, Job and Secrets;
// last, in one write, the machine removed and its identity released.
func (e *env) assertTeardownOrder(t *testing.T, log *harness.WriteLog, claimed bool) {
	t.Helper()
	writes := log.Writes()
	t.Logf("teardown writes, in etcd's order: %v", writes)
	marked, halted, vmGone := log.At("machine marked for deletion"), log.At("VirtualMachine halted"), log.At("VirtualMachine deleted")
	removed, released := log.At("machine removed"), log.At("identity released")
	require.NotZero(t, marked, "%v", writes)
	require.NotZero(t, vmGone, "%v", writes)
	require.NotZero(t, removed, "%v", writes)
	if claimed {
		assert.Equal(t, marked, log.At("claim Lost"), "the claim is Lost in the write that starts the teardown: %v", writes)
	}
	if halted != 0 {
		assert.Less(t, marked, halted, "%v", writes)
		assert.Less(t, halted, vmGone, "halted before deleted: %v", writes)
	}
	assert.Equal(t, removed, released, "the identity is released in the write that removes the machine: %v", writes)
	for _, w := range writes {
		switch {
		case w.What == "machine marked for deletion" || w.What == "claim Lost" || w.What == "VirtualMachine halted" ||
			w.What == "VirtualMachine deleted" || w.What == "machine removed" || w.What == "identity released":
		case strings.HasPrefix(w.What, "VirtualMachineInstance"):
			assert.Less(t, marked, w.Revision, "%s after the teardown started: %v", w.What, writes)
			assert.Less(t, w.Revision, removed, "%s before the machine is removed: %v", w.What, writes)
		default: // DataVolume, Job, PVC, Secrets
			assert.Less(t, vmGone, w.Revision, "%s only once the VirtualMachine is gone: %v", w.What, writes)
			assert.Less(t, w.Revision, removed, "%s before the machine is removed: %v", w.What, writes)
		}
	}
}

// Many agents unreachable at once is a fault of the agent network, not of
// the guests: while it lasts no machine is failed for startTimeout, none is
// declared hung, and pools replace nothing. The class's timeouts are shorter
// than the fault, and a machine is still Starting when it begins, so that
// without the guard (FleetWatch) this test fails: the Ready machines would
// be replaced as hung and the Starting one failed for startTimeout.
func (e *env) testNetworkFault(t *testing.T) {
	ns := e.namespace(t, "netfault")
	e.fleet(t, "netfault", 5, func(c *v1alpha1.MacOSMachineClass) {
		c.Spec.StartTimeout = &metav1.Duration{Duration: 60 * time.Second}
		c.Spec.AgentUnresponsiveTimeout = &metav1.Duration{Duration: 40 * time.Second}
	})
	e.createPool(t, ns, "warm", v1alpha1.MacOSMachinePoolSpec{ClassName: "netfault", Replicas: ptr.To[int32](4)})
	e.waitPool(t, ns, "warm", 2*time.Minute, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 4 })
	before := map[string]bool{}
	for _, m := range e.machines(t, ns) {
		before[m.Name] = true
	}
	// One more machine, caught Starting by the fault: its VM runs, its
	// agent has not reported Ready yet.
	starting := e.createMachine(t, ns, "starting", "netfault")
	e.h.StallBoot(string(starting.UID), true)
	e.waitMachine(t, ns, "starting", 60*time.Second, "running", func(m *v1alpha1.MacOSMachine) bool {
		return condition(m, "VirtualMachineRunning").Status == metav1.ConditionTrue
	})
	vmRunning := time.Now()
	e.h.PartitionAgents(true)
	defer e.h.PartitionAgents(false)
	e.h.StallBoot(string(starting.UID), false) // its agent starts, partitioned
	partitioned := time.Now()
	for name := range before {
		// Ready machines' agents are asked every 30 s.
		m := e.waitMachine(t, ns, name, 75*time.Second, "unreachable", func(m *v1alpha1.MacOSMachine) bool {
			return condition(m, "AgentReachable").Reason == "Unreachable"
		})
		assert.Equal(t, metav1.ConditionTrue, condition(m, "GuestReady").Status, "an unreachable agent says nothing about the guest")
		assert.Equal(t, metav1.ConditionFalse, condition(m, "Ready").Status)
	}
	for name := range before {
		e.waitEvent(t, ns, "MacOSMachine", name, "AgentNetworkFault", "network fault")
	}
	assert.Contains(t, e.metrics(t), "dockerios_agent_network_fault 1")
	// Past both timeouts: the Ready machines' agentUnresponsiveTimeout
	// (40 s from their agents going silent) and the Starting machine's
	// startTimeout (60 s from its VM's creation). Still nothing terminated.
	time.Sleep(max(time.Until(partitioned.Add(50*time.Second)), time.Until(vmRunning.Add(70*time.Second))))
	for _, m := range e.machines(t, ns) {
		assert.True(t, before[m.Name] || m.Name == "starting", "machine %s appeared during the fault", m.Name)
		assert.Nil(t, m.DeletionTimestamp, "machine %s terminated during the fault", m.Name)
		assert.NotEqual(t, v1alpha1.MachineFailed, m.Status.Phase, "%s: %s", m.Name, condition(&m, "Ready").Message)
		assert.NotEqual(t, "AgentUnresponsive", condition(&m, "Ready").Reason, m.Name)
	}

	e.h.PartitionAgents(false)
	e.waitPool(t, ns, "warm", 60*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 4 })
	e.waitMachine(t, ns, "starting", 60*time.Second, "Ready once its agent answers", phaseIs(v1alpha1.MachineReady))
	framework.Eventually(t, 90*time.Second, func() string {
		if !strings.Contains(e.metrics(t), "dockerios_agent_network_fault 0") {
			return "fault metric not back to 0"
		}
		return ""
	})
}

func (e *env) metrics(t testing.TB) string {
	t.Helper()
	resp, err := http.Get(e.ctrl.HealthURL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// Objects of a running machine deleted by hand (or by a cleanup of
// finished Jobs): its finished bootdisk Job takes nothing from it — the
// builder is not run again over the disk the guest boots from, and the
// machine stays Ready; its system disk DataVolume is its disk going — it is
// not cloned again under the running guest: the machine fails,
// SystemDiskLost, and its pool replaces it. The agent token's Secret fails
// it too (AgentTokenLost): no answer of its agent can be proven its own.
func (e *env) testChildrenDeletedUnderRunningMachine(t *testing.T) {
	ctx := context.Background()
	ns := e.namespace(t, "children")
	e.fleet(t, "children", 3, nil)
	e.createPool(t, ns, "warm", v1alpha1.MacOSMachinePoolSpec{ClassName: "children", Replicas: ptr.To[int32](1)})
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })
	victim := e.machines(t, ns)[0]
	byUID := metav1.ListOptions{LabelSelector: machine.MachineUIDLabel + "=" + string(victim.UID)}

	jobs, err := e.kube.BatchV1().Jobs(ns).List(ctx, byUID)
	require.NoError(t, err)
	require.Len(t, jobs.Items, 1)
	require.NoError(t, e.kube.BatchV1().Jobs(ns).Delete(ctx, jobs.Items[0].Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
	framework.Consistently(t, 5*time.Second, func() string {
		m, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		require.NoError(t, err)
		if m.Status.Phase != v1alpha1.MachineReady {
			return fmt.Sprintf("a Ready machine whose finished bootdisk Job was deleted is %s", m.Status.Phase)
		}
		jobs, err := e.kube.BatchV1().Jobs(ns).List(ctx, byUID)
		require.NoError(t, err)
		for _, j := range jobs.Items {
			if j.DeletionTimestamp == nil {
				return fmt.Sprintf("bootdisk Job %s made again under the running guest", j.Name)
			}
		}
		return ""
	})

	dv := machine.NamesFor(&victim).SystemDisk
	require.NoError(t, e.dynamic(t).Resource(harness.DataVolumeGVR).Namespace(ns).Delete(ctx, dv, metav1.DeleteOptions{}))
	ev := e.waitEvent(t, ns, "MacOSMachine", victim.Name, machine.ReasonSystemDiskLost, dv)
	assert.Equal(t, "Warning", ev.Type)
	e.gone(t, ns, victim.Name, 60*time.Second)
	dvs, err := e.dynamic(t).Resource(harness.DataVolumeGVR).Namespace(ns).List(ctx, byUID)
	require.NoError(t, err)
	assert.Empty(t, dvs.Items, "a system disk cloned again for the lost machine")
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })

	// The agent token's Secret: no answer can be proven the machine's
	// again, and a new token would never match the guest's.
	var next v1alpha1.MacOSMachine
	for _, m := range e.machines(t, ns) {
		if m.DeletionTimestamp == nil && m.Status.Phase == v1alpha1.MachineReady {
			next = m
		}
	}
	require.NotEmpty(t, next.Name)
	token := machine.NamesFor(&next).TokenSecret
	require.NoError(t, e.kube.CoreV1().Secrets(ns).Delete(ctx, token, metav1.DeleteOptions{}))
	ev = e.waitEvent(t, ns, "MacOSMachine", next.Name, machine.ReasonAgentTokenLost, token)
	assert.Equal(t, "Warning", ev.Type)
	e.gone(t, ns, next.Name, 60*time.Second)
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })
}

// A class deleted while machines made of it run takes nothing from them:
// they are made from their snapshot of it (rule 10), so they stay Ready,
// and are taken apart in order when they go.
func (e *env) testClassDeleted(t *testing.T) {
	ctx := context.Background()
	ns := e.namespace(t, "classgone")
	e.fleet(t, "classgone", 2, nil)
	e.createPool(t, ns, "warm", v1alpha1.MacOSMachinePoolSpec{ClassName: "classgone", Replicas: ptr.To[int32](1)})
	e.waitPool(t, ns, "warm", 90*time.Second, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })
	m := e.machines(t, ns)[0]

	require.NoError(t, e.client.DockeriosV1alpha1().MacOSMachineClasses().Delete(ctx, "classgone", metav1.DeleteOptions{}))
	framework.Consistently(t, 5*time.Second, func() string {
		got, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Get(ctx, m.Name, metav1.GetOptions{})
		require.NoError(t, err)
		if got.Status.Phase != v1alpha1.MachineReady || !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.MachineConditionReady) {
			return fmt.Sprintf("a running machine whose class was deleted is %s: %v", got.Status.Phase, got.Status.Conditions)
		}
		return ""
	})

	require.NoError(t, e.client.DockeriosV1alpha1().MacOSMachines(ns).Delete(ctx, m.Name, metav1.DeleteOptions{}))
	e.gone(t, ns, m.Name, 60*time.Second)
	vms, err := e.dynamic(t).Resource(harness.VirtualMachineGVR).Namespace(ns).List(ctx, metav1.ListOptions{
		LabelSelector: machine.MachineUIDLabel + "=" + string(m.UID)})
	require.NoError(t, err)
	assert.Empty(t, vms.Items, "its VirtualMachine is taken apart")
}
