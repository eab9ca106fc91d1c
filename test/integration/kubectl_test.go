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

// Package integration drives the real apiserver binary, in --local mode with
// its embedded etcd, with the real kubectl: what a user types is what is tested.
package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dockerios/dockerios/test/framework"
)

// examplesDir holds the manifests docs/users/pools-and-classes.md applies.
func examplesDir(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "artifacts", "examples")
	_, err := os.Stat(dir)
	require.NoError(t, err)
	return dir
}

func startServer(t *testing.T) (*framework.LocalServer, *framework.Kubectl) {
	t.Helper()
	s := framework.StartLocalServer(t, t.TempDir())
	return s, framework.NewKubectl(t, s.Kubeconfig)
}

func TestKubectl_APIResourcesListsEveryKindWithShortNamesAndVerbs(t *testing.T) {
	_, k := startServer(t)
	out := k.MustRun(t, "", "api-resources", "--api-group=dockerios.io", "-o", "wide", "--no-headers")

	type resource struct{ short, namespaced, kind, verbs, categories string }
	got := map[string]resource{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		require.GreaterOrEqual(t, len(f), 6, "unexpected line %q", line)
		r := resource{short: f[1], namespaced: f[3], kind: f[4], verbs: f[5]}
		if len(f) > 6 {
			r.categories = f[6]
		}
		got[f[0]] = r
	}
	allVerbs := "create,delete,deletecollection,get,list,patch,update,watch"
	want := map[string]resource{
		"macosmachineclasses": {"mmclass", "false", "MacOSMachineClass", allVerbs, "dockerios"},
		"macosimages":         {"mimg", "false", "MacOSImage", allVerbs, "dockerios"},
		"macosidentitypools":  {"mipool", "false", "MacOSIdentityPool", allVerbs, "dockerios"},
		"macosidentities":     {"mid", "false", "MacOSIdentity", allVerbs, ""},
		"macosmachines":       {"mm", "true", "MacOSMachine", allVerbs, "dockerios"},
		"macosmachinepools":   {"mmpool", "true", "MacOSMachinePool", allVerbs, "dockerios"},
		"macosmachineclaims":  {"mmclaim", "true", "MacOSMachineClaim", allVerbs, "dockerios"},
	}
	assert.Equal(t, want, got)
}

// TestKubectl_Tour walks the tour of docs/users/pools-and-classes.md in order on one server: each
// step depends on the state the previous ones left.
func TestKubectl_Tour(t *testing.T) {
	_, k := startServer(t)
	examples := examplesDir(t)

	// A watch started before anything exists sees every change that follows.
	watch := k.Stream(t, "get", "macosmachines", "--watch", "--no-headers",
		"-o", "custom-columns=NAME:.metadata.name,PHASE:.status.phase,DELETING:.metadata.deletionTimestamp")

	t.Run("create -f", func(t *testing.T) {
		out := k.MustRun(t, "", "create", "-f", examples)
		for _, want := range []string{
			"macosidentitypool.dockerios.io/imacpro created",
			"macosidentity.dockerios.io/imacpro-0001 created",
			"macosimage.dockerios.io/sonoma created",
			"macosmachineclass.dockerios.io/standard created",
			"macosmachine.dockerios.io/mac-1 created",
			"macosmachinepool.dockerios.io/warm created",
			"macosmachineclaim.dockerios.io/build-42 created",
		} {
			assert.Contains(t, out, want)
		}
	})

	t.Run("get shows columns", func(t *testing.T) {
		out := k.MustRun(t, "", "get", "mm")
		assert.Regexp(t, `(?m)^NAME\s+CLASS\s+PHASE\s+IDENTITY\s+CLAIM\s+READY\s+AGE$`, out)
		assert.Regexp(t, `(?m)^mac-1\s+standard\s+Pending\s+imacpro-0001\s+<none>\s+Unknown\s+\S+$`, out, "the machine took the pool's one identity at create")

		out = k.MustRun(t, "", "get", "mmclass", "standard")
		assert.Regexp(t, `(?m)^standard\s+sonoma\s+imacpro\s+4\s+16Gi\s+128Gi \(sata\)`, out)

		out = k.MustRun(t, "", "get", "mmpool", "warm", "-o", "wide")
		assert.Regexp(t, `(?m)^warm\s+standard\s+2\s+0\s+0\s+0\s+\S+\s+10\s+dockerios.io/pool=warm$`, out)

		out = k.MustRun(t, "", "get", "dockerios")
		for _, kind := range []string{"macosmachine.dockerios.io/mac-1", "macosmachineclass.dockerios.io/standard", "macosmachineclaim.dockerios.io/build-42"} {
			assert.Contains(t, out, kind, "kubectl get dockerios lists the category")
		}
		assert.NotContains(t, out, "macosidentity.dockerios.io/", "identities are in no category")
	})

	t.Run("get -o yaml shows defaults and the teardown finalizer", func(t *testing.T) {
		out := k.MustRun(t, "", "get", "mmclass", "standard", "-o", "yaml")
		for _, want := range []string{"model: Penryn", "smbiosModel: iMacPro1,1", "bus: sata", "startTimeout: 20m0s", "width: 1920"} {
			assert.Contains(t, out, want)
		}
		out = k.MustRun(t, "", "get", "mm", "mac-1", "-o", "yaml")
		assert.Contains(t, out, "- dockerios.io/teardown")
		assert.Contains(t, out, "phase: Pending")
	})

	t.Run("describe", func(t *testing.T) {
		out := k.MustRun(t, "", "describe", "mmclaim", "build-42")
		assert.Regexp(t, `(?m)^Name:\s+build-42$`, out)
		assert.Regexp(t, `(?m)^\s+Pool Name:\s+warm$`, out)
		assert.Regexp(t, `(?m)^\s+Phase:\s+Pending$`, out)
	})

	t.Run("explain from OpenAPI v3", func(t *testing.T) {
		out := k.MustRun(t, "", "explain", "macosmachine.spec")
		assert.Contains(t, out, "KIND:       MacOSMachine")
		assert.Regexp(t, `className\s+<string> -required-`, out)
		assert.Contains(t, out, "MacOSMachineClass giving the machine its shape")
		out = k.MustRun(t, "", "explain", "macosmachineclass.spec.systemDisk.bus")
		assert.Contains(t, out, "nvme")
	})

	t.Run("apply --server-side twice is a no-op, a foreign change is a conflict", func(t *testing.T) {
		manifest := `apiVersion: dockerios.io/v1alpha1
kind: MacOSMachineClass
metadata:
  name: gpu
spec:
  memory: 32Gi
  systemDisk: {size: 256Gi}
  imageName: sonoma
  identityPoolName: imacpro
`
		k.MustRun(t, manifest, "apply", "--server-side", "-f", "-")
		rv1 := k.MustRun(t, "", "get", "mmclass", "gpu", "-o", "jsonpath={.metadata.resourceVersion}")
		k.MustRun(t, manifest, "apply", "--server-side", "-f", "-")
		rv2 := k.MustRun(t, "", "get", "mmclass", "gpu", "-o", "jsonpath={.metadata.resourceVersion}")
		assert.Equal(t, rv1, rv2, "re-applying the same manifest must not write")

		r := k.Run(strings.Replace(manifest, "32Gi", "64Gi", 1), "apply", "--server-side", "--field-manager=someone-else", "-f", "-")
		require.Error(t, r.Err)
		assert.Contains(t, r.Stderr, "conflict")
		assert.Contains(t, r.Stderr, ".spec.memory")
	})

	t.Run("patch --subresource=status then wait for the condition", func(t *testing.T) {
		k.MustRun(t, "", "patch", "mm", "mac-1", "--subresource=status", "--type=merge", "-p",
			`{"status":{"phase":"Ready","conditions":[{"type":"Ready","status":"True","reason":"AgentReady","message":"the guest agent reports Ready","lastTransitionTime":"2026-11-29T12:00:00Z"}]}}`)
		out := k.MustRun(t, "", "wait", "--for=condition=Ready", "mm/mac-1", "--timeout=30s")
		assert.Contains(t, out, "condition met")
		out = k.MustRun(t, "", "get", "mm", "mac-1", "--no-headers")
		assert.Regexp(t, `^mac-1\s+standard\s+Ready\s+imacpro-0001\s+<none>\s+True`, out)

		// The status subresource cannot reach the spec.
		k.MustRun(t, "", "patch", "mm", "mac-1", "--subresource=status", "--type=merge", "-p", `{"spec":{"className":"gpu"}}`)
		assert.Equal(t, "standard", k.MustRun(t, "", "get", "mm", "mac-1", "-o", "jsonpath={.spec.className}"))
	})

	t.Run("field selectors", func(t *testing.T) {
		out := k.MustRun(t, "", "get", "mm", "--field-selector", "status.phase=Ready", "-o", "name")
		assert.Equal(t, "macosmachine.dockerios.io/mac-1\n", out)
		out = k.MustRun(t, "", "get", "mm", "--field-selector", "status.phase=Pending", "-o", "name")
		assert.Empty(t, out)
		out = k.MustRun(t, "", "get", "mid", "--field-selector", "status.allocation.machineName=mac-1,spec.poolName=imacpro", "-o", "name")
		assert.Equal(t, "macosidentity.dockerios.io/imacpro-0001\n", out)
		out = k.MustRun(t, "", "get", "mid", "--field-selector", "status.allocated=false", "-o", "name")
		assert.Empty(t, out)
		r := k.Run("", "get", "mm", "--field-selector", "spec.bogus=1")
		require.Error(t, r.Err)
		assert.Contains(t, r.Stderr, "field label not supported")
	})

	t.Run("strategic merge patch merges keyed lists by their key", func(t *testing.T) {
		// kubectl patch's default type: a device or CPU feature added
		// by name joins the list rather than replacing it, as it would
		// for a built-in kind.
		for _, p := range []string{
			`{"spec":{"hostDevices":[{"name":"gpu1","deviceName":"nvidia.com/P40","gpu":true}],"cpu":{"features":[{"name":"avx2"}]}}}`,
			`{"spec":{"hostDevices":[{"name":"nic1","deviceName":"intel.com/x710"}],"cpu":{"features":[{"name":"sse4.2","policy":"optional"}]}}}`,
			`{"spec":{"cpu":{"features":[{"name":"avx2","policy":"disable"}]}}}`,
		} {
			k.MustRun(t, "", "patch", "mmclass", "standard", "-p", p)
		}
		devices := k.MustRun(t, "", "get", "mmclass", "standard", "-o", `jsonpath={range .spec.hostDevices[*]}{.name}={.deviceName} {end}`)
		assert.ElementsMatch(t, []string{"gpu1=nvidia.com/P40", "nic1=intel.com/x710"}, strings.Fields(devices))
		features := k.MustRun(t, "", "get", "mmclass", "standard", "-o", `jsonpath={range .spec.cpu.features[*]}{.name}={.policy} {end}`)
		assert.ElementsMatch(t, []string{"avx2=disable", "sse4.2=optional"}, strings.Fields(features))
		k.MustRun(t, "", "patch", "mmclass", "standard", "--type=json", "-p", `[{"op":"remove","path":"/spec/hostDevices"},{"op":"remove","path":"/spec/cpu/features"}]`)
	})

	t.Run("scale", func(t *testing.T) {
		assert.Contains(t, k.MustRun(t, "", "scale", "mmpool", "warm", "--replicas=4"), "scaled")
		assert.Equal(t, "4", k.MustRun(t, "", "get", "mmpool", "warm", "-o", "jsonpath={.spec.replicas}"))
		r := k.Run("", "scale", "mmpool", "warm", "--replicas=11")
		require.Error(t, r.Err)
		assert.Contains(t, r.Stderr, "spec.replicas")
		assert.Contains(t, r.Stderr, "may not exceed maxMachines (10)")
		out := k.MustRun(t, "", "get", "--raw", "/apis/dockerios.io/v1alpha1/namespaces/default/macosmachinepools/warm/scale")
		var scale struct {
			Kind   string
			Spec   struct{ Replicas int }
			Status struct{ Selector string }
		}
		require.NoError(t, json.Unmarshal([]byte(out), &scale))
		assert.Equal(t, "Scale", scale.Kind)
		assert.Equal(t, 4, scale.Spec.Replicas)
		assert.Equal(t, "dockerios.io/pool=warm", scale.Status.Selector)
	})

	t.Run("strict field validation rejects unknown fields, warn mode warns", func(t *testing.T) {
		manifest := "apiVersion: dockerios.io/v1alpha1\nkind: MacOSMachine\nmetadata: {name: typo}\nspec:\n  className: standard\n  clasName: standard\n"
		r := k.Run(manifest, "create", "--validate=strict", "-f", "-")
		require.Error(t, r.Err)
		assert.Contains(t, r.Stderr, `strict decoding error: unknown field "spec.clasName"`)

		r = k.Run(manifest, "create", "--validate=warn", "-f", "-")
		require.NoError(t, r.Err)
		assert.Contains(t, r.Stderr, `unknown field "spec.clasName"`)
	})

	t.Run("delete waits for teardown, then the machine goes", func(t *testing.T) {
		out := k.MustRun(t, "", "delete", "mm", "mac-1", "--wait=false")
		assert.Contains(t, out, `"mac-1" deleted`)
		out = k.MustRun(t, "", "get", "mm", "mac-1", "--no-headers")
		assert.Regexp(t, `^mac-1\s+standard\s+Terminating`, out)

		// What the controller does when teardown is complete.
		k.MustRun(t, "", "patch", "mm", "mac-1", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
		k.MustRun(t, "", "wait", "--for=delete", "mm/mac-1", "--timeout=30s")
		r := k.Run("", "get", "mm", "mac-1")
		require.Error(t, r.Err)
		assert.Contains(t, r.Stderr, "NotFound")
	})

	t.Run("the watch saw every change", func(t *testing.T) {
		want := []*regexp.Regexp{
			regexp.MustCompile(`^mac-1\s+Pending\s+<none>$`),
			regexp.MustCompile(`^mac-1\s+Ready\s+<none>$`),
			regexp.MustCompile(`^mac-1\s+Ready\s+\S+Z$`), // deletionTimestamp set
		}
		var seen []string
		deadline := time.After(30 * time.Second)
		for len(want) > 0 {
			select {
			case line, ok := <-watch:
				require.True(t, ok, "watch ended early; saw %q", seen)
				seen = append(seen, line)
				if want[0].MatchString(line) {
					want = want[1:]
				}
			case <-deadline:
				t.Fatalf("watch did not show %v; saw %q", want, seen)
			}
		}
	})
}
