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
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned/scheme"
)

// output is a command's -o flag: kubectl's formats (json, yaml, name,
// jsonpath=..., go-template=...), and, when -o is not given, the command's
// own human-readable output.
type output struct {
	flags *genericclioptions.PrintFlags
	// extra are formats of the command's own, such as csv.
	extra []string
}

// addOutputFlags adds kubectl's -o flags to cmd. Objects are printed with
// their apiVersion and kind, which typed clients leave empty.
func addOutputFlags(cmd *cobra.Command, extra ...string) *output {
	o := &output{flags: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.Scheme), extra: extra}
	o.flags.AddFlags(cmd)
	formats := append(append([]string{}, extra...), o.flags.AllowedFormats()...)
	cmd.Flag("output").Usage = fmt.Sprintf("Output format. One of: (%s). Without it, a table for people.", strings.Join(formats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", completeFixed(formats...))
	return o
}

// format is -o as given.
func (o *output) format() string { return *o.flags.OutputFormat }

// human is true when no -o was given.
func (o *output) human() bool { return o.format() == "" }

// validate refuses an -o the command cannot print before the command
// does anything: a claim created and then not printed would be a claim
// nobody knows the name of.
func (o *output) validate() error {
	if o.human() {
		return nil
	}
	for _, f := range o.extra {
		if o.format() == f {
			return nil
		}
	}
	_, err := o.flags.ToPrinter()
	if err != nil && len(o.extra) > 0 && genericclioptions.IsNoCompatiblePrinterError(err) {
		// kubectl's message lists its formats only; ours are allowed too.
		formats := append(append([]string{}, o.extra...), o.flags.AllowedFormats()...)
		slices.Sort(formats)
		return fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: %s", o.format(), strings.Join(formats, ","))
	}
	return err
}

// print prints obj in the -o format.
func (o *output) print(obj runtime.Object, w io.Writer) error {
	p, err := o.flags.ToPrinter()
	if err != nil {
		return err
	}
	// A list's items come from a typed client without apiVersion and
	// kind, which kubectl get prints on each; the type setter sets the
	// list's alone.
	if meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return err
		}
		for _, item := range items {
			if gvks, _, err := scheme.Scheme.ObjectKinds(item); err == nil && len(gvks) > 0 {
				item.GetObjectKind().SetGroupVersionKind(gvks[0])
			}
		}
	}
	// The name printer takes no lists; kubectl get -o name prints a name
	// a line, and so do we.
	if o.format() == "name" && meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return err
		}
		for _, item := range items {
			if err := p.PrintObj(item, w); err != nil {
				return err
			}
		}
		return nil
	}
	return p.PrintObj(obj, w)
}

// age is how long ago t was, as kubectl get says it ("5m", "3d4h").
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// machinePhase is a machine's phase, Pending before the controller first
// writes one (the apiserver creates every machine Pending), and
// Terminating once it is being deleted, whatever the controller last wrote.
func machinePhase(m *v1alpha1.MacOSMachine) string {
	switch {
	case m.DeletionTimestamp != nil:
		return string(v1alpha1.MachineTerminating)
	case m.Status.Phase == "":
		return string(v1alpha1.MachinePending)
	}
	return string(m.Status.Phase)
}

// machineReady is the machine's Ready condition true, in phase Ready,
// and not being deleted: what the bind subresource asks of a machine.
func machineReady(m *v1alpha1.MacOSMachine) bool {
	return m.DeletionTimestamp == nil && m.Status.Phase == v1alpha1.MachineReady &&
		meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineConditionReady)
}

// notReadyReason says why a machine is not Ready: its Ready condition's
// reason and message, which the controller keeps to the one thing the
// machine waits for. Before the controller has written that condition,
// the first condition that is False says it (the apiserver writes
// IdentityAllocated=False, PoolExhausted, with no controller running).
// Empty for a Ready machine.
func notReadyReason(m *v1alpha1.MacOSMachine) string {
	if machineReady(m) {
		return ""
	}
	c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MachineConditionReady)
	if c == nil || c.Status == metav1.ConditionTrue {
		for i := range m.Status.Conditions {
			if m.Status.Conditions[i].Status == metav1.ConditionFalse {
				c = &m.Status.Conditions[i]
				break
			}
		}
	}
	if c == nil || c.Status == metav1.ConditionTrue {
		return ""
	}
	return strings.TrimSuffix(c.Reason+": "+c.Message, ": ")
}

// machineReason is what the tree says of a machine: why it is not Ready
// or, for a machine whose claim was released, that it is on its way out
// (it may still be Ready until the controller tears it down, but it is
// never bound again).
func machineReason(m *v1alpha1.MacOSMachine) string {
	if c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MachineReleased); c != nil && c.Status == metav1.ConditionTrue {
		return strings.TrimSuffix(c.Reason+": "+c.Message, ": ")
	}
	return notReadyReason(m)
}

// claimBound is the claim condition the apiserver writes in the
// transaction that binds the claim, and sets False (MachineGone) when its
// machine goes.
const claimBound = "Bound"

// claimLostReason says why a claim is Lost, from its Bound condition.
func claimLostReason(c *v1alpha1.MacOSMachineClaim) string {
	if cond := meta.FindStatusCondition(c.Status.Conditions, claimBound); cond != nil && cond.Status != metav1.ConditionTrue {
		return strings.TrimSuffix(cond.Reason+": "+cond.Message, ": ")
	}
	return "its machine failed or went away"
}

func claimPhase(c *v1alpha1.MacOSMachineClaim) string {
	if c.Status.Phase == "" {
		return string(v1alpha1.ClaimPending)
	}
	return string(c.Status.Phase)
}

// consoleCommand is how to open a machine's screen: KubeVirt's VNC
// console of its VirtualMachine, which the controller names in status.
// Empty while the machine has no VirtualMachine.
func consoleCommand(m *v1alpha1.MacOSMachine) string {
	if m.Status.VirtualMachineName == "" {
		return ""
	}
	return fmt.Sprintf("virtctl vnc %s -n %s", m.Status.VirtualMachineName, m.Namespace)
}

// releaseCommand is how to give a claim back.
func releaseCommand(c *v1alpha1.MacOSMachineClaim) string {
	return fmt.Sprintf("kubectl dockerios release %s -n %s", c.Name, c.Namespace)
}
