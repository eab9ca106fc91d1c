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
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/registry/macosidentitypool"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
)

func newStorage(t *testing.T) IdentityPoolStorage {
	t.Helper()
	opts, _ := registrytest.NewRESTOptions(t, "macosidentitypools")
	s, err := NewStorage(opts, nil)
	require.NoError(t, err)
	t.Cleanup(s.Pool.DestroyFunc)
	return s
}

func TestStorage_Create(t *testing.T) {
	s := newStorage(t)
	noModel := registrytest.IdentityPool("x")
	noModel.Spec.Model = ""
	badModel := registrytest.IdentityPool("x")
	badModel.Spec.Model = "iMacPro"
	dottedName := registrytest.IdentityPool("imac.pro")
	genericregistrytest.New(t, s.Pool.Store).ClusterScope().TestCreate(registrytest.IdentityPool("imacpro"), noModel, badModel, dottedName)
}

func TestStorage_UpdateKeepsModelFixed(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Pool.Store).ClusterScope().TestUpdate(registrytest.IdentityPool("imacpro"),
		func(obj runtime.Object) runtime.Object {
			p := obj.(*dockerio.MacOSIdentityPool)
			p.Labels["fleet"] = "prod"
			return p
		},
		func(obj runtime.Object) runtime.Object {
			p := obj.(*dockerio.MacOSIdentityPool)
			p.Spec.Model = "MacPro7,1"
			return p
		},
	)
}

func TestUpdate_ModelIsImmutableAtSpecModel(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Pool.Store)
	created, err := s.Pool.Create(ctx, registrytest.IdentityPool("imacpro"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	update := created.(*dockerio.MacOSIdentityPool).DeepCopy()
	update.Spec.Model = "MacPro7,1"
	_, _, err = s.Pool.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
	assert.Contains(t, err.Error(), "spec.model")
	assert.Contains(t, err.Error(), "immutable")

	stored, err := s.Pool.Get(ctx, "imacpro", &metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "iMacPro1,1", stored.(*dockerio.MacOSIdentityPool).Spec.Model)
}

func TestStorage_Delete(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Pool.Store).ClusterScope().ReturnDeletedObject().TestDelete(registrytest.IdentityPool("imacpro"))
}

func TestStorage_Get(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Pool.Store).ClusterScope().TestGet(registrytest.IdentityPool("imacpro"))
}

func TestStorage_List(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Pool.Store).ClusterScope().TestList(registrytest.IdentityPool("imacpro"))
}

func TestStorage_WatchSelectsByLabelAndField(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Pool.Store).ClusterScope().TestWatch(registrytest.IdentityPool("imacpro"),
		[]labels.Set{{"fleet": "ci"}},
		[]labels.Set{{"fleet": "prod"}},
		[]fields.Set{{"metadata.name": "imacpro"}, {"spec.model": "iMacPro1,1"}},
		[]fields.Set{{"metadata.name": "macpro"}, {"spec.model": "MacPro7,1"}},
	)
}

func TestSelectableFields_MatchV1alpha1(t *testing.T) {
	set := macosidentitypool.SelectableFields(registrytest.IdentityPool("imacpro"))
	var keys []string
	for k := range set {
		if !strings.HasPrefix(k, "metadata.") {
			keys = append(keys, k)
		}
	}
	assert.ElementsMatch(t, v1alpha1.SelectableFields["MacOSIdentityPool"], keys)
	assert.Equal(t, "iMacPro1,1", set["spec.model"])
}

func TestMainResource_IgnoresStatusCounts(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Pool.Store)
	p := registrytest.IdentityPool("imacpro")
	p.Status = dockerio.MacOSIdentityPoolStatus{Total: 100, Free: 100}
	created, err := s.Pool.Create(ctx, p, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, dockerio.MacOSIdentityPoolStatus{}, created.(*dockerio.MacOSIdentityPool).Status, "create must not accept counts")

	update := created.(*dockerio.MacOSIdentityPool).DeepCopy()
	update.Status.Free = 50
	got, _, err := s.Pool.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Zero(t, got.(*dockerio.MacOSIdentityPool).Status.Free, "the main resource must not write counts")
}

func TestStatus_WritesCountsButNotSpec(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Pool.Store)
	created, err := s.Pool.Create(ctx, registrytest.IdentityPool("imacpro"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)

	update := created.(*dockerio.MacOSIdentityPool).DeepCopy()
	update.Spec.Model = "MacPro7,1"
	update.Labels = map[string]string{"fleet": "sneaky"}
	update.Status = dockerio.MacOSIdentityPoolStatus{Total: 10, Free: 6, Allocated: 4, Pending: 2}
	got, _, err := s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	p := got.(*dockerio.MacOSIdentityPool)
	assert.Equal(t, "iMacPro1,1", p.Spec.Model, "status writes must not change spec")
	assert.Equal(t, map[string]string{"fleet": "ci"}, p.Labels, "status writes must not change labels")
	assert.Equal(t, dockerio.MacOSIdentityPoolStatus{Total: 10, Free: 6, Allocated: 4, Pending: 2}, p.Status)

	stored, err := s.Pool.Get(ctx, "imacpro", &metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(6), stored.(*dockerio.MacOSIdentityPool).Status.Free, "the counts must be stored")
}

func TestStatus_RejectsNegativeCountWithFieldPath(t *testing.T) {
	cases := map[string]struct {
		mutate    func(*dockerio.MacOSIdentityPoolStatus)
		wantField string
	}{
		"negative total":     {mutate: func(s *dockerio.MacOSIdentityPoolStatus) { s.Total = -1 }, wantField: "status.total"},
		"negative free":      {mutate: func(s *dockerio.MacOSIdentityPoolStatus) { s.Free = -1 }, wantField: "status.free"},
		"negative allocated": {mutate: func(s *dockerio.MacOSIdentityPoolStatus) { s.Allocated = -1 }, wantField: "status.allocated"},
		"negative pending":   {mutate: func(s *dockerio.MacOSIdentityPoolStatus) { s.Pending = -3 }, wantField: "status.pending"},
	}
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Pool.Store)
	_, err := s.Pool.Create(ctx, registrytest.IdentityPool("imacpro"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cur, err := s.Status.Get(ctx, "imacpro", &metav1.GetOptions{})
			require.NoError(t, err)
			update := cur.(*dockerio.MacOSIdentityPool).DeepCopy()
			tc.mutate(&update.Status)
			_, _, err = s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			var status apierrors.APIStatus
			require.ErrorAs(t, err, &status)
			require.NotNil(t, status.Status().Details)
			require.Len(t, status.Status().Details.Causes, 1, "causes: %v", status.Status().Details.Causes)
			assert.Equal(t, tc.wantField, status.Status().Details.Causes[0].Field)
		})
	}
}

func TestREST_ShortNamesAndCategories(t *testing.T) {
	s := newStorage(t)
	assert.Equal(t, []string{"mipool"}, s.Pool.ShortNames())
	assert.Equal(t, []string{"dockerios"}, s.Pool.Categories())
}

func TestTable_ShowsModelAndCounts(t *testing.T) {
	s := newStorage(t)
	p := registrytest.IdentityPool("imacpro")
	p.Status = dockerio.MacOSIdentityPoolStatus{Total: 10, Free: 6, Allocated: 4, Pending: 2}
	table, err := s.Pool.ConvertToTable(context.Background(), p, nil)
	require.NoError(t, err)
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"Name", "Model", "Total", "Free", "Allocated", "Pending", "Age"}, names)
	require.Len(t, table.Rows, 1)
	require.Len(t, table.Rows[0].Cells, 7)
	assert.Equal(t, []interface{}{"imacpro", "iMacPro1,1", int64(10), int64(6), int64(4), int64(2)}, table.Rows[0].Cells[:6])
}
