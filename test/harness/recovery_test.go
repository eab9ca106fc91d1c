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
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/bootdisk"
	"github.com/dockerios/dockerios/test/framework"
)

// A MacOSImage's recovery Jobs end as queued, each pod terminated with
// the builder's exit code and result line; with none queued, Converted.
func (e *testEnv) testRecoveryJob(t *testing.T) {
	img := &v1alpha1.MacOSImage{ObjectMeta: metav1.ObjectMeta{Name: "harness-recovery", UID: "img-uid"},
		Spec: v1alpha1.MacOSImageSpec{Release: "sonoma", Source: v1alpha1.ImageSource{
			DataSource: &v1alpha1.NamespacedObjectReference{Namespace: e.ns, Name: "harness-recovery"},
			Recovery:   &v1alpha1.RecoverySource{Release: "sonoma", BoardID: "Mac-827FAC58A8FDFA22"}}}}
	e.h.SetRecoveryRuns(img.Name, RecoveryServiceRefused("osrecovery.apple.com answered 403"), RecoveryChecksumMismatch("chunk 3 does not match"))
	for i, want := range []struct {
		cond     batchv1.JobConditionType
		exit     int32
		reason   string
		contains string
	}{
		{batchv1.JobFailed, RecoveryExitServiceRefused, bootdisk.RecoveryServiceRefused, "answered 403"},
		{batchv1.JobFailed, RecoveryExitChecksumMismatch, bootdisk.RecoveryChecksumMismatch, "chunk 3"},
		{batchv1.JobComplete, 0, bootdisk.RecoveryConverted, ""},
	} {
		attempt := int32(i + 1)
		t.Run(fmt.Sprint(attempt), func(t *testing.T) {
			job, err := bootdisk.RecoveryJob(img, e.ns, bootdisk.RecoveryJobOptions{Image: "registry.test/bootdisk:1", OutputPVCName: "harness-recovery", Attempt: attempt})
			require.NoError(t, err)
			// The image exists only here: its owner reference would have
			// the garbage collector delete the Job at once.
			job.OwnerReferences = nil
			_, err = e.kube.BatchV1().Jobs(e.ns).Create(t.Context(), job, metav1.CreateOptions{})
			require.NoError(t, err)
			done := e.waitJob(t, job.Name, want.cond)
			pods := e.jobPods(t, done)
			require.Len(t, pods, 1, "backoffLimit 0: one pod")
			cs := pods[0].Status.ContainerStatuses
			require.NotEmpty(t, cs)
			term := cs[0].State.Terminated
			require.NotNil(t, term)
			assert.Equal(t, want.exit, term.ExitCode)
			res, err := bootdisk.ParseRecoveryResult(term.Message)
			require.NoError(t, err, "termination message %q", term.Message)
			assert.Equal(t, want.reason, res.Reason)
			assert.Contains(t, res.Message, want.contains)
			if want.reason == bootdisk.RecoveryConverted {
				assert.Len(t, res.ImageSHA256, 64)
				assert.NotEmpty(t, res.Product)
			}
		})
	}
}

// A DataSource is Ready once its claim exists (here: a DataVolume of its
// name Succeeded), not before; a blank DataVolume is made as an import;
// a clone of a claim in another namespace succeeds.
func (e *testEnv) testDataSource(t *testing.T) {
	ds := &cdiv1.DataSource{TypeMeta: metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataSource"},
		ObjectMeta: metav1.ObjectMeta{Name: "golden", Namespace: e.ns},
		Spec:       cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: e.ns, Name: "golden-1"}}}}
	e.create(t, DataSourceGVR, ds)
	ready := func(want corev1.ConditionStatus, reason string) {
		t.Helper()
		framework.Eventually(t, 20*time.Second, func() string {
			u, err := e.dyn.Resource(DataSourceGVR).Namespace(e.ns).Get(t.Context(), "golden", metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			got, err := fromUnstructured[cdiv1.DataSource](u)
			if err != nil {
				return err.Error()
			}
			for _, c := range got.Status.Conditions {
				if c.Type == cdiv1.DataSourceReady && c.Status == want && c.Reason == reason {
					return ""
				}
			}
			return fmt.Sprintf("DataSource status %+v, want Ready=%s %s", got.Status, want, reason)
		})
	}
	ready(corev1.ConditionFalse, "NotFound")

	blank := &cdiv1.DataVolume{TypeMeta: metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: "blank-system", Namespace: e.ns},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Gi")}}}}}
	phases := e.watchDataVolumePhases(t, "blank-system")
	e.create(t, DataVolumeGVR, blank)
	assert.Equal(t, []cdiv1.DataVolumePhase{cdiv1.ImportScheduled, cdiv1.ImportInProgress, cdiv1.Succeeded}, phases(cdiv1.Succeeded))

	other := "harness-test-images"
	_, err := e.kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{})
	require.NoError(t, err)
	clone := &cdiv1.DataVolume{TypeMeta: metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: "golden-1", Namespace: e.ns},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: other, Name: "install-system"}},
			Storage: &cdiv1.StorageSpec{StorageClassName: ptr.To("fast"),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Gi")}}}}}
	e.create(t, DataVolumeGVR, clone)
	e.waitDataVolume(t, "golden-1", cdiv1.Succeeded)
	ready(corev1.ConditionTrue, "Ready")
}
