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

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/bootdisk"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/test/framework"
	"github.com/dockerios/dockerios/test/harness"
)

const (
	fleetNamespace = "fleet"
	fleetName      = "node"
	// bootdiskClass is the StorageClass of the machines' volumes: local
	// PVs of the node, bound when the bootdisk Job's pod is scheduled.
	bootdiskClass = "local-bootdisk"
	model         = "iMacPro1,1"
)

// Fleet is a pool of machines on the node, played below the controller by
// the harness (KubeVirt and CDI on their real CRDs, real agent processes
// as guests) — but for the bootdisk Jobs, which the real Job controller
// and kubelet run from the release's bootdisk image.
type Fleet struct {
	c      *Cluster
	kube   kubernetes.Interface
	client versioned.Interface
	h      *harness.Harness
	// volumes maps a PV's name to its directory.
	volumes map[string]string
}

func startFleet(t *testing.T, c *Cluster, kube kubernetes.Interface, identities, volumes int) *Fleet {
	t.Helper()
	ctx := context.Background()
	client, err := versioned.NewForConfig(c.Admin)
	require.NoError(t, err)
	f := &Fleet{c: c, kube: kube, client: client, volumes: map[string]string{}}
	require.NoError(t, harness.InstallCRDs(ctx, c.Admin))
	f.h, err = harness.Start(ctx, harness.Config{
		RESTConfig: c.Admin, AgentBinary: harness.AgentBinary(t), WorkDir: c.path("harness"),
		// The guests run on this node, and listen where the controller's
		// pods reach them.
		Nodes: []string{NodeName}, GuestNetwork: "10.124", RealJobs: true,
	})
	require.NoError(t, err)
	t.Cleanup(f.h.Stop)

	// The machines' namespace enforces PodSecurity restricted too: the
	// bootdisk Job's pod must meet it.
	c.Kubectl.MustRun(t, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels: {pod-security.kubernetes.io/enforce: restricted}
---
apiVersion: v1
kind: Secret
metadata: {name: dockerios-osk, namespace: %s}
stringData: {osk: dummy-osk-for-tests-only-0123456789abcdef0123456789abcdef0123}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: %s}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
`, fleetNamespace, fleetNamespace, bootdiskClass), "apply", "-f", "-")
	for i := range volumes {
		name := fmt.Sprintf("bootdisk-%d", i)
		f.volumes[name] = c.localPV(t, name, bootdiskClass, "1Gi")
	}

	_, err = client.DockeriosV1alpha1().MacOSIdentityPools().Create(ctx, &v1alpha1.MacOSIdentityPool{
		ObjectMeta: metav1.ObjectMeta{Name: fleetName}, Spec: v1alpha1.MacOSIdentityPoolSpec{Model: model}}, metav1.CreateOptions{})
	require.NoError(t, err)
	gen := identity.NewGenerator(28, model)
	for i := range identities {
		v := gen.Next()
		_, err := client.DockeriosV1alpha1().MacOSIdentities().Create(ctx, &v1alpha1.MacOSIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", fleetName, i)},
			Spec: v1alpha1.MacOSIdentitySpec{PoolName: fleetName, Model: v.Model, SerialNumber: v.SerialNumber,
				BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = client.DockeriosV1alpha1().MacOSImages().Create(ctx, &v1alpha1.MacOSImage{
		ObjectMeta: metav1.ObjectMeta{Name: fleetName},
		Spec: v1alpha1.MacOSImageSpec{Release: "14.6", Source: v1alpha1.ImageSource{
			DataSource: &v1alpha1.NamespacedObjectReference{Namespace: "dockerios-images", Name: "sonoma-14-6"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.DockeriosV1alpha1().MacOSMachineClasses().Create(ctx, &v1alpha1.MacOSMachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: fleetName},
		Spec: v1alpha1.MacOSMachineClassSpec{ImageName: fleetName, IdentityPoolName: fleetName,
			SystemDisk:   v1alpha1.SystemDiskSpec{Size: resource.MustParse("64Gi"), StorageClassName: ptr.To(bootdiskClass)},
			StartTimeout: &metav1.Duration{Duration: 3 * time.Minute}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return f
}

// pool creates a warm pool of replicas machines and waits until they are
// all Ready.
func (f *Fleet) pool(t *testing.T, replicas int32) {
	t.Helper()
	_, err := f.client.DockeriosV1alpha1().MacOSMachinePools(fleetNamespace).Create(context.Background(), &v1alpha1.MacOSMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: fleetName},
		Spec:       v1alpha1.MacOSMachinePoolSpec{ClassName: fleetName, Replicas: ptr.To(replicas)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	f.waitPoolReady(t, replicas)
}

func (f *Fleet) waitPoolReady(t *testing.T, replicas int32) {
	t.Helper()
	framework.Eventually(t, 5*time.Minute, func() string {
		p, err := f.client.DockeriosV1alpha1().MacOSMachinePools(fleetNamespace).Get(context.Background(), fleetName, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if p.Status.ReadyReplicas < replicas {
			return fmt.Sprintf("pool %s: %d of %d Ready; machines:\n%s", fleetName, p.Status.ReadyReplicas, replicas, f.machinesReport(t))
		}
		return ""
	})
}

func (f *Fleet) machinesReport(t *testing.T) string {
	l, err := f.client.DockeriosV1alpha1().MacOSMachines(fleetNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, m := range l.Items {
		fmt.Fprintf(&b, "  %s: %s", m.Name, m.Status.Phase)
		for _, c := range m.Status.Conditions {
			if c.Status != metav1.ConditionTrue {
				fmt.Fprintf(&b, " %s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		b.WriteString("\n")
	}
	r := f.c.Kubectl.Run("", "get", "jobs,pods,pvc", "-n", fleetNamespace, "-o", "wide")
	return b.String() + r.Stdout + r.Stderr
}

// claim creates a claim on the pool and returns it once Bound.
func (f *Fleet) claim(t *testing.T, name string) *v1alpha1.MacOSMachineClaim {
	t.Helper()
	ctx := context.Background()
	_, err := f.client.DockeriosV1alpha1().MacOSMachineClaims(fleetNamespace).Create(ctx, &v1alpha1.MacOSMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MacOSMachineClaimSpec{PoolName: fleetName},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var bound *v1alpha1.MacOSMachineClaim
	framework.Eventually(t, 3*time.Minute, func() string {
		cl, err := f.client.DockeriosV1alpha1().MacOSMachineClaims(fleetNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if cl.Status.Phase != v1alpha1.ClaimBound {
			return fmt.Sprintf("claim %s is %s", name, cl.Status.Phase)
		}
		bound = cl
		return ""
	})
	return bound
}

// checkFleet: a pool fills, a claim is Bound, and every machine's bootdisk
// was written by the real builder image in a pod of this kubelet: the disk
// in its volume has a GPT with an EFI system partition holding OpenCore
// and a config.plist with the machine's own identity.
func checkFleet(t *testing.T, f *Fleet, r *Release) {
	ctx := context.Background()
	f.pool(t, 2)
	cl := f.claim(t, "build-1")
	require.NotEmpty(t, cl.Status.MachineName)

	// The claim took one of the two Ready machines; the pool is already
	// making a third, which is not Ready yet and is left out.
	machines, err := f.client.DockeriosV1alpha1().MacOSMachines(fleetNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	checked := 0
	for _, m := range machines.Items {
		if m.Status.Phase != v1alpha1.MachineReady {
			continue
		}
		checked++
		require.NotNil(t, m.Status.IdentityRef, "machine %s holds an identity", m.Name)
		id, err := f.client.DockeriosV1alpha1().MacOSIdentities().Get(ctx, m.Status.IdentityRef.Name, metav1.GetOptions{})
		require.NoError(t, err)

		// The Job ran for real: completed by the Job controller, its pod
		// run by the kubelet from the release's bootdisk image.
		jobs, err := f.kube.BatchV1().Jobs(fleetNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + bootdisk.ComponentLabelValue})
		require.NoError(t, err)
		var job *batchv1.Job
		for i := range jobs.Items {
			for _, o := range jobs.Items[i].OwnerReferences {
				if o.UID == m.UID {
					job = &jobs.Items[i]
				}
			}
		}
		require.NotNil(t, job, "machine %s has its bootdisk Job", m.Name)
		assert.Equal(t, int32(1), job.Status.Succeeded, "Job %s succeeded", job.Name)
		pods, err := f.kube.CoreV1().Pods(fleetNamespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
		require.NoError(t, err)
		require.NotEmpty(t, pods.Items)
		p := pods.Items[0]
		assert.Equal(t, NodeName, p.Spec.NodeName)
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase)
		assert.Equal(t, fmt.Sprintf("%s/dockerios-bootdisk@%s", retargetRegistry, r.digest(t, "dockerios-bootdisk")), p.Spec.Containers[0].Image,
			"the controller handed the Job the PodTemplate's (retargeted) bootdisk image")

		// What it wrote, read back from the volume.
		pvc, err := f.kube.CoreV1().PersistentVolumeClaims(fleetNamespace).Get(ctx, job.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
		require.NoError(t, err)
		dir, ok := f.volumes[pvc.Spec.VolumeName]
		require.True(t, ok, "PVC %s is bound to one of the node's local volumes (%q)", pvc.Name, pvc.Spec.VolumeName)
		checkBootdisk(t, filepath.Join(dir, bootdisk.ImageFileRaw), id.Spec)
	}
	assert.GreaterOrEqual(t, checked, 2, "the pool's two Ready machines were checked")
}

// checkBootdisk reads a raw boot disk as OpenCore would find it.
func checkBootdisk(t *testing.T, disk string, id v1alpha1.MacOSIdentitySpec) {
	t.Helper()
	out, err := exec.Command("sfdisk", "--json", disk).Output()
	require.NoError(t, err, "sfdisk --json %s", disk)
	var table struct {
		PartitionTable struct {
			Label      string `json:"label"`
			SectorSize int64  `json:"sectorsize"`
			Partitions []struct {
				Start int64  `json:"start"`
				Type  string `json:"type"`
			} `json:"partitions"`
		} `json:"partitiontable"`
	}
	require.NoError(t, json.Unmarshal(out, &table))
	assert.Equal(t, "gpt", table.PartitionTable.Label)
	require.NotEmpty(t, table.PartitionTable.Partitions)
	esp := table.PartitionTable.Partitions[0]
	assert.Equal(t, "C12A7328-F81F-11D2-BA4B-00A0C93EC93B", strings.ToUpper(esp.Type), "the first partition is an EFI system partition")
	sector := table.PartitionTable.SectorSize
	if sector == 0 {
		sector = 512
	}
	img := fmt.Sprintf("%s@@%d", disk, esp.Start*sector)
	for _, f := range []string{"::/EFI/BOOT/BOOTx64.efi", "::/EFI/OC/OpenCore.efi"} {
		_, err := exec.Command("mdir", "-i", img, f).Output()
		assert.NoError(t, err, "%s is on the EFI partition", f)
	}
	plist, err := exec.Command("mtype", "-i", img, "::/EFI/OC/config.plist").Output()
	require.NoError(t, err)
	for what, v := range map[string]string{"serial": id.SerialNumber, "MLB": id.BoardSerialNumber, "UUID": id.SystemUUID, "model": id.Model} {
		assert.Contains(t, string(plist), "<string>"+v+"</string>", "config.plist carries the machine's %s", what)
	}
}
