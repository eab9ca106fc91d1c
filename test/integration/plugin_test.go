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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/pkg/identityimport"
	"github.com/dockerios/dockerios/test/framework"
)

// TestPlugin_ForPeopleWhoWantAMac drives the built plugin through the real
// kubectl against the real apiserver, as a person would: fill an identity
// pool, claim a Mac from a warm pool (bound at create), claim one while
// none is Ready (the test plays the controller, making a machine Ready and
// binding through the bind subresource), claim one of a class, give up at
// --timeout, look at the tree, release, and complete names with TAB.
// Subtests run in order on one server: each builds on what came before.
func TestPlugin_ForPeopleWhoWantAMac(t *testing.T) {
	s := framework.StartLocalServer(t, t.TempDir())
	k := framework.NewKubectl(t, s.Kubeconfig)
	plugin := k.WithPlugin(t)
	client, err := versioned.NewForConfig(restConfig(t, s.Kubeconfig))
	require.NoError(t, err)
	ctx := context.Background()
	const ns = "default"
	createClassAndPool(t, s)
	k.MustRun(t, "apiVersion: dockerios.io/v1alpha1\nkind: MacOSMachinePool\nmetadata: {name: warm, namespace: default}\nspec: {className: standard, replicas: 0, maxMachines: 10}\n",
		"create", "-f", "-")

	t.Run("identities generate creates N valid identities of the pool", func(t *testing.T) {
		r := plugin.Run("", "dockerios", "identities", "generate", "--pool", "imacpro", "--count", "4", "--seed", "11")
		require.NoError(t, r.Err, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
		assert.Contains(t, r.Stdout, "4 created, 0 already present, 0 rejected")
		assert.Contains(t, r.Stderr, "Warning: generated identities are synthetic")

		var list v1alpha1.MacOSIdentityList
		require.NoError(t, json.Unmarshal([]byte(k.MustRun(t, "", "get", "mid", "-o", "json")), &list))
		require.Len(t, list.Items, 4)
		gen := identity.NewGenerator(11, "iMacPro1,1")
		want := map[string]identity.Values{}
		for range 4 {
			v := gen.Next()
			want[identityimport.Name("imacpro", v)] = v
		}
		for _, id := range list.Items {
			v := identity.Values{Model: id.Spec.Model, SerialNumber: id.Spec.SerialNumber, BoardSerialNumber: id.Spec.BoardSerialNumber,
				SystemUUID: id.Spec.SystemUUID, MACAddress: id.Spec.MACAddress, ROM: id.Spec.ROM}
			assert.NoError(t, v.Validate(), id.Name)
			assert.Equal(t, "imacpro", id.Spec.PoolName)
			assert.Equal(t, want[id.Name], v, "identity %s holds the values generated for its name", id.Name)
		}

		r = plugin.Run("", "dockerios", "identities", "generate", "--pool", "imacpro", "--count", "4", "--seed", "11")
		require.NoError(t, r.Err)
		assert.Contains(t, r.Stdout, "0 created, 4 already present, 0 rejected", "the same seed again changes nothing")
	})

	t.Run("identities generate reports a value the ledger holds as rejected", func(t *testing.T) {
		// An identity holding the MAC the generator's first identity of
		// seed 12 has: the apiserver refuses that one (409), not the plugin.
		first := identity.NewGenerator(12, "iMacPro1,1").Next()
		holder := identity.NewGenerator(99, "iMacPro1,1").Next()
		holder.MACAddress, holder.ROM = first.MACAddress, first.ROM
		_, err := client.DockeriosV1alpha1().MacOSIdentities().Create(ctx, &v1alpha1.MacOSIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: "held-by-hand"},
			Spec: v1alpha1.MacOSIdentitySpec{PoolName: "imacpro", Model: holder.Model, SerialNumber: holder.SerialNumber,
				BoardSerialNumber: holder.BoardSerialNumber, SystemUUID: holder.SystemUUID, MACAddress: holder.MACAddress, ROM: holder.ROM},
		}, metav1.CreateOptions{})
		require.NoError(t, err)

		r := plugin.Run("", "dockerios", "identities", "generate", "--pool", "imacpro", "--count", "2", "--seed", "12")
		require.Equal(t, 1, exitCode(r.Err), "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
		assert.Regexp(t, `(?m)^1\s+`+first.SerialNumber+`\s+`+identityimport.Name("imacpro", first)+`\s+rejected\s+.*spec.macAddress: `+
			first.MACAddress+` is already held by MacOSIdentity held-by-hand`, r.Stdout)
		assert.Regexp(t, `(?m)^2\s+\S+\s+imacpro-[0-9a-f]{16}\s+created\s`, r.Stdout)
		assert.Contains(t, r.Stderr, "error: 1 of 2 rows rejected")
	})

	t.Run("claim: bound at create, it prints the machine and how to reach it", func(t *testing.T) {
		createMachine(t, client, "warm-a", "warm", nil)
		makeReady(t, client, "warm-a", "10.244.0.11")
		// The apiserver learns of Ready machines from its watch: within
		// moments. A server-side dry run says when it has.
		framework.Eventually(t, 15*time.Second, func() string {
			out := k.MustRun(t, "apiVersion: dockerios.io/v1alpha1\nkind: MacOSMachineClaim\nmetadata: {name: probe, namespace: default}\nspec: {poolName: warm}\n",
				"create", "-f", "-", "--dry-run=server", "-o", "jsonpath={.status.phase}")
			if out != "Bound" {
				return "a claim would be " + out
			}
			return ""
		})

		r := plugin.Run("", "dockerios", "claim", "--pool", "warm")
		require.NoError(t, r.Err, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
		m := regexp.MustCompile(`^macosmachineclaim.dockerios.io/(warm-claim-[a-z0-9]{5}) created\n`).FindStringSubmatch(r.Stdout)
		require.NotNil(t, m, "the generated name first:\n%s", r.Stdout)
		claim := m[1]
		identityName := k.MustRun(t, "", "get", "mm", "warm-a", "-o", "jsonpath={.status.identityRef.name}")
		require.NotEmpty(t, identityName)
		assert.Equal(t, fmt.Sprintf(`macosmachineclaim.dockerios.io/%[1]s created
MacOSMachineClaim %[1]s is Bound to MacOSMachine warm-a, which is Ready.

Machine:    warm-a (namespace default, pool warm, class standard)
Identity:   %[2]s
Node:       node-1
Addresses:  10.244.0.11 (PodNetwork)
Console:    virtctl vnc warm-a -n default

When you are done: kubectl dockerios release %[1]s -n default
`, claim, identityName), r.Stdout)
		assert.Empty(t, strings.TrimSpace(r.Stderr), "bound at create, nothing was waited for")
		assert.Equal(t, claim, k.MustRun(t, "", "get", "mm", "warm-a", "-o", "jsonpath={.status.claimRef.name}"))
	})

	t.Run("claim waits, saying what it waits for, until a machine is Ready and bound", func(t *testing.T) {
		createMachine(t, client, "warm-b", "warm", nil)
		run := plugin.Start(t, "dockerios", "claim", "job-1", "--pool", "warm")
		run.AwaitStderr(t, "claim job-1: Pending, waiting for a Ready machine of pool warm\n", 30*time.Second)
		// Play the controller: the machine comes up, and the apiserver
		// binds the waiting claim to it in that status write.
		makeReady(t, client, "warm-b", "10.244.0.12")

		require.NoError(t, run.Wait(t, 30*time.Second), "stderr:\n%s", run.Stderr())
		assert.Equal(t, "claim job-1: Pending, waiting for a Ready machine of pool warm\n", run.Stderr(),
			"one line per change, and no other")
		assert.Contains(t, run.Stdout(), "MacOSMachineClaim job-1 is Bound to MacOSMachine warm-b, which is Ready.")
		assert.Contains(t, run.Stdout(), "Addresses:  10.244.0.12 (PodNetwork)")
		assert.Contains(t, run.Stdout(), "Console:    virtctl vnc warm-b -n default")
	})

	t.Run("claim of a class reports its machine's phase and why it is not Ready", func(t *testing.T) {
		run := plugin.Start(t, "dockerios", "claim", "ci-1", "--class", "standard")
		run.AwaitStderr(t, "claim ci-1: Pending, waiting for a machine of class standard to be made\n", 30*time.Second)
		claim, err := client.DockeriosV1alpha1().MacOSMachineClaims(ns).Get(ctx, "ci-1", metav1.GetOptions{})
		require.NoError(t, err)
		// Play the controller: a machine for the claim, labelled with its
		// UID, that provisions, becomes Ready, and is bound.
		createMachine(t, client, "ci-1", "", map[string]string{"dockerios.io/claim-uid": string(claim.UID)})
		setStatus(t, client, "ci-1", func(m *v1alpha1.MacOSMachine) {
			m.Status.Phase = v1alpha1.MachineProvisioning
			meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse,
				Reason: "NotReady", Message: "Job ci-1-bootdisk is rendering the bootdisk"})
		})
		run.AwaitStderr(t, "claim ci-1: Pending; machine ci-1: Provisioning (NotReady: Job ci-1-bootdisk is rendering the bootdisk)\n", 30*time.Second)
		makeReady(t, client, "ci-1", "10.244.0.13")
		_, err = client.DockeriosV1alpha1().MacOSMachineClaims(ns).Bind(ctx, "ci-1", &v1alpha1.MacOSMachineBinding{MachineName: "ci-1"}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, run.Wait(t, 30*time.Second), "stderr:\n%s", run.Stderr())
		assert.Contains(t, run.Stdout(), "Machine:    ci-1 (namespace default, class standard)")
	})

	t.Run("claim gives up at --timeout with status 2, and leaves the claim", func(t *testing.T) {
		r := plugin.Run("", "dockerios", "claim", "late-1", "--pool", "warm", "--timeout", "2s")
		require.Equal(t, 2, exitCode(r.Err), "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
		assert.Contains(t, r.Stderr, "claim late-1: Pending, waiting for a Ready machine of pool warm\n")
		assert.Contains(t, r.Stderr, "error: timed out after 2s waiting for MacOSMachineClaim late-1 to be Bound (no Ready, unbound MacOSMachine of the pool is free to take: "+
			"the claim is bound to the next Ready, unbound MacOSMachine of MacOSMachinePool warm that it may take, oldest claim first)\n"+
			"MacOSMachineClaim late-1 is left in place: it may still be answered, and holds any machine it gets until it is released.\n"+
			"Release it with: kubectl dockerios release late-1 -n default\n")
		assert.Equal(t, "Pending", k.MustRun(t, "", "get", "mmclaim", "late-1", "-o", "jsonpath={.status.phase}"), "the claim is left")
	})

	t.Run("claim -o json and --wait=false -o name", func(t *testing.T) {
		r := plugin.Run("", "dockerios", "claim", "json-1", "--pool", "warm", "-l", "xcode=16", "--wait=false", "-o", "json")
		require.NoError(t, r.Err, r.Stderr)
		var c v1alpha1.MacOSMachineClaim
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &c), r.Stdout)
		assert.Equal(t, "MacOSMachineClaim", c.Kind)
		assert.Equal(t, "json-1", c.Name)
		assert.NotEmpty(t, c.UID, "the claim as the apiserver made it")
		assert.Equal(t, map[string]string{"xcode": "16"}, c.Spec.Selector.MatchLabels)

		r = plugin.Run("", "dockerios", "claim", "--pool", "warm", "--wait=false", "-o", "name")
		require.NoError(t, r.Err, r.Stderr)
		assert.Regexp(t, `^macosmachineclaim.dockerios.io/warm-claim-[a-z0-9]{5}\n$`, r.Stdout)
	})

	t.Run("machines shows each pool, its machines, and their claims", func(t *testing.T) {
		identityOf := func(machine string) string {
			return regexp.QuoteMeta(k.MustRun(t, "", "get", "mm", machine, "-o", "jsonpath={.status.identityRef.name}"))
		}
		r := plugin.Run("", "dockerios", "machines")
		require.NoError(t, r.Err, r.Stderr)
		for _, line := range []string{
			`^NAME\s+PHASE\s+IDENTITY\s+NODE\s+AGE\s+REASON$`,
			// No controller runs here: nothing has written the pool's
			// Ready condition.
			`^mmpool/warm\s+<unknown>\s+\d+s$`,
			`^├─mm/warm-a\s+Ready\s+` + identityOf("warm-a") + `\s+node-1\s+\d+s$`,
			`^│ └─mmclaim/warm-claim-[a-z0-9]{5}\s+Bound\s+\d+s$`,
			`^├─mm/warm-b\s+Ready\s+` + identityOf("warm-b") + `\s+node-1\s+\d+s$`,
			`^│ └─mmclaim/job-1\s+Bound\s+\d+s$`,
			`^├─mmclaim/json-1\s+Pending\s+\d+s\s+waiting for a Ready machine$`,
			`^├─mmclaim/late-1\s+Pending\s+\d+s\s+waiting for a Ready machine$`,
			`^└─mmclaim/warm-claim-[a-z0-9]{5}\s+Pending\s+\d+s\s+waiting for a Ready machine$`,
			`^mmclass/standard$`,
			`^└─mm/ci-1\s+Ready\s+` + identityOf("ci-1") + `\s+node-1\s+\d+s$`,
			`^  └─mmclaim/ci-1\s+Bound\s+\d+s$`,
		} {
			assert.Regexp(t, "(?m)"+line, r.Stdout)
		}

		r = plugin.Run("", "dockerios", "machines", "-A")
		require.NoError(t, r.Err, r.Stderr)
		assert.Regexp(t, `(?m)^NAMESPACE\s+NAME\s+PHASE`, r.Stdout)
		assert.Regexp(t, `(?m)^default\s+├─mm/warm-a\s+Ready`, r.Stdout)

		r = plugin.Run("", "dockerios", "machines", "-o", "yaml")
		require.NoError(t, r.Err, r.Stderr)
		var list v1alpha1.MacOSMachineList
		require.NoError(t, yaml.Unmarshal([]byte(r.Stdout), &list), r.Stdout)
		assert.Equal(t, "MacOSMachineList", list.Kind)
		var names []string
		for _, m := range list.Items {
			names = append(names, m.Name)
		}
		assert.Equal(t, []string{"warm-a", "warm-b", "ci-1"}, names)

		r = plugin.Run("", "dockerios", "machines", "-o", "name")
		require.NoError(t, r.Err, r.Stderr)
		assert.Equal(t, "macosmachine.dockerios.io/warm-a\nmacosmachine.dockerios.io/warm-b\nmacosmachine.dockerios.io/ci-1\n", r.Stdout)
	})

	t.Run("TAB completes names from the API, through kubectl", func(t *testing.T) {
		r := plugin.Run("", "dockerios", "completion", "bash")
		require.NoError(t, r.Err)
		assert.Contains(t, r.Stdout, "__start_kubectl-dockerios")

		// kubectl (1.26+) completes "kubectl dockerios ..." by running
		// kubectl_complete-dockerios from PATH: install the script the
		// plugin prints, as its help says.
		script := plugin.MustRun(t, "", "dockerios", "completion", "kubectl")
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "kubectl_complete-dockerios"), []byte(script), 0o755))
		withCompletion := *plugin
		withCompletion.Env = append(append([]string{}, plugin.Env...),
			"PATH="+dir+string(os.PathListSeparator)+filepath.Dir(framework.PluginBinary(t))+string(os.PathListSeparator)+os.Getenv("PATH"))

		for _, tc := range []struct {
			args []string
			want []string
		}{
			{[]string{"claim", "--pool", ""}, []string{"warm"}},
			{[]string{"claim", "--class", "st"}, []string{"standard"}},
			{[]string{"release", "j"}, []string{"job-1", "json-1"}},
			{[]string{"identities", "generate", "--pool", ""}, []string{"imacpro"}},
		} {
			out := withCompletion.MustRun(t, "", append([]string{"__complete", "dockerios"}, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			assert.Equal(t, tc.want, lines[:len(lines)-1], "kubectl dockerios %s<TAB>", strings.Join(tc.args, " "))
			assert.Equal(t, ":4", lines[len(lines)-1], "no file names")
		}
	})

	t.Run("release deletes claims and frees their machines", func(t *testing.T) {
		r := plugin.Run("", "dockerios", "release", "job-1", "late-1")
		require.NoError(t, r.Err, r.Stderr)
		assert.Equal(t, "macosmachineclaim.dockerios.io/job-1 released: MacOSMachine warm-b is torn down\n"+
			"macosmachineclaim.dockerios.io/late-1 released: it was not bound to a machine\n", r.Stdout)
		for _, name := range []string{"job-1", "late-1"} {
			assert.Contains(t, k.Run("", "get", "mmclaim", name).Stderr, "NotFound")
		}
		m, err := client.DockeriosV1alpha1().MacOSMachines(ns).Get(ctx, "warm-b", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, m.Status.ClaimRef)
		assert.True(t, meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineReleased), "the machine is marked Released")

		r = plugin.Run("", "dockerios", "release", "nope", "json-1")
		assert.Equal(t, 1, exitCode(r.Err))
		assert.Contains(t, r.Stderr, "error: MacOSMachineClaim nope not found in namespace default\n")
		assert.Equal(t, "macosmachineclaim.dockerios.io/json-1 released: it was not bound to a machine\n", r.Stdout, "the others are released")
	})
}

// exitCode is the status a command exited with; 0 when err is nil.
func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// createMachine creates a machine of class standard in namespace default,
// of pool when not empty, as the pool or class-claim controller does.
func createMachine(t *testing.T, client versioned.Interface, name, pool string, labels map[string]string) {
	t.Helper()
	_, err := client.DockeriosV1alpha1().MacOSMachines("default").Create(context.Background(), &v1alpha1.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1alpha1.MacOSMachineSpec{ClassName: "standard", PoolName: pool},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// setStatus writes a machine's status as the controller does.
func setStatus(t *testing.T, client versioned.Interface, name string, mutate func(*v1alpha1.MacOSMachine)) {
	t.Helper()
	machines := client.DockeriosV1alpha1().MacOSMachines("default")
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m, err := machines.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(m)
		_, err = machines.UpdateStatus(context.Background(), m, metav1.UpdateOptions{})
		return err
	}))
}

// makeReady reports a machine Ready, running on node-1 at address, as the
// controller does once the guest agent says so.
func makeReady(t *testing.T, client versioned.Interface, name, address string) {
	t.Helper()
	setStatus(t, client, name, func(m *v1alpha1.MacOSMachine) {
		m.Status.Phase = v1alpha1.MachineReady
		m.Status.VirtualMachineName, m.Status.NodeName = name, "node-1"
		m.Status.Addresses = []v1alpha1.MachineAddress{{Type: v1alpha1.MachineAddressPod, Address: address}}
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionTrue,
			Reason: "MachineReady", Message: "the guest agent reports Ready"})
	})
}
