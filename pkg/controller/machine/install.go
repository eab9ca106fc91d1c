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

// Install sessions (spec.purpose Install) and the image checks every
// machine makes before anything is made for it.
//
// An install session boots its image's recovery image beside a blank
// system disk of its class's size, so a person installs macOS at the
// console (virtctl vnc). It is never Ready by agent checks — nothing binds
// it and nothing times it out — but its agent is asked all the same, so
// status.agent (and the macOS version) shows once the person installed it.
// When a MacOSImage's spec.promoteFrom names the session, its VM runs
// Halted (an ACPI shutdown), for the image's controller to clone the
// system disk once the guest is down; that controller then deletes the
// machine, whose teardown takes the rest.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/controller/image"
	"github.com/dockerios/dockerios/pkg/macosreleases"
)

// Reasons of install sessions' conditions, and of ImageCompatible.
const (
	// ReasonRecoveryNotReady (SystemDiskReady False): the install
	// session's recovery disk waits for its image's recovery image.
	ReasonRecoveryNotReady = "RecoveryNotReady"
	// ReasonRecoveryCloneFailed fails an install session whose recovery
	// disk failed to clone.
	ReasonRecoveryCloneFailed = "RecoveryCloneFailed"
	// ReasonInstallDisksReady (SystemDiskReady True): the blank system
	// disk and the recovery disk are ready.
	ReasonInstallDisksReady = "InstallDisksReady"
	// ReasonInstallSession (Ready False): an install session is never
	// Ready; the message says what the person at its console does.
	ReasonInstallSession = "InstallSession"
	// ReasonPromoting (Ready False): a MacOSImage promotes the session;
	// its VM is halted. ReasonHalted says so of VirtualMachineRunning.
	ReasonPromoting = "Promoting"
	ReasonHalted    = "Halted"

	// ConditionImageCompatible says whether the class's SMBIOS model runs
	// the image's release; it appears on a machine once it is False.
	ConditionImageCompatible = "ImageCompatible"
	// ReasonReleaseUnsupportedByModel (ImageCompatible False): nothing is
	// made for the machine; it waits, Pending.
	ReasonReleaseUnsupportedByModel = "ReleaseUnsupportedByModel"
	// ReasonReleaseSupported (ImageCompatible True) once it is no longer so.
	ReasonReleaseSupported = "ReleaseSupported"
)

// imageRecoveryReady is the MacOSImage condition the image's controller
// sets True once the recovery image is fetched, verified and converted.
const imageRecoveryReady = "RecoveryReady"

// Promotion is a MacOSImage promoting an install session.
type Promotion struct {
	// Image is the image whose spec.promoteFrom names the machine.
	Image string
	// Phase is the image's status.promotion phase for this machine:
	// Stopping, Cloning or Succeeded.
	Phase v1alpha1.PromotionPhase
}

// smbiosModel is the class's SMBIOS model, or its default.
func smbiosModel(c *v1alpha1.MacOSMachineClass) string {
	if c.Spec.SMBIOSModel != "" {
		return c.Spec.SMBIOSModel
	}
	return v1alpha1.DefaultSMBIOSModel
}

// releaseUnsupported says why a machine of the class cannot boot the
// image's release ("" when it can, or the tables have no opinion).
func releaseUnsupported(class *v1alpha1.MacOSMachineClass, img *v1alpha1.MacOSImage) string {
	err := macosreleases.Supports(smbiosModel(class), img.Spec.Release)
	if err == nil {
		return ""
	}
	return fmt.Sprintf("MacOSMachineClass %s's smbiosModel cannot boot MacOSImage %s's release: %v; nothing is made for the machine "+
		"(its class is fixed when it is made): delete it and use a class whose smbiosModel runs the release, or point the image at a release the model runs",
		class.Name, img.Name, err)
}

// recoveryNotReady says what an install session's recovery disk waits
// for ("" when the image's recovery volume can be cloned, or there is no
// image to say anything of: SystemDiskReady says that).
func recoveryNotReady(img *v1alpha1.MacOSImage) string {
	switch {
	case img == nil:
		return ""
	case img.Spec.Source.Recovery == nil:
		return fmt.Sprintf("MacOSImage %s has no spec.source.recovery: an install session boots the recovery image of an image made from Apple's recovery service; "+
			"delete this session, or give the image a source.recovery", img.Name)
	case img.Spec.Source.DataSource == nil:
		return fmt.Sprintf("MacOSImage %s has source.recovery but no source.dataSource, beside which its recovery volume is made", img.Name)
	}
	c := meta.FindStatusCondition(img.Status.Conditions, imageRecoveryReady)
	switch {
	case c == nil:
		return fmt.Sprintf("waiting for MacOSImage %s's recovery image: its controller has not reported RecoveryReady yet", img.Name)
	case c.Status != metav1.ConditionTrue:
		return fmt.Sprintf("waiting for MacOSImage %s's recovery image (RecoveryReady %s, %s: %s)", img.Name, c.Status, c.Reason, c.Message)
	case img.Status.Recovery == nil || img.Status.Recovery.VolumeName == "":
		return fmt.Sprintf("waiting for MacOSImage %s's recovery image: RecoveryReady is True but status.recovery names no volume yet", img.Name)
	}
	return ""
}

// promotion finds the image promoting m, if any: the image whose
// spec.promoteFrom names m (by name, the first, when several do: each
// image's controller refuses all but one) and whose controller has taken
// the promotion of this very machine up. Until it has (status.promotion
// Stopping, Cloning, or Succeeded with a volume cloned from m), the session
// runs: a promotion the image's controller refused — its agent has not
// reported yet, a clone failed — is one the person fixes with the session
// running, and the image's controller goes on by itself once it is fixed.
// A status naming an earlier machine of m's name is not m's.
func (r *Reconciler) promotion(m *v1alpha1.MacOSMachine) (*Promotion, error) {
	images, err := r.Listers.Images.List(everything)
	if err != nil {
		return nil, err
	}
	sort.Slice(images, func(i, j int) bool { return images[i].Name < images[j].Name })
	for _, img := range images {
		ref := img.Spec.PromoteFrom
		if ref == nil || ref.Namespace != m.Namespace || ref.Name != m.Name {
			continue
		}
		st := img.Status.Promotion
		if st == nil || st.Machine.Namespace != m.Namespace || st.Machine.Name != m.Name {
			return nil, nil
		}
		if st.VolumeName != "" && !image.ClonedFrom(st.VolumeName, m.UID) {
			return nil, nil
		}
		switch st.Phase {
		case v1alpha1.PromotionStopping, v1alpha1.PromotionCloning:
		case v1alpha1.PromotionSucceeded:
			if st.VolumeName == "" {
				return nil, nil
			}
		default:
			return nil, nil
		}
		return &Promotion{Image: img.Name, Phase: st.Phase}, nil
	}
	return nil, nil
}

// wantRunning is the run strategy an install session's VM should have:
// Halted while an image promotes it, Always otherwise.
func wantRunStrategy(o *Observed) kubevirtv1.VirtualMachineRunStrategy {
	if o.Promotion != nil {
		return kubevirtv1.RunStrategyHalted
	}
	return kubevirtv1.RunStrategyAlways
}

// runStrategy gives an install session's VM the run strategy it should
// have: Halted (an ACPI shutdown, for the guest's disk to be cloned whole)
// while a MacOSImage promotes it, and Always again should the promotion
// be withdrawn (spec.promoteFrom cleared).
func (r *Reconciler) runStrategy(ctx context.Context, m *v1alpha1.MacOSMachine, o *Observed) error {
	if o.VM == nil {
		return nil
	}
	want := wantRunStrategy(o)
	if rs := o.VM.Spec.RunStrategy; rs != nil && *rs == want {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"runStrategy": want, "running": nil}})
	if _, err := r.Dynamic.Resource(external.VirtualMachines).Namespace(m.Namespace).Patch(ctx, o.VM.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("setting VirtualMachine %s's runStrategy to %s: %w", o.VM.Name, want, err)
	}
	if want == kubevirtv1.RunStrategyHalted {
		r.Recorder.Eventf(m, corev1.EventTypeNormal, ReasonPromoting, "MacOSImage %s promotes this install session: stopping VirtualMachine %s (ACPI shutdown) so its system disk is cloned whole",
			o.Promotion.Image, o.VM.Name)
	} else {
		r.Recorder.Eventf(m, corev1.EventTypeNormal, "Starting", "no MacOSImage promotes this install session any more: starting VirtualMachine %s again", o.VM.Name)
	}
	vm := o.VM.DeepCopy()
	vm.Spec.RunStrategy = &want
	o.VM = vm
	return nil
}

// createRecoveryDisk clones the image's recovery volume into the install
// session's namespace.
func (r *Reconciler) createRecoveryDisk(ctx context.Context, m *v1alpha1.MacOSMachine, o *Observed, requeue *time.Duration) error {
	dv, err := RecoveryDisk(m, o.Class, o.Image)
	if err != nil {
		return err
	}
	if ok, err := r.mayMake(ctx, m, o, requeue); !ok {
		return err
	}
	if err := external.Create(ctx, r.Dynamic, external.DataVolumes, dv); apierrors.IsAlreadyExists(err) {
		if err := r.alreadyMine(ctx, m, external.DataVolumes, "DataVolume", dv.Name); err != nil {
			return err
		}
		*requeue = minPositive(*requeue, time.Second) // the cache is behind
		return nil
	} else if err != nil {
		return fmt.Errorf("creating recovery disk DataVolume: %w", err)
	}
	o.RecoveryDV = dv
	r.Recorder.Eventf(m, corev1.EventTypeNormal, "CloningRecoveryDisk", "cloning MacOSImage %s's recovery image (PersistentVolumeClaim %s/%s) into DataVolume %s",
		o.Image.Name, o.Image.Spec.Source.DataSource.Namespace, o.Image.Status.Recovery.VolumeName, dv.Name)
	return nil
}

// installDisks derives an install session's SystemDiskReady: its blank
// system disk and its recovery disk, both needed before its VM is made.
func installDisks(m *v1alpha1.MacOSMachine, o *Observed, set func(typ string, status metav1.ConditionStatus, reason, msg string), d *Derived) {
	n := NamesFor(m)
	const typ = v1alpha1.MachineSystemDiskReady
	sys, rec := o.DV, o.RecoveryDV
	switch {
	case sys != nil && sys.Status.Phase == cdiv1.Failed:
		msg := fmt.Sprintf("blank system disk DataVolume %s failed%s", sys.Name, dvMessage(sys))
		set(typ, metav1.ConditionFalse, ReasonCloneFailed, msg)
		d.Fail = &metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse, Reason: ReasonCloneFailed, Message: msg}
	case rec != nil && rec.Status.Phase == cdiv1.Failed:
		msg := fmt.Sprintf("recovery disk DataVolume %s failed to clone%s", rec.Name, dvMessage(rec))
		set(typ, metav1.ConditionFalse, ReasonRecoveryCloneFailed, msg)
		d.Fail = &metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse, Reason: ReasonRecoveryCloneFailed, Message: msg}
	case sys != nil && sys.Status.Phase == cdiv1.Succeeded && rec != nil && rec.Status.Phase == cdiv1.Succeeded:
		set(typ, metav1.ConditionTrue, ReasonInstallDisksReady, fmt.Sprintf("blank system disk DataVolume %s and recovery disk DataVolume %s are ready", sys.Name, rec.Name))
	case o.SystemDiskLost:
		msg := fmt.Sprintf("DataVolume %s, the system disk VirtualMachine %s was made with, is gone (or no longer labelled %s=%s): what was installed on it is lost",
			n.SystemDisk, o.VM.Name, MachineUIDLabel, m.UID)
		set(typ, metav1.ConditionFalse, ReasonSystemDiskLost, msg)
		d.Fail = &metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse, Reason: ReasonSystemDiskLost,
			Message: msg + "; failed: delete it and start another install session"}
	case o.Class == nil && (sys == nil || rec == nil):
		set(typ, metav1.ConditionFalse, ReasonClassMissing, fmt.Sprintf("MacOSMachineClass %s does not exist", m.Spec.ClassName))
	case o.Image == nil && (sys == nil || rec == nil):
		set(typ, metav1.ConditionFalse, ReasonImageMissing, fmt.Sprintf("MacOSImage %s, which the install session installs, does not exist", m.Spec.ImageName))
	case o.ReleaseUnsupported != "":
		set(typ, metav1.ConditionFalse, ReasonReleaseUnsupportedByModel, o.ReleaseUnsupported)
	case rec == nil && o.RecoveryNotReady != "":
		set(typ, metav1.ConditionFalse, ReasonRecoveryNotReady, o.RecoveryNotReady)
	case sys == nil && o.StorageHeldBack != "":
		set(typ, metav1.ConditionFalse, ReasonStorageHeldBack, o.StorageHeldBack)
	default:
		set(typ, metav1.ConditionFalse, ReasonCloning, fmt.Sprintf("blank system disk DataVolume %s %s; recovery disk DataVolume %s %s",
			n.SystemDisk, installDiskState(sys, "is being created"), n.RecoveryDisk, installDiskState(rec, "is being cloned from MacOSImage "+m.Spec.ImageName+"'s recovery volume")))
	}
}

func installDiskState(dv *cdiv1.DataVolume, missing string) string {
	switch {
	case dv == nil:
		return missing
	case dv.Status.Phase == cdiv1.Succeeded:
		return "is ready"
	}
	return "is being made (" + progressOr(dv) + ")"
}

// installReady is an install session's Ready condition: never True. Its
// reason and message say what the person does next, or that the session
// is being promoted.
func installReady(m *v1alpha1.MacOSMachine, o *Observed, st *v1alpha1.MacOSMachineStatus, running bool) (reason, msg string) {
	vmName := NamesFor(m).VirtualMachine
	promote := fmt.Sprintf("kubectl dockerios image promote %s --image %s -n %s", m.Name, m.Spec.ImageName, m.Namespace)
	if p := o.Promotion; p != nil {
		switch p.Phase {
		case v1alpha1.PromotionSucceeded:
			return ReasonPromoting, fmt.Sprintf("promoted into MacOSImage %s: its DataSource now points at this session's disk; the image's controller deletes this machine", p.Image)
		}
		state := "its guest is shutting down (VirtualMachine " + vmName + " runs Halted, an ACPI shutdown)"
		if o.VMI == nil {
			state = "its guest is shut down"
		}
		return ReasonPromoting, fmt.Sprintf("MacOSImage %s promotes this install session (%s): %s; its system disk is cloned into the image once the guest is down, then this machine is deleted",
			p.Image, phaseOr(string(p.Phase), "starting"), state)
	}
	steps := fmt.Sprintf("open its console with `virtctl vnc %s -n %s`, where the recovery boots (OpenCore's default entry while the disk is blank) erase the blank disk and install macOS onto it, install the DockerIOS agent (docs/reference/agent.md), then run `%s`",
		vmName, m.Namespace, promote)
	switch {
	case !running:
		return ReasonInstallSession, fmt.Sprintf("an install session is never Ready; once it runs (%s): %s", lastWord(st.Conditions), steps)
	case st.Agent != nil && meta.IsStatusConditionTrue(st.Conditions, v1alpha1.MachineAgentReachable):
		return ReasonInstallSession, fmt.Sprintf("an install session is never Ready; its agent answers%s: clean the guest up for cloning (docs/reference/agent.md) and run `%s`",
			osVersionSaid(st.Agent), promote)
	}
	return ReasonInstallSession, "an install session is never Ready; it runs: " + steps
}

func osVersionSaid(a *v1alpha1.AgentReport) string {
	if a.OSVersion == "" {
		return ""
	}
	return " from macOS " + strings.TrimSpace(a.OSVersion)
}
