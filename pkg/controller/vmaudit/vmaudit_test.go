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

package vmaudit

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned/fake"
	dlisters "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

const serial = "C02CK029HX87"

func indexer(t *testing.T, objs ...any) cache.Indexer {
	t.Helper()
	i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		require.NoError(t, i.Add(o))
	}
	return i
}

func identity(holder *v1alpha1.MacOSMachine) *v1alpha1.MacOSIdentity {
	id := &v1alpha1.MacOSIdentity{ObjectMeta: metav1.ObjectMeta{Name: "id-x", ResourceVersion: "1"},
		Spec: v1alpha1.MacOSIdentitySpec{PoolName: "fleet", SerialNumber: serial}}
	if holder != nil {
		id.Status.Allocation = &v1alpha1.IdentityAllocation{MachineNamespace: holder.Namespace, MachineName: holder.Name, MachineUID: string(holder.UID)}
	}
	return id
}

func pool(onHold bool) *v1alpha1.MacOSIdentityPool {
	p := &v1alpha1.MacOSIdentityPool{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}}
	if onHold {
		p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.IdentityPoolOnHold, Status: metav1.ConditionTrue, Reason: "Restored"}}
	}
	return p
}

// runningVM is the VirtualMachine the controller made for m, booting with
// the identity's serial number.
func runningVM(t *testing.T, m *v1alpha1.MacOSMachine) *unstructured.Unstructured {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace,
		Labels: map[string]string{managedByLabel: managedByValue, machineUIDLabel: string(m.UID)}}}
	vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{}
	vm.Spec.Template.Spec.Domain.Firmware = &kubevirtv1.Firmware{Serial: serial}
	u, err := external.ToUnstructured(vm)
	require.NoError(t, err)
	return u
}

// guard is a Guard whose informers show cached (identities, machines and
// pools as the cache has them, and the cluster's VMs) over a ledger holding
// ledger; lifted records the pools whose hold it lifted.
func guard(t *testing.T, ledger []runtime.Object, cached []any, vms ...any) (g *Guard, client *fake.Clientset, lifted *[]string) {
	t.Helper()
	var ids, machines, pools []any
	for _, o := range cached {
		switch o.(type) {
		case *v1alpha1.MacOSIdentity:
			ids = append(ids, o)
		case *v1alpha1.MacOSMachine:
			machines = append(machines, o)
		case *v1alpha1.MacOSIdentityPool:
			pools = append(pools, o)
		}
	}
	// The simple clientset: the generated one has no apply schema for
	// DockerIOS's types, and status updates go through it.
	client = fake.NewSimpleClientset(ledger...)
	lifted = new([]string)
	g = &Guard{Client: client,
		Identities: dlisters.NewMacOSIdentityLister(indexer(t, ids...)),
		Machines:   dlisters.NewMacOSMachineLister(indexer(t, machines...)),
		Pools:      dlisters.NewMacOSIdentityPoolLister(indexer(t, pools...)),
		VMs:        cache.NewGenericLister(indexer(t, vms...), external.VirtualMachines.GroupResource()),
		VMIs:       cache.NewGenericLister(indexer(t), external.VirtualMachineInstances.GroupResource()),
		Secrets:    corelisters.NewSecretLister(indexer(t)),
		Recorder:   record.NewFakeRecorder(100),
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		liftHold: func(_ context.Context, pool string) error {
			*lifted = append(*lifted, pool)
			return nil
		},
	}
	return g, client, lifted
}

// After a restore of an older snapshot, the informers can still show the
// ledger from before it: machine m1, made after the snapshot, holding
// identity X, whose VM runs. The restored ledger has no m1 and X free. A
// sweep that compared with the cache would find m1's VM recorded, lift the
// hold, and X would be given to the next machine while m1's VM runs with
// it. While a pool is on hold the sweep compares with the ledger itself.
func TestSweepLiftsAHoldOnlyAfterComparingWithTheRestoredLedger(t *testing.T) {
	m1 := &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ci", UID: "uid-m1"}}
	g, client, lifted := guard(t,
		[]runtime.Object{identity(nil), pool(true)},
		[]any{identity(m1), m1, pool(true)},
		runningVM(t, m1))

	require.NoError(t, g.Sweep(context.Background()))

	id, err := client.DockeriosV1alpha1().MacOSIdentities().Get(context.Background(), "id-x", metav1.GetOptions{})
	require.NoError(t, err)
	c := meta.FindStatusCondition(id.Status.Conditions, v1alpha1.IdentityHeldOutsideLedger)
	require.NotNil(t, c, "the identity m1's VM runs with was not withheld before the hold was lifted")
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Contains(t, c.Message, "VirtualMachine ci/m1")
	assert.Contains(t, c.Message, "the ledger records it as free")
	assert.Equal(t, []string{"fleet"}, *lifted)
}

// With no pool on hold, the sweep is the informers' alone: it reads
// nothing from the apiserver, and an identity whose VM the ledger records
// is left alone.
func TestSweepWithoutAHoldReadsOnlyTheCache(t *testing.T) {
	m1 := &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ci", UID: "uid-m1"}}
	g, client, lifted := guard(t,
		[]runtime.Object{identity(m1), pool(false)},
		[]any{identity(m1), m1, pool(false)},
		runningVM(t, m1))

	require.NoError(t, g.Sweep(context.Background()))

	assert.Empty(t, client.Actions(), "the apiserver was asked")
	assert.Empty(t, *lifted)
}
