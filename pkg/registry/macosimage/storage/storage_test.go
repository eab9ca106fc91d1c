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
	"github.com/dockerios/dockerios/pkg/registry/macosimage"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
)

func newStorage(t *testing.T) ImageStorage {
	t.Helper()
	opts, _ := registrytest.NewRESTOptions(t, "macosimages")
	s, err := NewStorage(opts)
	require.NoError(t, err)
	t.Cleanup(s.Image.DestroyFunc)
	return s
}

func TestStorage_Create(t *testing.T) {
	s := newStorage(t)
	noSource := registrytest.Image("x")
	noSource.Spec.Source = dockerio.ImageSource{}
	twoSources := registrytest.Image("x")
	twoSources.Spec.Source.PVC = &dockerio.NamespacedObjectReference{Namespace: "golden", Name: "sonoma"}
	noRelease := registrytest.Image("x")
	noRelease.Spec.Release = ""
	badChecksum := registrytest.Image("x")
	badChecksum.Spec.Checksum = "md5:abc"
	genericregistrytest.New(t, s.Image.Store).ClusterScope().TestCreate(registrytest.Image("sonoma"), noSource, twoSources, noRelease, badChecksum)
}

func TestStorage_CreateReportsFieldPath(t *testing.T) {
	cases := map[string]struct {
		mutate    func(*dockerio.MacOSImage)
		wantField string
	}{
		"valid":           {mutate: func(*dockerio.MacOSImage) {}},
		"no source":       {mutate: func(img *dockerio.MacOSImage) { img.Spec.Source = dockerio.ImageSource{} }, wantField: "spec.source"},
		"bad board id":    {mutate: func(img *dockerio.MacOSImage) { img.Spec.BoardID = "Mac-123" }, wantField: "spec.boardID"},
		"bad pvc name":    {mutate: func(img *dockerio.MacOSImage) { img.Spec.Source.DataSource.Name = "Sonoma" }, wantField: "spec.source.dataSource.name"},
		"release too odd": {mutate: func(img *dockerio.MacOSImage) { img.Spec.Release = "14.6/beta" }, wantField: "spec.release"},
	}
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Image.Store)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			img := registrytest.Image(strings.ReplaceAll(name, " ", "-"))
			tc.mutate(img)
			_, err := s.Image.Create(ctx, img, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
			if tc.wantField == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), tc.wantField)
		})
	}
}

func TestStorage_UpdateAllowsRepointingSource(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Image.Store).ClusterScope().TestUpdate(registrytest.Image("sonoma"),
		func(obj runtime.Object) runtime.Object {
			img := obj.(*dockerio.MacOSImage)
			img.Spec.Source = dockerio.ImageSource{PVC: &dockerio.NamespacedObjectReference{Namespace: "golden", Name: "sonoma-14-7"}}
			img.Spec.Release = "14.7"
			return img
		},
		func(obj runtime.Object) runtime.Object {
			img := obj.(*dockerio.MacOSImage)
			img.Spec.Release = ""
			return img
		},
		func(obj runtime.Object) runtime.Object {
			img := obj.(*dockerio.MacOSImage)
			img.Spec.Source.PVC = &dockerio.NamespacedObjectReference{Namespace: "golden", Name: "both"}
			return img
		},
	)
}

func TestUpdate_SpecChangeBumpsGenerationAndKeepsStatus(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Image.Store)
	created, err := s.Image.Create(ctx, registrytest.Image("sonoma"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), created.(*dockerio.MacOSImage).Generation)

	ready := created.(*dockerio.MacOSImage).DeepCopy()
	ready.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "SourceReady", LastTransitionTime: metav1.Now()}}
	_, _, err = s.Status.Update(ctx, ready.Name, rest.DefaultUpdatedObjectInfo(ready), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)

	cases := []struct {
		name           string
		mutate         func(*dockerio.MacOSImage)
		wantGeneration int64
	}{
		{name: "label change keeps generation", mutate: func(img *dockerio.MacOSImage) { img.Labels["os"] = "darwin" }, wantGeneration: 1},
		{name: "release change bumps generation", mutate: func(img *dockerio.MacOSImage) { img.Spec.Release = "14.7" }, wantGeneration: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cur, err := s.Image.Get(ctx, "sonoma", &metav1.GetOptions{})
			require.NoError(t, err)
			update := cur.(*dockerio.MacOSImage).DeepCopy()
			tc.mutate(update)
			update.Status = dockerio.MacOSImageStatus{} // a manifest carries no status
			got, _, err := s.Image.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.NoError(t, err)
			img := got.(*dockerio.MacOSImage)
			assert.Equal(t, tc.wantGeneration, img.Generation)
			require.Len(t, img.Status.Conditions, 1, "the main resource must keep the stored status")
			assert.Equal(t, "SourceReady", img.Status.Conditions[0].Reason)
		})
	}
}

func TestStorage_Delete(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Image.Store).ClusterScope().ReturnDeletedObject().TestDelete(registrytest.Image("sonoma"))
}

func TestStorage_Get(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Image.Store).ClusterScope().TestGet(registrytest.Image("sonoma"))
}

func TestStorage_List(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Image.Store).ClusterScope().TestList(registrytest.Image("sonoma"))
}

func TestStorage_WatchSelectsByLabelAndField(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Image.Store).ClusterScope().TestWatch(registrytest.Image("sonoma"),
		[]labels.Set{{"os": "macos"}},
		[]labels.Set{{"os": "linux"}},
		[]fields.Set{{"metadata.name": "sonoma"}, {"spec.release": "14.6"}},
		[]fields.Set{{"metadata.name": "ventura"}, {"spec.release": "13.6"}},
	)
}

func TestSelectableFields_MatchV1alpha1(t *testing.T) {
	set := macosimage.SelectableFields(registrytest.Image("sonoma"))
	var keys []string
	for k := range set {
		if !strings.HasPrefix(k, "metadata.") {
			keys = append(keys, k)
		}
	}
	assert.ElementsMatch(t, v1alpha1.SelectableFields["MacOSImage"], keys)
	assert.Equal(t, "14.6", set["spec.release"])
	assert.Equal(t, "sonoma", set["metadata.name"])
}

func TestMainResource_IgnoresStatus(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Image.Store)
	img := registrytest.Image("sonoma")
	img.Status.ObservedGeneration = 9
	img.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Forged", LastTransitionTime: metav1.Now()}}
	created, err := s.Image.Create(ctx, img, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Empty(t, created.(*dockerio.MacOSImage).Status.Conditions, "create must not accept a status")
	assert.Zero(t, created.(*dockerio.MacOSImage).Status.ObservedGeneration)
}

func TestStatus_WritesConditionsButNotSpec(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Image.Store)
	created, err := s.Image.Create(ctx, registrytest.Image("sonoma"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)

	update := created.(*dockerio.MacOSImage).DeepCopy()
	update.Spec.Release = "sneaky"
	update.Spec.Source.DataSource.Name = "elsewhere"
	update.Labels = map[string]string{"os": "sneaky"}
	update.Status.ObservedGeneration = 1
	update.Status.Conditions = []metav1.Condition{{
		Type: "Ready", Status: metav1.ConditionFalse, Reason: "SourceNotFound",
		Message: "DataSource golden/sonoma-14-6 does not exist", LastTransitionTime: metav1.Now(),
	}}
	got, _, err := s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	img := got.(*dockerio.MacOSImage)
	assert.Equal(t, "14.6", img.Spec.Release, "status writes must not change spec")
	assert.Equal(t, "sonoma-14-6", img.Spec.Source.DataSource.Name)
	assert.Equal(t, map[string]string{"os": "macos"}, img.Labels, "status writes must not change labels")
	assert.Equal(t, int64(1), img.Status.ObservedGeneration)
	require.Len(t, img.Status.Conditions, 1)
	assert.Equal(t, "SourceNotFound", img.Status.Conditions[0].Reason)

	stored, err := s.Image.Get(ctx, "sonoma", &metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "SourceNotFound", stored.(*dockerio.MacOSImage).Status.Conditions[0].Reason, "the status must be stored")
}

func TestStatus_RejectsBadStatusWithFieldPath(t *testing.T) {
	cases := map[string]struct {
		mutate    func(*dockerio.MacOSImage)
		wantField string
	}{
		"negative observedGeneration": {mutate: func(img *dockerio.MacOSImage) { img.Status.ObservedGeneration = -1 }, wantField: "status.observedGeneration"},
		"condition without reason": {
			mutate: func(img *dockerio.MacOSImage) {
				img.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, LastTransitionTime: metav1.Now()}}
			},
			wantField: "status.conditions[0].reason",
		},
	}
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Image.Store)
	_, err := s.Image.Create(ctx, registrytest.Image("sonoma"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cur, err := s.Status.Get(ctx, "sonoma", &metav1.GetOptions{})
			require.NoError(t, err)
			update := cur.(*dockerio.MacOSImage).DeepCopy()
			tc.mutate(update)
			_, _, err = s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), tc.wantField)
		})
	}
}

func TestStatus_NeverCreates(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Image.Store)
	img := registrytest.Image("ghost")
	_, created, err := s.Status.Update(ctx, img.Name, rest.DefaultUpdatedObjectInfo(img), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, true, &metav1.UpdateOptions{})
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
	assert.False(t, created)
}

func TestREST_ShortNamesAndCategories(t *testing.T) {
	s := newStorage(t)
	assert.Equal(t, []string{"mimg"}, s.Image.ShortNames())
	assert.Equal(t, []string{"dockerios"}, s.Image.Categories())
}

func TestTable_ShowsReleaseSourceAndReady(t *testing.T) {
	pvc := registrytest.Image("ventura")
	pvc.Spec.Source = dockerio.ImageSource{PVC: &dockerio.NamespacedObjectReference{Namespace: "images", Name: "ventura-13"}}
	pvc.Spec.BoardID = ""
	pvc.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	cases := map[string]struct {
		image *dockerio.MacOSImage
		want  []interface{}
	}{
		"DataSource source, no Ready condition yet": {
			image: registrytest.Image("sonoma"),
			want:  []interface{}{"sonoma", "14.6", "DataSource/golden/sonoma-14-6", "Unknown", "Mac-7BA5B2D9E42DDD94"},
		},
		"PVC source, Ready": {
			image: pvc,
			want:  []interface{}{"ventura", "14.6", "PVC/images/ventura-13", "True", "<none>"},
		},
	}
	s := newStorage(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			table, err := s.Image.ConvertToTable(context.Background(), tc.image, nil)
			require.NoError(t, err)
			require.Len(t, table.Rows, 1)
			var names []string
			for _, c := range table.ColumnDefinitions {
				names = append(names, c.Name)
			}
			assert.Equal(t, []string{"Name", "Release", "Source", "Ready", "Age", "Board ID"}, names)
			cells := table.Rows[0].Cells
			require.Len(t, cells, 6)
			// Every column but Age, which depends on the clock.
			assert.Equal(t, tc.want, append(cells[:4:4], cells[5]))
		})
	}
}
