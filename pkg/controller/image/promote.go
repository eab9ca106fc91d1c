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

package image

import (
	"context"
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
)

// Reasons of the Promoted condition.
const (
	ReasonPromoted            = "Promoted"
	ReasonStopping            = "Stopping"
	ReasonCloning             = "Cloning"
	ReasonCloneFailed         = "CloneFailed"
	ReasonMachineNotFound     = "MachineNotFound"
	ReasonNotAnInstallSession = "NotAnInstallSession"
	ReasonAgentNotReporting   = "AgentNotReporting"
	ReasonDataSourceRequired  = "DataSourceRequired"
	// ReasonWithdrawn: spec.promoteFrom was cleared while a promotion was
	// under way.
	ReasonWithdrawn = "Withdrawn"
)

// promotePoll is how often a promotion under way is looked at.
const promotePoll = 5 * time.Second

// versionInMessage finds the macOS version a Stopping condition recorded:
// between the agent's report (gone once the guest stops) and the golden
// DataVolume (which carries it from then on), the condition is its record.
var versionInMessage = regexp.MustCompile(`\(macOS ([^ ,()]+) as its agent reported\)`)

// promote carries out spec.promoteFrom: checks, Stopping (until the
// session's VirtualMachineInstance is gone — the machine controller halts
// it), Cloning (the golden DataVolume), then the DataSource, the status,
// and the session's deletion, in that order.
func (r *Reconciler) promote(ctx context.Context, img *v1alpha1.MacOSImage, st *v1alpha1.MacOSImageStatus, p *pass) error {
	pf := img.Spec.PromoteFrom
	prev := st.Promotion
	if pf == nil {
		// Withdrawn while under way: the promotion stops where it is
		// (the machine controller boots the session again).
		if prev != nil && (prev.Phase == v1alpha1.PromotionStopping || prev.Phase == v1alpha1.PromotionCloning) {
			msg := fmt.Sprintf("spec.promoteFrom was cleared: the promotion of %s/%s stopped while %s", prev.Machine.Namespace, prev.Machine.Name, prev.Phase)
			if prev.VolumeName != "" {
				msg += fmt.Sprintf("; the DataVolume %s it was cloning into is kept (delete it if it is not wanted)", prev.VolumeName)
			}
			st.Promotion = &v1alpha1.PromotionStatus{Machine: prev.Machine, Phase: v1alpha1.PromotionFailed, VolumeName: prev.VolumeName}
			setCondition(st, img.Generation, ConditionPromoted, metav1.ConditionFalse, ReasonWithdrawn, msg)
			p.eventf(corev1.EventTypeNormal, ReasonWithdrawn, "%s", msg)
		}
		return nil
	}
	if prev != nil && prev.Machine == *pf && prev.Phase == v1alpha1.PromotionSucceeded {
		// Done. The session is deleted after the status says so; a crash
		// in between leaves it to this pass — only the session the
		// volume was cloned from (its UID is in the volume's name).
		m, err := r.machine(pf)
		if err != nil || m == nil || m.DeletionTimestamp != nil {
			return err
		}
		if ClonedFrom(prev.VolumeName, m.UID) {
			p.after = append(p.after, r.deleteMachine(m))
			return nil
		}
		// A later session under the promoted one's name. spec.promoteFrom
		// still naming that name is the last promotion's record, not a
		// request to promote whatever bears it next: only a spec written
		// since that promotion ended (kubectl dockerios image promote
		// clears spec.promoteFrom and sets it again) promotes this one.
		if c := meta.FindStatusCondition(img.Status.Conditions, ConditionPromoted); c == nil || c.ObservedGeneration >= img.Generation {
			return nil
		}
	}
	gen := img.Generation
	underway := prev != nil && prev.Machine == *pf && (prev.Phase == v1alpha1.PromotionStopping || prev.Phase == v1alpha1.PromotionCloning)
	refuse := func(reason, msg string) {
		if changed(&img.Status, ConditionPromoted, metav1.ConditionFalse, reason) {
			p.eventf(corev1.EventTypeWarning, reason, "%s", msg)
		}
		st.Promotion = &v1alpha1.PromotionStatus{Machine: *pf, Phase: v1alpha1.PromotionFailed}
		setCondition(st, gen, ConditionPromoted, metav1.ConditionFalse, reason, msg)
		p.requeueAfter(30 * time.Second)
	}
	ds := img.Spec.Source.DataSource
	if ds == nil {
		refuse(ReasonDataSourceRequired, "spec.promoteFrom needs spec.source.dataSource: the DataSource the promoted disk is published through")
		return nil
	}
	m, err := r.machine(pf)
	if err != nil {
		return err
	}
	ref := pf.Namespace + "/" + pf.Name
	switch {
	case m == nil:
		refuse(ReasonMachineNotFound, fmt.Sprintf("MacOSMachine %s does not exist", ref))
		return nil
	case m.DeletionTimestamp != nil:
		refuse(ReasonMachineNotFound, fmt.Sprintf("MacOSMachine %s is being deleted", ref))
		return nil
	case m.Spec.Purpose != v1alpha1.MachinePurposeInstall:
		purpose := m.Spec.Purpose
		if purpose == "" {
			purpose = v1alpha1.MachinePurposeWorkload
		}
		refuse(ReasonNotAnInstallSession, fmt.Sprintf("MacOSMachine %s is not an install session (its spec.purpose is %s): only a machine made with spec.purpose Install (kubectl dockerios image install) can be promoted", ref, purpose))
		return nil
	case machineImage(m) != img.Name:
		refuse(ReasonNotAnInstallSession, fmt.Sprintf("MacOSMachine %s is an install session of MacOSImage %q, not of %s", ref, machineImage(m), img.Name))
		return nil
	}
	version := ""
	if a := m.Status.Agent; a != nil {
		version = a.OSVersion
	}
	if version == "" && underway {
		if c := meta.FindStatusCondition(st.Conditions, ConditionPromoted); c != nil {
			if v := versionInMessage.FindStringSubmatch(c.Message); v != nil {
				version = v[1]
			}
		}
	}
	if version == "" && !underway {
		refuse(ReasonAgentNotReporting, fmt.Sprintf("the guest agent of %s has not reported the macOS version (status.agent.osVersion): install the DockerIOS agent in the session and wait until it reports; the promotion goes on then", ref))
		return nil
	}
	cs := m.Status.ClassSnapshot
	if cs == nil {
		refuse(ReasonNotAnInstallSession, fmt.Sprintf("MacOSMachine %s has no class snapshot yet: it has not been made", ref))
		return nil
	}

	dvName := GoldenVolumeName(img, m)
	dvs := r.Dynamic.Resource(external.DataVolumes).Namespace(ds.Namespace)
	u, err := dvs.Get(ctx, dvName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		u = nil
	} else if err != nil {
		return fmt.Errorf("reading the golden DataVolume: %w", err)
	}
	var dv *cdiv1.DataVolume
	if u != nil {
		if dv, err = external.FromUnstructured[cdiv1.DataVolume](u); err != nil {
			return err
		}
		if dv.Labels[PromotedFromLabel] != string(m.UID) {
			return fmt.Errorf("DataVolume %s/%s is not the clone of %s (label %s=%q): delete it, or the promotion cannot go on", ds.Namespace, dvName, ref, PromotedFromLabel, dv.Labels[PromotedFromLabel])
		}
		if v := dv.Annotations[MacOSVersionAnnotation]; v != "" {
			version = v
		}
	}
	vmiName, disk := machineNames(m)
	if dv == nil {
		// CDI may have removed a finished DataVolume; its volume stays.
		pvc, err := r.Kube.CoreV1().PersistentVolumeClaims(ds.Namespace).Get(ctx, dvName, metav1.GetOptions{})
		switch {
		case err == nil && pvc.Labels[PromotedFromLabel] == string(m.UID):
			if v := pvc.Annotations[MacOSVersionAnnotation]; v != "" {
				version = v
			}
			return r.publish(ctx, img, st, p, m, dvName, version)
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("reading the golden volume: %w", err)
		}
		vmi, err := external.Get[kubevirtv1.VirtualMachineInstance](r.VMIs, m.Namespace, vmiName)
		if err != nil {
			return err
		}
		if vmi != nil {
			st.Promotion = &v1alpha1.PromotionStatus{Machine: *pf, Phase: v1alpha1.PromotionStopping}
			setCondition(st, gen, ConditionPromoted, metav1.ConditionFalse, ReasonStopping, fmt.Sprintf(
				"waiting for the guest of install session %s to shut down (VirtualMachineInstance %s is %s) before its system disk is cloned (macOS %s as its agent reported)",
				ref, vmiName, vmi.Status.Phase, version))
			p.requeueAfter(promotePoll)
			return nil
		}
		if dv, err = r.createGolden(ctx, img, m, cs, ds.Namespace, dvName, disk, version); err != nil {
			return err
		}
		p.eventf(corev1.EventTypeNormal, ReasonCloning, "cloning system disk %s/%s of install session %s into DataVolume %s/%s", m.Namespace, disk, ref, ds.Namespace, dvName)
	}
	switch dv.Status.Phase {
	case cdiv1.Succeeded:
		return r.publish(ctx, img, st, p, m, dvName, version)
	case cdiv1.Failed:
		msg := ""
		for _, c := range dv.Status.Conditions {
			if c.Type == cdiv1.DataVolumeRunning && c.Message != "" {
				msg = ": " + c.Message
			}
		}
		refuse(ReasonCloneFailed, fmt.Sprintf("cloning system disk %s/%s of %s into DataVolume %s/%s failed%s; delete the DataVolume to clone again",
			m.Namespace, disk, ref, ds.Namespace, dvName, msg))
		return nil
	}
	phase := string(dv.Status.Phase)
	if phase == "" {
		phase = "Pending"
	}
	st.Promotion = &v1alpha1.PromotionStatus{Machine: *pf, Phase: v1alpha1.PromotionCloning, VolumeName: dvName}
	setCondition(st, gen, ConditionPromoted, metav1.ConditionFalse, ReasonCloning, fmt.Sprintf(
		"cloning system disk %s/%s of install session %s into DataVolume %s/%s (CDI: %s) (macOS %s as its agent reported)",
		m.Namespace, disk, ref, ds.Namespace, dvName, phase, version))
	p.requeueAfter(promotePoll)
	return nil
}

func machineImage(m *v1alpha1.MacOSMachine) string {
	if m.Spec.ImageName != "" {
		return m.Spec.ImageName
	}
	if cs := m.Status.ClassSnapshot; cs != nil {
		return cs.Spec.ImageName
	}
	return ""
}

func (r *Reconciler) machine(ref *v1alpha1.NamespacedObjectReference) (*v1alpha1.MacOSMachine, error) {
	m, err := r.Machines.MacOSMachines(ref.Namespace).Get(ref.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return m, err
}

// createGolden makes the DataVolume cloning the session's system disk, of
// the class's size and storage class as the session had it.
func (r *Reconciler) createGolden(ctx context.Context, img *v1alpha1.MacOSImage, m *v1alpha1.MacOSMachine, cs *v1alpha1.ClassSnapshot,
	ns, name, disk, version string) (*cdiv1.DataVolume, error) {
	l := imageLabels(img)
	l[PromotedFromLabel] = string(m.UID)
	ann := map[string]string{cdiDeleteAfterCompletion: "false"}
	if version != "" {
		ann[MacOSVersionAnnotation] = version
	}
	dv := &cdiv1.DataVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l, Annotations: ann},
		Spec: cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: m.Namespace, Name: disk}},
			Storage: &cdiv1.StorageSpec{
				StorageClassName: cs.Spec.SystemDisk.StorageClassName,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: cs.Spec.SystemDisk.Size}},
			},
		},
	}
	if err := external.Create(ctx, r.Dynamic, external.DataVolumes, dv); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the golden DataVolume: %w", err)
	}
	return dv, nil
}

// publish points the DataSource at the golden volume, then records the
// promotion, then (once that is written) deletes the session.
func (r *Reconciler) publish(ctx context.Context, img *v1alpha1.MacOSImage, st *v1alpha1.MacOSImageStatus, p *pass, m *v1alpha1.MacOSMachine, volume, version string) error {
	ds := img.Spec.Source.DataSource
	client := r.Dynamic.Resource(external.DataSources).Namespace(ds.Namespace)
	previous := ""
	u, err := client.Get(ctx, ds.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		obj := &cdiv1.DataSource{
			TypeMeta:   metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataSource"},
			ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: imageLabels(img)},
			Spec:       cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: ds.Namespace, Name: volume}}},
		}
		if err := external.Create(ctx, r.Dynamic, external.DataSources, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating DataSource %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("DataSource %s/%s appeared meanwhile; looking again", ds.Namespace, ds.Name)
		}
	case err != nil:
		return fmt.Errorf("reading DataSource %s/%s: %w", ds.Namespace, ds.Name, err)
	default:
		pvcNS, _, _ := unstructured.NestedString(u.Object, "spec", "source", "pvc", "namespace")
		pvcName, _, _ := unstructured.NestedString(u.Object, "spec", "source", "pvc", "name")
		if pvcNS != ds.Namespace || pvcName != volume {
			if pvcName != "" {
				previous = pvcNS + "/" + pvcName
			}
			// Only spec.source changes: whatever else the DataSource says
			// is its owner's.
			if err := unstructured.SetNestedMap(u.Object, map[string]any{"pvc": map[string]any{"namespace": ds.Namespace, "name": volume}}, "spec", "source"); err != nil {
				return err
			}
			if _, err := client.Update(ctx, u, metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
				return fmt.Errorf("pointing DataSource %s/%s at %s: %w", ds.Namespace, ds.Name, volume, err)
			}
		}
	}
	now := metav1.NewTime(r.now().Truncate(time.Second))
	ref := m.Namespace + "/" + m.Name
	st.Promotion = &v1alpha1.PromotionStatus{Machine: *img.Spec.PromoteFrom, Phase: v1alpha1.PromotionSucceeded, VolumeName: volume, CompletionTime: &now}
	st.MacOSVersion = version
	msg := fmt.Sprintf("DataSource %s/%s points at volume %s/%s, cloned from install session %s (macOS %s); the session is deleted, releasing its identity",
		ds.Namespace, ds.Name, ds.Namespace, volume, ref, versionOrUnknown(version))
	if previous != "" {
		msg += fmt.Sprintf("; the volume it pointed at before, %s, is kept: delete it once no machine clones from it", previous)
	}
	setCondition(st, img.Generation, ConditionPromoted, metav1.ConditionTrue, ReasonPromoted, msg)
	p.eventf(corev1.EventTypeNormal, ReasonPromoted, "%s", msg)
	p.after = append(p.after, r.deleteMachine(m))
	return nil
}

func versionOrUnknown(v string) string {
	if v == "" {
		return "version not recorded"
	}
	return v
}

func (r *Reconciler) deleteMachine(m *v1alpha1.MacOSMachine) func(context.Context) error {
	uid := m.UID
	return func(ctx context.Context) error {
		err := r.Client.DockeriosV1alpha1().MacOSMachines(m.Namespace).Delete(ctx, m.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting promoted install session %s/%s: %w", m.Namespace, m.Name, err)
		}
		return nil
	}
}
