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

package integration

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/pkg/controller/vmaudit"
	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	dinformers "github.com/dockerios/dockerios/pkg/generated/informers/externalversions"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/pkg/ledgerbackup"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
	"github.com/dockerios/dockerios/pkg/storage/txn"
	"github.com/dockerios/dockerios/test/framework"
)

// TestRestore_NeverReissuesALiveIdentity is issue 30's scenario: a backup
// at T0; machines made after it take identities X and Y and run; the
// ledger is restored to T0, where X and Y are free. New machines must not
// get X or Y: the restore puts every pool on hold, the VM audit finds the
// VMs running with X and Y for machines the ledger does not know, marks
// them HeldOutsideLedger (which withholds them) and only then lifts the
// hold. Deleting the orphaned VMs gives X and Y back.
//
// The apiserver, its etcd, the backup and the restore are real; the VMs
// are what the controller makes (machine.VirtualMachine), held in the
// cache the audit reads, as KubeVirt's objects would be.
func TestRestore_NeverReissuesALiveIdentity(t *testing.T) {
	ctx := context.Background()
	etcdDir := t.TempDir()
	etcd, err := embeddedetcd.Start(filepath.Join(etcdDir, "data"), os.Stderr)
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			etcd.Stop()
		}
	})
	dataDir := t.TempDir()
	s := framework.StartLocalServer(t, dataDir, "--etcd-servers", etcd.ClientURL)
	createClassAndPool(t, s)
	client, err := versioned.NewForConfig(restConfig(t, s.Kubeconfig))
	require.NoError(t, err)
	gen := identity.NewGenerator(30, "iMacPro1,1")
	for i := range 4 {
		v := gen.Next()
		_, err := client.DockeriosV1alpha1().MacOSIdentities().Create(ctx, &v1alpha1.MacOSIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("id-%d", i)},
			Spec: v1alpha1.MacOSIdentitySpec{PoolName: "imacpro", Model: v.Model, SerialNumber: v.SerialNumber,
				BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	machines := client.DockeriosV1alpha1().MacOSMachines("default")
	createMachine := func(name string) *v1alpha1.MacOSMachine {
		t.Helper()
		m, err := machines.Create(ctx, &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.MacOSMachineSpec{ClassName: "standard"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return m
	}
	m0 := createMachine("m0")
	require.NotNil(t, m0.Status.IdentityRef)

	// T0.
	backups := t.TempDir()
	md, err := ledgerbackup.Take(ctx, ledgerbackup.Options{
		Transport: storagebackend.TransportConfig{ServerList: []string{etcd.ClientURL}}, StoragePrefix: "/registry/", Dir: backups, Keep: 2})
	require.NoError(t, err)

	// T1: two machines take X and Y, and their VMs run.
	class, err := client.DockeriosV1alpha1().MacOSMachineClasses().Get(ctx, "standard", metav1.GetOptions{})
	require.NoError(t, err)
	vmStore := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	live := map[string]string{} // identity → VM name
	for _, name := range []string{"m1", "m2"} {
		m := createMachine(name)
		require.NotNil(t, m.Status.IdentityRef, "machine %s got an identity", name)
		id, err := client.DockeriosV1alpha1().MacOSIdentities().Get(ctx, m.Status.IdentityRef.Name, metav1.GetOptions{})
		require.NoError(t, err)
		vm, err := machine.VirtualMachine(m, class, id, machine.Settings{HookSidecarImage: "hook"}, true)
		require.NoError(t, err)
		u, err := external.ToUnstructured(vm)
		require.NoError(t, err)
		require.NoError(t, vmStore.Add(u))
		live[id.Name] = vm.Name
	}
	require.Len(t, live, 2)

	// The ledger is lost and restored to T0.
	s.Stop(t)
	etcd.Stop()
	stopped = true
	restored := filepath.Join(etcdDir, "restored")
	_, err = ledgerbackup.Restore(ctx, ledgerbackup.RestoreOptions{
		HoldOptions: ledgerbackup.HoldOptions{Snapshot: filepath.Join(backups, md.Snapshot)},
		DataDir:     restored, Member: ledgerbackup.Embedded})
	require.NoError(t, err)
	etcd, err = embeddedetcd.Start(restored, os.Stderr)
	require.NoError(t, err)
	stopped = false
	s = framework.StartLocalServer(t, dataDir, "--etcd-servers", etcd.ClientURL)
	client, err = versioned.NewForConfig(restConfig(t, s.Kubeconfig))
	require.NoError(t, err)
	machines = client.DockeriosV1alpha1().MacOSMachines("default")

	for name := range live {
		id, err := client.DockeriosV1alpha1().MacOSIdentities().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Nil(t, id.Status.Allocation, "at T0 identity %s was free", name)
	}
	framework.Eventually(t, 20*time.Second, func() string {
		p, err := client.DockeriosV1alpha1().MacOSIdentityPools().Get(ctx, "imacpro", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if !meta.IsStatusConditionTrue(p.Status.Conditions, "OnHold") {
			return fmt.Sprintf("pool not shown on hold: %+v", p.Status.Conditions)
		}
		return ""
	})
	// Before the audit: a new machine waits, even though three
	// identities are free by the ledger's account.
	early := createMachine("early")
	assert.Nil(t, early.Status.IdentityRef, "a machine got an identity from a restored pool on hold")

	// The audit, as the controller runs it.
	df := dinformers.NewSharedInformerFactory(client, 0)
	d := df.Dockerios().V1alpha1()
	kf := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	recorder := record.NewFakeRecorder(100)
	guard := &vmaudit.Guard{Client: client, Identities: d.MacOSIdentities().Lister(), Machines: d.MacOSMachines().Lister(),
		Pools: d.MacOSIdentityPools().Lister(), VMs: cache.NewGenericLister(vmStore, schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachines"}),
		VMIs:    cache.NewGenericLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachineinstances"}),
		Secrets: kf.Core().V1().Secrets().Lister(), Recorder: recorder, Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	stop := make(chan struct{})
	defer close(stop)
	df.Start(stop)
	kf.Start(stop)
	df.WaitForCacheSync(stop)
	kf.WaitForCacheSync(stop)
	sweep := func() {
		t.Helper()
		// The audit reads caches; let them catch up with the last writes.
		time.Sleep(500 * time.Millisecond)
		require.NoError(t, guard.Sweep(ctx))
	}
	sweep()

	for name, vm := range live {
		id, err := client.DockeriosV1alpha1().MacOSIdentities().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		c := meta.FindStatusCondition(id.Status.Conditions, v1alpha1.IdentityHeldOutsideLedger)
		require.NotNil(t, c, "identity %s, which VM %s runs with, is not marked", name, vm)
		assert.Equal(t, metav1.ConditionTrue, c.Status)
		assert.Equal(t, v1alpha1.ReasonInUseByUnrecordedVM, c.Reason)
		assert.Contains(t, c.Message, "VirtualMachine default/"+vm, "the condition names the VM")
	}
	events := strings.Join(recorded(recorder), "\n")
	assert.Contains(t, events, vmaudit.EventOrphanedVM, "the orphaned VMs are reported")
	framework.Eventually(t, 20*time.Second, func() string {
		p, err := client.DockeriosV1alpha1().MacOSIdentityPools().Get(ctx, "imacpro", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if meta.IsStatusConditionTrue(p.Status.Conditions, "OnHold") {
			return "the pool is still on hold after the audit"
		}
		return ""
	})

	// The waiting machine and new ones get the free identities, never X
	// or Y; once those run out, machines wait.
	took := map[string]string{}
	framework.Eventually(t, 20*time.Second, func() string {
		m, err := machines.Get(ctx, "early", metav1.GetOptions{})
		if err != nil || m.Status.IdentityRef == nil {
			return "the machine waiting since the restore got no identity after the hold was lifted"
		}
		took["early"] = m.Status.IdentityRef.Name
		return ""
	})
	for _, name := range []string{"n1", "n2"} {
		m := createMachine(name)
		if m.Status.IdentityRef != nil {
			took[name] = m.Status.IdentityRef.Name
		}
	}
	for m, id := range took {
		_, isLive := live[id]
		assert.False(t, isLive, "machine %s was given identity %s, which VM %s still runs with", m, id, live[id])
	}
	assert.Len(t, took, 1, "only one identity (id of none of m0's, m1's, m2's) was free: %v", took)

	// A person deletes the orphaned VMs: X and Y go to the waiting machine
	// and back to the pool.
	for _, obj := range vmStore.List() {
		require.NoError(t, vmStore.Delete(obj.(runtime.Object)))
	}
	sweep()
	for name := range live {
		id, err := client.DockeriosV1alpha1().MacOSIdentities().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		c := meta.FindStatusCondition(id.Status.Conditions, v1alpha1.IdentityHeldOutsideLedger)
		require.NotNil(t, c)
		assert.Equal(t, metav1.ConditionFalse, c.Status, "identity %s still withheld after its VM was deleted", name)
		assert.Equal(t, v1alpha1.ReasonHolderGone, c.Reason)
	}
	framework.Eventually(t, 20*time.Second, func() string {
		list, err := machines.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, m := range list.Items {
			if m.Status.IdentityRef == nil {
				return "machine " + m.Name + " still waits though X and Y are free again"
			}
		}
		return ""
	})
}

// recorded drains what a fake recorder has recorded.
func recorded(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A person lifts a pool's hold with kubectl; lifting it again answers
// NotFound.
func TestPoolHold_LiftedWithKubectl(t *testing.T) {
	ctx := context.Background()
	etcd, err := embeddedetcd.Start(filepath.Join(t.TempDir(), "data"), os.Stderr)
	require.NoError(t, err)
	t.Cleanup(etcd.Stop)
	s := framework.StartLocalServer(t, t.TempDir(), "--etcd-servers", etcd.ClientURL)
	createClassAndPool(t, s)
	client, err := versioned.NewForConfig(restConfig(t, s.Kubeconfig))
	require.NoError(t, err)
	v := identity.NewGenerator(31, "iMacPro1,1").Next()
	_, err = client.DockeriosV1alpha1().MacOSIdentities().Create(ctx, &v1alpha1.MacOSIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: "id-0"},
		Spec: v1alpha1.MacOSIdentitySpec{PoolName: "imacpro", Model: v.Model, SerialNumber: v.SerialNumber,
			BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	etcdClient, err := txn.NewClient(storagebackend.TransportConfig{ServerList: []string{etcd.ClientURL}})
	require.NoError(t, err)
	defer etcdClient.Close()
	_, err = identityledger.RaiseRestoreHolds(ctx, etcdClient, "/registry/", "restored from a snapshot at revision 9", time.Now())
	require.NoError(t, err)
	framework.Eventually(t, 20*time.Second, func() string {
		p, err := client.DockeriosV1alpha1().MacOSIdentityPools().Get(ctx, "imacpro", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		c := meta.FindStatusCondition(p.Status.Conditions, "OnHold")
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "revision 9") {
			return fmt.Sprintf("pool not shown on hold with the restore's message: %+v", c)
		}
		return ""
	})
	m, err := client.DockeriosV1alpha1().MacOSMachines("default").Create(ctx, &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Spec: v1alpha1.MacOSMachineSpec{ClassName: "standard"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Nil(t, m.Status.IdentityRef)

	k := framework.NewKubectl(t, s.Kubeconfig)
	out := k.MustRun(t, "", "delete", "--raw", "/apis/dockerios.io/v1alpha1/macosidentitypools/imacpro/hold")
	assert.Contains(t, out, `"kind":"MacOSIdentityPool"`)
	again := k.Run("", "delete", "--raw", "/apis/dockerios.io/v1alpha1/macosidentitypools/imacpro/hold")
	require.Error(t, again.Err)
	assert.Contains(t, again.Stderr, "NotFound")
	framework.Eventually(t, 20*time.Second, func() string {
		m, err := client.DockeriosV1alpha1().MacOSMachines("default").Get(ctx, "m", metav1.GetOptions{})
		if err != nil || m.Status.IdentityRef == nil {
			return "the waiting machine got no identity after the hold was lifted"
		}
		return ""
	})
}
