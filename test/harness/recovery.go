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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/bootdisk"
)

// recoveryImageLabel marks a MacOSImage's recovery Jobs (pkg/bootdisk's
// RecoveryJob contract): its value is the image's name.
const recoveryImageLabel = "dockerios.io/image"

// Exit codes of `bootdisk recovery` (bootdisk/internal/recovery): the
// service refused, the download failed verification, anything else.
const (
	RecoveryExitFailed           = int32(1)
	RecoveryExitServiceRefused   = int32(4)
	RecoveryExitChecksumMismatch = int32(5)
)

// RecoveryRun is how one run of a recovery Job's builder ends: its exit
// code and the one JSON line it writes as its termination message, which
// the kubelet puts in the pod's terminated state.
type RecoveryRun struct {
	ExitCode int32
	Result   bootdisk.RecoveryResult
}

// RecoveryConverted is a successful run for release and board: product,
// sha256 and size as a real fetch reports them.
func RecoveryConverted(release, boardID string) RecoveryRun {
	sum := sha256.Sum256([]byte(release + "/" + boardID))
	return RecoveryRun{Result: bootdisk.RecoveryResult{Reason: bootdisk.RecoveryConverted, Release: release, BoardID: boardID,
		Product: "041-88800", ImageSHA256: hex.EncodeToString(sum[:]), RawBytes: 3 << 30,
		Message: "recovery image verified against its chunklist and converted to disk.img"}}
}

// RecoveryServiceRefused is Apple's service answering with an HTTP error
// (a board it does not serve the release to, a rate limit).
func RecoveryServiceRefused(message string) RecoveryRun {
	return RecoveryRun{ExitCode: RecoveryExitServiceRefused, Result: bootdisk.RecoveryResult{Reason: bootdisk.RecoveryServiceRefused, Message: message}}
}

// RecoveryChecksumMismatch is a download that failed verification.
func RecoveryChecksumMismatch(message string) RecoveryRun {
	return RecoveryRun{ExitCode: RecoveryExitChecksumMismatch, Result: bootdisk.RecoveryResult{Reason: bootdisk.RecoveryChecksumMismatch, Message: message}}
}

// RecoveryFailed is any other failure.
func RecoveryFailed(message string) RecoveryRun {
	return RecoveryRun{ExitCode: RecoveryExitFailed, Result: bootdisk.RecoveryResult{Reason: bootdisk.RecoveryFailed, Message: message}}
}

// SetRecoveryRuns makes the next recovery Jobs of the MacOSImage named
// image end as runs say, one each, in order. A recovery Job with none
// queued succeeds (RecoveryConverted for the release and board in its
// arguments). A Job's fate is decided when the harness first sees it.
func (h *Harness) SetRecoveryRuns(image string, runs ...RecoveryRun) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recoveryRuns[image] = append(h.recoveryRuns[image], runs...)
}

func isRecoveryJob(job *batchv1.Job) bool {
	_, ok := job.Labels[recoveryImageLabel]
	return ok
}

// recoveryRunFor pops the run queued for a new recovery Job.
func (h *Harness) recoveryRunFor(job *batchv1.Job) RecoveryRun {
	image := job.Labels[recoveryImageLabel]
	if q := h.recoveryRuns[image]; len(q) > 0 {
		if h.recoveryRuns[image] = q[1:]; len(q) == 1 {
			delete(h.recoveryRuns, image)
		}
		return q[0]
	}
	release, board := "", ""
	for _, c := range job.Spec.Template.Spec.Containers {
		flag := func(name string) string {
			for i, a := range c.Args {
				if v, ok := strings.CutPrefix(a, name+"="); ok {
					return v
				}
				if a == name && i+1 < len(c.Args) {
					return c.Args[i+1]
				}
			}
			return ""
		}
		if v := flag("--release"); v != "" {
			release = v
		}
		if v := flag("--board-id"); v != "" {
			board = v
		}
	}
	if board == "" {
		board = "Mac-827FAC58A8FDFA22"
	}
	return RecoveryConverted(release, board)
}

func (r RecoveryRun) terminationMessage() string {
	b, _ := json.Marshal(r.Result)
	return string(b)
}

// syncDataSource plays CDI's DataSource controller (Config.DataSources)
// for a DataSource whose source is a PersistentVolumeClaim: Ready True
// (reason Ready) once the claim exists, or a DataVolume of its name has
// Succeeded (CDI made the claim for it; the harness makes no claims),
// else False with reason NotFound. status.source mirrors spec.source.
// DataSource has no status subresource: the status is written with the
// object, as CDI does.
func (h *Harness) syncDataSource(ctx context.Context, namespace, name string) error {
	obj, err := h.dataSourceLister.ByNamespace(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ds, err := fromUnstructured[cdiv1.DataSource](obj)
	if err != nil {
		return err
	}
	pvc := ds.Spec.Source.PVC
	if pvc == nil || ds.DeletionTimestamp != nil {
		return nil
	}
	status, reason, message := corev1.ConditionFalse, "NotFound", "PVC not found"
	if ok, err := h.claimExists(ctx, pvc.Namespace, pvc.Name); err != nil {
		return err
	} else if ok {
		status, reason, message = corev1.ConditionTrue, "Ready", ""
	}
	for _, c := range ds.Status.Conditions {
		if c.Type == cdiv1.DataSourceReady && c.Status == status && c.Reason == reason && ds.Status.Source.PVC != nil && *ds.Status.Source.PVC == *pvc {
			return nil
		}
	}
	err = h.updateStatus(ctx, DataSourceGVR, namespace, name, ds.UID, func(u *unstructured.Unstructured) (bool, error) {
		cur, err := fromUnstructured[cdiv1.DataSource](u)
		if err != nil {
			return false, err
		}
		now := metav1.Now()
		cond := cdiv1.DataSourceCondition{Type: cdiv1.DataSourceReady,
			ConditionState: cdiv1.ConditionState{Status: status, Reason: reason, Message: message, LastTransitionTime: now, LastHeartbeatTime: now}}
		replaced := false
		for i, c := range cur.Status.Conditions {
			if c.Type == cdiv1.DataSourceReady {
				if c.Status == status {
					cond.LastTransitionTime = c.LastTransitionTime
				}
				cur.Status.Conditions[i], replaced = cond, true
			}
		}
		if !replaced {
			cur.Status.Conditions = append(cur.Status.Conditions, cond)
		}
		cur.Status.Source = cur.Spec.Source
		return true, setStatus(u, cur.Status)
	})
	if err == nil {
		h.logf("DataSource %s/%s Ready=%s (%s)", namespace, name, status, reason)
	}
	return err
}

// claimExists says whether a PersistentVolumeClaim exists, or a
// DataVolume of its name has Succeeded.
func (h *Harness) claimExists(ctx context.Context, namespace, name string) (bool, error) {
	if obj, err := getCached(h.dataVolumeLister, namespace, name); err != nil {
		return false, err
	} else if obj != nil {
		dv, err := fromUnstructured[cdiv1.DataVolume](obj)
		if err != nil {
			return false, err
		}
		if dv.Status.Phase == cdiv1.Succeeded {
			return true, nil
		}
	}
	_, err := h.kube.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// dataSourcesOf enqueues the DataSources whose source is the claim of a
// DataVolume that changed.
func (h *Harness) dataSourcesOf(namespace, name string) {
	if h.dataSourceLister == nil {
		return
	}
	all, err := h.dataSourceLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, obj := range all {
		ds, err := fromUnstructured[cdiv1.DataSource](obj)
		if err != nil || ds.Spec.Source.PVC == nil {
			continue
		}
		if ds.Spec.Source.PVC.Namespace == namespace && ds.Spec.Source.PVC.Name == name {
			h.queue.Add(key{kindDataSource, ds.Namespace, ds.Name})
		}
	}
}
