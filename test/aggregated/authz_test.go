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
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A claimer who claims less often than the delegated authorizer's cache
// lives (10 s) finds both of its questions — create on claims, claim on
// the pool — answered from memory: the apiserver asked them again ahead of
// expiry, so the claim does not wait for two SubjectAccessReviews. And a
// revoked permission stops working within that TTL all the same.
func (e *env) testAuthorizationAnsweredAhead(t *testing.T) {
	ns := e.namespace(t, "authz-ahead")
	e.pool(t, ns, "ci")
	for i := range 4 {
		e.machine(t, ns, fmt.Sprintf("mac-%d", i), "ci")
		e.makeReady(t, ns, fmt.Sprintf("mac-%d", i))
	}
	e.admin.MustRun(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: claims-creator, namespace: %[1]s}
rules:
- apiGroups: [dockerios.io]
  resources: [macosmachineclaims]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ci-claimer, namespace: %[1]s}
rules:
- apiGroups: [dockerios.io]
  resources: [macosmachinepools]
  resourceNames: [ci]
  verbs: [claim]
`, ns), "apply", "-f", "-")
	e.admin.MustRun(t, "", "create", "rolebinding", "hana-creates", "-n", ns, "--role=claims-creator", "--user=hana")
	e.admin.MustRun(t, "", "create", "rolebinding", "hana-claims-ci", "-n", ns, "--role=ci-claimer", "--user=hana")
	hana := e.user(t, "hana")
	claim := func(name string, args ...string) (string, error) {
		manifest := fmt.Sprintf("apiVersion: dockerios.io/v1alpha1\nkind: MacOSMachineClaim\nmetadata: {name: %s, namespace: %s}\nspec: {poolName: ci}\n", name, ns)
		r := hana.Run(manifest, append([]string{"create", "-f", "-", "-o", "jsonpath={.status.phase}"}, args...)...)
		if r.Err != nil {
			return "", fmt.Errorf("%v: %s", r.Err, r.Stderr)
		}
		return r.Stdout, nil
	}
	out, err := claim("first")
	require.NoError(t, err)
	require.Equal(t, "Bound", out)

	// Past the TTL, the next claim's questions are answered from memory.
	// Anybody else's request may be asked meanwhile (the garbage
	// collector's discovery): a claim whose two questions were asked
	// shows as two or more, so one attempt of three with fewer is enough.
	asked := 2
	for attempt := 0; attempt < 3 && asked >= 2; attempt++ {
		time.Sleep(15 * time.Second)
		before := e.authzDecisions(t)
		out, err := claim(fmt.Sprintf("after-pause-%d", attempt))
		require.NoError(t, err)
		require.Equal(t, "Bound", out)
		after := e.authzDecisions(t)
		asked = after["asked"] - before["asked"]
		t.Logf("claim after a 15 s pause: %d decisions asked of kube-apiserver, %d from memory", asked, after["memory"]-before["memory"])
	}
	assert.Less(t, asked, 2, "a claim after a pause longer than the TTL waited for kube-apiserver's answers")

	// The claim verb on the pool is our server's alone to check
	// (kube-apiserver checks create on claims before proxying): revoke it
	// and it is refused within the TTL, asked-ahead answers or not.
	e.admin.MustRun(t, "", "delete", "rolebinding", "hana-claims-ci", "-n", ns)
	revoked := time.Now()
	for {
		_, err := claim("after-revoke", "--dry-run=server")
		if err != nil {
			require.Contains(t, err.Error(), "forbidden")
			break
		}
		require.Less(t, time.Since(revoked), 13*time.Second, "the revoked claim verb still worked past the 10 s TTL")
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("revoked claim verb refused after %s", time.Since(revoked).Round(100*time.Millisecond))
}

// authzDecisions reads dockerios_authorization_decisions_total by source
// from the DockerIOS apiserver's /metrics.
func (e *env) authzDecisions(t *testing.T) map[string]int {
	t.Helper()
	client, header := e.frontProxyClient(t)
	req, err := http.NewRequest(http.MethodGet, e.cp.DockerIOSURL+"/metrics", nil)
	require.NoError(t, err)
	req.Header = header.Clone()
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	counts := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, `dockerios_authorization_decisions_total{source="`)
		if !ok {
			continue
		}
		source, value, _ := strings.Cut(rest, `"} `)
		n, err := strconv.ParseFloat(value, 64)
		require.NoError(t, err, line)
		counts[source] = int(n)
	}
	return counts
}
