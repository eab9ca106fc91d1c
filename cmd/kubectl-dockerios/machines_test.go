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
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

var now = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// aFleet is a namespace with a warm pool (a bound machine, a Ready one, one
// provisioning, one whose claim was released, a claim waiting), a class
// claim being answered, a machine made by hand, and a Lost claim whose pool
// is gone.
func aFleet() []runtime.Object {
	warm := machinePool("warm")
	warm.CreationTimestamp = ago(time.Hour)
	meta.SetStatusCondition(&warm.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse,
		Reason: "Filling", Message: "1 of 2 warm machines Ready"})

	boundMachine := readyMachine("warm-abc12", "warm")
	boundMachine.CreationTimestamp = ago(50 * time.Minute)
	build1 := bound(pendingClaim("build-1", "warm"), "warm-abc12")
	build1.CreationTimestamp = ago(40 * time.Minute)
	boundMachine.Status.ClaimRef = &v1alpha1.ClaimReference{Name: "build-1", UID: string(build1.UID)}

	spare := readyMachine("warm-def34", "warm")
	spare.CreationTimestamp = ago(50 * time.Minute)
	spare.Status.NodeName = "node-1"

	starting := notReady(readyMachine("warm-ghi56", "warm"), v1alpha1.MachineProvisioning, "NotReady", "Job warm-ghi56-bootdisk is rendering the bootdisk")
	starting.CreationTimestamp = ago(30 * time.Second)
	starting.Status.NodeName, starting.Status.Addresses = "", nil

	waiting := pendingClaim("build-2", "warm")
	waiting.CreationTimestamp = ago(10 * time.Second)

	ci := pendingClaim("ci-42", "")
	ci.Spec.PoolName, ci.Spec.ClassName = "", "standard"
	ci.CreationTimestamp = ago(5 * time.Minute)
	ciMachine := notReady(readyMachine("ci-42", ""), v1alpha1.MachineStarting, "NotReady", "the guest agent is not reachable yet")
	ciMachine.Labels = map[string]string{v1alpha1.ClaimUIDLabel: string(ci.UID)}
	ciMachine.CreationTimestamp = ago(5 * time.Minute)

	byHand := readyMachine("mac-1", "")
	byHand.CreationTimestamp = ago(48 * time.Hour)
	byHand.Status = v1alpha1.MacOSMachineStatus{Phase: v1alpha1.MachinePending, Conditions: []metav1.Condition{{
		Type: v1alpha1.MachineIdentityAllocated, Status: metav1.ConditionFalse, Reason: "PoolExhausted", Message: "no free identity in pool imacpro"}}}

	lost := bound(pendingClaim("old-1", "retired"), "retired-xyz")
	lost.Status.Phase = v1alpha1.ClaimLost
	meta.SetStatusCondition(&lost.Status.Conditions, metav1.Condition{Type: claimBound, Status: metav1.ConditionFalse,
		Reason: "MachineGone", Message: "MacOSMachine retired-xyz is being deleted"})
	lost.CreationTimestamp = ago(3 * 24 * time.Hour)

	released := readyMachine("warm-jkl78", "warm")
	released.CreationTimestamp = ago(5 * time.Hour)
	meta.SetStatusCondition(&released.Status.Conditions, metav1.Condition{Type: v1alpha1.MachineReleased, Status: metav1.ConditionTrue,
		Reason: "ClaimDeleted", Message: "MacOSMachineClaim build-0 was deleted; the machine is never bound again and is disposed of"})

	return []runtime.Object{warm, boundMachine, build1, spare, starting, released, waiting, ci, ciMachine, byHand, lost}
}

func TestMachinesTree(t *testing.T) {
	f := &fleet{}
	for _, obj := range aFleet() {
		switch o := obj.(type) {
		case *v1alpha1.MacOSMachinePool:
			f.pools = append(f.pools, *o)
		case *v1alpha1.MacOSMachine:
			f.machines = append(f.machines, *o)
		case *v1alpha1.MacOSMachineClaim:
			f.claims = append(f.claims, *o)
		}
	}
	// A namespace of its own, to show -A's column and order.
	other := readyMachine("a-1", "")
	other.Namespace, other.CreationTimestamp = "ci", ago(time.Minute)
	f.machines = append(f.machines, *other)

	var out bytes.Buffer
	if err := printTree(&out, f.tree(), true, now); err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE   NAME                  PHASE          IDENTITY                   NODE     AGE   REASON
ci          mmclass/standard
ci          └─mm/a-1              Ready          imacpro-0123456789abcdef   node-2   60s
demo        mmpool/retired        <not found>                                              the pool does not exist; these are what is left of it
demo        └─mmclaim/old-1       Lost                                               3d    MachineGone: MacOSMachine retired-xyz is being deleted
demo        mmpool/warm           Filling                                            60m   1 of 2 warm machines Ready
demo        ├─mm/warm-abc12       Ready          imacpro-0123456789abcdef   node-2   50m
demo        │ └─mmclaim/build-1   Bound                                              40m
demo        ├─mm/warm-def34       Ready          imacpro-0123456789abcdef   node-1   50m
demo        ├─mm/warm-ghi56       Provisioning   imacpro-0123456789abcdef   <none>   30s   NotReady: Job warm-ghi56-bootdisk is rendering the bootdisk
demo        ├─mm/warm-jkl78       Ready          imacpro-0123456789abcdef   node-2   5h    ClaimDeleted: MacOSMachineClaim build-0 was deleted; the machine is never bound again and is disposed of
demo        └─mmclaim/build-2     Pending                                            10s   waiting for a Ready machine
demo        mmclass/standard
demo        ├─mm/ci-42            Starting       imacpro-0123456789abcdef   node-2   5m    NotReady: the guest agent is not reachable yet
demo        │ └─mmclaim/ci-42     Pending                                            5m    waiting for a machine of class standard to be made and Ready
demo        └─mm/mac-1            Pending        <none>                     <none>   2d    PoolExhausted: no free identity in pool imacpro
`
	if out.String() != want {
		t.Errorf("tree:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestMachinesCommand(t *testing.T) {
	t.Run("a namespace", func(t *testing.T) {
		p := newPlugin(t, newFakeAPI(aFleet()...))
		if err := p.run(context.Background(), "machines"); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"NAME ", "mmpool/warm", "├─mm/warm-abc12", "│ └─mmclaim/build-1", "mmclass/standard"} {
			if !bytes.Contains([]byte(p.stdout.String()), []byte(want)) {
				t.Errorf("no %q in:\n%s", want, p.stdout)
			}
		}
		if bytes.Contains([]byte(p.stdout.String()), []byte("NAMESPACE")) {
			t.Errorf("a NAMESPACE column without -A:\n%s", p.stdout)
		}
	})
	t.Run("nothing there", func(t *testing.T) {
		p := newPlugin(t, newFakeAPI())
		if err := p.run(context.Background(), "machines"); err != nil {
			t.Fatal(err)
		}
		if p.stdout.String() != "" || p.stderr.String() != "No MacOSMachinePools, MacOSMachines or MacOSMachineClaims found in demo namespace.\n" {
			t.Errorf("stdout %q, stderr %q", p.stdout, p.stderr)
		}
	})
	t.Run("-o yaml is a MacOSMachineList in the tree's order", func(t *testing.T) {
		p := newPlugin(t, newFakeAPI(aFleet()...))
		if err := p.run(context.Background(), "machines", "-o", "yaml"); err != nil {
			t.Fatal(err)
		}
		var l v1alpha1.MacOSMachineList
		if err := yaml.UnmarshalStrict([]byte(p.stdout.String()), &l); err != nil {
			t.Fatalf("%v:\n%s", err, p.stdout)
		}
		var names []string
		for _, m := range l.Items {
			names = append(names, m.Name)
		}
		if l.Kind != "MacOSMachineList" || l.APIVersion != "dockerios.io/v1alpha1" ||
			!equal(names, []string{"warm-abc12", "warm-def34", "warm-ghi56", "warm-jkl78", "ci-42", "mac-1"}) {
			t.Errorf("%s %s %v", l.APIVersion, l.Kind, names)
		}
	})
	t.Run("-o json", func(t *testing.T) {
		p := newPlugin(t, newFakeAPI(aFleet()...))
		if err := p.run(context.Background(), "machines", "-o", "json"); err != nil {
			t.Fatal(err)
		}
		var l v1alpha1.MacOSMachineList
		if err := json.Unmarshal([]byte(p.stdout.String()), &l); err != nil || len(l.Items) != 6 {
			t.Errorf("%v, %d machines:\n%s", err, len(l.Items), p.stdout)
		}
	})
	t.Run("-o json items carry their apiVersion and kind, as kubectl get's do", func(t *testing.T) {
		p := newPlugin(t, newFakeAPI(aFleet()...))
		if err := p.run(context.Background(), "machines", "-o", "json"); err != nil {
			t.Fatal(err)
		}
		var l struct {
			Items []metav1.TypeMeta `json:"items"`
		}
		if err := json.Unmarshal([]byte(p.stdout.String()), &l); err != nil || len(l.Items) == 0 {
			t.Fatalf("%v, %d machines:\n%s", err, len(l.Items), p.stdout)
		}
		for i, item := range l.Items {
			if item.APIVersion != "dockerios.io/v1alpha1" || item.Kind != "MacOSMachine" {
				t.Errorf("item %d is %q %q, want dockerios.io/v1alpha1 MacOSMachine", i, item.APIVersion, item.Kind)
			}
		}
	})
	t.Run("-o name", func(t *testing.T) {
		p := newPlugin(t, newFakeAPI(readyMachine("b", "warm"), readyMachine("a", "warm")))
		if err := p.run(context.Background(), "machines", "-o", "name"); err != nil {
			t.Fatal(err)
		}
		if want := "macosmachine.dockerios.io/a\nmacosmachine.dockerios.io/b\n"; p.stdout.String() != want {
			t.Errorf("stdout %q, want %q", p.stdout, want)
		}
	})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
