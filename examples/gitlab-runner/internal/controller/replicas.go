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
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dockeriov1alpha1 "github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"

	"github.com/dockerios/dockerios/examples/gitlab-runner/api/v1alpha1"
	"github.com/dockerios/dockerios/examples/gitlab-runner/internal/gitlab"
	"github.com/dockerios/dockerios/examples/gitlab-runner/internal/guest"
)

// pass is one reconcile of one GitLabRunner.
type pass struct {
	r   *Reconciler
	gr  *v1alpha1.GitLabRunner
	key types.NamespacedName
	now time.Time

	gl       *gitlab.Client // made on first use
	glErr    error
	glTried  bool
	requeue  time.Duration
	errs     []error
	views    []replicaView
	keepJobs map[types.UID]bool
}

// after asks for a reconcile within d.
func (p *pass) after(d time.Duration) {
	if d <= 0 {
		d = time.Second
	}
	if p.requeue == 0 || d < p.requeue {
		p.requeue = d
	}
}

func (p *pass) fail(err error) { p.errs = append(p.errs, err) }

// sync moves one replica on and returns its status entry (nil once it is
// gone). cached is its entry as the cache last saw it (nil: none), entry
// a copy to work on.
func (p *pass) sync(ctx context.Context, name string, claim *dockeriov1alpha1.MacOSMachineClaim, cached, entry *v1alpha1.RunnerStatus, wanted bool) *v1alpha1.RunnerStatus {
	if !wanted {
		if entry == nil {
			entry = &v1alpha1.RunnerStatus{Name: name}
			if claim != nil {
				entry.ClaimUID = claim.UID
			}
		}
		if claim != nil {
			// Its job's record stays until the job has ended: remove
			// waits for that before it looks for runners to delete.
			p.keepJobs[claim.UID] = true
		}
		if p.remove(ctx, entry, claim) {
			return nil
		}
		return entry
	}
	v := replicaView{name: name}
	defer func() { p.views = append(p.views, v) }()
	if entry == nil {
		entry = &v1alpha1.RunnerStatus{Name: name}
	}

	if claim == nil {
		// A claim recorded but gone (deleted by someone, or by a replace):
		// its runner goes first, then a new claim is made.
		if !p.dropOldClaim(ctx, entry) {
			v.machine = aspect{reason: v1alpha1.ReasonMachineLost, message: entry.Message}
			return entry
		}
		*entry = v1alpha1.RunnerStatus{Name: name} // nothing of the old claim is left
		created, err := p.createClaim(ctx, name)
		if err != nil {
			entry.Phase, entry.Message = v1alpha1.RunnerPending, "claiming a machine: "+err.Error()
			v.machine = aspect{reason: v1alpha1.ReasonClaimRefused, message: entry.Message}
			return entry
		}
		*entry = v1alpha1.RunnerStatus{Name: name, ClaimUID: created.UID, Phase: v1alpha1.RunnerPending}
		claim = created // bound at create when a warm machine was Ready
	}
	p.keepJobs[claim.UID] = true
	if claim.DeletionTimestamp != nil {
		entry.Phase, entry.Message = v1alpha1.RunnerReplacing, "its claim is being deleted"
		v.machine = aspect{reason: v1alpha1.ReasonMachineLost, message: entry.Message}
		p.after(time.Second)
		return entry
	}
	if entry.ClaimUID != claim.UID {
		// The status knew another claim of this name (since replaced), or
		// none (status lost): what it recorded is that claim's.
		if !p.dropOldClaim(ctx, entry) {
			v.machine = aspect{reason: v1alpha1.ReasonMachineLost, message: entry.Message}
			return entry
		}
		*entry = v1alpha1.RunnerStatus{Name: name, ClaimUID: claim.UID}
	}

	switch claim.Status.Phase {
	case dockeriov1alpha1.ClaimLost:
		return p.replace(ctx, entry, claim, &v, v1alpha1.ReasonMachineLost, "its machine was lost: "+boundMessage(claim))
	case dockeriov1alpha1.ClaimBound:
	default:
		entry.Phase, entry.MachineName, entry.Address = v1alpha1.RunnerPending, "", ""
		entry.Message = "waiting for a machine"
		if msg := boundMessage(claim); msg != "" {
			entry.Message += ": " + msg
		}
		v.machine = aspect{reason: v1alpha1.ReasonClaimPending, message: entry.Message}
		return entry
	}

	var m dockeriov1alpha1.MacOSMachine
	err := p.r.Client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: claim.Status.MachineName}, &m)
	switch {
	case apierrors.IsNotFound(err) || err == nil && (m.DeletionTimestamp != nil || m.Status.ClaimRef == nil || m.Status.ClaimRef.UID != string(claim.UID)):
		// Going, or not yet seen by the cache: the apiserver makes the
		// claim Lost in the write that deletes a bound machine.
		entry.Phase, entry.Message = v1alpha1.RunnerNotReady, fmt.Sprintf("machine %s is going or not seen yet", claim.Status.MachineName)
		v.machine = aspect{reason: v1alpha1.ReasonMachineNotReady, message: entry.Message}
		p.after(2 * time.Second)
		return entry
	case err != nil:
		p.fail(err)
		v.machine = aspect{reason: v1alpha1.ReasonMachineNotReady, message: fmt.Sprintf("reading machine %s: %v", claim.Status.MachineName, err)}
		return entry
	}
	entry.MachineName = m.Name
	entry.Address = podAddress(&m)

	if ready, since, why := machineReady(&m); !ready {
		msg := fmt.Sprintf("machine %s is not Ready: %s", m.Name, why)
		v.machine = aspect{reason: v1alpha1.ReasonMachineNotReady, message: msg}
		if timeout := durationOf(p.gr.Spec.MachineUnreadyTimeout, 5*time.Minute); timeout > 0 && !since.IsZero() {
			left := since.Add(timeout).Sub(p.now)
			if left <= 0 {
				return p.replace(ctx, entry, claim, &v, v1alpha1.ReasonMachineNotReady,
					fmt.Sprintf("%s for more than %s", msg, timeout))
			}
			p.after(left)
		}
		entry.Message = msg
		if registered(entry) {
			entry.Phase = v1alpha1.RunnerNotReady
			v.provision.ok, v.register.ok = true, true
		} else {
			entry.Phase = v1alpha1.RunnerPending
		}
		return entry
	}
	v.machine.ok = true
	if entry.Address == "" {
		entry.Phase, entry.Message = v1alpha1.RunnerPending, fmt.Sprintf("machine %s reports no %s address", m.Name, dockeriov1alpha1.MachineAddressPod)
		v.provision = aspect{reason: v1alpha1.ReasonProvisioning, message: entry.Message}
		p.after(pollInterval)
		return entry
	}

	if registered(entry) {
		// Scaled down and up again while draining: take jobs again.
		if entry.DrainStartTime != nil {
			gl, err := p.gitlab(ctx)
			if err != nil {
				p.after(pollInterval) // Secrets are not watched
			} else if err = gl.SetPaused(ctx, entry.RunnerID, false); gitlab.IsNotFound(err) {
				err = nil // gone from GitLab: verify registers it again
			} else if err != nil {
				p.fail(err)
			}
			if err != nil {
				// Still paused: it takes no jobs, so it is not Ready.
				entry.Message = "resuming the paused runner: " + err.Error()
				v.provision.ok, v.register = true, aspect{reason: v1alpha1.ReasonGitLabError, message: entry.Message}
				return entry
			}
			entry.DrainStartTime = nil
		}
		if p.verify(ctx, entry, claim) {
			if cached != nil && cached.ClaimUID == claim.UID && cached.RunnerID == entry.RunnerID {
				// The job's outcome is in status as the cache sees it:
				// the status, not the job, remembers it from now on.
				p.r.jobs.forget(claim.UID)
			}
			entry.Phase, entry.Message = v1alpha1.RunnerReady, ""
			v.provision.ok, v.register.ok = true, true
			return entry
		}
	}
	p.provision(ctx, entry, claim, &m, &v)
	return entry
}

// dropOldClaim takes apart what entry's claim, now gone or replaced, left:
// its job is stopped, and then its runners deleted in GitLab — the one
// recorded and any the job made that status never recorded (a job that
// registered just before the claim went). It says whether that is done.
func (p *pass) dropOldClaim(ctx context.Context, entry *v1alpha1.RunnerStatus) bool {
	if entry.ClaimUID == "" {
		return true
	}
	// The job's record stays until the job has ended: deregister waits for
	// that before it looks for runners to delete.
	p.keepJobs[entry.ClaimUID] = true
	if !p.r.jobs.stop(entry.ClaimUID) {
		entry.Message = "stopping its provisioning"
		p.after(time.Second)
		return false
	}
	return p.deregister(ctx, entry, nil)
}

// provision runs, follows or retries the claim's job and records its
// outcome.
func (p *pass) provision(ctx context.Context, entry *v1alpha1.RunnerStatus, claim *dockeriov1alpha1.MacOSMachineClaim, m *dockeriov1alpha1.MacOSMachine, v *replicaView) {
	job, ok := p.r.jobs.get(claim.UID)
	if ok && !job.provisionedAt.IsZero() && entry.ProvisionedTime == nil {
		entry.ProvisionedTime = &metav1.Time{Time: job.provisionedAt}
	}
	switch {
	case ok && job.finished && job.outcome != nil:
		entry.RunnerID = job.outcome.runnerID
		entry.RegisteredTime = &metav1.Time{Time: job.outcome.registeredAt}
		entry.Phase, entry.Message = v1alpha1.RunnerReady, ""
		v.provision.ok, v.register.ok = true, true
		if p.r.jobs.announce(claim.UID) {
			p.r.event(p.gr, claim, false, "RunnerRegistered", "Register",
				"runner %d registered with GitLab on machine %s (%s)", entry.RunnerID, m.Name, entry.Address)
		}
		return
	case ok && !job.finished:
		entry.Message = job.describe()
		// A retry says what failed the attempt before, with its reason
		// while it has not got past where that one failed: a GitLab that
		// fails every attempt is not merely "Registering" between backoffs.
		last := job.lastFailure
		if last != nil {
			entry.Message += fmt.Sprintf(" (attempt %d; attempt %d failed: %s)", job.attempt, job.attempt-1, last.message)
		}
		if job.stage >= stageRegistering {
			entry.Phase = v1alpha1.RunnerRegistering
			v.provision.ok = true
			v.register = aspect{reason: v1alpha1.ReasonRegistering, message: entry.Message}
			if last != nil && last.stage >= stageRegistering {
				v.register.reason = last.reason
			}
		} else {
			entry.Phase = v1alpha1.RunnerProvisioning
			v.provision = aspect{reason: v1alpha1.ReasonProvisioning, message: entry.Message}
			if last != nil && last.stage < stageRegistering {
				v.provision.reason = last.reason
			}
			v.register = aspect{reason: v1alpha1.ReasonWaitingForSteps, message: "waiting for provisioning"}
		}
		return
	case ok && job.failure != nil && p.now.Before(job.retryAt):
		entry.Message = fmt.Sprintf("%s (attempt %d; again in %s)", job.failure.message, job.attempt, job.retryAt.Sub(p.now).Round(time.Second))
		if job.failure.stage >= stageRegistering {
			entry.Phase = v1alpha1.RunnerRegistering
			v.provision.ok = true
			v.register = aspect{reason: job.failure.reason, message: entry.Message}
		} else {
			entry.Phase = v1alpha1.RunnerProvisioning
			v.provision = aspect{reason: job.failure.reason, message: entry.Message}
			v.register = aspect{reason: v1alpha1.ReasonWaitingForSteps, message: "waiting for provisioning"}
		}
		p.after(job.retryAt.Sub(p.now))
		return
	}

	// A job to start: the first, or the next after a failure.
	in, reason, err := p.jobInput(ctx, entry, claim)
	if err != nil {
		entry.Phase, entry.Message = v1alpha1.RunnerProvisioning, err.Error()
		v.provision = aspect{reason: reason, message: err.Error()}
		v.register = aspect{reason: v1alpha1.ReasonWaitingForSteps, message: "waiting for provisioning"}
		p.after(pollInterval)
		return
	}
	// What the job to start does (also while it waits for a fresh read).
	entry.Phase, entry.Message = v1alpha1.RunnerProvisioning, "connecting over SSH"
	v.provision = aspect{reason: v1alpha1.ReasonProvisioning, message: entry.Message}
	v.register = aspect{reason: v1alpha1.ReasonWaitingForSteps, message: "waiting for provisioning"}
	if in.skipSteps {
		entry.Phase = v1alpha1.RunnerRegistering
		v.provision = aspect{ok: true}
		v.register = aspect{reason: v1alpha1.ReasonRegistering, message: entry.Message}
	}
	// A job deletes what GitLab holds under this claim's description: it
	// must never start on a cache that has not seen this controller's own
	// record of a registration (an outcome recorded, then forgotten).
	var fresh v1alpha1.GitLabRunner
	if err := p.r.APIReader.Get(ctx, p.key, &fresh); err != nil {
		if !apierrors.IsNotFound(err) {
			p.fail(err)
		}
		return
	}
	for _, e := range fresh.Status.Runners {
		if e.Name == entry.Name && e.ClaimUID == claim.UID && e.RunnerID != 0 && e.RunnerID != entry.RunnerID {
			p.after(time.Second)
			return
		}
	}
	if ok && job.failure != nil {
		p.r.event(p.gr, claim, true, job.failure.reason, "Provision", "machine %s: %s; trying again (attempt %d)", m.Name, job.failure.message, job.attempt+1)
	}
	p.r.jobs.start(p.key, claim.UID, in)
}

// jobInput reads what a job needs; on failure it also says the condition
// reason.
func (p *pass) jobInput(ctx context.Context, entry *v1alpha1.RunnerStatus, claim *dockeriov1alpha1.MacOSMachineClaim) (*jobInput, string, error) {
	spec := &p.gr.Spec
	var secret corev1.Secret
	ref := types.NamespacedName{Namespace: p.gr.Namespace, Name: spec.SSH.CredentialsSecretRef.Name}
	if err := p.r.APIReader.Get(ctx, ref, &secret); err != nil {
		return nil, v1alpha1.ReasonCredentials, fmt.Errorf("the SSH credentials Secret %s: %w", ref.Name, err)
	}
	creds, err := guest.CredentialsFromSecret(secret.Data, spec.SSH.User, spec.SSH.InsecureIgnoreHostKey)
	if err != nil {
		return nil, v1alpha1.ReasonCredentials, fmt.Errorf("Secret %s: %w", ref.Name, err)
	}
	gl, err := p.gitlab(ctx)
	if err != nil {
		return nil, v1alpha1.ReasonCredentials, err
	}
	port := spec.SSH.Port
	if port == 0 {
		port = 22
	}
	in := &jobInput{
		address:   net.JoinHostPort(entry.Address, strconv.Itoa(int(port))),
		creds:     creds,
		dial:      p.r.Dial,
		skipSteps: entry.ProvisionedTime != nil,
		gitlab:    gl,
		url:       spec.GitLab.URL,
		executor:  spec.GitLab.Executor,
		create:    p.createOptions(claim.Name, claim.UID),
		list:      p.listOptions(),
	}
	if in.executor == "" {
		in.executor = "shell"
	}
	for _, s := range spec.Provision {
		in.steps = append(in.steps, step{name: s.Name, command: s.Command, timeout: durationOf(s.Timeout, 10*time.Minute)})
	}
	return in, "", nil
}

func (p *pass) createOptions(claimName string, claimUID types.UID) gitlab.CreateRunnerOptions {
	g := &p.gr.Spec.GitLab
	typ := string(g.RunnerType)
	if typ == "" {
		typ = string(v1alpha1.InstanceType)
	}
	return gitlab.CreateRunnerOptions{
		RunnerType: typ, GroupID: g.GroupID, ProjectID: g.ProjectID,
		Description: runnerDescription(p.gr.Namespace, claimName, claimUID),
		TagList:     g.Tags, RunUntagged: g.RunUntagged, MaximumTimeout: g.MaximumTimeout,
	}
}

// listOptions find the runners this GitLabRunner may have made: those of
// its type with its tags (an instance's runners are listed by an
// administrator's token, others by their managers').
func (p *pass) listOptions() gitlab.ListOptions {
	o := p.createOptions("", "")
	return gitlab.ListOptions{All: o.RunnerType == string(v1alpha1.InstanceType), Type: o.RunnerType, Tags: o.TagList}
}

// gitlab returns a client with the access token, read once per pass.
func (p *pass) gitlab(ctx context.Context) (*gitlab.Client, error) {
	if p.glTried {
		return p.gl, p.glErr
	}
	p.glTried = true
	ref := p.gr.Spec.GitLab.TokenSecretRef
	var secret corev1.Secret
	if err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.gr.Namespace, Name: ref.Name}, &secret); err != nil {
		p.glErr = fmt.Errorf("the GitLab token Secret %s: %w", ref.Name, err)
		return nil, p.glErr
	}
	key := ref.Key
	if key == "" {
		key = "token"
	}
	token := string(secret.Data[key])
	if token == "" {
		p.glErr = fmt.Errorf("the GitLab token Secret %s has no key %q", ref.Name, key)
		return nil, p.glErr
	}
	p.gl, p.glErr = gitlab.New(p.gr.Spec.GitLab.URL, token, p.r.HTTPClient)
	return p.gl, p.glErr
}

// verify says whether entry's runner still exists in GitLab, looking it up
// at most every verifyInterval. One that is gone is forgotten, so the
// replica registers again (without its steps: they ran on this machine).
func (p *pass) verify(ctx context.Context, entry *v1alpha1.RunnerStatus, claim *dockeriov1alpha1.MacOSMachineClaim) bool {
	p.after(verifyInterval)
	if last, ok := p.r.verified.Load(entry.RunnerID); ok && p.now.Sub(last.(time.Time)) < verifyInterval {
		return true
	}
	gl, err := p.gitlab(ctx)
	if err != nil {
		return true // not known to be gone; the message is for a start
	}
	if _, err := gl.GetRunner(ctx, entry.RunnerID); gitlab.IsNotFound(err) {
		p.r.event(p.gr, claim, true, "RunnerGone", "Register", "runner %d is gone from GitLab; registering machine %s again", entry.RunnerID, entry.MachineName)
		p.r.verified.Delete(entry.RunnerID)
		entry.RunnerID, entry.RegisteredTime = 0, nil
		p.r.jobs.forget(claim.UID)
		return false
	} else if err != nil {
		// GitLab is down, or hangs until the client's timeout: nothing to
		// learn now, and it is asked again only after verifyInterval, as
		// when it answers — not on every pass, each of which would wait
		// for it once per replica.
		p.r.verified.Store(entry.RunnerID, p.now)
		return true
	}
	p.r.verified.Store(entry.RunnerID, p.now)
	return true
}

// replace gives up a claim whose machine is lost or stayed unready: its
// runner is deregistered without a drain (its jobs are gone with the
// machine), the claim deleted (the machine released), and the next pass
// claims another machine under the same name.
func (p *pass) replace(ctx context.Context, entry *v1alpha1.RunnerStatus, claim *dockeriov1alpha1.MacOSMachineClaim, v *replicaView, reason, msg string) *v1alpha1.RunnerStatus {
	v.machine = aspect{reason: reason, message: msg}
	entry.Phase, entry.Message = v1alpha1.RunnerReplacing, msg
	if !p.r.jobs.stop(claim.UID) {
		p.after(time.Second)
		return entry
	}
	if !p.deregister(ctx, entry, claim) {
		return entry
	}
	if !p.deleteClaim(ctx, claim) {
		return entry
	}
	p.r.event(p.gr, claim, true, reason, "Replace", "%s: %s; runner deregistered, claim released, claiming another machine", entry.Name, msg)
	p.r.jobs.forget(claim.UID)
	*entry = v1alpha1.RunnerStatus{Name: entry.Name, Phase: v1alpha1.RunnerReplacing, Message: msg}
	p.after(time.Second)
	return entry
}

// remove takes a replica that is no longer wanted apart: its runner is
// paused and given drainTimeout to finish its jobs (unless its machine is
// lost), deleted in GitLab, and then its claim deleted. It says whether
// the replica is gone.
func (p *pass) remove(ctx context.Context, entry *v1alpha1.RunnerStatus, claim *dockeriov1alpha1.MacOSMachineClaim) bool {
	if claim != nil && !p.r.jobs.stop(claim.UID) {
		// A job under way may still make a runner: wait for it to end.
		entry.Phase, entry.Message = v1alpha1.RunnerDeregistering, "stopping its provisioning"
		p.after(time.Second)
		return false
	}
	drain := durationOf(p.gr.Spec.DrainTimeout, 10*time.Minute)
	alive := claim != nil && claim.DeletionTimestamp == nil && claim.Status.Phase == dockeriov1alpha1.ClaimBound
	if entry.RunnerID != 0 && drain > 0 && alive {
		// On its way out from now on, even while GitLab holds the pause:
		// never reported Ready (or as the phase it had) again.
		entry.Phase = v1alpha1.RunnerDraining
		gl, err := p.gitlab(ctx)
		if err != nil && !p.givingUp(err) {
			entry.Message = err.Error()
			p.after(pollInterval)
			return false
		}
		if gl != nil && !p.drained(ctx, gl, entry, drain) {
			return false
		}
	}
	entry.Phase, entry.Message = v1alpha1.RunnerDeregistering, ""
	if !p.deregister(ctx, entry, claim) {
		return false
	}
	if claim != nil {
		if !p.deleteClaim(ctx, claim) {
			return false
		}
		if m := claim.Status.MachineName; m != "" {
			p.r.event(p.gr, claim, false, "MachineReleased", "Release", "%s: claim deleted, machine %s released", entry.Name, m)
		} else {
			p.r.event(p.gr, claim, false, "MachineReleased", "Release", "%s: claim deleted; it was not bound to a machine", entry.Name)
		}
		p.r.jobs.forget(claim.UID)
	}
	return true
}

// drained pauses entry's runner and says whether it may be deleted: it
// runs no job, or drainTimeout has passed since it was paused.
func (p *pass) drained(ctx context.Context, gl *gitlab.Client, entry *v1alpha1.RunnerStatus, timeout time.Duration) bool {
	if entry.DrainStartTime == nil {
		if err := gl.SetPaused(ctx, entry.RunnerID, true); err != nil {
			if gitlab.IsNotFound(err) {
				return true // gone from GitLab: nothing to drain
			}
			entry.Message = "pausing the runner: " + err.Error()
			p.fail(err)
			return false
		}
		entry.DrainStartTime = &metav1.Time{Time: p.now}
		p.r.event(p.gr, nil, false, "RunnerDraining", "Drain", "%s: runner %d paused; deregistering once its jobs end, within %s", entry.Name, entry.RunnerID, timeout)
	}
	deadline := entry.DrainStartTime.Add(timeout)
	if !p.now.Before(deadline) {
		return true
	}
	n, err := gl.RunningJobs(ctx, entry.RunnerID)
	switch {
	case gitlab.IsNotFound(err):
		return true
	case err != nil:
		entry.Message = "asking GitLab for the runner's jobs: " + err.Error()
		p.after(pollInterval)
		return false
	case n == 0:
		return true
	}
	entry.Phase = v1alpha1.RunnerDraining
	entry.Message = fmt.Sprintf("runner %d paused, %d jobs running; deregistering when they end, at the latest at %s",
		entry.RunnerID, n, deadline.UTC().Format(time.RFC3339))
	p.after(min(pollInterval, deadline.Sub(p.now)))
	return false
}

// deregister deletes in GitLab the runner entry records and any runner
// made for the claim an interrupted attempt did not record; claim may be
// nil when it is gone (its name and uid are the entry's).
func (p *pass) deregister(ctx context.Context, entry *v1alpha1.RunnerStatus, claim *dockeriov1alpha1.MacOSMachineClaim) bool {
	name, uid := entry.Name, entry.ClaimUID
	if claim != nil {
		name, uid = claim.Name, claim.UID
	}
	// Jobs run only on a bound machine: a replica whose claim never had
	// one cannot have made a runner.
	neverBound := entry.MachineName == "" && (claim == nil || claim.Status.MachineName == "")
	if entry.RunnerID == 0 && (uid == "" || neverBound) {
		return true
	}
	gl, err := p.gitlab(ctx)
	if err != nil {
		if p.givingUp(err) {
			p.r.event(p.gr, claim, true, "DeregisterSkipped", "Deregister",
				"%s: %v; runner %d (if any) is left in GitLab: delete it there", entry.Name, err, entry.RunnerID)
			entry.RunnerID, entry.RegisteredTime, entry.DrainStartTime = 0, nil, nil
			return true
		}
		entry.Message = err.Error()
		p.after(pollInterval)
		return false
	}
	ids := map[int64]bool{}
	if entry.RunnerID != 0 {
		ids[entry.RunnerID] = true
	}
	if uid != "" {
		found, err := gl.ListRunners(ctx, p.listOptions())
		if err != nil {
			entry.Message = "finding its runners in GitLab: " + err.Error()
			p.fail(err)
			return false
		}
		desc := runnerDescription(p.gr.Namespace, name, uid)
		for _, r := range found {
			if r.Description == desc {
				ids[r.ID] = true
			}
		}
	}
	for id := range ids {
		deleted, err := gl.DeleteRunner(ctx, id)
		if err != nil {
			entry.Message = fmt.Sprintf("deleting runner %d in GitLab: %v", id, err)
			p.fail(err)
			return false
		}
		p.r.verified.Delete(id)
		if deleted {
			// One already gone (deleted by an earlier pass whose status
			// write this pass has not read back, or in GitLab) was not
			// deleted now: announced once.
			p.r.event(p.gr, claim, false, "RunnerDeregistered", "Deregister", "%s: runner %d deleted in GitLab", entry.Name, id)
		}
	}
	entry.RunnerID, entry.RegisteredTime, entry.DrainStartTime = 0, nil, nil
	return true
}

// givingUp says whether a GitLab that cannot be used is a reason to let
// go of the machines anyway: the GitLabRunner is being deleted and its
// token Secret is gone (as when its namespace is deleted), so nothing
// will ever deregister its runners here. A GitLab that fails otherwise
// holds the removal, rather than leave a runner registered on nothing.
func (p *pass) givingUp(err error) bool {
	return p.gr.DeletionTimestamp != nil && apierrors.IsNotFound(err)
}

// createClaim claims a machine for replica name, bound at create when the
// pool has one Ready.
func (p *pass) createClaim(ctx context.Context, name string) (*dockeriov1alpha1.MacOSMachineClaim, error) {
	ms := &p.gr.Spec.Machine
	claim := &dockeriov1alpha1.MacOSMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.gr.Namespace,
			Labels: map[string]string{RunnerLabel: p.gr.Name, "app.kubernetes.io/managed-by": managedBy}},
		Spec: dockeriov1alpha1.MacOSMachineClaimSpec{PoolName: ms.PoolName, ClassName: ms.ClassName, Selector: ms.Selector.DeepCopy()},
	}
	if err := controllerutil.SetControllerReference(p.gr, claim, p.r.Client.Scheme()); err != nil {
		return nil, err
	}
	err := p.r.Client.Create(ctx, claim)
	if apierrors.IsAlreadyExists(err) {
		var other dockeriov1alpha1.MacOSMachineClaim
		if gerr := p.r.APIReader.Get(ctx, client.ObjectKeyFromObject(claim), &other); gerr == nil && !metav1.IsControlledBy(&other, p.gr) {
			err = fmt.Errorf("a MacOSMachineClaim %s exists that is not this GitLabRunner's", name)
			p.after(time.Minute)
			return nil, err
		}
		// Ours, not in the cache yet.
		p.after(time.Second)
		return nil, fmt.Errorf("claim %s made, not seen yet", name)
	}
	if err != nil {
		p.fail(err)
		return nil, err
	}
	what := "pool " + ms.PoolName
	if ms.ClassName != "" {
		what = "class " + ms.ClassName
	}
	p.r.event(p.gr, claim, false, "Claimed", "Claim", "%s: claimed a machine of %s (%s)", name, what, claim.Status.Phase)
	return claim, nil
}

// deleteClaim releases a claim's machine: the apiserver marks it Released
// in the same write, and its pool disposes of it.
func (p *pass) deleteClaim(ctx context.Context, claim *dockeriov1alpha1.MacOSMachineClaim) bool {
	err := p.r.Client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		p.fail(err)
		return false
	}
	p.r.deleted.Store(claim.UID, p.now)
	return true
}

// registered says whether entry records a registered runner.
func registered(e *v1alpha1.RunnerStatus) bool { return e.RunnerID != 0 && e.RegisteredTime != nil }

// machineReady says whether m serves: phase Ready and condition Ready
// True. When not, since is when its Ready condition last changed (zero
// if it has none) and why says what it reports.
func machineReady(m *dockeriov1alpha1.MacOSMachine) (ready bool, since time.Time, why string) {
	c := meta.FindStatusCondition(m.Status.Conditions, dockeriov1alpha1.MachineConditionReady)
	if m.Status.Phase == dockeriov1alpha1.MachineReady && c != nil && c.Status == metav1.ConditionTrue {
		return true, time.Time{}, ""
	}
	why = "phase " + string(m.Status.Phase)
	if c != nil {
		since = c.LastTransitionTime.Time
		why = c.Reason
		if c.Message != "" {
			why += ": " + c.Message
		}
	}
	return false, since, why
}

// podAddress is the machine's address for workloads (the agent network,
// when a class has one, is the agent's).
func podAddress(m *dockeriov1alpha1.MacOSMachine) string {
	for _, a := range m.Status.Addresses {
		if a.Type == dockeriov1alpha1.MachineAddressPod {
			return a.Address
		}
	}
	return ""
}

// boundMessage is what the claim's Bound condition says.
func boundMessage(c *dockeriov1alpha1.MacOSMachineClaim) string {
	if cond := meta.FindStatusCondition(c.Status.Conditions, "Bound"); cond != nil {
		if cond.Message != "" {
			return cond.Message
		}
		return cond.Reason
	}
	return ""
}

func durationOf(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}
