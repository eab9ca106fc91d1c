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

// Package bootdisk builds the Kubernetes Job that renders a machine's
// OpenCore boot disk with the bootdisk builder image (bootdisk/ in this
// repository, GPL-3.0). The builder is only ever run as a separate
// container: this package knows its command-line contract
// (bootdisk/README.md) and nothing of its code.
package bootdisk

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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

// The builder's contract (bootdisk/README.md).
const (
	// OutputMountPath is where the output PersistentVolumeClaim is mounted.
	OutputMountPath = "/output"
	// ScratchMountPath is the emptyDir the raw image is assembled in.
	ScratchMountPath = "/scratch"
	// IdentityMountPath is where the identity Secret is mounted, read-only:
	// one file per value (the builder's --identity-dir).
	IdentityMountPath = "/identity"
	// TokenEnv carries the per-machine agent token.
	TokenEnv = "DOCKERIOS_AGENT_TOKEN"
	// ResultFile, in the output volume, marks a finished artifact.
	ResultFile = "result.json"
	// ImageFileRaw is the raw image's name: what KubeVirt boots from a
	// file-system PersistentVolumeClaim.
	ImageFileRaw = "disk.img"
	// ImageFileQCOW2 is the qcow2 image's name.
	ImageFileQCOW2 = "bootdisk.qcow2"

	// Exit codes.
	ExitFailure      = 1 // retryable
	ExitInvalidInput = 2 // the same input fails again
	ExitOutputVolume = 3 // the output volume is read-only, full or failing

	// ContainerName is the builder container's name in the Job's pod.
	ContainerName = "bootdisk"
	// MachineUIDLabel holds the UID of the machine a Job renders for. Not
	// its name: a label value is at most 63 characters, a machine name up
	// to 253 (JobName shortens names for the same reason).
	MachineUIDLabel = "dockerios.io/machine-uid"
	// ComponentLabelValue is the app.kubernetes.io/component of the Jobs.
	ComponentLabelValue = "bootdisk"

	// nonRootID is the user and group the builder runs as.
	nonRootID = 65532
)

// Defaults of JobOptions.
const (
	DefaultBackoffLimit          = int32(2)
	DefaultActiveDeadlineSeconds = int64(900)
	DefaultTokenSecretKey        = "token"
	DefaultFormat                = "raw"
)

// Keys of the identity Secret: the MacOSIdentity spec's field names, which
// are the file names the builder reads from IdentityMountPath.
const (
	IdentityKeySerialNumber      = "serialNumber"
	IdentityKeyBoardSerialNumber = "boardSerialNumber"
	IdentityKeySystemUUID        = "systemUUID"
	IdentityKeyMACAddress        = "macAddress"
	IdentityKeyROM               = "rom"
)

// IdentitySecretData is what the identity Secret holds: the identity's five
// values, one key each. They reach the builder only through this Secret,
// never as arguments or plain environment variables: a Job's and a Pod's
// spec are readable by everyone Kubernetes' view role admits to the
// namespace, who may not read the identity.
func IdentitySecretData(id *v1alpha1.MacOSIdentity) map[string][]byte {
	s := id.Spec
	return map[string][]byte{
		IdentityKeySerialNumber:      []byte(s.SerialNumber),
		IdentityKeyBoardSerialNumber: []byte(s.BoardSerialNumber),
		IdentityKeySystemUUID:        []byte(s.SystemUUID),
		IdentityKeyMACAddress:        []byte(s.MACAddress),
		IdentityKeyROM:               []byte(s.ROM),
	}
}

// JobOptions are what the controller decides beyond the three objects.
type JobOptions struct {
	// Image is the bootdisk builder image, by digest in production.
	Image string
	// OutputPVCName is the PersistentVolumeClaim, in the machine's
	// namespace, the image is written to.
	OutputPVCName string
	// TokenSecretName is the Secret, in the machine's namespace, holding
	// the agent token under TokenSecretKey (default "token").
	TokenSecretName string
	TokenSecretKey  string
	// IdentitySecretName is the Secret, in the machine's namespace, holding
	// IdentitySecretData of the identity. It must exist before the Job's
	// pod can start.
	IdentitySecretName string
	// Format is "raw" (default; disk.img) or "qcow2" (bootdisk.qcow2).
	Format string
	// BackoffLimit defaults to DefaultBackoffLimit; ActiveDeadlineSeconds
	// to DefaultActiveDeadlineSeconds.
	BackoffLimit          *int32
	ActiveDeadlineSeconds *int64
	// ServiceAccountName, ImagePullPolicy and ImagePullSecrets are passed
	// through; the builder needs no API access.
	ServiceAccountName string
	ImagePullPolicy    corev1.PullPolicy
	ImagePullSecrets   []corev1.LocalObjectReference
}

// JobName is the Job's deterministic name: the machine's name (shortened if
// need be) and a hash of what the disk depends on, so the same machine,
// identity and display give the same Job, and a change gives a new one.
func JobName(machine *v1alpha1.MacOSMachine, id *v1alpha1.MacOSIdentity, class *v1alpha1.MacOSMachineClass) string {
	w, h := display(class)
	s := id.Spec
	h8 := sha256.Sum256([]byte(strings.Join([]string{
		string(machine.UID), machine.Namespace, machine.Name, id.Name,
		s.Model, s.SerialNumber, s.BoardSerialNumber, s.SystemUUID, s.MACAddress, s.ROM,
		strconv.Itoa(int(w)), strconv.Itoa(int(h)),
	}, "\x00")))
	suffix := "-bootdisk-" + hex.EncodeToString(h8[:])[:10]
	name := machine.Name
	// 63: Job names become a label value on their pods.
	if max := validation.DNS1123LabelMaxLength - len(suffix); len(name) > max {
		name = strings.TrimRight(name[:max], "-.")
	}
	return name + suffix
}

func display(class *v1alpha1.MacOSMachineClass) (int32, int32) {
	w, h := class.Spec.Display.Width, class.Spec.Display.Height
	if w == 0 {
		w = v1alpha1.DefaultDisplayWidth
	}
	if h == 0 {
		h = v1alpha1.DefaultDisplayHeight
	}
	return w, h
}

func model(class *v1alpha1.MacOSMachineClass) string {
	if class.Spec.SMBIOSModel == "" {
		return v1alpha1.DefaultSMBIOSModel
	}
	return class.Spec.SMBIOSModel
}

// Job returns the batch/v1 Job that renders machine's boot disk from the
// identity it holds and its class's display. It checks that the three
// objects belong together and that opts are complete.
func Job(machine *v1alpha1.MacOSMachine, id *v1alpha1.MacOSIdentity, class *v1alpha1.MacOSMachineClass, opts JobOptions) (*batchv1.Job, error) {
	if machine == nil || id == nil || class == nil {
		return nil, errors.New("bootdisk: machine, identity and class are all required")
	}
	var problems []string
	if machine.Name == "" || machine.Namespace == "" || machine.UID == "" {
		problems = append(problems, "machine needs a name, a namespace and a uid")
	}
	if class.Name != machine.Spec.ClassName {
		problems = append(problems, fmt.Sprintf("class %q is not the machine's class %q", class.Name, machine.Spec.ClassName))
	}
	if ref := machine.Status.IdentityRef; ref == nil || ref.Name != id.Name {
		problems = append(problems, fmt.Sprintf("identity %q is not the one the machine holds", id.Name))
	}
	if a := id.Status.Allocation; a != nil && (a.MachineUID != string(machine.UID) || a.MachineName != machine.Name || a.MachineNamespace != machine.Namespace) {
		problems = append(problems, fmt.Sprintf("identity %q is allocated to %s/%s", id.Name, a.MachineNamespace, a.MachineName))
	}
	if id.Spec.Model != model(class) {
		problems = append(problems, fmt.Sprintf("identity model %q is not the class's SMBIOS model %q", id.Spec.Model, model(class)))
	}
	for _, f := range []struct{ name, value string }{
		{"serialNumber", id.Spec.SerialNumber}, {"boardSerialNumber", id.Spec.BoardSerialNumber},
		{"systemUUID", id.Spec.SystemUUID}, {"macAddress", id.Spec.MACAddress}, {"rom", id.Spec.ROM},
	} {
		if f.value == "" {
			problems = append(problems, "identity "+f.name+" is empty")
		}
	}
	format := opts.Format
	if format == "" {
		format = DefaultFormat
	}
	if format != "raw" && format != "qcow2" {
		problems = append(problems, fmt.Sprintf("format %q is not raw or qcow2", format))
	}
	if opts.Image == "" {
		problems = append(problems, "builder image is empty")
	}
	if opts.OutputPVCName == "" {
		problems = append(problems, "output PersistentVolumeClaim is empty")
	}
	if opts.TokenSecretName == "" {
		problems = append(problems, "token Secret is empty")
	}
	if opts.IdentitySecretName == "" {
		problems = append(problems, "identity Secret is empty")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("bootdisk: %s", strings.Join(problems, "; "))
	}
	key := opts.TokenSecretKey
	if key == "" {
		key = DefaultTokenSecretKey
	}
	w, h := display(class)
	name := JobName(machine, id, class)
	labels := map[string]string{
		"app.kubernetes.io/name":      "dockerios",
		"app.kubernetes.io/component": ComponentLabelValue,
		MachineUIDLabel:               string(machine.UID),
	}
	// The model is no secret (the class names it); every identity value
	// comes from the mounted Secret.
	args := []string{
		"render",
		"--model=" + id.Spec.Model,
		"--identity-dir=" + IdentityMountPath,
		"--width=" + strconv.Itoa(int(w)),
		"--height=" + strconv.Itoa(int(h)),
		"--format=" + format,
		"--output-dir=" + OutputMountPath,
		"--scratch-dir=" + ScratchMountPath,
	}
	backoff := ptr.Deref(opts.BackoffLimit, DefaultBackoffLimit)
	deadline := ptr.Deref(opts.ActiveDeadlineSeconds, DefaultActiveDeadlineSeconds)
	job := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: machine.Namespace,
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         v1alpha1.SchemeGroupVersion.String(),
				Kind:               "MacOSMachine",
				Name:               machine.Name,
				UID:                machine.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          &backoff,
			ActiveDeadlineSeconds: &deadline,
			// Bad input and a bad volume fail the same way every time.
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{
					Action: batchv1.PodFailurePolicyActionFailJob,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
						ContainerName: ptr.To(ContainerName),
						Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
						Values:        []int32{ExitInvalidInput, ExitOutputVolume},
					},
				},
				{
					Action:          batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
				},
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					ServiceAccountName:           opts.ServiceAccountName,
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
						Name:            ContainerName,
						Image:           opts.Image,
						ImagePullPolicy: opts.ImagePullPolicy,
						Args:            args,
						Env: []corev1.EnvVar{
							{Name: TokenEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
								LocalObjectReference: corev1.LocalObjectReference{Name: opts.TokenSecretName},
								Key:                  key,
							}}},
							{Name: "TMPDIR", Value: ScratchMountPath},
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "output", MountPath: OutputMountPath},
							{Name: "scratch", MountPath: ScratchMountPath},
							{Name: "identity", MountPath: IdentityMountPath, ReadOnly: true},
						},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{
								corev1.ResourceCPU:    resource.MustParse("100m"),
								corev1.ResourceMemory: resource.MustParse("64Mi"),
							},
							Limits: corev1.ResourceList{
								corev1.ResourceMemory: resource.MustParse("256Mi"),
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
						// The raw image is assembled here before it is copied
						// to the output volume: 4 GiB is the largest disk.
						{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("4Gi"))}}},
						// Readable by the pod's group (its fsGroup) only.
						{Name: "identity", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName: opts.IdentitySecretName, DefaultMode: ptr.To(int32(0o440))}}},
					},
				},
			},
		},
	}
	return job, nil
}
