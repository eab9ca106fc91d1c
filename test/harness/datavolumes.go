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

package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// FailClones makes clones into a StorageClass fail while fail is set, as
// CDI reports a full or broken storage backend: the DataVolume's phase
// becomes Failed and its Running condition False with reason Error and a
// message naming the class. It affects DataVolumes still cloning and new
// ones; finished ones stay as they are. storageClassName "" stands for
// DataVolumes that name no class (the cluster default).
func (h *Harness) FailClones(storageClassName string, fail bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if fail {
		h.failingClasses[storageClassName] = true
	} else {
		delete(h.failingClasses, storageClassName)
	}
}

// CloneFailureMessage is the message of a failed clone into class.
func CloneFailureMessage(class string) string {
	if class == "" {
		class = "(default)"
	}
	return fmt.Sprintf("Unable to process data: write /data/disk.img: no space left on device in StorageClass %s", class)
}

// storageClassOf is the class a DataVolume's volume is made in.
func storageClassOf(dv *cdiv1.DataVolume) string {
	switch {
	case dv.Spec.Storage != nil && dv.Spec.Storage.StorageClassName != nil:
		return *dv.Spec.Storage.StorageClassName
	case dv.Spec.PVC != nil && dv.Spec.PVC.StorageClassName != nil:
		return *dv.Spec.PVC.StorageClassName
	}
	return ""
}

type cloneRun struct {
	namespace, name string
	started         time.Time
	counted         bool
}

// syncDataVolume plays CDI cloning one DataVolume: CloneScheduled (the
// target PVC waits to bind), CloneInProgress at half of CloneDuration,
// Succeeded at its end, or Failed when its StorageClass is failing.
func (h *Harness) syncDataVolume(ctx context.Context, namespace, name string) error {
	obj, err := h.dataVolumeLister.ByNamespace(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		h.mu.Lock()
		for uid, r := range h.clones {
			if r.namespace == namespace && r.name == name {
				delete(h.clones, uid)
			}
		}
		h.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	dv, err := fromUnstructured[cdiv1.DataVolume](obj)
	if err != nil {
		return err
	}
	if dv.Status.Phase == cdiv1.Succeeded || dv.Status.Phase == cdiv1.Failed || dv.DeletionTimestamp != nil {
		return nil
	}
	class := storageClassOf(dv)
	h.mu.Lock()
	run := h.clones[dv.UID]
	if run == nil {
		run = &cloneRun{namespace: namespace, name: name, started: time.Now()}
		h.clones[dv.UID] = run
	}
	failing := h.failingClasses[class]
	h.mu.Unlock()

	elapsed := time.Since(run.started)
	half := h.cfg.CloneDuration / 2
	want, next := cdiv1.CloneScheduled, half-elapsed
	switch {
	case elapsed >= h.cfg.CloneDuration:
		want, next = cdiv1.Succeeded, 0
	case elapsed >= half:
		want, next = cdiv1.CloneInProgress, h.cfg.CloneDuration-elapsed
	}
	// Storage trouble shows once data is written.
	if failing && want != cdiv1.CloneScheduled {
		want, next = cdiv1.Failed, 0
	}
	// CDI names the phases of a blank disk (spec.source.blank), which is
	// made rather than copied, as an import's.
	if src := dv.Spec.Source; src != nil && src.Blank != nil {
		switch want {
		case cdiv1.CloneScheduled:
			want = cdiv1.ImportScheduled
		case cdiv1.CloneInProgress:
			want = cdiv1.ImportInProgress
		}
	}
	k := key{kindDataVolume, namespace, name}
	if dv.Status.Phase == want {
		h.after(k, next)
		return nil
	}
	err = h.updateStatus(ctx, DataVolumeGVR, namespace, name, dv.UID, func(u *unstructured.Unstructured) (bool, error) {
		cur, err := fromUnstructured[cdiv1.DataVolume](u)
		if err != nil {
			return false, err
		}
		setCloneStatus(&cur.Status, name, want, class)
		return true, setStatus(u, cur.Status)
	})
	if err != nil {
		return err
	}
	h.logf("DataVolume %s/%s %s", namespace, name, want)
	if want == cdiv1.Succeeded || want == cdiv1.Failed {
		h.mu.Lock()
		if !run.counted {
			run.counted = true
			if want == cdiv1.Succeeded {
				h.stats.DataVolumesSucceeded++
			} else {
				h.stats.DataVolumesFailed++
			}
		}
		h.mu.Unlock()
		return nil
	}
	h.after(k, next)
	return nil
}

// setCloneStatus writes phase, progress and CDI's three conditions (Bound,
// Ready, Running) as CDI does for a clone in that phase.
func setCloneStatus(st *cdiv1.DataVolumeStatus, name string, phase cdiv1.DataVolumePhase, class string) {
	now := metav1.Now()
	set := func(t cdiv1.DataVolumeConditionType, s corev1.ConditionStatus, reason, msg string) {
		for i := range st.Conditions {
			c := &st.Conditions[i]
			if c.Type == t {
				if c.Status != s {
					c.LastTransitionTime = now
				}
				c.Status, c.Reason, c.Message, c.LastHeartbeatTime = s, reason, msg, now
				return
			}
		}
		st.Conditions = append(st.Conditions, cdiv1.DataVolumeCondition{Type: t, Status: s, Reason: reason, Message: msg,
			LastTransitionTime: now, LastHeartbeatTime: now})
	}
	st.Phase = phase
	st.ClaimName = name
	switch phase {
	case cdiv1.CloneScheduled, cdiv1.ImportScheduled:
		st.Progress = "N/A"
		set(cdiv1.DataVolumeBound, corev1.ConditionFalse, "Pending", fmt.Sprintf("PVC %s Pending", name))
		set(cdiv1.DataVolumeReady, corev1.ConditionFalse, "", "")
		set(cdiv1.DataVolumeRunning, corev1.ConditionFalse, "", "")
	case cdiv1.CloneInProgress, cdiv1.ImportInProgress:
		st.Progress = "50.0%"
		set(cdiv1.DataVolumeBound, corev1.ConditionTrue, "Bound", fmt.Sprintf("PVC %s Bound", name))
		set(cdiv1.DataVolumeReady, corev1.ConditionFalse, "", "")
		set(cdiv1.DataVolumeRunning, corev1.ConditionTrue, "", "")
	case cdiv1.Succeeded:
		st.Progress = "100.0%"
		set(cdiv1.DataVolumeBound, corev1.ConditionTrue, "Bound", fmt.Sprintf("PVC %s Bound", name))
		set(cdiv1.DataVolumeReady, corev1.ConditionTrue, "", "")
		set(cdiv1.DataVolumeRunning, corev1.ConditionFalse, "Completed", "Clone Complete")
	case cdiv1.Failed:
		set(cdiv1.DataVolumeBound, corev1.ConditionTrue, "Bound", fmt.Sprintf("PVC %s Bound", name))
		set(cdiv1.DataVolumeReady, corev1.ConditionFalse, "", "")
		set(cdiv1.DataVolumeRunning, corev1.ConditionFalse, "Error", CloneFailureMessage(class))
	}
}

// fromUnstructured decodes a dynamic object into its typed struct (a JSON
// round trip, so custom unmarshalers such as resource.Quantity apply).
func fromUnstructured[T any](obj runtime.Object) (*T, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected %T in the cache", obj)
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, err
	}
	return out, nil
}

// toMap encodes a typed value as unstructured content.
func toMap(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(data, &m)
}

// setStatus replaces only the status of u: what the owner of the object
// wrote elsewhere is left exactly as it is.
func setStatus(u *unstructured.Unstructured, status any) error {
	m, err := toMap(status)
	if err != nil {
		return err
	}
	u.Object["status"] = m
	return nil
}

// updateStatus reads the object afresh, lets mutate change it and writes
// it through the status subresource, or with the object for a kind without
// one (a VirtualMachineInstance, as virt-handler writes it), retrying on
// conflicts. An object that is gone, or was replaced (another UID), is
// left alone.
func (h *Harness) updateStatus(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, uid types.UID,
	mutate func(*unstructured.Unstructured) (bool, error)) error {
	client := h.dyn.Resource(gvr).Namespace(namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if uid != "" && u.GetUID() != uid {
			return nil
		}
		changed, err := mutate(u)
		if err != nil || !changed {
			return err
		}
		if hasStatusSubresource(gvr) {
			_, err = client.UpdateStatus(ctx, u, metav1.UpdateOptions{})
		} else {
			_, err = client.Update(ctx, u, metav1.UpdateOptions{})
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// getCached returns an object of a lister, nil if there is none.
func getCached(l cache.GenericLister, namespace, name string) (runtime.Object, error) {
	obj, err := l.ByNamespace(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}
