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
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// Labels and annotations on the objects the image controller makes (the
// recovery volume and Jobs, the golden DataVolume, a DataSource it
// creates). Never dockerios.io/machine-uid: a golden volume cloned from a
// machine is not the machine's, and its teardown must not take it.
const (
	// ImageLabel names the image (shortened like the object names when
	// longer than a label value may be).
	ImageLabel = "dockerios.io/image"
	// ImageUIDLabel ties an object to its image by UID: a recreated image
	// of the same name does not count its predecessor's Jobs.
	ImageUIDLabel = "dockerios.io/image-uid"
	// PromotedFromLabel is the UID of the install session a golden volume
	// was cloned from.
	PromotedFromLabel = "dockerios.io/promoted-from-uid"
	ManagedByLabel    = "app.kubernetes.io/managed-by"
	ManagedByValue    = "dockerios-controller"

	// RecoveryReleaseAnnotation and RecoveryBoardIDAnnotation on the
	// recovery volume record what it was made for (spec.source.recovery's
	// release and boardID at the time): a volume that no longer matches
	// the spec is deleted and the fetch starts over.
	RecoveryReleaseAnnotation = "dockerios.io/recovery-release"
	RecoveryBoardIDAnnotation = "dockerios.io/recovery-board-id"
	// MacOSVersionAnnotation on a golden DataVolume is the macOS version
	// the install session's agent reported before its guest was stopped.
	MacOSVersionAnnotation = "dockerios.io/macos-version"
	// cdiDeleteAfterCompletion asks CDI to keep the golden DataVolume once
	// it succeeded, so what was cloned stays observable.
	cdiDeleteAfterCompletion = "cdi.kubevirt.io/storage.deleteAfterCompletion"
)

// base shortens name so that base+suffix is a DNS label (CDI makes pods
// and labels of volume names): a prefix and a hash of the whole when too
// long.
func base(name, suffix string) string {
	if max := validation.DNS1123LabelMaxLength - len(suffix); len(name) > max {
		sum := sha256.Sum256([]byte(name))
		h := "-" + hex.EncodeToString(sum[:])[:8]
		name = strings.TrimRight(name[:max-len(h)], "-.") + h
	}
	return name + suffix
}

// RecoveryVolumeName is the PersistentVolumeClaim, in the DataSource's
// namespace, the recovery image is written to.
func RecoveryVolumeName(img *v1alpha1.MacOSImage) string { return base(img.Name, "-recovery") }

// GoldenVolumeName is the DataVolume (and its PersistentVolumeClaim), in
// the DataSource's namespace, a promotion of machine clones its system
// disk into: one per image and install session, so a pass never clones
// twice.
func GoldenVolumeName(img *v1alpha1.MacOSImage, m *v1alpha1.MacOSMachine) string {
	return base(img.Name, "-"+uid8(string(m.UID)))
}

// ClonedFrom says whether volume, a promotion's golden volume, was cloned
// from the machine with uid: a session deleted and made again under the
// same name is another machine, whose disk that promotion never saw.
func ClonedFrom(volume string, uid types.UID) bool {
	return volume != "" && strings.HasSuffix(volume, "-"+uid8(string(uid)))
}

func uid8(uid string) string {
	uid = strings.ReplaceAll(uid, "-", "")
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return uid
}

func imageLabels(img *v1alpha1.MacOSImage) map[string]string {
	return map[string]string{
		ImageLabel:     base(img.Name, ""),
		ImageUIDLabel:  string(img.UID),
		ManagedByLabel: ManagedByValue,
	}
}

// machineNames are the names the machine controller gives a machine's
// VirtualMachine and system disk (pkg/controller/machine.NamesFor, kept
// the same here so that this package does not build on the machine
// controller's).
func machineNames(m *v1alpha1.MacOSMachine) (vm, systemDisk string) {
	const longestSuffix = len("-system-") + 8
	b := m.Name
	if max := validation.DNS1123LabelMaxLength - longestSuffix; len(b) > max {
		sum := sha256.Sum256([]byte(m.Name))
		h := "-" + hex.EncodeToString(sum[:])[:8]
		b = strings.TrimRight(b[:max-len(h)], "-.") + h
	}
	return b, b + "-system-" + uid8(string(m.UID))
}
