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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	clientset "github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	dockeriov1alpha1client "github.com/dockerios/dockerios/pkg/generated/clientset/versioned/typed/dockerio/v1alpha1"
)

// defaultPromoteTimeout bounds image promote --wait: a shutdown, a clone of
// the system disk (tens of GiB) and the DataSource's update.
const defaultPromoteTimeout = 2 * time.Hour

// Conditions of a MacOSImage the plugin reads (the image controller's).
const (
	imageReady    = "Ready"
	imageRecovery = "RecoveryReady"
	imagePromoted = "Promoted"
)

func newImageCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Make golden images: install macOS in a session, promote its disk (MacOSImage)",
		Long: `A golden image is made once, by hand, from Apple's recovery service: a
MacOSImage with spec.source.recovery fetches the release's recovery image;
"image install" starts an install session, a machine booting it beside a
blank disk, where a person installs macOS and the DockerIOS agent at the
console; "image promote" makes the session's disk the image, which every
machine made afterwards clones.`,
	}
	cmd.AddCommand(newImageInstallCommand(o), newImagePromoteCommand(o), newImageListCommand(o), newImageGetCommand(o))
	return cmd
}

func newImageInstallCommand(o *options) *cobra.Command {
	var class, name string
	cmd := &cobra.Command{
		Use:   "install IMAGE --class CLASS",
		Short: "Start an install session of an image: a machine booting its recovery beside a blank disk",
		Long: `Install creates a MacOSMachine with spec.purpose Install for the image: it
holds an identity like any machine and boots the image's recovery image
(OpenCore boots it while the disk is blank) beside a blank system disk of the class's size.
It is never bound to a claim and never Ready; it waits for you, however
long you take. Install prints what to do next.

The image must be made from Apple's recovery service (spec.source.recovery).

` + exitStatusHelp,
		Example: `  # An install session of image sonoma with class standard's CPU, memory and disk
  kubectl dockerios image install sonoma --class standard -n images`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeImages,
		RunE: func(cmd *cobra.Command, args []string) error {
			if class == "" {
				return errors.New("--class is required: the class gives the session its CPU, memory, disk size and SMBIOS model")
			}
			return o.imageInstall(cmd.Context(), args[0], class, name, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&class, "class", "", "MacOSMachineClass of the session: its CPU, memory, disk size and SMBIOS model (required).")
	cmd.Flags().StringVar(&name, "name", "", "Name of the session's MacOSMachine (default: IMAGE-install- and a random suffix).")
	_ = cmd.RegisterFlagCompletionFunc("class", o.completeMachineClasses)
	return cmd
}

// imageInstall creates the install session.
func (o *options) imageInstall(ctx context.Context, image, class, name string, out io.Writer) error {
	ns, client, err := o.namespacedClient()
	if err != nil {
		return err
	}
	img, err := client.DockeriosV1alpha1().MacOSImages().Get(ctx, image, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("MacOSImage %s not found (kubectl dockerios image list shows the images)", image)
	}
	if err != nil {
		return err
	}
	if img.Spec.Source.Recovery == nil {
		return fmt.Errorf("MacOSImage %s has no spec.source.recovery: an install session boots the recovery image Apple's recovery service gives for the image's release, "+
			"so only an image made from it has one (an image made from a disk you have is updated by pointing its source at another disk)", image)
	}
	m := &v1alpha1.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.MacOSMachineSpec{ClassName: class, ImageName: image, Purpose: v1alpha1.MachinePurposeInstall},
	}
	if name == "" {
		m.GenerateName = installPrefix(image)
	}
	created, err := client.DockeriosV1alpha1().MacOSMachines(ns).Create(ctx, m, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "macosmachine.dockerios.io/%s created: an install session of MacOSImage %s (release %s), class %s\n\n", created.Name, image, img.Spec.Release, class)
	return printInstallSteps(out, created, img)
}

// installPrefix is the generateName of an install session of image: a
// machine's name is a DNS label, an image's may hold dots.
func installPrefix(image string) string {
	return strings.ReplaceAll(image, ".", "-") + "-install-"
}

// vmName is the VirtualMachine the controller makes for machine name: the
// name itself, or, when too long for the suffixes of its other objects,
// a prefix and a hash (pkg/controller/machine's NamesFor, which the plugin
// does not import: it would bring KubeVirt's API into the plugin).
func vmName(name string) string {
	if max := validation.DNS1123LabelMaxLength - len("-system-") - 8; len(name) > max {
		sum := sha256.Sum256([]byte(name))
		h := "-" + hex.EncodeToString(sum[:])[:8]
		return strings.TrimRight(name[:max-len(h)], "-.") + h
	}
	return name
}

// printInstallSteps says what the person does with a new install session.
func printInstallSteps(w io.Writer, m *v1alpha1.MacOSMachine, img *v1alpha1.MacOSImage) error {
	recovery := "its recovery disk is cloned from the image's recovery volume"
	if c := meta.FindStatusCondition(img.Status.Conditions, imageRecovery); c == nil || c.Status != metav1.ConditionTrue {
		recovery = "the image's recovery image is still being fetched (kubectl get mimg " + img.Name + "); the session waits for it"
	}
	_, err := fmt.Fprintf(w, `Next:
  1. Wait until it is Starting and its VirtualMachine runs (%s):
       kubectl get mm %[2]s -n %[3]s -w
  2. Open its console: the recovery boots; erase the blank disk in Disk Utility and install macOS onto it:
       virtctl vnc %[4]s -n %[3]s
  3. In the guest: finish Setup Assistant, turn on automatic login, install the DockerIOS agent
     and clean the guest up for cloning (docs/reference/agent.md).
  4. Make its disk the image (this shuts the session down and deletes it):
       kubectl dockerios image promote %[2]s --image %[5]s -n %[3]s --wait
Delete the session instead to give up: kubectl delete mm %[2]s -n %[3]s
`, recovery, m.Name, m.Namespace, vmName(m.Name), img.Name)
	return err
}

type promoteOptions struct {
	*options
	image   string
	wait    bool
	timeout time.Duration
}

func newImagePromoteCommand(o *options) *cobra.Command {
	p := &promoteOptions{options: o}
	cmd := &cobra.Command{
		Use:   "promote MACHINE --image IMAGE",
		Short: "Make an install session's disk the image",
		Long: `Promote sets the image's spec.promoteFrom to the install session. DockerIOS
then shuts the session's guest down (ACPI), clones its system disk into a
new volume beside the image's DataSource, points the DataSource at it,
records the macOS version the session's agent reported, and deletes the
session, giving its identity back. Machines made from the image afterwards
clone the new disk; machines made before keep theirs.

Promote refuses a machine that is not an install session of the image.
With --wait it follows the promotion (status.promotion) until it succeeds
or fails, printing each phase.

Exit status: 0 on success; 1 on an error or a failed promotion; 2 when
--wait gave up at --timeout (the promotion goes on); 130 when --wait was
interrupted (the promotion goes on).`,
		Example: `  # Promote session sonoma-install-x7k2p into image sonoma, and wait
  kubectl dockerios image promote sonoma-install-x7k2p --image sonoma -n images --wait`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeInstallSessions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if p.image == "" {
				return errors.New("--image is required: the MacOSImage the session's disk becomes")
			}
			if p.timeout < 0 {
				return errors.New("--timeout must not be negative")
			}
			return p.run(cmd.Context(), args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&p.image, "image", "", "MacOSImage the session's disk becomes (required).")
	cmd.Flags().BoolVar(&p.wait, "wait", false, "Follow the promotion until it succeeds or fails.")
	cmd.Flags().DurationVar(&p.timeout, "timeout", defaultPromoteTimeout, "How long --wait waits; 0 waits with no limit. Past it promote exits with status 2; the promotion goes on.")
	_ = cmd.RegisterFlagCompletionFunc("image", flagCompletion(o.imageNames))
	return cmd
}

func (p *promoteOptions) run(ctx context.Context, machine string, stdout, stderr io.Writer) error {
	ns, client, err := p.namespacedClient()
	if err != nil {
		return err
	}
	m, err := client.DockeriosV1alpha1().MacOSMachines(ns).Get(ctx, machine, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("MacOSMachine %s not found in namespace %s", machine, ns)
	}
	if err != nil {
		return err
	}
	switch {
	case m.Spec.Purpose != v1alpha1.MachinePurposeInstall:
		return fmt.Errorf("MacOSMachine %s is not an install session (spec.purpose %s): only the disk of a session made with kubectl dockerios image install is promoted",
			machine, orDefault(string(m.Spec.Purpose), string(v1alpha1.MachinePurposeWorkload)))
	case m.Spec.ImageName != p.image:
		return fmt.Errorf("MacOSMachine %s is an install session of MacOSImage %s, not of %s", machine, m.Spec.ImageName, p.image)
	case m.DeletionTimestamp != nil:
		return fmt.Errorf("MacOSMachine %s is being deleted", machine)
	}
	images := client.DockeriosV1alpha1().MacOSImages()
	img, err := images.Get(ctx, p.image, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("MacOSImage %s not found", p.image)
	}
	if err != nil {
		return err
	}
	want := v1alpha1.NamespacedObjectReference{Namespace: ns, Name: machine}
	if pf := img.Spec.PromoteFrom; pf != nil && *pf != want {
		if st := img.Status.Promotion; st == nil || st.Machine != *pf || (st.Phase != v1alpha1.PromotionSucceeded && st.Phase != v1alpha1.PromotionFailed) {
			return fmt.Errorf("MacOSImage %s is being promoted from MacOSMachine %s/%s (%s); wait for it to end, or clear its spec.promoteFrom",
				p.image, pf.Namespace, pf.Name, promotionPhase(img))
		}
	}
	if a := m.Status.Agent; a == nil {
		fmt.Fprintf(stderr, "Warning: the agent of MacOSMachine %s has never answered: machines made from the image become Ready only when their agent does (docs/reference/agent.md)\n", machine)
	}
	// Conditioned on the image read: a promotion started meanwhile by
	// someone else is not replaced.
	rv, cleared := img.ResourceVersion, false
	if repromote(img, want) {
		// spec.promoteFrom already names the machine and the promotion of
		// that name has ended: setting it to the same value would change
		// nothing, so the image would get no new generation and the
		// controller would never take the request up again. Clear it
		// first, then set it, the second patch conditioned on the
		// resourceVersion the first returned: the controller starts a
		// new promotion when the image's generation is newer than the
		// Promoted condition's observedGeneration (the generation its
		// last promotion's outcome was written at).
		img, err = patchPromoteFrom(ctx, images, p.image, nil, rv)
		if err != nil {
			return err
		}
		rv, cleared = img.ResourceVersion, true
	}
	img, err = patchPromoteFrom(ctx, images, p.image, &want, rv)
	if err != nil {
		if cleared {
			return fmt.Errorf("MacOSImage %s's spec.promoteFrom was cleared to promote MacOSMachine %s/%s again, but setting it failed (run promote again): %w",
				p.image, ns, machine, err)
		}
		return err
	}
	// The generation this request made: only a status the controller
	// wrote having seen it says how this promotion went.
	gen := img.Generation
	fmt.Fprintf(stdout, "macosimage.dockerios.io/%s promoting from MacOSMachine %s/%s: its guest is shut down, its system disk cloned beside the image's DataSource, "+
		"the DataSource pointed at the clone, and the machine deleted\n", img.Name, ns, machine)
	if !p.wait {
		fmt.Fprintf(stdout, "Follow it with: kubectl get mimg %s -w\n", img.Name)
		return nil
	}
	waitCtx, cancel := ctx, context.CancelFunc(func() {})
	if p.timeout > 0 {
		waitCtx, cancel = context.WithTimeoutCause(ctx, p.timeout, errTimedOut)
	}
	defer cancel()
	done, err := waitForPromotion(waitCtx, client, img.Name, want, m.UID, gen, stderr)
	if err != nil {
		var stopped *waitStopped
		if !errors.As(err, &stopped) {
			return err
		}
		if errors.Is(context.Cause(waitCtx), errTimedOut) {
			return &codedError{code: exitTimeout, err: fmt.Errorf("timed out after %s waiting for %s; the promotion goes on", p.timeout, stopped.waitingFor)}
		}
		return &codedError{code: exitInterrupted, err: fmt.Errorf("interrupted while waiting for %s; the promotion goes on", stopped.waitingFor)}
	}
	version := ""
	if done.Status.MacOSVersion != "" {
		version = " (macOS " + done.Status.MacOSVersion + ")"
	}
	volume := ""
	if st := done.Status.Promotion; st != nil && st.VolumeName != "" {
		volume = " now clones PersistentVolumeClaim " + st.VolumeName
		if ds := done.Spec.Source.DataSource; ds != nil {
			volume = fmt.Sprintf(" (DataSource %s/%s) now clones PersistentVolumeClaim %s/%s", ds.Namespace, ds.Name, ds.Namespace, st.VolumeName)
		}
	}
	_, err = fmt.Fprintf(stdout, "MacOSImage %s%s%s: machines made from it from now on boot the promoted disk.\n", done.Name, volume, version)
	return err
}

// repromote says whether promoting machine into img needs spec.promoteFrom
// cleared before it is set: it names the machine already and the
// promotion of that name has ended (a failed one to be tried again, or a
// machine made again under a promoted one's name). A promotion of it
// under way is left alone: setting the same value is a no-op.
func repromote(img *v1alpha1.MacOSImage, machine v1alpha1.NamespacedObjectReference) bool {
	pf, st := img.Spec.PromoteFrom, img.Status.Promotion
	return pf != nil && *pf == machine && st != nil && st.Machine == machine &&
		(st.Phase == v1alpha1.PromotionSucceeded || st.Phase == v1alpha1.PromotionFailed)
}

// patchPromoteFrom sets the image's spec.promoteFrom to machine (nil
// clears it) with a merge patch conditioned on resourceVersion rv.
func patchPromoteFrom(ctx context.Context, images dockeriov1alpha1client.MacOSImageInterface, image string, machine *v1alpha1.NamespacedObjectReference, rv string) (*v1alpha1.MacOSImage, error) {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"promoteFrom": machine}})
	if err != nil {
		return nil, err
	}
	if patch, err = withResourceVersion(patch, rv); err != nil {
		return nil, err
	}
	return images.Patch(ctx, image, types.MergePatchType, patch, metav1.PatchOptions{})
}

// withResourceVersion adds metadata.resourceVersion to a merge patch.
func withResourceVersion(patch []byte, rv string) ([]byte, error) {
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	p["metadata"] = map[string]any{"resourceVersion": rv}
	return json.Marshal(p)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// promotionPhase is how far the image's promotion is, for a message.
func promotionPhase(img *v1alpha1.MacOSImage) string {
	if st := img.Status.Promotion; st != nil && st.Phase != "" {
		return "phase " + string(st.Phase)
	}
	return "not started yet"
}

// promotionObserved is the generation of the image the controller had
// seen when it last wrote how a promotion went: the Promoted condition's
// observedGeneration (status.observedGeneration moves on every pass,
// also one that leaves an ended promotion's status as it was), or
// status.observedGeneration when there is no Promoted condition.
func promotionObserved(img *v1alpha1.MacOSImage) int64 {
	if c := meta.FindStatusCondition(img.Status.Conditions, imagePromoted); c != nil {
		return c.ObservedGeneration
	}
	return img.Status.ObservedGeneration
}

// goldenSuffix ends the name of every golden volume a promotion of the
// machine with uid clones into: "-" and the first 8 hex digits of the
// UID (pkg/controller/image's GoldenVolumeName, which the plugin does not
// import: it would bring CDI's and KubeVirt's APIs into the plugin). ""
// for no UID.
func goldenSuffix(uid types.UID) string {
	u := strings.ReplaceAll(string(uid), "-", "")
	if u == "" {
		return ""
	}
	if len(u) > 8 {
		u = u[:8]
	}
	return "-" + u
}

// waitForPromotion follows the image until its promotion from machine
// succeeds (the image is returned) or fails (an error quoting its Promoted
// condition), writing a line to progress each time the phase changes. It
// judges only a status the controller wrote having seen generation gen
// (the one the request made) and, when the status names a golden volume,
// only one cloned from the machine with uid: a status an earlier
// promotion of the same name left (withdrawn, failed, or of a machine
// deleted and made again under the name) is not this one's. ctx ending
// ends it with a *waitStopped.
func waitForPromotion(ctx context.Context, client clientset.Interface, image string, machine v1alpha1.NamespacedObjectReference, uid types.UID, gen int64,
	progress io.Writer) (*v1alpha1.MacOSImage, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	images := client.DockeriosV1alpha1().MacOSImages()
	changes := make(chan change)
	go follow(ctx, listWatch{opts: metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", image).String()},
		list:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return images.List(ctx, o) },
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return images.Watch(ctx, o) },
	}, changes)
	said := ""
	waitingFor := fmt.Sprintf("MacOSImage %s's promotion from MacOSMachine %s/%s", image, machine.Namespace, machine.Name)
	for {
		var ch change
		select {
		case ch = <-changes:
		case <-ctx.Done():
			return nil, &waitStopped{waitingFor: waitingFor + " (" + said + ")"}
		}
		if ch.err != nil {
			return nil, ch.err
		}
		img, ok := ch.obj.(*v1alpha1.MacOSImage)
		if !ok || img.Name != image {
			continue
		}
		if ch.deleted {
			return nil, fmt.Errorf("MacOSImage %s was deleted", image)
		}
		if pf := img.Spec.PromoteFrom; pf == nil || *pf != machine {
			return nil, fmt.Errorf("MacOSImage %s's spec.promoteFrom no longer names MacOSMachine %s/%s: the promotion was withdrawn", image, machine.Namespace, machine.Name)
		}
		st := img.Status.Promotion
		if st == nil || st.Machine != machine {
			continue // the controller has not taken it up yet
		}
		if promotionObserved(img) < gen {
			continue // an earlier promotion's: the controller has not seen the request yet
		}
		if suffix := goldenSuffix(uid); st.VolumeName != "" && suffix != "" && !strings.HasSuffix(st.VolumeName, suffix) {
			continue // a promotion of another machine of the same name
		}
		line := "promotion " + string(st.Phase)
		if c := meta.FindStatusCondition(img.Status.Conditions, imagePromoted); c != nil && c.Message != "" && st.Phase != v1alpha1.PromotionSucceeded {
			line += " (" + c.Reason + ": " + c.Message + ")"
		}
		if line != said {
			fmt.Fprintf(progress, "image %s: %s\n", image, line)
			said = line
		}
		switch st.Phase {
		case v1alpha1.PromotionSucceeded:
			return img, nil
		case v1alpha1.PromotionFailed:
			msg := "see its Promoted condition"
			if c := meta.FindStatusCondition(img.Status.Conditions, imagePromoted); c != nil {
				msg = c.Reason + ": " + c.Message
			}
			return nil, fmt.Errorf("the promotion of MacOSImage %s from MacOSMachine %s/%s failed: %s", image, machine.Namespace, machine.Name, msg)
		}
	}
}

func newImageListCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the images: release, source, readiness, recovery and last promotion",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := o.newClient()
			if err != nil {
				return err
			}
			l, err := client.DockeriosV1alpha1().MacOSImages().List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tRELEASE\tMACOS\tSOURCE\tREADY\tRECOVERY\tPROMOTION")
			for i := range l.Items {
				img := &l.Items[i]
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", img.Name, img.Spec.Release, orNone(img.Status.MacOSVersion), imageSource(img),
					conditionWord(img, imageReady), recoveryWord(img), promotionWord(img))
			}
			return tw.Flush()
		},
	}
}

func newImageGetCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:               "get IMAGE",
		Short:             "Show an image: its source, conditions, recovery and last promotion",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeImages,
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := o.newClient()
			if err != nil {
				return err
			}
			img, err := client.DockeriosV1alpha1().MacOSImages().Get(cmd.Context(), args[0], metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("MacOSImage %s not found", args[0])
			}
			if err != nil {
				return err
			}
			return printImage(cmd.OutOrStdout(), img)
		},
	}
}

func printImage(w io.Writer, img *v1alpha1.MacOSImage) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Image:\t%s\n", img.Name)
	fmt.Fprintf(tw, "Release:\t%s\n", img.Spec.Release)
	fmt.Fprintf(tw, "macOS:\t%s\n", orNone(img.Status.MacOSVersion))
	fmt.Fprintf(tw, "Source:\t%s\n", imageSource(img))
	if r := img.Spec.Source.Recovery; r != nil {
		fmt.Fprintf(tw, "Recovery:\t%s (board %s)\n", recoveryWord(img), orDefault(r.BoardID, "the release's default"))
	}
	if st := img.Status.Promotion; st != nil {
		fmt.Fprintf(tw, "Promotion:\tfrom MacOSMachine %s/%s: %s\n", st.Machine.Namespace, st.Machine.Name, orDefault(string(st.Phase), "starting"))
	}
	for _, c := range img.Status.Conditions {
		fmt.Fprintf(tw, "%s:\t%s (%s: %s)\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return tw.Flush()
}

func imageSource(img *v1alpha1.MacOSImage) string {
	switch s := img.Spec.Source; {
	case s.DataSource != nil && s.Recovery != nil:
		return fmt.Sprintf("DataSource %s/%s, from recovery %s", s.DataSource.Namespace, s.DataSource.Name, s.Recovery.Release)
	case s.DataSource != nil:
		return fmt.Sprintf("DataSource %s/%s", s.DataSource.Namespace, s.DataSource.Name)
	case s.PVC != nil:
		return fmt.Sprintf("PVC %s/%s", s.PVC.Namespace, s.PVC.Name)
	}
	return "<none>"
}

func conditionWord(img *v1alpha1.MacOSImage, typ string) string {
	if c := meta.FindStatusCondition(img.Status.Conditions, typ); c != nil {
		return string(c.Status)
	}
	return "Unknown"
}

func recoveryWord(img *v1alpha1.MacOSImage) string {
	if img.Spec.Source.Recovery == nil {
		return "-"
	}
	c := meta.FindStatusCondition(img.Status.Conditions, imageRecovery)
	switch {
	case c == nil:
		return "Pending"
	case c.Status == metav1.ConditionTrue:
		return "Ready"
	}
	return c.Reason
}

func promotionWord(img *v1alpha1.MacOSImage) string {
	st := img.Status.Promotion
	if st == nil {
		return "-"
	}
	return fmt.Sprintf("%s (%s/%s)", orDefault(string(st.Phase), "starting"), st.Machine.Namespace, st.Machine.Name)
}

// imageNames lists the images, for completion.
func (o *options) imageNames(ctx context.Context) ([]string, error) {
	client, err := o.newClient()
	if err != nil {
		return nil, err
	}
	l, err := client.DockeriosV1alpha1().MacOSImages().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return names(l.Items, func(i *v1alpha1.MacOSImage) string { return i.Name }), nil
}

func (o *options) completeImages(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return completeNames(o.imageNames)(cmd, args, toComplete)
}

// completeInstallSessions completes the install sessions of the namespace.
func (o *options) completeInstallSessions(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return completeNames(func(ctx context.Context) ([]string, error) {
		ns, client, err := o.namespacedClient()
		if err != nil {
			return nil, err
		}
		l, err := client.DockeriosV1alpha1().MacOSMachines(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, m := range l.Items {
			if m.Spec.Purpose == v1alpha1.MachinePurposeInstall {
				out = append(out, m.Name)
			}
		}
		return out, nil
	})(cmd, args, toComplete)
}
