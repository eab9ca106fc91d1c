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

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
)

// TestClassView_ALookupFollowsAClassDeletedAndMadeAgain is rule 6 of the
// ledger issue: the pool a class draws from is remembered between writes,
// but a class deleted and created again with another pool is never
// answered with the old pool — the verb use is checked against the pool
// the class names now.
func TestClassView_ALookupFollowsAClassDeletedAndMadeAgain(t *testing.T) {
	e := newEnv(t)
	registrytest.Seed(t, e.getter, registrytest.IdentityPool("other"))
	i := newProductionInstance(t, e.getter)
	ctx := context.Background()
	poolOf := func() string {
		pool, err := i.ledger.IdentityPoolOf(ctx, dockerio.Kind("MacOSMachinePool"), "p", "standard")
		require.NoError(t, err)
		return pool
	}
	// Asked twice: the second answer is the remembered one once the
	// class view runs.
	eventually(t, func() string {
		if poolOf() != "imacpro" || poolOf() != "imacpro" {
			return "class standard should draw from imacpro"
		}
		return ""
	})

	// The class goes and comes back drawing from another pool, written
	// straight to etcd as another replica would.
	_, err := e.getter.Server.V3Client.Delete(ctx, "/registry/dockerios.io/macosmachineclasses/standard")
	require.NoError(t, err)
	class := registrytest.MachineClass("standard")
	class.Spec.IdentityPoolName = "other"
	registrytest.Seed(t, e.getter, class)
	eventually(t, func() string {
		if p := poolOf(); p != "other" {
			return "class standard is still said to draw from " + p
		}
		return ""
	})

	// A machine of the class now draws from the new pool: use is checked
	// on it, and the machine waits for one of its identities.
	m, err := i.machines.Machine.Create(i.nsCtx(), registrytest.Machine("mac-1"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	require.Nil(t, m.(*dockerio.MacOSMachine).Status.IdentityRef)
	require.Contains(t, m.(*dockerio.MacOSMachine).Status.Conditions[0].Message, "MacOSIdentityPool other")
}

// eventually waits up to ten seconds for check to say nothing is wrong.
func eventually(t *testing.T, check func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
