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
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/bootdisk"
	"github.com/dockerios/dockerios/pkg/controller/containerimages"
)

// Reasons of RecoveryReady besides ReasonFetching: the builder's outcomes.
const (
	ReasonConverted        = bootdisk.RecoveryConverted
	ReasonServiceRefused   = bootdisk.RecoveryServiceRefused
	ReasonChecksumMismatch = bootdisk.RecoveryChecksumMismatch
	ReasonFailed           = bootdisk.RecoveryFailed
)

// Defaults of the recovery fetch's retry backoff.
const (
	DefaultRecoveryBackoff    = time.Minute
	DefaultRecoveryBackoffMax = time.Hour
)

// RecoveryVolumeSize is the recovery volume's request: a BaseSystem.dmg
// is under 1 GiB compressed, its raw disk a few GiB.
var RecoveryVolumeSize = resource.MustParse("16Gi")

const (
	// progressPoll is how often a running fetch's log is read for its
	// progress.
	progressPoll = 10 * time.Second
	// progressTailLines bounds the log read for it.
	progressTailLines = int64(20)
	// gonePoll is how often a deletion the next step waits for is looked at.
	gonePoll = 2 * time.Second
	// imagesRetry is how soon unavailable container images are looked at again.
	imagesRetry = 30 * time.Second
)

func (r *Reconciler) backoff(attempts int32) time.Duration {
	b, max := r.RecoveryBackoff, r.RecoveryBackoffMax
	if b <= 0 {
		b = DefaultRecoveryBackoff
	}
	if max <= 0 {
		max = DefaultRecoveryBackoffMax
	}
	d := b
	for i := int32(1); i < attempts && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// recovery keeps RecoveryReady and status.recovery of an image with
// spec.source.recovery: the volume, one Job per attempt, the outcome read
// from the finished Job's pod, the backoff between attempts.
func (r *Reconciler) recovery(ctx context.Context, img *v1alpha1.MacOSImage, st *v1alpha1.MacOSImageStatus, p *pass) error {
	rec := img.Spec.Source.Recovery
	if rec == nil {
		// Not (or no longer) made from a recovery image. The volume, if
		// any, is left: install sessions may be cloning it.
		meta.RemoveStatusCondition(&st.Conditions, ConditionRecoveryReady)
		st.Recovery = nil
		return nil
	}
	gen := img.Generation
	fetching := func(msg string) {
		setCondition(st, gen, ConditionRecoveryReady, metav1.ConditionUnknown, ReasonFetching, msg)
	}
	ds := img.Spec.Source.DataSource
	if ds == nil {
		setCondition(st, gen, ConditionRecoveryReady, metav1.ConditionFalse, ReasonFailed,
			"spec.source.recovery needs spec.source.dataSource: the DataSource the image will be published through, in whose namespace the recovery volume is made")
		return nil
	}
	ns, pvcName := ds.Namespace, RecoveryVolumeName(img)
	what := fmt.Sprintf("macOS %s's recovery image (board %s)", rec.Release, boardOrDefault(rec.BoardID))

	pvc, err := r.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvcName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		pvc = nil
	} else if err != nil {
		return fmt.Errorf("reading the recovery volume: %w", err)
	}
	switch {
	case pvc != nil && pvc.DeletionTimestamp != nil:
		fetching(fmt.Sprintf("waiting for the previous recovery volume %s/%s to be deleted before fetching %s", ns, pvcName, what))
		p.requeueAfter(gonePoll)
		return nil
	case pvc != nil && (pvc.Annotations[RecoveryReleaseAnnotation] != rec.Release || pvc.Annotations[RecoveryBoardIDAnnotation] != rec.BoardID):
		// spec.source.recovery changed: what the volume holds is not
		// what is asked for. Its Jobs go first, then the volume; the
		// status keeps its count until the volume is gone.
		if err := r.deleteJobs(ctx, img, ns, func(*batchv1.Job) bool { return true }); err != nil {
			return err
		}
		if err := r.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvcName, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &pvc.UID}}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting the recovery volume: %w", err)
		}
		fetching(fmt.Sprintf("spec.source.recovery asks for %s, but volume %s/%s holds release %q board %q: deleting it to start over",
			what, ns, pvcName, pvc.Annotations[RecoveryReleaseAnnotation], boardOrDefault(pvc.Annotations[RecoveryBoardIDAnnotation])))
		p.eventf(corev1.EventTypeNormal, "RecoveryRestarted", "spec.source.recovery changed: fetching %s anew into %s/%s", what, ns, pvcName)
		p.requeueAfter(gonePoll)
		return nil
	case pvc == nil:
		// A new volume starts a new fetch: the Jobs of an earlier one
		// (attempt numbers restart) are removed first.
		jobs, err := r.jobs(ctx, img, ns)
		if err != nil {
			return err
		}
		if len(jobs) > 0 {
			if err := r.deleteJobs(ctx, img, ns, func(*batchv1.Job) bool { return true }); err != nil {
				return err
			}
			fetching(fmt.Sprintf("recovery volume %s/%s does not exist: removing the Jobs of an earlier fetch before starting over", ns, pvcName))
			p.requeueAfter(gonePoll)
			return nil
		}
		st.Recovery = &v1alpha1.RecoveryStatus{VolumeName: pvcName, BoardID: rec.BoardID}
		if err := r.createVolume(ctx, img, ns, pvcName); err != nil {
			return err
		}
	}
	if st.Recovery == nil {
		st.Recovery = &v1alpha1.RecoveryStatus{BoardID: rec.BoardID}
	}
	st.Recovery.VolumeName = pvcName

	if rr := meta.FindStatusCondition(st.Conditions, ConditionRecoveryReady); rr != nil && rr.Status == metav1.ConditionTrue &&
		rr.Reason == ReasonConverted && st.Recovery.ImageSHA256 != "" {
		p.after = append(p.after, func(ctx context.Context) error {
			return r.deleteJobs(ctx, img, ns, jobFailed)
		})
		return nil
	}

	attempt := st.Recovery.Attempts + 1
	name := bootdisk.RecoveryJobName(img, attempt)
	job, err := r.Kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		job = nil
	} else if err != nil {
		return fmt.Errorf("reading recovery Job: %w", err)
	}
	if job != nil && job.Labels[ImageUIDLabel] != string(img.UID) {
		return fmt.Errorf("Job %s/%s is not this image's (label %s=%q): delete it, or the fetch cannot go on", ns, name, ImageUIDLabel, job.Labels[ImageUIDLabel])
	}
	if job == nil {
		// Failed Jobs of earlier attempts are cleaned up once their
		// failure is counted (which the status says before this).
		p.after = append(p.after, func(ctx context.Context) error { return r.deleteJobs(ctx, img, ns, jobFailed) })
		if next := st.Recovery.NextAttemptTime; next != nil && r.now().Before(next.Time) {
			p.requeueAfter(next.Sub(r.now()))
			return nil
		}
		return r.startJob(ctx, img, st, p, ns, pvcName, attempt, what)
	}
	if job.DeletionTimestamp != nil {
		p.requeueAfter(gonePoll)
		return nil
	}
	switch {
	case jobHas(job, batchv1.JobComplete):
		res, err := r.result(ctx, job)
		if err != nil {
			return err
		}
		if res.Reason == ReasonConverted {
			board := res.BoardID
			if board == "" {
				board = rec.BoardID
			}
			st.Recovery = &v1alpha1.RecoveryStatus{VolumeName: pvcName, BoardID: board, Product: res.Product,
				BytesDone: st.Recovery.BytesDone, BytesTotal: st.Recovery.BytesTotal, ImageSHA256: res.ImageSHA256}
			if st.Recovery.BytesTotal > 0 {
				st.Recovery.BytesDone = st.Recovery.BytesTotal
			}
			release := res.Release
			if release == "" {
				release = rec.Release
			}
			msg := fmt.Sprintf("macOS %s's recovery image, product %s for board %s, verified (BaseSystem.dmg sha256 %s) and converted into volume %s/%s (attempt %d)",
				release, res.Product, board, res.ImageSHA256, ns, pvcName, attempt)
			if changed(&img.Status, ConditionRecoveryReady, metav1.ConditionTrue, ReasonConverted) {
				p.eventf(corev1.EventTypeNormal, ReasonConverted, "%s", msg)
			}
			setCondition(st, img.Generation, ConditionRecoveryReady, metav1.ConditionTrue, ReasonConverted, msg)
			p.after = append(p.after, func(ctx context.Context) error { return r.deleteJobs(ctx, img, ns, jobFailed) })
			return nil
		}
		if res.Message == "" {
			res.Message = fmt.Sprintf("the Job completed, but its result says %q, not %s", res.Reason, ReasonConverted)
		}
		r.failed(img, st, p, job, attempt, failureReason(res.Reason), res.Message)
	case jobHas(job, batchv1.JobFailed):
		res, err := r.result(ctx, job)
		if err != nil {
			return err
		}
		if res.Message == "" {
			res.Message = "the Job failed: " + jobMessage(job, batchv1.JobFailed)
		}
		r.failed(img, st, p, job, attempt, failureReason(res.Reason), res.Message)
	default:
		r.progress(ctx, img, st, p, job, attempt, what)
	}
	return nil
}

// failureReason is RecoveryReady's reason for a failed attempt: the
// builder's, when it is one of the failures it names. Each case returns
// its constant rather than r, which came from the Job's JSON: the reasons
// a condition can carry are then the constants here, which
// test/docs/reasons_test.go reads out of the code.
func failureReason(r string) string {
	switch r {
	case ReasonServiceRefused:
		return ReasonServiceRefused
	case ReasonChecksumMismatch:
		return ReasonChecksumMismatch
	}
	return ReasonFailed
}

func boardOrDefault(b string) string {
	if b == "" {
		return "the release's default"
	}
	return b
}

// failed counts attempt's failure, with the backoff before the next; the
// Job goes once the status says so.
func (r *Reconciler) failed(img *v1alpha1.MacOSImage, st *v1alpha1.MacOSImageStatus, p *pass, job *batchv1.Job, attempt int32, reason, message string) {
	wait := r.backoff(attempt)
	next := metav1.NewTime(r.now().Add(wait).Truncate(time.Second))
	st.Recovery.Attempts = attempt
	st.Recovery.NextAttemptTime = &next
	msg := fmt.Sprintf("%s (attempt %d, Job %s/%s); the next attempt starts at %s (waits double after each failure in a row, up to %s)",
		strings.TrimSpace(message), attempt, job.Namespace, job.Name, next.UTC().Format(time.RFC3339), r.backoff(1<<10))
	setCondition(st, img.Generation, ConditionRecoveryReady, metav1.ConditionFalse, reason, msg)
	p.eventf(corev1.EventTypeWarning, reason, "%s", msg)
	uid := job.UID
	p.after = append(p.after, func(ctx context.Context) error {
		err := r.Kube.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{
			PropagationPolicy: ptr.To(metav1.DeletePropagationBackground), Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	})
	p.requeueAfter(wait)
}

// startJob makes attempt's Job.
func (r *Reconciler) startJob(ctx context.Context, img *v1alpha1.MacOSImage, st *v1alpha1.MacOSImageStatus, p *pass, ns, pvcName string, attempt int32, what string) error {
	src := r.ContainerImages
	if src == nil {
		src = containerimages.Fixed{}
	}
	images, err := src.Images(ctx)
	if containerimages.IsUnavailable(err) {
		setCondition(st, img.Generation, ConditionRecoveryReady, metav1.ConditionUnknown, ReasonFetching,
			fmt.Sprintf("cannot start fetching %s: %v", what, err))
		p.requeueAfter(imagesRetry)
		return nil
	}
	if err != nil {
		return err
	}
	job, err := bootdisk.RecoveryJob(img, ns, bootdisk.RecoveryJobOptions{Image: images.Bootdisk, OutputPVCName: pvcName,
		ImagePullSecrets: images.PullSecrets, Attempt: attempt})
	if err != nil {
		setCondition(st, img.Generation, ConditionRecoveryReady, metav1.ConditionFalse, ReasonFailed, "cannot make the recovery Job: "+err.Error())
		return nil
	}
	if job.Labels == nil {
		job.Labels = map[string]string{}
	}
	for k, v := range imageLabels(img) {
		if _, ok := job.Labels[k]; !ok || k == ImageUIDLabel {
			job.Labels[k] = v
		}
	}
	if _, err := r.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating recovery Job: %w", err)
	}
	st.Recovery.BytesDone, st.Recovery.BytesTotal, st.Recovery.NextAttemptTime = 0, 0, nil
	setCondition(st, img.Generation, ConditionRecoveryReady, metav1.ConditionUnknown, ReasonFetching,
		fetchingMessage(what, ns, pvcName, job.Name, attempt, 0, 0))
	p.requeueAfter(progressPoll)
	return nil
}

// progress reads a running fetch's last "progress DONE TOTAL" line.
func (r *Reconciler) progress(ctx context.Context, img *v1alpha1.MacOSImage, st *v1alpha1.MacOSImageStatus, p *pass, job *batchv1.Job, attempt int32, what string) {
	p.requeueAfter(progressPoll)
	if done, total, ok := r.readProgress(ctx, job); ok {
		st.Recovery.BytesDone, st.Recovery.BytesTotal = done, total
	}
	msg := fetchingMessage(what, job.Namespace, RecoveryVolumeName(img), job.Name, attempt, st.Recovery.BytesDone, st.Recovery.BytesTotal)
	setCondition(st, img.Generation, ConditionRecoveryReady, metav1.ConditionUnknown, ReasonFetching, msg)
}

func fetchingMessage(what, ns, pvc, job string, attempt int32, done, total int64) string {
	msg := fmt.Sprintf("fetching %s into volume %s/%s: attempt %d (Job %s/%s)", what, ns, pvc, attempt, ns, job)
	if total > 0 {
		return msg + fmt.Sprintf(": %d/%d MiB (%d%%)", done>>20, total>>20, done*100/total)
	}
	return msg + ": no progress reported yet"
}

func (r *Reconciler) readProgress(ctx context.Context, job *batchv1.Job) (int64, int64, bool) {
	pods, err := r.pods(ctx, job)
	if err != nil {
		return 0, 0, false
	}
	for _, pod := range pods {
		if pod.Status.Phase != corev1.PodRunning || len(pod.Spec.Containers) == 0 {
			continue
		}
		logs := r.Logs
		if logs == nil {
			logs = func(ctx context.Context, ns, pod, container string, tail int64) ([]byte, error) {
				return r.Kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: &tail}).DoRaw(ctx)
			}
		}
		tail, err := logs(ctx, pod.Namespace, pod.Name, pod.Spec.Containers[0].Name, progressTailLines)
		if err != nil {
			continue
		}
		if done, total, ok := bootdisk.ParseRecoveryProgress(tail); ok {
			return done, total, true
		}
	}
	return 0, 0, false
}

func (r *Reconciler) pods(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error) {
	l, err := r.Kube.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{batchv1.ControllerUidLabel: string(job.UID)}.String()})
	if err != nil {
		return nil, fmt.Errorf("reading the recovery Job's pods: %w", err)
	}
	return l.Items, nil
}

// result is the builder's one-line result: the termination message of
// the Job's last finished container (the Job does not carry it).
func (r *Reconciler) result(ctx context.Context, job *batchv1.Job) (bootdisk.RecoveryResult, error) {
	pods, err := r.pods(ctx, job)
	if err != nil {
		return bootdisk.RecoveryResult{}, err
	}
	var last *corev1.ContainerStateTerminated
	for _, pod := range pods {
		for _, cs := range pod.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && (last == nil || t.FinishedAt.After(last.FinishedAt.Time)) {
				last = t
			}
		}
	}
	if last == nil {
		return bootdisk.RecoveryResult{Reason: ReasonFailed,
			Message: "the Job finished but none of its pods says how (they were deleted?): " + jobMessage(job, batchv1.JobFailed)}, nil
	}
	res, err := bootdisk.ParseRecoveryResult(last.Message)
	if err != nil {
		msg := strings.TrimSpace(last.Message)
		if msg == "" {
			msg = fmt.Sprintf("the builder exited %d (%s) without a result", last.ExitCode, last.Reason)
		}
		return bootdisk.RecoveryResult{Reason: ReasonFailed, Message: msg}, nil
	}
	return res, nil
}

func (r *Reconciler) createVolume(ctx context.Context, img *v1alpha1.MacOSImage, ns, name string) error {
	rec := img.Spec.Source.Recovery
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: imageLabels(img),
			Annotations: map[string]string{RecoveryReleaseAnnotation: rec.Release, RecoveryBoardIDAnnotation: rec.BoardID}},
		Spec: corev1.PersistentVolumeClaimSpec{
			// No storage class: the cluster's default.
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:  ptr.To(corev1.PersistentVolumeFilesystem),
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: RecoveryVolumeSize}},
		},
	}
	if _, err := r.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the recovery volume: %w", err)
	}
	return nil
}

// jobs are the image's recovery Jobs in ns, by name.
func (r *Reconciler) jobs(ctx context.Context, img *v1alpha1.MacOSImage, ns string) ([]batchv1.Job, error) {
	l, err := r.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{ImageUIDLabel: string(img.UID)}.String()})
	if err != nil {
		return nil, fmt.Errorf("listing recovery Jobs: %w", err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items, nil
}

func (r *Reconciler) deleteJobs(ctx context.Context, img *v1alpha1.MacOSImage, ns string, which func(*batchv1.Job) bool) error {
	jobs, err := r.jobs(ctx, img, ns)
	if err != nil {
		return err
	}
	for i := range jobs {
		j := &jobs[i]
		if j.DeletionTimestamp != nil || !which(j) {
			continue
		}
		err := r.Kube.BatchV1().Jobs(ns).Delete(ctx, j.Name, metav1.DeleteOptions{
			PropagationPolicy: ptr.To(metav1.DeletePropagationBackground), Preconditions: &metav1.Preconditions{UID: &j.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting recovery Job %s/%s: %w", ns, j.Name, err)
		}
	}
	return nil
}

func jobFailed(j *batchv1.Job) bool { return jobHas(j, batchv1.JobFailed) }

func jobHas(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func jobMessage(j *batchv1.Job, t batchv1.JobConditionType) string {
	for _, c := range j.Status.Conditions {
		if c.Type == t {
			return c.Reason + ": " + c.Message
		}
	}
	return "no reason given"
}
