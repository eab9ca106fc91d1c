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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/test/framework"
	"github.com/dockerios/dockerios/test/harness"
)

const (
	goldenNS      = "golden-images" // the DataSources' namespace
	goldenRelease = "sonoma"
	goldenBoard   = "Mac-827FAC58A8FDFA22"
	goldenVersion = "14.6.1" // what the guests' agents report
)

// TestGoldenImage makes a golden image from Apple's recovery service on
// the real stack: the recovery Job (played by the harness as the kubelet
// would report the builder's result), an install session, its promotion,
// and a machine cloned from the result.
func TestGoldenImage(t *testing.T) {
	e := startWith(t, []string{"--recovery-backoff=2s", "--recovery-backoff-max=4s"}, func(c *harness.Config) {
		c.DataSources = true
		c.GuestOSVersion = goldenVersion
	})
	e.bareNamespace(t, goldenNS)
	ns := e.namespace(t, "golden")
	ctx := context.Background()
	_, err := e.client.DockeriosV1alpha1().MacOSIdentityPools().Create(ctx, &v1alpha1.MacOSIdentityPool{
		ObjectMeta: metav1.ObjectMeta{Name: "golden"}, Spec: v1alpha1.MacOSIdentityPoolSpec{Model: model}}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.addIdentities(t, "golden", 3)

	t.Run("RecoveryInstallPromoteAndCloneFromIt", func(t *testing.T) { e.testGoldenImage(t, ns) })
	t.Run("ServiceRefusedThenConvertedAfterBackoff", e.testRecoveryRetry)
	t.Run("PromotingAWorkloadMachineIsRefused", func(t *testing.T) { e.testPromoteRefused(t, ns) })
	t.Run("ControllerWasRefusedNothing", e.testControllerWasRefusedNothing)
}

// recoveryImage creates an image made from the recovery service, to be
// published through DataSource goldenNS/ds.
func (e *env) recoveryImage(t *testing.T, name, ds string) {
	t.Helper()
	_, err := e.client.DockeriosV1alpha1().MacOSImages().Create(context.Background(), &v1alpha1.MacOSImage{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MacOSImageSpec{Release: goldenRelease, Source: v1alpha1.ImageSource{
			DataSource: &v1alpha1.NamespacedObjectReference{Namespace: goldenNS, Name: ds},
			Recovery:   &v1alpha1.RecoverySource{Release: goldenRelease, BoardID: goldenBoard}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// waitImage waits until the image satisfies ok, failing with its status.
func (e *env) waitImage(t *testing.T, name string, within time.Duration, what string, ok func(*v1alpha1.MacOSImage) bool) *v1alpha1.MacOSImage {
	t.Helper()
	var last *v1alpha1.MacOSImage
	framework.Eventually(t, within, func() string {
		img, err := e.client.DockeriosV1alpha1().MacOSImages().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		last = img
		if ok(img) {
			return ""
		}
		b, _ := json.MarshalIndent(img.Status, "", "  ")
		return fmt.Sprintf("image %s not %s: %s\ncontroller log tail:\n%s", name, what, b, tail(e.ctrl.Output(), 15))
	})
	return last
}

func imageCondition(img *v1alpha1.MacOSImage, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(img.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ, Status: "absent"}
}

func conditionIs(typ string, status metav1.ConditionStatus, reason string) func(*v1alpha1.MacOSImage) bool {
	return func(img *v1alpha1.MacOSImage) bool {
		c := imageCondition(img, typ)
		return c.Status == status && c.Reason == reason
	}
}

func (e *env) machineDataVolumes(t *testing.T, ns string, uid types.UID) []cdiv1.DataVolume {
	t.Helper()
	l, err := e.dynamic(t).Resource(external.DataVolumes).Namespace(ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: labels.Set{machine.MachineUIDLabel: string(uid)}.String()})
	require.NoError(t, err)
	var out []cdiv1.DataVolume
	for i := range l.Items {
		dv, err := external.FromUnstructured[cdiv1.DataVolume](&l.Items[i])
		require.NoError(t, err)
		out = append(out, *dv)
	}
	return out
}

func (e *env) testGoldenImage(t *testing.T, ns string) {
	ctx := context.Background()
	e.recoveryImage(t, "golden-sonoma", "sonoma")
	_, err := e.client.DockeriosV1alpha1().MacOSMachineClasses().Create(ctx, &v1alpha1.MacOSMachineClass{ObjectMeta: metav1.ObjectMeta{Name: "golden"},
		Spec: v1alpha1.MacOSMachineClassSpec{ImageName: "golden-sonoma", IdentityPoolName: "golden",
			SystemDisk:   v1alpha1.SystemDiskSpec{Size: mustQuantity("64Gi"), StorageClassName: ptr.To("golden")},
			StartTimeout: &metav1.Duration{Duration: 2 * time.Minute}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// 1. The recovery image: fetched by the recovery Job into a volume
	// beside the DataSource; the image waits for an install.
	img := e.waitImage(t, "golden-sonoma", 60*time.Second, "RecoveryReady", conditionIs("RecoveryReady", metav1.ConditionTrue, "Converted"))
	require.NotNil(t, img.Status.Recovery)
	assert.Equal(t, "golden-sonoma-recovery", img.Status.Recovery.VolumeName)
	assert.Equal(t, goldenBoard, img.Status.Recovery.BoardID)
	assert.NotEmpty(t, img.Status.Recovery.Product)
	assert.Len(t, img.Status.Recovery.ImageSHA256, 64)
	assert.Contains(t, imageCondition(img, "RecoveryReady").Message, "product "+img.Status.Recovery.Product)
	img = e.waitImage(t, "golden-sonoma", 30*time.Second, "awaiting an install", conditionIs("Ready", metav1.ConditionFalse, "AwaitingInstall"))
	assert.Contains(t, imageCondition(img, "Ready").Message, "kubectl dockerios image install golden-sonoma --class CLASS -n NAMESPACE")
	pvc, err := e.kube.CoreV1().PersistentVolumeClaims(goldenNS).Get(ctx, "golden-sonoma-recovery", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, pvc.Spec.StorageClassName, "the cluster's default StorageClass")
	assert.Equal(t, resource.MustParse("16Gi"), pvc.Spec.Resources.Requests[corev1.ResourceStorage])
	e.waitEvent(t, metav1.NamespaceDefault, "MacOSImage", "golden-sonoma", "Converted", "product "+img.Status.Recovery.Product)

	// 2. An install session: the machine controller boots the recovery
	// volume beside a blank disk; its agent reports the macOS version.
	session, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Create(ctx, &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: "install"},
		Spec: v1alpha1.MacOSMachineSpec{ClassName: "golden", ImageName: "golden-sonoma", Purpose: v1alpha1.MachinePurposeInstall}}, metav1.CreateOptions{})
	require.NoError(t, err)
	session = e.waitMachine(t, ns, "install", 120*time.Second, "reporting the macOS version", func(m *v1alpha1.MacOSMachine) bool {
		return m.Status.Agent != nil && m.Status.Agent.OSVersion == goldenVersion
	})
	require.NotNil(t, session.Status.IdentityRef)
	identity := session.Status.IdentityRef.Name
	var systemDisk string
	for _, dv := range e.machineDataVolumes(t, ns, session.UID) {
		if dv.Spec.Source != nil && dv.Spec.Source.Blank != nil {
			systemDisk = dv.Name
		}
		if dv.Spec.Source != nil && dv.Spec.Source.PVC != nil {
			assert.Equal(t, cdiv1.DataVolumeSourcePVC{Namespace: goldenNS, Name: "golden-sonoma-recovery"}, *dv.Spec.Source.PVC, "the session's recovery disk")
		}
	}
	require.NotEmpty(t, systemDisk, "the session's blank system disk")

	// 3. Promote it.
	patch := fmt.Sprintf(`{"spec":{"promoteFrom":{"namespace":%q,"name":"install"}}}`, ns)
	_, err = e.client.DockeriosV1alpha1().MacOSImages().Patch(ctx, "golden-sonoma", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	phases := map[v1alpha1.PromotionPhase]bool{}
	img = e.waitImage(t, "golden-sonoma", 120*time.Second, "promoted", func(img *v1alpha1.MacOSImage) bool {
		if p := img.Status.Promotion; p != nil {
			phases[p.Phase] = true
		}
		return conditionIs("Promoted", metav1.ConditionTrue, "Promoted")(img)
	})
	t.Logf("promotion phases seen while polling: %v", phases)
	p := img.Status.Promotion
	require.NotNil(t, p)
	assert.Equal(t, v1alpha1.PromotionSucceeded, p.Phase)
	assert.Equal(t, v1alpha1.NamespacedObjectReference{Namespace: ns, Name: "install"}, p.Machine)
	assert.NotNil(t, p.CompletionTime)
	uid8 := strings.ReplaceAll(string(session.UID), "-", "")[:8]
	assert.Equal(t, "golden-sonoma-"+uid8, p.VolumeName)
	assert.Equal(t, goldenVersion, img.Status.MacOSVersion)
	e.waitEvent(t, metav1.NamespaceDefault, "MacOSImage", "golden-sonoma", "Promoted", p.VolumeName)

	// The golden volume is a clone of the session's system disk, of the
	// class's size and storage class; the DataSource points at it.
	u, err := e.dynamic(t).Resource(external.DataVolumes).Namespace(goldenNS).Get(ctx, p.VolumeName, metav1.GetOptions{})
	require.NoError(t, err)
	golden, err := external.FromUnstructured[cdiv1.DataVolume](u)
	require.NoError(t, err)
	require.NotNil(t, golden.Spec.Source)
	assert.Equal(t, &cdiv1.DataVolumeSourcePVC{Namespace: ns, Name: systemDisk}, golden.Spec.Source.PVC)
	assert.Equal(t, "golden", ptr.Deref(golden.Spec.Storage.StorageClassName, ""))
	assert.Equal(t, mustQuantity("64Gi"), golden.Spec.Storage.Resources.Requests[corev1.ResourceStorage])
	assert.Empty(t, golden.Labels[machine.MachineUIDLabel], "the golden volume is not the session's")
	u, err = e.dynamic(t).Resource(external.DataSources).Namespace(goldenNS).Get(ctx, "sonoma", metav1.GetOptions{})
	require.NoError(t, err)
	ds, err := external.FromUnstructured[cdiv1.DataSource](u)
	require.NoError(t, err)
	assert.Equal(t, &cdiv1.DataVolumeSourcePVC{Namespace: goldenNS, Name: p.VolumeName}, ds.Spec.Source.PVC)

	// The image is Ready with it; the session is gone and its identity free.
	e.waitImage(t, "golden-sonoma", 60*time.Second, "Ready", conditionIs("Ready", metav1.ConditionTrue, "SourceReady"))
	e.gone(t, ns, "install", 90*time.Second)
	framework.Eventually(t, 30*time.Second, func() string {
		id, err := e.client.DockeriosV1alpha1().MacOSIdentities().Get(ctx, identity, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if id.Status.Allocation != nil {
			return fmt.Sprintf("identity %s still allocated to %+v", identity, *id.Status.Allocation)
		}
		return ""
	})
	assert.Empty(t, e.ownedObjects(t, ns, string(session.UID)), "the session's teardown left something")

	// 4. A machine of a class using the image is cloned from it and runs.
	worker := e.createMachine(t, ns, "worker", "golden")
	e.waitMachine(t, ns, "worker", 120*time.Second, "Ready", phaseIs(v1alpha1.MachineReady))
	dvs := e.machineDataVolumes(t, ns, worker.UID)
	require.Len(t, dvs, 1)
	require.NotNil(t, dvs[0].Spec.SourceRef)
	assert.Equal(t, cdiv1.DataVolumeSourceRef{Kind: cdiv1.DataVolumeDataSource, Namespace: ptr.To(goldenNS), Name: "sonoma"}, *dvs[0].Spec.SourceRef)

	// Nothing more is written once it is all done.
	before := img.ResourceVersion
	img = e.waitImage(t, "golden-sonoma", 10*time.Second, "read", func(*v1alpha1.MacOSImage) bool { return true })
	time.Sleep(12 * time.Second) // beyond the controller's busy recheck
	after, err := e.client.DockeriosV1alpha1().MacOSImages().Get(ctx, "golden-sonoma", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, img.ResourceVersion, after.ResourceVersion, "the image's status was rewritten with nothing new (first seen at %s)", before)
}

// A refused fetch is RecoveryReady False ServiceRefused with the
// service's answer, counted, and retried after the backoff as a new Job.
func (e *env) testRecoveryRetry(t *testing.T) {
	const refusal = "osrecovery.apple.com answered 403 Forbidden for board " + goldenBoard
	e.h.SetRecoveryRuns("retry", harness.RecoveryServiceRefused(refusal))
	e.recoveryImage(t, "retry", "retry")
	img := e.waitImage(t, "retry", 60*time.Second, "refused", conditionIs("RecoveryReady", metav1.ConditionFalse, "ServiceRefused"))
	c := imageCondition(img, "RecoveryReady")
	assert.Contains(t, c.Message, refusal)
	assert.Contains(t, c.Message, "the next attempt starts at")
	require.NotNil(t, img.Status.Recovery)
	assert.Equal(t, int32(1), img.Status.Recovery.Attempts)
	assert.NotNil(t, img.Status.Recovery.NextAttemptTime)
	assert.Equal(t, "Fetching", imageCondition(img, "Ready").Reason)
	e.waitEvent(t, metav1.NamespaceDefault, "MacOSImage", "retry", "ServiceRefused", refusal)

	img = e.waitImage(t, "retry", 60*time.Second, "converted on the second attempt", conditionIs("RecoveryReady", metav1.ConditionTrue, "Converted"))
	assert.Zero(t, img.Status.Recovery.Attempts)
	assert.Nil(t, img.Status.Recovery.NextAttemptTime)
	assert.Contains(t, imageCondition(img, "RecoveryReady").Message, "attempt 2")
	framework.Eventually(t, 30*time.Second, func() string {
		jobs, err := e.kube.BatchV1().Jobs(goldenNS).List(context.Background(), metav1.ListOptions{LabelSelector: "dockerios.io/image=retry"})
		if err != nil {
			return err.Error()
		}
		var names []string
		for _, j := range jobs.Items {
			names = append(names, j.Name)
		}
		if len(names) != 1 {
			return fmt.Sprintf("recovery Jobs %v: want only the second attempt's (the failed one cleaned up)", names)
		}
		return ""
	})
}

// Promoting a machine that is not an install session is refused, with
// the reason; the machine is left alone.
func (e *env) testPromoteRefused(t *testing.T, ns string) {
	ctx := context.Background()
	e.createMachine(t, ns, "plain", "golden")
	e.recoveryImage(t, "refused", "refused")
	patch := fmt.Sprintf(`{"spec":{"promoteFrom":{"namespace":%q,"name":"plain"}}}`, ns)
	_, err := e.client.DockeriosV1alpha1().MacOSImages().Patch(ctx, "refused", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	img := e.waitImage(t, "refused", 60*time.Second, "refused", conditionIs("Promoted", metav1.ConditionFalse, "NotAnInstallSession"))
	assert.Contains(t, imageCondition(img, "Promoted").Message, "spec.purpose is Workload")
	require.NotNil(t, img.Status.Promotion)
	assert.Equal(t, v1alpha1.PromotionFailed, img.Status.Promotion.Phase)
	e.waitEvent(t, metav1.NamespaceDefault, "MacOSImage", "refused", "NotAnInstallSession", "plain")
	e.waitMachine(t, ns, "plain", 120*time.Second, "Ready (untouched by the refused promotion)", phaseIs(v1alpha1.MachineReady))
	_, err = e.dynamic(t).Resource(external.DataSources).Namespace(goldenNS).Get(ctx, "refused", metav1.GetOptions{})
	assert.Error(t, err, "a DataSource made for a refused promotion")
}
