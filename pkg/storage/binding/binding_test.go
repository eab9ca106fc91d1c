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

package binding_test

import (
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/api/meta"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	machinestorage "github.com/dockerios/dockerios/pkg/registry/macosmachine/storage"
	claimstorage "github.com/dockerios/dockerios/pkg/registry/macosmachineclaim/storage"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
	"github.com/dockerios/dockerios/pkg/storage/binding"
)

type env struct {
	machines machinestorage.MachineStorage
	claims   claimstorage.ClaimStorage
	binder   *binding.Binder
	getter   *registrytest.RESTOptionsGetter
}

// newEnv returns machine and claim storage over one etcd holding class
// standard (pool imacpro, no identities: machines wait, which binding does
// not care about), deciding custom verbs with authz.
func newEnv(t *testing.T, authz authorizer.Authorizer) *env {
	t.Helper()
	getter := registrytest.NewRESTOptionsGetter(t)
	registrytest.Seed(t, getter, registrytest.MachineClass("standard"), registrytest.MachineClass("gpu"), registrytest.IdentityPool("imacpro"),
		registrytest.MachinePool("warm"))
	ledger, binder := registrytest.NewLedgerAndBinder(t, getter)
	machines, err := machinestorage.NewStorage(getter, ledger, registrytest.AllowAll)
	require.NoError(t, err)
	t.Cleanup(machines.Machine.DestroyFunc)
	claims, err := claimstorage.NewStorage(getter, claimstorage.Deps{Binder: binder, Classes: ledger, Authorizer: authz})
	require.NoError(t, err)
	t.Cleanup(claims.Claim.DestroyFunc)
	return &env{machines: machines, claims: claims, binder: binder, getter: getter}
}

var alice = &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}}

func (e *env) ctx() context.Context {
	ctx := genericregistrytest.NewNamespaceScopeContext(e.machines.Machine.Store.Store, metav1.NamespaceDefault)
	return genericapirequest.WithUser(ctx, alice)
}

// readyMachine creates a machine of pool warm and reports it Ready, as the
// controller does once the guest agent says so.
func (e *env) readyMachine(t *testing.T, name string, mutate ...func(*dockerio.MacOSMachine)) *dockerio.MacOSMachine {
	t.Helper()
	m := registrytest.Machine(name)
	m.Spec.PoolName = "warm"
	m.Labels = map[string]string{"xcode": "16"}
	for _, f := range mutate {
		f(m)
	}
	obj, err := e.machines.Machine.Create(e.ctx(), m, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	ready := obj.(*dockerio.MacOSMachine).DeepCopy()
	ready.Status.Phase = dockerio.MachineReady
	ready.Status.Conditions = append(ready.Status.Conditions, metav1.Condition{
		Type: "Ready", Status: metav1.ConditionTrue, Reason: "AgentReady", Message: "the guest agent reports Ready", LastTransitionTime: metav1.Now(),
	})
	obj, _, err = e.machines.Status.Update(e.ctx(), name, rest.DefaultUpdatedObjectInfo(ready), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	return obj.(*dockerio.MacOSMachine)
}

func (e *env) claim(t *testing.T, name string) *dockerio.MacOSMachineClaim {
	t.Helper()
	obj, err := e.claims.Claim.Create(e.ctx(), registrytest.MachineClaim(name), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	return obj.(*dockerio.MacOSMachineClaim)
}

func (e *env) bind(claim, machine string) (*dockerio.MacOSMachineClaim, error) {
	obj, err := e.claims.Bind.Create(e.ctx(), claim, &dockerio.MacOSMachineBinding{MachineName: machine}, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return obj.(*dockerio.MacOSMachineClaim), nil
}

func (e *env) getMachine(t *testing.T, name string) *dockerio.MacOSMachine {
	t.Helper()
	obj, err := e.machines.Machine.Get(e.ctx(), name, &metav1.GetOptions{})
	require.NoError(t, err)
	return obj.(*dockerio.MacOSMachine)
}

func (e *env) getClaim(t *testing.T, name string) *dockerio.MacOSMachineClaim {
	t.Helper()
	obj, err := e.claims.Claim.Get(e.ctx(), name, &metav1.GetOptions{})
	require.NoError(t, err)
	return obj.(*dockerio.MacOSMachineClaim)
}

func TestBind_WritesClaimAndMachineTogether(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.strayMachine(t, "mac-1")
	c := e.claim(t, "ci-1")

	bound, err := e.bind("ci-1", "mac-1")
	require.NoError(t, err)
	assert.Equal(t, dockerio.ClaimBound, bound.Status.Phase)
	assert.Equal(t, "mac-1", bound.Status.MachineName)
	assert.NotNil(t, bound.Status.BoundTime)

	m := e.getMachine(t, "mac-1")
	require.NotNil(t, m.Status.ClaimRef)
	assert.Equal(t, dockerio.ClaimReference{Name: "ci-1", UID: string(c.UID)}, *m.Status.ClaimRef)
	assert.Equal(t, bound.ResourceVersion, m.ResourceVersion, "one transaction wrote both")
}

func TestBind_RefusesWithTheReason(t *testing.T) {
	cases := map[string]struct {
		setup func(t *testing.T, e *env)
		// claimed, if set, runs once the claim is made.
		claimed func(t *testing.T, e *env)
		want    string
	}{
		// Made Lost through /status while waiting, it left its pool's
		// queue; bound, it would be the one way out of Lost.
		"claim made Lost": {
			setup: func(t *testing.T, e *env) { e.strayMachine(t, "mac-1") },
			claimed: func(t *testing.T, e *env) {
				lost := e.getClaim(t, "ci-1")
				lost.Status.Phase = dockerio.ClaimLost
				_, _, err := e.claims.Status.Update(e.ctx(), "ci-1", rest.DefaultUpdatedObjectInfo(lost),
					rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
				require.NoError(t, err)
			},
			want: "the claim is Lost",
		},
		"machine not Ready": {
			setup: func(t *testing.T, e *env) {
				_, err := e.machines.Machine.Create(e.ctx(), func() *dockerio.MacOSMachine {
					m := registrytest.Machine("mac-1")
					m.Spec.PoolName = "warm"
					return m
				}(), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
				require.NoError(t, err)
			},
			want: "the machine is not Ready",
		},
		"machine already bound": {
			setup: func(t *testing.T, e *env) {
				e.strayMachine(t, "mac-1")
				e.claim(t, "first")
				_, err := e.bind("first", "mac-1")
				require.NoError(t, err)
			},
			want: "the machine is already bound to MacOSMachineClaim first",
		},
		"machine being deleted": {
			setup: func(t *testing.T, e *env) {
				e.readyMachine(t, "mac-1")
				_, _, err := e.machines.Machine.Delete(e.ctx(), "mac-1", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
				require.NoError(t, err)
			},
			want: "the machine is being deleted",
		},
		"machine of another pool": {
			setup: func(t *testing.T, e *env) {
				e.readyMachine(t, "mac-1", func(m *dockerio.MacOSMachine) { m.Spec.PoolName = "cold" })
			},
			want: "the claim asks for pool warm, the machine is of pool \"cold\"",
		},
		// Validation keeps an install session out of pools and off class
		// claims' labels; the bind subresource refuses it all the same,
		// and says why before any other mismatch.
		"machine is an install session": {
			setup: func(t *testing.T, e *env) {
				e.readyMachine(t, "mac-1", installSession)
			},
			want: "the machine is an install session (spec.purpose Install), which is never bound",
		},
		"machine not matching the selector": {
			setup: func(t *testing.T, e *env) {
				e.readyMachine(t, "mac-1", func(m *dockerio.MacOSMachine) { m.Labels = map[string]string{"xcode": "15"} })
			},
			want: "do not match the claim's selector xcode=16",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, registrytest.AllowAll)
			tc.setup(t, e)
			e.claim(t, "ci-1")
			if tc.claimed != nil {
				tc.claimed(t, e)
			}
			_, err := e.bind("ci-1", "mac-1")
			require.True(t, apierrors.IsConflict(err), "want 409, got %v", err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Empty(t, e.getClaim(t, "ci-1").Status.MachineName, "a refused bind writes nothing")
		})
	}
}

// installSession makes a machine an install session of image sonoma: of
// no pool, labelled for no claim (validation refuses either).
func installSession(m *dockerio.MacOSMachine) {
	m.Spec.PoolName, m.Labels = "", nil
	m.Spec.Purpose, m.Spec.ImageName = dockerio.MachinePurposeInstall, "sonoma"
}

// A class claim is never bound to an install session of its class, even
// the only Ready, unbound machine of the class.
func TestBind_ClassClaimsNeverBindAnInstallSession(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.readyMachine(t, "session", installSession)
	claim := registrytest.MachineClaim("ci-1")
	claim.Spec.PoolName, claim.Spec.ClassName, claim.Spec.Selector = "", "standard", nil
	obj, err := e.claims.Claim.Create(e.ctx(), claim, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, dockerio.ClaimPending, obj.(*dockerio.MacOSMachineClaim).Status.Phase)
	_, err = e.bind("ci-1", "session")
	require.True(t, apierrors.IsConflict(err), "want 409, got %v", err)
	assert.Contains(t, err.Error(), "install session")
	assert.Nil(t, e.getMachine(t, "session").Status.ClaimRef)
	assert.Empty(t, e.getClaim(t, "ci-1").Status.MachineName)
}

// An install session stored in a pool anyway (before validation refused
// it, or by a write that bypassed it) is never in the pool's bindable
// index: a pool claim never takes it.
func TestIsBindable_NeverAnInstallSession(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	m := e.readyMachine(t, "mac-1")
	require.True(t, binding.IsBindable(m), "the fixture is a Ready, unbound machine of pool warm")
	m = m.DeepCopy()
	m.Spec.Purpose, m.Spec.ImageName = dockerio.MachinePurposeInstall, "sonoma"
	assert.False(t, binding.IsBindable(m))
	assert.True(t, e.binder.TouchesClaims(e.getMachine(t, "mac-1"), m), "becoming an install session takes it out of the index")
}

func TestBind_ABoundClaimIsNeverReBound(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.strayMachine(t, "mac-1")
	e.strayMachine(t, "mac-2")
	e.claim(t, "ci-1")
	_, err := e.bind("ci-1", "mac-1")
	require.NoError(t, err)
	_, err = e.bind("ci-1", "mac-2")
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	assert.Contains(t, err.Error(), "already bound to MacOSMachine mac-1")
	assert.Nil(t, e.getMachine(t, "mac-2").Status.ClaimRef)
}

func TestBind_ClassClaimsBindMachinesOfTheirClass(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.readyMachine(t, "mac-gpu", func(m *dockerio.MacOSMachine) { m.Spec.ClassName, m.Spec.PoolName = "gpu", "" })
	claim := registrytest.MachineClaim("ci-1")
	claim.Spec.PoolName, claim.Spec.ClassName, claim.Spec.Selector = "", "standard", nil
	_, err := e.claims.Claim.Create(e.ctx(), claim, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.bind("ci-1", "mac-gpu")
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	assert.Contains(t, err.Error(), "the claim asks for class standard, the machine is of class gpu")
}

// A class claim is bound only to the machine made for it: not to a warm
// machine of a pool, nor to the machine made for another class claim.
func TestBind_ClassClaimsBindOnlyTheMachineMadeForThem(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	claim := registrytest.MachineClaim("ci-1")
	claim.Spec.PoolName, claim.Spec.ClassName, claim.Spec.Selector = "", "standard", nil
	obj, err := e.claims.Claim.Create(e.ctx(), claim, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	uid := string(obj.(*dockerio.MacOSMachineClaim).UID)
	e.readyMachine(t, "warm-1")
	e.readyMachine(t, "other-claims", func(m *dockerio.MacOSMachine) {
		m.Spec.PoolName, m.Labels = "", map[string]string{v1alpha1.ClaimUIDLabel: "another-claims-uid"}
	})
	e.readyMachine(t, "unlabelled", func(m *dockerio.MacOSMachine) { m.Spec.PoolName, m.Labels = "", nil })
	for _, name := range []string{"warm-1", "other-claims", "unlabelled"} {
		_, err = e.bind("ci-1", name)
		require.True(t, apierrors.IsConflict(err), "%s: want 409, got %v", name, err)
		assert.Contains(t, err.Error(), "the machine was not made for this claim", name)
		assert.Nil(t, e.getMachine(t, name).Status.ClaimRef, name)
	}
	e.readyMachine(t, "ci-1", func(m *dockerio.MacOSMachine) {
		m.Spec.PoolName, m.Labels = "", map[string]string{v1alpha1.ClaimUIDLabel: uid}
	})
	bound, err := e.bind("ci-1", "ci-1")
	require.NoError(t, err)
	assert.Equal(t, "ci-1", bound.Status.MachineName)
}

func TestBind_RefusesABindingForAnotherNamespaceOrClaim(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.strayMachine(t, "mac-1")
	e.claim(t, "ci-1")
	for _, b := range []*dockerio.MacOSMachineBinding{
		{MachineName: "mac-1", MachineNamespace: "elsewhere"},
		{ObjectMeta: metav1.ObjectMeta{Name: "other-claim"}, MachineName: "mac-1"},
		{MachineName: ""},
	} {
		_, err := e.claims.Bind.Create(e.ctx(), "ci-1", b, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		assert.True(t, apierrors.IsInvalid(err), "want 422 for %+v, got %v", b, err)
	}
}

func TestBind_DryRunWritesNothing(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.strayMachine(t, "mac-1")
	e.claim(t, "ci-1")
	obj, err := e.claims.Bind.Create(e.ctx(), "ci-1", &dockerio.MacOSMachineBinding{MachineName: "mac-1"}, rest.ValidateAllObjectFunc, &metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	assert.Equal(t, "mac-1", obj.(*dockerio.MacOSMachineClaim).Status.MachineName)
	assert.Empty(t, e.getClaim(t, "ci-1").Status.MachineName)
	assert.Nil(t, e.getMachine(t, "mac-1").Status.ClaimRef)
}

func TestClaimDelete_FreesTheMachineInTheSameWrite(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.strayMachine(t, "mac-1")
	e.claim(t, "ci-1")
	_, err := e.bind("ci-1", "mac-1")
	require.NoError(t, err)

	_, _, err = e.claims.Claim.Delete(e.ctx(), "ci-1", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)
	m := e.getMachine(t, "mac-1")
	assert.Nil(t, m.Status.ClaimRef)
	released := meta.FindStatusCondition(m.Status.Conditions, dockerio.MachineReleased)
	require.NotNil(t, released, "the freed machine is marked Released in the same write")
	assert.Equal(t, metav1.ConditionTrue, released.Status)
	assert.Equal(t, binding.ReasonClaimDeleted, released.Reason)
	assert.Contains(t, released.Message, "MacOSMachineClaim ci-1 was deleted")

	// A released machine had a workload on it: never bound again...
	e.claim(t, "ci-2")
	_, err = e.bind("ci-2", "mac-1")
	require.True(t, apierrors.IsConflict(err), "want 409, got %v", err)
	assert.Contains(t, err.Error(), "the machine served a claim that was deleted and is being disposed of")

	// ...and the controller's status writes can neither clear the mark
	// nor forge it.
	cleared := m.DeepCopy()
	meta.RemoveStatusCondition(&cleared.Status.Conditions, dockerio.MachineReleased)
	_, _, err = e.machines.Status.Update(e.ctx(), "mac-1", rest.DefaultUpdatedObjectInfo(cleared), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.True(t, meta.IsStatusConditionTrue(e.getMachine(t, "mac-1").Status.Conditions, dockerio.MachineReleased))

	forged := e.readyMachine(t, "mac-2").DeepCopy()
	meta.SetStatusCondition(&forged.Status.Conditions, metav1.Condition{Type: dockerio.MachineReleased, Status: metav1.ConditionTrue, Reason: "Forged", Message: "x"})
	_, _, err = e.machines.Status.Update(e.ctx(), "mac-2", rest.DefaultUpdatedObjectInfo(forged), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Nil(t, meta.FindStatusCondition(e.getMachine(t, "mac-2").Status.Conditions, dockerio.MachineReleased))
}

func TestMachineGone_LeavesItsClaimLost(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	e.strayMachine(t, "mac-1")
	e.claim(t, "ci-1")
	_, err := e.bind("ci-1", "mac-1")
	require.NoError(t, err)

	obj, _, err := e.machines.Machine.Delete(e.ctx(), "mac-1", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)
	marked := obj.(*dockerio.MacOSMachine)
	require.NotNil(t, marked.DeletionTimestamp, "the teardown finalizer holds the machine")
	c := e.getClaim(t, "ci-1")
	assert.Equal(t, dockerio.ClaimLost, c.Status.Phase, "Lost as the teardown starts, not when it ends")
	assert.Equal(t, marked.ResourceVersion, c.ResourceVersion, "in the very write that marks the machine")
	lostAt := c.ResourceVersion
	m := marked.DeepCopy()
	m.Finalizers = nil
	_, _, err = e.machines.Machine.Update(e.ctx(), "mac-1", rest.DefaultUpdatedObjectInfo(m), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)

	c = e.getClaim(t, "ci-1")
	assert.Equal(t, dockerio.ClaimLost, c.Status.Phase)
	assert.Equal(t, "mac-1", c.Status.MachineName, "the claim still says which machine it lost")
	assert.Equal(t, lostAt, c.ResourceVersion, "the machine going writes the Lost claim no more")
}

func TestBind_50ClaimsRaceFor20Machines(t *testing.T) {
	e := newEnv(t, registrytest.AllowAll)
	const machines, claims = 20, 50
	for i := range machines {
		e.strayMachine(t, fmt.Sprintf("mac-%02d", i))
	}
	for i := range claims {
		e.claim(t, fmt.Sprintf("ci-%02d", i))
	}
	// Every claim tries every machine, in its own order, until one binds.
	var wg sync.WaitGroup
	for i := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range machines {
				if _, err := e.bind(fmt.Sprintf("ci-%02d", i), fmt.Sprintf("mac-%02d", (i+j)%machines)); err == nil {
					return
				} else if !apierrors.IsConflict(err) {
					t.Errorf("ci-%02d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()

	boundTo := map[string]string{}
	pending := 0
	for i := range claims {
		c := e.getClaim(t, fmt.Sprintf("ci-%02d", i))
		if c.Status.MachineName == "" {
			pending++
			continue
		}
		if other, dup := boundTo[c.Status.MachineName]; dup {
			t.Errorf("machine %s bound to both %s and %s", c.Status.MachineName, other, c.Name)
		}
		boundTo[c.Status.MachineName] = c.Name
		m := e.getMachine(t, c.Status.MachineName)
		require.NotNil(t, m.Status.ClaimRef)
		assert.Equal(t, c.Name, m.Status.ClaimRef.Name, "machine and claim agree")
	}
	assert.Len(t, boundTo, machines)
	assert.Equal(t, claims-machines, pending)
}

func TestCustomVerbs_ForbiddenSaysWhichVerbOnWhichObject(t *testing.T) {
	deny := func(verb string) authorizer.Authorizer {
		return authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
			if a.GetVerb() == verb {
				return authorizer.DecisionDeny, "", nil
			}
			return authorizer.DecisionAllow, "", nil
		})
	}
	t.Run("claim on the pool", func(t *testing.T) {
		e := newEnv(t, deny("claim"))
		_, err := e.claims.Claim.Create(e.ctx(), registrytest.MachineClaim("ci-1"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "got %v", err)
		assert.Contains(t, err.Error(), `user "alice" cannot claim macosmachinepools/warm in namespace default`)
	})
	t.Run("use on the identity pool of a class claim", func(t *testing.T) {
		e := newEnv(t, deny("use"))
		c := registrytest.MachineClaim("ci-1")
		c.Spec.PoolName, c.Spec.ClassName = "", "standard"
		_, err := e.claims.Claim.Create(e.ctx(), c, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "got %v", err)
		assert.Contains(t, err.Error(), `user "alice" cannot use macosidentitypools/imacpro`)
	})
	t.Run("bind on the machine", func(t *testing.T) {
		e := newEnv(t, deny("bind"))
		e.strayMachine(t, "mac-1")
		e.claim(t, "ci-1")
		_, err := e.bind("ci-1", "mac-1")
		require.True(t, apierrors.IsForbidden(err), "got %v", err)
		assert.Contains(t, err.Error(), `user "alice" cannot bind macosmachines/mac-1 in namespace default`)
		assert.Nil(t, e.getMachine(t, "mac-1").Status.ClaimRef)
	})
}
