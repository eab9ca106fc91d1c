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

package identityledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	poolstorage "github.com/dockerios/dockerios/pkg/registry/macosidentitypool/storage"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
)

// poolStatus returns a function reading pool imacpro's status counts
// (total, free, allocated, pending).
func poolStatus(t *testing.T, e *env) func() []int32 {
	t.Helper()
	pools, err := poolstorage.NewStorage(e.getter, e.ledger)
	require.NoError(t, err)
	t.Cleanup(pools.Pool.DestroyFunc)
	return func() []int32 {
		t.Helper()
		obj, err := pools.Pool.Get(genericregistrytest.NewClusterScopeContext(pools.Pool.Store), "imacpro", &metav1.GetOptions{})
		require.NoError(t, err)
		st := obj.(*dockerio.MacOSIdentityPool).Status
		return []int32{st.Total, st.Free, st.Allocated, st.Pending}
	}
}

// runFreeView runs the ledger's free view until the returned function is
// called, which waits until the view says it is no longer loaded — as
// after its watch broke, before it has loaded again.
func runFreeView(t *testing.T, l *identityledger.Ledger) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan struct{})
	go func() { defer close(done); l.RunFreeView(ctx) }()
	require.Eventually(t, func() bool { _, _, ok := l.FreeViewCounts("imacpro"); return ok }, 10*time.Second, 10*time.Millisecond, "the view loads")
	return func() {
		cancel()
		<-done
		_, _, ok := l.FreeViewCounts("imacpro")
		require.False(t, ok)
	}
}

// A key deleted and put again (a new create revision) counts once; after
// the view's watch breaks and it loads again, its counts are etcd's, with
// nothing counted twice and a pool whose keys all went meanwhile at zero.
func TestFreeView_CountsAsEtcdDoesAcrossRecreatesAndReloads(t *testing.T) {
	e := newEnv(t)
	client, err := clientv3.New(clientv3.Config{Endpoints: e.getter.Endpoints(), DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	const other = "/registry/dockerios.io/identity-index/pools/other/members/x"
	e.addIdentity(t, e.nextIdentity())
	_, err = client.Put(ctx, other, "")
	require.NoError(t, err)
	stop := runFreeView(t, e.ledger)

	expectEtcd := func(pool string) {
		t.Helper()
		fromEtcd, err := e.ledger.Counts(ctx, pool)
		require.NoError(t, err)
		now, err := client.Get(ctx, "probe")
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			c, rev, ok := e.ledger.FreeViewCounts(pool)
			return ok && rev >= now.Header.Revision && c == fromEtcd
		}, 5*time.Second, 10*time.Millisecond, "pool %s: the view counts what etcd counts, %+v", pool, fromEtcd)
	}

	// Deleted and put again in two writes: the put is a create again.
	resp, err := client.Get(ctx, "/registry/dockerios.io/identity-index/pools/imacpro/members/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	member := string(resp.Kvs[0].Key)
	_, err = client.Delete(ctx, member)
	require.NoError(t, err)
	_, err = client.Put(ctx, member, "")
	require.NoError(t, err)
	e.addIdentity(t, e.nextIdentity())
	expectEtcd("imacpro")
	expectEtcd("other")

	// While the view is down: pool other loses its last key, imacpro
	// gains a machine and an identity.
	stop()
	_, err = client.Delete(ctx, other)
	require.NoError(t, err)
	e.createMachine(t, "mac-1")
	e.addIdentity(t, e.nextIdentity())
	runFreeView(t, e.ledger)
	e.addIdentity(t, e.nextIdentity())
	expectEtcd("imacpro")
	expectEtcd("other")
}

// A pool whose status is written behind the apiserver's back (or a pool
// deleted and made again under its name, with no status) after the last
// change of its index keys gets its counts back, though nothing else is
// written to etcd afterwards: the view's watch says how far it is when
// asked.
func TestRunPoolStatus_CountsAPoolWrittenAfterItsLastIndexChange(t *testing.T) {
	e := newEnv(t)
	status := poolStatus(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go e.ledger.RunFreeView(ctx)
	go e.ledger.RunClassView(ctx)
	go e.ledger.RunPoolStatus(ctx)
	e.addIdentity(t, e.nextIdentity())
	e.addIdentity(t, e.nextIdentity())
	e.createMachine(t, "mac-1")
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int32{2, 1, 1, 0}, status()) }, 10*time.Second, 20*time.Millisecond)

	registrytest.Overwrite(t, e.getter, registrytest.IdentityPool("imacpro"))
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int32{2, 1, 1, 0}, status()) }, 10*time.Second, 20*time.Millisecond,
		"counts written again; status %v", status())
}

// As above, with another watch of the ledger's etcd client started after
// the pool's write (the class view, as it does each time its watch breaks)
// and nothing written since: etcd answers no progress request of a gRPC
// watch stream one of whose watches starts past its current revision, so
// the free view must not share its stream.
func TestRunPoolStatus_CountsAPoolWrittenJustBeforeAnotherWatchStarts(t *testing.T) {
	e := newEnv(t)
	status := poolStatus(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go e.ledger.RunFreeView(ctx)
	go e.ledger.RunPoolStatus(ctx)
	e.addIdentity(t, e.nextIdentity())
	e.addIdentity(t, e.nextIdentity())
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int32{2, 2, 0, 0}, status()) }, 10*time.Second, 20*time.Millisecond)
	time.Sleep(time.Second) // the status write's own watch event is handled

	registrytest.Overwrite(t, e.getter, registrytest.IdentityPool("imacpro"))
	go e.ledger.RunClassView(ctx)
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int32{2, 2, 0, 0}, status()) }, 10*time.Second, 20*time.Millisecond,
		"counts written again; status %v", status())
}

// A pool whose status was counted in etcd while the free view was down,
// and whose keys then all went before the view loaded again, is counted
// again once it has: its status does not keep counts of keys long gone.
func TestRunPoolStatus_RecountsAPoolCountedInEtcdWhileTheViewWasDown(t *testing.T) {
	e := newEnv(t)
	status := poolStatus(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stop := runFreeView(t, e.ledger)
	go e.ledger.RunPoolStatus(ctx)
	time.Sleep(time.Second) // the first status write, and its watch event
	require.Equal(t, []int32{0, 0, 0, 0}, status())

	stop()
	id := e.addIdentity(t, e.nextIdentity())
	// Anything that writes the pool has its counts written, from etcd.
	edited := registrytest.IdentityPool("imacpro")
	edited.Labels["edited"] = "yes"
	registrytest.Overwrite(t, e.getter, edited)
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int32{1, 1, 0, 0}, status()) }, 10*time.Second, 20*time.Millisecond)
	time.Sleep(time.Second) // the status write's own watch event is handled
	_, _, err := e.identities.Identity.Delete(e.clusterCtx(), id.Name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)
	time.Sleep(time.Second)

	runFreeView(t, e.ledger)
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]int32{0, 0, 0, 0}, status()) }, 10*time.Second, 20*time.Millisecond,
		"status %v", status())
}
