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

package registrytest

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/tools/record"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/storage/binding"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// NewLedger returns an identity ledger over the getter's etcd, with an etcd
// client of its own (as another apiserver replica would have), recording
// its Events in the returned recorder.
func NewLedger(t testing.TB, getter *RESTOptionsGetter) (*identityledger.Ledger, *record.FakeRecorder) {
	t.Helper()
	return newLedger(t, getter, nil)
}

// NewLedgerAndBinder returns an identity ledger and a claim binder over the
// getter's etcd, wired together as the apiserver wires them: a deleted
// machine leaves its claim Lost in the same transaction.
func NewLedgerAndBinder(t testing.TB, getter *RESTOptionsGetter) (*identityledger.Ledger, *binding.Binder) {
	t.Helper()
	binder := NewBinder(t, getter)
	ledger, _ := newLedger(t, getter, binder)
	return ledger, binder
}

func newLedger(t testing.TB, getter *RESTOptionsGetter, claims identityledger.Claims) (*identityledger.Ledger, *record.FakeRecorder) {
	t.Helper()
	client, err := txn.NewClient(storagebackend.TransportConfig{ServerList: getter.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	recorder := record.NewFakeRecorder(100000)
	l, err := identityledger.New(client, getter, identityledger.Options{Recorder: recorder, Claims: claims})
	if err != nil {
		t.Fatal(err)
	}
	return l, recorder
}

// AllowAll is the authorizer of registry tests that are not about
// authorization: every custom verb is allowed.
var AllowAll = authorizerfactory.NewAlwaysAllowAuthorizer()

// NewBinder returns a claim binder over the getter's etcd.
func NewBinder(t testing.TB, getter *RESTOptionsGetter) *binding.Binder {
	t.Helper()
	client, err := txn.NewClient(storagebackend.TransportConfig{ServerList: getter.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	b, err := binding.New(client, getter, nil, record.NewFakeRecorder(1000))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Seed writes objects straight to etcd, as their stores would store them,
// for tests that need them to exist without going through their registries:
// classes and identity pools a machine or identity refers to, and machine
// pools a claim refers to.
func Seed(t testing.TB, getter *RESTOptionsGetter, objs ...runtime.Object) {
	t.Helper()
	seed(t, getter, true, objs...)
}

// Overwrite writes objs into etcd as Seed does, replacing what is there: an
// edit made behind the apiserver's back, or by another replica.
func Overwrite(t testing.TB, getter *RESTOptionsGetter, objs ...runtime.Object) {
	t.Helper()
	seed(t, getter, false, objs...)
}

func seed(t testing.TB, getter *RESTOptionsGetter, absent bool, objs ...runtime.Object) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range objs {
		var gr string
		namespaced := false
		switch obj.(type) {
		case *dockerio.MacOSMachinePool:
			gr, namespaced = "macosmachinepools", true
		case *dockerio.MacOSMachineClass:
			gr = "macosmachineclasses"
		case *dockerio.MacOSIdentityPool:
			gr = "macosidentitypools"
		case *dockerio.MacOSImage:
			gr = "macosimages"

		default:
			t.Fatalf("Seed does not write %T: create it through its registry", obj)
		}
		r, err := txn.NewResource(getter, dockerio.Resource(gr), namespaced, func() runtime.Object { return obj.DeepCopyObject() })
		if err != nil {
			t.Fatal(err)
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		if m.GetUID() == "" {
			m.SetUID(types.UID("seeded-" + m.GetName()))
		}
		key := r.Key(m.GetNamespace(), m.GetName())
		var tx txn.Txn
		if absent {
			tx.IfAbsent(key)
		}
		if err := tx.WriteObject(ctx, r, key, obj); err != nil {
			t.Fatal(err)
		}
		if res, err := txn.Commit(ctx, getter.Server.V3Client.Client, &tx); err != nil || !res.Succeeded {
			t.Fatalf("seeding %s %s: %v (written: %v)", gr, m.GetName(), err, err == nil && res.Succeeded)
		}
	}
}
