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
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
)

// newStorage returns machine storage over a fresh etcd holding classes
// "standard" and "gpu", drawing from the empty identity pool "imacpro":
// machines are created, and wait for an identity.
func newStorage(t *testing.T) MachineStorage {
	t.Helper()
	getter := registrytest.NewRESTOptionsGetter(t)
	registrytest.Seed(t, getter, registrytest.MachineClass("standard"), registrytest.MachineClass("gpu"), registrytest.IdentityPool("imacpro"))
	ledger, _ := registrytest.NewLedger(t, getter)
	s, err := NewStorage(getter, ledger, registrytest.AllowAll)
	require.NoError(t, err)
	t.Cleanup(s.Machine.DestroyFunc)
	return s
}

// forTester returns m without the namespace, which the generic tester
// chooses itself.
func forTester(m *dockerio.MacOSMachine) *dockerio.MacOSMachine {
	m.Namespace = ""
	return m
}

// The generic registry tester is not used for create and watch: it deletes
// and re-creates objects, which the teardown finalizer (rightly) prevents.
func TestStorage_CreateValidatesMachine(t *testing.T) {
	cases := map[string]struct {
		mutate    func(*dockerio.MacOSMachine)
		wantField string
	}{
		"valid":            {mutate: func(*dockerio.MacOSMachine) {}},
		"no class":         {mutate: func(m *dockerio.MacOSMachine) { m.Spec.ClassName = "" }, wantField: "spec.className"},
		"name not a label": {mutate: func(m *dockerio.MacOSMachine) { m.Name = "Not_A_Label" }, wantField: "metadata.name"},
		"bad vm label":     {mutate: func(m *dockerio.MacOSMachine) { m.Spec.VMLabels = map[string]string{"a b": "c"} }, wantField: "spec.vmLabels"},
		"pool label naming another pool": {mutate: func(m *dockerio.MacOSMachine) {
			m.Spec.PoolName = "warm"
			m.Labels = map[string]string{dockerio.MachinePoolLabel: "cold"}
		}, wantField: "metadata.labels[dockerios.io/pool]"},
	}
	s := newStorage(t)
	ctx := genericregistrytest.NewNamespaceScopeContext(s.Machine.Store.Store, metav1.NamespaceDefault)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := registrytest.Machine("mac-1")
			m.Name = strings.ReplaceAll(name, " ", "-")
			tc.mutate(m)
			_, err := s.Machine.Create(ctx, m, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
			if tc.wantField == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), tc.wantField)
		})
	}
}

// A pool's machine made without the label its pool counts it by gets it.
func TestStorage_CreateLabelsAPoolsMachine(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewNamespaceScopeContext(s.Machine.Store.Store, metav1.NamespaceDefault)
	m := registrytest.Machine("mac-1")
	m.Spec.PoolName = "warm"
	delete(m.Labels, dockerio.MachinePoolLabel)

	obj, err := s.Machine.Create(ctx, m, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})

	require.NoError(t, err)
	assert.Equal(t, "warm", obj.(*dockerio.MacOSMachine).Labels[dockerio.MachinePoolLabel])
}

func TestStorage_UpdateAllowsMetadataButNotSpec(t *testing.T) {
	s := newStorage(t)
	test := genericregistrytest.New(t, s.Machine.Store.Store)
	test.TestUpdate(forTester(registrytest.Machine("mac-1")),
		func(obj runtime.Object) runtime.Object {
			m := obj.(*dockerio.MacOSMachine)
			m.Labels["team"] = "macos"
			return m
		},
		func(obj runtime.Object) runtime.Object {
			m := obj.(*dockerio.MacOSMachine)
			m.Spec.ClassName = "other"
			return m
		},
	)
}

func TestStorage_Get(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Machine.Store.Store).TestGet(forTester(registrytest.Machine("mac-1")))
}

func TestStorage_List(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Machine.Store.Store).TestList(forTester(registrytest.Machine("mac-1")))
}

func TestStorage_WatchSelectsByLabelAndField(t *testing.T) {
	// Each watch starts before two machines are written: mac-1, then a
	// sentinel that every selector matches once it is Ready. A watch's first
	// event then tells whether it selected mac-1, without waiting on timeouts.
	cases := map[string]struct {
		labels     labels.Selector
		fields     fields.Selector
		selectsMac bool
	}{
		"label match":     {labels: labels.SelectorFromSet(labels.Set{"team": "ios"}), selectsMac: true},
		"label mismatch":  {labels: labels.SelectorFromSet(labels.Set{"team": "android"})},
		"class match":     {fields: fields.OneTermEqualSelector("spec.className", "standard"), selectsMac: true},
		"class mismatch":  {fields: fields.OneTermEqualSelector("spec.className", "gpu")},
		"phase match":     {fields: fields.OneTermEqualSelector("status.phase", "Pending"), selectsMac: true},
		"phase mismatch":  {fields: fields.OneTermEqualSelector("status.phase", "Ready")},
		"no identity yet": {fields: fields.OneTermEqualSelector("status.identityRef.name", ""), selectsMac: true},
		"name match":      {fields: fields.OneTermEqualSelector("metadata.name", "mac-1"), selectsMac: true},
		"name mismatch":   {fields: fields.OneTermEqualSelector("metadata.name", "sentinel")},
	}
	s := newStorage(t)
	ctx := genericregistrytest.NewNamespaceScopeContext(s.Machine.Store.Store, metav1.NamespaceDefault)
	watchers := map[string]watch.Interface{}
	for name, tc := range cases {
		w, err := s.Machine.Watch(ctx, &metainternalversion.ListOptions{LabelSelector: tc.labels, FieldSelector: tc.fields, ResourceVersion: "0"})
		require.NoError(t, err)
		t.Cleanup(w.Stop)
		watchers[name] = w
	}
	_, err := s.Machine.Create(ctx, registrytest.Machine("mac-1"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	sentinel := registrytest.Machine("mac-1")
	sentinel.Name, sentinel.Labels, sentinel.Spec.ClassName = "sentinel", map[string]string{"team": "android"}, "gpu"
	created, err := s.Machine.Create(ctx, sentinel, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	ready := created.(*dockerio.MacOSMachine).DeepCopy()
	ready.Status.Phase = dockerio.MachineReady
	_, _, err = s.Status.Update(ctx, ready.Name, rest.DefaultUpdatedObjectInfo(ready), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)

	for name, tc := range cases {
		select {
		case ev := <-watchers[name].ResultChan():
			first := ev.Object.(*dockerio.MacOSMachine).Name
			if tc.selectsMac {
				assert.Equal(t, "mac-1", first, "%s: should have selected mac-1", name)
			} else {
				assert.Equal(t, "sentinel", first, "%s: should not have selected mac-1", name)
			}
		case <-time.After(wait.ForeverTestTimeout):
			t.Errorf("%s: saw no machine at all", name)
		}
	}
}

func TestStorage_DeleteWaitsForTeardownFinalizer(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewNamespaceScopeContext(s.Machine.Store.Store, metav1.NamespaceDefault)

	created, err := s.Machine.Create(ctx, registrytest.Machine("mac-1"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Contains(t, created.(*dockerio.MacOSMachine).Finalizers, dockerio.MachineTeardownFinalizer)

	obj, deleted, err := s.Machine.Delete(ctx, "mac-1", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)
	assert.False(t, deleted, "a machine must not disappear before its teardown ran")
	assert.NotNil(t, obj.(*dockerio.MacOSMachine).DeletionTimestamp)

	// The controller removes the finalizer once teardown is done; then it goes.
	m := obj.(*dockerio.MacOSMachine).DeepCopy()
	m.Finalizers = nil
	_, _, err = s.Machine.Update(ctx, m.Name, rest.DefaultUpdatedObjectInfo(m), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = s.Machine.Get(ctx, "mac-1", &metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
}

// Taking the teardown finalizer off a machine being deleted lets it go
// before its VM is confirmed gone: only a user who may update
// macosmachines/finalizers (the controller) may, dry run or not; others
// get 403 naming that permission, and the machine keeps it.
func TestStorage_RemovingTheTeardownFinalizerNeedsFinalizersPermission(t *testing.T) {
	getter := registrytest.NewRESTOptionsGetter(t)
	registrytest.Seed(t, getter, registrytest.MachineClass("standard"), registrytest.IdentityPool("imacpro"))
	ledger, _ := registrytest.NewLedger(t, getter)
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetSubresource() == "finalizers" && a.GetUser().GetName() != "controller" {
			return authorizer.DecisionNoOpinion, "no RBAC rule", nil
		}
		return authorizer.DecisionAllow, "", nil
	})
	s, err := NewStorage(getter, ledger, authz)
	require.NoError(t, err)
	t.Cleanup(s.Machine.DestroyFunc)
	as := func(name string) context.Context {
		ctx := genericregistrytest.NewNamespaceScopeContext(s.Machine.Store.Store, metav1.NamespaceDefault)
		return genericapirequest.WithUser(ctx, &user.DefaultInfo{Name: name})
	}
	m := registrytest.Machine("mac-1")
	m.Finalizers = []string{"example.com/other"}
	_, err = s.Machine.Create(as("alice"), m, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	obj, _, err := s.Machine.Delete(as("alice"), "mac-1", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)
	require.NotNil(t, obj.(*dockerio.MacOSMachine).DeletionTimestamp)
	withoutFinalizer := func() rest.UpdatedObjectInfo {
		current, err := s.Machine.Get(as("alice"), "mac-1", &metav1.GetOptions{})
		require.NoError(t, err)
		m := current.(*dockerio.MacOSMachine).DeepCopy()
		m.Finalizers = []string{"example.com/other"}
		return rest.DefaultUpdatedObjectInfo(m)
	}

	for _, dryRun := range [][]string{{metav1.DryRunAll}, nil} {
		_, _, err = s.Machine.Update(as("alice"), "mac-1", withoutFinalizer(), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{DryRun: dryRun})
		require.True(t, apierrors.IsForbidden(err), "dry run %v: got %v", dryRun, err)
		assert.ErrorContains(t, err, "cannot update macosmachines/finalizers of mac-1")
	}
	got, err := s.Machine.Get(as("alice"), "mac-1", &metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, got.(*dockerio.MacOSMachine).Finalizers, dockerio.MachineTeardownFinalizer)

	// Other changes to a machine being deleted need no such permission.
	m = got.(*dockerio.MacOSMachine).DeepCopy()
	m.Labels = map[string]string{"team": "macos"}
	_, _, err = s.Machine.Update(as("alice"), "mac-1", rest.DefaultUpdatedObjectInfo(m), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)

	_, _, err = s.Machine.Update(as("controller"), "mac-1", withoutFinalizer(), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	got, err = s.Machine.Get(as("alice"), "mac-1", &metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, got.(*dockerio.MacOSMachine).Finalizers, dockerio.MachineTeardownFinalizer)
}

// The teardown finalizer cannot be taken off a machine that is not being
// deleted (rule 6): its delete would then skip the teardown, and free its
// identity at once while its VM may still run.
func TestStorage_TeardownFinalizerStaysOnALiveMachine(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewNamespaceScopeContext(s.Machine.Store.Store, metav1.NamespaceDefault)
	created, err := s.Machine.Create(ctx, registrytest.Machine("mac-1"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)

	m := created.(*dockerio.MacOSMachine).DeepCopy()
	m.Finalizers = []string{"example.com/other"}
	updated, _, err := s.Machine.Update(ctx, m.Name, rest.DefaultUpdatedObjectInfo(m), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"example.com/other", dockerio.MachineTeardownFinalizer}, updated.(*dockerio.MacOSMachine).Finalizers)

	obj, deleted, err := s.Machine.Delete(ctx, "mac-1", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)
	assert.False(t, deleted, "a machine must not disappear before its teardown ran")
	assert.Contains(t, obj.(*dockerio.MacOSMachine).Finalizers, dockerio.MachineTeardownFinalizer)
}

func TestStatus_WritesObservationsButNotSpecOrOwnedReferences(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewNamespaceScopeContext(s.Machine.Store.Store, metav1.NamespaceDefault)
	created, err := s.Machine.Create(ctx, registrytest.Machine("mac-1"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)

	update := created.(*dockerio.MacOSMachine).DeepCopy()
	update.Spec.ClassName = "sneaky"
	update.Status.Phase = dockerio.MachineProvisioning
	update.Status.IdentityRef = &dockerio.LocalObjectReference{Name: "stolen"}
	update.Status.ClaimRef = &dockerio.ClaimReference{Name: "claim", UID: "1"}
	update.Status.Conditions = []metav1.Condition{{
		Type: dockerio.MachineBootdiskReady, Status: metav1.ConditionFalse, Reason: "JobRunning",
		Message: "bootdisk job is running", LastTransitionTime: metav1.Now(),
	}}
	got, _, err := s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)

	m := got.(*dockerio.MacOSMachine)
	assert.Equal(t, dockerio.MachineProvisioning, m.Status.Phase)
	assert.Len(t, m.Status.Conditions, 1)
	assert.Equal(t, "standard", m.Spec.ClassName, "status writes must not change spec")
	assert.Nil(t, m.Status.IdentityRef, "identityRef belongs to the allocator")
	assert.Nil(t, m.Status.ClaimRef, "claimRef belongs to bind")
}

func TestStatus_RejectsUnknownPhase(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewNamespaceScopeContext(s.Machine.Store.Store, metav1.NamespaceDefault)
	created, err := s.Machine.Create(ctx, registrytest.Machine("mac-1"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	update := created.(*dockerio.MacOSMachine).DeepCopy()
	update.Status.Phase = "Sleeping"
	_, _, err = s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	assert.Contains(t, err.Error(), "status.phase")
}

func TestMainResource_IgnoresStatus(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewNamespaceScopeContext(s.Machine.Store.Store, metav1.NamespaceDefault)
	m := registrytest.Machine("mac-1")
	m.Status.Phase = dockerio.MachineReady
	created, err := s.Machine.Create(ctx, m, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, dockerio.MachinePending, created.(*dockerio.MacOSMachine).Status.Phase)

	update := created.(*dockerio.MacOSMachine).DeepCopy()
	update.Status.Phase = dockerio.MachineReady
	got, _, err := s.Machine.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, dockerio.MachinePending, got.(*dockerio.MacOSMachine).Status.Phase)
}

func TestREST_ShortNamesAndCategories(t *testing.T) {
	s := newStorage(t)
	assert.Equal(t, []string{"mm"}, s.Machine.ShortNames())
	assert.Equal(t, []string{"dockerios"}, s.Machine.Categories())
}

func TestTable_ShowsPhaseIdentityClaimAndReady(t *testing.T) {
	s := newStorage(t)
	m := registrytest.Machine("mac-1")
	m.Status = dockerio.MacOSMachineStatus{
		Phase:       dockerio.MachineReady,
		IdentityRef: &dockerio.LocalObjectReference{Name: "id-7"},
		ClaimRef:    &dockerio.ClaimReference{Name: "ci-42", UID: "u"},
		Conditions:  []metav1.Condition{{Type: dockerio.MachineConditionReady, Status: metav1.ConditionTrue}},
	}
	table, err := s.Machine.ConvertToTable(context.Background(), m, nil)
	require.NoError(t, err)
	require.Len(t, table.Rows, 1)
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"Name", "Class", "Phase", "Identity", "Claim", "Ready", "Age", "Pool", "Node", "Address", "Agent"}, names)
	assert.Equal(t, []interface{}{"mac-1", "standard", "Ready", "id-7", "ci-42", "True"}, table.Rows[0].Cells[:6])
}
