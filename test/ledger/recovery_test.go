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

// Package ledger proves the ledger's recovery paths on the real control
// plane (etcd, kube-apiserver, kube-controller-manager with its garbage
// collector) and the DockerIOS apiserver with its embedded etcd, as the
// shipped Deployment runs it: the data directory lost under a running
// fleet is refused, and the garbage collector deletes nothing; the
// backup taken before restores everything; a backup restores into a
// fresh install with every UID and allocation. The commands it runs are
// the ones docs/operators/backup-restore.md shows.
package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/pkg/ledgerbackup"
	"github.com/dockerios/dockerios/pkg/ledgerguard"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
	"github.com/dockerios/dockerios/test/framework"
)

const (
	ns           = "fleet"
	identityPool = "imacpro"
	machinePool  = "ci"
	className    = "standard"
	model        = "iMacPro1,1"
	identities   = 8
)

// cluster is a control plane with the DockerIOS apiserver on its embedded
// etcd, and an admin's clients.
type cluster struct {
	cp     *framework.ControlPlane
	admin  *framework.Kubectl
	client versioned.Interface
	kube   kubernetes.Interface
	// token is a ServiceAccount's that may read the DockerIOS
	// apiserver's /metrics and /readyz/<check> (neither is public).
	token string
}

func startCluster(t *testing.T, extraArgs ...string) *cluster {
	t.Helper()
	cp := framework.StartControlPlaneEmbeddedLedger(t, extraArgs...)
	c := &cluster{cp: cp, admin: framework.NewKubectl(t, cp.AdminKubeconfig)}
	var err error
	c.client, err = versioned.NewForConfig(framework.RESTConfig(t, cp.AdminKubeconfig))
	require.NoError(t, err)
	c.kube, err = kubernetes.NewForConfig(framework.RESTConfig(t, cp.AdminKubeconfig))
	require.NoError(t, err)
	c.admin.MustRun(t, "", "create", "namespace", ns)
	c.admin.MustRun(t, "", "create", "serviceaccount", "operator", "-n", "default")
	c.admin.MustRun(t, "", "create", "clusterrole", "dockerios-probe", "--verb=get", "--non-resource-url=/metrics", "--non-resource-url=/readyz", "--non-resource-url=/readyz/*")
	c.admin.MustRun(t, "", "create", "clusterrolebinding", "operator-dockerios-probe", "--clusterrole=dockerios-probe", "--serviceaccount=default:operator")
	c.token = strings.TrimSpace(c.admin.MustRun(t, "", "create", "token", "operator", "-n", "default"))
	return c
}

// get asks the DockerIOS apiserver for path directly, as the operator.
func (c *cluster) get(t *testing.T, path string) (int, string) {
	t.Helper()
	return c.cp.GetDockerIOSWithToken(t, path, c.token)
}

// fleet makes what a running fleet has: an identity pool, an image, a
// class, identities, a machine pool whose machines took identities, two
// of them Ready, a claim bound at create and one waiting.
func (c *cluster) fleet(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c.admin.MustRun(t, fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSIdentityPool
metadata: {name: %[1]s}
spec: {model: "%[2]s"}
---
apiVersion: dockerios.io/v1alpha1
kind: MacOSImage
metadata: {name: sonoma}
spec:
  source: {dataSource: {namespace: dockerios-images, name: sonoma-14-6}}
  release: "14.6"
---
apiVersion: dockerios.io/v1alpha1
kind: MacOSMachineClass
metadata: {name: %[3]s}
spec: {imageName: sonoma, identityPoolName: %[1]s, systemDisk: {size: 128Gi}}
---
apiVersion: dockerios.io/v1alpha1
kind: MacOSMachinePool
metadata: {name: %[4]s, namespace: %[5]s}
spec: {className: %[3]s, replicas: 0, maxMachines: 100}
`, identityPool, model, className, machinePool, ns), "apply", "-f", "-")
	gen := identity.NewGenerator(7, model)
	for i := range identities {
		v := gen.Next()
		_, err := c.client.DockeriosV1alpha1().MacOSIdentities().Create(ctx, &v1alpha1.MacOSIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("id-%d", i)},
			Spec: v1alpha1.MacOSIdentitySpec{PoolName: identityPool, Model: v.Model, SerialNumber: v.SerialNumber,
				BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for i := range 4 {
		c.machine(t, fmt.Sprintf("mac-%d", i))
	}
	c.makeReady(t, "mac-0")
	c.makeReady(t, "mac-1")
	// The apiserver learns of Ready machines from its watch; a claim
	// then binds at create.
	framework.Eventually(t, 30*time.Second, func() string {
		out := c.admin.MustRun(t, c.claimYAML("build-1"), "create", "-f", "-", "--dry-run=server", "-o", "jsonpath={.status.phase}")
		if out != "Bound" {
			return "a claim would be " + out
		}
		return ""
	})
	c.admin.MustRun(t, c.claimYAML("build-1"), "create", "-f", "-")
	c.admin.MustRun(t, c.claimYAML("build-2"), "create", "-f", "-")
	c.admin.MustRun(t, c.claimYAML("build-3"), "create", "-f", "-")
}

func (c *cluster) claimYAML(name string) string {
	return fmt.Sprintf("apiVersion: dockerios.io/v1alpha1\nkind: MacOSMachineClaim\nmetadata: {name: %s, namespace: %s}\nspec: {poolName: %s}\n", name, ns, machinePool)
}

func (c *cluster) machine(t *testing.T, name string) *v1alpha1.MacOSMachine {
	t.Helper()
	m, err := c.client.DockeriosV1alpha1().MacOSMachines(ns).Create(context.Background(), &v1alpha1.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.MachinePoolLabel: machinePool}},
		Spec:       v1alpha1.MacOSMachineSpec{ClassName: className, PoolName: machinePool},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return m
}

func (c *cluster) makeReady(t *testing.T, name string) {
	t.Helper()
	machines := c.client.DockeriosV1alpha1().MacOSMachines(ns)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m, err := machines.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		m.Status.Phase = v1alpha1.MachineReady
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionTrue,
			Reason: "AgentReady", Message: "the guest agent reports Ready", ObservedGeneration: m.Generation})
		_, err = machines.UpdateStatus(context.Background(), m, metav1.UpdateOptions{})
		return err
	}))
}

// owned makes a ConfigMap and a Secret owned by machine, as the
// controller makes a machine's (controller: true, blockOwnerDeletion).
func (c *cluster) owned(t *testing.T, name string, owner metav1.OwnerReference) {
	t.Helper()
	ctx := context.Background()
	refs := []metav1.OwnerReference{owner}
	_, err := c.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: refs}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: refs}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func ownerRef(m *v1alpha1.MacOSMachine) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "MacOSMachine", Name: m.Name, UID: m.UID, Controller: &yes, BlockOwnerDeletion: &yes}
}

// exists says whether the ConfigMap and the Secret name are there.
func (c *cluster) exists(t *testing.T, name string) (configMap, secret bool) {
	t.Helper()
	_, err := c.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	configMap = err == nil
	_, err = c.kube.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return configMap, err == nil
}

// state is what must come back from a backup: every object's UID, which
// machine holds which identity, which claim is bound to which machine.
type state struct {
	UIDs     map[string]types.UID
	Holders  map[string]string // identity -> machine
	Machines map[string]string // machine -> identity
	Claims   map[string]string // claim -> phase/machine
}

func (c *cluster) observe(t *testing.T) state {
	t.Helper()
	ctx := context.Background()
	d := c.client.DockeriosV1alpha1()
	s := state{UIDs: map[string]types.UID{}, Holders: map[string]string{}, Machines: map[string]string{}, Claims: map[string]string{}}
	ids, err := d.MacOSIdentities().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, id := range ids.Items {
		s.UIDs["identity/"+id.Name] = id.UID
		if a := id.Status.Allocation; a != nil {
			s.Holders[id.Name] = a.MachineNamespace + "/" + a.MachineName + "/" + a.MachineUID
		}
	}
	machines, err := d.MacOSMachines(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, m := range machines.Items {
		s.UIDs["machine/"+m.Name] = m.UID
		if m.Status.IdentityRef != nil {
			s.Machines[m.Name] = m.Status.IdentityRef.Name
		}
	}
	claims, err := d.MacOSMachineClaims(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, cl := range claims.Items {
		s.UIDs["claim/"+cl.Name] = cl.UID
		s.Claims[cl.Name] = string(cl.Status.Phase) + "/" + cl.Status.MachineName
	}
	pools, err := d.MacOSMachinePools(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pools.Items {
		s.UIDs["machinepool/"+p.Name] = p.UID
	}
	idPools, err := d.MacOSIdentityPools().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range idPools.Items {
		s.UIDs["identitypool/"+p.Name] = p.UID
	}
	classes, err := d.MacOSMachineClasses().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, cl := range classes.Items {
		s.UIDs["class/"+cl.Name] = cl.UID
	}
	return s
}

// apiserver runs the DockerIOS apiserver binary with args (a ledger
// subcommand) and returns its standard output.
func apiserver(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(framework.APIServerBinary(t), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "dockerios-apiserver %s:\n%s", strings.Join(args, " "), stderr.String())
	return string(out)
}

// backup is `kubectl exec deploy/dockerios-apiserver -- dockerios-apiserver
// ledger backup --data-dir /var/lib/dockerios --out ...`, run beside the
// test's apiserver.
func (c *cluster) backup(t *testing.T, dir string) ledgerbackup.Metadata {
	t.Helper()
	var md ledgerbackup.Metadata
	out := apiserver(t, "ledger", "backup", "--data-dir", c.cp.DockerIOSDataDir(), "--out", dir, "--keep", "5")
	require.NoError(t, json.Unmarshal([]byte(out), &md), out)
	return md
}

// restore stops the apiserver and restores the snapshot over its data
// directory, moving what it held aside, as docs/operators/backup-restore.md's steps
// (and artifacts/ledger/restore-job.yaml) do; it returns how long the
// restore took.
func (c *cluster) restore(t *testing.T, snapshot string) (ledgerbackup.Result, time.Duration) {
	t.Helper()
	c.cp.StopDockerIOS(t)
	data := c.cp.DockerIOSDataDir()
	start := time.Now()
	out := apiserver(t, "ledger", "restore", "--snapshot", snapshot, "--data-dir", data, "--move-aside")
	took := time.Since(start)
	var res ledgerbackup.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.NotEmpty(t, res.MovedAside, "the data the apiserver had is moved aside, not deleted")
	assert.DirExists(t, filepath.Join(res.MovedAside, "member"))
	return res, took
}

// audit runs the ledger's audit and the claim queue's against the
// apiserver's embedded etcd: neither finds anything to mend.
func (c *cluster) audit(t *testing.T) *identityledger.Ledger {
	t.Helper()
	getter := registrytest.RESTOptionsGetterFor(c.cp.EmbeddedEtcdURL(t))
	ledger, _ := registrytest.NewLedger(t, getter)
	drifts, err := ledger.Audit(context.Background())
	require.NoError(t, err)
	assert.Empty(t, drifts, "the ledger's audit")
	dropped, err := registrytest.NewBinder(t, getter).AuditQueue(context.Background())
	require.NoError(t, err)
	assert.Zero(t, dropped, "the claim queue's audit")
	return ledger
}

func (c *cluster) marker(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	cm, err := c.kube.CoreV1().ConfigMaps(ledgerguard.DefaultMarker.Namespace).Get(context.Background(), ledgerguard.DefaultMarker.Name, metav1.GetOptions{})
	require.NoError(t, err)
	return cm
}

// events are the messages of the Events of reason on kind objects.
func (c *cluster) events(t *testing.T, namespace, kind, reason string) []string {
	t.Helper()
	list, err := c.kube.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",reason=" + reason})
	require.NoError(t, err)
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out
}

// expectOnHold: the restored identity pool is on hold (the hold says
// which snapshot), its status says so, and a machine created now gets no
// identity.
func (c *cluster) expectOnHold(t *testing.T, ledger *identityledger.Ledger, md ledgerbackup.Metadata, newMachine string) {
	t.Helper()
	h, err := ledger.Hold(context.Background(), identityPool)
	require.NoError(t, err)
	require.NotNil(t, h, "the restored pool is on hold")
	assert.Equal(t, identityledger.ReasonRestored, h.Reason)
	assert.Contains(t, h.Message, fmt.Sprintf("etcd revision %d", md.Revision))
	assert.Contains(t, h.Message, md.Time.UTC().Format(time.RFC3339))
	framework.Eventually(t, time.Minute, func() string {
		p, err := c.client.DockeriosV1alpha1().MacOSIdentityPools().Get(context.Background(), identityPool, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if !meta.IsStatusConditionTrue(p.Status.Conditions, identityledger.PoolOnHold) {
			return fmt.Sprintf("pool %s conditions %+v", identityPool, p.Status.Conditions)
		}
		return ""
	})
	m := c.machine(t, newMachine)
	assert.Nil(t, m.Status.IdentityRef, "no identity of a pool on hold is given out")
}

// TestEmptyLedgerNeverEmptiesTheFleet deletes the apiserver's data
// directory under a running fleet and restarts it: dockerios.io is
// refused (readyz, 503, the APIService unavailable, Events) and the
// garbage collector deletes nothing, not even what it deleted at once
// while the ledger was served; the backup taken before, restored with
// `ledger restore`, brings everything back with the pools on hold.
func TestEmptyLedgerNeverEmptiesTheFleet(t *testing.T) {
	ctx := context.Background()
	periodic := filepath.Join(t.TempDir(), "periodic")
	c := startCluster(t, "--backup-dir="+periodic, "--backup-interval=1h", "--backup-keep=3")
	c.fleet(t)
	mac0, err := c.client.DockeriosV1alpha1().MacOSMachines(ns).Get(ctx, "mac-0", metav1.GetOptions{})
	require.NoError(t, err)
	c.owned(t, "mac-0-agent-token", ownerRef(mac0))
	ledgerID := c.marker(t).Data[ledgerguard.DataLedgerID]
	require.NotEmpty(t, ledgerID, "the marker records the ledger")

	t.Run("the apiserver backs up its embedded etcd and says when", func(t *testing.T) {
		all, err := ledgerbackup.List(periodic)
		require.NoError(t, err)
		require.NotEmpty(t, all, "a backup is taken once the ledger is served")
		assert.Equal(t, ledgerID, all[0].LedgerID)
		framework.Eventually(t, 30*time.Second, func() string {
			code, body := c.get(t, "/metrics")
			if code != 200 {
				return fmt.Sprintf("/metrics: %d %s", code, body)
			}
			want := fmt.Sprintf("dockerios_ledger_backup_last_success_timestamp_seconds %s", strconv.FormatFloat(float64(all[0].Time.UnixNano())/1e9, 'g', -1, 64))
			for _, line := range strings.Split(body, "\n") {
				if line == want {
					return ""
				}
			}
			return "no line " + want
		})
	})

	// The garbage collector is running: an object whose owner the
	// apiserver says is not there goes at once.
	gcStart := time.Now()
	c.owned(t, "dangling-while-served", metav1.OwnerReference{APIVersion: "dockerios.io/v1alpha1", Kind: "MacOSMachine", Name: "mac-0", UID: "0e0f0a0b-not-mac-0"})
	framework.Eventually(t, 2*time.Minute, func() string {
		if cm, sec := c.exists(t, "dangling-while-served"); cm || sec {
			return "the garbage collector has not deleted what a missing owner owned"
		}
		return ""
	})
	gcTook := time.Since(gcStart)
	t.Logf("the garbage collector deleted a dangling dependent %s after it was made", gcTook.Round(time.Millisecond))

	backups := filepath.Join(t.TempDir(), "backups")
	md := c.backup(t, backups)
	t.Logf("backup: %d bytes, %d keys, etcd revision %d, taken in %.3fs", md.Size, md.Keys, md.Revision, md.Duration)
	before := c.observe(t)
	require.Len(t, before.Machines, 4, "every machine holds an identity")
	require.Equal(t, "Bound/mac-0", before.Claims["build-1"])
	// After the backup, the fleet moves on: this machine is not in it.
	c.machine(t, "mac-after-backup")

	// The volume is lost. The backups are on a volume of their own; the
	// server now backs up every two seconds (--backup-interval): it must
	// not while it refuses the ledger.
	c.cp.StopDockerIOS(t)
	require.NoError(t, os.RemoveAll(c.cp.DockerIOSDataDir()))
	periodicBefore, err := ledgerbackup.List(periodic)
	require.NoError(t, err)
	var args []string
	for _, a := range c.cp.DockerIOSArgs() {
		if a == "--backup-interval=1h" {
			a = "--backup-interval=2s"
		}
		args = append(args, a)
	}
	c.cp.StartDockerIOS(t, args...)

	t.Run("the empty ledger is refused, and says what to do", func(t *testing.T) {
		framework.Eventually(t, time.Minute, func() string {
			code, body := c.get(t, "/readyz/"+ledgerguard.CheckName)
			if code != 500 || !strings.Contains(body, ledgerID) {
				return fmt.Sprintf("/readyz/%s: %d %s", ledgerguard.CheckName, code, body)
			}
			for _, want := range []string{"is empty", "dockerios-apiserver ledger restore --snapshot FILE --data-dir DIR",
				"kubectl -n dockerios-system annotate configmap dockerios-ledger dockerios.io/confirm-empty-ledger=" + ledgerID} {
				if !strings.Contains(body, want) {
					return fmt.Sprintf("/readyz/%s does not say %q: %s", ledgerguard.CheckName, want, body)
				}
			}
			return ""
		})
		// What a kubelet's probe gets: not ready, the reason withheld.
		code, body := c.cp.GetDockerIOS(t, "/readyz")
		assert.Equal(t, 500, code)
		assert.Contains(t, body, "[-]"+ledgerguard.CheckName+" failed")
		// Through kube-apiserver: an error, never "not found".
		framework.Eventually(t, time.Minute, func() string {
			r := c.admin.Run("", "get", "mm", "mac-0", "-n", ns)
			if r.Err == nil || strings.Contains(r.Stderr, "NotFound") || !strings.Contains(r.Stderr, "the server is currently unable to handle the request") {
				return fmt.Sprintf("kubectl get mm: %v %s %s", r.Err, r.Stdout, r.Stderr)
			}
			return ""
		})
		framework.Eventually(t, time.Minute, func() string {
			out := c.admin.MustRun(t, "", "get", "apiservice", "v1alpha1.dockerios.io", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}/{.status.conditions[?(@.type=="Available")].reason}/{.status.conditions[?(@.type=="Available")].message}`)
			if !strings.HasPrefix(out, "False/FailedDiscoveryCheck/") || !strings.Contains(out, "503") {
				return "APIService Available: " + out
			}
			t.Logf("the APIService's condition: %s", out)
			return ""
		})
		framework.Eventually(t, time.Minute, func() string {
			on := c.events(t, "default", "APIService", ledgerguard.ReasonLedgerEmpty)
			onMarker := c.events(t, ledgerguard.DefaultMarker.Namespace, "ConfigMap", ledgerguard.ReasonLedgerEmpty)
			if len(on) == 0 || len(onMarker) == 0 || !strings.Contains(on[0], ledgerID) {
				return fmt.Sprintf("Events on the APIService %q and the marker %q", on, onMarker)
			}
			return ""
		})
		// Where the docs send an operator: kubectl describe finds an
		// object's Events by its UID.
		for _, args := range [][]string{{"describe", "apiservice", "v1alpha1.dockerios.io"},
			{"describe", "configmap", "-n", ledgerguard.DefaultMarker.Namespace, ledgerguard.DefaultMarker.Name}} {
			out := c.admin.MustRun(t, "", args...)
			_, events, _ := strings.Cut(out, "\nEvents:")
			assert.Contains(t, events, ledgerguard.ReasonLedgerEmpty, "kubectl %s", strings.Join(args, " "))
		}
		assert.Contains(t, c.cp.DockerIOSOutput(), "Not serving dockerios.io: The identity ledger in etcd is empty")
		assert.Equal(t, ledgerID, c.marker(t).Data[ledgerguard.DataLedgerID], "the marker is left as it was")
	})

	t.Run("the garbage collector deletes nothing", func(t *testing.T) {
		// Even an object whose owner is plainly not there stays: the
		// garbage collector cannot ask.
		c.owned(t, "dangling-while-refused", metav1.OwnerReference{APIVersion: "dockerios.io/v1alpha1", Kind: "MacOSMachine", Name: "mac-0", UID: "0e0f0a0b-not-mac-0"})
		wait := max(2*gcTook, 60*time.Second)
		framework.Consistently(t, wait, func() string {
			for _, name := range []string{"mac-0-agent-token", "dangling-while-refused"} {
				if cm, sec := c.exists(t, name); !cm || !sec {
					return fmt.Sprintf("%s was deleted (ConfigMap there: %v, Secret there: %v)", name, cm, sec)
				}
			}
			return ""
		})
		t.Logf("nothing deleted in %s (%d times what deleting a dangling dependent takes while served)", wait, int(wait/gcTook))
		periodicNow, err := ledgerbackup.List(periodic)
		require.NoError(t, err)
		assert.Equal(t, periodicBefore, periodicNow, "no backup is taken of a refused ledger")
	})

	t.Run("the backup restored, everything resumes with the pools on hold", func(t *testing.T) {
		res, took := c.restore(t, filepath.Join(backups, md.Snapshot))
		t.Logf("restore took %s", took.Round(time.Millisecond))
		assert.True(t, res.VerifiedSHA256)
		assert.Equal(t, ledgerID, res.LedgerID)
		assert.Equal(t, []string{identityPool}, res.Record.HeldPools)
		c.cp.StartDockerIOS(t)
		c.cp.WaitDockerIOSServed(t, 2*time.Minute)

		after := c.observe(t)
		assert.Equal(t, before, after, "every object with its UID, every allocation and binding, as backed up")
		_, err := c.client.DockeriosV1alpha1().MacOSMachines(ns).Get(ctx, "mac-after-backup", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "a machine made after the backup is not in it: %v", err)
		code, _ := c.get(t, "/readyz/"+ledgerguard.CheckName)
		assert.Equal(t, 200, code)
		ledger := c.audit(t)
		c.expectOnHold(t, ledger, md, "mac-after-restore")

		cm := c.marker(t)
		assert.Equal(t, ledgerID, cm.Data[ledgerguard.DataLedgerID])
		assert.Equal(t, res.Record.ID, cm.Data[ledgerguard.DataLastRestoreID])
		framework.Eventually(t, 30*time.Second, func() string {
			if e := c.events(t, "default", "APIService", ledgerguard.ReasonRestored); len(e) == 0 {
				return "no Restored Event on the APIService"
			}
			return ""
		})
		// The owner is back, with its UID: what it owns stays.
		framework.Consistently(t, 15*time.Second, func() string {
			if cm, sec := c.exists(t, "mac-0-agent-token"); !cm || !sec {
				return "mac-0's objects were deleted after the restore"
			}
			return ""
		})
		// Backups resume, of the restored ledger, within retention.
		framework.Eventually(t, 30*time.Second, func() string {
			all, err := ledgerbackup.List(periodic)
			if err != nil {
				return err.Error()
			}
			if len(all) == 0 || all[0].Revision <= ledgerbackup.DefaultRevisionBump || all[0].LedgerID != ledgerID {
				return fmt.Sprintf("newest periodic backup %+v", all)
			}
			if len(all) > 3 {
				return fmt.Sprintf("%d backups kept, --backup-keep=3", len(all))
			}
			return ""
		})
	})

	t.Run("a person confirms a fresh start instead", func(t *testing.T) {
		c.cp.StopDockerIOS(t)
		require.NoError(t, os.RemoveAll(c.cp.DockerIOSDataDir()))
		c.cp.StartDockerIOS(t)
		framework.Eventually(t, time.Minute, func() string {
			if code, body := c.get(t, "/readyz/"+ledgerguard.CheckName); code != 500 {
				return fmt.Sprintf("/readyz/%s: %d %s", ledgerguard.CheckName, code, body)
			}
			return ""
		})
		c.admin.MustRun(t, "", "-n", "dockerios-system", "annotate", "configmap", "dockerios-ledger", "dockerios.io/confirm-empty-ledger="+ledgerID)
		c.cp.WaitDockerIOSServed(t, 2*time.Minute)
		cm := c.marker(t)
		assert.NotEqual(t, ledgerID, cm.Data[ledgerguard.DataLedgerID], "a new ledger")
		assert.Equal(t, ledgerID, cm.Data[ledgerguard.DataPrevious])
		assert.NotContains(t, cm.Annotations, ledgerguard.ConfirmEmptyAnnotation)
		assert.Empty(t, c.observe(t).Machines, "the ledger is empty")
		// Confirmed: the machines are gone, and so, by the garbage
		// collector, is what they owned.
		framework.Eventually(t, 3*time.Minute, func() string {
			if cm, sec := c.exists(t, "mac-0-agent-token"); cm || sec {
				return "the lost machine's objects are still there"
			}
			return ""
		})
	})
}

// TestBackupRestoresIntoAFreshInstall backs a fleet up, loses the whole
// cluster (etcd, kube-apiserver, the marker's namespace), installs afresh
// (whose apiserver starts a ledger of its own) and restores the backup
// into it: every identity, machine, pool and claim comes back with its
// UID and allocation, the audit finds nothing, the pools are on hold, and
// the marker records the restored ledger.
func TestBackupRestoresIntoAFreshInstall(t *testing.T) {
	backups := filepath.Join(t.TempDir(), "backups")
	var (
		before   state
		md       ledgerbackup.Metadata
		ledgerID string
	)
	t.Run("a fleet backed up in the first cluster", func(t *testing.T) {
		c := startCluster(t)
		c.fleet(t)
		ledgerID = c.marker(t).Data[ledgerguard.DataLedgerID]
		md = c.backup(t, backups)
		assert.Equal(t, ledgerID, md.LedgerID)
		before = c.observe(t)
	}) // the first cluster is gone: its etcd, kube-apiserver, marker and data
	require.NotEmpty(t, before.UIDs)

	c := startCluster(t)
	fresh := c.marker(t).Data[ledgerguard.DataLedgerID]
	require.NotEqual(t, ledgerID, fresh, "the fresh install started a ledger of its own")
	res, took := c.restore(t, filepath.Join(backups, md.Snapshot))
	t.Logf("restore of a %d-byte snapshot took %s", md.Size, took.Round(time.Millisecond))
	c.cp.StartDockerIOS(t)
	c.cp.WaitDockerIOSServed(t, 2*time.Minute)

	after := c.observe(t)
	assert.Equal(t, before, after, "every object with its UID, every allocation and binding")
	keys := make([]string, 0, len(after.UIDs))
	for k := range after.UIDs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t.Logf("restored with their UIDs: %s", strings.Join(keys, ", "))
	ledger := c.audit(t)
	c.expectOnHold(t, ledger, md, "mac-after-restore")
	cm := c.marker(t)
	assert.Equal(t, ledgerID, cm.Data[ledgerguard.DataLedgerID], "the marker records the restored ledger")
	assert.Equal(t, fresh, cm.Data[ledgerguard.DataPrevious])
	assert.Equal(t, res.Record.ID, cm.Data[ledgerguard.DataLastRestoreID])
	assert.Contains(t, c.cp.DockerIOSOutput(), ledgerguard.ReasonRestoreOfAnotherLedger)
}
