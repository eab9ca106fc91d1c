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
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dockerios/dockerios/examples/gitlab-runner/api/v1alpha1"
	"github.com/dockerios/dockerios/examples/gitlab-runner/internal/gitlab"
	"github.com/dockerios/dockerios/examples/gitlab-runner/internal/guest"
)

// Guest is a logged-in connection to a machine's guest.
type Guest interface {
	// Run runs command with stdin as its input; a non-zero exit is a
	// *guest.ExitError.
	Run(ctx context.Context, command string, stdin []byte) (string, error)
	Close() error
}

// DialFunc logs in to the guest at addr (host:port).
type DialFunc func(ctx context.Context, addr string, c guest.Credentials) (Guest, error)

// DialSSH is the DialFunc of real guests.
func DialSSH(ctx context.Context, addr string, c guest.Credentials) (Guest, error) {
	return guest.Dial(ctx, addr, c)
}

// guestCommandTimeout bounds the registration commands.
const guestCommandTimeout = 2 * time.Minute

// createTimeout bounds the creation of a runner in GitLab, which a stopped
// job does not cut short.
const createTimeout = time.Minute

// startCommand starts the runner service once registered. verify --delete
// first drops from config.toml any runner GitLab no longer knows: one an
// interrupted attempt registered before its GitLab runner was deleted and
// made again. The service may run already (an image that starts it at
// login, a retry); then it reloads config.toml by itself.
const startCommand = `gitlab-runner verify --delete && { gitlab-runner status >/dev/null 2>&1 || gitlab-runner start; }`

// registerCommand registers the runner whose authentication token the
// command reads from its input: the token never appears on a command line
// (the guest's process list, a shell history, an SSH server's log), and
// never in the controller's logs or events.
func registerCommand(gitlabURL, executor, name string) string {
	return `CI_SERVER_TOKEN="$(cat)" gitlab-runner register --non-interactive` +
		" --url " + guest.Quote(gitlabURL) + " --executor " + guest.Quote(executor) + " --name " + guest.Quote(name)
}

// runnerDescription is the GitLab runner's description for a claim. It
// names the claim by uid, so the runners an interrupted attempt made for
// this very claim can be found again, and those of a replaced claim of
// the same name are not mistaken for them.
func runnerDescription(namespace, claimName string, claimUID types.UID) string {
	return fmt.Sprintf("%s/%s (claim %s)", namespace, claimName, claimUID)
}

// step is one provisioning command.
type step struct {
	name, command string
	timeout       time.Duration
}

// jobInput is everything a job needs, read by the reconcile that starts
// it: a job never reads the API server.
type jobInput struct {
	address   string // host:port
	creds     guest.Credentials
	dial      DialFunc
	steps     []step
	skipSteps bool // they completed on this machine already
	gitlab    *gitlab.Client
	create    gitlab.CreateRunnerOptions
	list      gitlab.ListOptions
	url       string
	executor  string
}

// runJob provisions one machine and registers its runner: log in, run the
// steps, delete any runner an interrupted attempt left for this claim,
// create the runner in GitLab, register it in the guest and start it.
// Whatever fails after the runner was created deletes it again, so a
// failed attempt leaves nothing registered.
func runJob(ctx context.Context, in *jobInput, progress func(stage jobStage, step int, name string)) (*jobOutcome, error) {
	g, err := in.dial(ctx, in.address, in.creds)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &jobFailure{reason: v1alpha1.ReasonSSHFailed, message: err.Error(), stage: stageConnecting}
	}
	defer g.Close()

	if !in.skipSteps {
		for i, s := range in.steps {
			progress(stageProvisioning, i+1, s.name)
			if err := runStep(ctx, g, s); err != nil {
				return nil, err
			}
		}
	}
	progress(stageRegistering, 0, "")

	gitlabFailure := func(what string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &jobFailure{reason: v1alpha1.ReasonGitLabError, message: what + ": " + err.Error(), stage: stageRegistering}
	}
	found, err := in.gitlab.ListRunners(ctx, in.list)
	if err != nil {
		return nil, gitlabFailure("listing runners", err)
	}
	for _, r := range found {
		if r.Description == in.create.Description {
			if _, err := in.gitlab.DeleteRunner(ctx, r.ID); err != nil {
				return nil, gitlabFailure(fmt.Sprintf("deleting runner %d left by an interrupted attempt", r.ID), err)
			}
		}
	}
	// The create is not cut short when the job is stopped (its replica
	// removed, its claim gone): GitLab would carry it out all the same,
	// after the removal looked for runners to delete, and the runner would
	// stay registered on nothing. It runs to its answer (bounded by the
	// HTTP client's timeout, and createTimeout) and the runner it made is
	// deleted below.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	created, err := in.gitlab.CreateRunner(cctx, in.create)
	cancel()
	if err != nil {
		return nil, gitlabFailure("creating the runner", err)
	}
	undo := func(cause error) error {
		// The job's context may be over (a cancelled job): the runner must
		// go all the same.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := in.gitlab.DeleteRunner(dctx, created.ID); err != nil {
			// The next attempt finds it by its description.
			cause = fmt.Errorf("%w (and deleting runner %d failed: %v)", cause, created.ID, err)
		}
		return cause
	}
	if ctx.Err() != nil {
		return nil, undo(ctx.Err())
	}
	for _, c := range []struct {
		name, command string
		stdin         []byte
	}{
		{"gitlab-runner register", registerCommand(in.url, in.executor, in.create.Description), []byte(created.Token)},
		{"gitlab-runner start", startCommand, nil},
	} {
		cctx, cancel := context.WithTimeout(ctx, guestCommandTimeout)
		_, err := g.Run(cctx, c.command, c.stdin)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, undo(ctx.Err())
			}
			return nil, undo(&jobFailure{reason: v1alpha1.ReasonRegisterFailed, message: fmt.Sprintf("%s in the guest: %v", c.name, err), stage: stageRegistering})
		}
	}
	return &jobOutcome{runnerID: created.ID, registeredAt: time.Now()}, nil
}

func runStep(ctx context.Context, g Guest, s step) error {
	sctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := g.Run(sctx, s.command, nil)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return &jobFailure{reason: v1alpha1.ReasonStepFailed, message: fmt.Sprintf("step %q timed out after %s", s.name, s.timeout), stage: stageProvisioning}
	}
	var exit *guest.ExitError
	if errors.As(err, &exit) {
		return &jobFailure{reason: v1alpha1.ReasonStepFailed, message: fmt.Sprintf("step %q %v", s.name, err), stage: stageProvisioning}
	}
	// The connection broke: the guest went away or sshd did.
	return &jobFailure{reason: v1alpha1.ReasonSSHFailed, message: fmt.Sprintf("step %q: %v", s.name, err), stage: stageProvisioning}
}
