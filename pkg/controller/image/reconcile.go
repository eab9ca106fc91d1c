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

// Package image reconciles MacOSImages:
//
//   - Ready: whether the CDI DataSource or PersistentVolumeClaim the image
//     names exists and can be cloned from. Machines are not held back by
//     it (CDI reports a missing source on the DataVolume too); it tells an
//     operator before a clone fails.
//   - RecoveryReady (recovery.go), for an image with spec.source.recovery:
//     the release's recovery image fetched from Apple into a volume beside
//     the DataSource by the bootdisk builder's recovery Job, with retries
//     under an exponential backoff kept in status.recovery.
//   - Promoted (promote.go), for an image with spec.promoteFrom: an install
//     session's system disk cloned into a golden volume, the DataSource
//     pointed at it, the session deleted.
//
// Every pass derives what to do from what exists (the volume, the Jobs and
// their pods, the golden DataVolume, the DataSource, the machine and its
// VirtualMachineInstance) and from the image's status, which is written
// before anything that status must record is taken away: a crash between
// any two steps leaves the next pass to carry on, never to repeat one.
package image

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/containerimages"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	dlisters "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

// Condition types of an image.
const (
	ConditionReady         = "Ready"
	ConditionRecoveryReady = "RecoveryReady"
	ConditionPromoted      = "Promoted"
)

// Reasons of an image's Ready condition.
const (
	ReasonSourceReady    = "SourceReady"
	ReasonSourceNotFound = "SourceNotFound"
	ReasonSourceNotReady = "SourceNotReady"
	// ReasonFetching: the image is made from a recovery image that is not
	// fetched yet (also RecoveryReady's reason while a fetch runs).
	ReasonFetching = "Fetching"
	// ReasonAwaitingInstall: the recovery image is ready; macOS is to be
	// installed in a session and the session promoted.
	ReasonAwaitingInstall = "AwaitingInstall"
)

// Recheck is how often an image's source is looked at again: sources live
// in other namespaces and are not watched.
const Recheck = time.Minute

// busyRecheck is how often an image whose recovery or promotion is under
// way, and not Ready yet, is looked at again when nothing sooner is due.
const busyRecheck = 10 * time.Second

// Reconciler reconciles MacOSImages.
type Reconciler struct {
	Images  dlisters.MacOSImageLister
	Client  versioned.Interface
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface

	// Machines and VMIs are the manager's caches (the VMIs of machines
	// only), for promotions.
	Machines dlisters.MacOSMachineLister
	VMIs     cache.GenericLister
	// ContainerImages gives the bootdisk builder image and pull secrets the
	// recovery Jobs run with: the machines' own setting.
	ContainerImages containerimages.Source
	Recorder        record.EventRecorder

	// RecoveryBackoff is the wait after a recovery fetch's first failure;
	// each further failure in a row doubles it, up to RecoveryBackoffMax
	// (DefaultRecoveryBackoff, DefaultRecoveryBackoffMax when zero).
	RecoveryBackoff, RecoveryBackoffMax time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Logs reads the last lines of a container's log (pods/log with
	// TailLines); the Kube client's when nil.
	Logs func(ctx context.Context, namespace, pod, container string, tailLines int64) ([]byte, error)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// event is one Event of a pass, recorded only once the status that says
// the same has been written (a pass whose write fails records none, and
// the next pass, seeing the same, records it then).
type event struct{ typ, reason, message string }

// pass is what one reconcile decides beside the status: Events, actions
// that must wait until the status is written (deleting what the status
// records the outcome of), and when to look again.
type pass struct {
	events  []event
	after   []func(context.Context) error
	requeue time.Duration
}

func (p *pass) requeueAfter(d time.Duration) {
	if d > 0 && (p.requeue == 0 || d < p.requeue) {
		p.requeue = d
	}
}

func (p *pass) eventf(typ, reason, format string, args ...any) {
	p.events = append(p.events, event{typ, reason, fmt.Sprintf(format, args...)})
}

// setCondition sets a condition of st; its lastTransitionTime moves only
// when its status does.
func setCondition(st *v1alpha1.MacOSImageStatus, gen int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
}

// changed says whether a condition newly has this status and reason (an
// Event is recorded for a change, not for every pass that sees it).
func changed(old *v1alpha1.MacOSImageStatus, typ string, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(old.Conditions, typ)
	return c == nil || c.Status != status || c.Reason != reason
}

// Reconcile derives the image's status from what exists, acts on it, and
// says when to look again.
func (r *Reconciler) Reconcile(ctx context.Context, name string) (time.Duration, error) {
	// Read live, not from the cache: a pass must never act on a status
	// older than the last one written (it would count a failure twice,
	// or start an attempt again).
	img, err := r.Client.DockeriosV1alpha1().MacOSImages().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	st := img.Status.DeepCopy()
	st.ObservedGeneration = img.Generation
	p := &pass{}
	if err := r.recovery(ctx, img, st, p); err != nil {
		return 0, err
	}
	if err := r.promote(ctx, img, st, p); err != nil {
		return 0, err
	}
	status, reason, msg := r.check(ctx, img, st)
	setCondition(st, img.Generation, ConditionReady, status, reason, msg)
	if p.requeue == 0 && status != metav1.ConditionTrue && (img.Spec.Source.Recovery != nil || img.Spec.PromoteFrom != nil) {
		p.requeueAfter(busyRecheck)
	}
	p.requeueAfter(Recheck)

	if !equality.Semantic.DeepEqual(&img.Status, st) {
		if err := r.writeStatus(ctx, img, st); err != nil {
			return 0, err
		}
		if r.Recorder != nil {
			for _, ev := range p.events {
				r.Recorder.Event(img, ev.typ, ev.reason, ev.message)
			}
		}
	}
	for _, f := range p.after {
		if err := f(ctx); err != nil {
			return 0, err
		}
	}
	return p.requeue, nil
}

// writeStatus replaces the status (a JSON patch: a merge patch cannot
// clear a field the new status omits), on condition that the image is
// still the one read: a pass working from an image older than the last
// write conflicts and is retried, instead of counting a failure twice.
func (r *Reconciler) writeStatus(ctx context.Context, img *v1alpha1.MacOSImage, st *v1alpha1.MacOSImageStatus) error {
	patch, err := json.Marshal([]map[string]any{
		{"op": "add", "path": "/metadata/resourceVersion", "value": img.ResourceVersion},
		{"op": "add", "path": "/status", "value": st},
	})
	if err != nil {
		return err
	}
	if _, err := r.Client.DockeriosV1alpha1().MacOSImages().Patch(ctx, img.Name, types.JSONPatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing image status: %w", err)
	}
	return nil
}

func (r *Reconciler) check(ctx context.Context, img *v1alpha1.MacOSImage, st *v1alpha1.MacOSImageStatus) (metav1.ConditionStatus, string, string) {
	switch src := img.Spec.Source; {
	case src.DataSource != nil:
		u, err := r.Dynamic.Resource(external.DataSources).Namespace(src.DataSource.Namespace).Get(ctx, src.DataSource.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if src.Recovery != nil {
				return awaitingInstall(img, st)
			}
			return metav1.ConditionFalse, ReasonSourceNotFound, fmt.Sprintf("DataSource %s/%s does not exist", src.DataSource.Namespace, src.DataSource.Name)
		}
		if err != nil {
			return metav1.ConditionUnknown, ReasonSourceNotFound, "reading the DataSource: " + err.Error()
		}
		ds, err := external.FromUnstructured[cdiv1.DataSource](u)
		if err != nil {
			return metav1.ConditionUnknown, ReasonSourceNotReady, err.Error()
		}
		for _, c := range ds.Status.Conditions {
			if c.Type == cdiv1.DataSourceReady {
				if c.Status == corev1.ConditionTrue {
					return metav1.ConditionTrue, ReasonSourceReady, fmt.Sprintf("DataSource %s/%s is Ready", src.DataSource.Namespace, src.DataSource.Name)
				}
				return metav1.ConditionFalse, ReasonSourceNotReady, fmt.Sprintf("DataSource %s/%s is not Ready: %s: %s", src.DataSource.Namespace, src.DataSource.Name, c.Reason, c.Message)
			}
		}
		return metav1.ConditionFalse, ReasonSourceNotReady, fmt.Sprintf("DataSource %s/%s reports no Ready condition yet", src.DataSource.Namespace, src.DataSource.Name)
	case src.PVC != nil:
		pvc, err := r.Kube.CoreV1().PersistentVolumeClaims(src.PVC.Namespace).Get(ctx, src.PVC.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return metav1.ConditionFalse, ReasonSourceNotFound, fmt.Sprintf("PersistentVolumeClaim %s/%s does not exist", src.PVC.Namespace, src.PVC.Name)
		}
		if err != nil {
			return metav1.ConditionUnknown, ReasonSourceNotFound, "reading the PersistentVolumeClaim: " + err.Error()
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return metav1.ConditionFalse, ReasonSourceNotReady, fmt.Sprintf("PersistentVolumeClaim %s/%s is %s, not Bound", src.PVC.Namespace, src.PVC.Name, pvc.Status.Phase)
		}
		return metav1.ConditionTrue, ReasonSourceReady, fmt.Sprintf("PersistentVolumeClaim %s/%s is Bound", src.PVC.Namespace, src.PVC.Name)
	}
	return metav1.ConditionFalse, ReasonSourceNotFound, "the image names no source"
}

// awaitingInstall is Ready of an image made from a recovery image whose
// DataSource does not exist yet: what is missing, and the next step.
func awaitingInstall(img *v1alpha1.MacOSImage, st *v1alpha1.MacOSImageStatus) (metav1.ConditionStatus, string, string) {
	ds := img.Spec.Source.DataSource
	rr := meta.FindStatusCondition(st.Conditions, ConditionRecoveryReady)
	if rr == nil || rr.Status != metav1.ConditionTrue {
		msg := "the recovery image is not fetched yet"
		if rr != nil {
			msg += ": " + rr.Message
		}
		return metav1.ConditionFalse, ReasonFetching, fmt.Sprintf("DataSource %s/%s does not exist: %s", ds.Namespace, ds.Name, msg)
	}
	msg := fmt.Sprintf("DataSource %s/%s does not exist yet: the recovery image is ready; install macOS in a session "+
		"(kubectl dockerios image install %s --class CLASS -n NAMESPACE), install the DockerIOS agent in it, then promote the session "+
		"(kubectl dockerios image promote SESSION --image %s -n NAMESPACE, which sets spec.promoteFrom)", ds.Namespace, ds.Name, img.Name, img.Name)
	if pf, pr := img.Spec.PromoteFrom, st.Promotion; pf != nil && pr != nil && pr.Machine == *pf && pr.Phase != "" {
		msg += fmt.Sprintf("; promotion of %s/%s: %s", pf.Namespace, pf.Name, pr.Phase)
	}
	return metav1.ConditionFalse, ReasonAwaitingInstall, msg
}
