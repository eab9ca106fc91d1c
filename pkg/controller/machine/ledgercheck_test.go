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

package machine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	dfake "github.com/dockerios/dockerios/pkg/generated/clientset/versioned/fake"
)

// The cache says the machine holds its identity and may start; before a
// pass makes anything, the ledger itself is asked. What the ledger says
// wins: after a restore of an older snapshot, the cache shows machines the
// ledger no longer has for tens of seconds, and whatever was made for one
// of them would run an identity the ledger has given to another machine.
func TestNothingIsMadeForAMachineTheLedgerDisagreesWith(t *testing.T) {
	pool := func(onHold bool) *v1alpha1.MacOSIdentityPool {
		p := &v1alpha1.MacOSIdentityPool{ObjectMeta: metav1.ObjectMeta{Name: "standard"}}
		if onHold {
			p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.IdentityPoolOnHold, Status: metav1.ConditionTrue,
				Reason: "Restored", Message: "the ledger was restored"}}
		}
		return p
	}
	identity := func(edit func(*v1alpha1.MacOSIdentity)) *v1alpha1.MacOSIdentity {
		id := testIdentity()
		if edit != nil {
			edit(id)
		}
		return id
	}
	for _, tc := range []struct {
		name   string
		ledger []runtime.Object
		// made: the system disk is created; event: the Event the
		// machine gets when it is not ("" for none).
		made        bool
		event       string
		wantRequeue time.Duration
	}{
		{name: "the ledger agrees", ledger: []runtime.Object{identity(nil), pool(false)}, made: true},
		{name: "the identity is another machine's in the ledger (the cache is behind)",
			ledger: []runtime.Object{identity(func(id *v1alpha1.MacOSIdentity) {
				id.Status.Allocation.MachineName, id.Status.Allocation.MachineUID = "mac-9", "uid-9"
			}), pool(false)},
			wantRequeue: cacheBehindRetry},
		{name: "the identity is free in the ledger",
			ledger:      []runtime.Object{identity(func(id *v1alpha1.MacOSIdentity) { id.Status.Allocation = nil }), pool(false)},
			wantRequeue: cacheBehindRetry},
		{name: "the identity is not in the ledger", ledger: []runtime.Object{pool(false)}, wantRequeue: cacheBehindRetry},
		{name: "a VM outside the ledger runs with the identity",
			ledger: []runtime.Object{identity(func(id *v1alpha1.MacOSIdentity) {
				id.Status.Conditions = []metav1.Condition{{Type: v1alpha1.IdentityHeldOutsideLedger, Status: metav1.ConditionTrue,
					Reason: v1alpha1.ReasonInUseByUnrecordedVM, Message: "VirtualMachine ci/old carries this identity's serial number"}}
			}), pool(false)},
			event: "Warning IdentityInDoubt nothing is started with MacOSIdentity id-0: VirtualMachine ci/old carries", wantRequeue: 15 * time.Second},
		{name: "the identity's pool is on a restore's hold", ledger: []runtime.Object{identity(nil), pool(true)},
			event: "Warning IdentityInDoubt nothing is started with MacOSIdentity id-0: its MacOSIdentityPool standard is on hold", wantRequeue: 15 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMachine()
			e := newActEnv(t, m)
			client := dfake.NewClientset(tc.ledger...)
			e.r.Client = client
			for range 2 {
				var requeue time.Duration
				require.NoError(t, e.r.act(context.Background(), m, e.o, &requeue))
				if !tc.made {
					assert.Equal(t, tc.wantRequeue, requeue)
				}
			}
			dvs, err := e.dyn.Resource(external.DataVolumes).Namespace(m.Namespace).List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			if tc.made {
				assert.Len(t, dvs.Items, 1)
				return
			}
			assert.Empty(t, dvs.Items, "a system disk made for a machine the ledger disagrees with")
			assert.Nil(t, e.o.DV)
			events := e.events()
			if tc.event == "" {
				assert.Empty(t, events, "the machine is told nothing about the cache's lag")
				return
			}
			require.NotEmpty(t, events)
			assert.True(t, strings.HasPrefix(events[0], tc.event), "event %q, want %q…", events[0], tc.event)
		})
	}
}

// The ledger is read once per pass, and only by a pass that makes
// something: a machine with everything it needs costs no read.
func TestTheLedgerIsReadOnlyByAPassThatMakesSomething(t *testing.T) {
	m := testMachine()
	e := newActEnv(t, m)
	client := dfake.NewClientset(testIdentity(), &v1alpha1.MacOSIdentityPool{ObjectMeta: metav1.ObjectMeta{Name: "standard"}})
	e.r.Client = client
	e.o.Secret, e.o.PVC = nil, nil // the token Secret, the bootdisk PVC and the system disk are made in this pass
	var requeue time.Duration
	require.NoError(t, e.r.act(context.Background(), m, e.o, &requeue))
	require.NotNil(t, e.o.DV)
	assert.Len(t, client.Actions(), 2, "one read of the identity and one of its pool: %v", client.Actions())

	e = newActEnv(t, m)
	client = dfake.NewClientset(testIdentity(), &v1alpha1.MacOSIdentityPool{ObjectMeta: metav1.ObjectMeta{Name: "standard"}})
	e.r.Client = client
	e.o.DV = dv(cdiv1.Succeeded)
	e.o.VM = vm(t0, kubevirtv1.VirtualMachineStatusRunning)
	requeue = 0
	require.NoError(t, e.r.act(context.Background(), m, e.o, &requeue))
	assert.Empty(t, client.Actions(), "a pass that made nothing read the ledger")
}
