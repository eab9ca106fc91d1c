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

// Package controller reconciles GitLabRunners: for each replica it holds
// a MacOSMachineClaim, waits for the bound machine to be Ready, provisions
// the guest over SSH, registers a GitLab runner on it, and takes all of
// that apart again — deregistering before releasing, so GitLab never
// hands a job to a machine on its way out.
//
// It is a client of DockerIOS's public API only (dockerios.io's types,
// through controller-runtime's client): it never makes a machine, never
// touches a VirtualMachine, an identity or a disk, and nothing of
// dockerios.io knows it exists. What it keeps is kept where it can be
// seen again after a restart: the claims it owns (labelled with the
// GitLabRunner's name, named <gitlabrunner>-<ordinal>), the GitLabRunner's
// status, and GitLab itself (each runner's description names its claim).
package controller

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	dockeriov1alpha1 "github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"

	"github.com/dockerios/dockerios/examples/gitlab-runner/api/v1alpha1"
)

const (
	// Finalizer holds a GitLabRunner until its runners are deregistered
	// and its claims released.
	Finalizer = v1alpha1.GroupName + "/deregister"
	// RunnerLabel, on each claim, names the GitLabRunner holding it.
	RunnerLabel = v1alpha1.GroupName + "/runner"
	// ManagedByLabel's value on each claim.
	managedBy = "gitlab-runner-controller"

	// verifyInterval is how often a registered runner is looked up in
	// GitLab, so one deleted there (by a person, or GitLab's cleanup of
	// stale runners) is registered again.
	verifyInterval = 5 * time.Minute
	// pollInterval paces what cannot be watched: GitLab's running jobs
	// while draining, a Secret that is missing.
	pollInterval = 5 * time.Second
)

// Reconciler reconciles GitLabRunners.
type Reconciler struct {
	// Client reads from the manager's caches and writes to the API server.
	Client client.Client
	// APIReader reads the API server directly: Secrets (never cached, so
	// the controller needs no list or watch on them), and a GitLabRunner
	// before a job starts.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// Dial logs in to guests (DialSSH).
	Dial DialFunc
	// HTTPClient calls GitLab (nil: a client with a 30 s timeout).
	HTTPClient *http.Client
	// Parallel bounds the machines provisioned at once (16).
	Parallel int

	jobs     *provisioner
	verified sync.Map // GitLab runner id → time it was last found in GitLab
	// deleted holds the claims this controller deleted (uid → when), until
	// the cache has seen them go: a claim is gone at once (it has no
	// finalizer), and a pass reading it from a cache that is behind would
	// otherwise take it apart again.
	deleted sync.Map
}

// forgetOldDeletions forgets deletions older than a minute: the cache has
// seen them by then.
func (r *Reconciler) forgetOldDeletions(now time.Time) {
	r.deleted.Range(func(k, v any) bool {
		if now.Sub(v.(time.Time)) > time.Minute {
			r.deleted.Delete(k)
		}
		return true
	})
}

// SetupWithManager registers the controller: GitLabRunners, the claims
// they own, the machines bound to those claims, and the provisioning
// jobs' progress.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.init(runJob)
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		r.jobs.shutdown()
		return nil
	})); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.GitLabRunner{}).
		Owns(&dockeriov1alpha1.MacOSMachineClaim{}).
		// A bound machine's readiness and address are the replica's.
		Watches(&dockeriov1alpha1.MacOSMachine{}, handler.EnqueueRequestsFromMapFunc(r.runnerOfMachine),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				m, ok := o.(*dockeriov1alpha1.MacOSMachine)
				return ok && m.Status.ClaimRef != nil
			}))).
		WatchesRawSource(source.Channel(r.jobs.notify, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// init fills in the defaults and the provisioner (tests pass their own
// job function).
func (r *Reconciler) init(run jobFunc) {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Dial == nil {
		r.Dial = DialSSH
	}
	if r.Parallel <= 0 {
		r.Parallel = 16
	}
	r.jobs = newProvisioner(r.Clock, run, r.Parallel)
}

// runnerOfMachine maps a machine to the GitLabRunner owning its claim.
func (r *Reconciler) runnerOfMachine(ctx context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*dockeriov1alpha1.MacOSMachine)
	if !ok || m.Status.ClaimRef == nil {
		return nil
	}
	var claim dockeriov1alpha1.MacOSMachineClaim
	// The cache holds only the claims of GitLabRunners (labelled).
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Status.ClaimRef.Name}, &claim); err != nil {
		return nil
	}
	ref := metav1.GetControllerOf(&claim)
	if ref == nil || ref.Kind != "GitLabRunner" || !strings.HasPrefix(ref.APIVersion, v1alpha1.GroupName+"/") {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: ref.Name}}}
}

// Reconcile brings a GitLabRunner's replicas to spec.replicas, each a
// claim, a provisioned machine and a registered runner; and, once it is
// being deleted, to none.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var gr v1alpha1.GitLabRunner
	if err := r.Client.Get(ctx, req.NamespacedName, &gr); err != nil {
		if apierrors.IsNotFound(err) {
			r.jobs.forgetOthers(req.NamespacedName, nil)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	deleting := !gr.DeletionTimestamp.IsZero()
	if deleting && !controllerutil.ContainsFinalizer(&gr, Finalizer) {
		return ctrl.Result{}, nil
	}
	if !deleting && !controllerutil.ContainsFinalizer(&gr, Finalizer) {
		// Before anything is claimed or registered, so nothing can be
		// left behind by a delete.
		patch := client.MergeFromWithOptions(gr.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(&gr, Finalizer)
		if err := r.Client.Patch(ctx, &gr, patch); err != nil {
			return ctrl.Result{}, err
		}
	}

	claims, err := r.claimsOf(ctx, &gr)
	if err != nil {
		return ctrl.Result{}, err
	}
	p := &pass{r: r, gr: &gr, key: req.NamespacedName, now: r.Clock.Now(), keepJobs: map[types.UID]bool{}}
	desired := 0
	if !deleting {
		desired = int(replicasOf(&gr))
	}
	cached := map[string]*v1alpha1.RunnerStatus{}
	for i := range gr.Status.Runners {
		cached[gr.Status.Runners[i].Name] = &gr.Status.Runners[i]
	}
	var entries []v1alpha1.RunnerStatus
	for _, name := range replicaNames(gr.Name, desired, claims, cached) {
		ord, ok := ordinalOf(gr.Name, name)
		wanted := ok && ord < desired
		var entry *v1alpha1.RunnerStatus
		if c := cached[name]; c != nil {
			entry = c.DeepCopy()
		}
		if e := p.sync(ctx, name, claims[name], cached[name], entry, wanted); e != nil {
			entries = append(entries, *e)
		}
	}
	r.jobs.forgetOthers(req.NamespacedName, p.keepJobs)

	if deleting && len(entries) == 0 && len(p.errs) == 0 {
		patch := client.MergeFromWithOptions(gr.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(&gr, Finalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, &gr, patch))
	}

	status := p.status(entries, desired)
	if !equality.Semantic.DeepEqual(gr.Status, status) {
		gr.Status = status
		if err := r.Client.Status().Update(ctx, &gr); err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, nil // gone since the cache read it: its last pass removed the finalizer
			}
			if apierrors.IsConflict(err) {
				// Our cache is behind the object: the next event brings
				// the fresh one; what was done is found again.
				return ctrl.Result{RequeueAfter: time.Second}, nil
			}
			return ctrl.Result{}, err
		}
	}
	if len(p.errs) > 0 {
		return ctrl.Result{}, errors.Join(p.errs...)
	}
	return ctrl.Result{RequeueAfter: p.requeue}, nil
}

// claimsOf returns the claims gr controls, by name.
func (r *Reconciler) claimsOf(ctx context.Context, gr *v1alpha1.GitLabRunner) (map[string]*dockeriov1alpha1.MacOSMachineClaim, error) {
	var list dockeriov1alpha1.MacOSMachineClaimList
	if err := r.Client.List(ctx, &list, client.InNamespace(gr.Namespace), client.MatchingLabels{RunnerLabel: gr.Name}); err != nil {
		return nil, err
	}
	r.forgetOldDeletions(r.Clock.Now())
	out := map[string]*dockeriov1alpha1.MacOSMachineClaim{}
	for i := range list.Items {
		c := &list.Items[i]
		if _, deleted := r.deleted.Load(c.UID); metav1.IsControlledBy(c, gr) && !deleted {
			out[c.Name] = c
		}
	}
	return out, nil
}

func replicasOf(gr *v1alpha1.GitLabRunner) int32 {
	if gr.Spec.Replicas == nil {
		return 1
	}
	return *gr.Spec.Replicas
}

// replicaName is replica ordinal's name, and its claim's.
func replicaName(runner string, ordinal int) string { return runner + "-" + strconv.Itoa(ordinal) }

// ordinalOf parses a replica's name.
func ordinalOf(runner, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, runner+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// replicaNames are the replicas to look at: those wanted, and those that
// hold a claim or a status entry; by ordinal (names that are not a
// replica's last).
func replicaNames(runner string, desired int, claims map[string]*dockeriov1alpha1.MacOSMachineClaim, cached map[string]*v1alpha1.RunnerStatus) []string {
	set := map[string]bool{}
	for i := range desired {
		set[replicaName(runner, i)] = true
	}
	for n := range claims {
		set[n] = true
	}
	for n := range cached {
		set[n] = true
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, aok := ordinalOf(runner, names[i])
		b, bok := ordinalOf(runner, names[j])
		if aok != bok {
			return aok
		}
		if aok && a != b {
			return a < b
		}
		return names[i] < names[j]
	})
	return names
}

// event records an Event on gr, related to obj (a claim) when not nil.
func (r *Reconciler) event(gr *v1alpha1.GitLabRunner, related *dockeriov1alpha1.MacOSMachineClaim, warning bool, reason, action, note string, args ...any) {
	if r.Recorder == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	if related == nil {
		r.Recorder.Eventf(gr, nil, typ, reason, action, note, args...)
		return
	}
	r.Recorder.Eventf(gr, related, typ, reason, action, note, args...)
}
