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
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	poolstorage "github.com/dockerios/dockerios/pkg/registry/macosidentitypool/storage"
)

// The pool's status counts follow every change of the ledger, promptly:
// identities added (a free key put), an allocation (a free key deleted,
// nothing put), a release (a free key put again).
func TestRunPoolStatus_CountsFollowAllocationAndRelease(t *testing.T) {
	e := newEnv(t)
	pools, err := poolstorage.NewStorage(e.getter)
	require.NoError(t, err)
	t.Cleanup(pools.Pool.DestroyFunc)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
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
	e.addIdentity(t, e.nextIdentity())
	e.addIdentity(t, e.nextIdentity())
	expect(2, 0)
	e.createMachine(t, "mac-1")
	expect(1, 1)
	e.createMachine(t, "mac-2")
	expect(0, 2)
	e.deleteMachine(t, "mac-1")
	expect(1, 1)
}
