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
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/pkg/controller/vmaudit"
	"github.com/dockerios/dockerios/pkg/ledgerbackup"
	"github.com/dockerios/dockerios/test/framework"
)

// TestRestoreOfAnOlderLedgerUnderARunningFleet is issue 30's restore
// scenario on the whole stack: the DockerIOS apiserver with its embedded
// etcd, the controller binary, kube-apiserver with the garbage collector,
// and the harness playing KubeVirt. A backup at T0; machines m1 and m2
// made after it become Ready with identities X and Y; the ledger is
// restored to T0 (where m1 and m2 do not exist and X and Y are free).
//   - The garbage collector deletes nothing of m1's or m2's: their VMs run on.
//   - The controller finds X and Y in use by those VMs, withholds them
//     (HeldOutsideLedger, naming the VM; Events on the VMs) before it lifts
//     the restore's hold.
//   - New machines get the one identity really free, never X or Y.
//   - A person deletes the orphaned objects: X and Y go to waiting machines,
//     and nothing is made again for m1 or m2 (the controller's cache shows
//     them for a while after the restore: it asks the ledger before it
//     makes anything).
func TestRestoreOfAnOlderLedgerUnderARunningFleet(t *testing.T) {
	e := startOn(t, framework.StartControlPlaneEmbeddedLedger(t), []string{"--ledger-guard-interval=2s"})
	ctx := context.Background()
	ns := e.namespace(t, "restore")
	e.fleet(t, "restore", 4, nil)
	e.waitPoolCounts(t, "restore", 4, 0)
	e.createMachine(t, ns, "m0", "restore")
	e.waitMachine(t, ns, "m0", 90*time.Second, "Ready", phaseIs(v1alpha1.MachineReady))

	backups := t.TempDir()
	md, err := ledgerbackup.Take(ctx, ledgerbackup.Options{
		Transport:     storagebackend.TransportConfig{ServerList: []string{e.cp.EmbeddedEtcdURL(t)}},
		StoragePrefix: "/registry/", Dir: backups, Keep: 2})
	require.NoError(t, err)

	live := map[string]*v1alpha1.MacOSMachine{} // identity → machine made after T0
	for _, name := range []string{"m1", "m2"} {
		e.createMachine(t, ns, name, "restore")
		m := e.waitMachine(t, ns, name, 90*time.Second, "Ready", phaseIs(v1alpha1.MachineReady))
		live[m.Status.IdentityRef.Name] = m
	}

	// The ledger is restored to T0.
	e.cp.StopDockerIOS(t)
	<-e.cp.DockerIOSExited()
	etcdDir := filepath.Join(e.cp.DockerIOSDataDir(), "etcd")
	require.NoError(t, os.Rename(etcdDir, etcdDir+".lost"))
	_, err = ledgerbackup.Restore(ctx, ledgerbackup.RestoreOptions{
		HoldOptions: ledgerbackup.HoldOptions{Snapshot: filepath.Join(backups, md.Snapshot), StoragePrefix: "/registry/"},
		DataDir:     etcdDir, Member: ledgerbackup.Embedded})
	require.NoError(t, err)
	e.cp.RestartDockerIOS(t)

	for id, m := range live {
		_, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Get(ctx, m.Name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "machine %s, made after the backup, is not in the restored ledger: %v", m.Name, err)
		framework.Eventually(t, 60*time.Second, func() string {
			got, err := e.client.DockeriosV1alpha1().MacOSIdentities().Get(ctx, id, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.IdentityHeldOutsideLedger)
			if c == nil || c.Status != metav1.ConditionTrue {
				return "identity " + id + " is not marked HeldOutsideLedger"
			}
			assert.Contains(t, c.Message, "VirtualMachine "+ns+"/"+m.Status.VirtualMachineName)
			return ""
		})
		e.waitEvent(t, ns, "VirtualMachine", m.Status.VirtualMachineName, vmaudit.EventOrphanedVM, id)
	}
	framework.Eventually(t, 60*time.Second, func() string {
		p, err := e.client.DockeriosV1alpha1().MacOSIdentityPools().Get(ctx, "restore", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if meta.IsStatusConditionTrue(p.Status.Conditions, "OnHold") {
			return "the controller has not lifted the restored pool's hold"
		}
		return ""
	})

	// New machines: one gets the identity really free, the other waits.
	took := map[string]string{}
	for _, name := range []string{"n1", "n2"} {
		e.createMachine(t, ns, name, "restore")
	}
	time.Sleep(3 * time.Second)
	for _, name := range []string{"n1", "n2"} {
		if ref := e.machine(t, ns, name).Status.IdentityRef; ref != nil {
			took[name] = ref.Name
		}
	}
	for m, id := range took {
		assert.Nil(t, live[id], "machine %s was given identity %s, which a running VM uses", m, id)
	}
	assert.Len(t, took, 1, "one identity was free: %v", took)

	// Nothing of m1's and m2's was collected: their VMs still run.
	for _, m := range live {
		owned := e.ownedObjects(t, ns, string(m.UID))
		assert.Equal(t, 1, owned["VirtualMachine"], "the VM of %s, which the restored ledger lacks, was deleted", m.Name)
		assert.Equal(t, 1, owned["VirtualMachineInstance"], "the VMI of %s was deleted", m.Name)
	}

	// A person deletes the orphans; X and Y go to the waiting machine and
	// back to the pool.
	deletedAt := time.Now().Truncate(time.Second) // creationTimestamp has seconds
	for _, m := range live {
		sel := metav1.ListOptions{LabelSelector: labels.Set{machine.MachineUIDLabel: string(m.UID)}.String()}
		require.NoError(t, e.dynamic(t).Resource(external.VirtualMachines).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
		require.NoError(t, e.dynamic(t).Resource(external.DataVolumes).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
		require.NoError(t, e.kube.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
		require.NoError(t, e.kube.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
	}
	for id := range live {
		framework.Eventually(t, 90*time.Second, func() string {
			got, err := e.client.DockeriosV1alpha1().MacOSIdentities().Get(ctx, id, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.IdentityHeldOutsideLedger); c == nil || c.Status != metav1.ConditionFalse {
				return "identity " + id + " is still withheld after its VM was deleted"
			}
			return ""
		})
	}
	for _, name := range []string{"n1", "n2"} {
		e.waitMachine(t, ns, name, 90*time.Second, "Ready", phaseIs(v1alpha1.MachineReady))
	}
	e.waitMachine(t, ns, "m0", 10*time.Second, "still Ready", phaseIs(v1alpha1.MachineReady))

	// Nothing was made again for m1 or m2: the controller's cache may show
	// them for a while after the restore, and what it made for them would
	// carry X or Y beside n1 or n2.
	for _, m := range live {
		assert.Empty(t, e.madeSince(t, ns, string(m.UID), deletedAt), "made for %s, which the restored ledger lacks, after a person deleted its objects", m.Name)
	}
}

// madeSince lists, as "Kind name", the objects labelled with machine UID
// uid that were created at or after since.
func (e *env) madeSince(t testing.TB, ns, uid string, since time.Time) []string {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: labels.Set{machine.MachineUIDLabel: uid}.String()}
	var out []string
	note := func(kind string, o metav1.Object) {
		if !o.GetCreationTimestamp().Time.Before(since) {
			out = append(out, kind+" "+o.GetName())
		}
	}
	s, err := e.kube.CoreV1().Secrets(ns).List(ctx, sel)
	require.NoError(t, err)
	for i := range s.Items {
		note("Secret", &s.Items[i])
	}
	p, err := e.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel)
	require.NoError(t, err)
	for i := range p.Items {
		note("PersistentVolumeClaim", &p.Items[i])
	}
	j, err := e.kube.BatchV1().Jobs(ns).List(ctx, sel)
	require.NoError(t, err)
	for i := range j.Items {
		note("Job", &j.Items[i])
	}
	for kind, gvr := range map[string]schema.GroupVersionResource{
		"DataVolume": external.DataVolumes, "VirtualMachine": external.VirtualMachines, "VirtualMachineInstance": external.VirtualMachineInstances,
	} {
		l, err := e.dynamic(t).Resource(gvr).Namespace(ns).List(ctx, sel)
		require.NoError(t, err)
		for i := range l.Items {
			note(kind, &l.Items[i])
		}
	}
	return out
}
