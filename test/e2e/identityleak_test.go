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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/test/framework"
)

// The resources a namespace viewer must be able to read for the test to
// prove anything: everything DockerIOS makes or writes about a machine
// that the view role shows (the VirtualMachine and its instance carry the
// SMBIOS serial, UUID and MAC — KubeVirt takes them from nowhere else — and
// KubeVirt's own roles decide who reads them; here nothing grants them).
var viewerMustRead = []string{
	"macosmachines.dockerios.io", "macosmachineclaims.dockerios.io", "macosmachinepools.dockerios.io",
	"jobs.batch", "pods", "events", "events.events.k8s.io", "persistentvolumeclaims",
}

// Identity values reach no one who may not read MacOSIdentity: a user
// bound to the view ClusterRole in the namespace of Ready, claimed and
// warm machines — their identities imported with the kubectl plugin, as an
// operator does — reads everything the role lets them read there with the
// real kubectl, and finds none of the values in any spelling, in any
// object or list; Secrets and MacOSIdentities are refused.
func (e *env) testNoIdentityValueForViewers(t *testing.T) {
	ctx := context.Background()
	ns := e.namespace(t, "viewed")
	e.fleet(t, "viewed", 0, nil)
	values := e.takeIdentityValues(t, 2)

	// Imported as an operator imports them: names are the plugin's.
	var csv strings.Builder
	for _, v := range values {
		fmt.Fprintf(&csv, "%q,%q,%q,%q,%q,\"1920\",\"1080\",\"\"\n", v.Model, v.SerialNumber, v.BoardSerialNumber, v.SystemUUID, v.MACAddress)
	}
	file := filepath.Join(t.TempDir(), "serials.csv")
	require.NoError(t, os.WriteFile(file, []byte(csv.String()), 0o600))
	r := e.admin.WithPlugin(t).Run("", "dockerios", "identities", "import", "--pool", "viewed", file)
	require.NoError(t, r.Err, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stdout, "2 created, 0 already present, 0 rejected")

	// A claimed machine and a warm one, both Ready: every object the
	// controller and the harness make for a machine exists twice.
	e.createPool(t, ns, "warm", v1alpha1.MacOSMachinePoolSpec{ClassName: "viewed", Replicas: ptr.To[int32](1), MaxMachines: ptr.To[int32](2)})
	_, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).Create(ctx, &v1alpha1.MacOSMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "build"}, Spec: v1alpha1.MacOSMachineClaimSpec{PoolName: "warm"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.waitPool(t, ns, "warm", 2*time.Minute, func(p *v1alpha1.MacOSMachinePool) bool {
		return p.Status.ReadyReplicas == 1 && p.Status.BoundMachines == 1
	})
	for _, m := range e.machines(t, ns) {
		e.waitMachine(t, ns, m.Name, time.Minute, "Ready", phaseIs(v1alpha1.MachineReady))
	}

	forms := valueForms(values)
	// The search finds the values where they are: the VirtualMachines
	// (read here by the admin) carry the serial, UUID and MAC.
	vms := e.admin.MustRun(t, "", "get", "virtualmachines.kubevirt.io", "-n", ns, "-o", "json")
	require.NotEmpty(t, leaks(vms, forms), "the search does not find values in the VirtualMachines, which carry them")

	e.admin.MustRun(t, "", "create", "rolebinding", "viewer", "-n", ns, "--clusterrole=view", "--user=viola")
	viola := framework.NewKubectl(t, e.cp.UserKubeconfig(t, "viola"))
	// Role aggregation and the apiserver's authorization cache take a
	// moment to admit a new grant.
	framework.Eventually(t, 30*time.Second, func() string {
		if r := viola.Run("", "get", "macosmachines", "-n", ns); r.Err != nil {
			return "the viewer cannot read machines yet: " + r.Stderr
		}
		return ""
	})

	resources := strings.Fields(viola.MustRun(t, "", "api-resources", "--namespaced=true", "--verbs=list", "-o", "name"))
	require.Subset(t, resources, append([]string{"secrets"}, viewerMustRead...), "discovery as the viewer")
	var read, refused []string
	for _, res := range resources {
		r := viola.Run("", "get", res, "-n", ns, "-o", "json")
		if r.Err != nil {
			require.Contains(t, r.Stderr, "Forbidden", "get %s: %s", res, r.Stderr)
			refused = append(refused, res)
			continue
		}
		read = append(read, res)
		assert.Empty(t, leaks(r.Stdout, forms), "the viewer's list of %s shows identity values", res)
		var list struct{ Items []json.RawMessage }
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &list), "get %s", res)
		if slices.Contains(viewerMustRead, res) {
			assert.NotEmpty(t, list.Items, "no %s in %s: nothing was checked", res, ns)
		}
	}
	sort.Strings(read)
	t.Logf("the viewer read %d resources (%s) and was refused %d (%s)", len(read), strings.Join(read, ", "), len(refused), strings.Join(refused, ", "))
	assert.Subset(t, read, viewerMustRead, "the view role reads these")
	assert.Contains(t, refused, "secrets", "the view role never reads Secrets: the identity's values are in one")

	// The same objects as YAML, and as kubectl describe shows them (with
	// their Events).
	for _, args := range [][]string{
		{"get", strings.Join(viewerMustRead, ","), "-n", ns, "-o", "yaml"},
		{"describe", "macosmachines,macosmachineclaims,macosmachinepools,jobs,pods,persistentvolumeclaims", "-n", ns},
	} {
		out := viola.MustRun(t, "", args...)
		assert.Empty(t, leaks(out, forms), "kubectl %s shows identity values", strings.Join(args, " "))
	}

	// Identities themselves are refused, by name and as a list; so is the
	// identity Secret of each machine.
	for _, m := range e.machines(t, ns) {
		require.NotNil(t, m.Status.IdentityRef, "machine %s", m.Name)
		r := viola.Run("", "get", "macosidentities", m.Status.IdentityRef.Name, "-o", "json")
		require.Error(t, r.Err, "the viewer read identity %s", m.Status.IdentityRef.Name)
		assert.Contains(t, r.Stderr, "Forbidden")
		assert.Empty(t, leaks(r.Stdout+r.Stderr, forms))
		r = viola.Run("", "get", "secret", m.Name+"-identity", "-n", ns, "-o", "json")
		require.Error(t, r.Err, "the viewer read the identity Secret of %s", m.Name)
		assert.Contains(t, r.Stderr, "Forbidden")
	}
	r = viola.Run("", "get", "macosidentities")
	require.Error(t, r.Err)
	assert.Contains(t, r.Stderr, "Forbidden")
}

// takeIdentityValues takes the next n identities of the package's
// generator, so they repeat no other test's.
func (e *env) takeIdentityValues(t testing.TB, n int) []identity.Values {
	t.Helper()
	e.mu.Lock()
	from := e.nextIdent
	e.nextIdent += n
	e.mu.Unlock()
	gen := identity.NewGenerator(7, model)
	for range from {
		gen.Next()
	}
	out := make([]identity.Values, n)
	for i := range out {
		out[i] = gen.Next()
	}
	return out
}

// valueForms are the spellings of the identities' values a reader could
// recognise: as stored, the UUID without dashes, the MAC with colons,
// dashes or nothing (which is the ROM).
func valueForms(values []identity.Values) []string {
	var out []string
	for _, v := range values {
		out = append(out, v.SerialNumber, v.BoardSerialNumber, v.SystemUUID, strings.ReplaceAll(v.SystemUUID, "-", ""),
			v.MACAddress, strings.ReplaceAll(v.MACAddress, ":", "-"), strings.ReplaceAll(v.MACAddress, ":", ""), v.ROM)
	}
	return out
}

// leaks returns the forms found in s, ignoring case.
func leaks(s string, forms []string) []string {
	s = strings.ToLower(s)
	var found []string
	for _, f := range forms {
		if strings.Contains(s, strings.ToLower(f)) {
			found = append(found, f)
		}
	}
	return found
}
