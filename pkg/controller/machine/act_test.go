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
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	dfake "github.com/dockerios/dockerios/pkg/generated/clientset/versioned/fake"
)

// actEnv is a reconciler whose machine has its Secrets, bootdisk PVC and a
// finished bootdisk Job, over fake clients holding extra objects (KubeVirt
// and CDI ones in the dynamic client).
type actEnv struct {
	r        *Reconciler
	kube     *fake.Clientset
	dyn      *dynamicfake.FakeDynamicClient
	recorder *record.FakeRecorder
	o        *Observed
}

func newActEnv(t *testing.T, m *v1alpha1.MacOSMachine) *actEnv {
	t.Helper()
	class := testClass()
	class.Spec.SystemDisk.Size = resource.MustParse("64Gi")
	image := &v1alpha1.MacOSImage{ObjectMeta: metav1.ObjectMeta{Name: "sonoma"}}
	image.Spec.Source.PVC = &v1alpha1.NamespacedObjectReference{Namespace: "images", Name: "sonoma"}
	idSecret := IdentitySecret(m, testIdentity())
	kube := fake.NewClientset(idSecret)
	secrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, secrets.Add(idSecret))
	jobs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		external.VirtualMachines: "VirtualMachineList", external.DataVolumes: "DataVolumeList"})
	recorder := record.NewFakeRecorder(100)
	done := job(batchv1.JobComplete)
	return &actEnv{kube: kube, dyn: dyn, recorder: recorder,
		o: &Observed{Class: class, Image: image, Identity: testIdentity(), Secret: TokenSecret(m, []byte("token")),
			PVC: BootdiskPVC(m, class), Job: done},
		r: &Reconciler{
			Kube: kube, Dynamic: dyn,
			// The ledger records the machine as its identity's holder.
			Client:   dfake.NewClientset(testIdentity(), &v1alpha1.MacOSIdentityPool{ObjectMeta: metav1.ObjectMeta{Name: "standard"}}),
			Listers:  Listers{Secrets: corelisters.NewSecretLister(secrets), Jobs: batchlisters.NewJobLister(jobs)},
			Recorder: recorder,
			Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
			Now:      func() time.Time { return t0 },
		}}
}

// store puts a VirtualMachine or DataVolume in the API (not in the
// Observed: the cache has not shown it).
func (e *actEnv) store(t *testing.T, obj external.Object) {
	t.Helper()
	u, err := external.ToUnstructured(obj)
	require.NoError(t, err)
	gvr := external.DataVolumes
	if _, ok := obj.(*kubevirtv1.VirtualMachine); ok {
		gvr = external.VirtualMachines
	}
	_, err = e.dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(t, err)
}

func (e *actEnv) events() []string {
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

// A system disk the cache does not show as the machine's, but whose name
// is taken in the API by one that is not the machine's (a predecessor's,
// or one whose machine-uid label was removed by hand): no CloningSystemDisk
// Event for a clone that was never made, and no look every second — an
// error, which the queue retries with its backoff.
func TestSystemDiskNameTakenByAnotherIsNoEventStorm(t *testing.T) {
	m := testMachine()
	e := newActEnv(t, m)
	other, err := SystemDisk(m, e.o.Class, e.o.Image)
	require.NoError(t, err)
	delete(other.Labels, MachineUIDLabel)
	e.store(t, other)

	for range 3 {
		var requeue time.Duration
		err := e.r.act(context.Background(), m, e.o, &requeue)
		assert.ErrorContains(t, err, "is not this machine's")
		assert.Nil(t, e.o.DV)
	}
	assert.Empty(t, e.events(), "Events for a DataVolume that was not created")
}

// A system disk made by an earlier pass the cache has not shown yet: look
// again in a second, and no second CloningSystemDisk Event.
func TestSystemDiskMadeByAnEarlierPassIsNoSecondEvent(t *testing.T) {
	m := testMachine()
	e := newActEnv(t, m)
	mineDV, err := SystemDisk(m, e.o.Class, e.o.Image)
	require.NoError(t, err)
	e.store(t, mineDV)
	var requeue time.Duration
	require.NoError(t, e.r.act(context.Background(), m, e.o, &requeue))
	assert.Equal(t, time.Second, requeue)
	assert.Empty(t, e.events())
}

// The first pass creates it, with one Event.
func TestSystemDiskCreatedWithOneEvent(t *testing.T) {
	m := testMachine()
	e := newActEnv(t, m)
	var requeue time.Duration
	require.NoError(t, e.r.act(context.Background(), m, e.o, &requeue))
	require.NotNil(t, e.o.DV)
	assert.Equal(t, []string{"Normal CloningSystemDisk cloning MacOSImage sonoma into DataVolume mac-0-system-uid1"}, e.events())
	_, err := e.dyn.Resource(external.DataVolumes).Namespace("ci").Get(context.Background(), "mac-0-system-uid1", metav1.GetOptions{})
	assert.NoError(t, err)
}

// The same for the VirtualMachine: no Starting Event every second for a VM
// that was not created because another of the name is there.
func TestVirtualMachineNameTakenByAnotherIsNoEventStorm(t *testing.T) {
	m := testMachine()
	e := newActEnv(t, m)
	e.r.Settings = Settings{OSKSecretName: "dockerios-osk", HookSidecarImage: "example.com/hook:1"}
	other, err := VirtualMachine(m, e.o.Class, testIdentity(), e.r.Settings, true)
	require.NoError(t, err)
	delete(other.Labels, MachineUIDLabel)
	e.store(t, other)
	e.r.Settings = Settings{OSKSecretName: "dockerios-osk", HookSidecarImage: "example.com/hook:1"}
	_, err = e.kube.CoreV1().Secrets("ci").Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dockerios-osk", Namespace: "ci"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	dv, err := SystemDisk(m, e.o.Class, e.o.Image)
	require.NoError(t, err)
	dv.Status.Phase = cdiv1.Succeeded
	e.o.DV = dv

	for range 3 {
		var requeue time.Duration
		assert.ErrorContains(t, e.r.act(context.Background(), m, e.o, &requeue), "is not this machine's")
	}
	assert.Empty(t, e.events(), "Events for a VirtualMachine that was not created")
}

// A machine's finished bootdisk Job deleted once its VirtualMachine exists
// (by hand, or by a cleanup of finished Jobs) is not run again: the VM boots
// from the disk it rendered, and a second builder would rewrite it under
// the running guest.
func TestBootdiskJobGoneOnceTheVMExistsIsNotRunAgain(t *testing.T) {
	m := testMachine()
	e := newActEnv(t, m)
	e.r.Settings.BootdiskImage = "example.com/bootdisk:1"
	e.o.Job = nil
	e.o.VM = vm(t0, kubevirtv1.VirtualMachineStatusRunning)
	var requeue time.Duration
	require.NoError(t, e.r.bootdisk(context.Background(), m, e.o, true, &requeue))
	jobs, err := e.kube.BatchV1().Jobs("ci").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, jobs.Items, "a bootdisk Job made again under the running VM")
}

// A system disk DataVolume deleted once the VirtualMachine exists is not
// cloned again: the guest runs from the disk that is going, and a new
// clone under its name would not be it (Derive fails the machine).
func TestSystemDiskGoneOnceTheVMExistsIsNotClonedAgain(t *testing.T) {
	m := testMachine()
	e := newActEnv(t, m)
	e.o.VM = vm(t0, kubevirtv1.VirtualMachineStatusRunning)
	e.o.SystemDiskLost = true
	var requeue time.Duration
	require.NoError(t, e.r.act(context.Background(), m, e.o, &requeue))
	dvs, err := e.dyn.Resource(external.DataVolumes).Namespace(m.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, dvs.Items, "a system disk cloned again under the running VM")
	assert.Nil(t, e.o.DV)
	assert.Empty(t, e.events())
}

// The agent token's Secret and the bootdisk PVC, deleted once the
// VirtualMachine exists, are not made again: a new token would never match
// the one the guest's bootdisk carries, and a new PVC would be empty
// (Derive fails the machine).
func TestTokenAndBootdiskGoneOnceTheVMExistsAreNotMadeAgain(t *testing.T) {
	m := testMachine()
	e := newActEnv(t, m)
	e.o.VM = vm(t0, kubevirtv1.VirtualMachineStatusRunning)
	e.o.DV = dv(cdiv1.Succeeded)
	e.o.Secret, e.o.PVC = nil, nil
	e.o.TokenLost, e.o.BootdiskLost = true, true
	var requeue time.Duration
	require.NoError(t, e.r.act(context.Background(), m, e.o, &requeue))
	_, err := e.kube.CoreV1().Secrets(m.Namespace).Get(context.Background(), NamesFor(m).TokenSecret, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a new agent token made under the running guest: %v", err)
	_, err = e.kube.CoreV1().PersistentVolumeClaims(m.Namespace).Get(context.Background(), NamesFor(m).BootdiskPVC, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "an empty bootdisk PVC made under the running guest: %v", err)
}
