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

// Package launcherwebhook is the mutating admission webhook that gives the
// DockerIOS hook sidecar of a virt-launcher pod Apple's SMC key (OSK) from a
// Secret.
//
// KubeVirt's hook sidecars can mount one ConfigMap key or a PVC, never a
// Secret, and our rule is that the OSK lives in a Secret. So a VMI names its
// Secret with the label annotations.OSKSecretLabel (KubeVirt copies VMI
// labels to the launcher pod), and this webhook, called by kube-apiserver
// when virt-controller creates that pod, adds a Secret volume to the pod and
// mounts it into the sidecar container only, exactly where that container's
// --osk-file argument says the hook reads the key. The compute container and
// the guest never see it.
//
// Mounting a Secret of the pod's own namespace gives nobody anything new:
// whoever can create a pod there can mount that Secret directly.
package launcherwebhook

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/sidecar-hook/annotations"
)

const (
	// KubeVirtLabel is the label KubeVirt puts on its pods; virt-launcher
	// pods carry LauncherValue. The webhook's objectSelector needs both
	// this and annotations.OSKSecretLabel, so no other pod waits on it.
	KubeVirtLabel = "kubevirt.io"
	LauncherValue = "virt-launcher"

	// VolumeName is the pod volume the webhook adds.
	VolumeName = "dockerios-osk"

	// sidecarPrefix is how virt-controller names hook sidecar containers:
	// hook-sidecar-<index in the hookSidecars annotation>.
	sidecarPrefix = "hook-sidecar-"

	// oskFileFlag is the DockerIOS hook's flag naming the key's file; the
	// container whose arguments carry it is the DockerIOS hook.
	oskFileFlag = "--osk-file"

	// fileMode lets the sidecar read the key whatever user it runs as
	// (KubeVirt runs sidecars as the qemu user, without an fsGroup on
	// every install). The volume is mounted into the sidecar container
	// alone, so nothing else in the pod can read it.
	fileMode int32 = 0o444
)

// PatchOp is one RFC 6902 JSON Patch operation.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Mutate returns the JSON Patch that mounts the OSK Secret named by the pod's
// annotations.OSKSecretLabel into its DockerIOS hook sidecar, or an error
// saying why the pod must not be created. A pod without the label gets no
// patch; a pod that already has the volume (webhook reinvocation, or a pod
// recreated from its own spec) gets none either, so the mutation is
// idempotent.
func Mutate(pod *corev1.Pod) ([]PatchOp, error) {
	secret, ok := pod.Labels[annotations.OSKSecretLabel]
	if !ok {
		return nil, nil
	}
	labelPath := field.NewPath("metadata", "labels").Key(annotations.OSKSecretLabel)
	if msgs := validation.IsDNS1123Subdomain(secret); len(msgs) > 0 {
		return nil, field.Invalid(labelPath, secret, "must name a Secret: "+strings.Join(msgs, "; "))
	}

	sidecar, oskFile, err := findSidecar(pod)
	if err != nil {
		return nil, err
	}
	dir, file := path.Split(oskFile)
	dir = path.Clean(dir)
	if !path.IsAbs(oskFile) || file == "" || file == "." || file == ".." || dir == "/" {
		return nil, field.Invalid(field.NewPath("spec", "containers").Index(sidecar).Child("args"), oskFile,
			"the hook's --osk-file must be an absolute path to a file below a directory of its own, which the Secret is mounted on")
	}
	// Pod validation refuses two mounts at one path, and the Secret would
	// hide what is mounted there (KubeVirt's hook socket directory).
	for j, vm := range pod.Spec.Containers[sidecar].VolumeMounts {
		if vm.Name != VolumeName && path.Clean(vm.MountPath) == dir {
			return nil, field.Invalid(field.NewPath("spec", "containers").Index(sidecar).Child("volumeMounts").Index(j).Child("mountPath"), vm.MountPath,
				fmt.Sprintf("volume %s is mounted where the hook's --osk-file %s needs the OSK Secret mounted; point --osk-file at a directory of its own", vm.Name, oskFile))
		}
	}

	for i, v := range pod.Spec.Volumes {
		if v.Name != VolumeName {
			continue
		}
		if v.Secret == nil || v.Secret.SecretName != secret {
			return nil, field.Duplicate(field.NewPath("spec", "volumes").Index(i).Child("name"),
				fmt.Sprintf("%s (the DockerIOS webhook adds a volume of that name for Secret %q)", VolumeName, secret))
		}
		return nil, nil // already mutated
	}

	volume := corev1.Volume{Name: VolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  secret,
		Items:       []corev1.KeyToPath{{Key: annotations.OSKSecretKey, Path: file}},
		DefaultMode: ptr.To(fileMode),
	}}}
	mount := corev1.VolumeMount{Name: VolumeName, MountPath: dir, ReadOnly: true}

	var ops []PatchOp
	if len(pod.Spec.Volumes) == 0 {
		ops = append(ops, PatchOp{Op: "add", Path: "/spec/volumes", Value: []corev1.Volume{volume}})
	} else {
		ops = append(ops, PatchOp{Op: "add", Path: "/spec/volumes/-", Value: volume})
	}
	mountsPath := fmt.Sprintf("/spec/containers/%d/volumeMounts", sidecar)
	if len(pod.Spec.Containers[sidecar].VolumeMounts) == 0 {
		ops = append(ops, PatchOp{Op: "add", Path: mountsPath, Value: []corev1.VolumeMount{mount}})
	} else {
		ops = append(ops, PatchOp{Op: "add", Path: mountsPath + "/-", Value: mount})
	}
	return ops, nil
}

// findSidecar returns the index of the one hook sidecar container running
// the DockerIOS hook and the file its --osk-file names.
func findSidecar(pod *corev1.Pod) (int, string, error) {
	found, oskFile := -1, ""
	for i, c := range pod.Spec.Containers {
		if !strings.HasPrefix(c.Name, sidecarPrefix) {
			continue
		}
		f, ok := oskFileArg(c.Args)
		if !ok {
			continue
		}
		if found >= 0 {
			return 0, "", field.Invalid(field.NewPath("spec", "containers").Index(i).Child("args"), c.Args,
				fmt.Sprintf("container %q also runs the DockerIOS hook (%s): a pod must run exactly one", pod.Spec.Containers[found].Name, oskFileFlag))
		}
		found, oskFile = i, f
	}
	if found < 0 {
		return 0, "", field.Required(field.NewPath("spec", "containers"),
			fmt.Sprintf("label %s names an OSK Secret, but no %s* container runs the DockerIOS hook with an %s argument (is %s set on the VMI?)",
				annotations.OSKSecretLabel, sidecarPrefix, oskFileFlag, annotations.HookSidecarsAnnotation))
	}
	return found, oskFile, nil
}

// oskFileArg finds --osk-file=F or --osk-file F, as Go's flag package
// accepts them (with one or two dashes).
func oskFileArg(args []string) (string, bool) {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if "--"+name != oskFileFlag {
			continue
		}
		if hasValue {
			return value, true
		}
		if i+1 < len(args) {
			return args[i+1], true
		}
		return "", true
	}
	return "", false
}
