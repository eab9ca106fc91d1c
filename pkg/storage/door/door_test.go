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

package door

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
)

// memStorage is an inner storage holding at most one ConfigMap, counting
// the writes it makes.
type memStorage struct {
	storage.Interface
	stored *corev1.ConfigMap
	writes int
}

func (m *memStorage) Versioner() storage.Versioner { return storage.APIObjectVersioner{} }

func (m *memStorage) Get(_ context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	if m.stored == nil {
		if opts.IgnoreNotFound {
			return nil
		}
		return storage.NewKeyNotFoundError(key, 0)
	}
	m.stored.DeepCopyInto(out.(*corev1.ConfigMap))
	return nil
}

func (m *memStorage) GuaranteedUpdate(ctx context.Context, key string, dest runtime.Object, ignoreNotFound bool,
	_ *storage.Preconditions, tryUpdate storage.UpdateFunc, _ runtime.Object) error {
	current := &corev1.ConfigMap{}
	if err := m.Get(ctx, key, storage.GetOptions{IgnoreNotFound: ignoreNotFound}, current); err != nil {
		return err
	}
	rev, _ := m.Versioner().ObjectResourceVersion(current)
	out, _, err := tryUpdate(current, storage.ResponseMeta{ResourceVersion: rev})
	if err != nil {
		return err
	}
	m.writes++
	m.stored = out.(*corev1.ConfigMap).DeepCopy()
	m.stored.ResourceVersion = "7"
	m.stored.DeepCopyInto(dest.(*corev1.ConfigMap))
	return nil
}

func deepCopy(in, out runtime.Object) error {
	in.(*corev1.ConfigMap).DeepCopyInto(out.(*corev1.ConfigMap))
	return nil
}

func setData(v string) storage.UpdateFunc {
	return func(in runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
		cm := in.(*corev1.ConfigMap).DeepCopy()
		cm.Name, cm.Data = "cm", map[string]string{"v": v}
		return cm, nil, nil
	}
}

func TestGuaranteedUpdate_SendsACreateToTheWrappersCreate(t *testing.T) {
	inner := &memStorage{}
	var created []string
	u := Updater{Inner: inner, Copy: deepCopy, Create: func(_ context.Context, _ string, obj, out runtime.Object, _ uint64) error {
		created = append(created, obj.(*corev1.ConfigMap).Data["v"])
		return deepCopy(obj, out)
	}}
	out := &corev1.ConfigMap{}
	require.NoError(t, u.GuaranteedUpdate(context.Background(), "/cm", out, true, nil, setData("new"), nil))
	assert.Equal(t, []string{"new"}, created, "the wrapper created it")
	assert.Zero(t, inner.writes, "the inner storage did not")
	assert.Equal(t, "new", out.Data["v"])
}

func TestGuaranteedUpdate_AnUpdateGoesToTheInnerStorageUnlessIntercepted(t *testing.T) {
	inner := &memStorage{stored: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", ResourceVersion: "5"}}}
	noCreate := func(context.Context, string, runtime.Object, runtime.Object, uint64) error {
		t.Fatal("an update of an existing object must not create")
		return nil
	}
	u := Updater{Inner: inner, Copy: deepCopy, Create: noCreate}
	require.NoError(t, u.GuaranteedUpdate(context.Background(), "/cm", &corev1.ConfigMap{}, false, nil, setData("plain"), nil))
	assert.Equal(t, 1, inner.writes)

	var took string
	u.Intercept = func(old, updated runtime.Object, rev int64) func(context.Context, runtime.Object) (bool, error) {
		if updated.(*corev1.ConfigMap).Data["v"] != "special" {
			return nil
		}
		return func(_ context.Context, dest runtime.Object) (bool, error) {
			took = old.(*corev1.ConfigMap).Data["v"]
			return true, deepCopy(updated, dest)
		}
	}
	out := &corev1.ConfigMap{}
	require.NoError(t, u.GuaranteedUpdate(context.Background(), "/cm", out, false, nil, setData("special"), nil))
	assert.Equal(t, "plain", took, "the interceptor saw what was stored")
	assert.Equal(t, 1, inner.writes, "and the inner storage wrote nothing more")
	assert.Equal(t, "special", out.Data["v"])
}

func TestGuaranteedUpdate_ADryRunDecidesAlikeAndWritesNothing(t *testing.T) {
	inner := &memStorage{stored: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", ResourceVersion: "5"}, Data: map[string]string{"v": "old"}}}
	var createdDry bool
	u := Updater{Inner: inner, Copy: deepCopy, Create: func(ctx context.Context, _ string, obj, out runtime.Object, _ uint64) error {
		createdDry = IsDryRun(ctx)
		return deepCopy(obj, out)
	}}
	ctx := WithDryRun(context.Background())
	out := &corev1.ConfigMap{}
	require.NoError(t, u.GuaranteedUpdate(ctx, "/cm", out, false, nil, setData("new"), nil))
	assert.Equal(t, "new", out.Data["v"], "answers with the update")
	assert.Zero(t, inner.writes)
	assert.Equal(t, "old", inner.stored.Data["v"])

	// A dry-run create goes to the wrapper's Create, still a dry run.
	inner.stored = nil
	require.NoError(t, u.GuaranteedUpdate(ctx, "/cm", &corev1.ConfigMap{}, true, nil, setData("new"), nil))
	assert.True(t, createdDry)
	assert.Nil(t, inner.stored)
}
