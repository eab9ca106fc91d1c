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

package manager

import (
	"reflect"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/machine"
)

// An update event reconciles a machine only when it changed something a
// reconcile reads: most updates are status the controller wrote itself, or
// status of KubeVirt's and CDI's objects that no decision depends on, and
// reconciling for them would only repeat the previous pass. Resyncs (same
// resourceVersion) always pass: they are the safety net.

// relevantFunc says whether an update from old to new matters.
type relevantFunc func(old, new any) bool

func resync(old, new any) bool {
	o, ok1 := old.(metav1.Object)
	n, ok2 := new.(metav1.Object)
	return ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion()
}

func deletionChanged(o, n metav1.Object) bool {
	return !reflect.DeepEqual(o.GetDeletionTimestamp(), n.GetDeletionTimestamp())
}

// machineRelevant: what the machine reconciler acts on, not the status it
// wrote (phase, conditions, agent report).
func machineRelevant(old, new any) bool {
	o, n := old.(*v1alpha1.MacOSMachine), new.(*v1alpha1.MacOSMachine)
	released := func(m *v1alpha1.MacOSMachine) bool {
		return meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineReleased)
	}
	return o.Generation != n.Generation || deletionChanged(o, n) ||
		!reflect.DeepEqual(o.Finalizers, n.Finalizers) || !reflect.DeepEqual(o.Labels, n.Labels) ||
		!reflect.DeepEqual(o.Status.IdentityRef, n.Status.IdentityRef) || !reflect.DeepEqual(o.Status.ClaimRef, n.Status.ClaimRef) ||
		released(o) != released(n)
}

// classRelevant: a class's spec, or its StorageAvailable hold-back, decide
// for every machine of the class; nothing else of it does.
func classRelevant(old, new any) bool {
	o, n := old.(*v1alpha1.MacOSMachineClass), new.(*v1alpha1.MacOSMachineClass)
	storage := func(c *v1alpha1.MacOSMachineClass) *metav1.Condition {
		return meta.FindStatusCondition(c.Status.Conditions, "StorageAvailable")
	}
	a, b := storage(o), storage(n)
	return o.Generation != n.Generation || deletionChanged(o, n) || (a == nil) != (b == nil) ||
		(a != nil && (a.Status != b.Status || !a.LastTransitionTime.Equal(&b.LastTransitionTime)))
}

// jobRelevant: only a Job finishing (Complete or Failed) changes a decision.
func jobRelevant(old, new any) bool {
	o, n := old.(*batchv1.Job), new.(*batchv1.Job)
	a, _ := machine.JobFinished(o)
	b, _ := machine.JobFinished(n)
	return deletionChanged(o, n) || a != b
}

// metadataOnly: Secrets (immutable) and the bootdisk PVC (whose only
// changes are the controller's own annotation and its binding) matter when
// they come and go.
func metadataOnly(old, new any) bool {
	return deletionChanged(old.(metav1.Object), new.(metav1.Object))
}

// unstructuredRelevant compares the given fields of KubeVirt/CDI objects.
func unstructuredRelevant(fields ...[]string) relevantFunc {
	return func(old, new any) bool {
		o, ok1 := old.(*unstructured.Unstructured)
		n, ok2 := new.(*unstructured.Unstructured)
		if !ok1 || !ok2 {
			return true
		}
		if deletionChanged(o, n) {
			return true
		}
		for _, f := range fields {
			a, _, _ := unstructured.NestedFieldNoCopy(o.Object, f...)
			b, _, _ := unstructured.NestedFieldNoCopy(n.Object, f...)
			if !reflect.DeepEqual(a, b) {
				return true
			}
		}
		return false
	}
}

var (
	// KubeVirt and CDI write their objects' status often; the machine
	// package says which of it its reconcile reads.
	dataVolumeRelevant             = typedRelevant(machine.DataVolumeUpdateMatters)
	virtualMachineInstanceRelevant = typedRelevant(machine.VMIUpdateMatters)
	// A VirtualMachine's own status is KubeVirt's summary of its VMI,
	// which is watched itself; its run strategy is the controller's.
	virtualMachineRelevant = unstructuredRelevant([]string{"spec", "runStrategy"})
)

// typedRelevant applies matters to the typed form of two unstructured
// objects; one that does not convert is always relevant.
func typedRelevant[T any, PT interface{ *T }](matters func(old, new PT) bool) relevantFunc {
	return func(old, new any) bool {
		o, ok1 := old.(*unstructured.Unstructured)
		n, ok2 := new.(*unstructured.Unstructured)
		if !ok1 || !ok2 || deletionChanged(o, n) {
			return true
		}
		var a, b T
		if kruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, PT(&a)) != nil ||
			kruntime.DefaultUnstructuredConverter.FromUnstructured(n.Object, PT(&b)) != nil {
			return true
		}
		return matters(&a, &b)
	}
}

func nodeRelevant(old, new any) bool {
	ready := func(n *corev1.Node) corev1.ConditionStatus {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status
			}
		}
		return corev1.ConditionUnknown
	}
	return ready(old.(*corev1.Node)) != ready(new.(*corev1.Node))
}

// handleRelevant is handle with update events filtered by relevant.
func handleRelevant(inf cache.SharedIndexInformer, relevant relevantFunc, f func(any)) {
	handleFiltered(inf, true, relevant, f)
}

// handleOwned is for objects the controller creates itself: their
// creation tells it nothing it does not know (and every object is listed
// again, with its machine, when the controller starts); updates pass
// relevant, deletions always pass (teardown waits for them).
func handleOwned(inf cache.SharedIndexInformer, relevant relevantFunc, f func(any)) {
	handleFiltered(inf, false, relevant, f)
}

func handleFiltered(inf cache.SharedIndexInformer, adds bool, relevant relevantFunc, f func(any)) {
	unwrap := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if _, ok := obj.(metav1.Object); ok {
			f(obj)
		}
	}
	add := unwrap
	if !adds {
		add = nil
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: add,
		UpdateFunc: func(old, obj any) {
			if resync(old, obj) || relevant(old, obj) {
				unwrap(obj)
			}
		},
		DeleteFunc: unwrap,
	})
	runtime.Must(err)
}
