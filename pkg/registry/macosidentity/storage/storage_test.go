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

package storage

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/registry/macosidentity"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
)

// newStorage returns identity storage over a fresh etcd holding the
// identity pools the tests use.
func newStorage(t *testing.T) IdentityStorage {
	t.Helper()
	getter := registrytest.NewRESTOptionsGetter(t)
	macpro := registrytest.IdentityPool("macpro")
	macpro.Spec.Model = "iMacPro1,1"
	registrytest.Seed(t, getter, registrytest.IdentityPool("imacpro"), macpro)
	ledger, _ := registrytest.NewLedger(t, getter)
	s, err := NewStorage(getter, ledger)
	require.NoError(t, err)
	t.Cleanup(s.Identity.DestroyFunc)
	return s
}

// allocation is what the allocator writes when mac-1 takes an identity.
func allocation() *dockerio.IdentityAllocation {
	return &dockerio.IdentityAllocation{MachineNamespace: metav1.NamespaceDefault, MachineName: "mac-1", MachineUID: "uid-mac-1"}
}

// seedAllocated writes an allocated identity straight to etcd, as the
// transactional allocator does, bypassing the strategies that keep the
// allocation out of users' hands.
func seedAllocated(t *testing.T, s IdentityStorage, id *dockerio.MacOSIdentity) *dockerio.MacOSIdentity {
	t.Helper()
	ctx := genericregistrytest.NewClusterScopeContext(s.Identity.Store.Store)
	id.Status.Allocation = allocation()
	key, err := s.Identity.KeyFunc(ctx, id.Name)
	require.NoError(t, err)
	out := &dockerio.MacOSIdentity{}
	require.NoError(t, s.Identity.Storage.Create(ctx, key, id, out, 0, false))
	return out
}

// otherIdentity returns a valid identity in pool pool whose values differ
// from the fixture's and from every other n's, so that tests keep passing
// once the storage enforces uniqueness.
func otherIdentity(name, pool string, n int) *dockerio.MacOSIdentity {
	id := registrytest.Identity(name)
	id.Spec.PoolName = pool
	id.Spec.SerialNumber = fmt.Sprintf("C02TM2ZBHX%02d", n)
	// n and 99-n weigh the same in the MLB checksum, so it holds for every n.
	id.Spec.BoardSerialNumber = fmt.Sprintf("C02717306J9JK%02d%02d", n, 99-n)
	id.Spec.SystemUUID = fmt.Sprintf("%08X-F2A2-4461-BBE5-BAD019F8025A", n)
	id.Spec.MACAddress, id.Spec.ROM = fmt.Sprintf("00:0A:27:00:00:%02X", n), fmt.Sprintf("000A270000%02X", n)
	return id
}

func TestStorage_Create(t *testing.T) {
	s := newStorage(t)
	romMismatch := registrytest.Identity("x")
	romMismatch.Spec.ROM = "000A27000002"
	shortSerial := registrytest.Identity("x")
	shortSerial.Spec.SerialNumber = "C02TM2ZBHX8"
	multicast := registrytest.Identity("x")
	multicast.Spec.MACAddress, multicast.Spec.ROM = "01:0A:27:00:00:01", "010A27000001"
	noPool := registrytest.Identity("x")
	noPool.Spec.PoolName = ""
	genericregistrytest.New(t, s.Identity.Store.Store).ClusterScope().TestCreate(registrytest.Identity("id-1"), romMismatch, shortSerial, multicast, noPool)
}

func TestCreate_ReportsFieldPath(t *testing.T) {
	cases := map[string]struct {
		mutate    func(*dockerio.MacOSIdentity)
		wantField string
	}{
		"rom disagrees with mac": {mutate: func(id *dockerio.MacOSIdentity) { id.Spec.ROM = "000A27000002" }, wantField: "spec.rom"},
		"serial too short":       {mutate: func(id *dockerio.MacOSIdentity) { id.Spec.SerialNumber = "C02" }, wantField: "spec.serialNumber"},
		"lower-case serial":      {mutate: func(id *dockerio.MacOSIdentity) { id.Spec.SerialNumber = "c02tm2zbhx87" }, wantField: "spec.serialNumber"},
		"board serial too long":  {mutate: func(id *dockerio.MacOSIdentity) { id.Spec.BoardSerialNumber += "X" }, wantField: "spec.boardSerialNumber"},
		"model malformed":        {mutate: func(id *dockerio.MacOSIdentity) { id.Spec.Model = "iMacPro" }, wantField: "spec.model"},
	}
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Identity.Store.Store)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			id := registrytest.Identity(strings.ReplaceAll(name, " ", "-"))
			tc.mutate(id)
			_, err := s.Identity.Create(ctx, id, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), tc.wantField)
		})
	}
}

func TestCreate_CanonicalizesValuesToUpperCase(t *testing.T) {
	cases := map[string]struct {
		mutate   func(*dockerio.MacOSIdentitySpec)
		wantMAC  string
		wantUUID string
		wantROM  string
	}{
		"lower-case MAC, UUID and ROM": {
			mutate: func(s *dockerio.MacOSIdentitySpec) {
				s.MACAddress, s.SystemUUID, s.ROM = "a4:83:e7:0a:bc:de", "007076a6-f2a2-4461-bbe5-bad019f8025a", "a483e70abcde"
			},
			wantMAC: "A4:83:E7:0A:BC:DE", wantUUID: "007076A6-F2A2-4461-BBE5-BAD019F8025A", wantROM: "A483E70ABCDE",
		},
		"dash-separated MAC": {
			mutate:  func(s *dockerio.MacOSIdentitySpec) { s.MACAddress = "00-0a-27-00-00-01" },
			wantMAC: "00:0A:27:00:00:01", wantUUID: "007076A6-F2A2-4461-BBE5-BAD019F8025A", wantROM: "000A27000001",
		},
		"ROM written as a MAC with colons": {
			mutate:  func(s *dockerio.MacOSIdentitySpec) { s.ROM = "00:0a:27:00:00:01" },
			wantMAC: "00:0A:27:00:00:01", wantUUID: "007076A6-F2A2-4461-BBE5-BAD019F8025A", wantROM: "000A27000001",
		},
		"values with surrounding space": {
			mutate: func(s *dockerio.MacOSIdentitySpec) {
				s.MACAddress, s.SystemUUID, s.ROM = " 00:0a:27:00:00:01 ", " 007076a6-f2a2-4461-bbe5-bad019f8025a\n", "000a27000001 "
			},
			wantMAC: "00:0A:27:00:00:01", wantUUID: "007076A6-F2A2-4461-BBE5-BAD019F8025A", wantROM: "000A27000001",
		},
	}
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Identity.Store.Store)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			id := registrytest.Identity("id-1")
			tc.mutate(&id.Spec)
			created, err := s.Identity.Create(ctx, id, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
			require.NoError(t, err)
			// The cases share values; remove each before the next.
			t.Cleanup(func() {
				_, _, err := s.Identity.Delete(ctx, id.Name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
				require.NoError(t, err)
			})
			for _, obj := range []runtime.Object{created, mustGet(t, s, id.Name)} {
				got := obj.(*dockerio.MacOSIdentity).Spec
				assert.Equal(t, tc.wantMAC, got.MACAddress)
				assert.Equal(t, tc.wantUUID, got.SystemUUID)
				assert.Equal(t, tc.wantROM, got.ROM)
			}
		})
	}
}

func mustGet(t *testing.T, s IdentityStorage, name string) runtime.Object {
	t.Helper()
	obj, err := s.Identity.Get(genericregistrytest.NewClusterScopeContext(s.Identity.Store.Store), name, &metav1.GetOptions{})
	require.NoError(t, err)
	return obj
}

func TestUpdate_ReapplyingLowerCaseSpellingIsNotAChange(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Identity.Store.Store)
	created, err := s.Identity.Create(ctx, registrytest.Identity("id-1"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)

	reapplied := created.(*dockerio.MacOSIdentity).DeepCopy()
	reapplied.Spec.MACAddress = "00-0a-27-00-00-01"
	reapplied.Spec.SystemUUID = "007076a6-f2a2-4461-bbe5-bad019f8025a"
	reapplied.Spec.ROM = "000a27000001"
	reapplied.Labels["fleet"] = "prod"
	got, _, err := s.Identity.Update(ctx, reapplied.Name, rest.DefaultUpdatedObjectInfo(reapplied), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err, "the same values in another spelling are not a spec change")
	id := got.(*dockerio.MacOSIdentity)
	assert.Equal(t, registrytest.Identity("id-1").Spec, id.Spec, "values stay canonical")
	assert.Equal(t, "prod", id.Labels["fleet"])
	assert.Equal(t, int64(1), id.Generation)
}

// The generic tester's update test is not used: it creates one identity
// under several names, which uniqueness (rightly) refuses.
func TestUpdate_LabelsMayChange(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Identity.Store.Store)
	_, err := s.Identity.Create(ctx, registrytest.Identity("id-1"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	update := mustGet(t, s, "id-1").(*dockerio.MacOSIdentity).DeepCopy()
	update.Labels["fleet"] = "prod"
	got, _, err := s.Identity.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "prod", got.(*dockerio.MacOSIdentity).Labels["fleet"])
}

func TestUpdate_SpecIsImmutable(t *testing.T) {
	cases := map[string]func(*dockerio.MacOSIdentitySpec){
		"serial":      func(s *dockerio.MacOSIdentitySpec) { s.SerialNumber = "C02TM2ZBHX88" },
		"pool":        func(s *dockerio.MacOSIdentitySpec) { s.PoolName = "macpro" },
		"system uuid": func(s *dockerio.MacOSIdentitySpec) { s.SystemUUID = "107076A6-F2A2-4461-BBE5-BAD019F8025A" },
		"mac and rom": func(s *dockerio.MacOSIdentitySpec) { s.MACAddress, s.ROM = "00:0A:27:00:00:02", "000A27000002" },
	}
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Identity.Store.Store)
	_, err := s.Identity.Create(ctx, registrytest.Identity("id-1"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			update := mustGet(t, s, "id-1").(*dockerio.MacOSIdentity).DeepCopy()
			mutate(&update.Spec)
			_, _, err := s.Identity.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), "spec: Invalid value")
			assert.Contains(t, err.Error(), "immutable")
			assert.Equal(t, registrytest.Identity("id-1").Spec, mustGet(t, s, "id-1").(*dockerio.MacOSIdentity).Spec)
		})
	}
}

func TestStorage_Delete(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Identity.Store.Store).ClusterScope().ReturnDeletedObject().TestDelete(registrytest.Identity("id-1"))
}

// Get and list are tested by hand: the generic tester stores one object
// under several names, which uniqueness refuses.
func TestGetAndList_ReturnWhatWasCreated(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Identity.Store.Store)
	for _, id := range []*dockerio.MacOSIdentity{registrytest.Identity("id-1"), otherIdentity("id-2", "imacpro", 2)} {
		_, err := s.Identity.Create(ctx, id, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		require.NoError(t, err)
	}
	assert.Equal(t, registrytest.Identity("id-1").Spec, mustGet(t, s, "id-1").(*dockerio.MacOSIdentity).Spec)
	assert.Equal(t, otherIdentity("id-2", "imacpro", 2).Spec, mustGet(t, s, "id-2").(*dockerio.MacOSIdentity).Spec)

	list, err := s.Identity.List(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, id := range list.(*dockerio.MacOSIdentityList).Items {
		names = append(names, id.Name)
	}
	assert.ElementsMatch(t, []string{"id-1", "id-2"}, names)

	_, err = s.Identity.Get(ctx, "id-3", &metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
}

func TestStorage_WatchSelectsByLabelAndField(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Identity.Store.Store).ClusterScope().TestWatch(registrytest.Identity("id-1"),
		[]labels.Set{{"fleet": "ci"}},
		[]labels.Set{{"fleet": "prod"}},
		[]fields.Set{
			{"metadata.name": "id-1"}, {"spec.poolName": "imacpro"}, {"status.allocated": "false"},
			{"spec.serialNumber": "C02TM2ZBHX87"}, {"spec.macAddress": "00:0A:27:00:00:01"}, {"spec.model": "iMacPro1,1"},
		},
		[]fields.Set{{"metadata.name": "id-2"}, {"spec.poolName": "macpro"}, {"status.allocated": "true"}},
	)
}

func TestList_FieldSelectors(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Identity.Store.Store)
	_, err := s.Identity.Create(ctx, registrytest.Identity("free-imacpro"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = s.Identity.Create(ctx, otherIdentity("free-macpro", "macpro", 2), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	seedAllocated(t, s, otherIdentity("held-imacpro", "imacpro", 3))

	cases := map[string]struct {
		selector fields.Selector
		want     []string
	}{
		"spec.poolName=imacpro": {selector: fields.OneTermEqualSelector("spec.poolName", "imacpro"), want: []string{"free-imacpro", "held-imacpro"}},
		"spec.poolName=macpro":  {selector: fields.OneTermEqualSelector("spec.poolName", "macpro"), want: []string{"free-macpro"}},
		"status.allocated=false lists the free identities": {
			selector: fields.OneTermEqualSelector("status.allocated", "false"), want: []string{"free-imacpro", "free-macpro"},
		},
		"status.allocated=true lists the held identities": {
			selector: fields.OneTermEqualSelector("status.allocated", "true"), want: []string{"held-imacpro"},
		},
		"free identities of one pool": {
			selector: fields.AndSelectors(fields.OneTermEqualSelector("spec.poolName", "imacpro"), fields.OneTermEqualSelector("status.allocated", "false")),
			want:     []string{"free-imacpro"},
		},
		"status.allocation.machineName finds the holder": {
			selector: fields.OneTermEqualSelector("status.allocation.machineName", "mac-1"), want: []string{"held-imacpro"},
		},
		"status.allocation.machineUID finds the holder": {
			selector: fields.OneTermEqualSelector("status.allocation.machineUID", "uid-mac-1"), want: []string{"held-imacpro"},
		},
		"spec.serialNumber finds one identity": {
			selector: fields.OneTermEqualSelector("spec.serialNumber", "C02TM2ZBHX02"), want: []string{"free-macpro"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj, err := s.Identity.List(ctx, &metainternalversion.ListOptions{FieldSelector: tc.selector})
			require.NoError(t, err)
			var names []string
			for _, id := range obj.(*dockerio.MacOSIdentityList).Items {
				names = append(names, id.Name)
			}
			assert.ElementsMatch(t, tc.want, names)
		})
	}
}

func TestSelectableFields_MatchV1alpha1(t *testing.T) {
	free := macosidentity.SelectableFields(registrytest.Identity("id-1"))
	var keys []string
	for k := range free {
		if !strings.HasPrefix(k, "metadata.") {
			keys = append(keys, k)
		}
	}
	assert.ElementsMatch(t, v1alpha1.SelectableFields["MacOSIdentity"], keys)
	assert.Equal(t, "false", free["status.allocated"])
	assert.Equal(t, "", free["status.allocation.machineName"])

	held := registrytest.Identity("id-1")
	held.Status.Allocation = allocation()
	set := macosidentity.SelectableFields(held)
	assert.Equal(t, "true", set["status.allocated"])
	assert.Equal(t, "default", set["status.allocation.machineNamespace"])
	assert.Equal(t, "mac-1", set["status.allocation.machineName"])
	assert.Equal(t, "uid-mac-1", set["status.allocation.machineUID"])
}

func TestCreate_IgnoresAllocationInRequest(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Identity.Store.Store)
	id := registrytest.Identity("id-1")
	id.Status.Allocation = allocation()
	created, err := s.Identity.Create(ctx, id, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Nil(t, created.(*dockerio.MacOSIdentity).Status.Allocation, "only the allocator allocates")
	assert.Nil(t, mustGet(t, s, "id-1").(*dockerio.MacOSIdentity).Status.Allocation)
}

func TestMainResource_CannotSetOrClearAllocation(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Identity.Store.Store)
	_, err := s.Identity.Create(ctx, registrytest.Identity("free"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	seedAllocated(t, s, otherIdentity("held", "imacpro", 2))

	cases := map[string]struct {
		name   string
		mutate func(*dockerio.MacOSIdentity)
		want   *dockerio.IdentityAllocation
	}{
		"cannot set on a free identity":        {name: "free", mutate: func(id *dockerio.MacOSIdentity) { id.Status.Allocation = allocation() }, want: nil},
		"cannot clear on a held identity":      {name: "held", mutate: func(id *dockerio.MacOSIdentity) { id.Status.Allocation = nil }, want: allocation()},
		"cannot move a held identity to other": {name: "held", mutate: func(id *dockerio.MacOSIdentity) { id.Status.Allocation.MachineName = "mac-2" }, want: allocation()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			update := mustGet(t, s, tc.name).(*dockerio.MacOSIdentity).DeepCopy()
			tc.mutate(update)
			got, _, err := s.Identity.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.(*dockerio.MacOSIdentity).Status.Allocation)
			assert.Equal(t, tc.want, mustGet(t, s, tc.name).(*dockerio.MacOSIdentity).Status.Allocation)
		})
	}
}

func TestStatus_CannotSetAllocation(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Identity.Store.Store)
	_, err := s.Identity.Create(ctx, registrytest.Identity("free"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	seedAllocated(t, s, otherIdentity("held", "imacpro", 2))

	cases := map[string]struct {
		name   string
		mutate func(*dockerio.MacOSIdentity)
		want   *dockerio.IdentityAllocation
	}{
		"status write cannot allocate a free identity": {
			name: "free", mutate: func(id *dockerio.MacOSIdentity) { id.Status.Allocation = allocation() }, want: nil,
		},
		"status write with an incomplete allocation is reset, not validated": {
			name: "free", mutate: func(id *dockerio.MacOSIdentity) { id.Status.Allocation = &dockerio.IdentityAllocation{} }, want: nil,
		},
		"status write cannot release a held identity": {
			name: "held", mutate: func(id *dockerio.MacOSIdentity) { id.Status.Allocation = nil }, want: allocation(),
		},
		"status write cannot hand a held identity to another machine": {
			name: "held", mutate: func(id *dockerio.MacOSIdentity) { id.Status.Allocation.MachineUID = "uid-mac-2" }, want: allocation(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			update := mustGet(t, s, tc.name).(*dockerio.MacOSIdentity).DeepCopy()
			tc.mutate(update)
			got, _, err := s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.(*dockerio.MacOSIdentity).Status.Allocation)
			assert.Equal(t, tc.want, mustGet(t, s, tc.name).(*dockerio.MacOSIdentity).Status.Allocation)
		})
	}
}

func TestStatus_CannotChangeSpecOrLabels(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Identity.Store.Store)
	created, err := s.Identity.Create(ctx, registrytest.Identity("id-1"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	update := created.(*dockerio.MacOSIdentity).DeepCopy()
	update.Spec.SerialNumber = "C02TM2ZBHX88"
	update.Labels = map[string]string{"fleet": "sneaky"}
	got, _, err := s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "C02TM2ZBHX87", got.(*dockerio.MacOSIdentity).Spec.SerialNumber)
	assert.Equal(t, map[string]string{"fleet": "ci"}, got.(*dockerio.MacOSIdentity).Labels)
}

func TestREST_ShortNamesAndNoCategory(t *testing.T) {
	s := newStorage(t)
	assert.Equal(t, []string{"mid"}, s.Identity.ShortNames())
	_, ok := interface{}(s.Identity).(rest.CategoriesProvider)
	assert.False(t, ok, "identities are sensitive and must be in no category, so `kubectl get dockerios` never lists them")
}

func TestTable_ShowsPoolSerialAndHolder(t *testing.T) {
	held := registrytest.Identity("id-2")
	held.Status.Allocation = allocation()
	cases := map[string]struct {
		identity *dockerio.MacOSIdentity
		want     []interface{}
	}{
		"free identity has no machine": {
			identity: registrytest.Identity("id-1"),
			want:     []interface{}{"id-1", "imacpro", "iMacPro1,1", "C02TM2ZBHX87", "<none>", "00:0A:27:00:00:01", "007076A6-F2A2-4461-BBE5-BAD019F8025A"},
		},
		"held identity names namespace/machine": {
			identity: held,
			want:     []interface{}{"id-2", "imacpro", "iMacPro1,1", "C02TM2ZBHX87", "default/mac-1", "00:0A:27:00:00:01", "007076A6-F2A2-4461-BBE5-BAD019F8025A"},
		},
	}
	s := newStorage(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			table, err := s.Identity.ConvertToTable(context.Background(), tc.identity, nil)
			require.NoError(t, err)
			var names []string
			for _, c := range table.ColumnDefinitions {
				names = append(names, c.Name)
			}
			assert.Equal(t, []string{"Name", "Pool", "Model", "Serial", "Machine", "Age", "MAC", "System UUID"}, names)
			require.Len(t, table.Rows, 1)
			cells := table.Rows[0].Cells
			require.Len(t, cells, 8)
			// Every column but Age, which depends on the clock.
			assert.Equal(t, tc.want, append(cells[:5:5], cells[6:]...))
		})
	}
}
