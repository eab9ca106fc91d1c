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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
	"github.com/dockerios/dockerios/test/framework"
)

// write is one kubectl write of the one-door matrix.
type write struct {
	name  string
	args  []string
	stdin string
	// dryRun: the write is first made with --dry-run=server, which must
	// answer exactly as the real write then does and change nothing.
	dryRun bool
	// sameOutput: the dry run prints what the real write prints (less
	// "(server dry run)"). Not so where the answer names a free identity,
	// which each attempt picks at random.
	sameOutput bool
	// wantErr, when set, is in the answer (dry run and real); otherwise
	// the write succeeds.
	wantErr []string
	// check runs after the real write.
	check func(t *testing.T)
}

// TestOneDoor_EveryKubectlWriteKeepsTheLedgerRules makes every write
// kubectl offers — create, client-side apply, server-side apply, replace,
// merge, JSON and strategic patches, status patches, delete and
// deletecollection — of identities, machines and claims, each first as a
// server-side dry run, and checks that each answers as POST and DELETE do
// (409 for a duplicate naming every field and its holder, allocation at
// create, PoolExhausted in FIFO order, 409 for a held identity, release on
// Failed and on delete), that each dry run answers exactly what the real
// write then answers and writes nothing, and that the ledger has no drift
// at the end.
func TestOneDoor_EveryKubectlWriteKeepsTheLedgerRules(t *testing.T) {
	etcdDir := t.TempDir()
	etcd, err := embeddedetcd.Start(filepath.Join(etcdDir, "data"), os.Stderr)
	require.NoError(t, err)
	t.Cleanup(etcd.Stop)
	s := framework.StartLocalServer(t, t.TempDir(), "--etcd-servers", etcd.ClientURL)
	k := framework.NewKubectl(t, s.Kubeconfig)
	createClassAndPool(t, s)

	gen := identity.NewGenerator(2026, "iMacPro1,1")
	a, b, c := gen.Next(), gen.Next(), gen.Next()
	identityYAML := func(name string, v identity.Values) string {
		return fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSIdentity
metadata: {name: %s, labels: {onedoor: "yes"}}
spec: {poolName: imacpro, model: %q, serialNumber: %s, boardSerialNumber: %s, systemUUID: %s, macAddress: %q, rom: %s}
`, name, v.Model, v.SerialNumber, v.BoardSerialNumber, v.SystemUUID, v.MACAddress, v.ROM)
	}
	machineYAML := func(name, class string) string {
		return fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSMachine
metadata: {name: %s, namespace: default}
spec: {className: %s}
`, name, class)
	}
	get := func(args ...string) string {
		return strings.TrimSpace(k.MustRun(t, "", append([]string{"get"}, args...)...))
	}
	identityOf := func(machine string) string { return get("mm", machine, "-o", "jsonpath={.status.identityRef.name}") }
	allocationReason := func(machine string) string {
		return get("mm", machine, "-o", `jsonpath={.status.conditions[?(@.type=="IdentityAllocated")].reason}`)
	}
	// state is every ledger object with its resourceVersion: a dry run
	// must leave it as it was.
	state := func() string {
		return get("mid,mm,mmclaim", "-A", "-o", `jsonpath={range .items[*]}{.kind}/{.metadata.name}@{.metadata.resourceVersion} {end}`)
	}
	dupOfA := []string{"duplicates another identity",
		"spec.serialNumber: " + a.SerialNumber + " is already held by MacOSIdentity id-a",
		"spec.boardSerialNumber: " + a.BoardSerialNumber + " is already held by MacOSIdentity id-a",
		"spec.systemUUID: " + a.SystemUUID + " is already held by MacOSIdentity id-a",
		"spec.macAddress: " + a.MACAddress + " is already held by MacOSIdentity id-a",
		"spec.rom: " + a.ROM + " is already held by MacOSIdentity id-a"}
	held := []string{"Conflict", "is held by MacOSMachine default/"}

	writes := []write{
		// Identities: every create path checks uniqueness.
		{name: "create identity", args: []string{"create", "-f", "-"}, stdin: identityYAML("id-a", a), dryRun: true, sameOutput: true},
		{name: "create duplicate", args: []string{"create", "-f", "-"}, stdin: identityYAML("dup-create", a), dryRun: true, sameOutput: true, wantErr: dupOfA},
		{name: "client-side apply duplicate", args: []string{"apply", "-f", "-"}, stdin: identityYAML("dup-apply", a), dryRun: true, sameOutput: true, wantErr: dupOfA},
		{name: "server-side apply duplicate", args: []string{"apply", "--server-side", "-f", "-"}, stdin: identityYAML("dup-ssa", a), dryRun: true, sameOutput: true, wantErr: dupOfA},
		{name: "server-side apply identity", args: []string{"apply", "--server-side", "-f", "-"}, stdin: identityYAML("id-b", b), dryRun: true, sameOutput: true},
		{name: "replace creates nothing", args: []string{"replace", "-f", "-"}, stdin: identityYAML("id-c", c), dryRun: true, sameOutput: true, wantErr: []string{"NotFound"}},
		{name: "client-side apply identity", args: []string{"apply", "-f", "-"}, stdin: identityYAML("id-c", c), dryRun: true, sameOutput: true},
		{name: "merge patch of an identity's values", args: []string{"patch", "mid", "id-a", "--type=merge", "-p", `{"spec":{"serialNumber":"` + b.SerialNumber + `"}}`}, dryRun: true, sameOutput: true, wantErr: []string{"is invalid", "field is immutable"}},
		{name: "json patch of a label", args: []string{"patch", "mid", "id-a", "--type=json", "-p", `[{"op":"add","path":"/metadata/labels/patched","value":"json"}]`}, dryRun: true, sameOutput: true},
		{name: "strategic patch of a label", args: []string{"patch", "mid", "id-b", "--type=strategic", "-p", `{"metadata":{"labels":{"patched":"strategic"}}}`}, dryRun: true, sameOutput: true},

		// Machines: every create path allocates, or queues in order.
		{name: "create machine", args: []string{"create", "-f", "-"}, stdin: machineYAML("m1", "standard"), dryRun: true, sameOutput: true,
			check: func(t *testing.T) { assert.NotEmpty(t, identityOf("m1")) }},
		{name: "server-side apply machine", args: []string{"apply", "--server-side", "-f", "-"}, stdin: machineYAML("m2", "standard"), dryRun: true, sameOutput: true,
			check: func(t *testing.T) { assert.NotEmpty(t, identityOf("m2")) }},
		{name: "dry run names the identity it would take", args: []string{"apply", "--server-side", "-f", "-", "-o", "jsonpath={.status.identityRef.name}"}, stdin: machineYAML("m3", "standard"), dryRun: true,
			check: func(t *testing.T) { assert.NotEmpty(t, identityOf("m3"), "the last free identity") }},
		{name: "server-side apply when the pool is exhausted", args: []string{"apply", "--server-side", "-f", "-", "-o", `jsonpath={.status.conditions[?(@.type=="IdentityAllocated")].reason}`}, stdin: machineYAML("m4", "standard"), dryRun: true, sameOutput: true,
			check: func(t *testing.T) { assert.Equal(t, "PoolExhausted", allocationReason("m4")) }},
		{name: "create when the pool is exhausted", args: []string{"create", "-f", "-"}, stdin: machineYAML("m5", "standard"), dryRun: true, sameOutput: true,
			check: func(t *testing.T) { assert.Equal(t, "PoolExhausted", allocationReason("m5")) }},
		{name: "server-side apply of a machine of no class", args: []string{"apply", "--server-side", "-f", "-"}, stdin: machineYAML("m-noclass", "nosuchclass"), dryRun: true, sameOutput: true,
			wantErr: []string{"is invalid", "spec.className: Not found"}},
		{name: "replace with a stale resourceVersion", args: []string{"replace", "-f", "-"}, stdin: strings.Replace(machineYAML("m1", "standard"), "namespace: default", "namespace: default, resourceVersion: \"1\"", 1), dryRun: true, sameOutput: true,
			wantErr: []string{"Conflict", "the object has been modified"}},

		// A held identity cannot go, by any delete.
		{name: "delete a held identity", args: []string{"delete", "mid", "id-a"}, dryRun: true, sameOutput: true, wantErr: held},
		{name: "foreground delete of a held identity", args: []string{"delete", "mid", "id-a", "--cascade=foreground", "--wait=false"}, dryRun: true, sameOutput: true, wantErr: held},
		{name: "deletecollection of held identities", args: []string{"delete", "mid", "-l", "onedoor=yes"}, dryRun: true, wantErr: held},

		// Release: Failed through a status patch, and delete.
		{name: "status patch to Failed releases to the oldest waiter", args: []string{"patch", "mm", "m1", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Failed"}}`, "-o", "jsonpath={.status.identityRef.name}|{.status.phase}"}, dryRun: true, sameOutput: true,
			check: func(t *testing.T) {
				assert.Empty(t, identityOf("m1"))
				assert.NotEmpty(t, identityOf("m4"), "m4 waited longest")
				assert.Empty(t, identityOf("m5"), "m5 waits behind m4")
			}},
		{name: "delete marks a machine for teardown", args: []string{"delete", "mm", "m2", "--wait=false"}, dryRun: true, sameOutput: true},
		{name: "json patch removing the last finalizer releases", args: []string{"patch", "mm", "m2", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`}, dryRun: true, sameOutput: true,
			check: func(t *testing.T) { assert.NotEmpty(t, identityOf("m5"), "m2's identity went to m5") }},
		{name: "deletecollection of machines", args: []string{"delete", "mm", "--all", "--wait=false"}, dryRun: true,
			check: func(t *testing.T) {
				for _, m := range []string{"m1", "m3", "m4", "m5"} {
					assert.NotEmpty(t, get("mm", m, "-o", "jsonpath={.metadata.deletionTimestamp}"), m)
				}
			}},
		{name: "a free identity is deleted", args: []string{"delete", "mid", "-l", "onedoor=yes", "--field-selector", "status.allocated=false"}, dryRun: true, sameOutput: true},
	}

	for _, w := range writes {
		ok := t.Run(w.name, func(t *testing.T) {
			var dry framework.Result
			if w.dryRun {
				before := state()
				dry = k.Run(w.stdin, append(w.args, "--dry-run=server")...)
				assert.Equal(t, before, state(), "the dry run wrote nothing")
			}
			real := k.Run(w.stdin, w.args...)
			if w.wantErr == nil {
				require.NoError(t, real.Err, "stderr: %s", real.Stderr)
			} else {
				require.Error(t, real.Err, "stdout: %s", real.Stdout)
				for _, want := range w.wantErr {
					assert.Contains(t, real.Stderr, want)
				}
				assert.NotContains(t, real.Stderr, "InternalError", "a write is never refused with a 500")
			}
			if w.dryRun {
				assert.Equal(t, real.Err == nil, dry.Err == nil, "dry run and real write agree: dry stdout %q stderr %q", dry.Stdout, dry.Stderr)
				if w.sameOutput {
					assert.Equal(t, real.Stderr, dry.Stderr, "the same error")
					assert.Equal(t, real.Stdout, strings.ReplaceAll(dry.Stdout, " (server dry run)", ""), "the same answer")
				} else if w.wantErr != nil {
					for _, want := range w.wantErr {
						assert.Contains(t, dry.Stderr, want)
					}
				}
			}
			if w.check != nil {
				w.check(t)
			}
		})
		if !ok {
			break // the writes build on each other
		}
	}

	// A delete whose preconditions fail names the resource, as every other
	// answer does.
	client, err := versioned.NewForConfig(restConfig(t, s.Kubeconfig))
	require.NoError(t, err)
	wrongUID := types.UID("not-the-uid")
	err = client.DockeriosV1alpha1().MacOSMachines("default").Delete(context.Background(), "m3", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}})
	require.True(t, apierrors.IsConflict(err), "%v", err)
	assert.Contains(t, err.Error(), `macosmachines.dockerios.io "m3"`)
	err = client.DockeriosV1alpha1().MacOSIdentities().Delete(context.Background(), "id-a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}})
	require.True(t, apierrors.IsConflict(err), "%v", err)
	assert.Contains(t, err.Error(), `macosidentities.dockerios.io "id-a"`)

	// Nothing any of those writes did left objects and index keys apart.
	ledger, _ := registrytest.NewLedger(t, registrytest.RESTOptionsGetterFor(etcd.ClientURL))
	drifts, err := ledger.Audit(context.Background())
	require.NoError(t, err)
	assert.Empty(t, drifts)
}
