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

// Package aggregated drives DockerIOS the way its users reach it: through a
// real kube-apiserver that authenticates them, authorizes them with RBAC and
// proxies dockerios.io to the DockerIOS apiserver through an APIService, with
// the real kubectl. One control plane serves every test of the package; each
// test works in namespaces of its own.
package aggregated

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/test/framework"
)

// The fleet every test draws from: one identity pool, one image, one class.
const (
	identityPool = "imacpro"
	className    = "standard"
	model        = "iMacPro1,1"
	// fleetSize identities are in the pool: enough for every machine the
	// tests of this package make.
	fleetSize = 64
)

// env is a running control plane with the fleet in place and an admin's
// kubectl and clientset.
type env struct {
	cp     *framework.ControlPlane
	admin  *framework.Kubectl
	client versioned.Interface
}

func startEnv(t testing.TB) *env {
	t.Helper()
	cp := framework.StartControlPlane(t)
	e := &env{cp: cp, admin: framework.NewKubectl(t, cp.AdminKubeconfig)}
	var err error
	e.client, err = versioned.NewForConfig(framework.RESTConfig(t, cp.AdminKubeconfig))
	require.NoError(t, err)

	e.admin.MustRun(t, fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSIdentityPool
metadata: {name: %s}
spec: {model: "%s"}
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
metadata: {name: %s}
spec: {imageName: sonoma, identityPoolName: %s, systemDisk: {size: 128Gi}}
`, identityPool, model, className, identityPool), "apply", "-f", "-")
	e.addIdentities(t, identityPool, "fleet", 0, fleetSize, 8)
	return e
}

// addIdentities creates identities <name>-<i> for from <= i < from+n in
// pool, with the values the synthetic generator gives i-th, by clients
// writers at once. One generator seed serves the whole package: its values
// never repeat, where two seeds' values could.
func (e *env) addIdentities(t testing.TB, pool, name string, from, n, clients int) {
	t.Helper()
	values := generated(from, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				v := values[i]
				_, err := e.client.DockeriosV1alpha1().MacOSIdentities().Create(context.Background(), &v1alpha1.MacOSIdentity{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, from+i)},
					Spec: v1alpha1.MacOSIdentitySpec{PoolName: pool, Model: v.Model, SerialNumber: v.SerialNumber,
						BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
				}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("creating identities: %v", err)
	}
}

// generated returns the synthetic generator's values from-th to
// (from+n-1)-th.
func generated(from, n int) []identity.Values {
	gen := identity.NewGenerator(1, model)
	values := make([]identity.Values, 0, from+n)
	for range from + n {
		values = append(values, gen.Next())
	}
	return values[from:]
}

// namespace creates a namespace for one test.
func (e *env) namespace(t *testing.T, name string) string {
	t.Helper()
	e.admin.MustRun(t, "", "create", "namespace", name)
	return name
}

// user returns a kubectl authenticated as name (a client certificate
// kube-apiserver trusts), with no rights until a test grants some.
func (e *env) user(t *testing.T, name string) *framework.Kubectl {
	t.Helper()
	return framework.NewKubectl(t, e.cp.UserKubeconfig(t, name))
}

// machine creates a machine of the fleet's class, in pool when not empty.
func (e *env) machine(t *testing.T, namespace, name, pool string) *v1alpha1.MacOSMachine {
	t.Helper()
	m, err := e.client.DockeriosV1alpha1().MacOSMachines(namespace).Create(context.Background(), &v1alpha1.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"xcode": "16"}},
		Spec:       v1alpha1.MacOSMachineSpec{ClassName: className, PoolName: pool},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return m
}

// makeReady reports a machine Ready through its status subresource, as
// the controller does once the guest agent says so.
func (e *env) makeReady(t *testing.T, namespace, name string) {
	t.Helper()
	machines := e.client.DockeriosV1alpha1().MacOSMachines(namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m, err := machines.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		m.Status.Phase = v1alpha1.MachineReady
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
			Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionTrue,
			Reason: "AgentReady", Message: "the guest agent reports Ready", ObservedGeneration: m.Generation,
		})
		_, err = machines.UpdateStatus(context.Background(), m, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
}

// pool creates a machine pool of the fleet's class with no warm machines.
func (e *env) pool(t *testing.T, namespace, name string) {
	t.Helper()
	e.admin.MustRun(t, fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSMachinePool
metadata: {name: %s, namespace: %s}
spec: {className: %s, replicas: 0, maxMachines: 100}
`, name, namespace, className), "apply", "-f", "-")
}

// classClaim creates a claim for the class as admin and returns its uid:
// the controller makes a machine for it and binds the two through the bind
// subresource, which is what bind is for.
func (e *env) classClaim(t *testing.T, namespace, name string) string {
	t.Helper()
	c, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(namespace).Create(context.Background(), &v1alpha1.MacOSMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.MacOSMachineClaimSpec{ClassName: className},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return string(c.UID)
}

// machineFor creates a machine of no pool made for the class claim of uid,
// as the controller does.
func (e *env) machineFor(t *testing.T, namespace, name, claimUID string) {
	t.Helper()
	_, err := e.client.DockeriosV1alpha1().MacOSMachines(namespace).Create(context.Background(), &v1alpha1.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.ClaimUIDLabel: claimUID}},
		Spec:       v1alpha1.MacOSMachineSpec{ClassName: className},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// claim creates a claim against pool as admin.
func (e *env) claim(t *testing.T, namespace, name, pool string) {
	t.Helper()
	_, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(namespace).Create(context.Background(), &v1alpha1.MacOSMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.MacOSMachineClaimSpec{PoolName: pool},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// finalizeDeletedMachines removes the teardown finalizer from machines
// being deleted, as the controller does once a machine is torn down, until
// stop is closed.
func (e *env) finalizeDeletedMachines(t *testing.T, namespace string, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		machines := e.client.DockeriosV1alpha1().MacOSMachines(namespace)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			list, err := machines.List(context.Background(), metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, m := range list.Items {
				if m.DeletionTimestamp != nil && len(m.Finalizers) > 0 {
					_, err := machines.Patch(context.Background(), m.Name, "application/json-patch+json",
						[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
					if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
						t.Logf("removing the finalizer of %s: %v", m.Name, err)
					}
				}
			}
		}
	}()
	return &wg
}

// forbidden asserts r failed with 403 and a message containing every part.
func forbidden(t *testing.T, r framework.Result, parts ...string) {
	t.Helper()
	require.Error(t, r.Err, "expected 403, got success: %s", r.Stdout)
	require.Contains(t, r.Stderr, "Forbidden", "stderr: %s", r.Stderr)
	for _, p := range parts {
		require.Contains(t, r.Stderr, p, "stderr: %s", r.Stderr)
	}
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
