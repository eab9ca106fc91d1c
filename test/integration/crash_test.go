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
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
	"github.com/dockerios/dockerios/test/framework"
)

// TestCrash_SIGKILLMidBurstLeavesNoHalfWrittenState kills the apiserver
// while writers create identities, create machines and delete them, then
// scans etcd: every object agrees with every index key, because every
// change was one transaction. The same holds after a restart and more work.
func TestCrash_SIGKILLMidBurstLeavesNoHalfWrittenState(t *testing.T) {
	etcdDir := t.TempDir()
	etcd, err := embeddedetcd.Start(filepath.Join(etcdDir, "data"), os.Stderr)
	require.NoError(t, err)
	t.Cleanup(etcd.Stop)
	dataDir := t.TempDir()
	getter := registrytest.RESTOptionsGetterFor(etcd.ClientURL)
	ledger, _ := registrytest.NewLedger(t, getter)
	audit := func(when string) {
		t.Helper()
		drifts, err := ledger.Audit(context.Background())
		require.NoError(t, err)
		assert.Empty(t, drifts, "drift %s", when)
	}

	s := framework.StartLocalServer(t, dataDir, "--etcd-servers", etcd.ClientURL)
	createClassAndPool(t, s)
	gen := identity.NewGenerator(42, "iMacPro1,1")
	var genMu sync.Mutex
	var n atomic.Int64

	burst := func(s *framework.LocalServer, d time.Duration, kill bool) {
		client, err := versioned.NewForConfig(restConfig(t, s.Kubeconfig))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					i := n.Add(1)
					var err error
					switch w % 3 {
					case 0: // identities join the pool
						genMu.Lock()
						v := gen.Next()
						genMu.Unlock()
						_, err = client.DockeriosV1alpha1().MacOSIdentities().Create(ctx, &v1alpha1.MacOSIdentity{
							ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("id-%d", i)},
							Spec: v1alpha1.MacOSIdentitySpec{PoolName: "imacpro", Model: v.Model, SerialNumber: v.SerialNumber,
								BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
						}, metav1.CreateOptions{})
					case 1: // machines take them, or wait
						_, err = client.DockeriosV1alpha1().MacOSMachines("default").Create(ctx, &v1alpha1.MacOSMachine{
							ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mac-%d", i)},
							Spec:       v1alpha1.MacOSMachineSpec{ClassName: "standard"},
						}, metav1.CreateOptions{})
					default: // and go away, handing identities on
						err = deleteSomeMachine(ctx, client)
					}
					if err != nil && ctx.Err() == nil && !kill && !racedWithAnotherWriter(err) {
						t.Errorf("writer %d: %v", w, err)
						return
					}
				}
			}()
		}
		time.Sleep(d)
		if kill {
			s.Kill(t)
		}
		cancel()
		wg.Wait()
	}

	burst(s, 3*time.Second, true)
	audit("after SIGKILL mid-burst")

	s = framework.StartLocalServer(t, dataDir, "--etcd-servers", etcd.ClientURL)
	burst(s, 2*time.Second, false)
	audit("after a restart and more work")

	t.Logf("%d writes attempted across the crash and the restart", n.Load())
	assert.Greater(t, n.Load(), int64(100), "the burst did real work")
}

// deleteSomeMachine deletes one machine as its controller would: delete,
// then remove the teardown finalizer.
func deleteSomeMachine(ctx context.Context, client versioned.Interface) error {
	machines := client.DockeriosV1alpha1().MacOSMachines("default")
	list, err := machines.List(ctx, metav1.ListOptions{Limit: 1, FieldSelector: "metadata.namespace=default"})
	if err != nil || len(list.Items) == 0 {
		return err
	}
	m := list.Items[0]
	if err := machines.Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	_, err = machines.Patch(ctx, m.Name, "application/json-patch+json", []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
	return err
}

// racedWithAnotherWriter says a write lost to another writer of the burst:
// the machine was gone already, changed meanwhile, or lost its finalizer
// to another deleter.
func racedWithAnotherWriter(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err)
}
