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

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/test/framework"
)

// TestInstallSession_ThroughTheAPI: spec.purpose is checked with its field
// path, an install session names its image and joins no pool, its purpose
// never changes, and it is never bound — not by a class claim of its class
// even when it is the only Ready, unbound machine of the class, nor
// through the bind subresource.
func TestInstallSession_ThroughTheAPI(t *testing.T) {
	s := framework.StartLocalServer(t, t.TempDir())
	createClassAndPool(t, s)
	client, err := versioned.NewForConfig(restConfig(t, s.Kubeconfig))
	require.NoError(t, err)
	ctx := context.Background()
	machines := client.DockeriosV1alpha1().MacOSMachines("default")
	session := func(name string, mutate func(*v1alpha1.MacOSMachine)) error {
		m := &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.MacOSMachineSpec{ClassName: "standard", ImageName: "sonoma", Purpose: v1alpha1.MachinePurposeInstall}}
		if mutate != nil {
			mutate(m)
		}
		_, err := machines.Create(ctx, m, metav1.CreateOptions{})
		return err
	}

	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.MacOSMachine)
		want   []string
	}{
		{"unknown purpose", func(m *v1alpha1.MacOSMachine) { m.Spec.Purpose = "Build" },
			[]string{"spec.purpose", `Unsupported value: "Build"`, `"Workload"`, `"Install"`}},
		{"install session without its image", func(m *v1alpha1.MacOSMachine) { m.Spec.ImageName = "" },
			[]string{"spec.imageName", "Required value", "an install session (spec.purpose Install) names the MacOSImage it installs"}},
		{"install session in a pool", func(m *v1alpha1.MacOSMachine) {
			m.Spec.PoolName, m.Labels = "warm", map[string]string{v1alpha1.MachinePoolLabel: "warm"}
		}, []string{"spec.poolName", "an install session never joins a pool"}},
		{"install session labelled for a class claim", func(m *v1alpha1.MacOSMachine) {
			m.Labels = map[string]string{v1alpha1.ClaimUIDLabel: "c0ffee"}
		}, []string{"metadata.labels[dockerios.io/claim-uid]", "an install session (spec.purpose Install) is never bound to a claim"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := session("refused", tc.mutate)
			require.True(t, apierrors.IsInvalid(err), "want 422, got %v", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	require.NoError(t, session("session", nil))
	_, err = machines.Patch(ctx, "session", types.MergePatchType, []byte(`{"spec":{"purpose":"Workload"}}`), metav1.PatchOptions{})
	require.True(t, apierrors.IsInvalid(err), "the purpose is immutable: want 422, got %v", err)
	assert.Contains(t, err.Error(), "field is immutable")

	// Play the controller as a workload machine would have it: Ready. (The
	// controller never makes an install session Ready; the apiserver must
	// not bind one however its status reads.)
	makeReady(t, client, "session", "10.244.0.20")
	claims := client.DockeriosV1alpha1().MacOSMachineClaims("default")
	claim, err := claims.Create(ctx, &v1alpha1.MacOSMachineClaim{ObjectMeta: metav1.ObjectMeta{Name: "ci-1"},
		Spec: v1alpha1.MacOSMachineClaimSpec{ClassName: "standard"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.ClaimPending, claim.Status.Phase)

	_, err = claims.Bind(ctx, "ci-1", &v1alpha1.MacOSMachineBinding{MachineName: "session"}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "want 409, got %v", err)
	assert.Contains(t, err.Error(), "the machine is an install session (spec.purpose Install), which is never bound")

	// Another status write of the session (the controller's next pass)
	// hands it to no waiting claim either.
	setStatus(t, client, "session", func(m *v1alpha1.MacOSMachine) { m.Status.NodeName = "node-2" })
	time.Sleep(time.Second)
	claim, err = claims.Get(ctx, "ci-1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.ClaimPending, claim.Status.Phase)
	assert.Empty(t, claim.Status.MachineName)
	m, err := machines.Get(ctx, "session", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, m.Status.ClaimRef, "the install session is bound to nothing")
}
