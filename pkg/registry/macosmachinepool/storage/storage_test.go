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
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/registry/macosmachinepool"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
)

// newStorage returns pool storage over a fresh etcd holding class
// "standard" and its identity pool.
func newStorage(t *testing.T) PoolStorage {
	t.Helper()
	getter := registrytest.NewRESTOptionsGetter(t)
	registrytest.Seed(t, getter, registrytest.MachineClass("standard"), registrytest.IdentityPool("imacpro"))
	ledger, _ := registrytest.NewLedger(t, getter)
	s, err := NewStorage(getter, ledger, registrytest.AllowAll)
	require.NoError(t, err)
	t.Cleanup(s.Pool.DestroyFunc)
	return s
}

// forTester returns p without the namespace, which the generic tester
// chooses itself.
func forTester(p *dockerio.MacOSMachinePool) *dockerio.MacOSMachinePool {
	p.Namespace = ""
	return p
}

// createPool creates the fixture pool warm in namespace default.
func createPool(t *testing.T, s PoolStorage) (context.Context, *dockerio.MacOSMachinePool) {
	t.Helper()
	ctx := genericregistrytest.NewNamespaceScopeContext(s.Pool.Store, metav1.NamespaceDefault)
	created, err := s.Pool.Create(ctx, registrytest.MachinePool("warm"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	return ctx, created.(*dockerio.MacOSMachinePool)
}

func getPool(t *testing.T, s PoolStorage, name string) *dockerio.MacOSMachinePool {
	t.Helper()
	ctx := genericregistrytest.NewNamespaceScopeContext(s.Pool.Store, metav1.NamespaceDefault)
	obj, err := s.Pool.Get(ctx, name, &metav1.GetOptions{})
	require.NoError(t, err)
	return obj.(*dockerio.MacOSMachinePool)
}

func TestStorage_Create(t *testing.T) {
	s := newStorage(t)
	overCap := forTester(registrytest.MachinePool("x"))
	overCap.Spec.Replicas = ptr.To[int32](11)
	reserved := forTester(registrytest.MachinePool("x"))
	reserved.Spec.Template.Metadata.Labels[dockerio.MachinePoolLabel] = "other"
	noClass := forTester(registrytest.MachinePool("x"))
	noClass.Spec.ClassName = ""
	negative := forTester(registrytest.MachinePool("x"))
	negative.Spec.Replicas = ptr.To[int32](-1)
	genericregistrytest.New(t, s.Pool.Store).TestCreate(forTester(registrytest.MachinePool("warm")), overCap, reserved, noClass, negative)
}

func TestCreate_ReportsFieldPath(t *testing.T) {
	cases := map[string]struct {
		mutate    func(*dockerio.MacOSMachinePool)
		wantField string
	}{
		"replicas above maxMachines": {mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.Replicas = ptr.To[int32](11) }, wantField: "spec.replicas"},
		"reserved template label": {
			mutate:    func(p *dockerio.MacOSMachinePool) { p.Spec.Template.Metadata.Labels[dockerio.MachinePoolLabel] = "x" },
			wantField: "spec.template.metadata.labels[dockerios.io/pool]",
		},
		"negative maxMachines": {mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.MaxMachines = ptr.To[int32](-1) }, wantField: "spec.maxMachines"},
		"no replicas":          {mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.Replicas = nil }, wantField: "spec.replicas"},
	}
	s := newStorage(t)
	ctx := genericregistrytest.NewNamespaceScopeContext(s.Pool.Store, metav1.NamespaceDefault)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := registrytest.MachinePool(strings.ReplaceAll(name, " ", "-"))
			tc.mutate(p)
			_, err := s.Pool.Create(ctx, p, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), tc.wantField)
		})
	}
}

func TestStorage_UpdateKeepsClassFixedAndReplicasCapped(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Pool.Store).TestUpdate(forTester(registrytest.MachinePool("warm")),
		func(obj runtime.Object) runtime.Object {
			p := obj.(*dockerio.MacOSMachinePool)
			p.Spec.Replicas = ptr.To[int32](5)
			p.Spec.Template.Metadata.Labels["xcode"] = "16.1"
			return p
		},
		func(obj runtime.Object) runtime.Object {
			p := obj.(*dockerio.MacOSMachinePool)
			p.Spec.ClassName = "gpu"
			return p
		},
		func(obj runtime.Object) runtime.Object {
			p := obj.(*dockerio.MacOSMachinePool)
			p.Spec.Replicas = ptr.To[int32](11)
			return p
		},
	)
}

func TestUpdate_RejectsWithFieldPath(t *testing.T) {
	cases := map[string]struct {
		mutate    func(*dockerio.MacOSMachinePool)
		wantField string
	}{
		"className is immutable":       {mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.ClassName = "gpu" }, wantField: "spec.className"},
		"replicas above maxMachines":   {mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.Replicas = ptr.To[int32](11) }, wantField: "spec.replicas"},
		"maxMachines lowered below it": {mutate: func(p *dockerio.MacOSMachinePool) { p.Spec.MaxMachines = ptr.To[int32](1) }, wantField: "spec.replicas"},
	}
	s := newStorage(t)
	ctx, _ := createPool(t, s)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			update := getPool(t, s, "warm").DeepCopy()
			tc.mutate(update)
			_, _, err := s.Pool.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), tc.wantField)
			stored := getPool(t, s, "warm")
			assert.Equal(t, "standard", stored.Spec.ClassName)
			assert.Equal(t, int32(2), *stored.Spec.Replicas)
		})
	}
}

func TestStorage_Delete(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Pool.Store).ReturnDeletedObject().TestDelete(forTester(registrytest.MachinePool("warm")))
}

func TestStorage_Get(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Pool.Store).TestGet(forTester(registrytest.MachinePool("warm")))
}

func TestStorage_List(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Pool.Store).TestList(forTester(registrytest.MachinePool("warm")))
}

func TestStorage_WatchSelectsByLabelAndField(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Pool.Store).TestWatch(forTester(registrytest.MachinePool("warm")),
		[]labels.Set{{"team": "ios"}},
		[]labels.Set{{"team": "android"}},
		[]fields.Set{{"metadata.name": "warm"}, {"spec.className": "standard"}},
		[]fields.Set{{"metadata.name": "cold"}, {"spec.className": "gpu"}},
	)
}

func TestSelectableFields_MatchV1alpha1(t *testing.T) {
	set := macosmachinepool.SelectableFields(registrytest.MachinePool("warm"))
	var keys []string
	for k := range set {
		if !strings.HasPrefix(k, "metadata.") {
			keys = append(keys, k)
		}
	}
	assert.ElementsMatch(t, v1alpha1.SelectableFields["MacOSMachinePool"], keys)
	assert.Equal(t, "standard", set["spec.className"])
	assert.Equal(t, "default", set["metadata.namespace"])
}

func TestCreate_SetsSelectorFromName(t *testing.T) {
	cases := map[string]struct {
		name, generateName string
	}{
		"named pool":          {name: "warm"},
		"generate-named pool": {generateName: "warm-"},
	}
	s := newStorage(t)
	ctx := genericregistrytest.NewNamespaceScopeContext(s.Pool.Store, metav1.NamespaceDefault)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := registrytest.MachinePool(tc.name)
			p.GenerateName = tc.generateName
			p.Status = dockerio.MacOSMachinePoolStatus{Replicas: 7, Selector: "app=sneaky"}
			created, err := s.Pool.Create(ctx, p, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
			require.NoError(t, err)
			got := created.(*dockerio.MacOSMachinePool)
			require.NotEmpty(t, got.Name)
			assert.Equal(t, "dockerios.io/pool="+got.Name, got.Status.Selector)
			assert.Zero(t, got.Status.Replicas, "create must not accept counts")
			assert.Equal(t, int64(1), got.Generation)
		})
	}
}

func TestStatus_WritesCountsButNotSpecOrSelector(t *testing.T) {
	s := newStorage(t)
	ctx, created := createPool(t, s)

	update := created.DeepCopy()
	update.Spec.Replicas = ptr.To[int32](9)
	update.Spec.ClassName = "sneaky"
	update.Labels = map[string]string{"team": "sneaky"}
	update.Status.Replicas, update.Status.ReadyReplicas, update.Status.BoundMachines = 2, 1, 3
	update.Status.Selector = "app=sneaky"
	got, _, err := s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	p := got.(*dockerio.MacOSMachinePool)
	assert.Equal(t, int32(2), *p.Spec.Replicas, "status writes must not change spec")
	assert.Equal(t, "standard", p.Spec.ClassName)
	assert.Equal(t, map[string]string{"team": "ios"}, p.Labels)
	assert.Equal(t, "dockerios.io/pool=warm", p.Status.Selector, "the selector follows from the name")
	assert.Equal(t, [3]int32{2, 1, 3}, [3]int32{p.Status.Replicas, p.Status.ReadyReplicas, p.Status.BoundMachines})

	stored := getPool(t, s, "warm")
	assert.Equal(t, "dockerios.io/pool=warm", stored.Status.Selector)
	assert.Equal(t, int32(3), stored.Status.BoundMachines)
}

func TestStatus_RejectsBadCountsWithFieldPath(t *testing.T) {
	cases := map[string]struct {
		mutate    func(*dockerio.MacOSMachinePoolStatus)
		wantField string
	}{
		"ready above replicas": {mutate: func(st *dockerio.MacOSMachinePoolStatus) { st.Replicas, st.ReadyReplicas = 1, 2 }, wantField: "status.readyReplicas"},
		"negative bound":       {mutate: func(st *dockerio.MacOSMachinePoolStatus) { st.BoundMachines = -1 }, wantField: "status.boundMachines"},
	}
	s := newStorage(t)
	ctx, _ := createPool(t, s)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			update := getPool(t, s, "warm").DeepCopy()
			tc.mutate(&update.Status)
			_, _, err := s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), tc.wantField)
		})
	}
}

func TestMainResource_IgnoresStatus(t *testing.T) {
	s := newStorage(t)
	ctx, created := createPool(t, s)
	update := created.DeepCopy()
	update.Status.Selector = "app=sneaky"
	update.Status.ReadyReplicas = 5
	got, _, err := s.Pool.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "dockerios.io/pool=warm", got.(*dockerio.MacOSMachinePool).Status.Selector)
	assert.Zero(t, got.(*dockerio.MacOSMachinePool).Status.ReadyReplicas)
}

func TestScale_GetReportsReplicasAndSelector(t *testing.T) {
	s := newStorage(t)
	ctx, created := createPool(t, s)
	counted := created.DeepCopy()
	counted.Status.Replicas = 1
	_, _, err := s.Status.Update(ctx, counted.Name, rest.DefaultUpdatedObjectInfo(counted), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	pool := getPool(t, s, "warm")

	scaleCtx := genericregistrytest.NewNamespaceScopeContext(s.Pool.Store, metav1.NamespaceDefault, "scale")
	obj, err := s.Scale.Get(scaleCtx, "warm", &metav1.GetOptions{})
	require.NoError(t, err)
	scale, ok := obj.(*autoscalingv1.Scale)
	require.True(t, ok, "want an autoscaling/v1 Scale, got %T", obj)
	assert.Equal(t, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name: "warm", Namespace: metav1.NamespaceDefault, UID: pool.UID,
			ResourceVersion: pool.ResourceVersion, CreationTimestamp: pool.CreationTimestamp,
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: 2},
		Status: autoscalingv1.ScaleStatus{Replicas: 1, Selector: "dockerios.io/pool=warm"},
	}, scale)
}

func TestScale_SpeaksAutoscalingV1(t *testing.T) {
	s := newStorage(t)
	assert.Equal(t, autoscalingv1.SchemeGroupVersion.WithKind("Scale"), s.Scale.GroupVersionKind(v1alpha1.SchemeGroupVersion))
	assert.IsType(t, &autoscalingv1.Scale{}, s.Scale.New())
}

func TestScale_GetOfMissingPoolIsNotFound(t *testing.T) {
	s := newStorage(t)
	scaleCtx := genericregistrytest.NewNamespaceScopeContext(s.Pool.Store, metav1.NamespaceDefault, "scale")
	_, err := s.Scale.Get(scaleCtx, "ghost", &metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
}

func TestScale_UpdateChangesPoolReplicas(t *testing.T) {
	s := newStorage(t)
	createPool(t, s)
	scaleCtx := genericregistrytest.NewNamespaceScopeContext(s.Pool.Store, metav1.NamespaceDefault, "scale")
	cases := []struct {
		name     string
		replicas int32
	}{
		{name: "scale up", replicas: 7},
		{name: "scale up to the cap", replicas: 10},
		{name: "scale to zero", replicas: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := getPool(t, s, "warm")
			update := &autoscalingv1.Scale{
				ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: metav1.NamespaceDefault},
				Spec:       autoscalingv1.ScaleSpec{Replicas: tc.replicas},
			}
			obj, created, err := s.Scale.Update(scaleCtx, "warm", rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.NoError(t, err)
			assert.False(t, created)
			scale := obj.(*autoscalingv1.Scale)
			assert.Equal(t, tc.replicas, scale.Spec.Replicas)
			assert.Equal(t, "dockerios.io/pool=warm", scale.Status.Selector)

			after := getPool(t, s, "warm")
			assert.Equal(t, tc.replicas, *after.Spec.Replicas, "scale must write the pool's spec.replicas")
			assert.Equal(t, before.Generation+1, after.Generation, "a scale is a spec change")
			assert.Equal(t, "standard", after.Spec.ClassName)
			assert.Equal(t, after.ResourceVersion, scale.ResourceVersion)
		})
	}
}

func TestScale_UpdateRejectsInvalidReplicas(t *testing.T) {
	cases := map[string]struct {
		replicas  int32
		wantField string
	}{
		"scaling past maxMachines": {replicas: 11, wantField: "spec.replicas"},
		"negative replicas":        {replicas: -1, wantField: "spec.replicas"},
	}
	s := newStorage(t)
	createPool(t, s)
	scaleCtx := genericregistrytest.NewNamespaceScopeContext(s.Pool.Store, metav1.NamespaceDefault, "scale")
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			update := &autoscalingv1.Scale{
				ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: metav1.NamespaceDefault},
				Spec:       autoscalingv1.ScaleSpec{Replicas: tc.replicas},
			}
			_, _, err := s.Scale.Update(scaleCtx, "warm", rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), tc.wantField)
			assert.Equal(t, int32(2), *getPool(t, s, "warm").Spec.Replicas, "a refused scale must not change the pool")
		})
	}
}

func TestScale_StaleResourceVersionIsConflict(t *testing.T) {
	s := newStorage(t)
	ctx, created := createPool(t, s)
	scaleCtx := genericregistrytest.NewNamespaceScopeContext(s.Pool.Store, metav1.NamespaceDefault, "scale")
	obj, err := s.Scale.Get(scaleCtx, "warm", &metav1.GetOptions{})
	require.NoError(t, err)
	stale := obj.(*autoscalingv1.Scale).DeepCopy()

	// Someone else changes the pool after the scale was read.
	relabelled := created.DeepCopy()
	relabelled.Labels["team"] = "macos"
	_, _, err = s.Pool.Update(ctx, relabelled.Name, rest.DefaultUpdatedObjectInfo(relabelled), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)

	stale.Spec.Replicas = 5
	_, _, err = s.Scale.Update(scaleCtx, "warm", rest.DefaultUpdatedObjectInfo(stale), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.True(t, apierrors.IsConflict(err), "want 409 Conflict, got %v", err)
	assert.Equal(t, int32(2), *getPool(t, s, "warm").Spec.Replicas)

	// The same scale against the current resourceVersion goes through.
	obj, err = s.Scale.Get(scaleCtx, "warm", &metav1.GetOptions{})
	require.NoError(t, err)
	fresh := obj.(*autoscalingv1.Scale).DeepCopy()
	fresh.Spec.Replicas = 5
	_, _, err = s.Scale.Update(scaleCtx, "warm", rest.DefaultUpdatedObjectInfo(fresh), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(5), *getPool(t, s, "warm").Spec.Replicas)
}

func TestScale_UpdateOfMissingPoolIsNotFound(t *testing.T) {
	s := newStorage(t)
	scaleCtx := genericregistrytest.NewNamespaceScopeContext(s.Pool.Store, metav1.NamespaceDefault, "scale")
	update := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "ghost", Namespace: metav1.NamespaceDefault},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 1},
	}
	_, _, err := s.Scale.Update(scaleCtx, "ghost", rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, true, &metav1.UpdateOptions{})
	assert.True(t, apierrors.IsNotFound(err), "scale must never create a pool, got %v", err)
}

func TestREST_ShortNamesAndCategories(t *testing.T) {
	s := newStorage(t)
	assert.Equal(t, []string{"mmpool"}, s.Pool.ShortNames())
	assert.Equal(t, []string{"dockerios"}, s.Pool.Categories())
}

func TestTable_ShowsDesiredCurrentReadyBound(t *testing.T) {
	uncapped := registrytest.MachinePool("cold")
	uncapped.Spec.MaxMachines = nil
	counted := registrytest.MachinePool("warm")
	counted.Status = dockerio.MacOSMachinePoolStatus{Replicas: 2, ReadyReplicas: 1, BoundMachines: 4, Selector: "dockerios.io/pool=warm"}
	cases := map[string]struct {
		pool *dockerio.MacOSMachinePool
		want []interface{}
	}{
		"counted pool with a cap": {
			pool: counted,
			want: []interface{}{"warm", "standard", int64(2), int64(2), int64(1), int64(4), "10", "dockerios.io/pool=warm"},
		},
		"uncapped pool before the controller reported": {
			pool: uncapped,
			want: []interface{}{"cold", "standard", int64(2), int64(0), int64(0), int64(0), "<none>", "<none>"},
		},
	}
	s := newStorage(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			table, err := s.Pool.ConvertToTable(context.Background(), tc.pool, nil)
			require.NoError(t, err)
			var names []string
			for _, c := range table.ColumnDefinitions {
				names = append(names, c.Name)
			}
			assert.Equal(t, []string{"Name", "Class", "Desired", "Current", "Ready", "Bound", "Age", "Max", "Selector"}, names)
			require.Len(t, table.Rows, 1)
			cells := table.Rows[0].Cells
			require.Len(t, cells, 9)
			// Every column but Age, which depends on the clock.
			assert.Equal(t, tc.want, append(cells[:6:6], cells[7:]...))
		})
	}
}
