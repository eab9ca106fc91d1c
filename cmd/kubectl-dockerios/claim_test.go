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

package main

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	dockeriov1alpha1client "github.com/dockerios/dockerios/pkg/generated/clientset/versioned/typed/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/storage/binding"
)

// The condition a Lost claim's reason is read from is the one the
// apiserver's binder writes.
func TestClaimBoundIsTheBinders(t *testing.T) {
	if claimBound != binding.ConditionBound {
		t.Errorf("claimBound %q, the binder's %q", claimBound, binding.ConditionBound)
	}
}

// assess is where a wait stands, for every state of a claim and its
// machine that ends it or that it reports.
func TestClaimWatchAssess(t *testing.T) {
	poolClaim := pendingClaim("c", "warm")
	classClaim := pendingClaim("c", "")
	classClaim.Spec.ClassName = "standard"
	lost := bound(poolClaim, "m")
	lost.Status.Phase = v1alpha1.ClaimLost
	meta.SetStatusCondition(&lost.Status.Conditions, metav1.Condition{Type: claimBound, Status: metav1.ConditionFalse,
		Reason: "MachineGone", Message: "MacOSMachine m is being deleted"})
	classMachine := func(m *v1alpha1.MacOSMachine) *v1alpha1.MacOSMachine {
		m = m.DeepCopy()
		m.Name, m.Spec.PoolName, m.Labels = "c", "", map[string]string{v1alpha1.ClaimUIDLabel: "uid-c"}
		return m
	}
	deleting := readyMachine("m", "warm")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	release := "the claim is left in place: release it with: kubectl dockerios release c -n demo"

	for _, tc := range []struct {
		name      string
		claim     *v1alpha1.MacOSMachineClaim
		claimGone bool
		machine   *v1alpha1.MacOSMachine
		gone      bool
		// want is the progress line, or the error's text when wantErr.
		want       string
		waitingFor string
		wantErr    bool
		done       bool
	}{
		{name: "a pool claim waits for a Ready machine", claim: poolClaim,
			want:       "claim c: Pending, waiting for a Ready machine of pool warm",
			waitingFor: "MacOSMachineClaim c to be Bound (no Ready machine of pool warm was free)"},
		{name: "a class claim waits for its machine to be made", claim: classClaim,
			want: "claim c: Pending, waiting for a machine of class standard to be made"},
		{name: "a class claim reports its machine's phase and why it is not Ready", claim: classClaim,
			machine:    classMachine(notReady(readyMachine("m", ""), v1alpha1.MachineProvisioning, "NotReady", "Job c-bootdisk is rendering the bootdisk")),
			want:       "claim c: Pending; machine c: Provisioning (NotReady: Job c-bootdisk is rendering the bootdisk)",
			waitingFor: "MacOSMachineClaim c to be Bound (machine c: Provisioning (NotReady: Job c-bootdisk is rendering the bootdisk))"},
		{name: "a bound claim whose machine is not yet seen", claim: bound(poolClaim, "m"),
			want: "", waitingFor: "MacOSMachine m to be Ready"},
		{name: "a bound claim whose machine is no longer Ready", claim: bound(poolClaim, "m"),
			machine: notReady(readyMachine("m", "warm"), v1alpha1.MachineStarting, "AgentUnresponsive", "the agent has not answered for 3m"),
			want:    "claim c: Bound to m; machine m: Starting (AgentUnresponsive: the agent has not answered for 3m)"},
		{name: "a bound claim with a Ready machine is done", claim: bound(poolClaim, "m"), machine: readyMachine("m", "warm"), done: true},
		{name: "a machine in phase Ready without its Ready condition is not done", claim: bound(poolClaim, "m"),
			machine: notReady(readyMachine("m", "warm"), v1alpha1.MachineReady, "NoLongerReady", "the guest stopped"),
			want:    "claim c: Bound to m; machine m: Ready (NoLongerReady: the guest stopped)"},
		{name: "a Lost claim ends the wait with the reason", claim: lost, wantErr: true,
			want: "MacOSMachineClaim c is Lost: MachineGone: MacOSMachine m is being deleted; " + release},
		{name: "a deleted claim ends the wait", claim: poolClaim, claimGone: true, wantErr: true,
			want: "MacOSMachineClaim c was deleted (released) while waiting for it"},
		{name: "a failed machine ends the wait with its reason", claim: bound(poolClaim, "m"), wantErr: true,
			machine: notReady(readyMachine("m", "warm"), v1alpha1.MachineFailed, "StartTimeout", "not Ready within 20m"),
			want:    "MacOSMachine m failed: StartTimeout: not Ready within 20m; " + release},
		{name: "a class claim's machine that fails ends the wait", claim: classClaim, wantErr: true,
			machine: classMachine(notReady(readyMachine("m", ""), v1alpha1.MachineFailed, "CloneFailed", "DataVolume c-system failed to clone")),
			want:    "MacOSMachine c failed: CloneFailed: DataVolume c-system failed to clone; " + release},
		{name: "a machine being deleted ends the wait", claim: bound(poolClaim, "m"), machine: deleting, wantErr: true,
			want: "MacOSMachine m is being deleted; " + release},
		{name: "a machine deleted ends the wait", claim: bound(poolClaim, "m"), machine: readyMachine("m", "warm"), gone: true, wantErr: true,
			want: "MacOSMachine m was deleted while waiting for it; " + release},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &claimWatch{claim: tc.claim, claimGone: tc.claimGone, machines: map[string]*v1alpha1.MacOSMachine{}}
			if tc.machine != nil {
				w.machines[tc.machine.Name] = tc.machine
				w.gone = map[string]bool{tc.machine.Name: tc.gone}
			}
			v := w.assess()
			switch {
			case tc.wantErr:
				if v.err == nil || v.err.Error() != tc.want {
					t.Errorf("error %v,\nwant %s", v.err, tc.want)
				}
			case tc.done:
				if !v.done || v.err != nil {
					t.Errorf("%+v, want done", v)
				}
			default:
				if v.done || v.err != nil || v.line != tc.want {
					t.Errorf("%+v,\nwant line %q", v, tc.want)
				}
				if tc.waitingFor != "" && v.waitingFor != tc.waitingFor {
					t.Errorf("waiting for %q,\nwant %q", v.waitingFor, tc.waitingFor)
				}
			}
		})
	}
}

// A claim bound at create to a Ready machine: claim prints the machine, its
// addresses, its identity and the console command, and nothing on stderr.
func TestClaim_BoundAtCreatePrintsTheMachine(t *testing.T) {
	m := readyMachine("warm-abc12", "warm")
	// The VirtualMachine's name is the controller's to choose (it shortens
	// long machine names); the console is the one status names.
	m.Status.VirtualMachineName = "warm-abc12-0f1e2d3c"
	api := newFakeAPI(m)
	api.PrependReactor("create", "macosmachineclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// The apiserver binds a pool claim at create when it can (rule 8).
		c := a.(k8stesting.CreateAction).GetObject().(*v1alpha1.MacOSMachineClaim)
		*c = *bound(c, "warm-abc12")
		return false, nil, nil
	})
	p := newPlugin(t, api)
	if err := p.run(context.Background(), "claim", "--pool", "warm"); err != nil {
		t.Fatalf("%v\n%s", err, p.stderr)
	}
	want := `macosmachineclaim.dockerios.io/warm-claim-x7k2p created
MacOSMachineClaim warm-claim-x7k2p is Bound to MacOSMachine warm-abc12, which is Ready.

Machine:    warm-abc12 (namespace demo, pool warm, class standard)
Identity:   imacpro-0123456789abcdef
Node:       node-2
Addresses:  10.244.1.17 (PodNetwork)
            192.168.100.5 (AgentNetwork)
Console:    virtctl vnc warm-abc12-0f1e2d3c -n demo

When you are done: kubectl dockerios release warm-claim-x7k2p -n demo
`
	if got := p.stdout.String(); got != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", got, want)
	}
	if p.stderr.String() != "" {
		t.Errorf("stderr %q: nothing was waited for", p.stderr)
	}
	c, err := api.DockeriosV1alpha1().MacOSMachineClaims(testNS).Get(context.Background(), "warm-claim-x7k2p", metav1.GetOptions{})
	if err != nil || c.Spec.PoolName != "warm" || c.GenerateName != "warm-claim-" {
		t.Errorf("claim %+v, %v: want one of pool warm named from warm-claim-", c, err)
	}
}

// A claim that waits says what it waits for on stderr, once per change:
// writes that change nothing it reports print nothing.
func TestClaim_WaitSaysWhatItWaitsForOncePerChange(t *testing.T) {
	api := newFakeAPI(machinePool("warm"))
	p := newPlugin(t, api)
	done := make(chan error, 1)
	go func() { done <- p.run(context.Background(), "claim", "build-1", "--pool", "warm") }()

	api.awaitWatch(t, "macosmachineclaims")
	p.stderr.awaitLine(t, "claim build-1: Pending, waiting for a Ready machine of pool warm")
	claim, err := api.DockeriosV1alpha1().MacOSMachineClaims(testNS).Get(context.Background(), "build-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing the wait reports changes: no new line.
	claim.Annotations = map[string]string{"touched": "1"}
	api.update(t, claim)
	// Bound, to a machine that has stopped being Ready since.
	m := notReady(readyMachine("warm-abc12", "warm"), v1alpha1.MachineStarting, "NoLongerReady", "the guest agent says Booted")
	if err := api.Tracker().Add(m); err != nil {
		t.Fatal(err)
	}
	api.update(t, bound(claim, "warm-abc12"))
	api.awaitWatch(t, "macosmachines")
	p.stderr.awaitLine(t, "machine warm-abc12: Starting (NoLongerReady: the guest agent says Booted)")
	api.update(t, readyMachine("warm-abc12", "warm"))

	if err := awaitExit(t, done); err != nil {
		t.Fatalf("%v\n%s", err, p.stderr)
	}
	wantProgress := "claim build-1: Pending, waiting for a Ready machine of pool warm\n" +
		"claim build-1: Bound to warm-abc12; machine warm-abc12: Starting (NoLongerReady: the guest agent says Booted)\n"
	if got := p.stderr.String(); got != wantProgress {
		t.Errorf("progress:\n%s\nwant:\n%s", got, wantProgress)
	}
	if !strings.Contains(p.stdout.String(), "Console:    virtctl vnc warm-abc12 -n demo") {
		t.Errorf("stdout:\n%s", p.stdout)
	}
}

// --timeout ends the wait with status 2, says what it waited for, and
// leaves the claim.
func TestClaim_TimeoutLeavesTheClaim(t *testing.T) {
	api := newFakeAPI(machinePool("warm"))
	p := newPlugin(t, api)
	err := p.run(context.Background(), "claim", "build-1", "--pool", "warm", "--timeout", "300ms")
	var coded *codedError
	if !errors.As(err, &coded) || coded.code != exitTimeout {
		t.Fatalf("error %v, want status %d", err, exitTimeout)
	}
	want := "timed out after 300ms waiting for MacOSMachineClaim build-1 to be Bound (no Ready machine of pool warm was free)\n" +
		"MacOSMachineClaim build-1 is left in place: it may still be answered, and holds any machine it gets until it is released.\n" +
		"Release it with: kubectl dockerios release build-1 -n demo"
	if err.Error() != want {
		t.Errorf("error:\n%s\nwant:\n%s", err, want)
	}
	if _, err := api.DockeriosV1alpha1().MacOSMachineClaims(testNS).Get(context.Background(), "build-1", metav1.GetOptions{}); err != nil {
		t.Errorf("the claim is gone: %v", err)
	}
}

// An interrupt (Ctrl-C cancels main's context) ends the wait with status
// 130, and leaves the claim.
func TestClaim_InterruptLeavesTheClaim(t *testing.T) {
	api := newFakeAPI(machinePool("warm"))
	p := newPlugin(t, api)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, "claim", "build-1", "--pool", "warm") }()
	p.stderr.awaitLine(t, "claim build-1: Pending")
	cancel()
	err := awaitExit(t, done)
	var coded *codedError
	if !errors.As(err, &coded) || coded.code != exitInterrupted || !strings.HasPrefix(err.Error(), "interrupted while waiting for MacOSMachineClaim build-1 to be Bound") {
		t.Fatalf("error %v, want status %d", err, exitInterrupted)
	}
}

// A claim that is Lost while it waits is an error that says why (status 1).
func TestClaim_LostEndsTheWait(t *testing.T) {
	api := newFakeAPI(machinePool("warm"))
	p := newPlugin(t, api)
	done := make(chan error, 1)
	go func() { done <- p.run(context.Background(), "claim", "build-1", "--pool", "warm") }()
	api.awaitWatch(t, "macosmachineclaims")
	lost := bound(pendingClaim("build-1", "warm"), "warm-abc12")
	lost.Status.Phase = v1alpha1.ClaimLost
	meta.SetStatusCondition(&lost.Status.Conditions, metav1.Condition{Type: claimBound, Status: metav1.ConditionFalse,
		Reason: "MachineGone", Message: "MacOSMachine warm-abc12 is being deleted"})
	api.update(t, lost)
	err := awaitExit(t, done)
	var coded *codedError
	if err == nil || errors.As(err, &coded) || !strings.Contains(err.Error(), "MacOSMachineClaim build-1 is Lost: MachineGone: MacOSMachine warm-abc12 is being deleted") {
		t.Errorf("error %v", err)
	}
}

// A claim deleted and made again under its name while claim waits is
// another claim: the wait is for the one it made.
func TestClaim_WaitIgnoresAnotherClaimOfTheName(t *testing.T) {
	api := newFakeAPI(machinePool("warm"), readyMachine("warm-abc12", "warm"))
	p := newPlugin(t, api)
	done := make(chan error, 1)
	go func() {
		done <- p.run(context.Background(), "claim", "build-1", "--pool", "warm", "--timeout", "1s")
	}()
	api.awaitWatch(t, "macosmachineclaims")
	impostor := bound(pendingClaim("build-1", "warm"), "warm-abc12")
	impostor.UID = types.UID("another")
	api.update(t, impostor)
	var coded *codedError
	if err := awaitExit(t, done); !errors.As(err, &coded) || coded.code != exitTimeout {
		t.Errorf("error %v: the wait took another claim's binding for its own", err)
	}
}

func TestClaim_NoWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a sentence", nil, "macosmachineclaim.dockerios.io/build-1 created: Pending\n"},
		{"-o name", []string{"-o", "name"}, "macosmachineclaim.dockerios.io/build-1\n"},
		{"-o jsonpath", []string{"-o", "jsonpath={.spec.poolName}"}, "warm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlugin(t, newFakeAPI())
			if err := p.run(context.Background(), append([]string{"claim", "build-1", "--pool", "warm", "--wait=false"}, tc.args...)...); err != nil {
				t.Fatal(err)
			}
			if p.stdout.String() != tc.want {
				t.Errorf("stdout %q, want %q", p.stdout, tc.want)
			}
		})
	}
}

// -o json prints the claim as the API has it, with its kind, so that it
// parses as a MacOSMachineClaim.
func TestClaim_OutputJSON(t *testing.T) {
	p := newPlugin(t, newFakeAPI())
	if err := p.run(context.Background(), "claim", "build-1", "--class", "standard", "-l", "xcode=16", "--wait=false", "-o", "json"); err != nil {
		t.Fatal(err)
	}
	var c v1alpha1.MacOSMachineClaim
	if err := json.Unmarshal([]byte(p.stdout.String()), &c); err != nil {
		t.Fatalf("%v:\n%s", err, p.stdout)
	}
	if c.Kind != "MacOSMachineClaim" || c.APIVersion != "dockerios.io/v1alpha1" || c.Name != "build-1" || c.Spec.ClassName != "standard" ||
		c.Spec.Selector == nil || c.Spec.Selector.MatchLabels["xcode"] != "16" {
		t.Errorf("claim %+v", c)
	}
}

// Mistakes in flags are said before anything is created.
func TestClaim_RefusesBadFlagsBeforeCreating(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"neither pool nor class", []string{"claim"}, "at least one of the flags in the group [pool class] is required"},
		{"both pool and class", []string{"claim", "--pool", "warm", "--class", "standard"}, "if any flags in the group [pool class] are set none of the others can be"},
		{"an unknown output", []string{"claim", "--pool", "warm", "--wait=false", "-o", "wide"}, `unable to match a printer suitable for the output format "wide"`},
		{"a bad selector", []string{"claim", "--pool", "warm", "-l", "a in (b"}, "--selector"},
		{"a negative timeout", []string{"claim", "--pool", "warm", "--timeout", "-1s"}, "--timeout must not be negative"},
		{"two names", []string{"claim", "a", "b", "--pool", "warm"}, "accepts at most 1 arg(s)"},
		{"an empty pool", []string{"claim", "--pool", ""}, "--pool must name a MacOSMachinePool"},
		{"an empty class", []string{"claim", "--class", ""}, "--class must name a MacOSMachineClass"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI()
			p := newPlugin(t, api)
			// Bounded: a claim made in spite of a bad flag would wait.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := p.run(ctx, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			for _, a := range api.Actions() {
				if a.GetVerb() == "create" {
					t.Errorf("created %s before refusing", a.GetResource().Resource)
				}
			}
		})
	}
}

// A wait for a class claim follows the machine made for it by its label.
func TestClaim_ClassClaimReportsItsMachine(t *testing.T) {
	api := newFakeAPI()
	p := newPlugin(t, api)
	done := make(chan error, 1)
	go func() { done <- p.run(context.Background(), "claim", "ci-42", "--class", "standard") }()
	api.awaitWatch(t, "macosmachines")
	p.stderr.awaitLine(t, "claim ci-42: Pending, waiting for a machine of class standard to be made")
	m := notReady(readyMachine("ci-42", ""), v1alpha1.MachineProvisioning, "NotReady", "Job ci-42-bootdisk is rendering the bootdisk")
	m.Labels = map[string]string{v1alpha1.ClaimUIDLabel: "uid-ci-42"}
	other := m.DeepCopy()
	other.Name, other.Labels = "someone-elses", map[string]string{v1alpha1.ClaimUIDLabel: "uid-other"}
	for _, obj := range []runtime.Object{other, m} {
		if err := api.Tracker().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	p.stderr.awaitLine(t, "claim ci-42: Pending; machine ci-42: Provisioning (NotReady: Job ci-42-bootdisk is rendering the bootdisk)")
	api.update(t, notReady(m, v1alpha1.MachineFailed, "BootdiskInvalidInput", "the bootdisk builder refused its input"))
	err := awaitExit(t, done)
	if err == nil || !strings.HasPrefix(err.Error(), "MacOSMachine ci-42 failed: BootdiskInvalidInput: the bootdisk builder refused its input") {
		t.Errorf("error %v", err)
	}
	if regexp.MustCompile(`someone-elses`).MatchString(p.stderr.String()) {
		t.Errorf("reported another claim's machine:\n%s", p.stderr)
	}
}

// awaitExit waits for a plugin run in the background to end.
func awaitExit(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin still waits")
		return nil
	}
}

// A watch the user may not make ends the wait at once, naming the claim
// left behind, rather than waiting out --timeout.
func TestClaim_AWatchRefusedEndsTheWait(t *testing.T) {
	api := newFakeAPI(machinePool("warm"))
	api.PrependWatchReactor("macosmachineclaims", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, apierrors.NewForbidden(v1alpha1.Resource("macosmachineclaims"), "", errors.New(`User "carol" cannot watch`))
	})
	p := newPlugin(t, api)
	done := make(chan error, 1)
	go func() { done <- p.run(context.Background(), "claim", "build-1", "--pool", "warm") }()
	err := awaitExit(t, done)
	want := `watching MacOSMachineClaim build-1 and its machine: macosmachineclaims.dockerios.io is forbidden: User "carol" cannot watch; ` +
		"the claim is left in place: release it with: kubectl dockerios release build-1 -n demo"
	if err == nil || err.Error() != want {
		t.Errorf("error %v,\nwant %s", err, want)
	}
}

// A claim for a pool that does not exist is accepted (the pool may come
// later), but the user is told at once, not after the whole wait.
func TestClaim_WarnsOfAPoolThatDoesNotExist(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pools []runtime.Object
		warns bool
	}{
		{name: "missing pool", warns: true},
		{name: "existing pool", pools: []runtime.Object{machinePool("warm")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlugin(t, newFakeAPI(tc.pools...))
			if err := p.run(context.Background(), "claim", "build-1", "--pool", "warm", "--wait=false"); err != nil {
				t.Fatal(err)
			}
			warned := strings.Contains(p.stderr.String(), "MacOSMachinePool warm does not exist in namespace "+testNS)
			if warned != tc.warns {
				t.Errorf("warned %v, want %v; stderr %q", warned, tc.warns, p.stderr)
			}
		})
	}
}

// A waiting pool claim's wait says what the apiserver said kept it from
// being bound, when it said so.
func TestClaimVerdict_UsesTheBoundConditionsMessage(t *testing.T) {
	c := pendingClaim("build-1", "warm")
	assess := func() verdict {
		w := &claimWatch{claim: c, machines: map[string]*v1alpha1.MacOSMachine{}, gone: map[string]bool{}}
		return w.assess()
	}
	if v := assess(); !strings.Contains(v.waitingFor, "no Ready machine of pool warm was free") {
		t.Errorf("without a condition: %q", v.waitingFor)
	}
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: claimBound, Status: metav1.ConditionFalse, Reason: "WaitingForMachine",
		Message: "no Ready, unbound MacOSMachine of the pool matching its selector is free to take"})
	if v := assess(); !strings.Contains(v.waitingFor, "matching its selector") {
		t.Errorf("with the condition: %q", v.waitingFor)
	}
}

// interruptedCreate is a client whose claim create is interrupted (Ctrl-C
// cancels main's context) while the request is on its way: the apiserver
// has made the claim, the client sees only its context end — as client-go
// does when a response is cut short.
type interruptedCreate struct {
	*fakeAPI
	interrupt context.CancelFunc
}

func (c *interruptedCreate) DockeriosV1alpha1() dockeriov1alpha1client.DockeriosV1alpha1Interface {
	return &interruptedCreateV1{DockeriosV1alpha1Interface: c.fakeAPI.DockeriosV1alpha1(), interrupt: c.interrupt}
}

type interruptedCreateV1 struct {
	dockeriov1alpha1client.DockeriosV1alpha1Interface
	interrupt context.CancelFunc
}

func (c *interruptedCreateV1) MacOSMachineClaims(ns string) dockeriov1alpha1client.MacOSMachineClaimInterface {
	return &interruptedCreateClaims{MacOSMachineClaimInterface: c.DockeriosV1alpha1Interface.MacOSMachineClaims(ns), interrupt: c.interrupt}
}

type interruptedCreateClaims struct {
	dockeriov1alpha1client.MacOSMachineClaimInterface
	interrupt context.CancelFunc
}

func (c *interruptedCreateClaims) Create(ctx context.Context, claim *v1alpha1.MacOSMachineClaim, opts metav1.CreateOptions) (*v1alpha1.MacOSMachineClaim, error) {
	c.interrupt()
	created, err := c.MacOSMachineClaimInterface.Create(ctx, claim, opts)
	if err == nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return created, err
}

// An interrupt while the create is on its way does not leave a claim
// nobody was told of (its name made by the apiserver from generateName):
// the create completes and the claim is named, with how to release it.
func TestClaim_InterruptDuringTheCreateNamesTheClaim(t *testing.T) {
	api := newFakeAPI(machinePool("warm"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newPlugin(t, &interruptedCreate{fakeAPI: api, interrupt: cancel})
	err := p.run(ctx, "claim", "--pool", "warm")
	list, lerr := api.DockeriosV1alpha1().MacOSMachineClaims(testNS).List(context.Background(), metav1.ListOptions{})
	if lerr != nil || len(list.Items) != 1 {
		t.Fatalf("claims %v, %v: want the one made", list, lerr)
	}
	var coded *codedError
	if !errors.As(err, &coded) || coded.code != exitInterrupted ||
		!strings.Contains(err.Error(), "Release it with: kubectl dockerios release "+list.Items[0].Name+" -n demo") {
		t.Fatalf("error %v: want status %d naming claim %s and how to release it", err, exitInterrupted, list.Items[0].Name)
	}
}
