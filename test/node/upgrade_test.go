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
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/test/framework"
)

// ledger is what an upgrade must not change: which machine holds which
// identity, and which claim is bound to which machine.
func (f *Fleet) ledger(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	ms, err := f.client.DockeriosV1alpha1().MacOSMachines(fleetNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, m := range ms.Items {
		if m.Status.IdentityRef != nil {
			out["machine "+m.Name+" "+string(m.UID)] = "identity " + m.Status.IdentityRef.Name
		}
	}
	cls, err := f.client.DockeriosV1alpha1().MacOSMachineClaims(fleetNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, cl := range cls.Items {
		if strings.HasPrefix(cl.Name, "loop-") {
			continue // the client loop's, coming and going
		}
		out["claim "+cl.Name] = "machine " + cl.Status.MachineName
	}
	return out
}

// loopStats is what the client loop saw.
type loopStats struct {
	mu sync.Mutex
	// done counts creates and deletes that were carried out.
	done int
	// failed counts attempts answered with an error, by message.
	failed map[string]int
	// outage is the longest run of failed attempts, first to last.
	outage time.Duration
	// released are the machines the loop's claims were bound to, at
	// their create or later: the pool deletes and replaces each when its
	// claim goes.
	released map[string]bool
	// finished is closed when the loop has stopped.
	finished chan struct{}
}

// clientLoop creates and deletes claims until stop is closed, as a CI
// system asking for Macs would, retrying an attempt that failed (a
// client that gives up on the first error would lose its work; the loop
// reports every failed attempt).
func (f *Fleet) clientLoop(stop <-chan struct{}) *loopStats {
	s := &loopStats{failed: map[string]int{}, released: map[string]bool{}, finished: make(chan struct{})}
	claims := f.client.DockeriosV1alpha1().MacOSMachineClaims(fleetNamespace)
	var failingSince time.Time
	attempt := func(op func(ctx context.Context) error) {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := op(ctx)
			cancel()
			s.mu.Lock()
			if err == nil {
				s.done++
				if !failingSince.IsZero() {
					if d := time.Since(failingSince); d > s.outage {
						s.outage = d
					}
					failingSince = time.Time{}
				}
				s.mu.Unlock()
				return
			}
			msg := err.Error()
			if len(msg) > 120 {
				msg = msg[:120]
			}
			s.failed[msg]++
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			s.mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
	}
	go func() {
		defer close(s.finished)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("loop-%d", i)
			attempt(func(ctx context.Context) error {
				cl, err := claims.Create(ctx, &v1alpha1.MacOSMachineClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: v1alpha1.MacOSMachineClaimSpec{PoolName: fleetName}}, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					// An earlier attempt's create was carried out.
					cl, err = claims.Get(ctx, name, metav1.GetOptions{})
				}
				if err == nil && cl.Status.MachineName != "" {
					s.mu.Lock()
					s.released[cl.Status.MachineName] = true
					s.mu.Unlock()
				}
				return err
			})
			time.Sleep(300 * time.Millisecond)
			// A claim left Pending by its create may be bound since (a
			// machine came free): the machine it holds when it is deleted
			// is released, so the delete is conditional on the state read.
			attempt(func(ctx context.Context) error {
				for {
					cl, err := claims.Get(ctx, name, metav1.GetOptions{})
					if apierrors.IsNotFound(err) {
						return nil
					}
					if err != nil {
						return err
					}
					if cl.Status.MachineName != "" {
						s.mu.Lock()
						s.released[cl.Status.MachineName] = true
						s.mu.Unlock()
					}
					err = claims.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cl.ResourceVersion}})
					switch {
					case apierrors.IsNotFound(err):
						return nil
					case apierrors.IsConflict(err):
						continue // changed since read (bound): read again
					}
					return err
				}
			})
		}
	}()
	return s
}

// checkUpgrade applies the next release over the running one while the
// client loop runs: the new pods run the new images, the API reports the
// new version, and no claim, identity or binding is lost.
func checkUpgrade(t *testing.T, c *Cluster, kube kubernetes.Interface, f *Fleet, next *Release) {
	before := f.ledger(t)
	require.NotEmpty(t, before)
	stop := make(chan struct{})
	stats := f.clientLoop(stop)
	time.Sleep(2 * time.Second)

	start := time.Now()
	next.install(t, c)
	framework.Eventually(t, 3*time.Minute, func() string {
		pods, err := kube.CoreV1().Pods(systemNamespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, p := range pods.Items {
			if p.Labels["app.kubernetes.io/version"] != next.Version || !podReady(&p) || p.DeletionTimestamp != nil {
				return fmt.Sprintf("pod %s (%s) is not yet the new release's, Ready", p.Name, p.Labels["app.kubernetes.io/version"])
			}
		}
		return ""
	})
	took := time.Since(start)
	time.Sleep(3 * time.Second) // the loop goes on against the new release
	close(stop)
	<-stats.finished
	f.waitPoolReady(t, 2)

	stats.mu.Lock()
	var failed []string
	total := 0
	for msg, n := range stats.failed {
		failed = append(failed, fmt.Sprintf("%d× %s", n, msg))
		total += n
	}
	sort.Strings(failed)
	t.Logf("upgrade to %s took %s; the client loop carried out %d creates and deletes; %d attempts failed, the longest outage %s:\n  %s",
		next.Version, took.Round(time.Second), stats.done, total, stats.outage.Round(time.Millisecond), strings.Join(failed, "\n  "))
	assert.Greater(t, stats.done, 4, "the client loop made progress")
	stats.mu.Unlock()

	// Every machine of before that the loop did not claim (and so
	// release) keeps its identity, the claim made before keeps its
	// machine, and no identity is held twice.
	after := f.ledger(t)
	held := map[string]string{}
	for k, v := range after {
		if strings.HasPrefix(k, "machine ") {
			assert.Empty(t, held[v], "%s is held by %s and by %s", v, held[v], k)
			held[v] = k
		}
	}
	for k, v := range before {
		machine := strings.Fields(k)[1]
		if strings.HasPrefix(k, "machine ") && stats.released[machine] {
			continue
		}
		assert.Equal(t, v, after[k], "%s after the upgrade", k)
	}
	assert.Equal(t, next.Version, servedVersion(t, c), "the apiserver's /version is the new release's")
}

// checkUninstall follows docs/operators/uninstall.md: release every
// claim, delete every machine and pool (the controller takes their VMs,
// disks, Jobs and Secrets down and the identities go back to their pool),
// then delete the release. What remains is the ledger (its namespace,
// volumes and marker), which installing release again serves, with every
// identity as it was; deleting the ledger's manifest then leaves nothing
// of DockerIOS's, and a cluster whose discovery and namespace deletion
// work as before.
func checkUninstall(t *testing.T, c *Cluster, f *Fleet, release *Release) {
	ctx := context.Background()
	c.Kubectl.MustRun(t, "", "delete", "mmclaim,mmpool,mm", "--all", "--all-namespaces", "--wait", "--timeout=5m")
	for _, l := range []string{"virtualmachines.kubevirt.io", "datavolumes.cdi.kubevirt.io", "jobs", "persistentvolumeclaims", "secrets"} {
		out := c.Kubectl.MustRun(t, "", "get", l, "-n", fleetNamespace, "-l", "dockerios.io/machine-uid", "-o", "name")
		assert.Empty(t, strings.TrimSpace(out), "the machines' %s are gone", l)
	}
	ids, err := f.client.DockeriosV1alpha1().MacOSIdentities().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, id := range ids.Items {
		assert.Nil(t, id.Status.Allocation, "identity %s is free", id.Name)
	}

	identities := map[string]string{}
	for _, id := range ids.Items {
		identities[id.Name] = string(id.UID)
	}
	require.NotEmpty(t, identities)
	ledgerID := c.Kubectl.MustRun(t, "", "-n", systemNamespace, "get", "configmap", "dockerios-ledger", "-o", "jsonpath={.data.ledgerID}")
	require.NotEmpty(t, ledgerID, "the apiserver records its ledger")

	c.Kubectl.MustRun(t, "", "delete", "-f", c.path("kustomize", "installed.yaml"), "--wait", "--timeout=5m", "--ignore-not-found")
	// Its pods go too (the embedded etcd lets go of its volume).
	framework.Eventually(t, 3*time.Minute, func() string {
		if out := c.Kubectl.MustRun(t, "", "-n", systemNamespace, "get", "pods", "-o", "name"); strings.TrimSpace(out) != "" {
			return "pods left: " + out
		}
		return ""
	})
	// The ledger stays: its namespace, its volumes (bound, as they were)
	// and its marker.
	assert.Empty(t, c.Kubectl.MustRun(t, "", "get", "namespace", systemNamespace, "-o", "jsonpath={.metadata.deletionTimestamp}"))
	for _, pvc := range []string{"dockerios-apiserver-data", "dockerios-apiserver-backups"} {
		assert.Equal(t, "Bound", c.Kubectl.MustRun(t, "", "-n", systemNamespace, "get", "pvc", pvc, "-o", "jsonpath={.status.phase}"), pvc)
	}
	assert.Equal(t, ledgerID, c.Kubectl.MustRun(t, "", "-n", systemNamespace, "get", "configmap", "dockerios-ledger", "-o", "jsonpath={.data.ledgerID}"))
	// Coming back: the same install serves the same ledger.
	release.install(t, c)
	ids, err = f.client.DockeriosV1alpha1().MacOSIdentities().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	back := map[string]string{}
	for _, id := range ids.Items {
		back[id.Name] = string(id.UID)
	}
	assert.Equal(t, identities, back, "every identity, with its UID, after installing again")
	c.Kubectl.MustRun(t, "", "delete", "-f", c.path("kustomize", "installed.yaml"), "--wait", "--timeout=5m", "--ignore-not-found")

	// Deleting the ledger too (docs/operators/uninstall.md): nothing is left.
	c.Kubectl.MustRun(t, "", "delete", "-f", release.Ledger, "--wait", "--timeout=5m", "--ignore-not-found")
	for _, what := range [][]string{
		{"apiservice", "v1alpha1.dockerios.io"},
		{"mutatingwebhookconfiguration", "dockerios-launcher-pods"},
		{"namespace", systemNamespace},
		{"clusterrole", "dockerios-controller"},
	} {
		r := c.Kubectl.Run("", append([]string{"get"}, what...)...)
		assert.Error(t, r.Err, "%s is gone", strings.Join(what, "/"))
	}
	// A dead APIService would break discovery and hold namespace
	// deletion (the namespace controller must list every group).
	r := c.Kubectl.Run("", "api-resources")
	assert.NoError(t, r.Err, "discovery after uninstall: %s", r.Stderr)
	c.Kubectl.MustRun(t, "", "create", "namespace", "after-uninstall")
	c.Kubectl.MustRun(t, "", "delete", "namespace", "after-uninstall", "--wait", "--timeout=2m")
}
