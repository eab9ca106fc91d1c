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
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/bootdisk"
	"github.com/dockerios/dockerios/pkg/identity"
)

// JobFailure is how one run of the bootdisk builder fails.
type JobFailure struct {
	// ExitCode is the builder's exit status (pkg/bootdisk's contract):
	// 1 (ExitFailure) is retryable, so the Job controller retries the pod
	// until the Job's backoffLimit and fails the Job with
	// BackoffLimitExceeded; 2 (ExitInvalidInput) and 3 (ExitOutputVolume)
	// match the Job's podFailurePolicy FailJob rule and fail it at once
	// with reason PodFailurePolicy. The harness evaluates the Job's real
	// podFailurePolicy, so a Job without one just counts failures.
	ExitCode int32
	// Message is the builder's one-line reason, which the kubelet puts in
	// the failed Pod's termination message (the container's
	// terminated.message). The Job controller does not copy it into the
	// Job's conditions, so neither does the harness.
	Message string
}

// DefaultJobFailure is a tool inside the builder failing: retryable.
var DefaultJobFailure = JobFailure{ExitCode: bootdisk.ExitFailure, Message: "bootdisk: tool failed: sfdisk exited 1"}

// FailBootdiskJobs makes the next n bootdisk Jobs of the machine with UID
// machineUID fail with DefaultJobFailure, as a builder whose tool fails on
// every retry (a broken image, a node without loop devices) would: every
// pod fails, and the Job fails with BackoffLimitExceeded. A Job's fate is
// decided when the harness first sees it.
func (h *Harness) FailBootdiskJobs(machineUID string, n int) {
	h.FailBootdiskJobsWith(machineUID, n, DefaultJobFailure)
}

// FailBootdiskJobsWith is FailBootdiskJobs with a chosen exit code and
// message (see JobFailure).
func (h *Harness) FailBootdiskJobsWith(machineUID string, n int, f JobFailure) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for range n {
		h.jobFailures[machineUID] = append(h.jobFailures[machineUID], f)
	}
}

// jobRun is the harness's memory of one Job (by UID): when its pod
// started (zero while it waits for its Secrets) and how it ends.
type jobRun struct {
	namespace, name string
	started         time.Time
	failure         *JobFailure
	pods            []string // the finished pods made so far, in order
	// success is the termination message of a successful run (a
	// recovery Job's result line; the bootdisk builder writes none).
	success        string
	recovery       bool
	outcomeCounted bool
	waitLogged     bool
}

func (h *Harness) jobRunFor(job *batchv1.Job) *jobRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.jobRuns[job.UID]; r != nil {
		return r
	}
	r := &jobRun{namespace: job.Namespace, name: job.Name, recovery: isRecoveryJob(job)}
	if job.Status.StartTime != nil {
		// Picked up running (the harness restarted): it runs from now.
		r.started = time.Now()
	}
	uid := job.Labels[machineUIDLabel]
	if r.recovery {
		run := h.recoveryRunFor(job)
		if run.ExitCode != 0 {
			r.failure = &JobFailure{ExitCode: run.ExitCode, Message: run.terminationMessage()}
		} else {
			r.success = run.terminationMessage()
		}
	} else if q := h.jobFailures[uid]; len(q) > 0 {
		f := q[0]
		r.failure = &f
		if h.jobFailures[uid] = q[1:]; len(q) == 1 {
			delete(h.jobFailures, uid)
		}
	}
	h.jobRuns[job.UID] = r
	h.stats.JobsStarted++
	return r
}

func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func hasJobCondition(job *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func jobCondition(t batchv1.JobConditionType, reason, message string, now metav1.Time) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		LastProbeTime: now, LastTransitionTime: now}
}

// syncJob plays kube-controller-manager's Job controller (and the kubelet
// running the builder pod) for one bootdisk Job.
func (h *Harness) syncJob(ctx context.Context, namespace, name string) error {
	job, err := h.jobLister.Jobs(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		h.forgetJob(namespace, name, "")
		return nil
	}
	if err != nil {
		return err
	}
	// A recovery Job is played by syncRecoveryJob, whatever its component.
	if job.Labels[componentLabel] != bootdisk.ComponentLabelValue || isRecoveryJob(job) {
		return nil
	}
	return h.playJob(ctx, job, key{kindJob, namespace, name})
}

// syncRecoveryJob plays the Job controller and the kubelet for a
// MacOSImage's recovery Job: its pod ends as SetRecoveryRuns says, with
// the builder's result line as its termination message.
func (h *Harness) syncRecoveryJob(ctx context.Context, namespace, name string) error {
	job, err := h.recoveryJobLister.Jobs(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		h.forgetJob(namespace, name, "")
		return nil
	}
	if err != nil {
		return err
	}
	return h.playJob(ctx, job, key{kindRecoveryJob, namespace, name})
}

func (h *Harness) playJob(ctx context.Context, job *batchv1.Job, k key) error {
	namespace, name := job.Namespace, job.Name
	// A finished Job is never touched again, as with the Job controller.
	if jobFinished(job) {
		h.forgetJob(namespace, name, job.UID)
		return nil
	}
	if job.DeletionTimestamp != nil {
		return nil
	}
	run := h.jobRunFor(job)
	if job.Status.StartTime == nil {
		if run.started.IsZero() {
			// The kubelet starts the pod only once every Secret it mounts
			// or reads exists (until then it is ContainerCreating, and
			// retried), and the builder reads its identity from the
			// mounted Secret.
			in, err := h.podInputs(ctx, job)
			if err != nil {
				return err
			}
			if in.missing != "" {
				if !run.waitLogged {
					h.logf("Job %s/%s waits for Secret %s", namespace, name, in.missing)
					run.waitLogged = true
				}
				h.after(k, time.Second)
				return nil
			}
			if in.identityProblem != "" && run.failure == nil && !run.recovery {
				run.failure = &JobFailure{ExitCode: bootdisk.ExitInvalidInput, Message: "bootdisk: invalid identity: " + in.identityProblem}
			}
			run.started = time.Now()
		}
		// The Job controller made the pod and the kubelet started it.
		j := job.DeepCopy()
		now := metav1.NewTime(run.started)
		j.Status.StartTime = &now
		j.Status.Active = 1
		j.Status.Ready = ptr.To[int32](0)
		j.Status.Terminating = ptr.To[int32](0)
		j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
		if _, err := h.kube.BatchV1().Jobs(namespace).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("starting: %w", err)
		}
		h.logf("Job %s/%s started", namespace, name)
		h.after(k, h.cfg.JobDuration)
		return nil
	}
	if left := time.Until(run.started.Add(h.cfg.JobDuration)); left > 0 {
		h.after(k, left)
		return nil
	}
	return h.finishJob(ctx, job, run)
}

// finishJob makes the finished pods, then writes the Job's terminal status
// in the Job controller's two steps: the interim condition
// (SuccessCriteriaMet or FailureTarget) with the counts, then the terminal
// one (Complete, with completionTime, or Failed) once no pod is
// terminating.
//
// kube-apiserver 1.37 validates Job status writes, and rejects (found by
// trying each): Complete=True without SuccessCriteriaMet=True, Failed=True
// without FailureTarget=True, Complete without completionTime,
// completionTime without Complete, a finished Job without startTime, and
// active > 0 on a finished Job. Writing both conditions in one update is
// accepted; the harness still writes two, as the Job controller does, so
// watchers see the interim state.
func (h *Harness) finishJob(ctx context.Context, job *batchv1.Job, run *jobRun) error {
	jobs := h.kube.BatchV1().Jobs(job.Namespace)
	now := metav1.Now()
	j := job.DeepCopy()
	j.Status.Active = 0
	j.Status.Ready = ptr.To[int32](0)
	j.Status.Terminating = ptr.To[int32](0)

	if run.failure == nil {
		if len(run.pods) == 0 {
			pod, err := h.createFinishedPod(ctx, job, 0, run.success)
			if err != nil {
				return err
			}
			run.pods = append(run.pods, pod)
		}
		if !hasJobCondition(j, batchv1.JobSuccessCriteriaMet) {
			j.Status.Succeeded = 1
			j.Status.Conditions = append(j.Status.Conditions, jobCondition(batchv1.JobSuccessCriteriaMet,
				batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods", now))
			var err error
			if j, err = jobs.UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("SuccessCriteriaMet: %w", err)
			}
		}
		j.Status.CompletionTime = &now
		j.Status.Conditions = append(j.Status.Conditions, jobCondition(batchv1.JobComplete,
			batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods", now))
		if _, err := jobs.UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("Complete: %w", err)
		}
		h.countJob(run, true)
		h.logf("Job %s/%s Complete", job.Namespace, job.Name)
		return nil
	}

	// Each failed pod is judged by the Job's podFailurePolicy, then by
	// its backoffLimit, as the Job controller does.
	f := *run.failure
	backoffLimit := ptr.Deref(job.Spec.BackoffLimit, 6)
	var reason, message string
	for attempt := 0; reason == ""; attempt++ {
		if len(run.pods) <= attempt {
			pod, err := h.createFinishedPod(ctx, job, f.ExitCode, f.Message)
			if err != nil {
				return err
			}
			run.pods = append(run.pods, pod)
		}
		failed := int32(attempt + 1)
		switch action, index := matchPodFailurePolicy(job, f.ExitCode); action {
		case batchv1.PodFailurePolicyActionFailJob:
			reason = batchv1.JobReasonPodFailurePolicy
			message = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %d matching %s rule at index %d",
				bootdisk.ContainerName, job.Namespace, run.pods[attempt], f.ExitCode, action, index)
		case batchv1.PodFailurePolicyActionIgnore:
			// Ignored failures are retried without counting, until the
			// Job's activeDeadlineSeconds ends it.
			reason, message = batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline"
			failed = 0
		default:
			if failed > backoffLimit {
				reason, message = batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"
			}
		}
		j.Status.Failed = failed
	}
	if !hasJobCondition(j, batchv1.JobFailureTarget) {
		j.Status.Conditions = append(j.Status.Conditions, jobCondition(batchv1.JobFailureTarget, reason, message, now))
		var err error
		if j, err = jobs.UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("FailureTarget: %w", err)
		}
	}
	j.Status.Conditions = append(j.Status.Conditions, jobCondition(batchv1.JobFailed, reason, message, now))
	if _, err := jobs.UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("Failed: %w", err)
	}
	h.countJob(run, false)
	h.logf("Job %s/%s Failed (%s: %s; pod says %q)", job.Namespace, job.Name, reason, message, f.Message)
	return nil
}

// podInputs is what the kubelet and the builder find of the Secrets the
// Job's pod uses: the first one missing, and what is wrong with the
// identity in the Secret mounted at bootdisk.IdentityMountPath.
type podInputs struct {
	missing         string
	identityProblem string
}

func (h *Harness) podInputs(ctx context.Context, job *batchv1.Job) (podInputs, error) {
	var in podInputs
	spec := job.Spec.Template.Spec
	secrets := map[string]*corev1.Secret{}
	get := func(name string, optional *bool) (*corev1.Secret, bool, error) {
		if s, ok := secrets[name]; ok {
			return s, s != nil || ptr.Deref(optional, false), nil
		}
		s, err := h.kube.CoreV1().Secrets(job.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			secrets[name] = nil
			return nil, ptr.Deref(optional, false), nil
		}
		if err != nil {
			return nil, false, err
		}
		secrets[name] = s
		return s, true, nil
	}
	volumes := map[string]*corev1.Secret{}
	for _, v := range spec.Volumes {
		if v.Secret == nil {
			continue
		}
		s, ok, err := get(v.Secret.SecretName, v.Secret.Optional)
		if err != nil {
			return in, err
		}
		if !ok {
			in.missing = v.Secret.SecretName
			return in, nil
		}
		volumes[v.Name] = s
	}
	for _, c := range spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				continue
			}
			ref := e.ValueFrom.SecretKeyRef
			s, ok, err := get(ref.Name, ref.Optional)
			if err != nil {
				return in, err
			}
			if !ok || (s != nil && s.Data[ref.Key] == nil && !ptr.Deref(ref.Optional, false)) {
				in.missing = ref.Name + " (key " + ref.Key + ")"
				return in, nil
			}
		}
		if c.Name != bootdisk.ContainerName {
			continue
		}
		var identitySecret *corev1.Secret
		for _, m := range c.VolumeMounts {
			if m.MountPath == bootdisk.IdentityMountPath {
				identitySecret = volumes[m.Name]
			}
		}
		in.identityProblem = identityProblem(c.Args, identitySecret)
	}
	return in, nil
}

// identityProblem plays the builder's check of its identity: the model
// from --model, every other value from the mounted identity Secret. It
// names what is wrong and never a value, as the builder's failure line
// (the pod's termination message, which the view role may read) does.
func identityProblem(args []string, s *corev1.Secret) string {
	if s == nil {
		return "no identity Secret mounted at " + bootdisk.IdentityMountPath
	}
	model := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--model="); ok {
			model = v
		}
	}
	value := func(key string) string { return strings.TrimSpace(string(s.Data[key])) }
	mac := value(bootdisk.IdentityKeyMACAddress)
	var bad []string
	for _, f := range []struct {
		key   string
		check func(string) error
	}{
		{"model", func(string) error { return identity.ValidateModel(model) }},
		{bootdisk.IdentityKeySerialNumber, identity.ValidateSerialNumber},
		{bootdisk.IdentityKeyBoardSerialNumber, identity.ValidateBoardSerialNumber},
		{bootdisk.IdentityKeySystemUUID, identity.ValidateSystemUUID},
		{bootdisk.IdentityKeyMACAddress, identity.ValidateMACAddress},
		{bootdisk.IdentityKeyROM, func(rom string) error { return identity.ValidateROM(rom, mac) }},
	} {
		if f.check(value(f.key)) != nil {
			bad = append(bad, f.key)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return strings.Join(bad, ", ") + " missing or not valid"
}

// matchPodFailurePolicy returns the action and index of the first rule of
// the Job's podFailurePolicy matching a builder exit code ("" if none).
// Rules on pod conditions never match: the harness's pods are not
// disrupted.
func matchPodFailurePolicy(job *batchv1.Job, exitCode int32) (batchv1.PodFailurePolicyAction, int) {
	if job.Spec.PodFailurePolicy == nil {
		return "", -1
	}
	for i, r := range job.Spec.PodFailurePolicy.Rules {
		req := r.OnExitCodes
		if req == nil || (req.ContainerName != nil && *req.ContainerName != bootdisk.ContainerName) {
			continue
		}
		in := false
		for _, v := range req.Values {
			in = in || v == exitCode
		}
		if in == (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) {
			return r.Action, i
		}
	}
	return "", -1
}

func (h *Harness) countJob(run *jobRun, succeeded bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if run.outcomeCounted {
		return
	}
	run.outcomeCounted = true
	if succeeded {
		h.stats.JobsSucceeded++
	} else {
		h.stats.JobsFailed++
	}
}

func (h *Harness) forgetJob(namespace, name string, keep types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for uid, r := range h.jobRuns {
		if r.namespace == namespace && r.name == name && (keep == "" || uid == keep) {
			delete(h.jobRuns, uid)
		}
	}
}

// createFinishedPod records one finished run of the builder as the Job
// controller and the kubelet leave it: a Pod of the Job's template, owned
// by the Job, on a node, terminated with the builder's exit code and
// termination message. Pods are made only once finished so that a Pod
// the harness started can never be left Running without a kubelet to
// delete it (which would hold its namespace's deletion forever).
func (h *Harness) createFinishedPod(ctx context.Context, job *batchv1.Job, exitCode int32, message string) (string, error) {
	tmpl := job.Spec.Template
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: job.Name + "-",
			Namespace:    job.Namespace,
			Labels:       copyMap(tmpl.Labels),
			Annotations:  copyMap(tmpl.Annotations),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = h.pickNode()
	pods := h.kube.CoreV1().Pods(job.Namespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("creating the builder pod: %w", err)
	}
	now := metav1.Now()
	started := metav1.NewTime(now.Add(-h.cfg.JobDuration))
	phase, reason, readyReason := corev1.PodSucceeded, "Completed", "PodCompleted"
	if exitCode != 0 {
		phase, reason, readyReason = corev1.PodFailed, "Error", "PodFailed"
	}
	cond := func(t corev1.PodConditionType, s corev1.ConditionStatus, r string) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: s, Reason: r, LastTransitionTime: now}
	}
	created.Status = corev1.PodStatus{
		Phase:     phase,
		StartTime: &started,
		HostIP:    "127.0.0.1",
		Conditions: []corev1.PodCondition{
			cond(corev1.PodScheduled, corev1.ConditionTrue, ""),
			cond(corev1.PodInitialized, corev1.ConditionTrue, readyReason),
			cond(corev1.ContainersReady, corev1.ConditionFalse, readyReason),
			cond(corev1.PodReady, corev1.ConditionFalse, readyReason),
		},
	}
	for _, c := range created.Spec.Containers {
		created.Status.ContainerStatuses = append(created.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image,
			ContainerID: "containerd://" + strings.ReplaceAll(string(created.UID), "-", ""),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exitCode, Reason: reason, Message: message, StartedAt: started, FinishedAt: now,
				ContainerID: "containerd://" + strings.ReplaceAll(string(created.UID), "-", ""),
			}},
			Started: ptr.To(false),
		})
	}
	if _, err := pods.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		// Never leave a bound, non-terminal pod behind: without a kubelet
		// nothing would ever finish deleting it.
		_ = pods.Delete(context.WithoutCancel(ctx), created.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		return "", fmt.Errorf("finishing the builder pod: %w", err)
	}
	h.mu.Lock()
	h.stats.PodsCreated++
	h.mu.Unlock()
	return created.Name, nil
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
