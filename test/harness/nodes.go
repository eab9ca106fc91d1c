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
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// schedulableLabel is the label virt-controller's node controller sets to
// "false" on a node whose virt-handler stopped reporting.
const schedulableLabel = "kubevirt.io/schedulable"

// The label on the harness's Nodes.
const (
	partOfLabel = "app.kubernetes.io/part-of"
	partOfValue = "dockerios-test-harness"
)

// ensureNodes creates the fake Nodes (or resets ones an earlier harness
// left) as Ready, schedulable and untainted.
func (h *Harness) ensureNodes(ctx context.Context) error {
	for _, name := range h.cfg.Nodes {
		if err := h.ensureNode(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

func (h *Harness) ensureNode(ctx context.Context, name string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		partOfLabel: partOfValue, schedulableLabel: "true",
	}}}
	_, err := h.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Node %s: %w", name, err)
	}
	return h.setNodeReady(ctx, name, true)
}

// nodeDeleted plays the pod garbage collector for a deleted Node: the
// launcher pods bound to it are removed, so KubeVirt fails its VMIs and
// lets go of those being deleted. A Node deleted while it was not lost
// is the same to the harness (its guests die with it).
func (h *Harness) nodeDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	n, ok := obj.(*corev1.Node)
	if !ok || !slices.Contains(h.cfg.Nodes, n.Name) {
		return
	}
	h.mu.Lock()
	if _, lost := h.lostNodes[n.Name]; !lost {
		h.lostNodes[n.Name] = time.Now()
	}
	h.deletedNodes[n.Name] = true
	var victims []*guest
	for _, g := range h.guests {
		if g.node == n.Name && !g.lost {
			g.lost = true
			victims = append(victims, g)
		}
	}
	h.mu.Unlock()
	for _, g := range victims {
		h.stopAgent(g, true)
	}
	h.logf("Node %s deleted: its launcher pods are gone", n.Name)
	h.requeueVMIsOn(n.Name)
}

// setNodeReady writes a Node as its kubelet (ready) or as the node
// lifecycle controller after the kubelet stopped posting (not ready):
// Ready Unknown, the unreachable taints, and KubeVirt's schedulable label
// off.
func (h *Harness) setNodeReady(ctx context.Context, name string, ready bool) error {
	nodes := h.kube.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[schedulableLabel] = fmt.Sprint(ready)
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable })
		if !ready {
			node.Spec.Taints = append(node.Spec.Taints,
				corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
				corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &now})
		}
		if node, err = nodes.Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return err
		}
		cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}
		if !ready {
			cond.Status, cond.Reason, cond.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
		}
		kept := node.Status.Conditions[:0]
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == cond.Status {
					cond.LastTransitionTime = c.LastTransitionTime
				}
				continue
			}
			kept = append(kept, c)
		}
		node.Status.Conditions = append(kept, cond)
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: name}}
		capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
			corev1.ResourcePods: resource.MustParse("110")}
		node.Status.Capacity, node.Status.Allocatable = capacity, capacity
		_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

// pickNode schedules onto the next node that is not lost ("" if none is
// left), round robin.
func (h *Harness) pickNode() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for range h.cfg.Nodes {
		n := h.cfg.Nodes[h.nextNode%len(h.cfg.Nodes)]
		h.nextNode++
		if _, lost := h.lostNodes[n]; !lost {
			return n
		}
	}
	return ""
}

// LoseNode plays a node dying (power loss, kernel panic of the host, a
// GPU wedging the host): its guests die at once (agents SIGKILLed, so
// nothing answers at their addresses); the Node goes Ready=Unknown with
// the unreachable taints, as the node lifecycle controller marks it; and
// the VMIs on it stay phase Running, because no virt-handler is left to
// say otherwise, with their Ready condition False (the launcher pod marked
// not ready, copied by KubeVirt). After Config.NodeUnresponsiveAfter (the
// virt-handler heartbeat timeout, 5m in KubeVirt; never by default here)
// virt-controller marks them Failed with reason NodeUnresponsive, and
// VMs that should run get a new VMI elsewhere after RestartDelay. No new
// VMI is scheduled on a lost node.
func (h *Harness) LoseNode(node string) error {
	if !slices.Contains(h.cfg.Nodes, node) {
		return fmt.Errorf("harness: %q is not one of its nodes %v", node, h.cfg.Nodes)
	}
	h.mu.Lock()
	if _, already := h.lostNodes[node]; !already {
		h.lostNodes[node] = time.Now()
		h.stats.NodesLost++
	}
	var victims []*guest
	for _, g := range h.guests {
		if g.node == node {
			g.lost = true
			victims = append(victims, g)
		}
	}
	h.mu.Unlock()
	for _, g := range victims {
		h.stopAgent(g, true)
	}
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	if err := h.setNodeReady(ctx, node, false); err != nil {
		return err
	}
	h.requeueVMIsOn(node)
	return nil
}

// RestoreNode brings a lost node back (Ready, schedulable), re-creating
// its Node if it was deleted (a repaired host joining again). Guests that
// died with it do not come back: their VMIs, still Running, are failed as
// virt-handler finds their domains gone.
func (h *Harness) RestoreNode(node string) error {
	if !slices.Contains(h.cfg.Nodes, node) {
		return fmt.Errorf("harness: %q is not one of its nodes %v", node, h.cfg.Nodes)
	}
	h.mu.Lock()
	delete(h.lostNodes, node)
	delete(h.deletedNodes, node)
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	if err := h.ensureNode(ctx, node); err != nil {
		return err
	}
	h.requeueVMIsOn(node)
	return nil
}

func (h *Harness) requeueVMIsOn(node string) {
	objs, err := h.vmiLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, obj := range objs {
		vmi, err := fromUnstructured[kubevirtv1.VirtualMachineInstance](obj)
		if err == nil && vmi.Status.NodeName == node {
			h.queue.Add(key{kindVMI, vmi.Namespace, vmi.Name})
		}
	}
}
