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

// Package pool keeps MacOSMachinePools warm and answers claims: it binds
// Pending claims to Ready, unbound machines through the bind subresource
// (oldest claim first), makes a dedicated machine for a claim that names a
// class, disposes of machines whose claim went or whose guest failed, and
// replaces them.
//
// A pool's machines get generated names (<pool>-<random>), never reused, so
// a machine's Events and history are its own. Between creating a machine
// and seeing it in the cache, the pool counts it from an in-memory
// expectation (as ReplicaSets do), so a stale cache does not make a second
// one; a restarted controller lists everything afresh and needs none. A
// class claim's machine is named after the claim, so a repeated reconcile
// gets AlreadyExists.
package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	dlisters "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

// Reconciler reconciles pools and class claims.
type Reconciler struct {
	Client   versioned.Interface
	Pools    dlisters.MacOSMachinePoolLister
	Machines dlisters.MacOSMachineLister
	Claims   dlisters.MacOSMachineClaimLister
	Recorder record.EventRecorder
	Log      *slog.Logger

	expect expectations
}

// expectationTTL bounds how long a created machine the cache has not shown
// is counted: a create the cache never shows (a lost watch event) must not
// stop the pool for good.
const expectationTTL = time.Minute

// expectations are the machines each pool created that its cache has not
// shown yet.
type expectations struct {
	mu      sync.Mutex
	created map[string]map[string]time.Time
}

func (x *expectations) add(pool, name string, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.created == nil {
		x.created = map[string]map[string]time.Time{}
	}
	if x.created[pool] == nil {
		x.created[pool] = map[string]time.Time{}
	}
	x.created[pool][name] = now
}

// pending forgets the created machines seen (or too old) and counts the rest.
func (x *expectations) pending(pool string, seen map[string]bool, now time.Time) int32 {
	x.mu.Lock()
	defer x.mu.Unlock()
	var n int32
	for name, at := range x.created[pool] {
		if seen[name] || now.Sub(at) > expectationTTL {
			delete(x.created[pool], name)
			continue
		}
		n++
	}
	return n
}

// Disposable says why an unbound machine must go, or "". A machine that
// only lost its agent is kept (failure rule: a network fault is not a
// guest fault).
func Disposable(m *v1alpha1.MacOSMachine) string {
	switch {
	case m.DeletionTimestamp != nil:
		return ""
	case meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineReleased):
		return "its claim was deleted"
	case m.Status.Phase == v1alpha1.MachineFailed:
		return "it failed: " + readyMessage(m)
	case m.Status.ClaimRef == nil && machine.BrokenGuest(m):
		// The VM stopped, or the agent answered that the guest is not
		// Ready. AgentReachable=False alone is not a guest fault.
		return "it was Ready and its guest is not: " + readyMessage(m)
	}
	return ""
}

func readyMessage(m *v1alpha1.MacOSMachine) string {
	if c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MachineConditionReady); c != nil {
		return c.Reason + ": " + c.Message
	}
	return string(m.Status.Phase)
}

func ready(m *v1alpha1.MacOSMachine) bool {
	return m.DeletionTimestamp == nil && m.Status.Phase == v1alpha1.MachineReady &&
		meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineConditionReady) &&
		!meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineReleased)
}

// pending is a claim still waiting for a machine.
func pending(c *v1alpha1.MacOSMachineClaim) bool {
	return c.DeletionTimestamp == nil && c.Status.MachineName == "" && c.Status.Phase != v1alpha1.ClaimLost
}

// oldestFirst orders by creation, then name, so every replica and every
// restart agrees on who is first.
func oldestFirst[T metav1.Object](items []T) {
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i].GetCreationTimestamp(), items[j].GetCreationTimestamp()
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return items[i].GetName() < items[j].GetName()
	})
}

// readyLongestFirst returns machines ordered by when they last became
// Ready (then by name), oldest first.
func readyLongestFirst(machines []*v1alpha1.MacOSMachine) []*v1alpha1.MacOSMachine {
	since := func(m *v1alpha1.MacOSMachine) metav1.Time {
		if c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MachineConditionReady); c != nil {
			return c.LastTransitionTime
		}
		return m.CreationTimestamp
	}
	out := append([]*v1alpha1.MacOSMachine(nil), machines...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := since(out[i]), since(out[j])
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// ReconcilePool keeps one pool: dispose, bind, scale, report.
func (r *Reconciler) ReconcilePool(ctx context.Context, namespace, name string) error {
	p, err := r.Pools.MacOSMachinePools(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	machines, err := r.Machines.MacOSMachines(namespace).List(labels.SelectorFromSet(labels.Set{v1alpha1.MachinePoolLabel: name}))
	if err != nil {
		return err
	}
	oldestFirst(machines)
	var errs []error

	// Dispose of machines that may not serve again.
	var live []*v1alpha1.MacOSMachine
	for _, m := range machines {
		if why := Disposable(m); why != "" {
			deleted, err := r.disposeOf(ctx, m, why)
			if deleted && !meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineReleased) {
				// Said on the pool too: a class whose machines keep
				// failing shows on the pool as one aggregated Event, not
				// only on machines that are gone.
				r.Recorder.Eventf(p, corev1.EventTypeWarning, ReasonMachineReplaced, "replacing MacOSMachine %s: %s", m.Name, why)
			}
			errs = append(errs, err)
			continue
		}
		if m.DeletionTimestamp == nil {
			live = append(live, m)
		}
	}

	// Bind Pending claims of this pool, oldest first, to Ready machines.
	claims, err := r.Claims.MacOSMachineClaims(namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	var waiting []*v1alpha1.MacOSMachineClaim
	for _, c := range claims {
		if c.Spec.PoolName == name && pending(c) {
			waiting = append(waiting, c)
		}
	}
	oldestFirst(waiting)
	// Pair claims and machines first (oldest claim, the machine Ready
	// longest, as the apiserver picks at create), then bind the pairs at
	// once: each bind is a round trip through the apiserver, and a claim
	// should not wait for the binds before it.
	paired := map[string]bool{}
	type pair struct {
		c *v1alpha1.MacOSMachineClaim
		m *v1alpha1.MacOSMachine
	}
	var pairs []pair
	byReadySince := readyLongestFirst(live)
	for _, c := range waiting {
		for _, m := range byReadySince {
			if paired[m.Name] || m.Status.ClaimRef != nil || !ready(m) || !matches(c, m) {
				continue
			}
			paired[m.Name] = true
			pairs = append(pairs, pair{c, m})
			break
		}
	}
	// taken are the machines this pass bound. A bind that failed (its
	// claim deleted meanwhile, the machine no longer Ready, a race lost)
	// leaves its machine as the cache shows it: counting it bound would
	// make a superfluous machine, and the next pass would scale down a
	// Ready one to make up for it.
	taken := map[string]bool{}
	if len(pairs) > 0 {
		start := time.Now()
		bindErrs := parallel(len(pairs), func(i int) error { return r.bind(ctx, pairs[i].c, pairs[i].m) })
		for i, err := range bindErrs {
			if err == nil {
				taken[pairs[i].m.Name] = true
			}
		}
		errs = append(errs, bindErrs...)
		r.Log.Debug("bound claims", "namespace", namespace, "pool", name, "waiting", len(waiting), "bound", len(taken), "tried", len(pairs), "took", time.Since(start).String())
	}

	// Keep replicas unbound machines (Ready or on their way), within
	// maxMachines.
	var unbound, readyUnbound, bound int32
	seen := map[string]bool{}
	for _, m := range machines {
		seen[m.Name] = true
	}
	inflight := r.expect.pending(namespace+"/"+name, seen, time.Now())
	unbound += inflight
	for _, m := range live {
		switch {
		case m.Status.ClaimRef != nil || taken[m.Name]:
			bound++
		default:
			unbound++
			if ready(m) {
				readyUnbound++
			}
		}
	}
	want := ptr.Deref(p.Spec.Replicas, v1alpha1.DefaultPoolReplicas)
	total := int32(len(machines)) + inflight
	create := want - unbound
	if p.DeletionTimestamp != nil {
		// Being deleted: with foreground propagation the garbage
		// collector deletes its machines first, and replacing them
		// would keep the pool from ever going.
		create = 0
	}
	capped := false
	if max := p.Spec.MaxMachines; max != nil && total+create > *max {
		create = *max - total
		capped = true
	}
	if create > 0 {
		errs = append(errs, parallel(int(create), func(int) error {
			created, err := r.Client.DockeriosV1alpha1().MacOSMachines(namespace).Create(ctx, r.newMachine(p), metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("creating a machine for pool %s: %w", p.Name, err)
			}
			r.expect.add(namespace+"/"+name, created.Name, time.Now())
			return nil
		})...)
		unbound += create
	}
	// Too many unbound (replicas lowered): remove those furthest from
	// Ready, newest first. Not while machines this pool created are still
	// missing from the cache: they are the newest and furthest from Ready,
	// and deleting what the cache shows in their stead would take Ready
	// machines; their arrival brings the pool back here (as a ReplicaSet
	// waits for its expectations).
	excess := unbound - want
	if excess > 0 && inflight > 0 {
		// Come back: a machine created and deleted before the cache
		// showed it brings no event, and its expectation only lapses.
		errs = append(errs, errRetry)
	}
	if excess > 0 && inflight == 0 {
		for i := len(live) - 1; i >= 0 && excess > 0; i-- {
			m := live[i]
			if m.Status.ClaimRef != nil || taken[m.Name] || ready(m) {
				continue
			}
			errs = append(errs, r.dispose(ctx, m, "the pool has more unbound machines than replicas"))
			excess--
		}
		for i := len(live) - 1; i >= 0 && excess > 0; i-- {
			m := live[i]
			if m.Status.ClaimRef != nil || taken[m.Name] || !ready(m) {
				continue
			}
			errs = append(errs, r.dispose(ctx, m, "the pool has more unbound machines than replicas"))
			excess--
		}
	}

	errs = append(errs, r.writePoolStatus(ctx, p, poolCounts{unbound: unbound, readyUnbound: readyUnbound, bound: bound,
		total: total + max(create, 0), capped: capped}))
	return errors.Join(errs...)
}

// maxParallel bounds the API calls one pool reconcile makes at once.
const maxParallel = 16

// parallel runs f(0..n-1), at most maxParallel at a time, and returns
// the errors.
func parallel(n int, f func(i int) error) []error {
	errs := make([]error, n)
	sem := make(chan struct{}, maxParallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errs
}

func matches(c *v1alpha1.MacOSMachineClaim, m *v1alpha1.MacOSMachine) bool {
	if c.Spec.Selector == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(c.Spec.Selector)
	return err == nil && s.Matches(labels.Set(m.Labels))
}

func (r *Reconciler) newMachine(p *v1alpha1.MacOSMachinePool) *v1alpha1.MacOSMachine {
	lbls := map[string]string{}
	for k, v := range p.Spec.Template.Metadata.Labels {
		lbls[k] = v
	}
	lbls[v1alpha1.MachinePoolLabel] = p.Name
	return &v1alpha1.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: p.Name + "-", Namespace: p.Namespace, Labels: lbls, Annotations: p.Spec.Template.Metadata.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "MacOSMachinePool",
				Name: p.Name, UID: p.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: v1alpha1.MacOSMachineSpec{ClassName: p.Spec.ClassName, PoolName: p.Name,
			ImageName: p.Spec.Template.Spec.ImageName, VMLabels: p.Spec.Template.Spec.VMLabels},
	}
}

func (r *Reconciler) bind(ctx context.Context, c *v1alpha1.MacOSMachineClaim, m *v1alpha1.MacOSMachine) error {
	_, err := r.Client.DockeriosV1alpha1().MacOSMachineClaims(c.Namespace).Bind(ctx, c.Name,
		&v1alpha1.MacOSMachineBinding{MachineName: m.Name}, metav1.CreateOptions{})
	if apierrors.IsConflict(err) {
		// Someone else moved first (another claim, a status change): the
		// next event brings us back with fresh caches.
		r.Log.Debug("bind lost a race", "claim", c.Name, "machine", m.Name, "reason", err.Error())
		return errRetry
	}
	if err != nil {
		return fmt.Errorf("binding claim %s to machine %s: %w", c.Name, m.Name, err)
	}
	r.Log.Info("bound", "namespace", c.Namespace, "claim", c.Name, "machine", m.Name)
	return nil
}

// errRetry asks for a requeue without being an error worth logging.
var errRetry = errors.New("retry")

// IsRetry reports whether err only asks for another pass: every error
// joined in it does, so that a real error of the same pass (a failed
// create or delete beside a lost race) is still logged.
func IsRetry(err error) bool {
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		for _, e := range errs {
			if !IsRetry(e) {
				return false
			}
		}
		return len(errs) > 0
	case interface{ Unwrap() error }:
		return IsRetry(e.Unwrap())
	}
	return err == errRetry // wrappers are unwrapped above
}

// dispose deletes m as the cache shows it: the delete is conditioned on
// its resourceVersion, so a machine the apiserver bound meanwhile (a claim
// bound at create writes the machine's claimRef in its transaction) or
// that changed otherwise is not deleted on a stale view; its change brings
// the pool back here.
func (r *Reconciler) dispose(ctx context.Context, m *v1alpha1.MacOSMachine, why string) error {
	_, err := r.disposeOf(ctx, m, why)
	return err
}

// disposeOf is dispose, saying whether this call deleted the machine.
func (r *Reconciler) disposeOf(ctx context.Context, m *v1alpha1.MacOSMachine, why string) (bool, error) {
	err := r.Client.DockeriosV1alpha1().MacOSMachines(m.Namespace).Delete(ctx, m.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &m.UID, ResourceVersion: &m.ResourceVersion}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("deleting machine %s: %w", m.Name, err)
	}
	r.Recorder.Eventf(m, corev1.EventTypeNormal, "Disposed", "deleted the machine because %s", why)
	r.Log.Info("disposed of machine", "namespace", m.Namespace, "machine", m.Name, "because", why)
	return true, nil
}

// Reasons of a pool's Ready condition.
const (
	ReasonWarm    = "Warm"
	ReasonFilling = "Filling"
	// ReasonMaxMachinesReached: the pool has fewer unbound Ready machines
	// than replicas and may make no more, because it holds maxMachines.
	ReasonMaxMachinesReached = "MaxMachinesReached"
)

// poolCounts is what one pool reconcile counted.
type poolCounts struct {
	unbound, readyUnbound, bound int32
	// total is every machine of the pool, made or being made.
	total int32
	// capped: maxMachines kept the pool from making the machines it lacks.
	capped bool
}

func (r *Reconciler) writePoolStatus(ctx context.Context, p *v1alpha1.MacOSMachinePool, n poolCounts) error {
	st := p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	st.Replicas, st.ReadyReplicas, st.BoundMachines = n.unbound, n.readyUnbound, n.bound
	want := ptr.Deref(p.Spec.Replicas, v1alpha1.DefaultPoolReplicas)
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: ReasonWarm,
		Message: fmt.Sprintf("%d of %d unbound machines are Ready", n.readyUnbound, want), ObservedGeneration: p.Generation}
	switch {
	case n.readyUnbound >= want:
	case n.capped:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonMaxMachinesReached
		cond.Message = fmt.Sprintf("%d of %d unbound machines are Ready, and the pool makes no more: it holds %d machines (%d bound to claims), its maxMachines; "+
			"a machine is made when one goes (a claim released) or when maxMachines is raised", n.readyUnbound, want, n.total, n.bound)
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonFilling
	}
	was := meta.FindStatusCondition(p.Status.Conditions, "Ready")
	meta.SetStatusCondition(&st.Conditions, cond)
	if equalStatus(&p.Status, st) {
		return nil
	}
	// Said once per time the cap is reached (after the write that records
	// it): the condition says it for as long as it holds.
	announce := cond.Reason == ReasonMaxMachinesReached && (was == nil || was.Reason != ReasonMaxMachinesReached)
	// A merge patch of status, conditioned on the pool as read: the
	// pool's status is this controller's alone, so the only conflict is a
	// stale cache, whose counts (and the Event below) must not be written.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": p.ResourceVersion}, "status": st})
	if err != nil {
		return err
	}
	_, err = r.Client.DockeriosV1alpha1().MacOSMachinePools(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if apierrors.IsConflict(err) {
		return errRetry
	}
	if err == nil && announce {
		r.Recorder.Event(p, corev1.EventTypeWarning, ReasonMaxMachinesReached, cond.Message)
	}
	return err
}

func equalStatus(a, b *v1alpha1.MacOSMachinePoolStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Replicas != b.Replicas || a.ReadyReplicas != b.ReadyReplicas || a.BoundMachines != b.BoundMachines || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}

// ReasonMachineReplaced is the Warning Event on a pool that deleted one of
// its machines because it failed or its guest broke, to replace it.
const ReasonMachineReplaced = "MachineReplaced"

// ReasonMachineNameTaken is the Warning Event on a class claim whose
// machine's name (the claim's) is taken by a machine not made for it.
const ReasonMachineNameTaken = "MachineNameTaken"

// ReconcileClassClaim gives a claim that names a class its own machine,
// binds it when Ready, and disposes of it when it fails (the claim then
// shows Lost, written by the apiserver in the machine's deletion).
func (r *Reconciler) ReconcileClassClaim(ctx context.Context, namespace, name string) error {
	c, err := r.Claims.MacOSMachineClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && c.Spec.ClassName == "") {
		return nil
	}
	if err != nil {
		return err
	}
	// The machine is named after the claim, so the user sees whose it is.
	mName := c.Name
	m, err := r.Machines.MacOSMachines(namespace).Get(mName)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if m != nil && m.Labels[v1alpha1.ClaimUIDLabel] != string(c.UID) {
		if _, earlier := m.Labels[v1alpha1.ClaimUIDLabel]; !earlier && pending(c) {
			// Not the machine of an earlier claim of this name, which goes
			// once that claim has: someone else's, which only a person can
			// move. Said on the claim, which would otherwise wait without
			// a word (repeats are counted on one Event by the recorder).
			r.Recorder.Eventf(c, corev1.EventTypeWarning, ReasonMachineNameTaken,
				"MacOSMachine %s already exists and was not made for this claim; a class claim's machine is named after the claim: delete that machine, or create the claim under another name", mName)
		}
		return fmt.Errorf("machine %s exists and is not claim %s's", mName, c.Name)
	}
	if !pending(c) {
		if m != nil && m.Status.Phase == v1alpha1.MachineFailed {
			return r.dispose(ctx, m, "it failed: "+readyMessage(m))
		}
		return nil
	}
	switch {
	case m == nil:
		nm := &v1alpha1.MacOSMachine{
			ObjectMeta: metav1.ObjectMeta{Name: mName, Namespace: namespace, Labels: map[string]string{v1alpha1.ClaimUIDLabel: string(c.UID)},
				// A backstop: the garbage collector removes the machine should
				// the claim go while this controller is down.
				OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "MacOSMachineClaim",
					Name: c.Name, UID: c.UID, BlockOwnerDeletion: ptr.To(false)}}},
			Spec: v1alpha1.MacOSMachineSpec{ClassName: c.Spec.ClassName},
		}
		if _, err := r.Client.DockeriosV1alpha1().MacOSMachines(namespace).Create(ctx, nm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating machine for claim %s: %w", c.Name, err)
		}
		r.Recorder.Eventf(c, corev1.EventTypeNormal, "MachineCreated", "created MacOSMachine %s of class %s for the claim", mName, c.Spec.ClassName)
		return nil
	case Disposable(m) != "":
		return r.dispose(ctx, m, Disposable(m))
	case ready(m) && m.Status.ClaimRef == nil:
		return r.bind(ctx, c, m)
	}
	return nil
}

// ReconcileClassMachine disposes of a class claim's machine once the claim
// is gone (the apiserver marked it Released) or was never found.
func (r *Reconciler) ReconcileClassMachine(ctx context.Context, namespace, name string) error {
	m, err := r.Machines.MacOSMachines(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	uid, ok := m.Labels[v1alpha1.ClaimUIDLabel]
	if !ok || m.DeletionTimestamp != nil {
		return nil
	}
	if why := Disposable(m); why != "" {
		return r.dispose(ctx, m, why)
	}
	c, err := r.Claims.MacOSMachineClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && string(c.UID) != uid) {
		// Confirm with the apiserver before deleting on a cache's word.
		live, gerr := r.Client.DockeriosV1alpha1().MacOSMachineClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) || (gerr == nil && string(live.UID) != uid) {
			return r.dispose(ctx, m, "the claim it was made for is gone")
		}
		return gerr
	}
	return err
}
