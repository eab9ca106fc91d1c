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
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/dockerios/dockerios/examples/gitlab-runner/api/v1alpha1"
)

// Provisioning a machine (steps that may install Xcode for half an hour,
// then GitLab and the guest's registration) runs off the reconcile
// workers, one job per claim, so that one slow machine never holds the
// others, a scale change, or a deletion. A reconcile starts a job, reads
// how far it got, and records its outcome in status; the job itself
// touches neither the API server nor status.
//
// The jobs live in memory only, as a cache of work in flight: a restarted
// controller starts them again from what status says, which is why the
// steps must be idempotent and why a job first deletes any GitLab runner
// an earlier, interrupted attempt made for the same claim (its token,
// shown once by GitLab, is lost with that attempt).

// jobStage is how far a job got.
type jobStage int

const (
	stageConnecting jobStage = iota
	stageProvisioning
	stageRegistering
	stageDone
)

// jobOutcome is what a finished job did.
type jobOutcome struct {
	runnerID     int64
	registeredAt time.Time
}

// jobFailure is why a job failed: the condition reason and a message.
type jobFailure struct {
	reason  string
	message string
	stage   jobStage
}

func (f *jobFailure) Error() string { return f.message }

// job is one claim's provisioning. Its fields are guarded by
// provisioner.mu.
type job struct {
	owner     types.NamespacedName
	claimUID  types.UID
	cancel    context.CancelFunc
	done      chan struct{}
	announced bool // its outcome's Event was recorded
	jobView
}

// jobView is a job's state, copied for a reconcile.
type jobView struct {
	attempt       int
	stage         jobStage
	step          int    // 1-based step running
	stepName      string // its name
	steps         int
	provisionedAt time.Time // when the steps completed
	finished      bool
	outcome       *jobOutcome
	failure       *jobFailure
	retryAt       time.Time
	// lastFailure is why the attempt before this one failed (nil for a
	// first attempt), said while this one runs.
	lastFailure *jobFailure
}

// jobFunc does a job's work, reporting its progress.
type jobFunc func(ctx context.Context, in *jobInput, progress func(stage jobStage, step int, name string)) (*jobOutcome, error)

// provisioner runs jobs and tells the controller when one moves on.
type provisioner struct {
	clock   clock.PassiveClock
	run     jobFunc
	notify  chan event.GenericEvent
	slots   chan struct{} // bounds the jobs running at once
	backoff func(attempt int) time.Duration

	mu   sync.Mutex
	jobs map[types.UID]*job
	wg   sync.WaitGroup
}

// maxBackoff caps the wait before a failed job runs again.
const maxBackoff = 5 * time.Minute

func newProvisioner(clk clock.PassiveClock, run jobFunc, parallel int) *provisioner {
	return &provisioner{
		clock: clk, run: run,
		notify: make(chan event.GenericEvent, 1024),
		slots:  make(chan struct{}, parallel),
		backoff: func(attempt int) time.Duration {
			// 5s, 10s, 20s, … 5m: a machine just Ready may need a moment
			// more for sshd; a broken step should not be hammered.
			d := 5 * time.Second << min(attempt-1, 10)
			return min(d, maxBackoff)
		},
		jobs: map[types.UID]*job{},
	}
}

// get returns a view of claimUID's job, if there is one.
func (p *provisioner) get(claimUID types.UID) (jobView, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j := p.jobs[claimUID]
	if j == nil {
		return jobView{}, false
	}
	return j.jobView, true
}

// start runs a job for claimUID: the first, or the next attempt after a
// failed one. A job already running is left alone.
func (p *provisioner) start(owner types.NamespacedName, claimUID types.UID, in *jobInput) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.jobs[claimUID]
	if prev != nil && !prev.finished {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	j := &job{owner: owner, claimUID: claimUID, cancel: cancel, done: make(chan struct{}), jobView: jobView{attempt: 1, steps: len(in.steps)}}
	if prev != nil {
		j.attempt = prev.attempt + 1
		j.lastFailure = prev.failure
	}
	p.jobs[claimUID] = j
	p.wg.Add(1)
	go p.work(ctx, j, in)
}

func (p *provisioner) work(ctx context.Context, j *job, in *jobInput) {
	defer p.wg.Done()
	defer close(j.done)
	defer j.cancel()
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
	case <-ctx.Done():
		p.finish(j, nil, ctx.Err())
		return
	}
	outcome, err := p.run(ctx, in, func(stage jobStage, step int, name string) {
		p.mu.Lock()
		j.stage, j.step, j.stepName = stage, step, name
		if stage == stageRegistering && j.provisionedAt.IsZero() && !in.skipSteps {
			j.provisionedAt = p.clock.Now()
		}
		p.mu.Unlock()
		// Each step is worth a status write: people watch provisioning,
		// and the steps' completion must be recorded before
		// registration so a retry does not run them again.
		p.poke(j.owner)
	})
	p.finish(j, outcome, err)
}

func (p *provisioner) finish(j *job, outcome *jobOutcome, err error) {
	p.mu.Lock()
	j.finished = true
	j.stage = stageDone
	if err != nil {
		var f *jobFailure
		if !errors.As(err, &f) {
			f = &jobFailure{reason: v1alpha1.ReasonSSHFailed, message: err.Error(), stage: stageConnecting}
		}
		j.failure = f
		j.retryAt = p.clock.Now().Add(p.backoff(j.attempt))
	} else {
		j.outcome = outcome
	}
	p.mu.Unlock()
	p.poke(j.owner)
}

// poke queues the owner for a reconcile.
func (p *provisioner) poke(owner types.NamespacedName) {
	ev := event.GenericEvent{Object: &v1alpha1.GitLabRunner{ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: owner.Name}}}
	select {
	case p.notify <- ev:
	default:
		// The channel is full of pokes not read yet; the owner's periodic
		// requeue picks this one up.
	}
}

// announce says whether claimUID's outcome is yet to be announced (an
// Event), and marks it announced: the outcome is applied by every pass
// until the status recording it is read back, but said once.
func (p *provisioner) announce(claimUID types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	j := p.jobs[claimUID]
	if j == nil || j.announced {
		return false
	}
	j.announced = true
	return true
}

// stop cancels claimUID's job and says whether it has ended (and so can
// make no GitLab runner any more). Its record stays until forget.
func (p *provisioner) stop(claimUID types.UID) bool {
	p.mu.Lock()
	j := p.jobs[claimUID]
	p.mu.Unlock()
	if j == nil {
		return true
	}
	j.cancel()
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// forget drops claimUID's record. A running job is stopped first.
func (p *provisioner) forget(claimUID types.UID) {
	p.mu.Lock()
	j := p.jobs[claimUID]
	delete(p.jobs, claimUID)
	p.mu.Unlock()
	if j != nil {
		j.cancel()
	}
}

// forgetOthers drops owner's records of claims other than keep: claims
// replaced or gone.
func (p *provisioner) forgetOthers(owner types.NamespacedName, keep map[types.UID]bool) {
	p.mu.Lock()
	var drop []*job
	for uid, j := range p.jobs {
		if j.owner == owner && !keep[uid] {
			drop = append(drop, j)
			delete(p.jobs, uid)
		}
	}
	p.mu.Unlock()
	for _, j := range drop {
		j.cancel()
	}
}

// shutdown stops every job and waits for them.
func (p *provisioner) shutdown() {
	p.mu.Lock()
	for _, j := range p.jobs {
		j.cancel()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// describe says what a running job does, for a replica's message.
func (v jobView) describe() string {
	switch v.stage {
	case stageConnecting:
		return "connecting over SSH"
	case stageProvisioning:
		return fmt.Sprintf("running step %d of %d (%s)", v.step, v.steps, v.stepName)
	case stageRegistering:
		return "registering the runner with GitLab"
	}
	return ""
}
