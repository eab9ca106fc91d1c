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
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dockeriov1alpha1 "github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/test/framework"
	"github.com/dockerios/dockerios/test/harness"

	"github.com/dockerios/dockerios/examples/gitlab-runner/api/v1alpha1"
	"github.com/dockerios/dockerios/examples/gitlab-runner/internal/gitlab/gitlabtest"
)

// The sample's provisioning steps (deploy/05-gitlabrunner.yaml), in order.
var sampleSteps = []string{
	"xcode-select -p && xcodebuild -version",
	`mkdir -p "$HOME/ci-cache" && test -w "$HOME/ci-cache"`,
	"command -v gitlab-runner && gitlab-runner --version",
}

func TestGitLabRunner(t *testing.T) {
	e := start(t)
	// The pool's two warm machines are Ready before the runners ask.
	e.waitPoolReady(t, 2)

	bin := e.controllerBinary(t)

	t.Run("TheCRDRefusesWhatCannotWork", func(t *testing.T) {
		const valid = `{"replicas": 1, "machine": {"poolName": "warm"}, "ssh": {"credentialsSecretRef": {"name": "s"}},
			"gitlab": {"url": "https://gitlab.example.com", "tokenSecretRef": {"name": "t", "key": "token"}, "tags": ["macos"]}}`
		for _, tc := range []struct {
			name, spec, want string
		}{
			{"valid", valid, ""},
			{"a pool and a class", strings.Replace(valid, `"poolName": "warm"`, `"poolName": "warm", "className": "c"`, 1), "exactly one of poolName and className"},
			{"neither pool nor class", strings.Replace(valid, `"poolName": "warm"`, `"selector": {}`, 1), "exactly one of poolName and className"},
			{"a group runner without a group", strings.Replace(valid, `"tags"`, `"runnerType": "group_type", "tags"`, 1), "a group_type runner needs groupID"},
			{"no tags and no untagged jobs", strings.Replace(valid, `, "tags": ["macos"]`, ``, 1), "a runner without tags must have runUntagged"},
			{"not a URL", strings.Replace(valid, `https://gitlab.example.com`, `gitlab.example.com`, 1), "spec.gitlab.url"},
			{"an unknown runner type", strings.Replace(valid, `"tags"`, `"runnerType": "shared", "tags"`, 1), "spec.gitlab.runnerType"},
			{"a step with a bad name", strings.Replace(valid, `"replicas": 1`, `"replicas": 1, "provision": [{"name": "Bad Name", "command": "true"}]`, 1), "spec.provision[0].name"},
			{"negative replicas", strings.Replace(valid, `"replicas": 1`, `"replicas": -1`, 1), "spec.replicas"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				obj := `{"apiVersion": "gitlab.examples.dockerios.io/v1alpha1", "kind": "GitLabRunner", "metadata": {"name": "x", "namespace": "demo"}, "spec": ` + tc.spec + `}`
				r := e.admin.Run(obj, "apply", "--dry-run=server", "-f", "-")
				if tc.want == "" {
					if r.Err != nil {
						t.Fatalf("refused: %s", r.Stderr)
					}
					return
				}
				if r.Err == nil || !strings.Contains(r.Stderr, tc.want) {
					t.Fatalf("%v %s, want refused naming %q", r.Err, r.Stderr, tc.want)
				}
			})
		}
		// The name labels the runner's claims: a label value's 63 at most.
		long := strings.Repeat("r", 64)
		obj := `{"apiVersion": "gitlab.examples.dockerios.io/v1alpha1", "kind": "GitLabRunner", "metadata": {"name": "` + long + `", "namespace": "demo"}, "spec": ` + valid + `}`
		if r := e.admin.Run(obj, "apply", "--dry-run=server", "-f", "-"); r.Err == nil || !strings.Contains(r.Stderr, "at most 63 characters") {
			t.Fatalf("a 64-character name: %v %s, want refused", r.Err, r.Stderr)
		}
	})

	// The controller starts right after the apply: it runs as the
	// ServiceAccount deploy/ makes, with deploy/'s RBAC.
	applied := time.Now()
	e.applyDeploy(t)
	e.startController(t, bin)

	t.Run("RegistersRunnersWithinAMinute", func(t *testing.T) {
		e.waitReady(t, 2, time.Minute)
		t.Logf("2 runners registered %s after kubectl apply -f deploy/", time.Since(applied).Round(100*time.Millisecond))
		e.checkReplicas(t, 2)
		gr := e.runner(t)
		if c := meta.FindStatusCondition(gr.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != gr.Generation {
			t.Errorf("Ready condition %+v", c)
		}
		if gr.Status.Selector != "gitlab.examples.dockerios.io/runner="+runnerName {
			t.Errorf("selector %q", gr.Status.Selector)
		}
	})

	t.Run("TheGitLabURLCannotChange", func(t *testing.T) {
		// The runners in status are deleted by their IDs at this URL:
		// another GitLab's runners of those IDs must never be.
		r := e.admin.Run("", "-n", namespace, "patch", "gitlabrunner", runnerName, "--type=merge",
			"-p", `{"spec":{"gitlab":{"url":"https://other-gitlab.example.com"}}}`)
		if r.Err == nil || !strings.Contains(r.Stderr, "url cannot change") {
			t.Fatalf("%v %s, want refused: url cannot change", r.Err, r.Stderr)
		}
	})

	t.Run("AFailingStepIsReportedAndRetried", func(t *testing.T) {
		e.h.FailSSHCommands("xcodebuild -version", 69)
		e.admin.MustRun(t, "", "-n", namespace, "scale", "gitlabrunner", runnerName, "--replicas=3")
		framework.Eventually(t, time.Minute, func() string {
			gr := e.runner(t)
			c := meta.FindStatusCondition(gr.Status.Conditions, v1alpha1.ConditionProvisioned)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonStepFailed ||
				!strings.Contains(c.Message, `step "xcode" exited with status 69`) || !strings.Contains(c.Message, runnerName+"-2") {
				return fmt.Sprintf("Provisioned: %+v", c)
			}
			return ""
		})
		// Nothing is registered for a machine whose steps failed, and the
		// steps after the failing one did not run.
		e.waitRunners(t, 2, 5*time.Second)
		m := e.runnerEntry(t, runnerName+"-2").MachineName
		cmds := e.commandsOn(t, m)
		if len(cmds) == 0 || cmds[len(cmds)-1].Command != sampleSteps[0] || cmds[len(cmds)-1].ExitStatus != 69 {
			t.Fatalf("commands on %s: %+v, want the failing xcode step last", m, cmds)
		}
		e.h.FailSSHCommands("xcodebuild -version", 0)
		// Retried after its backoff, from the first step, on the same machine.
		e.waitReady(t, 3, time.Minute)
		if got := e.runnerEntry(t, runnerName+"-2").MachineName; got != m {
			t.Errorf("replica 2 moved from %s to %s: a failing step is retried on its machine", m, got)
		}
		e.checkReplicas(t, 3)
	})

	t.Run("ScaleDownDrainsThenDeregistersAndReleases", func(t *testing.T) {
		before := e.runnerEntries(t)
		busy, idle := before[runnerName+"-1"], before[runnerName+"-2"]
		e.gitlab.SetRunningJobs(busy.RunnerID, 1)
		e.admin.MustRun(t, "", "-n", namespace, "scale", "gitlabrunner", runnerName, "--replicas=1")

		// The idle runner goes at once (paused first); the busy one is
		// paused and kept, with its machine, while its job runs.
		framework.Eventually(t, 30*time.Second, func() string {
			if _, ok := e.gitlab.Runner(idle.RunnerID); ok {
				return fmt.Sprintf("runner %d of %s still registered", idle.RunnerID, idle.Name)
			}
			if e.claimExists(t, idle.Name) {
				return "claim " + idle.Name + " still there"
			}
			r, ok := e.gitlab.Runner(busy.RunnerID)
			if !ok || !r.Paused {
				return fmt.Sprintf("busy runner %d: %+v, want paused and registered", busy.RunnerID, r)
			}
			if ph := e.runnerEntry(t, busy.Name).Phase; ph != v1alpha1.RunnerDraining {
				return fmt.Sprintf("%s is %s, want Draining", busy.Name, ph)
			}
			return ""
		})
		e.checkDeregistered(t, idle, true)
		if !e.claimExists(t, busy.Name) {
			t.Fatalf("the claim of a draining runner was released")
		}
		// Its job ends: it goes.
		e.gitlab.SetRunningJobs(busy.RunnerID, 0)
		framework.Eventually(t, 30*time.Second, func() string {
			if _, ok := e.gitlab.Runner(busy.RunnerID); ok || e.claimExists(t, busy.Name) {
				return busy.Name + " not yet deregistered and released"
			}
			return ""
		})
		e.checkDeregistered(t, busy, true)
		e.waitReady(t, 1, 30*time.Second)
		if r0 := e.runnerEntry(t, runnerName+"-0"); r0.RunnerID != before[runnerName+"-0"].RunnerID {
			t.Errorf("replica 0 was touched by the scale down: runner %d, was %d", r0.RunnerID, before[runnerName+"-0"].RunnerID)
		}
	})

	t.Run("ALostMachineIsReplaced", func(t *testing.T) {
		old := e.runnerEntry(t, runnerName+"-0")
		oldClaim := e.claim(t, old.Name)
		if err := e.dockios.DockeriosV1alpha1().MacOSMachines(namespace).Delete(context.Background(), old.MachineName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Deregistered without a drain (its jobs went with the machine),
		// its claim deleted and made again, another machine provisioned.
		framework.Eventually(t, time.Minute, func() string {
			cur := e.runnerEntry(t, old.Name)
			if cur.ClaimUID == oldClaim.UID || cur.Phase != v1alpha1.RunnerReady || cur.MachineName == old.MachineName {
				return fmt.Sprintf("replica 0: %+v", cur)
			}
			return ""
		})
		e.checkDeregistered(t, old, false)
		if c := e.claim(t, old.Name); c.UID == oldClaim.UID {
			t.Errorf("claim %s was not replaced", old.Name)
		}
		e.waitReady(t, 1, 30*time.Second)
		e.checkReplicas(t, 1)
	})

	t.Run("AMachineUnreadyTooLongIsReplaced", func(t *testing.T) {
		old := e.runnerEntry(t, runnerName+"-0")
		if err := e.c.Patch(context.Background(), &v1alpha1.GitLabRunner{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: runnerName}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"machineUnreadyTimeout":"3s"}}`))); err != nil {
			t.Fatal(err)
		}
		// A guest whose image broke while the OS runs: DockerIOS marks
		// the machine not Ready and leaves a claimed one to its holder.
		m := e.machine(t, old.MachineName)
		if err := e.h.DegradeGuest(namespace, m.Status.VirtualMachineName); err != nil {
			t.Fatal(err)
		}
		// DockerIOS asks a Ready machine's agent every 30 s: the guest's
		// trouble shows within that, the replacement 3 s after.
		framework.Eventually(t, 2*time.Minute, func() string {
			cur := e.runnerEntry(t, old.Name)
			if cur.MachineName == old.MachineName || cur.Phase != v1alpha1.RunnerReady {
				return fmt.Sprintf("replica 0: %+v", cur)
			}
			return ""
		})
		e.checkDeregistered(t, old, false)
		e.checkReplicas(t, 1)
	})

	t.Run("DeletingTheRunnerDeregistersAndReleasesEverything", func(t *testing.T) {
		entries := e.runnerEntries(t)
		var machines []string
		for _, r := range entries {
			machines = append(machines, r.MachineName)
		}
		e.admin.MustRun(t, "", "-n", namespace, "delete", "gitlabrunner", runnerName, "--wait=true", "--timeout=60s")
		if n := len(e.gitlab.Runners()); n != 0 {
			t.Errorf("%d runners left in GitLab: %+v", n, e.gitlab.Runners())
		}
		for _, r := range entries {
			e.checkDeregistered(t, r, true)
		}
		claims, err := e.dockios.DockeriosV1alpha1().MacOSMachineClaims(namespace).List(context.Background(), metav1.ListOptions{
			LabelSelector: "gitlab.examples.dockerios.io/runner=" + runnerName})
		if err != nil {
			t.Fatal(err)
		}
		if len(claims.Items) != 0 {
			t.Errorf("claims left: %v", claims.Items)
		}
		// Released machines are disposed of by their pool.
		framework.Eventually(t, time.Minute, func() string {
			for _, name := range machines {
				if _, err := e.dockios.DockeriosV1alpha1().MacOSMachines(namespace).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return "machine " + name + " not disposed of yet"
				}
			}
			return ""
		})
	})
}

// waitPoolReady waits for the pool to hold n Ready unbound machines.
func (e *env) waitPoolReady(t *testing.T, n int32) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, func() string {
		p, err := e.dockios.DockeriosV1alpha1().MacOSMachinePools(namespace).Get(context.Background(), pool, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if p.Status.ReadyReplicas < n {
			return fmt.Sprintf("pool %s: %d ready", pool, p.Status.ReadyReplicas)
		}
		return ""
	})
}

// waitReady waits for n ready replicas and as many runners in GitLab.
func (e *env) waitReady(t *testing.T, n int32, within time.Duration) {
	t.Helper()
	framework.Eventually(t, within, func() string {
		gr := e.runner(t)
		if gr.Status.ReadyReplicas != n || len(gr.Status.Runners) != int(n) || len(e.gitlab.Runners()) != int(n) {
			return fmt.Sprintf("ready %d of %d wanted, GitLab holds %d runners; status %+v", gr.Status.ReadyReplicas, n, len(e.gitlab.Runners()), gr.Status)
		}
		return ""
	})
}

// waitRunners waits until GitLab holds n runners, and checks it keeps
// holding n for the duration.
func (e *env) waitRunners(t *testing.T, n int, hold time.Duration) {
	t.Helper()
	deadline := time.Now().Add(hold)
	for time.Now().Before(deadline) {
		if got := len(e.gitlab.Runners()); got != n {
			t.Fatalf("GitLab holds %d runners, want %d: %+v", got, n, e.gitlab.Runners())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (e *env) runnerEntries(t *testing.T) map[string]v1alpha1.RunnerStatus {
	t.Helper()
	out := map[string]v1alpha1.RunnerStatus{}
	for _, r := range e.runner(t).Status.Runners {
		out[r.Name] = r
	}
	return out
}

func (e *env) runnerEntry(t *testing.T, name string) v1alpha1.RunnerStatus {
	t.Helper()
	r, ok := e.runnerEntries(t)[name]
	if !ok {
		t.Fatalf("no status of replica %s", name)
	}
	return r
}

func (e *env) claimExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := e.dockios.DockeriosV1alpha1().MacOSMachineClaims(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// commandsOn returns what was run over SSH on machine's guest.
func (e *env) commandsOn(t *testing.T, machine string) []harness.SSHCommand {
	t.Helper()
	m := e.machine(t, machine)
	if m.Status.VirtualMachineName == "" {
		t.Fatalf("machine %s has no VirtualMachine", machine)
	}
	return e.h.SSHCommands(namespace, m.Status.VirtualMachineName)
}

// checkReplicas checks each wanted replica end to end: its claim is Bound
// to the machine status names, which is Ready; the provisioning steps ran
// on that machine, in order, at its PodNetwork address, then the
// registration with its own runner's token (on stdin, never on a command
// line) and the start; its runner is in GitLab with the sample's tags and
// a description naming the claim; and no other guest ran anything for it.
func (e *env) checkReplicas(t *testing.T, n int) {
	t.Helper()
	gr := e.runner(t)
	if len(gr.Status.Runners) != n {
		t.Fatalf("%d replicas in status, want %d", len(gr.Status.Runners), n)
	}
	machines := map[string]bool{}
	for i, r := range gr.Status.Runners {
		if want := runnerName + "-" + strconv.Itoa(i); r.Name != want {
			t.Errorf("replica %d is named %s, want %s", i, r.Name, want)
		}
		claim := e.claim(t, r.Name)
		if claim.UID != r.ClaimUID || claim.Status.Phase != dockeriov1alpha1.ClaimBound || claim.Status.MachineName != r.MachineName {
			t.Errorf("%s: claim %s %s bound to %q, status says %s on %s", r.Name, claim.UID, claim.Status.Phase, claim.Status.MachineName, r.ClaimUID, r.MachineName)
		}
		if ref := metav1.GetControllerOf(claim); ref == nil || ref.Kind != "GitLabRunner" || ref.UID != gr.UID {
			t.Errorf("%s: claim's controller %+v", r.Name, ref)
		}
		if machines[r.MachineName] {
			t.Errorf("machine %s serves two replicas", r.MachineName)
		}
		machines[r.MachineName] = true
		m := e.machine(t, r.MachineName)
		var pod string
		for _, a := range m.Status.Addresses {
			if a.Type == dockeriov1alpha1.MachineAddressPod {
				pod = a.Address
			}
		}
		if m.Status.Phase != dockeriov1alpha1.MachineReady || r.Address != pod || m.Status.ClaimRef == nil || m.Status.ClaimRef.Name != r.Name {
			t.Errorf("%s: machine %s is %s at %v claimed by %+v; status says %s", r.Name, m.Name, m.Status.Phase, m.Status.Addresses, m.Status.ClaimRef, r.Address)
		}

		run, ok := e.gitlab.Runner(r.RunnerID)
		if !ok {
			t.Errorf("%s: runner %d is not in GitLab", r.Name, r.RunnerID)
			continue
		}
		if want := fmt.Sprintf("%s/%s (claim %s)", namespace, r.Name, r.ClaimUID); run.Description != want ||
			!slices.Equal(run.TagList, []string{"macos", "xcode"}) || run.RunnerType != "instance_type" || run.Paused {
			t.Errorf("%s: GitLab holds %+v", r.Name, run)
		}

		cmds := e.h.SSHCommands(namespace, m.Status.VirtualMachineName)
		var got []string
		for _, c := range cmds {
			got = append(got, c.Command)
			if c.User != sshUser || c.Address != net.JoinHostPort(pod, strconv.Itoa(e.sshPort)) {
				t.Errorf("%s: %q ran as %s at %s, want %s at %s:%d", r.Name, c.Command, c.User, c.Address, sshUser, pod, e.sshPort)
			}
			if strings.Contains(c.Command, run.Token) {
				t.Errorf("%s: the runner's token is on a command line: %q", r.Name, c.Command)
			}
		}
		// The last run is the one that registered; earlier failed
		// attempts (a step failing) end before it.
		last := lastRun(cmds)
		if len(last) != 5 {
			t.Errorf("%s: commands on %s: %q, want the 3 steps, register and start", r.Name, m.Name, got)
			continue
		}
		for i, s := range sampleSteps {
			if last[i].Command != s || last[i].ExitStatus != 0 {
				t.Errorf("%s: step %d ran %q (exit %d), want %q", r.Name, i, last[i].Command, last[i].ExitStatus, s)
			}
		}
		reg := last[3]
		if !strings.HasPrefix(reg.Command, `CI_SERVER_TOKEN="$(cat)" gitlab-runner register --non-interactive --url '`+e.url+`' --executor 'shell'`) ||
			string(reg.Stdin) != run.Token {
			t.Errorf("%s: registered with %q and input %q, want runner %d's token", r.Name, reg.Command, reg.Stdin, run.ID)
		}
		if !strings.Contains(last[4].Command, "gitlab-runner start") {
			t.Errorf("%s: last command %q, want the runner started", r.Name, last[4].Command)
		}
	}
	// No guest of a machine that is Ready in the pool, unbound, ran
	// anything: commands go only to machines a replica holds (or held).
	for _, guest := range e.h.SSHGuests() {
		ns, vm, _ := strings.Cut(guest, "/")
		if ns != namespace || e.vmOfLiveUnclaimedMachine(t, vm) {
			t.Errorf("guest %s, whose machine no replica holds, ran %+v", guest, e.h.SSHCommands(ns, vm))
		}
	}
}

// lastRun returns the commands from the last start of the steps.
func lastRun(cmds []harness.SSHCommand) []harness.SSHCommand {
	for i := len(cmds) - 1; i >= 0; i-- {
		if cmds[i].Command == sampleSteps[0] {
			return cmds[i:]
		}
	}
	return nil
}

// vmOfLiveUnclaimedMachine says whether vm is a machine that exists and
// is not bound (one a replica released may have run commands).
func (e *env) vmOfLiveUnclaimedMachine(t *testing.T, vm string) bool {
	t.Helper()
	list, err := e.dockios.DockeriosV1alpha1().MacOSMachines(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Items {
		if m.Status.VirtualMachineName == vm {
			return m.Status.ClaimRef == nil && meta.FindStatusCondition(m.Status.Conditions, dockeriov1alpha1.MachineReleased) == nil
		}
	}
	return false
}

// checkDeregistered checks that r's runner is gone from GitLab, paused
// first (drained) or not (its machine was lost), and that its machine was
// released.
func (e *env) checkDeregistered(t *testing.T, r v1alpha1.RunnerStatus, drained bool) {
	t.Helper()
	if _, ok := e.gitlab.Runner(r.RunnerID); ok {
		t.Errorf("%s: runner %d still registered", r.Name, r.RunnerID)
		return
	}
	var gone *gitlabtest.Runner
	for _, d := range e.gitlab.Deleted() {
		if d.ID == r.RunnerID {
			gone = &d
		}
	}
	if gone == nil {
		t.Errorf("%s: runner %d was never deleted", r.Name, r.RunnerID)
		return
	}
	if gone.PausedBeforeDelete != drained {
		t.Errorf("%s: runner %d paused before it was deleted: %v, want %v", r.Name, r.RunnerID, gone.PausedBeforeDelete, drained)
	}
	m, err := e.dockios.DockeriosV1alpha1().MacOSMachines(namespace).Get(context.Background(), r.MachineName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	case m.Status.ClaimRef != nil && m.Status.ClaimRef.UID == string(r.ClaimUID):
		t.Errorf("%s: machine %s still bound to the claim", r.Name, r.MachineName)
	}
}
