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
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	clientset "github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
)

// defaultClaimTimeout bounds claim --wait. It is longer than a class's
// default startTimeout (20m), past which a machine that does not come up
// fails, which ends the wait with the reason before this does.
const defaultClaimTimeout = 30 * time.Minute

// createTimeout bounds the claim's create, which an interrupt does not
// cut short.
const createTimeout = time.Minute

// errTimedOut is the cause of the wait's context when --timeout passes,
// telling it from an interrupt.
var errTimedOut = errors.New("timed out")

type claimOptions struct {
	*options
	pool, class, selector string
	// poolSet says --pool was given (perhaps empty).
	poolSet bool
	wait    bool
	timeout time.Duration
	out     *output
}

func newClaimCommand(o *options) *cobra.Command {
	c := &claimOptions{options: o}
	cmd := &cobra.Command{
		Use:   "claim [NAME] (--pool POOL | --class CLASS)",
		Short: "Ask for a Mac and wait until it is Ready",
		Long: `Claim asks for a Mac: it creates a MacOSMachineClaim against a warm pool
(--pool) or a class (--class), waits until the claim is Bound and its machine
Ready, and prints the machine, its addresses, the identity it boots with and
the command that opens its screen.

Without NAME the claim is named after the pool or class with a random
suffix, and the name is printed first.

A pool claim is answered at once when the pool has a Ready machine, else as
soon as one is Ready; a class claim gets a machine made for it, which takes
as long as a Mac takes to boot. While it waits, claim says on stderr what it
waits for, each time that changes.

--wait is on by default: a person who asks for a Mac wants to use it, and
only a Ready machine has addresses to print. With --wait=false claim creates
the claim and returns; the claim is answered all the same.

A claim that is Lost, or a machine that fails, ends the wait with the
reason. When --timeout passes first, or the wait is interrupted, the claim
is left in place (it is still answered, and holds its machine until it is
released) and claim says how to release it.

` + exitStatusHelp,
		Example: `  # A Mac from the warm pool "warm", once it is Ready
  kubectl dockerios claim --pool warm

  # A claim named ci-42 for a machine made from class "xcode16", waiting at most an hour
  kubectl dockerios claim ci-42 --class xcode16 --timeout 1h

  # Only machines labelled xcode=16; create the claim, print its name and return
  kubectl dockerios claim --pool warm -l xcode=16 --wait=false -o name`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) > 0 {
				name = args[0]
			}
			c.poolSet = cmd.Flags().Changed("pool")
			return c.run(cmd.Context(), name, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&c.pool, "pool", "", "The MacOSMachinePool to take a warm machine from.")
	cmd.Flags().StringVar(&c.class, "class", "", "The MacOSMachineClass to make a machine of, for this claim alone.")
	cmd.Flags().StringVarP(&c.selector, "selector", "l", "", "Only machines whose labels match this selector (as for kubectl get -l) may answer the claim.")
	cmd.Flags().BoolVar(&c.wait, "wait", true, "Wait until the claim is Bound and its machine Ready.")
	cmd.Flags().DurationVar(&c.timeout, "timeout", defaultClaimTimeout, "How long --wait waits; 0 waits with no limit. Past it claim exits with status 2 and leaves the claim.")
	cmd.MarkFlagsMutuallyExclusive("pool", "class")
	cmd.MarkFlagsOneRequired("pool", "class")
	_ = cmd.RegisterFlagCompletionFunc("pool", o.completeMachinePools)
	_ = cmd.RegisterFlagCompletionFunc("class", o.completeMachineClasses)
	c.out = addOutputFlags(cmd)
	return cmd
}

func (c *claimOptions) run(ctx context.Context, name string, stdout, stderr io.Writer) error {
	if err := c.out.validate(); err != nil {
		return err
	}
	if c.timeout < 0 {
		return fmt.Errorf("--timeout must not be negative")
	}
	// The flag group holds a flag given empty as given: without this, the
	// apiserver's refusal would be about a generateName of "-claim-".
	switch {
	case c.pool == "" && c.class == "" && c.poolSet:
		return fmt.Errorf("--pool must name a MacOSMachinePool")
	case c.pool == "" && c.class == "":
		return fmt.Errorf("--class must name a MacOSMachineClass")
	}
	claim := &v1alpha1.MacOSMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.MacOSMachineClaimSpec{PoolName: c.pool, ClassName: c.class},
	}
	if name == "" {
		// Named after what it asks for, and told apart from the pool's
		// machines (<pool>-<random>) by the word claim.
		claim.GenerateName = c.pool + c.class + "-claim-"
	}
	if c.selector != "" {
		sel, err := metav1.ParseToLabelSelector(c.selector)
		if err != nil {
			return fmt.Errorf("--selector: %w", err)
		}
		claim.Spec.Selector = sel
	}
	ns, err := c.namespace()
	if err != nil {
		return err
	}
	client, err := c.newClient()
	if err != nil {
		return err
	}
	// An interrupt does not cut the create short: the apiserver may have
	// made the claim (named by it, from generateName) with the answer on
	// its way, and a claim nobody was told of would hold its machine. The
	// create completes, bounded, and the claim is named below.
	createCtx, cancelCreate := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	created, err := client.DockeriosV1alpha1().MacOSMachineClaims(ns).Create(createCtx, claim, metav1.CreateOptions{})
	cancelCreate()
	if err != nil {
		return err
	}
	warnIfNoPool(ctx, client, created, stderr)
	if !c.wait {
		if !c.out.human() {
			return c.out.print(created, stdout)
		}
		state := claimPhase(created)
		if created.Status.MachineName != "" {
			state += " to MacOSMachine " + created.Status.MachineName
		}
		_, err := fmt.Fprintf(stdout, "macosmachineclaim.dockerios.io/%s created: %s\n", created.Name, state)
		return err
	}
	if c.out.human() {
		// The name first: should the wait end badly, the claim it left
		// has been named.
		fmt.Fprintf(stdout, "macosmachineclaim.dockerios.io/%s created\n", created.Name)
	}
	waitCtx, cancel := ctx, context.CancelFunc(func() {})
	if c.timeout > 0 {
		waitCtx, cancel = context.WithTimeoutCause(ctx, c.timeout, errTimedOut)
	}
	defer cancel()
	bound, machine, err := waitForMachine(waitCtx, client, created, stderr)
	if err != nil {
		return c.waitError(waitCtx, created, err)
	}
	if !c.out.human() {
		return c.out.print(bound, stdout)
	}
	return printReady(stdout, bound, machine)
}

// warnIfNoPool warns when a waiting claim names a pool that does not
// exist: the API accepts it (the pool may be made later), but a mistyped
// name would otherwise cost the whole wait to find out. A pool it may not
// read is not warned about.
func warnIfNoPool(ctx context.Context, client clientset.Interface, c *v1alpha1.MacOSMachineClaim, w io.Writer) {
	if c.Spec.PoolName == "" || c.Status.MachineName != "" {
		return
	}
	_, err := client.DockeriosV1alpha1().MacOSMachinePools(c.Namespace).Get(ctx, c.Spec.PoolName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(w, "Warning: MacOSMachinePool %s does not exist in namespace %s: the claim waits until it is made and has a Ready machine (see kubectl get mmpool -n %s)\n",
			c.Spec.PoolName, c.Namespace, c.Namespace)
	}
}

// waitError says why the wait ended, and what became of the claim: it is
// never deleted on the user's behalf, since it may yet be answered and the
// user may want the machine after all.
func (c *claimOptions) waitError(ctx context.Context, claim *v1alpha1.MacOSMachineClaim, err error) error {
	var stopped *waitStopped
	if !errors.As(err, &stopped) {
		return err
	}
	left := fmt.Sprintf("MacOSMachineClaim %s is left in place: it may still be answered, and holds any machine it gets until it is released.\n"+
		"Release it with: %s", claim.Name, releaseCommand(claim))
	if errors.Is(context.Cause(ctx), errTimedOut) {
		return &codedError{code: exitTimeout, err: fmt.Errorf("timed out after %s waiting for %s\n%s", c.timeout, stopped.waitingFor, left)}
	}
	return &codedError{code: exitInterrupted, err: fmt.Errorf("interrupted while waiting for %s\n%s", stopped.waitingFor, left)}
}

// printReady prints what a person needs to use a Ready machine.
func printReady(w io.Writer, claim *v1alpha1.MacOSMachineClaim, m *v1alpha1.MacOSMachine) error {
	fmt.Fprintf(w, "MacOSMachineClaim %s is Bound to MacOSMachine %s, which is Ready.\n\n", claim.Name, m.Name)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	from := "class " + m.Spec.ClassName
	if m.Spec.PoolName != "" {
		from = "pool " + m.Spec.PoolName + ", " + from
	}
	fmt.Fprintf(tw, "Machine:\t%s (namespace %s, %s)\n", m.Name, m.Namespace, from)
	identity := ""
	if m.Status.IdentityRef != nil {
		identity = m.Status.IdentityRef.Name
	}
	fmt.Fprintf(tw, "Identity:\t%s\n", orNone(identity))
	fmt.Fprintf(tw, "Node:\t%s\n", orNone(m.Status.NodeName))
	if len(m.Status.Addresses) == 0 {
		fmt.Fprintf(tw, "Addresses:\t<none>\n")
	}
	for i, a := range m.Status.Addresses {
		label := ""
		if i == 0 {
			label = "Addresses:"
		}
		fmt.Fprintf(tw, "%s\t%s (%s)\n", label, a.Address, a.Type)
	}
	console := consoleCommand(m)
	if console == "" {
		console = "<none>: the machine names no VirtualMachine"
	}
	fmt.Fprintf(tw, "Console:\t%s\n", console)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nWhen you are done: %s\n", releaseCommand(claim))
	return err
}

// waitStopped is a wait ended by its context (a timeout, an interrupt)
// rather than by what it watched.
type waitStopped struct {
	// waitingFor says what the wait was waiting for, and how things stood.
	waitingFor string
}

func (e *waitStopped) Error() string { return "stopped waiting for " + e.waitingFor }

// waitForMachine waits until claim is Bound and its machine Ready, and
// returns both. It writes a line to progress each time what it waits for
// changes. A claim that is deleted or Lost, or a machine that fails or is
// deleted, ends the wait with an error that says why; ctx ending ends it
// with a *waitStopped.
func waitForMachine(ctx context.Context, client clientset.Interface, claim *v1alpha1.MacOSMachineClaim, progress io.Writer) (*v1alpha1.MacOSMachineClaim, *v1alpha1.MacOSMachine, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changes := make(chan change)
	api := client.DockeriosV1alpha1()
	claims, machines := api.MacOSMachineClaims(claim.Namespace), api.MacOSMachines(claim.Namespace)
	machineLW := func(opts metav1.ListOptions) listWatch {
		return listWatch{opts: opts,
			list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return machines.List(ctx, o) },
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return machines.Watch(ctx, o)
			}}
	}
	start := func(lw listWatch) context.CancelFunc {
		sctx, stop := context.WithCancel(ctx)
		// follow handles every error of its requests (retries them, or
		// ends with them); client-go's own log line for a body read cut
		// short would only print, as an E line on the user's terminal,
		// that a request the wait no longer needed was cancelled.
		sctx = klog.NewContext(sctx, logr.Discard())
		go follow(sctx, lw, changes)
		return stop
	}
	start(listWatch{opts: metav1.ListOptions{FieldSelector: "metadata.name=" + claim.Name},
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return claims.List(ctx, o) },
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return claims.Watch(ctx, o)
		}})

	w := &claimWatch{claim: claim, machines: map[string]*v1alpha1.MacOSMachine{}, gone: map[string]bool{}}
	// followed is the machine stream: the class claim's label until the
	// claim is Bound, then the bound machine's name.
	followed, stopMachines := "", context.CancelFunc(func() {})
	if claim.Spec.ClassName != "" {
		followed = v1alpha1.ClaimUIDLabel
		stopMachines = start(machineLW(metav1.ListOptions{LabelSelector: v1alpha1.ClaimUIDLabel + "=" + string(claim.UID)}))
	}
	last := ""
	for {
		v := w.assess()
		if v.err != nil {
			return w.claim, nil, v.err
		}
		if v.done {
			return w.claim, w.machine(), nil
		}
		if v.line != "" && v.line != last {
			fmt.Fprintln(progress, v.line)
			last = v.line
		}
		if bound := w.claim.Status.MachineName; bound != "" && followed != bound {
			stopMachines()
			followed = bound
			stopMachines = start(machineLW(metav1.ListOptions{FieldSelector: "metadata.name=" + bound}))
		}
		select {
		case <-ctx.Done():
			return w.claim, nil, &waitStopped{waitingFor: v.waitingFor}
		case c := <-changes:
			if c.err != nil {
				return w.claim, nil, fmt.Errorf("watching MacOSMachineClaim %s and its machine: %w; the claim is left in place: release it with: %s",
					claim.Name, c.err, releaseCommand(claim))
			}
			w.apply(c)
		}
	}
}

// claimWatch is what a wait knows of a claim and its machines.
type claimWatch struct {
	claim     *v1alpha1.MacOSMachineClaim
	claimGone bool
	// machines are the machines seen: the one made for a class claim,
	// and the one the claim is bound to. A deleted machine stays, marked
	// gone.
	machines map[string]*v1alpha1.MacOSMachine
	gone     map[string]bool
}

func (w *claimWatch) apply(c change) {
	switch obj := c.obj.(type) {
	case *v1alpha1.MacOSMachineClaim:
		// A claim deleted and made again under the name is another claim.
		if obj.Name != w.claim.Name || obj.UID != w.claim.UID {
			return
		}
		w.claim, w.claimGone = obj, c.deleted
	case *v1alpha1.MacOSMachine:
		// Streams stopped when the claim was bound may still deliver; and
		// a fake client does not filter by selector.
		if bound := w.claim.Status.MachineName; bound != "" && obj.Name != bound {
			return
		}
		if w.claim.Status.MachineName == "" && obj.Labels[v1alpha1.ClaimUIDLabel] != string(w.claim.UID) {
			return
		}
		w.machines[obj.Name] = obj
		w.gone[obj.Name] = c.deleted
	}
}

// machine is the machine the claim is bound to or, before that, the one
// being made for it; nil when there is none yet.
func (w *claimWatch) machine() *v1alpha1.MacOSMachine {
	if bound := w.claim.Status.MachineName; bound != "" {
		return w.machines[bound]
	}
	// Before the bind, a class claim's machine; should one have been
	// replaced, the newest.
	var newest *v1alpha1.MacOSMachine
	for _, m := range w.machines {
		if newest == nil || newest.CreationTimestamp.Before(&m.CreationTimestamp) {
			newest = m
		}
	}
	return newest
}

// verdict is where a wait stands.
type verdict struct {
	// line is the progress line: how things stand.
	line string
	// waitingFor says what the wait waits for, for a timeout's message.
	waitingFor string
	done       bool
	err        error
}

func (w *claimWatch) assess() verdict {
	c := w.claim
	release := fmt.Sprintf("; the claim is left in place: release it with: %s", releaseCommand(c))
	if w.claimGone {
		return verdict{err: fmt.Errorf("MacOSMachineClaim %s was deleted (released) while waiting for it", c.Name)}
	}
	if c.Status.Phase == v1alpha1.ClaimLost {
		return verdict{err: fmt.Errorf("MacOSMachineClaim %s is Lost: %s%s", c.Name, claimLostReason(c), release)}
	}
	m := w.machine()
	state := ""
	if m != nil {
		state = fmt.Sprintf("machine %s: %s", m.Name, machineState(m))
		switch {
		case w.gone[m.Name]:
			return verdict{err: fmt.Errorf("MacOSMachine %s was deleted while waiting for it%s", m.Name, release)}
		case m.Status.Phase == v1alpha1.MachineFailed:
			return verdict{err: fmt.Errorf("MacOSMachine %s failed: %s%s", m.Name, orNone(notReadyReason(m)), release)}
		case m.DeletionTimestamp != nil:
			return verdict{err: fmt.Errorf("MacOSMachine %s is being deleted%s", m.Name, release)}
		}
	}
	if bound := c.Status.MachineName; bound != "" {
		if m == nil {
			// Until the machine is read, nothing worth a line: it is most
			// often Ready, and the wait about to end.
			return verdict{waitingFor: fmt.Sprintf("MacOSMachine %s to be Ready", bound)}
		}
		if machineReady(m) {
			return verdict{done: true}
		}
		return verdict{line: fmt.Sprintf("claim %s: Bound to %s; %s", c.Name, bound, state),
			waitingFor: fmt.Sprintf("MacOSMachine %s to be Ready (%s)", bound, state)}
	}
	waitingFor := fmt.Sprintf("MacOSMachineClaim %s to be Bound", c.Name)
	switch {
	case m != nil:
		return verdict{line: fmt.Sprintf("claim %s: %s; %s", c.Name, claimPhase(c), state), waitingFor: waitingFor + " (" + state + ")"}
	case c.Spec.PoolName != "":
		why := fmt.Sprintf("no Ready machine of pool %s was free", c.Spec.PoolName)
		if cond := meta.FindStatusCondition(c.Status.Conditions, claimBound); cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != "" {
			// The apiserver's own words: they tell a selector that
			// matches nothing, or older claims ahead, from an empty pool.
			why = cond.Message
		}
		return verdict{line: fmt.Sprintf("claim %s: %s, waiting for a Ready machine of pool %s", c.Name, claimPhase(c), c.Spec.PoolName),
			waitingFor: waitingFor + " (" + why + ")"}
	default:
		return verdict{line: fmt.Sprintf("claim %s: %s, waiting for a machine of class %s to be made", c.Name, claimPhase(c), c.Spec.ClassName),
			waitingFor: waitingFor + fmt.Sprintf(" (no machine of class %s was made for it)", c.Spec.ClassName)}
	}
}

// machineState is a machine's phase and, unless it is Ready, why not.
func machineState(m *v1alpha1.MacOSMachine) string {
	if why := notReadyReason(m); why != "" {
		return machinePhase(m) + " (" + strings.TrimSpace(why) + ")"
	}
	return machinePhase(m)
}
