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

package machine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned/fake"
	dlisters "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

// world is a machine's reconciler over fake clients, whose caches are
// filled from the clients' contents when sync is called, as informers
// would catch up: every pass is re-derived from what is stored.
type world struct {
	t        *testing.T
	kube     *kubefake.Clientset
	dyn      *dynamicfake.FakeDynamicClient
	client   *fake.Clientset
	recorder *record.FakeRecorder
	r        *Reconciler
	now      time.Time
	idx      map[string]cache.Indexer
}

func newIndex() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

func newWorld(t *testing.T, m *v1alpha1.MacOSMachine, class *v1alpha1.MacOSMachineClass, images ...*v1alpha1.MacOSImage) *world {
	t.Helper()
	m = m.DeepCopy()
	m.Finalizers = []string{v1alpha1.MachineTeardownFinalizer}
	m.CreationTimestamp = metav1.NewTime(t0)
	objs := []runtime.Object{m, class, testIdentity()}
	for _, img := range images {
		objs = append(objs, img)
	}
	w := &world{t: t, now: t0, recorder: record.NewFakeRecorder(1000),
		kube:   kubefake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: "dockerios-osk"}}),
		client: fake.NewSimpleClientset(objs...), //nolint:staticcheck // NewClientset needs a schema for every kind it updates

		dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
			external.VirtualMachines: "VirtualMachineList", external.VirtualMachineInstances: "VirtualMachineInstanceList", external.DataVolumes: "DataVolumeList"}),
		idx: map[string]cache.Indexer{},
	}
	// Every write of a machine moves its resourceVersion on, as the
	// apiserver's do (the simple fake's do not).
	rv := 1
	w.client.PrependReactor("update", "macosmachines", func(a k8stesting.Action) (bool, runtime.Object, error) {
		rv++
		a.(k8stesting.UpdateAction).GetObject().(*v1alpha1.MacOSMachine).ResourceVersion = strconv.Itoa(rv)
		return false, nil, nil
	})
	for _, k := range []string{"machines", "classes", "images", "identities", "secrets", "pvcs", "jobs", "vms", "vmis", "dvs"} {
		w.idx[k] = newIndex()
	}
	w.r = &Reconciler{
		Kube: w.kube, Dynamic: w.dyn, Client: w.client, Recorder: w.recorder,
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Settings: Settings{BootdiskImage: "example.com/bootdisk:1", HookSidecarImage: "example.com/hook:1", OSKSecretName: "dockerios-osk", TerminationGracePeriodSeconds: 120},
		Listers: Listers{
			Machines: dlisters.NewMacOSMachineLister(w.idx["machines"]), Classes: dlisters.NewMacOSMachineClassLister(w.idx["classes"]),
			Images: dlisters.NewMacOSImageLister(w.idx["images"]), Identities: dlisters.NewMacOSIdentityLister(w.idx["identities"]),
			Secrets: corelisters.NewSecretLister(w.idx["secrets"]), PVCs: corelisters.NewPersistentVolumeClaimLister(w.idx["pvcs"]),
			Jobs: batchlisters.NewJobLister(w.idx["jobs"]),
			VMs:  cache.NewGenericLister(w.idx["vms"], schema.GroupResource{}), VMIs: cache.NewGenericLister(w.idx["vmis"], schema.GroupResource{}),
			DVs: cache.NewGenericLister(w.idx["dvs"], schema.GroupResource{}),
		},
		Now: func() time.Time { return w.now },
	}
	w.sync()
	return w
}

// sync fills the caches with what the clients store.
func (w *world) sync() {
	t, ctx := w.t, context.Background()
	fill := func(k string, items []any) {
		var objs []any
		objs = append(objs, items...)
		require.NoError(t, w.idx[k].Replace(objs, ""))
	}
	ms, err := w.client.DockeriosV1alpha1().MacOSMachines("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	cs, err := w.client.DockeriosV1alpha1().MacOSMachineClasses().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	is, err := w.client.DockeriosV1alpha1().MacOSImages().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	ids, err := w.client.DockeriosV1alpha1().MacOSIdentities().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	ss, err := w.kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	ps, err := w.kube.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	js, err := w.kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var items []any
	for i := range ms.Items {
		items = append(items, &ms.Items[i])
	}
	fill("machines", items)
	items = nil
	for i := range cs.Items {
		items = append(items, &cs.Items[i])
	}
	fill("classes", items)
	items = nil
	for i := range is.Items {
		items = append(items, &is.Items[i])
	}
	fill("images", items)
	items = nil
	for i := range ids.Items {
		items = append(items, &ids.Items[i])
	}
	fill("identities", items)
	items = nil
	for i := range ss.Items {
		items = append(items, &ss.Items[i])
	}
	fill("secrets", items)
	items = nil
	for i := range ps.Items {
		items = append(items, &ps.Items[i])
	}
	fill("pvcs", items)
	items = nil
	for i := range js.Items {
		items = append(items, &js.Items[i])
	}
	fill("jobs", items)
	for k, gvr := range map[string]schema.GroupVersionResource{"vms": external.VirtualMachines, "vmis": external.VirtualMachineInstances, "dvs": external.DataVolumes} {
		l, err := w.dyn.Resource(gvr).Namespace("").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		items = nil
		for i := range l.Items {
			items = append(items, &l.Items[i])
		}
		fill(k, items)
	}
}

// writes are the writes the clients took since the last call.
func (w *world) writes() []string {
	var out []string
	for _, f := range []interface {
		Actions() []k8stesting.Action
		ClearActions()
	}{w.kube, w.dyn, w.client} {
		for _, a := range f.Actions() {
			switch a.GetVerb() {
			case "get", "list", "watch":
				continue
			}
			s := a.GetVerb() + " " + a.GetResource().Resource
			if a.GetSubresource() != "" {
				s += "/" + a.GetSubresource()
			}
			out = append(out, s)
		}
		f.ClearActions()
	}
	return out
}

// settle reconciles (the caches catching up after every pass) until a
// pass writes nothing, and returns the writes of the passes before it.
func (w *world) settle() []string {
	w.t.Helper()
	var all []string
	for range 10 {
		_, err := w.r.Reconcile(context.Background(), "ci", "mac-0")
		require.NoError(w.t, err)
		writes := w.writes()
		w.sync()
		if len(writes) == 0 {
			return all
		}
		all = append(all, writes...)
	}
	w.t.Fatalf("no quiet pass in 10; last writes: %v", all)
	return nil
}

func (w *world) machine() *v1alpha1.MacOSMachine {
	m, err := w.client.DockeriosV1alpha1().MacOSMachines("ci").Get(context.Background(), "mac-0", metav1.GetOptions{})
	require.NoError(w.t, err)
	return m
}

func (w *world) dv(name string) *cdiv1.DataVolume {
	u, err := w.dyn.Resource(external.DataVolumes).Namespace("ci").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	dv, err := external.FromUnstructured[cdiv1.DataVolume](u)
	require.NoError(w.t, err)
	return dv
}

func (w *world) vm() *kubevirtv1.VirtualMachine {
	u, err := w.dyn.Resource(external.VirtualMachines).Namespace("ci").Get(context.Background(), "mac-0", metav1.GetOptions{})
	if err != nil {
		return nil
	}
	vm, err := external.FromUnstructured[kubevirtv1.VirtualMachine](u)
	require.NoError(w.t, err)
	return vm
}

// dvSucceeded plays CDI: the DataVolume is done.
func (w *world) dvSucceeded(name string) {
	u, err := w.dyn.Resource(external.DataVolumes).Namespace("ci").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(w.t, err)
	require.NoError(w.t, unstructured.SetNestedField(u.Object, string(cdiv1.Succeeded), "status", "phase"))
	_, err = w.dyn.Resource(external.DataVolumes).Namespace("ci").Update(context.Background(), u, metav1.UpdateOptions{})
	require.NoError(w.t, err)
}

// jobsComplete plays the Job controller: every Job succeeded.
func (w *world) jobsComplete() {
	jobs, err := w.kube.BatchV1().Jobs("ci").List(context.Background(), metav1.ListOptions{})
	require.NoError(w.t, err)
	require.NotEmpty(w.t, jobs.Items)
	for _, j := range jobs.Items {
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		_, err := w.kube.BatchV1().Jobs("ci").UpdateStatus(context.Background(), &j, metav1.UpdateOptions{})
		require.NoError(w.t, err)
	}
}

// vmiRunning plays KubeVirt: the VM runs.
func (w *world) vmiRunning() {
	v := vmi(kubevirtv1.Running, w.now)
	v.Namespace, v.Labels = "ci", labelsFor(w.machine())
	u, err := external.ToUnstructured(v)
	require.NoError(w.t, err)
	_, err = w.dyn.Resource(external.VirtualMachineInstances).Namespace("ci").Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(w.t, err)
}

func (w *world) updateImage(mutate func(*v1alpha1.MacOSImage)) {
	img, err := w.client.DockeriosV1alpha1().MacOSImages().Get(context.Background(), "sonoma", metav1.GetOptions{})
	require.NoError(w.t, err)
	mutate(img)
	_, err = w.client.DockeriosV1alpha1().MacOSImages().Update(context.Background(), img, metav1.UpdateOptions{})
	require.NoError(w.t, err)
	w.writes()
	w.sync()
}

func (w *world) events() []string {
	var out []string
	for {
		select {
		case e := <-w.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func machineCondition(m *v1alpha1.MacOSMachine, typ string) metav1.Condition {
	c := meta.FindStatusCondition(m.Status.Conditions, typ)
	if c == nil {
		return metav1.Condition{}
	}
	return *c
}

// An install session from creation to promotion and teardown, every pass
// re-derived from what the clients store, and every state reached once:
// the pass after it writes nothing.
func TestInstallSession_Reconcile(t *testing.T) {
	class := exampleClass(t)
	img := recoveryImage()
	img.Status.Conditions = []metav1.Condition{{Type: "RecoveryReady", Status: metav1.ConditionFalse, Reason: "Fetching",
		Message: "downloading BaseSystem.dmg (41% of 3.1 GB)"}}
	img.Status.Recovery = nil
	w := newWorld(t, installSession(testMachine()), class, img)
	n := NamesFor(w.machine())

	// The recovery image is not fetched yet: the blank system disk is made,
	// the recovery disk waits, and the session says for what.
	w.settle()
	m := w.machine()
	sys := w.dv(n.SystemDisk)
	require.NotNil(t, sys, "the blank system disk is made meanwhile")
	require.NotNil(t, sys.Spec.Source)
	assert.NotNil(t, sys.Spec.Source.Blank, "blank, not a clone of the image")
	assert.Nil(t, sys.Spec.SourceRef)
	assert.Zero(t, class.Spec.SystemDisk.Size.Cmp(sys.Spec.Storage.Resources.Requests[corev1.ResourceStorage]), "the class's size")
	assert.Equal(t, class.Spec.SystemDisk.StorageClassName, sys.Spec.Storage.StorageClassName)
	assert.Nil(t, w.dv(n.RecoveryDisk))
	c := machineCondition(m, v1alpha1.MachineSystemDiskReady)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, ReasonRecoveryNotReady, c.Reason)
	assert.Equal(t, "waiting for MacOSImage sonoma's recovery image (RecoveryReady False, Fetching: downloading BaseSystem.dmg (41% of 3.1 GB))", c.Message)
	assert.Equal(t, v1alpha1.MachineProvisioning, m.Status.Phase)
	assert.Equal(t, ReasonInstallSession, machineCondition(m, v1alpha1.MachineConditionReady).Reason)

	// Fetched: the recovery disk clones the image's recovery volume from
	// the DataSource's namespace into the session's.
	w.updateImage(func(i *v1alpha1.MacOSImage) {
		i.Status.Conditions = recoveryImage().Status.Conditions
		i.Status.Recovery = recoveryImage().Status.Recovery
	})
	w.settle()
	rec := w.dv(n.RecoveryDisk)
	require.NotNil(t, rec)
	assert.Equal(t, "mac-0-recovery", rec.Name)
	assert.Equal(t, "ci", rec.Namespace)
	assert.Equal(t, "uid-1", rec.Labels[MachineUIDLabel])
	require.NotNil(t, rec.Spec.Source)
	assert.Equal(t, &cdiv1.DataVolumeSourcePVC{Namespace: "dockerios-images", Name: "sonoma-recovery"}, rec.Spec.Source.PVC)
	c = machineCondition(w.machine(), v1alpha1.MachineSystemDiskReady)
	assert.Equal(t, ReasonCloning, c.Reason)
	assert.Contains(t, c.Message, "recovery disk DataVolume mac-0-recovery is being made")

	// Disks ready, bootdisk rendered: the VM is made, and runs.
	w.jobsComplete()
	w.dvSucceeded(n.SystemDisk)
	w.dvSucceeded(n.RecoveryDisk)
	w.sync()
	w.settle()
	vm := w.vm()
	require.NotNil(t, vm)
	assert.Equal(t, kubevirtv1.RunStrategyAlways, *vm.Spec.RunStrategy)
	assert.Len(t, vm.Spec.Template.Spec.Domain.Devices.Disks, 3)
	m = w.machine()
	assert.Equal(t, v1alpha1.MachineStarting, m.Status.Phase)
	assert.Equal(t, ReasonInstallDisksReady, machineCondition(m, v1alpha1.MachineSystemDiskReady).Reason)

	// Running, hours past the class's startTimeout, its agent never
	// answering: never failed, never Ready, and it says what to do.
	w.vmiRunning()
	w.sync()
	w.now = t0.Add(6 * time.Hour)
	w.settle()
	m = w.machine()
	assert.Equal(t, v1alpha1.MachineStarting, m.Status.Phase, "an install session is not failed by startTimeout")
	ready := machineCondition(m, v1alpha1.MachineConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, ReasonInstallSession, ready.Reason)
	assert.Contains(t, ready.Message, "`virtctl vnc mac-0 -n ci`")
	assert.Contains(t, ready.Message, "`kubectl dockerios image promote mac-0 --image sonoma -n ci`")
	w.events()

	// A promotion the image's controller refused (the agent has not
	// reported the macOS version): the session runs on, for the person to
	// fix what was refused; the image's controller goes on once it is.
	w.updateImage(func(i *v1alpha1.MacOSImage) {
		i.Spec.PromoteFrom = &v1alpha1.NamespacedObjectReference{Namespace: "ci", Name: "mac-0"}
		i.Status.Promotion = &v1alpha1.PromotionStatus{Machine: *i.Spec.PromoteFrom, Phase: v1alpha1.PromotionFailed}
	})
	w.settle()
	assert.Equal(t, kubevirtv1.RunStrategyAlways, *w.vm().Spec.RunStrategy, "a refused promotion does not halt the session")
	assert.Equal(t, ReasonInstallSession, machineCondition(w.machine(), v1alpha1.MachineConditionReady).Reason)

	// The record of an earlier session's promotion under the same name
	// (its golden volume carries that machine's UID): not this session's.
	w.updateImage(func(i *v1alpha1.MacOSImage) {
		i.Status.Promotion = &v1alpha1.PromotionStatus{Machine: *i.Spec.PromoteFrom, Phase: v1alpha1.PromotionSucceeded, VolumeName: "sonoma-0badc0de"}
	})
	w.settle()
	assert.Equal(t, kubevirtv1.RunStrategyAlways, *w.vm().Spec.RunStrategy, "an earlier machine's promotion does not halt this one")
	assert.Equal(t, ReasonInstallSession, machineCondition(w.machine(), v1alpha1.MachineConditionReady).Reason)
	w.events()

	// Promoted: the VM runs Halted (an ACPI shutdown), and says so.
	w.updateImage(func(i *v1alpha1.MacOSImage) {
		i.Spec.PromoteFrom = &v1alpha1.NamespacedObjectReference{Namespace: "ci", Name: "mac-0"}
		i.Status.Promotion = &v1alpha1.PromotionStatus{Machine: *i.Spec.PromoteFrom, Phase: v1alpha1.PromotionStopping}
	})
	writes := w.settle()
	assert.Contains(t, writes, "patch virtualmachines")
	assert.Equal(t, kubevirtv1.RunStrategyHalted, *w.vm().Spec.RunStrategy)
	ready = machineCondition(w.machine(), v1alpha1.MachineConditionReady)
	assert.Equal(t, ReasonPromoting, ready.Reason)
	assert.Equal(t, "MacOSImage sonoma promotes this install session (Stopping): its guest is shutting down (VirtualMachine mac-0 runs Halted, an ACPI shutdown); "+
		"its system disk is cloned into the image once the guest is down, then this machine is deleted", ready.Message)
	assert.Contains(t, strings.Join(w.events(), "\n"), "Normal Promoting MacOSImage sonoma promotes this install session: stopping VirtualMachine mac-0 (ACPI shutdown)")

	// The promotion withdrawn: the session boots again.
	w.updateImage(func(i *v1alpha1.MacOSImage) { i.Spec.PromoteFrom, i.Status.Promotion = nil, nil })
	w.settle()
	assert.Equal(t, kubevirtv1.RunStrategyAlways, *w.vm().Spec.RunStrategy)
	assert.Equal(t, ReasonInstallSession, machineCondition(w.machine(), v1alpha1.MachineConditionReady).Reason)

	// Deleted: taken apart like any machine, its recovery disk too.
	m = w.machine()
	m.DeletionTimestamp = &metav1.Time{Time: w.now}
	_, err := w.client.DockeriosV1alpha1().MacOSMachines("ci").Update(context.Background(), m, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, w.dyn.Resource(external.VirtualMachineInstances).Namespace("ci").Delete(context.Background(), "mac-0", metav1.DeleteOptions{}))
	w.writes()
	w.sync()
	for range 5 {
		_, err := w.r.Reconcile(context.Background(), "ci", "mac-0")
		require.NoError(t, err)
		w.writes()
		w.sync()
	}
	assert.Nil(t, w.vm())
	assert.Nil(t, w.dv(n.RecoveryDisk), "the recovery disk goes with the session")
	assert.Nil(t, w.dv(n.SystemDisk))
	assert.Empty(t, w.machine().Finalizers)
}

// Derivations of an install session's status from what was observed.
func TestDerive_InstallSession(t *testing.T) {
	osk := &api.Status{Stage: api.StageReady, AgentVersion: "v1", OSVersion: "14.6.1", Disk: api.Disk{TotalBytes: 100, FreeBytes: 40}}
	disks := func(o *Observed) {
		o.Job, o.DV, o.RecoveryDV = job(batchv1.JobComplete), dv(cdiv1.Succeeded), dv(cdiv1.Succeeded)
		o.RecoveryDV.Name = "mac-0-recovery"
	}
	runningFor := func(d time.Duration) func(*Observed) {
		return func(o *Observed) {
			disks(o)
			o.VM, o.VMI = vm(t0.Add(-d), kubevirtv1.VirtualMachineStatusRunning), vmi(kubevirtv1.Running, t0.Add(-d))
		}
	}
	for _, tc := range []struct {
		name    string
		machine func(*v1alpha1.MacOSMachine)
		o       func(*Observed)
		phase   v1alpha1.MacOSMachinePhase
		want    map[string][2]string // condition type → reason, message (substring)
		agent   string               // status.agent.osVersion
	}{
		{name: "image without source.recovery: waits, saying so",
			o: func(o *Observed) {
				o.Job = job(batchv1.JobComplete)
				o.Image = recoveryImage()
				o.Image.Spec.Source.Recovery = nil
				o.RecoveryNotReady = recoveryNotReady(o.Image)
			},
			phase: v1alpha1.MachineProvisioning,
			want: map[string][2]string{v1alpha1.MachineSystemDiskReady: {ReasonRecoveryNotReady,
				"MacOSImage sonoma has no spec.source.recovery: an install session boots the recovery image of an image made from Apple's recovery service"}}},
		{name: "RecoveryReady True but no volume named yet",
			o: func(o *Observed) {
				o.Image = recoveryImage()
				o.Image.Status.Recovery = nil
				o.RecoveryNotReady = recoveryNotReady(o.Image)
			},
			phase: v1alpha1.MachineProvisioning,
			want: map[string][2]string{v1alpha1.MachineSystemDiskReady: {ReasonRecoveryNotReady,
				"waiting for MacOSImage sonoma's recovery image: RecoveryReady is True but status.recovery names no volume yet"}}},
		{name: "the image's Ready False (not promoted yet) does not hold the blank disk",
			o: func(o *Observed) {
				disks(o)
				o.Image.Status.Conditions = append(o.Image.Status.Conditions, notReadyImage().Status.Conditions...)
			},
			phase: v1alpha1.MachineStarting,
			want:  map[string][2]string{v1alpha1.MachineSystemDiskReady: {ReasonInstallDisksReady, "blank system disk DataVolume mac-0-system and recovery disk DataVolume mac-0-recovery are ready"}}},
		{name: "recovery disk failed: failed",
			o: func(o *Observed) {
				o.Job, o.DV, o.RecoveryDV = job(batchv1.JobComplete), dv(cdiv1.Succeeded), dv(cdiv1.Failed)
				o.RecoveryDV.Name = "mac-0-recovery"
			},
			phase: v1alpha1.MachineFailed,
			want: map[string][2]string{v1alpha1.MachineConditionReady: {ReasonRecoveryCloneFailed,
				"recovery disk DataVolume mac-0-recovery failed to clone: no space left on device"}}},
		{name: "running a day, the agent silent: Starting, never failed",
			o: func(o *Observed) {
				runningFor(24 * time.Hour)(o)
				o.AgentAsked, o.AgentErr = true, errors.New("dial tcp 10.0.0.7:8443: connect: connection refused")
			},
			phase: v1alpha1.MachineStarting,
			want: map[string][2]string{v1alpha1.MachineConditionReady: {ReasonInstallSession,
				"an install session is never Ready; it runs: open its console with `virtctl vnc mac-0 -n ci`"},
				v1alpha1.MachineVirtualMachineRunning: {ReasonVMIRunning, ""}}},
		{name: "its agent Ready: never Ready, the macOS version reported",
			o: func(o *Observed) {
				runningFor(time.Hour)(o)
				o.AgentAsked, o.Agent = true, osk
			},
			phase: v1alpha1.MachineStarting, agent: "14.6.1",
			want: map[string][2]string{v1alpha1.MachineConditionReady: {ReasonInstallSession,
				"its agent answers from macOS 14.6.1: clean the guest up for cloning (docs/reference/agent.md) and run `kubectl dockerios image promote mac-0 --image sonoma -n ci`"},
				v1alpha1.MachineGuestReady: {"Ready", ""}}},
		{name: "looked Ready once (a status written by hand): not hung, not NoLongerReady",
			machine: wasReady(metav1.ConditionFalse, t0.Add(-time.Hour), t0.Add(-time.Hour)),
			o: func(o *Observed) {
				runningFor(time.Hour)(o)
				o.AgentAsked, o.AgentErr = true, errors.New("i/o timeout")
			},
			phase: v1alpha1.MachineStarting,
			want:  map[string][2]string{v1alpha1.MachineConditionReady: {ReasonInstallSession, ""}}},
		{name: "promoted, its guest shut down: Halted, the last report kept",
			machine: func(m *v1alpha1.MacOSMachine) {
				m.Status.Agent = &v1alpha1.AgentReport{Stage: "Ready", OSVersion: "14.6.1"}
			},
			o: func(o *Observed) {
				disks(o)
				o.VM = vm(t0.Add(-time.Hour), kubevirtv1.VirtualMachineStatusStopped)
				o.Promotion = &Promotion{Image: "sonoma", Phase: v1alpha1.PromotionCloning}
			},
			phase: v1alpha1.MachineStarting, agent: "14.6.1",
			want: map[string][2]string{
				v1alpha1.MachineConditionReady: {ReasonPromoting,
					"MacOSImage sonoma promotes this install session (Cloning): its guest is shut down; its system disk is cloned into the image once the guest is down"},
				v1alpha1.MachineVirtualMachineRunning: {ReasonHalted, "VirtualMachine mac-0 is halted: MacOSImage sonoma promotes this install session"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := installSession(testMachine())
			if tc.machine != nil {
				tc.machine(m)
			}
			o := &Observed{Class: testClass(), Image: recoveryImage(), Identity: testIdentity()}
			tc.o(o)
			d := Derive(m, o, t0)
			assert.Equal(t, tc.phase, d.Status.Phase)
			for typ, want := range tc.want {
				c := meta.FindStatusCondition(d.Status.Conditions, typ)
				require.NotNil(t, c, typ)
				assert.Equal(t, want[0], c.Reason, typ)
				assert.Contains(t, c.Message, want[1], typ)
			}
			if tc.agent != "" {
				require.NotNil(t, d.Status.Agent)
				assert.Equal(t, tc.agent, d.Status.Agent.OSVersion)
			}
			ready := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.MachineConditionReady)
			require.NotNil(t, ready)
			assert.NotEqual(t, metav1.ConditionTrue, ready.Status, "an install session is never Ready")
			if tc.phase != v1alpha1.MachineFailed {
				assert.Nil(t, d.Fail)
			}
			// Idempotent: the same observation derives the same status.
			m2 := m.DeepCopy()
			m2.Status = d.Status
			again := Derive(m2, o, t0.Add(time.Minute)).Status
			assert.NotEqual(t, somethingNew, statusNews(&d.Status, &again), "a second pass writes nothing")
		})
	}
}

// A machine whose class's SMBIOS model cannot boot its image's release
// waits, Pending, with nothing made for it, and says why; once the image
// names a release the model runs, it is provisioned.
func TestReconcile_ReleaseUnsupportedByModelWaits(t *testing.T) {
	class := exampleClass(t) // iMacPro1,1: macOS 10.13.2 to 15.7.4
	img := recoveryImage()
	img.Spec.Source.Recovery, img.Status = nil, v1alpha1.MacOSImageStatus{}
	img.Spec.Release = "tahoe"
	for _, m := range []*v1alpha1.MacOSMachine{testMachine(), installSession(testMachine())} {
		t.Run("purpose "+string(m.Spec.Purpose), func(t *testing.T) {
			w := newWorld(t, m, class, img)
			writes := w.settle()
			assert.Equal(t, []string{"update macosmachines/status"}, writes, "nothing is made for the machine")
			got := w.machine()
			assert.Equal(t, v1alpha1.MachinePending, got.Status.Phase)
			c := machineCondition(got, ConditionImageCompatible)
			assert.Equal(t, metav1.ConditionFalse, c.Status)
			assert.Equal(t, ReasonReleaseUnsupportedByModel, c.Reason)
			assert.Equal(t, `MacOSMachineClass standard's smbiosModel cannot boot MacOSImage sonoma's release: iMacPro1,1 runs macOS 10.13.2 to 15.7.4, and "tahoe" is newer; `+
				`nothing is made for the machine (its class is fixed when it is made): delete it and use a class whose smbiosModel runs the release, or point the image at a release the model runs`, c.Message)
			assert.Equal(t, ReasonReleaseUnsupportedByModel, machineCondition(got, v1alpha1.MachineSystemDiskReady).Reason)
			assert.Contains(t, machineCondition(got, v1alpha1.MachineConditionReady).Message, "smbiosModel cannot boot MacOSImage sonoma's release")

			w.updateImage(func(i *v1alpha1.MacOSImage) { i.Spec.Release = "sonoma" })
			writes = w.settle()
			assert.Contains(t, writes, "create persistentvolumeclaims", "provisioned once the model runs the release")
			assert.Contains(t, writes, "create datavolumes")
			got = w.machine()
			assert.Equal(t, v1alpha1.MachineProvisioning, got.Status.Phase)
			c = machineCondition(got, ConditionImageCompatible)
			assert.Equal(t, metav1.ConditionTrue, c.Status)
			assert.Equal(t, ReasonReleaseSupported, c.Reason)
		})
	}
}

// A machine whose model runs the release (or that the tables know
// nothing of) never carries ImageCompatible: no status write for it on
// every machine of the fleet.
func TestReconcile_ImageCompatibleOnlyOnceFalse(t *testing.T) {
	for _, release := range []string{"sonoma", "macOS 99"} {
		img := recoveryImage()
		img.Spec.Source.Recovery, img.Status = nil, v1alpha1.MacOSImageStatus{}
		img.Spec.Release = release
		w := newWorld(t, testMachine(), exampleClass(t), img)
		w.settle()
		assert.Nil(t, meta.FindStatusCondition(w.machine().Status.Conditions, ConditionImageCompatible), release)
		assert.NotNil(t, w.dv(NamesFor(w.machine()).SystemDisk), release)
	}
}
