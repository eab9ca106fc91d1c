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
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/bootdisk"
	"github.com/dockerios/dockerios/pkg/controller/containerimages"
	"github.com/dockerios/dockerios/pkg/controller/external"
	dfake "github.com/dockerios/dockerios/pkg/generated/clientset/versioned/fake"
	dlisters "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

var t0 = time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)

const imagesNS = "dockerios-images"

type testEnv struct {
	t        *testing.T
	r        *Reconciler
	client   *dfake.Clientset
	kube     *fake.Clientset
	dyn      *dynamicfake.FakeDynamicClient
	machines cache.Indexer
	vmis     cache.Indexer
	recorder *record.FakeRecorder
	now      time.Time
	logs     string
}

func recoveryImage() *v1alpha1.MacOSImage {
	return &v1alpha1.MacOSImage{ObjectMeta: metav1.ObjectMeta{Name: "sonoma", UID: "img-uid-1", Generation: 1, ResourceVersion: "1"},
		Spec: v1alpha1.MacOSImageSpec{Release: "sonoma", Source: v1alpha1.ImageSource{
			DataSource: &v1alpha1.NamespacedObjectReference{Namespace: imagesNS, Name: "sonoma"},
			Recovery:   &v1alpha1.RecoverySource{Release: "sonoma", BoardID: "Mac-827FAC58A8FDFA22"}}}}
}

func newEnv(t *testing.T, img *v1alpha1.MacOSImage) *testEnv {
	t.Helper()
	e := &testEnv{t: t, now: t0}
	e.client = dfake.NewSimpleClientset(img)
	e.kube = fake.NewClientset()
	e.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		external.DataVolumes: "DataVolumeList", external.DataSources: "DataSourceList"})
	e.machines = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	e.vmis = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	e.recorder = record.NewFakeRecorder(100)
	e.r = &Reconciler{Client: e.client, Kube: e.kube, Dynamic: e.dyn,
		Machines:        dlisters.NewMacOSMachineLister(e.machines),
		VMIs:            cache.NewGenericLister(e.vmis, schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachineinstances"}),
		ContainerImages: containerimages.Fixed{Bootdisk: "registry.test/bootdisk:1", PullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}},
		Recorder:        e.recorder,
		Now:             func() time.Time { return e.now },
		Logs: func(context.Context, string, string, string, int64) ([]byte, error) {
			return []byte(e.logs), nil
		},
	}
	return e
}

// reconcile runs one pass and returns its requeue and how many status
// writes it made.
func (e *testEnv) reconcile() (time.Duration, int) {
	e.t.Helper()
	before := e.statusWrites()
	d, err := e.r.Reconcile(context.Background(), "sonoma")
	require.NoError(e.t, err)
	return d, e.statusWrites() - before
}

func (e *testEnv) statusWrites() int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func (e *testEnv) image() *v1alpha1.MacOSImage {
	e.t.Helper()
	img, err := e.client.DockeriosV1alpha1().MacOSImages().Get(context.Background(), "sonoma", metav1.GetOptions{})
	require.NoError(e.t, err)
	return img
}

func (e *testEnv) cond(typ string) metav1.Condition {
	if c := meta.FindStatusCondition(e.image().Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ, Status: "absent"}
}

func (e *testEnv) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func (e *testEnv) job(name string) *batchv1.Job {
	e.t.Helper()
	j, err := e.kube.BatchV1().Jobs(imagesNS).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(e.t, err)
	return j
}

// finish plays the Job controller and the kubelet: the Job's condition,
// and its pod, terminated with the builder's termination message.
func (e *testEnv) finish(name string, t batchv1.JobConditionType, exit int32, message string) {
	e.t.Helper()
	ctx := context.Background()
	j := e.job(name)
	require.NotNil(e.t, j)
	j.UID = types.UID("job-" + name)
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"})
	_, err := e.kube.BatchV1().Jobs(imagesNS).Update(ctx, j, metav1.UpdateOptions{})
	require.NoError(e.t, err)
	e.pod(j, corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "recovery",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: message, FinishedAt: metav1.NewTime(e.now)}}}}})
}

func (e *testEnv) pod(j *batchv1.Job, st corev1.PodStatus) {
	e.t.Helper()
	_, err := e.kube.CoreV1().Pods(imagesNS).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-pod", Namespace: imagesNS, Labels: map[string]string{batchv1.ControllerUidLabel: string(j.UID)}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "recovery"}}}, Status: st}, metav1.CreateOptions{})
	require.NoError(e.t, err)
}

func result(reason, message string) string {
	r := bootdisk.RecoveryResult{Reason: reason, Message: message}
	if reason == bootdisk.RecoveryConverted {
		r = bootdisk.RecoveryResult{Reason: reason, Release: "sonoma", BoardID: "Mac-827FAC58A8FDFA22", Product: "041-88800",
			ImageSHA256: "3b8f5e2a8c1d9f4e7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f", RawBytes: 3 << 30}
	}
	b, _ := json.Marshal(r)
	return string(b)
}

// A new image with source.recovery: the volume (16Gi, the default class,
// recording what it is for) and attempt 1's Job; Fetching. A second pass
// writes nothing and makes nothing.
func TestRecoveryStartsWithAVolumeAndOneJob(t *testing.T) {
	e := newEnv(t, recoveryImage())
	d, writes := e.reconcile()
	assert.Equal(t, 1, writes)
	assert.Equal(t, progressPoll, d)

	pvc, err := e.kube.CoreV1().PersistentVolumeClaims(imagesNS).Get(context.Background(), "sonoma-recovery", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, pvc.Spec.StorageClassName, "the cluster's default class")
	assert.Equal(t, resource.MustParse("16Gi"), pvc.Spec.Resources.Requests[corev1.ResourceStorage])
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, pvc.Spec.AccessModes)
	assert.Equal(t, corev1.PersistentVolumeFilesystem, *pvc.Spec.VolumeMode)
	assert.Equal(t, "sonoma", pvc.Annotations[RecoveryReleaseAnnotation])
	assert.Equal(t, "Mac-827FAC58A8FDFA22", pvc.Annotations[RecoveryBoardIDAnnotation])

	j := e.job(bootdisk.RecoveryJobName(e.image(), 1))
	require.NotNil(t, j)
	assert.Equal(t, "img-uid-1", j.Labels[ImageUIDLabel])
	assert.Equal(t, "registry.test/bootdisk:1", j.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "regcred"}}, j.Spec.Template.Spec.ImagePullSecrets)

	img := e.image()
	require.NotNil(t, img.Status.Recovery)
	assert.Equal(t, "sonoma-recovery", img.Status.Recovery.VolumeName)
	rr := e.cond(ConditionRecoveryReady)
	assert.Equal(t, metav1.ConditionUnknown, rr.Status)
	assert.Equal(t, ReasonFetching, rr.Reason)
	assert.Contains(t, rr.Message, "attempt 1 (Job dockerios-images/sonoma-recovery-1): no progress reported yet")
	ready := e.cond(ConditionReady)
	assert.Equal(t, "False/Fetching", string(ready.Status)+"/"+ready.Reason)

	_, writes = e.reconcile()
	assert.Zero(t, writes, "a second pass over the same state writes")
	jobs, err := e.kube.BatchV1().Jobs(imagesNS).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, jobs.Items, 1)
}

// A running fetch's progress, read from its log's last progress line,
// is in status and in the message; the same progress is no new write.
func TestRecoveryProgressFromTheLog(t *testing.T) {
	e := newEnv(t, recoveryImage())
	e.reconcile()
	j := e.job(bootdisk.RecoveryJobName(e.image(), 1))
	j.UID = "job-1"
	_, err := e.kube.BatchV1().Jobs(imagesNS).Update(context.Background(), j, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.pod(j, corev1.PodStatus{Phase: corev1.PodRunning})
	e.logs = "fetching\nprogress 104857600 1027604480\nprogress 432013312 1027604480\n"

	d, writes := e.reconcile()
	assert.Equal(t, 1, writes)
	assert.Equal(t, progressPoll, d)
	rr := e.cond(ConditionRecoveryReady)
	assert.Equal(t, ReasonFetching, rr.Reason)
	assert.Contains(t, rr.Message, "412/980 MiB (42%)")
	assert.Equal(t, int64(432013312), e.image().Status.Recovery.BytesDone)
	assert.Equal(t, int64(1027604480), e.image().Status.Recovery.BytesTotal)

	_, writes = e.reconcile()
	assert.Zero(t, writes, "unchanged progress written again")
}

// Converted: product, board and sha256 recorded, RecoveryReady True with
// an Event, Ready says what to do next; a second pass is silent.
func TestRecoveryConverted(t *testing.T) {
	e := newEnv(t, recoveryImage())
	e.reconcile()
	e.finish(bootdisk.RecoveryJobName(e.image(), 1), batchv1.JobComplete, 0, result(bootdisk.RecoveryConverted, ""))
	e.events()

	_, writes := e.reconcile()
	assert.Equal(t, 1, writes)
	rec := e.image().Status.Recovery
	assert.Equal(t, "041-88800", rec.Product)
	assert.Equal(t, "Mac-827FAC58A8FDFA22", rec.BoardID)
	assert.Len(t, rec.ImageSHA256, 64)
	assert.Zero(t, rec.Attempts)
	rr := e.cond(ConditionRecoveryReady)
	assert.Equal(t, "True/Converted", string(rr.Status)+"/"+rr.Reason)
	assert.Contains(t, rr.Message, "product 041-88800")
	ready := e.cond(ConditionReady)
	assert.Equal(t, "False/AwaitingInstall", string(ready.Status)+"/"+ready.Reason)
	assert.Contains(t, ready.Message, "kubectl dockerios image install sonoma --class CLASS -n NAMESPACE")
	evs := e.events()
	require.Len(t, evs, 1)
	assert.Contains(t, evs[0], "Normal Converted")

	_, writes = e.reconcile()
	assert.Zero(t, writes)
	assert.Empty(t, e.events())
	assert.NotNil(t, e.job(bootdisk.RecoveryJobName(e.image(), 1)), "the Job that made the volume is kept")
}

// Each failure the builder reports is RecoveryReady False with its reason
// and its one-line message, counted with the time of the next attempt;
// the failed Job is removed once the status says so; an Event.
func TestRecoveryFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		exit             int32
		message          string
		reason, contains string
	}{
		"service refused": {1, result(bootdisk.RecoveryServiceRefused, "osrecovery.apple.com answered 403 for board Mac-827FAC58A8FDFA22"),
			ReasonServiceRefused, "answered 403"},
		"checksum mismatch": {1, result(bootdisk.RecoveryChecksumMismatch, "chunk 17 of BaseSystem.dmg does not match the chunklist"),
			ReasonChecksumMismatch, "chunk 17"},
		"failed":                   {1, result(bootdisk.RecoveryFailed, "qemu-img convert exited 1"), ReasonFailed, "qemu-img convert exited 1"},
		"no result line":           {137, "", ReasonFailed, "exited 137"},
		"not a result":             {1, "panic: runtime error", ReasonFailed, "panic: runtime error"},
		"completed, not converted": {0, `{"reason":"Weird"}`, ReasonFailed, "attempt 1"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, recoveryImage())
			e.reconcile()
			jobName := bootdisk.RecoveryJobName(e.image(), 1)
			typ := batchv1.JobFailed
			if tc.exit == 0 {
				typ = batchv1.JobComplete
			}
			e.finish(jobName, typ, tc.exit, tc.message)
			e.events()

			d, writes := e.reconcile()
			assert.Equal(t, 1, writes)
			assert.Equal(t, time.Minute, d, "the first retry waits the base backoff")
			rr := e.cond(ConditionRecoveryReady)
			assert.Contains(t, rr.Message, fmt.Sprintf("attempt 1, Job %s/%s", imagesNS, jobName))
			assert.Equal(t, "False/"+tc.reason, string(rr.Status)+"/"+rr.Reason)
			assert.Contains(t, rr.Message, tc.contains)
			assert.Contains(t, rr.Message, "next attempt starts at 2026-12-04T06:01:00Z")
			rec := e.image().Status.Recovery
			assert.Equal(t, int32(1), rec.Attempts)
			require.NotNil(t, rec.NextAttemptTime)
			assert.Equal(t, t0.Add(time.Minute), rec.NextAttemptTime.Time.UTC())
			assert.Nil(t, e.job(jobName), "the failed Job is cleaned up")
			evs := e.events()
			require.Len(t, evs, 1)
			assert.Contains(t, evs[0], "Warning "+tc.reason)
			ready := e.cond(ConditionReady)
			assert.Equal(t, ReasonFetching, ready.Reason)

			// Before the backoff ends: nothing.
			e.now = t0.Add(30 * time.Second)
			d, writes = e.reconcile()
			assert.Zero(t, writes)
			assert.Equal(t, 30*time.Second, d)
			assert.Nil(t, e.job(bootdisk.RecoveryJobName(e.image(), 2)))
		})
	}
}

// Retries: a new Job per attempt, the wait doubling from 1m to at most
// 1h, and after a success the count starts again.
func TestRecoveryBackoff(t *testing.T) {
	e := newEnv(t, recoveryImage())
	e.reconcile()
	var waits []time.Duration
	for attempt := int32(1); attempt <= 8; attempt++ {
		name := bootdisk.RecoveryJobName(e.image(), attempt)
		require.NotNil(t, e.job(name), "attempt %d's Job", attempt)
		e.finish(name, batchv1.JobFailed, 1, result(bootdisk.RecoveryServiceRefused, "refused"))
		d, _ := e.reconcile()
		rec := e.image().Status.Recovery
		assert.Equal(t, attempt, rec.Attempts)
		wait := rec.NextAttemptTime.Sub(e.now)
		waits = append(waits, wait)
		assert.Equal(t, min(wait, Recheck), d, "looked at again when the next attempt is due, or sooner")
		e.now = e.now.Add(wait - time.Second)
		e.reconcile()
		assert.Nil(t, e.job(bootdisk.RecoveryJobName(e.image(), attempt+1)), "started before its time")
		e.now = e.now.Add(time.Second)
		e.reconcile()
	}
	assert.Equal(t, []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}, waits)

	e.finish(bootdisk.RecoveryJobName(e.image(), 9), batchv1.JobComplete, 0, result(bootdisk.RecoveryConverted, ""))
	e.reconcile()
	rec := e.image().Status.Recovery
	assert.Zero(t, rec.Attempts)
	assert.Nil(t, rec.NextAttemptTime)
	assert.Equal(t, "True/Converted", string(e.cond(ConditionRecoveryReady).Status)+"/"+e.cond(ConditionRecoveryReady).Reason)
}

func TestBackoffOption(t *testing.T) {
	r := &Reconciler{RecoveryBackoff: 2 * time.Second, RecoveryBackoffMax: 5 * time.Second}
	assert.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second}, []time.Duration{r.backoff(1), r.backoff(2), r.backoff(3)})
}

// A changed spec.source.recovery: the volume made for the old release is
// deleted with its Jobs, and the fetch starts over once it is gone.
func TestRecoveryStartsOverWhenTheReleaseChanges(t *testing.T) {
	e := newEnv(t, recoveryImage())
	e.reconcile()
	e.finish(bootdisk.RecoveryJobName(e.image(), 1), batchv1.JobComplete, 0, result(bootdisk.RecoveryConverted, ""))
	e.reconcile()

	img := e.image()
	img.Spec.Source.Recovery.Release = "sequoia"
	img.Generation = 2
	_, err := e.client.DockeriosV1alpha1().MacOSImages().Update(context.Background(), img, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.events()

	d, _ := e.reconcile()
	assert.Equal(t, gonePoll, d)
	_, err = e.kube.CoreV1().PersistentVolumeClaims(imagesNS).Get(context.Background(), "sonoma-recovery", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the old volume is deleted: %v", err)
	jobs, err := e.kube.BatchV1().Jobs(imagesNS).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, jobs.Items)
	rr := e.cond(ConditionRecoveryReady)
	assert.Equal(t, "Unknown/Fetching", string(rr.Status)+"/"+rr.Reason)
	assert.Contains(t, rr.Message, `holds release "sonoma"`)

	e.reconcile()
	pvc, err := e.kube.CoreV1().PersistentVolumeClaims(imagesNS).Get(context.Background(), "sonoma-recovery", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "sequoia", pvc.Annotations[RecoveryReleaseAnnotation])
	assert.NotNil(t, e.job(bootdisk.RecoveryJobName(e.image(), 1)))
	assert.Empty(t, e.image().Status.Recovery.ImageSHA256)
	assert.Equal(t, ReasonFetching, e.cond(ConditionRecoveryReady).Reason)
}

// The recovery volume deleted by hand after conversion: fetched again.
func TestRecoveryVolumeLostIsFetchedAgain(t *testing.T) {
	e := newEnv(t, recoveryImage())
	e.reconcile()
	e.finish(bootdisk.RecoveryJobName(e.image(), 1), batchv1.JobComplete, 0, result(bootdisk.RecoveryConverted, ""))
	e.reconcile()
	require.NoError(t, e.kube.CoreV1().PersistentVolumeClaims(imagesNS).Delete(context.Background(), "sonoma-recovery", metav1.DeleteOptions{}))

	e.reconcile() // the old Job goes first
	assert.Nil(t, e.job(bootdisk.RecoveryJobName(e.image(), 1)))
	e.reconcile()
	assert.NotNil(t, e.job(bootdisk.RecoveryJobName(e.image(), 1)))
	assert.Equal(t, "Unknown/Fetching", string(e.cond(ConditionRecoveryReady).Status)+"/"+e.cond(ConditionRecoveryReady).Reason)
}

// --- promotion -------------------------------------------------------------

func installSession(osVersion string) *v1alpha1.MacOSMachine {
	m := &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: "install-1", Namespace: "ci", UID: "0a1b2c3d-4e5f-6789-abcd-ef0123456789"},
		Spec: v1alpha1.MacOSMachineSpec{ClassName: "large", ImageName: "sonoma", Purpose: v1alpha1.MachinePurposeInstall}}
	m.Status.ClassSnapshot = &v1alpha1.ClassSnapshot{Generation: 1, Spec: v1alpha1.MacOSMachineClassSpec{ImageName: "sonoma",
		SystemDisk: v1alpha1.SystemDiskSpec{Size: resource.MustParse("128Gi"), StorageClassName: ptr.To("fast")}}}
	if osVersion != "" {
		m.Status.Agent = &v1alpha1.AgentReport{OSVersion: osVersion}
	}
	return m
}

func promotingImage() *v1alpha1.MacOSImage {
	img := recoveryImage()
	img.Spec.PromoteFrom = &v1alpha1.NamespacedObjectReference{Namespace: "ci", Name: "install-1"}
	return img
}

func (e *testEnv) addVMI(m *v1alpha1.MacOSMachine) {
	vm, _ := machineNames(m)
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": vm, "namespace": m.Namespace}, "status": map[string]any{"phase": "Running"}}}
	require.NoError(e.t, e.vmis.Add(u))
}

func (e *testEnv) dataVolume(name string) *cdiv1.DataVolume {
	e.t.Helper()
	u, err := e.dyn.Resource(external.DataVolumes).Namespace(imagesNS).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(e.t, err)
	dv, err := external.FromUnstructured[cdiv1.DataVolume](u)
	require.NoError(e.t, err)
	return dv
}

func (e *testEnv) setDVPhase(name string, phase cdiv1.DataVolumePhase) {
	e.t.Helper()
	u, err := e.dyn.Resource(external.DataVolumes).Namespace(imagesNS).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(e.t, err)
	require.NoError(e.t, unstructured.SetNestedField(u.Object, string(phase), "status", "phase"))
	_, err = e.dyn.Resource(external.DataVolumes).Namespace(imagesNS).Update(context.Background(), u, metav1.UpdateOptions{})
	require.NoError(e.t, err)
}

func (e *testEnv) dataSourcePVC() (string, string) {
	e.t.Helper()
	u, err := e.dyn.Resource(external.DataSources).Namespace(imagesNS).Get(context.Background(), "sonoma", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", ""
	}
	require.NoError(e.t, err)
	ns, _, _ := unstructured.NestedString(u.Object, "spec", "source", "pvc", "namespace")
	n, _, _ := unstructured.NestedString(u.Object, "spec", "source", "pvc", "name")
	return ns, n
}

func (e *testEnv) machineDeletes() int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "macosmachines" {
			n++
		}
	}
	return n
}

// A promotion is refused, with its reason, unless the machine is an
// install session of this image whose agent reported.
func TestPromotionRefused(t *testing.T) {
	workload := installSession("14.6.1")
	workload.Spec.Purpose = ""
	other := installSession("14.6.1")
	other.Spec.ImageName = "ventura"
	deleting := installSession("14.6.1")
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	for name, tc := range map[string]struct {
		machine          *v1alpha1.MacOSMachine
		reason, contains string
	}{
		"no such machine":     {nil, ReasonMachineNotFound, "MacOSMachine ci/install-1 does not exist"},
		"being deleted":       {deleting, ReasonMachineNotFound, "being deleted"},
		"a workload machine":  {workload, ReasonNotAnInstallSession, "spec.purpose is Workload"},
		"another image's":     {other, ReasonNotAnInstallSession, `install session of MacOSImage "ventura"`},
		"agent not reporting": {installSession(""), ReasonAgentNotReporting, "install the DockerIOS agent"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, promotingImage())
			if tc.machine != nil {
				require.NoError(t, e.machines.Add(tc.machine))
			}
			_, writes := e.reconcile()
			assert.Equal(t, 1, writes)
			c := e.cond(ConditionPromoted)
			assert.Equal(t, "False/"+tc.reason, string(c.Status)+"/"+c.Reason)
			assert.Contains(t, c.Message, tc.contains)
			pr := e.image().Status.Promotion
			require.NotNil(t, pr)
			assert.Equal(t, v1alpha1.PromotionFailed, pr.Phase)
			assert.Equal(t, v1alpha1.NamespacedObjectReference{Namespace: "ci", Name: "install-1"}, pr.Machine)
			assert.Nil(t, e.dataVolume(GoldenVolumeName(e.image(), installSession(""))))
			assert.Zero(t, e.machineDeletes())
			assert.Len(t, filter(e.events(), "Warning "+tc.reason), 1)

			_, writes = e.reconcile()
			assert.Zero(t, writes)
			assert.Empty(t, e.events(), "an Event on every pass")
		})
	}
}

func filter(evs []string, prefix string) []string {
	var out []string
	for _, ev := range evs {
		if len(ev) >= len(prefix) && ev[:len(prefix)] == prefix {
			out = append(out, ev)
		}
	}
	return out
}

// Stopping while the session's VMI exists; then one clone of its system
// disk, of the class's size and storage class; then the DataSource, the
// status, and the session deleted — in that order, each pass idempotent.
func TestPromotion(t *testing.T) {
	e := newEnv(t, promotingImage())
	m := installSession("14.6.1")
	require.NoError(t, e.machines.Add(m))
	e.addVMI(m)
	golden := GoldenVolumeName(e.image(), m)
	assert.Equal(t, "sonoma-0a1b2c3d", golden)

	d, _ := e.reconcile()
	assert.Equal(t, promotePoll, d)
	c := e.cond(ConditionPromoted)
	assert.Equal(t, "False/Stopping", string(c.Status)+"/"+c.Reason)
	assert.Equal(t, v1alpha1.PromotionStopping, e.image().Status.Promotion.Phase)
	assert.Nil(t, e.dataVolume(golden), "cloned while the guest runs")
	_, writes := e.reconcile()
	assert.Zero(t, writes)

	// The guest stopped: the machine controller dropped the agent's report.
	require.NoError(t, e.vmis.Delete(e.vmis.List()[0]))
	m.Status.Agent = nil
	require.NoError(t, e.machines.Update(m))
	e.events()
	e.reconcile()
	dv := e.dataVolume(golden)
	require.NotNil(t, dv)
	assert.Equal(t, &cdiv1.DataVolumeSourcePVC{Namespace: "ci", Name: "install-1-system-0a1b2c3d"}, dv.Spec.Source.PVC)
	assert.Equal(t, "fast", *dv.Spec.Storage.StorageClassName)
	assert.Equal(t, resource.MustParse("128Gi"), dv.Spec.Storage.Resources.Requests[corev1.ResourceStorage])
	assert.Equal(t, "14.6.1", dv.Annotations[MacOSVersionAnnotation], "the version the agent reported before the guest stopped")
	assert.Equal(t, string(m.UID), dv.Labels[PromotedFromLabel])
	assert.Empty(t, dv.Labels["dockerios.io/machine-uid"], "the machine's teardown would take it")
	assert.Equal(t, v1alpha1.PromotionCloning, e.image().Status.Promotion.Phase)
	assert.Equal(t, "False/Cloning", string(e.cond(ConditionPromoted).Status)+"/"+e.cond(ConditionPromoted).Reason)
	assert.Len(t, filter(e.events(), "Normal Cloning"), 1)
	_, writes = e.reconcile()
	assert.Zero(t, writes)
	ns, _ := e.dataSourcePVC()
	assert.Empty(t, ns, "the DataSource made before the clone finished")
	assert.Zero(t, e.machineDeletes())

	e.setDVPhase(golden, cdiv1.Succeeded)
	e.now = t0.Add(time.Minute)
	e.reconcile()
	ns, name := e.dataSourcePVC()
	assert.Equal(t, imagesNS+"/"+golden, ns+"/"+name)
	img := e.image()
	assert.Equal(t, v1alpha1.PromotionSucceeded, img.Status.Promotion.Phase)
	assert.Equal(t, golden, img.Status.Promotion.VolumeName)
	assert.Equal(t, t0.Add(time.Minute), img.Status.Promotion.CompletionTime.Time.UTC())
	assert.Equal(t, "14.6.1", img.Status.MacOSVersion)
	assert.Equal(t, "True/Promoted", string(e.cond(ConditionPromoted).Status)+"/"+e.cond(ConditionPromoted).Reason)
	assert.Equal(t, 1, e.machineDeletes())
	assert.Len(t, filter(e.events(), "Normal Promoted"), 1)

	// The machine is gone: nothing more.
	require.NoError(t, e.machines.Delete(m))
	_, writes = e.reconcile()
	assert.Zero(t, writes)
	assert.Equal(t, 1, e.machineDeletes())
	assert.Empty(t, e.events())
}

// A crash after the DataSource was pointed at the copy, before the status
// said so: the next pass records it and deletes the session, without a
// second clone. A crash after the status, before the delete: the next
// pass deletes it — only the session the volume was cloned from.
func TestPromotionAfterCrashes(t *testing.T) {
	e := newEnv(t, promotingImage())
	m := installSession("14.6.1")
	require.NoError(t, e.machines.Add(m))
	e.reconcile() // Cloning
	golden := GoldenVolumeName(e.image(), m)
	e.setDVPhase(golden, cdiv1.Succeeded)
	// The DataSource already points at it (the crashed pass did that).
	ds := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
		"metadata": map[string]any{"name": "sonoma", "namespace": imagesNS},
		"spec":     map[string]any{"source": map[string]any{"pvc": map[string]any{"namespace": imagesNS, "name": golden}}}}}
	_, err := e.dyn.Resource(external.DataSources).Namespace(imagesNS).Create(context.Background(), ds, metav1.CreateOptions{})
	require.NoError(t, err)

	e.reconcile()
	assert.Equal(t, v1alpha1.PromotionSucceeded, e.image().Status.Promotion.Phase)
	assert.Equal(t, 1, e.machineDeletes())
	creates := 0
	for _, a := range e.dyn.Actions() {
		if a.GetVerb() == "create" && a.GetResource() == external.DataVolumes {
			creates++
		}
	}
	assert.Equal(t, 1, creates, "cloned twice")

	// The delete did not happen (crash): the next pass does it.
	e.reconcile()
	assert.Equal(t, 2, e.machineDeletes())
	// A new session of the same name (another UID) is never deleted.
	m2 := installSession("14.6.1")
	m2.UID = "ffffffff-0000-0000-0000-000000000000"
	require.NoError(t, e.machines.Update(m2))
	_, writes := e.reconcile()
	assert.Equal(t, 2, e.machineDeletes())
	// Nor promoted because spec.promoteFrom still names the name: that is
	// the last promotion's record.
	assert.Zero(t, writes)
	assert.Nil(t, e.dataVolume(GoldenVolumeName(e.image(), m2)))

	// spec.promoteFrom written again (kubectl dockerios image promote
	// clears it and sets it): the new session is promoted, into a volume
	// of its own.
	img := e.image()
	img.Generation += 2
	_, err = e.client.DockeriosV1alpha1().MacOSImages().Update(context.Background(), img, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.reconcile()
	pr := e.image().Status.Promotion
	assert.Equal(t, v1alpha1.PromotionCloning, pr.Phase)
	assert.Equal(t, GoldenVolumeName(img, m2), pr.VolumeName)
	require.NotNil(t, e.dataVolume(GoldenVolumeName(img, m2)))
	assert.Equal(t, string(m2.UID), e.dataVolume(GoldenVolumeName(img, m2)).Labels[PromotedFromLabel])
	assert.Equal(t, 2, e.machineDeletes())
}

// An existing DataSource: only spec.source changes; the volume it pointed
// at is kept and named in the message.
func TestPromotionUpdatesOnlyTheDataSourcesSource(t *testing.T) {
	e := newEnv(t, promotingImage())
	m := installSession("15.1")
	require.NoError(t, e.machines.Add(m))
	ds := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
		"metadata": map[string]any{"name": "sonoma", "namespace": imagesNS, "labels": map[string]any{"team": "macos"}},
		"spec":     map[string]any{"source": map[string]any{"pvc": map[string]any{"namespace": imagesNS, "name": "sonoma-old"}}}}}
	_, err := e.dyn.Resource(external.DataSources).Namespace(imagesNS).Create(context.Background(), ds, metav1.CreateOptions{})
	require.NoError(t, err)
	e.reconcile()
	golden := GoldenVolumeName(e.image(), m)
	e.setDVPhase(golden, cdiv1.Succeeded)
	e.reconcile()

	u, err := e.dyn.Resource(external.DataSources).Namespace(imagesNS).Get(context.Background(), "sonoma", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "macos"}, u.GetLabels())
	ns, name := e.dataSourcePVC()
	assert.Equal(t, imagesNS+"/"+golden, ns+"/"+name)
	assert.Contains(t, e.cond(ConditionPromoted).Message, "the volume it pointed at before, "+imagesNS+"/sonoma-old, is kept")
	assert.Equal(t, "15.1", e.image().Status.MacOSVersion)
}

// A failed clone: Promoted False CloneFailed with CDI's message; the
// session is kept.
func TestPromotionCloneFailed(t *testing.T) {
	e := newEnv(t, promotingImage())
	m := installSession("14.6.1")
	require.NoError(t, e.machines.Add(m))
	e.reconcile()
	e.setDVPhase(GoldenVolumeName(e.image(), m), cdiv1.Failed)
	e.reconcile()
	c := e.cond(ConditionPromoted)
	assert.Equal(t, "False/"+ReasonCloneFailed, string(c.Status)+"/"+c.Reason)
	assert.Contains(t, c.Message, "delete the DataVolume to clone again")
	assert.Zero(t, e.machineDeletes())
	assert.Equal(t, v1alpha1.PromotionFailed, e.image().Status.Promotion.Phase)
}

// Images without recovery or promoteFrom are what they were: Ready from
// the source alone, nothing else written.
func TestPlainImage(t *testing.T) {
	img := &v1alpha1.MacOSImage{ObjectMeta: metav1.ObjectMeta{Name: "sonoma", Generation: 1},
		Spec: v1alpha1.MacOSImageSpec{Release: "14.6", Source: v1alpha1.ImageSource{
			DataSource: &v1alpha1.NamespacedObjectReference{Namespace: imagesNS, Name: "sonoma"}}}}
	e := newEnv(t, img)
	d, _ := e.reconcile()
	assert.Equal(t, Recheck, d)
	assert.Equal(t, "False/SourceNotFound", string(e.cond(ConditionReady).Status)+"/"+e.cond(ConditionReady).Reason)
	assert.Nil(t, e.image().Status.Recovery)
	assert.Equal(t, "absent", string(e.cond(ConditionRecoveryReady).Status))
	_, writes := e.reconcile()
	assert.Zero(t, writes)
	assert.Empty(t, e.kube.Actions(), fmt.Sprint(e.kube.Actions()))
}

// spec.promoteFrom cleared while the clone runs: the promotion stops,
// says so once, and nothing is published or deleted.
func TestPromotionWithdrawn(t *testing.T) {
	e := newEnv(t, promotingImage())
	m := installSession("14.6.1")
	require.NoError(t, e.machines.Add(m))
	e.reconcile()
	require.Equal(t, v1alpha1.PromotionCloning, e.image().Status.Promotion.Phase)
	img := e.image()
	img.Spec.PromoteFrom = nil
	img.Generation = 2
	_, err := e.client.DockeriosV1alpha1().MacOSImages().Update(context.Background(), img, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.events()

	e.setDVPhase(GoldenVolumeName(img, m), cdiv1.Succeeded)
	e.reconcile()
	c := e.cond(ConditionPromoted)
	assert.Equal(t, "False/"+ReasonWithdrawn, string(c.Status)+"/"+c.Reason)
	assert.Equal(t, v1alpha1.PromotionFailed, e.image().Status.Promotion.Phase)
	ns, _ := e.dataSourcePVC()
	assert.Empty(t, ns, "published after the promotion was withdrawn")
	assert.Zero(t, e.machineDeletes())
	assert.Len(t, filter(e.events(), "Normal "+ReasonWithdrawn), 1)
	_, writes := e.reconcile()
	assert.Zero(t, writes)
}
