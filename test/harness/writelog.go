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
	"fmt"
	"sort"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// Write is one write of a teardown, at the etcd revision it was made at.
type Write struct {
	Revision int64
	What     string
}

// WriteLog records the writes that make up one machine's teardown, in the
// order etcd made them: kube-apiserver and the DockerIOS apiserver store
// into one etcd here, so the resourceVersions of all their objects are
// revisions of that one etcd, and two writes in one transaction share one.
type WriteLog struct {
	mu     sync.Mutex
	writes []Write
	seen   map[string]bool
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Teardown names what a teardown log follows.
type Teardown struct {
	Namespace, Machine, MachineUID string
	// Claim, when set, is the machine's claim; Identity its identity.
	Claim, Identity string
}

var (
	machinesGVR   = schema.GroupVersionResource{Group: "dockerios.io", Version: "v1alpha1", Resource: "macosmachines"}
	claimsGVR     = schema.GroupVersionResource{Group: "dockerios.io", Version: "v1alpha1", Resource: "macosmachineclaims"}
	identitiesGVR = schema.GroupVersionResource{Group: "dockerios.io", Version: "v1alpha1", Resource: "macosidentities"}
)

// RecordTeardown starts recording, from now, the writes of td's teardown:
// the machine marked for deletion and removed, its claim Lost, its
// VirtualMachine halted and deleted, its VMI, DataVolume, bootdisk Job, PVC
// and Secrets deleted, its identity released. Stop it with Stop.
func (h *Harness) RecordTeardown(td Teardown) (*WriteLog, error) {
	ctx, cancel := context.WithCancel(h.ctx)
	l := &WriteLog{seen: map[string]bool{}, cancel: cancel}
	byUID := metav1.ListOptions{LabelSelector: machineUIDLabel + "=" + td.MachineUID}
	byName := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	}
	corev1GVR := func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Version: "v1", Resource: r}
	}
	type follow struct {
		gvr       schema.GroupVersionResource
		namespace string
		opts      metav1.ListOptions
		note      func(ev watch.EventType, o *unstructured.Unstructured) string
	}
	deleted := func(kind string) func(watch.EventType, *unstructured.Unstructured) string {
		return func(ev watch.EventType, o *unstructured.Unstructured) string {
			if ev == watch.Deleted {
				return kind + " " + o.GetName() + " deleted"
			}
			return ""
		}
	}
	follows := []follow{
		{machinesGVR, td.Namespace, byName(td.Machine), func(ev watch.EventType, o *unstructured.Unstructured) string {
			switch {
			case ev == watch.Deleted:
				return "machine removed"
			case o.GetDeletionTimestamp() != nil:
				return "machine marked for deletion"
			}
			return ""
		}},
		{VirtualMachineGVR, td.Namespace, byUID, func(ev watch.EventType, o *unstructured.Unstructured) string {
			if ev == watch.Deleted {
				return "VirtualMachine deleted"
			}
			if s, _, _ := unstructured.NestedString(o.Object, "spec", "runStrategy"); s == "Halted" {
				return "VirtualMachine halted"
			}
			return ""
		}},
		{VirtualMachineInstanceGVR, td.Namespace, byUID, deleted("VirtualMachineInstance")},
		{DataVolumeGVR, td.Namespace, byUID, deleted("DataVolume")},
		{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, td.Namespace, byUID, deleted("Job")},
		{corev1GVR("persistentvolumeclaims"), td.Namespace, byUID, deleted("PersistentVolumeClaim")},
		{corev1GVR("secrets"), td.Namespace, byUID, deleted("Secret")},
	}
	if td.Claim != "" {
		follows = append(follows, follow{claimsGVR, td.Namespace, byName(td.Claim), func(ev watch.EventType, o *unstructured.Unstructured) string {
			if p, _, _ := unstructured.NestedString(o.Object, "status", "phase"); p == "Lost" {
				return "claim Lost"
			}
			return ""
		}})
	}
	if td.Identity != "" {
		follows = append(follows, follow{identitiesGVR, "", byName(td.Identity), func(ev watch.EventType, o *unstructured.Unstructured) string {
			if uid, _, _ := unstructured.NestedString(o.Object, "status", "allocation", "machineUID"); uid != td.MachineUID {
				return "identity released"
			}
			return ""
		}})
	}
	for _, f := range follows {
		list, err := h.dyn.Resource(f.gvr).Namespace(f.namespace).List(ctx, f.opts)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("harness: listing %s: %w", f.gvr.Resource, err)
		}
		opts := f.opts
		opts.ResourceVersion = list.GetResourceVersion()
		w, err := h.dyn.Resource(f.gvr).Namespace(f.namespace).Watch(ctx, opts)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("harness: watching %s: %w", f.gvr.Resource, err)
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					o, ok := ev.Object.(*unstructured.Unstructured)
					if !ok {
						continue
					}
					if what := f.note(ev.Type, o); what != "" {
						l.add(o.GetResourceVersion(), what)
					}
				}
			}
		}()
	}
	return l, nil
}

// add records what at revision rv, once: the first write that shows it.
func (l *WriteLog) add(rv, what string) {
	rev, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[what] {
		return
	}
	l.seen[what] = true
	l.writes = append(l.writes, Write{Revision: rev, What: what})
}

// Stop ends the recording.
func (l *WriteLog) Stop() {
	l.cancel()
	l.wg.Wait()
}

// Writes are the writes recorded so far, in etcd's order.
func (l *WriteLog) Writes() []Write {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]Write(nil), l.writes...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Revision < out[j].Revision })
	return out
}

// At is the revision of the first write that showed what, or 0.
func (l *WriteLog) At(what string) int64 {
	for _, w := range l.Writes() {
		if w.What == what {
			return w.Revision
		}
	}
	return 0
}
