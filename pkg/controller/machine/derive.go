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
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/client"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/bootdisk"
)

// Reasons of the machine's conditions. They are the contract users and
// alerts read; keep them stable.
const (
	ReasonJobSucceeded = "JobSucceeded"
	ReasonJobRunning   = "Rendering"
	ReasonJobFailed    = "JobFailed"
	// ReasonBootdiskInvalidInput fails a machine whose bootdisk builder
	// exited 2 (its input is invalid): retrying cannot help.
	ReasonBootdiskInvalidInput = "BootdiskInvalidInput"
	ReasonWaitingIdentity      = "WaitingForIdentity"
	ReasonCloned               = "Cloned"
	ReasonCloning              = "Cloning"
	ReasonCloneFailed          = "CloneFailed"
	ReasonStorageHeldBack      = "StorageHeldBack"
	ReasonWaitingForDisks      = "WaitingForDisks"
	ReasonVMIRunning           = "Running"
	ReasonVMIStarting          = "Starting"
	ReasonVMIStopped           = "NotRunning"
	ReasonOSKSecretMissing     = "OSKSecretMissing"
	// ReasonImagesUnavailable: the PodTemplate naming the images to run
	// (--images-pod-template) is missing or incomplete; the bootdisk Job
	// or the VirtualMachine is made once it is fixed.
	ReasonImagesUnavailable = "ImagesUnavailable"
	ReasonAgentAnswered     = "Answered"
	ReasonAgentUnreachable  = "Unreachable"
	ReasonAgentUnauth       = "Unauthenticated"
	ReasonWrongMachine      = "WrongMachine"
	ReasonBadResponse       = "BadResponse"
	ReasonNoAddress         = "NoAddress"
	ReasonNotStarted        = "NotStarted"
	ReasonStartTimeout      = "StartTimeout"
	// ReasonUnschedulable, ReasonVMIFailed and ReasonCrashLoop fail a
	// machine whose startTimeout ran out before its VM ever ran, naming
	// what held it up.
	ReasonUnschedulable = "Unschedulable"
	ReasonVMIFailed     = "VirtualMachineInstanceFailed"
	ReasonCrashLoop     = "CrashLoop"
	// ReasonAgentUnresponsive marks a machine that was Ready whose agent
	// stopped answering, or stopped moving on, for the class's
	// agentUnresponsiveTimeout while its VM runs: a hung guest.
	ReasonAgentUnresponsive = "AgentUnresponsive"
	ReasonClassMissing      = "ClassNotFound"
	ReasonImageMissing      = "ImageNotFound"
	// ReasonImageNotReady: the system disk waits for a MacOSImage whose
	// source is not Ready (its Ready condition False, quoted).
	ReasonImageNotReady = "ImageNotReady"
	ReasonMachineReady  = "Ready"
	ReasonNotReady      = "NotReady"
	// ReasonNoLongerReady marks a machine that was Ready once: such a
	// machine is not subject to startTimeout any more; the pool replaces
	// it instead (failure rule "guest panics or hangs").
	ReasonNoLongerReady = "NoLongerReady"
	// ReasonNodeLost fails a machine whose node stopped being Ready for
	// longer than its class's nodeLostGracePeriod, or at once when it has
	// passed-through devices (it cannot move, so waiting for the node only
	// delays its replacement). Its identity stays fenced meanwhile.
	ReasonNodeLost = "NodeLost"
	// ReasonNodeNotReady: the machine's node is not Ready and the class's
	// nodeLostGracePeriod has not run out; nothing is failed yet.
	ReasonNodeNotReady = "NodeNotReady"
	// ReasonVMMayRun (IdentityFenced True) and ReasonVMGone (False): a
	// failed or deleted machine keeps its identity while its
	// VirtualMachineInstance exists, which KubeVirt removes only once its
	// launcher pod is gone, and gives it back once it does not.
	ReasonVMMayRun = "VirtualMachineMayRun"
	ReasonVMGone   = "VirtualMachineGone"
)

// ReasonSystemDiskLost: the system disk's DataVolume went while the
// VirtualMachine made from it exists. The guest runs from a disk that is
// going and cannot start again, and a clone made again under the name
// would not be the disk it runs from: the machine fails, to be replaced.
const ReasonSystemDiskLost = "SystemDiskLost"

// ReasonBootdiskLost: the bootdisk PVC went while the VirtualMachine that
// boots from it exists: the machine fails, to be replaced; a PVC made
// again would be empty, and rendering it again would be a new bootdisk
// under the guest.
const ReasonBootdiskLost = "BootdiskLost"

// ReasonAgentTokenLost: the agent token's Secret went while the
// VirtualMachine whose bootdisk carries the token exists. No answer of the
// agent can be proven this machine's again: the machine fails, to be
// replaced; a new token would never match the guest's.
const ReasonAgentTokenLost = "AgentTokenLost"

// Observed is everything a reconcile saw of a machine's world. Nil means
// absent.
type Observed struct {
	// Class is the class the machine is made from (madeOf): its snapshot
	// of the class's spec, with the class's status while it exists.
	Class    *v1alpha1.MacOSMachineClass
	Image    *v1alpha1.MacOSImage
	Identity *v1alpha1.MacOSIdentity
	Secret   *corev1.Secret
	PVC      *corev1.PersistentVolumeClaim
	Job      *batchv1.Job
	DV       *cdiv1.DataVolume
	VM       *kubevirtv1.VirtualMachine
	VMI      *kubevirtv1.VirtualMachineInstance

	// ClassGone says the class object was deleted: Class is the machine's
	// snapshot alone, and there is no class status to write.
	ClassGone bool
	// SystemDiskLost, BootdiskLost and TokenLost say the system disk's
	// DataVolume, the bootdisk PVC or the agent token's Secret is gone while
	// the VirtualMachine exists (lost): the VM is made only once both disks
	// are ready, the bootdisk carrying the token to the guest's agent. The
	// guest cannot start again, or no answer of its agent can be proven
	// this machine's again; none is made anew (a clone that is not the disk
	// the guest runs from, an empty PVC, a token the guest never had).
	SystemDiskLost, BootdiskLost, TokenLost bool

	// StorageHeldBack says why new clones into the class's StorageClass
	// are held back (the hold-back runs, or another machine probes).
	StorageHeldBack string
	// StorageProbe says the hold-back is over and nobody probes the
	// storage: this machine may, if it claims the probe first.
	StorageProbe bool
	// BootdiskRetry describes a failed bootdisk Job waiting for its retry.
	BootdiskRetry string
	// BootdiskExit is how the builder of a failed bootdisk Job ended,
	// when its pod says.
	BootdiskExit *BuilderExit

	// Agent is the guest agent's last answer (AgentErr why it gave none),
	// heard at AgentSeen, when it was asked (AgentAsked); both nil while
	// the answer is not in yet.
	Agent      *api.Status
	AgentErr   error
	AgentAsked bool
	AgentSeen  time.Time
	// AgentUnmoved: the answer before this one, heard by this process,
	// had the same observedAt (ProbeResult.Unmoved).
	AgentUnmoved bool

	// NodeNotReady is set when the VMI's node is not Ready (its message),
	// since NodeNotReadySince by the node's own record.
	NodeNotReady      string
	NodeNotReadySince time.Time
	// OSKSecretMissing says why the VirtualMachine is not started: the
	// Secret with Apple's SMC key is not in the machine's namespace.
	OSKSecretMissing string
	// ImagesUnavailable says why the bootdisk Job (while there is none) or
	// the VirtualMachine (once the disks are ready) is not made: the images
	// to run cannot be read (containerimages.UnavailableError).
	ImagesUnavailable string

	// ReleaseUnsupported says why the class's SMBIOS model cannot boot the
	// image's release (macosreleases.Supports); read while neither the
	// system disk nor the VM exists. Nothing is made meanwhile.
	ReleaseUnsupported string

	// An install session's (spec.purpose Install): its recovery disk;
	// what making it waits for ("" once it can be made); and the image
	// promoting it, if any (nil when none).
	RecoveryDV       *cdiv1.DataVolume
	RecoveryNotReady string
	Promotion        *Promotion

	// NetworkFault: many agents are unreachable at once (FleetWatch), so
	// an agent not answering says nothing about this guest; startTimeout
	// does not fail machines meanwhile.
	NetworkFault bool

	// ledger is what the apiserver said about making things for the
	// machine, read once by the pass's first create (mayMake).
	ledger ledgerCheck
}

// BuilderExit is how a bootdisk builder ended: its exit status (see
// pkg/bootdisk's Exit codes) and its one-line reason.
type BuilderExit struct {
	Code    int32
	Message string
}

// said is what the builder said, for a message: "" when nothing.
func (e *BuilderExit) said() string {
	if e == nil || e.Message == "" {
		return ""
	}
	return fmt.Sprintf("; the builder exited %d: %s", e.Code, e.Message)
}

// Derived is the status a reconcile writes, and what it decided.
type Derived struct {
	Status v1alpha1.MacOSMachineStatus
	// Fail is set when the machine must be marked Failed (with this
	// condition): the apiserver then releases its identity.
	Fail *metav1.Condition
}

// JobFinished returns the Job's terminal condition type, if any.
func JobFinished(j *batchv1.Job) (batchv1.JobConditionType, *batchv1.JobCondition) {
	for i := range j.Status.Conditions {
		c := &j.Status.Conditions[i]
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return c.Type, c
		}
	}
	return "", nil
}

// VMIRunningSince is when the VMI entered Running, from KubeVirt's own
// record (so it survives controller restarts).
func VMIRunningSince(vmi *kubevirtv1.VirtualMachineInstance) (time.Time, bool) {
	if vmi == nil || vmi.Status.Phase != kubevirtv1.Running {
		return time.Time{}, false
	}
	for _, t := range vmi.Status.PhaseTransitionTimestamps {
		if t.Phase == kubevirtv1.Running {
			return t.PhaseTransitionTimestamp.Time, true
		}
	}
	return vmi.CreationTimestamp.Time, true
}

// Derive computes the machine's status from what was observed. It never
// reads the machine's previous conditions to decide progress — only to
// keep transition times and the last agent report.
func Derive(m *v1alpha1.MacOSMachine, o *Observed, now time.Time) Derived {
	st := *m.Status.DeepCopy()
	st.ObservedGeneration = m.Generation
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: m.Generation, LastTransitionTime: metav1.NewTime(now)})
	}
	var d Derived

	// Bootdisk.
	switch {
	case st.IdentityRef == nil:
		set(v1alpha1.MachineBootdiskReady, metav1.ConditionFalse, ReasonWaitingIdentity, "the bootdisk carries the identity; waiting for one")
	case o.BootdiskLost: // Kubernetes keeps the PVC while a running VM's pod uses it
		msg := fmt.Sprintf("PersistentVolumeClaim %s, the bootdisk VirtualMachine %s boots from, is gone (or no longer labelled %s=%s): the guest cannot start again",
			NamesFor(m).BootdiskPVC, o.VM.Name, MachineUIDLabel, m.UID)
		set(v1alpha1.MachineBootdiskReady, metav1.ConditionFalse, ReasonBootdiskLost, msg)
		d.Fail = &metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse, Reason: ReasonBootdiskLost,
			Message: msg + "; failed to be replaced"}
	case o.Job == nil && o.VM != nil:
		// The VM is made only once its bootdisk Job succeeded: a Job
		// deleted since takes nothing away from the disk it rendered.
		set(v1alpha1.MachineBootdiskReady, metav1.ConditionTrue, ReasonJobSucceeded,
			fmt.Sprintf("the bootdisk was rendered before VirtualMachine %s was made (its Job is not found)", o.VM.Name))
	case o.Job == nil && o.ReleaseUnsupported != "":
		set(v1alpha1.MachineBootdiskReady, metav1.ConditionFalse, ReasonReleaseUnsupportedByModel, o.ReleaseUnsupported)
	case o.Job == nil && o.ImagesUnavailable != "":
		set(v1alpha1.MachineBootdiskReady, metav1.ConditionFalse, ReasonImagesUnavailable, o.ImagesUnavailable)
	case o.Job == nil && o.BootdiskRetry != "":
		set(v1alpha1.MachineBootdiskReady, metav1.ConditionFalse, ReasonJobFailed, o.BootdiskRetry)
	case o.Job == nil:
		set(v1alpha1.MachineBootdiskReady, metav1.ConditionFalse, ReasonJobRunning, "the bootdisk Job is being created")
	default:
		switch typ, c := JobFinished(o.Job); typ {
		case batchv1.JobComplete:
			set(v1alpha1.MachineBootdiskReady, metav1.ConditionTrue, ReasonJobSucceeded, fmt.Sprintf("Job %s rendered the bootdisk", o.Job.Name))
		case batchv1.JobFailed:
			msg := fmt.Sprintf("Job %s failed: %s: %s%s", o.Job.Name, c.Reason, c.Message, o.BootdiskExit.said())
			if e := o.BootdiskExit; e != nil && e.Code == bootdisk.ExitInvalidInput {
				set(v1alpha1.MachineBootdiskReady, metav1.ConditionFalse, ReasonBootdiskInvalidInput, msg)
				d.Fail = &metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse, Reason: ReasonBootdiskInvalidInput,
					Message: fmt.Sprintf("the bootdisk builder refused its input (Job %s, exit %d): %s; the same input fails again, so it is not retried",
						o.Job.Name, e.Code, phaseOr(e.Message, "no reason given"))}
				break
			}
			if o.BootdiskRetry != "" {
				msg += "; " + o.BootdiskRetry
			}
			set(v1alpha1.MachineBootdiskReady, metav1.ConditionFalse, ReasonJobFailed, msg)
		default:
			set(v1alpha1.MachineBootdiskReady, metav1.ConditionFalse, ReasonJobRunning, fmt.Sprintf("Job %s is rendering the bootdisk", o.Job.Name))
		}
	}
	bootdiskReady := meta.IsStatusConditionTrue(st.Conditions, v1alpha1.MachineBootdiskReady)

	// System disk (an install session's: blank, and its recovery disk).
	switch {
	case Installing(m):
		installDisks(m, o, set, &d)
	case o.DV != nil && o.DV.Status.Phase == cdiv1.Succeeded:
		set(v1alpha1.MachineSystemDiskReady, metav1.ConditionTrue, ReasonCloned, fmt.Sprintf("DataVolume %s is cloned", o.DV.Name))
	case o.DV != nil && o.DV.Status.Phase == cdiv1.Failed:
		msg := fmt.Sprintf("DataVolume %s failed to clone%s", o.DV.Name, dvMessage(o.DV))
		set(v1alpha1.MachineSystemDiskReady, metav1.ConditionFalse, ReasonCloneFailed, msg)
		d.Fail = &metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse, Reason: ReasonCloneFailed, Message: msg}
	case o.DV != nil && imageNotReady(o.Image) != "":
		// CDI waits for the image's source; say what it waits for.
		set(v1alpha1.MachineSystemDiskReady, metav1.ConditionFalse, ReasonImageNotReady,
			fmt.Sprintf("DataVolume %s waits for its source: %s", o.DV.Name, imageNotReady(o.Image)))
	case o.DV != nil:
		// Not CDI's phase of the moment (pending, scheduled, in
		// progress...): each would be a status write and a watch event to
		// every client, saying nothing a user acts on.
		set(v1alpha1.MachineSystemDiskReady, metav1.ConditionFalse, ReasonCloning,
			fmt.Sprintf("DataVolume %s is cloning (%s)", o.DV.Name, progressOr(o.DV)))
	case o.SystemDiskLost:
		msg := fmt.Sprintf("DataVolume %s, the system disk VirtualMachine %s was made from, is gone (or no longer labelled %s=%s): the guest runs from a disk that is going, and cannot start again",
			NamesFor(m).SystemDisk, o.VM.Name, MachineUIDLabel, m.UID)
		set(v1alpha1.MachineSystemDiskReady, metav1.ConditionFalse, ReasonSystemDiskLost, msg)
		d.Fail = &metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse, Reason: ReasonSystemDiskLost,
			Message: msg + "; failed to be replaced"}
	case o.ReleaseUnsupported != "":
		set(v1alpha1.MachineSystemDiskReady, metav1.ConditionFalse, ReasonReleaseUnsupportedByModel, o.ReleaseUnsupported)
	case o.StorageHeldBack != "":
		set(v1alpha1.MachineSystemDiskReady, metav1.ConditionFalse, ReasonStorageHeldBack, o.StorageHeldBack)
	case o.Class == nil:
		set(v1alpha1.MachineSystemDiskReady, metav1.ConditionFalse, ReasonClassMissing, fmt.Sprintf("MacOSMachineClass %s does not exist", m.Spec.ClassName))
	case o.Image == nil:
		set(v1alpha1.MachineSystemDiskReady, metav1.ConditionFalse, ReasonImageMissing, imageMissing(m, o.Class))
	case imageNotReady(o.Image) != "":
		set(v1alpha1.MachineSystemDiskReady, metav1.ConditionFalse, ReasonImageNotReady,
			"the system disk DataVolume is being created; it waits for its source: "+imageNotReady(o.Image))
	default:
		set(v1alpha1.MachineSystemDiskReady, metav1.ConditionFalse, ReasonCloning, "the system disk DataVolume is being created")
	}
	disksReady := bootdiskReady && meta.IsStatusConditionTrue(st.Conditions, v1alpha1.MachineSystemDiskReady)

	// ImageCompatible appears once it is False, and stays (True) after.
	switch {
	case o.ReleaseUnsupported != "":
		set(ConditionImageCompatible, metav1.ConditionFalse, ReasonReleaseUnsupportedByModel, o.ReleaseUnsupported)
	case meta.FindStatusCondition(st.Conditions, ConditionImageCompatible) != nil && !meta.IsStatusConditionTrue(st.Conditions, ConditionImageCompatible) &&
		o.Class != nil && o.Image != nil:
		set(ConditionImageCompatible, metav1.ConditionTrue, ReasonReleaseSupported,
			fmt.Sprintf("MacOSMachineClass %s's smbiosModel %s runs MacOSImage %s's release %s", o.Class.Name, smbiosModel(o.Class), o.Image.Name, o.Image.Spec.Release))
	}

	// Virtual machine.
	runningSince, running := VMIRunningSince(o.VMI)
	st.VirtualMachineName, st.NodeName, st.Addresses = "", "", nil
	if o.VM != nil {
		st.VirtualMachineName = o.VM.Name
	}
	if o.VMI != nil {
		// Kept while the VMI says where it is, running or not: a VMI on a
		// lost node is what holds the machine's identity.
		st.NodeName = o.VMI.Status.NodeName
	}
	switch {
	case running:
		st.Addresses = Addresses(o.VMI)
		set(v1alpha1.MachineVirtualMachineRunning, metav1.ConditionTrue, ReasonVMIRunning,
			fmt.Sprintf("VirtualMachineInstance %s runs on node %s", o.VMI.Name, o.VMI.Status.NodeName))
	case o.VMI != nil:
		set(v1alpha1.MachineVirtualMachineRunning, metav1.ConditionFalse, ReasonVMIStarting, vmiStarting(o.VMI))
	case Installing(m) && o.Promotion != nil && o.VM != nil:
		set(v1alpha1.MachineVirtualMachineRunning, metav1.ConditionFalse, ReasonHalted,
			fmt.Sprintf("VirtualMachine %s is halted: MacOSImage %s promotes this install session", o.VM.Name, o.Promotion.Image))
	case !disksReady && Installing(m):
		set(v1alpha1.MachineVirtualMachineRunning, metav1.ConditionFalse, ReasonWaitingForDisks, "the VirtualMachine starts once the bootdisk, the recovery disk and the blank system disk are ready")
	case !disksReady:
		set(v1alpha1.MachineVirtualMachineRunning, metav1.ConditionFalse, ReasonWaitingForDisks, "the VirtualMachine starts once the bootdisk and the system disk are ready")
	case o.VM == nil && o.OSKSecretMissing != "":
		set(v1alpha1.MachineVirtualMachineRunning, metav1.ConditionFalse, ReasonOSKSecretMissing, o.OSKSecretMissing)
	case o.VM == nil && o.ImagesUnavailable != "":
		set(v1alpha1.MachineVirtualMachineRunning, metav1.ConditionFalse, ReasonImagesUnavailable, o.ImagesUnavailable)
	default:
		set(v1alpha1.MachineVirtualMachineRunning, metav1.ConditionFalse, ReasonVMIStopped, "the VirtualMachineInstance does not exist yet")
	}

	// Agent. Unreachable is not the guest's fault: GuestReady keeps the
	// last thing the agent said (failure rule "agent unreachable but VMI
	// running").
	agentPending := running && o.AgentAsked && o.Agent == nil && o.AgentErr == nil
	switch {
	case !running:
		set(v1alpha1.MachineAgentReachable, metav1.ConditionUnknown, ReasonNotStarted, "the virtual machine is not running")
		set(v1alpha1.MachineGuestReady, metav1.ConditionUnknown, ReasonNotStarted, "the virtual machine is not running")
		if !Installing(m) {
			// An install session's last report stands: the macOS version
			// its agent reported is what a promotion records, read once
			// its guest is shut down.
			st.Agent = nil
		}
	case !o.AgentAsked:
		set(v1alpha1.MachineAgentReachable, metav1.ConditionFalse, ReasonNoAddress, "the VirtualMachineInstance reports no address for the agent's interface yet")
	case agentPending:
		// Not asked yet is not unreachable: what was last heard stands.
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.MachineAgentReachable); c == nil || c.Reason == ReasonNotStarted || c.Reason == ReasonNoAddress {
			set(v1alpha1.MachineAgentReachable, metav1.ConditionUnknown, ReasonNotStarted, "the guest agent has not been asked yet")
		}
	case o.AgentErr != nil:
		set(v1alpha1.MachineAgentReachable, metav1.ConditionFalse, agentReason(o.AgentErr), o.AgentErr.Error())
	default:
		a := o.Agent
		set(v1alpha1.MachineAgentReachable, metav1.ConditionTrue, ReasonAgentAnswered, "the agent proved it holds this machine's token")
		seen := o.AgentSeen
		if seen.IsZero() {
			seen = now
		}
		st.Agent = agentReport(a, m.Status.Agent, seen)
		if a.Stage == api.StageReady {
			set(v1alpha1.MachineGuestReady, metav1.ConditionTrue, string(a.Stage), "the guest agent reports Ready")
		} else {
			set(v1alpha1.MachineGuestReady, metav1.ConditionFalse, string(a.Stage), st.Agent.Message)
		}
	}
	if o.TokenLost {
		msg := fmt.Sprintf("Secret %s, holding the token the bootdisk gave the guest's agent, is gone (or no longer labelled %s=%s): the agent can no longer prove it is this machine's",
			NamesFor(m).TokenSecret, MachineUIDLabel, m.UID)
		set(v1alpha1.MachineAgentReachable, metav1.ConditionFalse, ReasonAgentTokenLost, msg)
		if d.Fail == nil {
			d.Fail = &metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse, Reason: ReasonAgentTokenLost,
				Message: msg + "; failed to be replaced"}
		}
	}
	if g := meta.FindStatusCondition(st.Conditions, v1alpha1.MachineGuestReady); running && (g == nil || g.Reason == ReasonNotStarted) {
		set(v1alpha1.MachineGuestReady, metav1.ConditionUnknown, ReasonNotStarted, "the guest agent has not answered yet")
	}

	// An install session is never Ready: nothing it does counts as having
	// been, so nothing finds it hung or replaces it.
	everReady := WasReady(m) && !Installing(m)
	// A VMI on a node that is not Ready: the node's fate decides the
	// machine's, not its agent's silence (which follows from it).
	nodeLost := o.VMI != nil && o.NodeNotReady != "" && o.Class != nil
	hung, nodeWait := "", ""
	if running && everReady && !o.NetworkFault && o.Class != nil && !nodeLost && (!agentPending || Hung(m)) {
		hung = unresponsive(st, agentUnresponsiveTimeout(o.Class), now)
	}
	if nodeLost && d.Fail == nil {
		node := o.VMI.Status.NodeName
		switch grace := NodeLostGracePeriod(o.Class); {
		case len(o.Class.Spec.HostDevices) > 0:
			d.Fail = &metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse, Reason: ReasonNodeLost,
				Message: fmt.Sprintf("node %s is not Ready (%s) and the machine has passed-through devices, so it cannot move: failed at once to be replaced",
					node, o.NodeNotReady)}
		case now.Sub(o.NodeNotReadySince) >= grace:
			d.Fail = &metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse, Reason: ReasonNodeLost,
				Message: fmt.Sprintf("node %s is not Ready (%s) since %s, longer than the class's nodeLostGracePeriod %s: failed to be replaced",
					node, o.NodeNotReady, o.NodeNotReadySince.UTC().Format(time.RFC3339), grace)}
		default:
			nodeWait = fmt.Sprintf("node %s is not Ready (%s) since %s; unless it is back within the class's nodeLostGracePeriod %s, the machine is failed and replaced at %s",
				node, o.NodeNotReady, o.NodeNotReadySince.UTC().Format(time.RFC3339), grace, o.NodeNotReadySince.Add(grace).UTC().Format(time.RFC3339))
		}
	}
	ready := !Installing(m) && disksReady && running && hung == "" && nodeWait == "" &&
		meta.IsStatusConditionTrue(st.Conditions, v1alpha1.MachineAgentReachable) &&
		meta.IsStatusConditionTrue(st.Conditions, v1alpha1.MachineGuestReady)

	// startTimeout: from the VirtualMachine's creation (once both disks
	// are ready), by KubeVirt's own record of it, so a restart of the
	// controller does not restart the clock; a VMI that is never
	// scheduled, fails or crash-loops counts as much as a silent guest.
	// An install session waits for a person, for as long as they take.
	if o.VM != nil && !ready && !everReady && o.Class != nil && d.Fail == nil && !agentPending && !(running && o.NetworkFault && o.AgentErr != nil) && !Installing(m) {
		if timeout := startTimeout(o.Class); now.Sub(o.VM.CreationTimestamp.Time) > timeout {
			reason, seen := startBlocker(o, runningSince, running, st.Conditions)
			d.Fail = &metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse, Reason: reason,
				Message: fmt.Sprintf("the machine was not Ready within the class's startTimeout %s of its VirtualMachine's creation: %s", timeout, seen)}
		}
	}

	switch {
	case ready:
		set(v1alpha1.MachineConditionReady, metav1.ConditionTrue, ReasonMachineReady, "the guest agent reports Ready")
	case nodeWait != "":
		set(v1alpha1.MachineConditionReady, metav1.ConditionFalse, ReasonNodeNotReady, nodeWait)
	case hung != "":
		set(v1alpha1.MachineConditionReady, metav1.ConditionFalse, ReasonAgentUnresponsive, hung)
	case Installing(m):
		reason, msg := installReady(m, o, &st, running)
		set(v1alpha1.MachineConditionReady, metav1.ConditionFalse, reason, msg)
	case everReady:
		set(v1alpha1.MachineConditionReady, metav1.ConditionFalse, ReasonNoLongerReady, "the machine was Ready and is not any more: "+lastWord(st.Conditions))
	default:
		set(v1alpha1.MachineConditionReady, metav1.ConditionFalse, ReasonNotReady, lastWord(st.Conditions))
	}

	switch {
	case d.Fail != nil:
		st.Phase = v1alpha1.MachineFailed
		set(d.Fail.Type, d.Fail.Status, d.Fail.Reason, d.Fail.Message)
		if st.IdentityRef != nil && o.VMI != nil {
			// Rule 9: the apiserver keeps the identity of a fenced
			// machine until its VM is confirmed gone.
			set(v1alpha1.MachineIdentityFenced, metav1.ConditionTrue, ReasonVMMayRun, fenceMessage(st.IdentityRef.Name, o))
		}
	case st.IdentityRef == nil:
		st.Phase = v1alpha1.MachinePending
	case o.Class == nil || (o.DV == nil && o.StorageHeldBack != "") || o.ReleaseUnsupported != "":
		st.Phase = v1alpha1.MachinePending
	case !disksReady:
		st.Phase = v1alpha1.MachineProvisioning
	case ready, everReady && running:
		// A machine that was Ready keeps its phase while its VM runs;
		// the Ready condition says it is not serving (the pool decides
		// whether to replace it). Phases do not go backwards on a blip.
		st.Phase = v1alpha1.MachineReady
	default:
		st.Phase = v1alpha1.MachineStarting
	}
	d.Status = st
	return d
}

// WasReady says whether the machine has been Ready at some point.
func WasReady(m *v1alpha1.MacOSMachine) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MachineConditionReady)
	return c != nil && (c.Status == metav1.ConditionTrue || c.Reason == ReasonNoLongerReady || c.Reason == ReasonAgentUnresponsive)
}

// Hung says whether the machine was found with a hung guest: Ready once,
// its agent silent (or stuck) past the class's agentUnresponsiveTimeout.
func Hung(m *v1alpha1.MacOSMachine) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MachineConditionReady)
	return c != nil && c.Reason == ReasonAgentUnresponsive
}

// imageNotReady says why the image is not Ready ("" when it is, or when
// nothing has said yet: an image just created is not held against a
// machine).
func imageNotReady(img *v1alpha1.MacOSImage) string {
	if img == nil {
		return ""
	}
	c := meta.FindStatusCondition(img.Status.Conditions, "Ready")
	if c == nil || c.Status != metav1.ConditionFalse {
		return ""
	}
	return fmt.Sprintf("MacOSImage %s is not Ready (%s: %s)", img.Name, c.Reason, c.Message)
}

// fenceMessage says why the machine's identity stays held and what lets
// it go.
func fenceMessage(identity string, o *Observed) string {
	if o.NodeNotReady != "" {
		return fmt.Sprintf("VirtualMachineInstance %s is on node %s, which is not Ready (%s): its VM may still run there, so MacOSIdentity %s stays held until the VMI is gone. "+
			"KubeVirt removes the VMI once its launcher pod is gone: when the node comes back, when the Node is deleted (once its host is known to be off), or when the pod is force-deleted",
			o.VMI.Name, o.VMI.Status.NodeName, o.NodeNotReady, identity)
	}
	return fmt.Sprintf("VirtualMachineInstance %s still exists (%s): MacOSIdentity %s stays held until it is gone",
		o.VMI.Name, phaseOr(string(o.VMI.Status.Phase), "pending"), identity)
}

// Fenced says whether the machine's identity is held because its VM may
// still run.
func Fenced(m *v1alpha1.MacOSMachine) bool {
	return meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineIdentityFenced)
}

// NodeLostGracePeriod is the class's nodeLostGracePeriod, or its default.
func NodeLostGracePeriod(c *v1alpha1.MacOSMachineClass) time.Duration {
	if t := c.Spec.NodeLostGracePeriod; t != nil {
		return t.Duration
	}
	return v1alpha1.DefaultNodeLostGracePeriod
}

// startTimeout is the class's startTimeout, or its default.
func startTimeout(c *v1alpha1.MacOSMachineClass) time.Duration {
	if t := c.Spec.StartTimeout; t != nil {
		return t.Duration
	}
	return v1alpha1.DefaultStartTimeout
}

func agentUnresponsiveTimeout(c *v1alpha1.MacOSMachineClass) time.Duration {
	if t := c.Spec.AgentUnresponsiveTimeout; t != nil && t.Duration > 0 {
		return t.Duration
	}
	return v1alpha1.DefaultAgentUnresponsiveTimeout
}

// silentSince says since when the running guest's agent has been
// unresponsive, and how (a sentence to which the time it has been so is
// added): not answering since AgentReachable turned False, or answering
// with a status that has not moved on since lastProgressTime. ok is false
// while it answers and moves on.
func silentSince(st *v1alpha1.MacOSMachineStatus) (since time.Time, how string, ok bool) {
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.MachineAgentReachable); c != nil && c.Status != metav1.ConditionTrue {
		return c.LastTransitionTime.Time, "the guest agent has not answered (" + c.Message + ")", true
	}
	if a := st.Agent; a != nil && a.LastProgressTime != nil {
		return a.LastProgressTime.Time, "the guest agent answers, but its status (observed " + a.ObservedTime.UTC().Format(time.RFC3339) +
			" by the guest's clock) has not moved on: its poll loop is stuck", true
	}
	return time.Time{}, "", false
}

// unresponsive says how the running guest's agent has been unresponsive
// for longer than timeout, or "". It says since when, not for how long:
// the message must not change while nothing else does, or every poll of a
// hung machine would be a status write.
func unresponsive(st v1alpha1.MacOSMachineStatus, timeout time.Duration, now time.Time) string {
	since, how, ok := silentSince(&st)
	if !ok || now.Sub(since) <= timeout {
		return ""
	}
	return fmt.Sprintf("%s since %s, longer than the class's agentUnresponsiveTimeout %s",
		how, since.UTC().Format(time.RFC3339), timeout)
}

// hungDeadline is when a machine whose agent is silent (or stuck) now will
// have been so for its class's agentUnresponsiveTimeout.
func hungDeadline(st *v1alpha1.MacOSMachineStatus, class *v1alpha1.MacOSMachineClass) (time.Time, bool) {
	since, _, ok := silentSince(st)
	if class == nil || !ok {
		return time.Time{}, false
	}
	return since.Add(agentUnresponsiveTimeout(class)), true
}

// startBlocker names what kept a machine from Ready until its startTimeout
// ran out: the reason to fail it with, and what was seen.
func startBlocker(o *Observed, runningSince time.Time, running bool, conds []metav1.Condition) (reason, seen string) {
	switch {
	case running:
		return ReasonStartTimeout, fmt.Sprintf("the virtual machine runs since %s and the guest agent did not report Ready (%s)",
			runningSince.UTC().Format(time.RFC3339), lastWord(conds))
	case o.VM != nil && o.VM.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusCrashLoopBackOff:
		msg := "KubeVirt reports the VirtualMachine in CrashLoopBackOff"
		if o.VMI != nil && o.VMI.Status.Phase == kubevirtv1.Failed {
			msg += ": " + vmiFailure(o.VMI)
		}
		return ReasonCrashLoop, msg
	case o.VMI != nil && o.VMI.Status.Phase == kubevirtv1.Failed:
		return ReasonVMIFailed, "VirtualMachineInstance " + o.VMI.Name + " failed: " + vmiFailure(o.VMI)
	case o.VMI != nil:
		for _, c := range o.VMI.Status.Conditions {
			if string(c.Type) == string(corev1.PodScheduled) && c.Status == corev1.ConditionFalse {
				return ReasonUnschedulable, fmt.Sprintf("VirtualMachineInstance %s is not scheduled: %s: %s", o.VMI.Name, c.Reason, c.Message)
			}
		}
		return ReasonStartTimeout, fmt.Sprintf("VirtualMachineInstance %s is still %s", o.VMI.Name, phaseOr(string(o.VMI.Status.Phase), "pending"))
	default:
		return ReasonStartTimeout, "KubeVirt made no VirtualMachineInstance (VirtualMachine " + phaseOr(string(o.VM.Status.PrintableStatus), "with no status") + ")"
	}
}

// vmiStarting says how far a VMI that does not run is: what holds it up
// (not scheduled, failed), else only that it starts — not each of
// KubeVirt's steps (Pending, Scheduling, Scheduled), each of which would be
// a status write saying nothing a user acts on.
func vmiStarting(vmi *kubevirtv1.VirtualMachineInstance) string {
	switch vmi.Status.Phase {
	case kubevirtv1.Failed, kubevirtv1.Succeeded:
		return fmt.Sprintf("VirtualMachineInstance %s is %s: %s", vmi.Name, vmi.Status.Phase, vmiFailure(vmi))
	}
	for _, c := range vmi.Status.Conditions {
		if string(c.Type) == string(corev1.PodScheduled) && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("VirtualMachineInstance %s is not scheduled yet: %s: %s", vmi.Name, c.Reason, c.Message)
		}
	}
	return fmt.Sprintf("VirtualMachineInstance %s is starting", vmi.Name)
}

// vmiFailure is what a failed VMI says of its failure.
func vmiFailure(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady && c.Status == corev1.ConditionFalse && (c.Reason != "" || c.Message != "") {
			return c.Reason + ": " + c.Message
		}
	}
	if vmi.Status.Reason != "" {
		return vmi.Status.Reason
	}
	return "no reason given"
}

// lastWord is the message of the first condition on the way to Ready
// that is not True: what a person should look at.
func lastWord(conds []metav1.Condition) string {
	for _, t := range []string{v1alpha1.MachineIdentityAllocated, v1alpha1.MachineBootdiskReady, v1alpha1.MachineSystemDiskReady,
		v1alpha1.MachineVirtualMachineRunning, v1alpha1.MachineAgentReachable, v1alpha1.MachineGuestReady} {
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Status != metav1.ConditionTrue {
			return t + ": " + c.Message
		}
	}
	return "every condition is True"
}

func agentReason(err error) string {
	switch {
	case errors.Is(err, client.ErrUnauthenticated):
		return ReasonAgentUnauth
	case errors.Is(err, client.ErrWrongMachine):
		return ReasonWrongMachine
	case errors.Is(err, client.ErrBadResponse):
		return ReasonBadResponse
	default:
		return ReasonAgentUnreachable
	}
}

func agentReport(a *api.Status, prev *v1alpha1.AgentReport, now time.Time) *v1alpha1.AgentReport {
	r := &v1alpha1.AgentReport{Stage: v1alpha1.AgentStage(a.Stage), LastSeenTime: &metav1.Time{Time: now}, Version: a.AgentVersion, OSVersion: a.OSVersion,
		ObservedTime: &metav1.Time{Time: a.ObservedAt}, LastProgressTime: &metav1.Time{Time: now}}
	// Stored times keep whole seconds: compare those.
	if prev != nil && prev.ObservedTime != nil && prev.LastProgressTime != nil && prev.ObservedTime.Unix() == a.ObservedAt.Unix() {
		// The same status as last time: its poll loop has not moved on.
		r.LastProgressTime = prev.LastProgressTime
	}
	if a.Disk.TotalBytes > 0 {
		total, free := int64(a.Disk.TotalBytes), int64(a.Disk.FreeBytes)
		r.DiskTotalBytes, r.DiskFreeBytes = &total, &free
	}
	if len(a.Reasons) > 0 {
		r.Message = a.Reasons[0].Type + ": " + a.Reasons[0].Message
	}
	return r
}

// Addresses are the VMI's pod-network and agent-network addresses.
func Addresses(vmi *kubevirtv1.VirtualMachineInstance) []v1alpha1.MachineAddress {
	var out []v1alpha1.MachineAddress
	for _, i := range vmi.Status.Interfaces {
		if i.IP == "" {
			continue
		}
		switch i.Name {
		case PodInterface:
			out = append(out, v1alpha1.MachineAddress{Type: v1alpha1.MachineAddressPod, Address: i.IP})
		case AgentInterface:
			out = append(out, v1alpha1.MachineAddress{Type: v1alpha1.MachineAddressAgent, Address: i.IP})
		}
	}
	return out
}

// AgentAddress is where the agent listens: the agent interface's IP when
// the class has an agent network, else the pod interface's; port from the
// class.
func AgentAddress(vmi *kubevirtv1.VirtualMachineInstance, class *v1alpha1.MacOSMachineClass) (string, bool) {
	want, port := PodInterface, int32(v1alpha1.DefaultAgentPort)
	if an := class.Spec.AgentNetwork; an != nil {
		want = AgentInterface
		if an.Port != 0 {
			port = an.Port
		}
	}
	for _, i := range vmi.Status.Interfaces {
		if i.Name == want && i.IP != "" {
			return fmt.Sprintf("%s:%d", bracket(i.IP), port), true
		}
	}
	return "", false
}

func bracket(ip string) string {
	for _, c := range ip {
		if c == ':' {
			return "[" + ip + "]"
		}
	}
	return ip
}

func dvMessage(dv *cdiv1.DataVolume) string {
	for _, c := range dv.Status.Conditions {
		if c.Message != "" && c.Status != corev1.ConditionTrue {
			return ": " + c.Message
		}
	}
	for _, c := range dv.Status.Conditions {
		if c.Message != "" {
			return ": " + c.Message
		}
	}
	return ""
}

// progressOr is the clone's progress in steps of 10%: CDI reports it to a
// tenth of a percent, and every change of the message is a status write.
func progressOr(dv *cdiv1.DataVolume) string {
	var pct float64
	if _, err := fmt.Sscanf(string(dv.Status.Progress), "%f%%", &pct); err != nil || pct < 0 || pct > 100 {
		return "no progress reported yet"
	}
	return fmt.Sprintf("%d%% done", int(pct)/10*10)
}

func phaseOr(phase, or string) string {
	if phase == "" {
		return or
	}
	return phase
}

// imageMissing says which MacOSImage a machine waits for, and what makes
// it go on: the image created (its class is fixed when the machine is
// made, so naming another image means another machine).
func imageMissing(m *v1alpha1.MacOSMachine, class *v1alpha1.MacOSMachineClass) string {
	if m.Spec.ImageName != "" {
		return fmt.Sprintf("MacOSImage %s, which the machine names, does not exist: the machine waits, and its system disk is made once the image is created", m.Spec.ImageName)
	}
	return fmt.Sprintf("MacOSImage %s, which MacOSMachineClass %s names, does not exist: the machine waits, and its system disk is made once the image is created "+
		"(or delete the machine and claim one of a class whose image exists)", class.Spec.ImageName, class.Name)
}
