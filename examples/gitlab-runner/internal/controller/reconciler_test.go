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

package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dockeriov1alpha1 "github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"

	"github.com/dockerios/dockerios/examples/gitlab-runner/api/v1alpha1"
	"github.com/dockerios/dockerios/examples/gitlab-runner/internal/gitlab"
	"github.com/dockerios/dockerios/examples/gitlab-runner/internal/gitlab/gitlabtest"
	"github.com/dockerios/dockerios/examples/gitlab-runner/internal/guest"
)

const (
	ns    = "ci"
	name  = "ios"
	token = "glpat-test"
)

// fakeGuests plays the guests: every command is recorded by address and
// exits 0 unless it contains a string set to fail.
type fakeGuests struct {
	mu   sync.Mutex
	runs map[string][]fakeRun // address → commands
	fail map[string]int
}

type fakeRun struct {
	command string
	stdin   string
	creds   guest.Credentials
}

func (f *fakeGuests) dial(_ context.Context, addr string, c guest.Credentials) (Guest, error) {
	return &fakeConn{f: f, addr: addr, creds: c}, nil
}

func (f *fakeGuests) setFail(match string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if status == 0 {
		delete(f.fail, match)
	} else {
		f.fail[match] = status
	}
}

func (f *fakeGuests) commands(addr string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.runs[addr] {
		out = append(out, r.command)
	}
	return out
}

func (f *fakeGuests) run(addr string, i int) fakeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[addr][i]
}

type fakeConn struct {
	f     *fakeGuests
	addr  string
	creds guest.Credentials
}

func (c *fakeConn) Run(_ context.Context, command string, stdin []byte) (string, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.runs[c.addr] = append(c.f.runs[c.addr], fakeRun{command: command, stdin: string(stdin), creds: c.creds})
	for match, status := range c.f.fail {
		if strings.Contains(command, match) {
			return "", &guest.ExitError{Status: status, Output: "boom\n"}
		}
	}
	return "", nil
}

func (c *fakeConn) Close() error { return nil }

type fixture struct {
	t      *testing.T
	c      client.Client
	r      *Reconciler
	gl     *gitlabtest.Server
	guests *fakeGuests
	clock  *clocktesting.FakeClock
	events *events.FakeRecorder
	// releasedWhileRegistered: claims deleted while GitLab still held a
	// runner made for them.
	mu                      sync.Mutex
	releasedWhileRegistered []string
	// invalidStatus: conditions whose status write the apiserver refused.
	invalidStatus []string
}

// conditionReason is the pattern the CRD gives a condition's reason.
var conditionReason = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

var steps = []v1alpha1.ProvisionStep{
	{Name: "xcode", Command: "xcode-select -p"},
	{Name: "brew", Command: "brew install swiftlint"},
}

func newFixture(t *testing.T, replicas int32, mutate func(*v1alpha1.GitLabRunner)) *fixture {
	t.Helper()
	f := &fixture{t: t, gl: gitlabtest.NewServer(token), guests: &fakeGuests{runs: map[string][]fakeRun{}, fail: map[string]int{}},
		clock: clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), events: events.NewFakeRecorder(1000)}
	srv := httptest.NewServer(f.gl)
	t.Cleanup(srv.Close)

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, dockeriov1alpha1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	gr := &v1alpha1.GitLabRunner{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "gr-uid", Generation: 1},
		Spec: v1alpha1.GitLabRunnerSpec{
			Replicas:  ptr.To(replicas),
			Machine:   v1alpha1.MachineSpec{PoolName: "warm", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"xcode": "16"}}},
			SSH:       v1alpha1.SSHSpec{CredentialsSecretRef: corev1.LocalObjectReference{Name: "ssh"}, InsecureIgnoreHostKey: true},
			Provision: steps,
			GitLab: v1alpha1.GitLabSpec{URL: srv.URL, TokenSecretRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gl"}, Key: "token"},
				RunnerType: v1alpha1.InstanceType, Tags: []string{"macos"}, Executor: "shell"},
			DrainTimeout:          &metav1.Duration{Duration: time.Minute},
			MachineUnreadyTimeout: &metav1.Duration{Duration: 5 * time.Minute},
		},
	}
	if mutate != nil {
		mutate(gr)
	}
	objs := []client.Object{gr,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ssh"}, Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gl"}, Data: map[string][]byte{"token": []byte(token)}},
	}
	f.c = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.GitLabRunner{}, &dockeriov1alpha1.MacOSMachineClaim{}, &dockeriov1alpha1.MacOSMachine{}).
		WithInterceptorFuncs(interceptor.Funcs{
			// The fake client makes no uids; the apiserver does.
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if obj.GetUID() == "" {
					obj.SetUID(types.UID(uuid.NewString()))
				}
				return c.Create(ctx, obj, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				if claim, ok := obj.(*dockeriov1alpha1.MacOSMachineClaim); ok {
					for _, r := range f.gl.Runners() {
						if strings.Contains(r.Description, "(claim "+string(claim.UID)+")") {
							f.mu.Lock()
							f.releasedWhileRegistered = append(f.releasedWhileRegistered, claim.Name)
							f.mu.Unlock()
						}
					}
				}
				return c.Delete(ctx, obj, opts...)
			},
			// The CRD's schema, as the apiserver enforces it: a condition
			// needs a reason.
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if gr, ok := obj.(*v1alpha1.GitLabRunner); ok {
					for _, cond := range gr.Status.Conditions {
						if !conditionReason.MatchString(cond.Reason) {
							f.mu.Lock()
							if !slices.Contains(f.invalidStatus, cond.Type) {
								f.invalidStatus = append(f.invalidStatus, cond.Type)
							}
							f.mu.Unlock()
							return apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("GitLabRunner").GroupKind(), gr.Name, field.ErrorList{
								field.Invalid(field.NewPath("status", "conditions").Key(cond.Type).Child("reason"), cond.Reason, "should match "+conditionReason.String())})
						}
					}
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	f.r = &Reconciler{Client: f.c, APIReader: f.c, Recorder: f.events, Clock: f.clock, Dial: f.guests.dial}
	f.r.init(runJob)
	t.Cleanup(func() {
		f.r.jobs.shutdown()
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.releasedWhileRegistered) > 0 {
			t.Errorf("claims released while their runner was registered in GitLab: %v", f.releasedWhileRegistered)
		}
		if len(f.invalidStatus) > 0 {
			t.Errorf("status writes refused, conditions without a reason: %v", f.invalidStatus)
		}
	})
	return f
}

func (f *fixture) reconcile() ctrl.Result {
	f.t.Helper()
	res, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	if err != nil {
		f.t.Logf("reconcile: %v", err)
	}
	return res
}

// until reconciles until cond holds (the jobs run meanwhile).
func (f *fixture) until(cond func() string) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.reconcile()
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("after 10s: %s", msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scale sets the GitLabRunner's spec.replicas.
func (f *fixture) scale(replicas int32) {
	f.t.Helper()
	gr := f.runner()
	gr.Spec.Replicas = ptr.To(replicas)
	if err := f.c.Update(context.Background(), gr); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) runner() *v1alpha1.GitLabRunner {
	f.t.Helper()
	var gr v1alpha1.GitLabRunner
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &gr); err != nil {
		f.t.Fatal(err)
	}
	return &gr
}

func (f *fixture) entry(replica string) v1alpha1.RunnerStatus {
	f.t.Helper()
	for _, e := range f.runner().Status.Runners {
		if e.Name == replica {
			return e
		}
	}
	return v1alpha1.RunnerStatus{}
}

func (f *fixture) claim(n string) *dockeriov1alpha1.MacOSMachineClaim {
	f.t.Helper()
	var c dockeriov1alpha1.MacOSMachineClaim
	err := f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: n}, &c)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return &c
}

// bind plays DockerIOS binding claim n to a new Ready machine at ip.
func (f *fixture) bind(n, machine, ip string) {
	f.t.Helper()
	ctx := context.Background()
	claim := f.claim(n)
	m := &dockeriov1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: machine}, Spec: dockeriov1alpha1.MacOSMachineSpec{ClassName: "c", PoolName: "warm"}}
	if err := f.c.Create(ctx, m); err != nil {
		f.t.Fatal(err)
	}
	m.Status = dockeriov1alpha1.MacOSMachineStatus{Phase: dockeriov1alpha1.MachineReady, VirtualMachineName: machine,
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.NewTime(f.clock.Now())}},
		ClaimRef:   &dockeriov1alpha1.ClaimReference{Name: n, UID: string(claim.UID)},
		Addresses: []dockeriov1alpha1.MachineAddress{{Type: dockeriov1alpha1.MachineAddressAgent, Address: "10.1.0.1"},
			{Type: dockeriov1alpha1.MachineAddressPod, Address: ip}}}
	if err := f.c.Status().Update(ctx, m); err != nil {
		f.t.Fatal(err)
	}
	claim.Status = dockeriov1alpha1.MacOSMachineClaimStatus{Phase: dockeriov1alpha1.ClaimBound, MachineName: machine,
		Conditions: []metav1.Condition{{Type: "Bound", Status: metav1.ConditionTrue, Reason: "Bound", LastTransitionTime: metav1.NewTime(f.clock.Now())}}}
	if err := f.c.Status().Update(ctx, claim); err != nil {
		f.t.Fatal(err)
	}
}

// setMachineReady plays the controller's Ready condition on machine.
func (f *fixture) setMachineReady(machine string, ready bool, since time.Time) {
	f.t.Helper()
	var m dockeriov1alpha1.MacOSMachine
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: machine}, &m); err != nil {
		f.t.Fatal(err)
	}
	c := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.NewTime(since)}
	if !ready {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "NoLongerReady", "guest reports Degraded"
	}
	m.Status.Conditions = []metav1.Condition{c}
	if err := f.c.Status().Update(context.Background(), &m); err != nil {
		f.t.Fatal(err)
	}
}

// registerAll binds every replica's claim and waits for its runner.
func (f *fixture) registerAll(replicas int) {
	f.t.Helper()
	f.reconcile()
	for i := range replicas {
		f.bind(replicaName(name, i), fmt.Sprintf("mac-%d", i), fmt.Sprintf("10.0.0.%d", i+1))
	}
	f.until(func() string {
		if gr := f.runner(); gr.Status.ReadyReplicas != int32(replicas) {
			return fmt.Sprintf("ready %d: %+v", gr.Status.ReadyReplicas, gr.Status.Runners)
		}
		return ""
	})
}

func condition(gr *v1alpha1.GitLabRunner, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(gr.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestReconcile_ClaimsOneMachinePerReplica(t *testing.T) {
	for _, tc := range []struct {
		name    string
		machine v1alpha1.MachineSpec
	}{
		{"from a pool", v1alpha1.MachineSpec{PoolName: "warm", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"xcode": "16"}}}},
		{"from a class", v1alpha1.MachineSpec{ClassName: "m2-large", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"xcode": "16"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testClaimsOneMachinePerReplica(t, tc.machine)
		})
	}
}

func testClaimsOneMachinePerReplica(t *testing.T, machine v1alpha1.MachineSpec) {
	f := newFixture(t, 2, func(gr *v1alpha1.GitLabRunner) { gr.Spec.Machine = machine })
	f.reconcile()

	gr := f.runner()
	if !slices.Contains(gr.Finalizers, Finalizer) {
		t.Errorf("finalizers %v", gr.Finalizers)
	}
	for i := range 2 {
		c := f.claim(replicaName(name, i))
		if c == nil {
			t.Fatalf("no claim %s", replicaName(name, i))
		}
		if c.Spec.PoolName != machine.PoolName || c.Spec.ClassName != machine.ClassName || c.Spec.Selector == nil ||
			c.Spec.Selector.MatchLabels["xcode"] != "16" || c.Labels[RunnerLabel] != name {
			t.Errorf("claim %s: %+v %v", c.Name, c.Spec, c.Labels)
		}
		if ref := metav1.GetControllerOf(c); ref == nil || ref.UID != gr.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("claim %s controller %+v", c.Name, ref)
		}
	}
	if f.claim(replicaName(name, 2)) != nil {
		t.Error("a third claim for two replicas")
	}
	if gr.Status.Replicas != 2 || gr.Status.ReadyReplicas != 0 || len(gr.Status.Runners) != 2 {
		t.Errorf("status %+v", gr.Status)
	}
	for typ, reason := range map[string]string{
		v1alpha1.ConditionMachinesReady: v1alpha1.ReasonClaimPending,
		v1alpha1.ConditionProvisioned:   v1alpha1.ReasonWaiting,
		v1alpha1.ConditionRegistered:    v1alpha1.ReasonWaiting,
		v1alpha1.ConditionReady:         v1alpha1.ReasonReplicasNotReady,
	} {
		if c := condition(gr, typ); c.Status != metav1.ConditionFalse || c.Reason != reason || c.ObservedGeneration != 1 {
			t.Errorf("%s: %+v, want False/%s", typ, c, reason)
		}
	}
	if n := len(f.gl.Calls()); n != 0 {
		t.Errorf("GitLab called before any machine was bound: %v", f.gl.Calls())
	}
}

func TestReconcile_ProvisionsThenRegistersOnTheBoundMachine(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.registerAll(1)

	e := f.entry(replicaName(name, 0))
	claim := f.claim(e.Name)
	if e.ClaimUID != claim.UID || e.MachineName != "mac-0" || e.Address != "10.0.0.1" || e.Phase != v1alpha1.RunnerReady ||
		e.ProvisionedTime == nil || e.RegisteredTime == nil {
		t.Errorf("entry %+v", e)
	}
	runners := f.gl.Runners()
	if len(runners) != 1 || runners[0].ID != e.RunnerID {
		t.Fatalf("GitLab holds %+v, status %d", runners, e.RunnerID)
	}
	if want := fmt.Sprintf("ci/ios-0 (claim %s)", claim.UID); runners[0].Description != want || !slices.Equal(runners[0].TagList, []string{"macos"}) {
		t.Errorf("runner %+v", runners[0])
	}
	// On the machine's PodNetwork address, the steps in order, then the
	// registration with the runner's token on stdin, then the start.
	got := f.guests.commands("10.0.0.1:22")
	want := []string{"xcode-select -p", "brew install swiftlint", registerCommand(f.runner().Spec.GitLab.URL, "shell", runners[0].Description), startCommand}
	if !slices.Equal(got, want) {
		t.Fatalf("commands %q, want %q", got, want)
	}
	if reg := f.guests.run("10.0.0.1:22", 2); reg.stdin != runners[0].Token || strings.Contains(reg.command, runners[0].Token) || reg.creds.User != "admin" {
		t.Errorf("register ran %q with %q as %s", reg.command, reg.stdin, reg.creds.User)
	}
	if n := len(f.guests.commands("10.1.0.1:22")); n != 0 {
		t.Errorf("%d commands on the agent network's address", n)
	}
	gr := f.runner()
	for _, typ := range []string{v1alpha1.ConditionMachinesReady, v1alpha1.ConditionProvisioned, v1alpha1.ConditionRegistered, v1alpha1.ConditionReady} {
		if c := condition(gr, typ); c.Status != metav1.ConditionTrue {
			t.Errorf("%s: %+v", typ, c)
		}
	}
	// Settled: more passes change nothing and call no guest.
	for range 3 {
		f.reconcile()
	}
	if n := len(f.guests.commands("10.0.0.1:22")); n != 4 || len(f.gl.Runners()) != 1 {
		t.Errorf("after settling: %d commands, %d runners", n, len(f.gl.Runners()))
	}
}

func TestReconcile_AFailedStepIsReportedAndRetried(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.guests.setFail("brew", 3)
	f.reconcile()
	f.bind(replicaName(name, 0), "mac-0", "10.0.0.1")
	f.until(func() string {
		c := condition(f.runner(), v1alpha1.ConditionProvisioned)
		if c.Reason != v1alpha1.ReasonStepFailed || !strings.Contains(c.Message, `step "brew" exited with status 3: boom`) {
			return fmt.Sprintf("Provisioned %+v", c)
		}
		return ""
	})
	if n := len(f.gl.Calls()); n != 0 {
		t.Errorf("GitLab called after a failed step: %v", f.gl.Calls())
	}
	if e := f.entry(replicaName(name, 0)); e.Phase != v1alpha1.RunnerProvisioning || e.ProvisionedTime != nil || !strings.Contains(e.Message, "attempt 1") {
		t.Errorf("entry %+v", e)
	}
	// Not before its backoff.
	for range 3 {
		f.reconcile()
	}
	if n := len(f.guests.commands("10.0.0.1:22")); n != 2 {
		t.Fatalf("retried before the backoff: %q", f.guests.commands("10.0.0.1:22"))
	}
	f.guests.setFail("brew", 0)
	f.clock.Step(6 * time.Second)
	f.until(func() string {
		if f.runner().Status.ReadyReplicas != 1 {
			return "not registered after the retry"
		}
		return ""
	})
	// From the first step again.
	got := f.guests.commands("10.0.0.1:22")
	if len(got) != 6 || got[2] != "xcode-select -p" || got[3] != "brew install swiftlint" {
		t.Errorf("commands %q", got)
	}
}

func TestReconcile_ALostMachineIsDeregisteredAndReplaced(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.registerAll(1)
	old := f.entry(replicaName(name, 0))
	claim := f.claim(old.Name)
	claim.Status.Phase = dockeriov1alpha1.ClaimLost
	claim.Status.Conditions = []metav1.Condition{{Type: "Bound", Status: metav1.ConditionFalse, Reason: "MachineGone", Message: "machine mac-0 is being deleted", LastTransitionTime: metav1.NewTime(f.clock.Now())}}
	if err := f.c.Status().Update(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	// The machine is gone for its workload before it is taken apart.
	f.reconcile()
	if _, ok := f.gl.Runner(old.RunnerID); ok {
		t.Error("the runner of a lost machine is still registered")
	}
	if d := f.gl.Deleted(); len(d) != 1 || d[0].PausedBeforeDelete {
		t.Errorf("deleted %+v: want one, not drained (its jobs went with the machine)", d)
	}
	e := f.entry(old.Name)
	if e.Phase != v1alpha1.RunnerReplacing || e.RunnerID != 0 || !strings.Contains(e.Message, "machine mac-0 is being deleted") {
		t.Errorf("entry %+v", e)
	}
	if c := condition(f.runner(), v1alpha1.ConditionMachinesReady); c.Reason != v1alpha1.ReasonMachineLost {
		t.Errorf("MachinesReady %+v", c)
	}
	f.until(func() string {
		if c := f.claim(old.Name); c == nil || c.UID == claim.UID {
			return "no new claim"
		}
		return ""
	})
	f.bind(old.Name, "mac-9", "10.0.0.9")
	f.until(func() string {
		if e := f.entry(old.Name); e.Phase != v1alpha1.RunnerReady || e.MachineName != "mac-9" {
			return fmt.Sprintf("entry %+v", e)
		}
		return ""
	})
	if n := len(f.guests.commands("10.0.0.9:22")); n != 4 {
		t.Errorf("the new machine ran %d commands, want the steps and the registration", n)
	}
}

func TestReconcile_AnUnreadyMachine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		unready  time.Duration // since when, before now
		replaced bool
	}{
		{"unready past the timeout is replaced", 5 * time.Minute, 6 * time.Minute, true},
		{"unready within the timeout is kept", 5 * time.Minute, time.Minute, false},
		{"a zero timeout never replaces", 0, time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 1, func(gr *v1alpha1.GitLabRunner) {
				gr.Spec.MachineUnreadyTimeout = &metav1.Duration{Duration: tc.timeout}
			})
			f.registerAll(1)
			old := f.entry(replicaName(name, 0))
			f.setMachineReady("mac-0", false, f.clock.Now().Add(-tc.unready))
			res := f.reconcile()
			_, registered := f.gl.Runner(old.RunnerID)
			if registered == tc.replaced || (f.claim(old.Name) == nil) != tc.replaced {
				t.Fatalf("runner registered %v, claim there %v; want replaced %v", registered, f.claim(old.Name) != nil, tc.replaced)
			}
			e := f.entry(old.Name)
			if !tc.replaced {
				if e.Phase != v1alpha1.RunnerNotReady || !strings.Contains(e.Message, "NoLongerReady") {
					t.Errorf("entry %+v", e)
				}
				if tc.timeout > 0 && (res.RequeueAfter <= 0 || res.RequeueAfter > tc.timeout-tc.unready) {
					t.Errorf("requeued after %s; the timeout is %s away", res.RequeueAfter, tc.timeout-tc.unready)
				}
			}
			if c := condition(f.runner(), v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse {
				t.Errorf("Ready %+v with an unready machine", c)
			}
		})
	}
}

func TestReconcile_ScaleDownDrainsBeforeDeregistering(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.registerAll(3)
	r1, r2 := f.entry(replicaName(name, 1)), f.entry(replicaName(name, 2))
	f.gl.SetRunningJobs(r2.RunnerID, 1)
	f.scale(1)
	f.until(func() string {
		if _, ok := f.gl.Runner(r1.RunnerID); ok || f.claim(r1.Name) != nil {
			return "the idle replica is still there"
		}
		return ""
	})
	// The busy one is paused, kept with its machine, until its job ends
	// or the drain times out.
	if r, ok := f.gl.Runner(r2.RunnerID); !ok || !r.Paused || f.claim(r2.Name) == nil {
		t.Fatalf("busy runner %+v (registered %v), claim %v", r, ok, f.claim(r2.Name) != nil)
	}
	if e := f.entry(r2.Name); e.Phase != v1alpha1.RunnerDraining || e.DrainStartTime == nil || !strings.Contains(e.Message, "1 jobs running") {
		t.Errorf("entry %+v", e)
	}
	if gr := f.runner(); gr.Status.ReadyReplicas != 1 || condition(gr, v1alpha1.ConditionReady).Status != metav1.ConditionTrue {
		t.Errorf("the wanted replica is ready, but status says %+v", gr.Status)
	}
	f.clock.Step(30 * time.Second)
	f.reconcile()
	if _, ok := f.gl.Runner(r2.RunnerID); !ok {
		t.Fatal("deregistered before its job ended or the drain timed out")
	}
	f.clock.Step(31 * time.Second)
	f.reconcile()
	if _, ok := f.gl.Runner(r2.RunnerID); ok || f.claim(r2.Name) != nil {
		t.Fatal("still there after the drain timed out")
	}
	if e := f.entry(r2.Name); e.Name != "" {
		t.Errorf("a removed replica is still in status: %+v", e)
	}
	if d := f.gl.Deleted(); len(d) != 2 || !d[0].PausedBeforeDelete || !d[1].PausedBeforeDelete {
		t.Errorf("deleted %+v, want both drained", d)
	}
	if _, ok := f.gl.Runner(f.entry(replicaName(name, 0)).RunnerID); !ok {
		t.Error("replica 0's runner went too")
	}
}

func TestReconcile_ScaledBackUpWhileDrainingResumes(t *testing.T) {
	f := newFixture(t, 2, nil)
	f.registerAll(2)
	r1 := f.entry(replicaName(name, 1))
	f.gl.SetRunningJobs(r1.RunnerID, 1)
	f.scale(1)
	f.reconcile()
	if r, _ := f.gl.Runner(r1.RunnerID); !r.Paused {
		t.Fatal("not paused")
	}
	f.scale(2)
	f.reconcile()
	if r, ok := f.gl.Runner(r1.RunnerID); !ok || r.Paused {
		t.Errorf("runner %+v: want registered and taking jobs again", r)
	}
	if e := f.entry(r1.Name); e.Phase != v1alpha1.RunnerReady || e.DrainStartTime != nil || e.RunnerID != r1.RunnerID {
		t.Errorf("entry %+v", e)
	}
}

func TestReconcile_ResumingARunnerThatCannotBeIsReported(t *testing.T) {
	for _, tc := range []struct {
		name          string
		break_, mend  func(f *fixture)
		reason, cause string
	}{
		{"GitLab failing", func(f *fixture) { f.gl.FailRequests(502) }, func(f *fixture) { f.gl.FailRequests(0) }, v1alpha1.ReasonGitLabError, "502"},
		{"the token Secret gone", func(f *fixture) {
			if err := f.c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gl"}}); err != nil {
				f.t.Fatal(err)
			}
		}, func(f *fixture) {
			if err := f.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gl"}, Data: map[string][]byte{"token": []byte(token)}}); err != nil {
				f.t.Fatal(err)
			}
		}, v1alpha1.ReasonGitLabError, "Secret gl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 2, nil)
			f.registerAll(2)
			r1 := f.entry(replicaName(name, 1))
			f.gl.SetRunningJobs(r1.RunnerID, 1)
			f.scale(1)
			f.reconcile()
			if r, _ := f.gl.Runner(r1.RunnerID); !r.Paused {
				t.Fatal("not paused")
			}
			// Scaled back up while the runner cannot be resumed: it stays
			// paused, and the conditions say why.
			tc.break_(f)
			f.scale(2)
			res := f.reconcile()
			gr := f.runner()
			if c := condition(gr, v1alpha1.ConditionRegistered); c.Status != metav1.ConditionFalse || c.Reason != tc.reason ||
				!strings.Contains(c.Message, tc.cause) || c.ObservedGeneration != gr.Generation {
				t.Errorf("Registered %+v", c)
			}
			if c := condition(gr, v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse {
				t.Errorf("Ready %+v while runner %d is paused", c, r1.RunnerID)
			}
			if e := f.entry(r1.Name); e.DrainStartTime == nil {
				t.Errorf("entry %+v: its drain is forgotten", e)
			}
			if res.RequeueAfter > pollInterval {
				t.Errorf("tried again after %s", res.RequeueAfter)
			}
			tc.mend(f)
			f.reconcile()
			if r, ok := f.gl.Runner(r1.RunnerID); !ok || r.Paused {
				t.Errorf("runner %+v: want registered and taking jobs again", r)
			}
			if c := condition(f.runner(), v1alpha1.ConditionReady); c.Status != metav1.ConditionTrue {
				t.Errorf("Ready %+v", c)
			}
		})
	}
}

func TestReconcile_AReplacedClaimNotRecordedWhileGitLabFails(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.registerAll(1)
	old := f.entry(replicaName(name, 0))
	recorded := f.runner().Status
	// The claim was deleted by someone else; the controller deregistered
	// its runner and made a new claim, and was killed before status
	// recorded that.
	if err := f.c.Delete(context.Background(), f.claim(old.Name)); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.releasedWhileRegistered = nil // on purpose here
	f.mu.Unlock()
	f.reconcile()
	c := f.claim(old.Name)
	if c == nil || c.UID == old.ClaimUID {
		t.Fatal("no new claim")
	}
	gr := f.runner()
	gr.Status = recorded
	if err := f.c.Status().Update(context.Background(), gr); err != nil {
		t.Fatal(err)
	}
	// Restarted while GitLab fails: the old claim's runner cannot be
	// looked for, and the conditions say so.
	f.r = &Reconciler{Client: f.c, APIReader: f.c, Recorder: f.events, Clock: f.clock, Dial: f.guests.dial}
	f.r.init(runJob)
	f.gl.FailRequests(502)
	f.reconcile()
	if c := condition(f.runner(), v1alpha1.ConditionMachinesReady); c.Status != metav1.ConditionFalse || c.Reason == "" || !strings.Contains(c.Message, "502") {
		t.Errorf("MachinesReady %+v", c)
	}
	f.gl.FailRequests(0)
	f.bind(old.Name, "mac-9", "10.0.0.9")
	f.until(func() string {
		if e := f.entry(old.Name); e.Phase != v1alpha1.RunnerReady || e.ClaimUID != c.UID {
			return fmt.Sprintf("entry %+v", e)
		}
		return ""
	})
}

func TestReconcile_DeletionDeregistersThenReleases(t *testing.T) {
	f := newFixture(t, 2, nil)
	f.registerAll(2)
	// A third claim still pending (no machine): nothing to deregister.
	f.scale(3)
	f.reconcile()
	if err := f.c.Delete(context.Background(), f.runner()); err != nil {
		t.Fatal(err)
	}
	f.until(func() string {
		var gr v1alpha1.GitLabRunner
		if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &gr); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("still there: %v %+v", err, gr.Status.Runners)
		}
		return ""
	})
	if n := len(f.gl.Runners()); n != 0 {
		t.Errorf("%d runners left", n)
	}
	for i := range 3 {
		if f.claim(replicaName(name, i)) != nil {
			t.Errorf("claim %d left", i)
		}
	}
	// (The fixture fails the test if a claim went while its runner was
	// registered.)
}

func TestReconcile_ARunnerLeftByAnInterruptedAttemptIsDeleted(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.reconcile()
	claim := f.claim(replicaName(name, 0))
	// A controller that died between creating the runner and recording it
	// left one in GitLab whose token nobody has.
	gl, err := gitlab.New(f.runner().Spec.GitLab.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := gl.CreateRunner(context.Background(), gitlab.CreateRunnerOptions{RunnerType: "instance_type", TagList: []string{"macos"},
		Description: runnerDescription(ns, claim.Name, claim.UID)})
	if err != nil {
		t.Fatal(err)
	}
	f.bind(claim.Name, "mac-0", "10.0.0.1")
	f.until(func() string {
		if f.runner().Status.ReadyReplicas != 1 {
			return "not registered"
		}
		return ""
	})
	runners := f.gl.Runners()
	if len(runners) != 1 || runners[0].ID == orphan.ID {
		t.Errorf("GitLab holds %+v; the orphan %d should be gone and one new runner made", runners, orphan.ID)
	}
}

func TestReconcile_AClaimDeletedBeforeItsRunnerWasRecorded(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.registerAll(1)
	old := f.entry(replicaName(name, 0))
	// Its job registered a runner, but the claim was deleted (by someone
	// else) before status recorded it.
	gr := f.runner()
	gr.Status.Runners[0].RunnerID, gr.Status.Runners[0].RegisteredTime = 0, nil
	if err := f.c.Status().Update(context.Background(), gr); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Delete(context.Background(), f.claim(old.Name)); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.releasedWhileRegistered = nil // on purpose here
	f.mu.Unlock()
	f.reconcile()
	if _, ok := f.gl.Runner(old.RunnerID); ok {
		t.Errorf("runner %d, made for a claim that is gone, is left in GitLab", old.RunnerID)
	}
	if c := f.claim(old.Name); c == nil || c.UID == old.ClaimUID {
		t.Errorf("no new claim for %s", old.Name)
	}
}

func TestReconcile_ARunnerDeletedInGitLabIsRegisteredAgain(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.registerAll(1)
	old := f.entry(replicaName(name, 0))
	f.gl.DeleteRunner(old.RunnerID)
	f.clock.Step(verifyInterval + time.Second)
	f.until(func() string {
		if e := f.entry(old.Name); e.RunnerID == 0 || e.RunnerID == old.RunnerID || e.Phase != v1alpha1.RunnerReady {
			return fmt.Sprintf("entry %+v", e)
		}
		return ""
	})
	// Registered again without running the steps again: they ran on this
	// machine.
	got := f.guests.commands("10.0.0.1:22")
	if len(got) != 6 || !strings.HasPrefix(got[4], `CI_SERVER_TOKEN="$(cat)" gitlab-runner register`) || got[5] != startCommand {
		t.Errorf("commands %q", got)
	}
}

func TestReconcile_TheTokenSecretGoneWhileDeletingLetsTheMachinesGo(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.registerAll(1)
	if err := f.c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gl"}}); err != nil {
		t.Fatal(err)
	}
	// While not deleting, a missing token holds a scale down: the runner
	// would otherwise stay registered on nothing.
	f.scale(0)
	f.reconcile()
	f.reconcile()
	if f.claim(replicaName(name, 0)) == nil {
		t.Fatal("released while the runner could not be deregistered")
	}
	// Being deleted (its namespace going, say): the machine is let go, with
	// a Warning saying what is left in GitLab.
	if err := f.c.Delete(context.Background(), f.runner()); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	if f.claim(replicaName(name, 0)) != nil {
		t.Error("the claim is held")
	}
	found := false
	for _, ev := range f.drainEvents() {
		found = found || strings.Contains(ev, "DeregisterSkipped")
	}
	if !found {
		t.Error("no DeregisterSkipped event")
	}
	f.mu.Lock()
	f.releasedWhileRegistered = nil // on purpose here
	f.mu.Unlock()
}

func TestReconcile_AClaimNameTakenByAnother(t *testing.T) {
	f := newFixture(t, 1, nil)
	other := &dockeriov1alpha1.MacOSMachineClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: replicaName(name, 0)},
		Spec: dockeriov1alpha1.MacOSMachineClaimSpec{PoolName: "warm"}}
	if err := f.c.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	c := condition(f.runner(), v1alpha1.ConditionMachinesReady)
	if c.Reason != v1alpha1.ReasonClaimRefused || !strings.Contains(c.Message, "is not this GitLabRunner's") {
		t.Errorf("MachinesReady %+v", c)
	}
	if got := f.claim(other.Name); got.UID != other.UID || metav1.GetControllerOf(got) != nil {
		t.Error("someone else's claim was taken over")
	}
}

func TestSummarize(t *testing.T) {
	ok := aspect{ok: true}
	for _, tc := range []struct {
		name    string
		views   []replicaView
		desired int
		want    map[string]string // type → Status/Reason
	}{
		{"all ready", []replicaView{{"a-0", ok, ok, ok}, {"a-1", ok, ok, ok}}, 2, map[string]string{
			v1alpha1.ConditionMachinesReady: "True/MachinesReady", v1alpha1.ConditionProvisioned: "True/Provisioned",
			v1alpha1.ConditionRegistered: "True/Registered", v1alpha1.ConditionReady: "True/AllReplicasReady"}},
		{"scaled to zero", nil, 0, map[string]string{v1alpha1.ConditionReady: "True/ScaledToZero", v1alpha1.ConditionMachinesReady: "True/ScaledToZero"}},
		{"one pending: the later conditions wait", []replicaView{{"a-0", ok, ok, ok}, {"a-1", aspect{reason: "ClaimPending", message: "waiting"}, aspect{}, aspect{}}}, 2, map[string]string{
			v1alpha1.ConditionMachinesReady: "False/ClaimPending", v1alpha1.ConditionProvisioned: "False/WaitingForMachines",
			v1alpha1.ConditionRegistered: "False/WaitingForMachines", v1alpha1.ConditionReady: "False/ReplicasNotReady"}},
		{"a step failed", []replicaView{{"a-0", ok, aspect{reason: "StepFailed", message: "x"}, aspect{reason: "WaitingForProvisioning"}}}, 1, map[string]string{
			v1alpha1.ConditionMachinesReady: "True/MachinesReady", v1alpha1.ConditionProvisioned: "False/StepFailed",
			v1alpha1.ConditionRegistered: "False/WaitingForProvisioning", v1alpha1.ConditionReady: "False/ReplicasNotReady"}},
		{"GitLab failing", []replicaView{{"a-0", ok, ok, aspect{reason: "GitLabError", message: "502"}}}, 1, map[string]string{
			v1alpha1.ConditionProvisioned: "True/Provisioned", v1alpha1.ConditionRegistered: "False/GitLabError", v1alpha1.ConditionReady: "False/ReplicasNotReady"}},
		{"registered, machine unready", []replicaView{{"a-0", aspect{reason: "MachineNotReady", message: "m"}, ok, ok}}, 1, map[string]string{
			v1alpha1.ConditionMachinesReady: "False/MachineNotReady", v1alpha1.ConditionProvisioned: "True/Provisioned",
			v1alpha1.ConditionRegistered: "True/Registered", v1alpha1.ConditionReady: "False/ReplicasNotReady"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			for _, c := range summarize(tc.views, tc.desired) {
				got[c.Type] = string(c.Status) + "/" + c.Reason
			}
			for typ, want := range tc.want {
				if got[typ] != want {
					t.Errorf("%s = %s, want %s", typ, got[typ], want)
				}
			}
		})
	}
}

func TestReplicaNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ordinal int
		ok      bool
	}{
		{"ios-0", 0, true}, {"ios-12", 12, true}, {"ios-01", 0, false}, {"ios--1", 0, false},
		{"ios-a", 0, false}, {"ios", 0, false}, {"other-1", 0, false}, {"ios-1-2", 0, false},
	} {
		if n, ok := ordinalOf("ios", tc.name); n != tc.ordinal || ok != tc.ok {
			t.Errorf("ordinalOf(%q) = %d, %v; want %d, %v", tc.name, n, ok, tc.ordinal, tc.ok)
		}
	}
	claims := map[string]*dockeriov1alpha1.MacOSMachineClaim{"ios-10": nil, "ios-stray": nil}
	cached := map[string]*v1alpha1.RunnerStatus{"ios-3": nil}
	if got := replicaNames("ios", 2, claims, cached); !slices.Equal(got, []string{"ios-0", "ios-1", "ios-3", "ios-10", "ios-stray"}) {
		t.Errorf("replicaNames = %v", got)
	}
}

// drainEvents drains the recorded Events.
func (f *fixture) drainEvents() []string {
	var out []string
	for {
		select {
		case ev := <-f.events.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// A claim that never got a machine (still Pending) is released without
// an Event naming an empty machine.
func TestReconcile_ReleasingAClaimNeverBoundNamesNoMachine(t *testing.T) {
	f := newFixture(t, 2, nil)
	f.reconcile() // both claims Pending: the pool has no machine free
	f.drainEvents()
	f.scale(1)
	f.until(func() string {
		if f.claim(replicaName(name, 1)) != nil {
			return "the pending claim is still there"
		}
		return ""
	})
	var released []string
	for _, ev := range f.drainEvents() {
		if strings.Contains(ev, "MachineReleased") {
			released = append(released, ev)
		}
	}
	if len(released) != 1 || strings.Contains(released[0], "machine  released") || !strings.Contains(released[0], "not bound to a machine") {
		t.Errorf("events %q: want one saying the claim held no machine", released)
	}
}

// A pass reading a status that has not caught up with the removal (a
// cache behind its own write) finds the runner gone from GitLab: it says
// nothing was deleted, rather than announce the deletion twice.
func TestReconcile_ARunnerDeregisteredOnceIsAnnouncedOnce(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.registerAll(1)
	old := f.entry(replicaName(name, 0))
	recorded := f.runner().Status
	f.scale(0)
	f.until(func() string {
		if _, ok := f.gl.Runner(old.RunnerID); ok || f.claim(old.Name) != nil {
			return "not removed"
		}
		return ""
	})
	gr := f.runner()
	gr.Status = recorded
	if err := f.c.Status().Update(context.Background(), gr); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	n := 0
	for _, ev := range f.drainEvents() {
		if strings.Contains(ev, "RunnerDeregistered") && strings.Contains(ev, fmt.Sprintf("runner %d ", old.RunnerID)) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d RunnerDeregistered Events for runner %d, want 1", n, old.RunnerID)
	}
}

// A GitLab that cannot answer (down, or hanging until the client's
// timeout) is asked whether a registered runner still exists at most
// every verifyInterval, as when it answers: otherwise every pass waits
// for it once per replica, holding status, scale changes and deletion.
func TestReconcile_AFailedLookupIsNotRepeatedEveryPass(t *testing.T) {
	f := newFixture(t, 2, nil)
	f.registerAll(2)
	f.clock.Step(verifyInterval + time.Second)
	f.gl.FailRequests(502)
	before := len(f.gl.Calls())
	for range 3 {
		f.reconcile()
	}
	var lookups []string
	for _, c := range f.gl.Calls()[before:] {
		if strings.HasPrefix(c, "GET /api/v4/runners/1") {
			lookups = append(lookups, c)
		}
	}
	if len(lookups) != 2 {
		t.Errorf("GitLab asked %q in three passes, want each runner once", lookups)
	}
	if gr := f.runner(); gr.Status.ReadyReplicas != 2 {
		t.Errorf("status %+v: runners not known to be gone are Ready", gr.Status)
	}
}

// A replica removed while GitLab is still answering the create of its
// runner (a slow GitLab) waits for that answer and deletes the runner it
// made: a create cut short on the client's side is carried out by GitLab
// all the same, after the removal has looked for runners to delete, and
// the runner would be left registered with no claim and no machine.
func TestReconcile_ARunnerCreatedWhileTheReplicaIsRemovedIsDeleted(t *testing.T) {
	f := newFixture(t, 1, func(gr *v1alpha1.GitLabRunner) { gr.Spec.DrainTimeout = &metav1.Duration{} })
	arrived, gate, handled := make(chan struct{}), make(chan struct{}), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			// GitLab carries the create out whether or not the client
			// still waits for the answer.
			close(arrived)
			<-gate
			defer close(handled)
		}
		f.gl.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	gr := f.runner()
	gr.Spec.GitLab.URL = slow.URL
	if err := f.c.Update(context.Background(), gr); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	f.bind(replicaName(name, 0), "mac-0", "10.0.0.1")
	f.reconcile()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the runner was not created")
	}
	f.scale(0)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && f.claim(replicaName(name, 0)) != nil; {
		f.reconcile()
		time.Sleep(10 * time.Millisecond)
	}
	close(gate)
	<-handled
	f.until(func() string {
		if f.claim(replicaName(name, 0)) != nil {
			return "the claim is still there"
		}
		return ""
	})
	f.reconcile()
	for _, r := range f.gl.Runners() {
		t.Errorf("GitLab holds runner %d %q, made for a replica that is gone", r.ID, r.Description)
	}
}

// A replica being removed whose runner cannot be paused (GitLab failing)
// is not reported Ready: it is on its way out, waiting for GitLab.
func TestReconcile_ARemovedReplicaGitLabHoldsIsNotReported(t *testing.T) {
	f := newFixture(t, 2, nil)
	f.registerAll(2)
	f.gl.FailRequests(502)
	f.scale(1)
	f.reconcile()
	e := f.entry(replicaName(name, 1))
	if e.Phase == v1alpha1.RunnerReady || !strings.Contains(e.Message, "502") {
		t.Errorf("entry %+v: want it removed, held by GitLab's 502", e)
	}
	if _, ok := f.gl.Runner(e.RunnerID); !ok || f.claim(e.Name) == nil {
		t.Fatal("released while GitLab fails")
	}
}

// While an attempt after a failed one runs, the conditions still say what
// failed: a GitLab failing every attempt (each taking the client's
// timeout) is not reported as merely "Registering" between backoffs.
func TestReconcile_ARetryRunningSaysWhatFailedLastTime(t *testing.T) {
	f := newFixture(t, 1, nil)
	var mu sync.Mutex
	attempts := 0
	f.r.init(func(ctx context.Context, in *jobInput, progress func(jobStage, int, string)) (*jobOutcome, error) {
		// Counted once the stage is reported: the test reconciles as soon
		// as it sees attempt 2, which must by then be registering.
		progress(stageRegistering, 0, "")
		mu.Lock()
		attempts++
		n := attempts
		mu.Unlock()
		if n == 1 {
			return nil, &jobFailure{reason: v1alpha1.ReasonGitLabError, message: "listing runners: gitlab: GET /runners/all: 502 Bad Gateway", stage: stageRegistering}
		}
		<-ctx.Done() // GitLab hangs this time
		return nil, ctx.Err()
	})
	f.reconcile()
	f.bind(replicaName(name, 0), "mac-0", "10.0.0.1")
	f.until(func() string {
		if c := condition(f.runner(), v1alpha1.ConditionRegistered); c.Reason != v1alpha1.ReasonGitLabError {
			return fmt.Sprintf("Registered %+v", c)
		}
		return ""
	})
	f.clock.Step(6 * time.Second)
	f.until(func() string {
		mu.Lock()
		defer mu.Unlock()
		if attempts < 2 {
			return "no second attempt"
		}
		return ""
	})
	f.reconcile()
	c := condition(f.runner(), v1alpha1.ConditionRegistered)
	if c.Reason != v1alpha1.ReasonGitLabError || !strings.Contains(c.Message, "502 Bad Gateway") || !strings.Contains(c.Message, "attempt 2") {
		t.Errorf("Registered %+v while attempt 2 runs: want the failure of attempt 1", c)
	}
}
