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

package aggregated

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dockerios/dockerios/test/framework"
)

// The plugin as the people it is for meet it: through kube-apiserver, as a
// user who holds nothing but the shipped dockerios-claimer role in their
// namespace. Everything claim, machines and release read, watch and write
// is within that role, through the aggregator's proxy.
func (e *env) testPluginAsAClaimer(t *testing.T) {
	ns := e.namespace(t, "plugin-claimer")
	e.pool(t, ns, "ci")
	e.admin.MustRun(t, "", "create", "rolebinding", "carol-claims", "-n", ns, "--clusterrole=dockerios-claimer", "--user=carol")
	carol := e.user(t, "carol").WithPlugin(t)

	e.machine(t, ns, "ci-a", "ci")
	e.makeReady(t, ns, "ci-a")
	// The apiserver learns of Ready machines from its watch: within
	// moments. A server-side dry run says when it has.
	framework.Eventually(t, 15*time.Second, func() string {
		out := e.admin.MustRun(t, fmt.Sprintf("apiVersion: dockerios.io/v1alpha1\nkind: MacOSMachineClaim\nmetadata: {name: probe, namespace: %s}\nspec: {poolName: ci}\n", ns),
			"create", "-f", "-", "--dry-run=server", "-o", "jsonpath={.status.phase}")
		if out != "Bound" {
			return "a claim would be " + out
		}
		return ""
	})
	r := carol.Run("", "dockerios", "claim", "first", "--pool", "ci", "-n", ns)
	require.NoError(t, r.Err, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	assert.Contains(t, r.Stdout, "MacOSMachineClaim first is Bound to MacOSMachine ci-a, which is Ready.")

	// No machine free: the claim waits, watching through kube-apiserver,
	// until the admin (playing the controller) makes one Ready — the
	// apiserver binds the waiting claim in that very write.
	e.machine(t, ns, "ci-b", "ci")
	run := carol.Start(t, "dockerios", "claim", "second", "--pool", "ci", "-n", ns)
	run.AwaitStderr(t, "claim second: Pending, waiting for a Ready machine of pool ci\n", 30*time.Second)
	e.makeReady(t, ns, "ci-b")
	require.NoError(t, run.Wait(t, 30*time.Second), "stderr:\n%s", run.Stderr())
	assert.Contains(t, run.Stdout(), "MacOSMachineClaim second is Bound to MacOSMachine ci-b, which is Ready.")

	r = carol.Run("", "dockerios", "machines", "-n", ns)
	require.NoError(t, r.Err, r.Stderr)
	for _, line := range []string{`^mmpool/ci\s`, `^├─mm/ci-a\s+Ready\s`, `^│ └─mmclaim/first\s+Bound\s`, `^└─mm/ci-b\s+Ready\s`, `^  └─mmclaim/second\s+Bound\s`} {
		assert.Regexp(t, regexp.MustCompile("(?m)"+line), r.Stdout)
	}

	r = carol.Run("", "dockerios", "release", "first", "second", "-n", ns)
	require.NoError(t, r.Err, r.Stderr)
	assert.Equal(t, "macosmachineclaim.dockerios.io/first released: MacOSMachine ci-a is torn down\n"+
		"macosmachineclaim.dockerios.io/second released: MacOSMachine ci-b is torn down\n", r.Stdout)
	assert.Empty(t, e.admin.MustRun(t, "", "get", "mmclaim", "-n", ns, "-o", "name"))
}
