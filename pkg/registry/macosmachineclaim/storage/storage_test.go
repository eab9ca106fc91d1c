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
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/registry/macosmachineclaim"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
)

var boundTime = metav1.NewTime(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))

// newStorage returns claim storage over a fresh etcd holding class
// "standard" and its identity pool.
func newStorage(t *testing.T) ClaimStorage {
	t.Helper()
	getter := registrytest.NewRESTOptionsGetter(t)
	registrytest.Seed(t, getter, registrytest.MachineClass("standard"), registrytest.IdentityPool("imacpro"))
	ledger, _ := registrytest.NewLedger(t, getter)
	s, err := NewStorage(getter, Deps{Binder: registrytest.NewBinder(t, getter), Classes: ledger, Authorizer: registrytest.AllowAll})
	require.NoError(t, err)
	t.Cleanup(s.Claim.DestroyFunc)
	return s
}

// forTester returns c without the namespace, which the generic tester
// chooses itself.
func forTester(c *dockerio.MacOSMachineClaim) *dockerio.MacOSMachineClaim {
	c.Namespace = ""
	return c
}

func namespaceContext(s ClaimStorage) context.Context {
	return genericregistrytest.NewNamespaceScopeContext(s.Claim.Store.Store, metav1.NamespaceDefault)
}

func getClaim(t *testing.T, s ClaimStorage, name string) *dockerio.MacOSMachineClaim {
	t.Helper()
	obj, err := s.Claim.Get(namespaceContext(s), name, &metav1.GetOptions{})
	require.NoError(t, err)
	return obj.(*dockerio.MacOSMachineClaim)
}

// seedBound writes a claim bound to mac-1 straight to etcd, as the bind
// subresource does, bypassing the strategies that keep binding out of
// users' hands.
func seedBound(t *testing.T, s ClaimStorage, name string) *dockerio.MacOSMachineClaim {
	t.Helper()
	ctx := namespaceContext(s)
	c := registrytest.MachineClaim(name)
	c.Status = dockerio.MacOSMachineClaimStatus{Phase: dockerio.ClaimBound, MachineName: "mac-1", BoundTime: &boundTime}
	key, err := s.Claim.KeyFunc(ctx, name)
	require.NoError(t, err)
	out := &dockerio.MacOSMachineClaim{}
	require.NoError(t, s.Claim.Storage.Create(ctx, key, c, out, 0, false))
	return out
}

// TestStorage_Create is the generic store's create contract, through the
// store that is served: the generic tester drives the inner store, whose
// dry runs never reach the claim storage (the served store routes them
// there), so it cannot compare a dry run with a create that writes the
// claim's Bound condition.
func TestStorage_Create(t *testing.T) {
	s := newStorage(t)
	ctx := namespaceContext(s)
	create := func(c *dockerio.MacOSMachineClaim, dryRun bool) (*dockerio.MacOSMachineClaim, error) {
		opts := &metav1.CreateOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		obj, err := s.Claim.Create(ctx, c, rest.ValidateAllObjectFunc, opts)
		if err != nil {
			return nil, err
		}
		return obj.(*dockerio.MacOSMachineClaim), nil
	}

	dry, err := create(registrytest.MachineClaim("ci-42"), true)
	require.NoError(t, err)
	_, err = s.Claim.Get(ctx, "ci-42", &metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a dry run writes nothing: %v", err)
	created, err := create(registrytest.MachineClaim("ci-42"), false)
	require.NoError(t, err)
	assert.NotEmpty(t, created.UID)
	assert.NotEmpty(t, created.ResourceVersion)
	assert.False(t, created.CreationTimestamp.IsZero())
	assert.Equal(t, created, getClaim(t, s, "ci-42"), "the answer is what a read gives")
	assert.Equal(t, created.Spec, dry.Spec)
	assert.Equal(t, withoutTimes(created.Status), withoutTimes(dry.Status), "the dry run answers what the create did")

	_, err = create(registrytest.MachineClaim("ci-42"), false)
	assert.True(t, apierrors.IsAlreadyExists(err), "want 409 AlreadyExists, got %v", err)
	_, err = create(registrytest.MachineClaim("ci-42"), true)
	assert.True(t, apierrors.IsAlreadyExists(err), "a dry run too: want 409 AlreadyExists, got %v", err)

	generated := registrytest.MachineClaim("")
	generated.GenerateName = "ci-"
	got, err := create(generated, false)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(got.Name, "ci-") && len(got.Name) > len("ci-"), "generated name %q", got.Name)

	badSelector := registrytest.MachineClaim("bad-selector")
	badSelector.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "xcode", Operator: "Near"}}
	for _, dryRun := range []bool{true, false} {
		_, err = create(badSelector.DeepCopy(), dryRun)
		require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
		assert.Contains(t, err.Error(), "spec.selector.matchExpressions[0].operator")
	}
	_, err = s.Claim.Get(ctx, "bad-selector", &metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing written for a refused create: %v", err)
}

// withoutTimes is status with its conditions' transition times zeroed.
func withoutTimes(status dockerio.MacOSMachineClaimStatus) dockerio.MacOSMachineClaimStatus {
	status = *status.DeepCopy()
	for i := range status.Conditions {
		status.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return status
}

func TestCreate_ExactlyOneOfPoolOrClass(t *testing.T) {
	cases := map[string]struct {
		pool, class string
		wantField   string
	}{
		"pool only":  {pool: "warm"},
		"class only": {class: "standard"},
		"both":       {pool: "warm", class: "standard", wantField: "spec.className: Forbidden"},
		"neither":    {wantField: "spec: Required value"},
	}
	s := newStorage(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := registrytest.MachineClaim(strings.ReplaceAll(name, " ", "-"))
			c.Spec.PoolName, c.Spec.ClassName = tc.pool, tc.class
			_, err := s.Claim.Create(namespaceContext(s), c, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
			if tc.wantField == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), tc.wantField)
		})
	}
}

func TestCreate_StartsPendingAndIgnoresStatus(t *testing.T) {
	cases := map[string]dockerio.MacOSMachineClaimStatus{
		"no status":           {},
		"forged bound status": {Phase: dockerio.ClaimBound, MachineName: "mac-1", BoundTime: &boundTime},
		"forged lost status":  {Phase: dockerio.ClaimLost, Conditions: []metav1.Condition{{Type: "Satisfiable", Status: metav1.ConditionFalse, Reason: "Forged", LastTransitionTime: boundTime}}},
	}
	s := newStorage(t)
	for name, status := range cases {
		t.Run(name, func(t *testing.T) {
			c := registrytest.MachineClaim(strings.ReplaceAll(name, " ", "-"))
			c.Status = status
			created, err := s.Claim.Create(namespaceContext(s), c, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
			require.NoError(t, err)
			got := created.(*dockerio.MacOSMachineClaim).Status
			assert.Equal(t, dockerio.ClaimPending, got.Phase)
			assert.Empty(t, got.MachineName)
			assert.Nil(t, got.BoundTime)
			// Only the server's own condition: it is waiting, and why.
			require.Len(t, got.Conditions, 1)
			assert.Equal(t, "Bound", got.Conditions[0].Type)
			assert.Equal(t, metav1.ConditionFalse, got.Conditions[0].Status)
			assert.Equal(t, "WaitingForMachine", got.Conditions[0].Reason)
			assert.Equal(t, got, getClaim(t, s, c.Name).Status)
			assert.Equal(t, int64(1), created.(*dockerio.MacOSMachineClaim).Generation)
		})
	}
}

func TestStorage_UpdateKeepsSpecFixed(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Claim.Store.Store).TestUpdate(forTester(registrytest.MachineClaim("ci-42")),
		func(obj runtime.Object) runtime.Object {
			c := obj.(*dockerio.MacOSMachineClaim)
			c.Labels["team"] = "macos"
			return c
		},
		func(obj runtime.Object) runtime.Object {
			c := obj.(*dockerio.MacOSMachineClaim)
			c.Spec.PoolName = "cold"
			return c
		},
		func(obj runtime.Object) runtime.Object {
			c := obj.(*dockerio.MacOSMachineClaim)
			c.Spec.Selector = nil
			return c
		},
	)
}

func TestUpdate_SpecIsImmutable(t *testing.T) {
	cases := map[string]func(*dockerio.MacOSMachineClaimSpec){
		"pool":             func(s *dockerio.MacOSMachineClaimSpec) { s.PoolName = "cold" },
		"pool to class":    func(s *dockerio.MacOSMachineClaimSpec) { s.PoolName, s.ClassName = "", "standard" },
		"selector":         func(s *dockerio.MacOSMachineClaimSpec) { s.Selector.MatchLabels["xcode"] = "15" },
		"selector removed": func(s *dockerio.MacOSMachineClaimSpec) { s.Selector = nil },
	}
	s := newStorage(t)
	ctx := namespaceContext(s)
	_, err := s.Claim.Create(ctx, registrytest.MachineClaim("ci-42"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			update := getClaim(t, s, "ci-42").DeepCopy()
			mutate(&update.Spec)
			_, _, err := s.Claim.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), "spec: Invalid value")
			assert.Contains(t, err.Error(), "immutable")
			assert.Equal(t, registrytest.MachineClaim("ci-42").Spec, getClaim(t, s, "ci-42").Spec)
		})
	}
}

func TestMainResource_IgnoresStatus(t *testing.T) {
	s := newStorage(t)
	ctx := namespaceContext(s)
	created, err := s.Claim.Create(ctx, registrytest.MachineClaim("ci-42"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	update := created.(*dockerio.MacOSMachineClaim).DeepCopy()
	update.Status = dockerio.MacOSMachineClaimStatus{Phase: dockerio.ClaimBound, MachineName: "mac-1", BoundTime: &boundTime}
	got, _, err := s.Claim.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, created.(*dockerio.MacOSMachineClaim).Status, got.(*dockerio.MacOSMachineClaim).Status)
	assert.Equal(t, dockerio.ClaimPending, got.(*dockerio.MacOSMachineClaim).Status.Phase)
}

func TestStorage_Delete(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Claim.Store.Store).ReturnDeletedObject().TestDelete(forTester(registrytest.MachineClaim("ci-42")))
}

func TestStorage_Get(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Claim.Store.Store).TestGet(forTester(registrytest.MachineClaim("ci-42")))
}

func TestStorage_List(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Claim.Store.Store).TestList(forTester(registrytest.MachineClaim("ci-42")))
}

// The generic tester writes its object straight to etcd, without the
// strategy that sets phase Pending, so phase is selected in
// TestWatch_SelectsByPhase instead.
func TestStorage_WatchSelectsByLabelAndField(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Claim.Store.Store).TestWatch(forTester(registrytest.MachineClaim("ci-42")),
		[]labels.Set{{"team": "ios"}},
		[]labels.Set{{"team": "android"}},
		[]fields.Set{{"metadata.name": "ci-42"}, {"spec.poolName": "warm"}, {"spec.className": ""}, {"status.machineName": ""}},
		[]fields.Set{{"metadata.name": "ci-43"}, {"spec.poolName": "cold"}, {"status.phase": "Bound"}},
	)
}

func TestWatch_SelectsByPhase(t *testing.T) {
	// Each watch starts before two claims are written: a Pending one, then a
	// Bound one. A watch's first event then tells which phase it selects,
	// without waiting on timeouts.
	cases := map[string]struct {
		selector fields.Selector
		want     string
	}{
		"status.phase=Pending":  {selector: fields.OneTermEqualSelector("status.phase", "Pending"), want: "pending"},
		"status.phase=Bound":    {selector: fields.OneTermEqualSelector("status.phase", "Bound"), want: "bound"},
		"status.phase!=Pending": {selector: fields.OneTermNotEqualSelector("status.phase", "Pending"), want: "bound"},
	}
	s := newStorage(t)
	ctx := namespaceContext(s)
	watchers := map[string]watch.Interface{}
	for name, tc := range cases {
		w, err := s.Claim.Watch(ctx, &metainternalversion.ListOptions{FieldSelector: tc.selector, ResourceVersion: "0"})
		require.NoError(t, err)
		t.Cleanup(w.Stop)
		watchers[name] = w
	}
	_, err := s.Claim.Create(ctx, registrytest.MachineClaim("pending"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	seedBound(t, s, "bound")

	for name, tc := range cases {
		select {
		case ev := <-watchers[name].ResultChan():
			assert.Equal(t, tc.want, ev.Object.(*dockerio.MacOSMachineClaim).Name, name)
		case <-time.After(wait.ForeverTestTimeout):
			t.Errorf("%s: saw no claim at all", name)
		}
	}
}

func TestList_FieldSelectors(t *testing.T) {
	s := newStorage(t)
	ctx := namespaceContext(s)
	_, err := s.Claim.Create(ctx, registrytest.MachineClaim("pending-warm"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	byClass := registrytest.MachineClaim("pending-class")
	byClass.Spec.PoolName, byClass.Spec.ClassName = "", "standard"
	_, err = s.Claim.Create(ctx, byClass, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	seedBound(t, s, "bound-warm")

	cases := map[string]struct {
		selector fields.Selector
		want     []string
	}{
		"status.phase=Pending":     {selector: fields.OneTermEqualSelector("status.phase", "Pending"), want: []string{"pending-warm", "pending-class"}},
		"status.phase=Bound":       {selector: fields.OneTermEqualSelector("status.phase", "Bound"), want: []string{"bound-warm"}},
		"status.phase=Lost":        {selector: fields.OneTermEqualSelector("status.phase", "Lost"), want: nil},
		"spec.poolName=warm":       {selector: fields.OneTermEqualSelector("spec.poolName", "warm"), want: []string{"pending-warm", "bound-warm"}},
		"spec.className=standard":  {selector: fields.OneTermEqualSelector("spec.className", "standard"), want: []string{"pending-class"}},
		"status.machineName=mac-1": {selector: fields.OneTermEqualSelector("status.machineName", "mac-1"), want: []string{"bound-warm"}},
		"pending claims of pool warm": {
			selector: fields.AndSelectors(fields.OneTermEqualSelector("spec.poolName", "warm"), fields.OneTermEqualSelector("status.phase", "Pending")),
			want:     []string{"pending-warm"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj, err := s.Claim.List(ctx, &metainternalversion.ListOptions{FieldSelector: tc.selector})
			require.NoError(t, err)
			var names []string
			for _, c := range obj.(*dockerio.MacOSMachineClaimList).Items {
				names = append(names, c.Name)
			}
			assert.ElementsMatch(t, tc.want, names)
		})
	}
}

func TestSelectableFields_MatchV1alpha1(t *testing.T) {
	c := registrytest.MachineClaim("ci-42")
	c.Status = dockerio.MacOSMachineClaimStatus{Phase: dockerio.ClaimBound, MachineName: "mac-1"}
	set := macosmachineclaim.SelectableFields(c)
	var keys []string
	for k := range set {
		if !strings.HasPrefix(k, "metadata.") {
			keys = append(keys, k)
		}
	}
	assert.ElementsMatch(t, v1alpha1.SelectableFields["MacOSMachineClaim"], keys)
	assert.Equal(t, fields.Set{
		"metadata.name": "ci-42", "metadata.namespace": "default",
		"spec.poolName": "warm", "spec.className": "", "status.phase": "Bound", "status.machineName": "mac-1",
	}, set)
}

func TestStatus_CannotSetMachineNameOrBoundTime(t *testing.T) {
	s := newStorage(t)
	ctx := namespaceContext(s)
	_, err := s.Claim.Create(ctx, registrytest.MachineClaim("ci-42"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)

	update := getClaim(t, s, "ci-42").DeepCopy()
	update.Status.Phase = dockerio.ClaimLost
	update.Status.MachineName = "mac-1"
	update.Status.BoundTime = &boundTime
	update.Status.Conditions = []metav1.Condition{{Type: "Satisfiable", Status: metav1.ConditionFalse, Reason: "PoolGone", Message: "pool warm was deleted", LastTransitionTime: boundTime}}
	got, _, err := s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	for _, c := range []*dockerio.MacOSMachineClaim{got.(*dockerio.MacOSMachineClaim), getClaim(t, s, "ci-42")} {
		assert.Equal(t, dockerio.ClaimLost, c.Status.Phase, "phase is the status writer's")
		require.Len(t, c.Status.Conditions, 1, "conditions are the status writer's")
		assert.Equal(t, "PoolGone", c.Status.Conditions[0].Reason)
		assert.Empty(t, c.Status.MachineName, "machineName belongs to bind")
		assert.Nil(t, c.Status.BoundTime, "boundTime belongs to bind")
	}
}

func TestStatus_CannotClearOrMoveBinding(t *testing.T) {
	cases := map[string]func(*dockerio.MacOSMachineClaimStatus){
		"clear machineName and boundTime": func(st *dockerio.MacOSMachineClaimStatus) { st.MachineName, st.BoundTime = "", nil },
		"move to another machine":         func(st *dockerio.MacOSMachineClaimStatus) { st.MachineName = "mac-2" },
		"rewrite boundTime": func(st *dockerio.MacOSMachineClaimStatus) {
			st.BoundTime = &metav1.Time{Time: boundTime.Add(time.Hour)}
		},
	}
	s := newStorage(t)
	ctx := namespaceContext(s)
	seedBound(t, s, "ci-42")
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			update := getClaim(t, s, "ci-42").DeepCopy()
			mutate(&update.Status)
			got, _, err := s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.NoError(t, err)
			for _, c := range []*dockerio.MacOSMachineClaim{got.(*dockerio.MacOSMachineClaim), getClaim(t, s, "ci-42")} {
				assert.Equal(t, dockerio.ClaimBound, c.Status.Phase)
				assert.Equal(t, "mac-1", c.Status.MachineName)
				require.NotNil(t, c.Status.BoundTime)
				assert.True(t, boundTime.Equal(c.Status.BoundTime), "boundTime %v", c.Status.BoundTime)
			}
		})
	}
}

func TestStatus_BoundWithoutMachineNameIsRejected(t *testing.T) {
	cases := map[string]struct {
		machineName string
	}{
		"Bound without machineName":                        {},
		"Bound with a machineName the status cannot write": {machineName: "mac-1"},
	}
	s := newStorage(t)
	ctx := namespaceContext(s)
	_, err := s.Claim.Create(ctx, registrytest.MachineClaim("ci-42"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			update := getClaim(t, s, "ci-42").DeepCopy()
			update.Status.Phase = dockerio.ClaimBound
			update.Status.MachineName = tc.machineName
			_, _, err := s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), "status.phase")
			assert.Equal(t, dockerio.ClaimPending, getClaim(t, s, "ci-42").Status.Phase)
		})
	}
}

func TestStatus_RejectsUnknownPhase(t *testing.T) {
	s := newStorage(t)
	ctx := namespaceContext(s)
	created, err := s.Claim.Create(ctx, registrytest.MachineClaim("ci-42"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	update := created.(*dockerio.MacOSMachineClaim).DeepCopy()
	update.Status.Phase = "Released"
	_, _, err = s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
	assert.Contains(t, err.Error(), "status.phase: Unsupported value")
}

func TestStatus_CannotChangeSpecOrLabels(t *testing.T) {
	s := newStorage(t)
	ctx := namespaceContext(s)
	created, err := s.Claim.Create(ctx, registrytest.MachineClaim("ci-42"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	update := created.(*dockerio.MacOSMachineClaim).DeepCopy()
	update.Spec.PoolName = "cold"
	update.Labels = map[string]string{"team": "sneaky"}
	got, _, err := s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "warm", got.(*dockerio.MacOSMachineClaim).Spec.PoolName)
	assert.Equal(t, map[string]string{"team": "ios"}, got.(*dockerio.MacOSMachineClaim).Labels)
}

func TestREST_ShortNamesAndCategories(t *testing.T) {
	s := newStorage(t)
	assert.Equal(t, []string{"mmclaim"}, s.Claim.ShortNames())
	assert.Equal(t, []string{"dockerios"}, s.Claim.Categories())
}

func TestTable_ShowsRequestAndMachine(t *testing.T) {
	byClass := registrytest.MachineClaim("ci-43")
	byClass.Spec.PoolName, byClass.Spec.ClassName = "", "standard"
	byClass.Status.Phase = dockerio.ClaimPending
	bound := registrytest.MachineClaim("ci-42")
	bound.Status = dockerio.MacOSMachineClaimStatus{Phase: dockerio.ClaimBound, MachineName: "mac-1"}
	cases := map[string]struct {
		claim *dockerio.MacOSMachineClaim
		want  []interface{}
	}{
		"bound pool claim":    {claim: bound, want: []interface{}{"ci-42", "warm", "<none>", "Bound", "mac-1"}},
		"pending class claim": {claim: byClass, want: []interface{}{"ci-43", "<none>", "standard", "Pending", "<none>"}},
	}
	s := newStorage(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			table, err := s.Claim.ConvertToTable(context.Background(), tc.claim, nil)
			require.NoError(t, err)
			var names []string
			for _, c := range table.ColumnDefinitions {
				names = append(names, c.Name)
			}
			assert.Equal(t, []string{"Name", "Pool", "Class", "Phase", "Machine", "Age"}, names)
			require.Len(t, table.Rows, 1)
			require.Len(t, table.Rows[0].Cells, 6)
			assert.Equal(t, tc.want, table.Rows[0].Cells[:5])
		})
	}
}
