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

package bootdisk

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// The recovery Job runs the builder image's `bootdisk recovery`
// (bootdisk/README.md, "recovery"): OSX-KVM's fetch-macOS-v2.py asks Apple's
// recovery service for a release's BaseSystem.dmg, which is verified
// against the service's chunklist and converted to ImageFileRaw on the
// output volume.

// Reasons a recovery Job ends with (the condition reasons the controller sets).
const (
	RecoveryConverted        = "Converted"
	RecoveryServiceRefused   = "ServiceRefused"
	RecoveryChecksumMismatch = "ChecksumMismatch"
	RecoveryFailed           = "Failed"
)

// Exit codes of `bootdisk recovery` besides 0 (Converted): ExitFailure (1,
// Failed, may succeed again), ExitInvalidInput (2, Failed: unknown release,
// bad board-id), ExitOutputVolume (3, Failed) and these two.
const (
	RecoveryExitServiceRefused   = 4
	RecoveryExitChecksumMismatch = 5
)

const (
	// RecoveryContainerName is the container's name in the recovery Job's pod.
	RecoveryContainerName = "recovery"
	// RecoveryComponentLabelValue is the app.kubernetes.io/component of
	// recovery Jobs.
	RecoveryComponentLabelValue = "recovery"
	// ImageLabel holds the name of the MacOSImage a recovery Job fetches
	// for (shortened with a hash when it is no valid label value).
	ImageLabel = "dockerios.io/image"
	// ManagedByLabel / ManagedByValue mark the controller's Jobs.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "dockerios-controller"
	// DefaultRecoveryActiveDeadlineSeconds bounds one attempt: the script
	// sets no network timeout, so a stalled download would otherwise hang.
	DefaultRecoveryActiveDeadlineSeconds = int64(3 * 3600)
)

// RecoveryJobOptions are what the controller decides for a recovery Job.
type RecoveryJobOptions struct {
	// Image is the bootdisk builder image, by digest in production.
	Image string
	// OutputPVCName is the PersistentVolumeClaim (file system mode), in the
	// Job's namespace, that receives disk.img.
	OutputPVCName    string
	ImagePullSecrets []corev1.LocalObjectReference
	// Attempt numbers the controller's attempts (it retries with its own
	// backoff; the Job itself never retries). Part of the Job's name.
	Attempt int32
	// ActiveDeadlineSeconds defaults to DefaultRecoveryActiveDeadlineSeconds.
	ActiveDeadlineSeconds *int64
}

const recoveryHashLen = 8

// shortened returns s if it is at most max characters and ok, else a
// prefix of s made safe and a hash of all of s.
func shortened(s string, max int, ok bool) string {
	if ok && len(s) <= max {
		return s
	}
	h := sha256.Sum256([]byte(s))
	suffix := "-" + hex.EncodeToString(h[:])[:recoveryHashLen]
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return '-'
	}, s)
	if n := max - len(suffix); len(safe) > n {
		safe = safe[:n]
	}
	safe = strings.Trim(safe, "-")
	if safe == "" {
		return suffix[1:]
	}
	return safe + suffix
}

// RecoveryJobName is the recovery Job's name for an attempt: the image's
// name (shortened, with a hash of it, when it is too long or no DNS label —
// image names may contain dots) and the attempt, e.g. "sonoma-recovery-3".
func RecoveryJobName(img *v1alpha1.MacOSImage, attempt int32) string {
	suffix := "-recovery-" + strconv.FormatInt(int64(attempt), 10)
	max := validation.DNS1123LabelMaxLength - len(suffix)
	name := shortened(img.Name, max, len(validation.IsDNS1123Label(img.Name)) == 0)
	return name + suffix
}

// imageLabelValue is img's name as a label value (names longer than 63
// characters are shortened with a hash).
func imageLabelValue(name string) string {
	return shortened(name, validation.LabelValueMaxLength, len(validation.IsValidLabelValue(name)) == 0)
}

// RecoveryJob returns the batch/v1 Job that fetches img's recovery image
// (spec.source.recovery) into opts.OutputPVCName in namespace.
func RecoveryJob(img *v1alpha1.MacOSImage, namespace string, opts RecoveryJobOptions) (*batchv1.Job, error) {
	if img == nil {
		return nil, errors.New("bootdisk: recovery job: image is required")
	}
	var problems []string
	if img.Name == "" || img.UID == "" {
		problems = append(problems, "image needs a name and a uid")
	}
	rec := img.Spec.Source.Recovery
	if rec == nil || rec.Release == "" {
		problems = append(problems, "image has no spec.source.recovery.release")
	}
	if namespace == "" {
		problems = append(problems, "namespace is empty")
	}
	if opts.Image == "" {
		problems = append(problems, "builder image is empty")
	}
	if opts.OutputPVCName == "" {
		problems = append(problems, "output PersistentVolumeClaim is empty")
	}
	if opts.Attempt < 0 {
		problems = append(problems, fmt.Sprintf("attempt %d is negative", opts.Attempt))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("bootdisk: recovery job: %s", strings.Join(problems, "; "))
	}
	args := []string{"recovery", "--release", rec.Release}
	if rec.BoardID != "" {
		args = append(args, "--board-id", rec.BoardID)
	}
	args = append(args, "--output-dir", OutputMountPath, "--scratch-dir", ScratchMountPath)
	labels := map[string]string{
		"app.kubernetes.io/name":      "dockerios",
		"app.kubernetes.io/component": RecoveryComponentLabelValue,
		ManagedByLabel:                ManagedByValue,
		ImageLabel:                    imageLabelValue(img.Name),
	}
	deadline := ptr.Deref(opts.ActiveDeadlineSeconds, DefaultRecoveryActiveDeadlineSeconds)
	job := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      RecoveryJobName(img, opts.Attempt),
			Namespace: namespace,
			Labels:    labels,
			// A MacOSImage is cluster-scoped; a namespaced object may have
			// a cluster-scoped owner.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         v1alpha1.SchemeGroupVersion.String(),
				Kind:               "MacOSImage",
				Name:               img.Name,
				UID:                img.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: batchv1.JobSpec{
			// The controller retries, with its own backoff, as a new Job.
			BackoffLimit:          ptr.To(int32(0)),
			ActiveDeadlineSeconds: &deadline,
			// A pod evicted or preempted is not a failed attempt.
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			}}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					ImagePullSecrets:             opts.ImagePullSecrets,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To(int64(nonRootID)),
						RunAsGroup:     ptr.To(int64(nonRootID)),
						FSGroup:        ptr.To(int64(nonRootID)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  RecoveryContainerName,
						Image: opts.Image,
						Args:  args,
						Env:   []corev1.EnvVar{{Name: "TMPDIR", Value: ScratchMountPath}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "output", MountPath: OutputMountPath},
							{Name: "scratch", MountPath: ScratchMountPath},
						},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{
								corev1.ResourceCPU:    resource.MustParse("100m"),
								corev1.ResourceMemory: resource.MustParse("128Mi"),
							},
							Limits: corev1.ResourceList{
								corev1.ResourceMemory: resource.MustParse("512Mi"),
							},
						},
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "output", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: opts.OutputPVCName}}},
						// BaseSystem.dmg and its chunklist are downloaded
						// here (under 1 GiB for the releases there are).
						{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("16Gi"))}}},
					},
				},
			},
		},
	}
	return job, nil
}

// RecoveryResult is the result line `bootdisk recovery` leaves as its
// termination message (and last line of stdout).
type RecoveryResult struct {
	Reason      string `json:"reason"`
	Message     string `json:"message"`
	Release     string `json:"release,omitempty"`
	BoardID     string `json:"boardID,omitempty"`
	Product     string `json:"product,omitempty"`
	ImageSHA256 string `json:"imageSHA256,omitempty"`
	RawBytes    int64  `json:"rawBytes,omitempty"`
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseRecoveryResult parses a recovery container's termination message:
// its last non-empty line (so that a message taken from the log's tail,
// with FallbackToLogsOnError, parses too) is the result as JSON. A
// Converted result must name its image's sha256 and raw size.
func ParseRecoveryResult(terminationMessage string) (RecoveryResult, error) {
	lines := strings.Split(strings.TrimSpace(terminationMessage), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	var r RecoveryResult
	if last == "" {
		return r, errors.New("bootdisk: recovery result: empty termination message")
	}
	if err := json.Unmarshal([]byte(last), &r); err != nil {
		return RecoveryResult{}, fmt.Errorf("bootdisk: recovery result: %v: %.200q", err, last)
	}
	switch r.Reason {
	case RecoveryConverted:
		if !sha256Hex.MatchString(r.ImageSHA256) || r.RawBytes <= 0 {
			return RecoveryResult{}, fmt.Errorf("bootdisk: recovery result: Converted without an image sha256 and size: %.200q", last)
		}
	case RecoveryServiceRefused, RecoveryChecksumMismatch, RecoveryFailed:
	default:
		return RecoveryResult{}, fmt.Errorf("bootdisk: recovery result: unknown reason %q", r.Reason)
	}
	return r, nil
}

var progressLineRe = regexp.MustCompile(`^progress ([0-9]{1,19}) ([0-9]{1,19})$`)

// ParseRecoveryProgress returns the last "progress DONE TOTAL" line of a
// recovery pod's log tail. Only newline-terminated lines count (the tail's
// last line may still be being written); ok is false when there is none.
func ParseRecoveryProgress(logTail []byte) (done, total int64, ok bool) {
	end := bytes.LastIndexByte(logTail, '\n')
	if end < 0 {
		return 0, 0, false
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(logTail[:end+1]))
	sc.Buffer(make([]byte, 0, 64<<10), len(logTail)+1)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	for i := len(lines) - 1; i >= 0; i-- {
		m := progressLineRe.FindStringSubmatch(strings.TrimSuffix(lines[i], "\r"))
		if m == nil {
			continue
		}
		d, err1 := strconv.ParseInt(m[1], 10, 64)
		t, err2 := strconv.ParseInt(m[2], 10, 64)
		if err1 != nil || err2 != nil || d > t {
			continue
		}
		return d, t, true
	}
	return 0, 0, false
}
