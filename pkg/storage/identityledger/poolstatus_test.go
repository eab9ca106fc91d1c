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
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	poolstorage "github.com/dockerios/dockerios/pkg/registry/macosidentitypool/storage"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
)

// The pool's status counts follow every change of the ledger, promptly:
// identities added (a free key put), an allocation (a free key deleted,
// nothing put), a release (a free key put again).
func TestRunPoolStatus_CountsFollowAllocationAndRelease(t *testing.T) {
	e := newEnv(t)
	pools, err := poolstorage.NewStorage(e.getter, e.ledger)
	require.NoError(t, err)
	t.Cleanup(pools.Pool.DestroyFunc)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// As the apiserver runs them: the counts come from the free view.
	go e.ledger.RunFreeView(ctx)
	go e.ledger.RunPoolStatus(ctx)

	expect := func(free, allocated int32) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		var last dockerio.MacOSIdentityPoolStatus
		for time.Now().Before(deadline) {
			obj, err := pools.Pool.Get(genericregistrytest.NewClusterScopeContext(pools.Pool.Store), "imacpro", &metav1.GetOptions{})
			require.NoError(t, err)
			last = obj.(*dockerio.MacOSIdentityPool).Status
			if last.Free == free && last.Allocated == allocated {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal(fmt.Sprintf("pool status %+v, want free %d allocated %d", last, free, allocated))
	}
	// settle lets the writes a status write itself sets off (its own
	// watch event) end, so that what follows is noticed only through the
	// index keys it changes.
	settle := func() { time.Sleep(4 * 250 * time.Millisecond) }
	e.addIdentity(t, e.nextIdentity())
	e.addIdentity(t, e.nextIdentity())
	expect(2, 0)
	settle()
	e.createMachine(t, "mac-1")
	expect(1, 1)
	settle()
	e.createMachine(t, "mac-2")
	expect(0, 2)
	settle()
	e.deleteMachine(t, "mac-1")
	expect(1, 1)
}

// Without the free view (before it has loaded, or while its watch is
// down), the counts are read from etcd.
func TestRunPoolStatus_CountsInEtcdWithoutTheFreeView(t *testing.T) {
	e := newEnv(t)
	pools, err := poolstorage.NewStorage(e.getter, e.ledger)
	require.NoError(t, err)
	t.Cleanup(pools.Pool.DestroyFunc)
	e.addIdentity(t, e.nextIdentity())
	e.addIdentity(t, e.nextIdentity())
	e.createMachine(t, "mac-1")

	require.NoError(t, e.ledger.UpdatePoolStatus(context.Background(), "imacpro"))
	obj, err := pools.Pool.Get(genericregistrytest.NewClusterScopeContext(pools.Pool.Store), "imacpro", &metav1.GetOptions{})
	require.NoError(t, err)
	st := obj.(*dockerio.MacOSIdentityPool).Status
	assert.Equal(t, []int32{2, 1, 1, 0}, []int32{st.Total, st.Free, st.Allocated, st.Pending})
}

// The free view counts each pool's index keys from its watch: a key put
// anew counts, a key put again does not, a deleted key no longer counts —
// the same as counting them in etcd.
func TestFreeView_CountsAsEtcdDoes(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for range 3 {
		e.addIdentity(t, e.nextIdentity())
	}
	go e.ledger.RunFreeView(ctx)
	e.createMachine(t, "mac-1")
	e.addIdentity(t, e.nextIdentity())
	e.createMachine(t, "mac-2")

	client, err := clientv3.New(clientv3.Config{Endpoints: e.getter.Endpoints(), DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	// A member key put again (as the repair audit writes a key back)
	// is still one member.
	resp, err := client.Get(ctx, "/registry/dockerios.io/identity-index/pools/imacpro/members/", clientv3.WithPrefix(), clientv3.WithLimit(1))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	_, err = client.Put(ctx, string(resp.Kvs[0].Key), "")
	require.NoError(t, err)
	e.deleteMachine(t, "mac-1")
	put, err := client.Put(ctx, "/registry/dockerios.io/identity-index/pools/imacpro/members/zz-written-by-hand", "")
	require.NoError(t, err)

	fromEtcd, err := e.ledger.Counts(ctx, "imacpro")
	require.NoError(t, err)
	assert.Equal(t, identityledger.PoolCounts{Total: 5, Free: 3, Allocated: 2, Pending: 0}, fromEtcd)
	require.Eventually(t, func() bool {
		c, rev, ok := e.ledger.FreeViewCounts("imacpro")
		return ok && rev >= put.Header.Revision && c == fromEtcd
	}, 5*time.Second, 10*time.Millisecond, "the view counts what etcd counts")
}

// A replica whose free view lags behind a status write (another
// replica's, with newer counts) does not write its older counts over it.
func TestUpdatePoolStatus_NeverWritesCountsOlderThanThePoolsLastWrite(t *testing.T) {
	e := newEnv(t)
	pools, err := poolstorage.NewStorage(e.getter, e.ledger)
	require.NoError(t, err)
	t.Cleanup(pools.Pool.DestroyFunc)
	e.addIdentity(t, e.nextIdentity())
	e.addIdentity(t, e.nextIdentity())
	require.NoError(t, e.ledger.UpdatePoolStatus(context.Background(), "imacpro"))
	status := func() []int32 {
		t.Helper()
		obj, err := pools.Pool.Get(genericregistrytest.NewClusterScopeContext(pools.Pool.Store), "imacpro", &metav1.GetOptions{})
		require.NoError(t, err)
		st := obj.(*dockerio.MacOSIdentityPool).Status
		return []int32{st.Total, st.Free}
	}
	require.Equal(t, []int32{2, 2}, status())
	poolRev := func() int64 {
		t.Helper()
		obj, err := pools.Pool.Get(genericregistrytest.NewClusterScopeContext(pools.Pool.Store), "imacpro", &metav1.GetOptions{})
		require.NoError(t, err)
		rv, err := strconv.ParseInt(obj.(*dockerio.MacOSIdentityPool).ResourceVersion, 10, 64)
		require.NoError(t, err)
		return rv
	}

	// The lagging view still counts one identity, as of before the status
	// was written.
	lagging, _ := registrytest.NewLedger(t, e.getter)
	lagging.PretendFreeView("imacpro", identityledger.PoolCounts{Total: 1, Free: 1, Allocated: 0}, poolRev()-1)
	assert.Error(t, lagging.UpdatePoolStatus(context.Background(), "imacpro"))
	assert.Equal(t, []int32{2, 2}, status(), "older counts are not written")

	// Once it has caught up, it writes what it counts.
	lagging.PretendFreeView("imacpro", identityledger.PoolCounts{Total: 3, Free: 3}, poolRev())
	require.NoError(t, lagging.UpdatePoolStatus(context.Background(), "imacpro"))
	assert.Equal(t, []int32{3, 3}, status())
}
