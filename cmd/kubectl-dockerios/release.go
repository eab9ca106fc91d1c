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

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned/scheme"
)

func newReleaseCommand(o *options) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "release CLAIM...",
		Short: "Give Macs back: delete their claims",
		Long: `Release deletes each claim. The apiserver frees the claim's machine in the
same write and marks it Released: it is never bound again, and is torn down
(its VM, disks and bootdisk deleted, its identity given back to its pool),
while a pool makes a fresh machine in its place. A claim still waiting
leaves its pool's queue.

Release returns once the claims are deleted; the teardown goes on without
it (kubectl get mm -w shows it). A claim that does not exist is an error
naming it; the other claims are released all the same.

` + exitStatusHelp,
		Example: `  # Give back the Mac claim printed
  kubectl dockerios release warm-claim-x7k2p

  # Several at once, in namespace ci
  kubectl dockerios release -n ci build-1 build-2`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: o.completeClaims,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "" && format != "name" {
				return fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: name", format)
			}
			return o.release(cmd.Context(), args, format == "name", cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "", "Output format. Only name (the claims released, as kind.group/name) is supported; without it, a sentence per claim.")
	_ = cmd.RegisterFlagCompletionFunc("output", completeFixed("name"))
	return cmd
}

// release deletes each claim and says what became of its machine. It
// deletes the claim it read, by UID, so that a claim deleted and made
// again by someone else meanwhile is not deleted in its place.
func (o *options) release(ctx context.Context, names []string, nameOnly bool, out io.Writer) error {
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	client, err := o.newClient()
	if err != nil {
		return err
	}
	claims := client.DockeriosV1alpha1().MacOSMachineClaims(ns)
	namePrinter := printers.NewTypeSetter(scheme.Scheme).ToPrinter(&printers.NamePrinter{ShortOutput: true})
	var errs []error
	for _, name := range names {
		c, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			err = claims.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &c.UID}})
		}
		switch {
		case apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("MacOSMachineClaim %s not found in namespace %s", name, ns))
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("MacOSMachineClaim %s: %w", name, err))
			continue
		}
		if nameOnly {
			if err := namePrinter.PrintObj(c, out); err != nil {
				return errors.Join(append(errs, err)...)
			}
			continue
		}
		fmt.Fprintf(out, "macosmachineclaim.dockerios.io/%s released: %s\n", c.Name, releasedMachine(c))
	}
	return errors.Join(errs...)
}

// releasedMachine says what releasing c did to its machine.
func releasedMachine(c *v1alpha1.MacOSMachineClaim) string {
	switch {
	case c.Status.MachineName != "" && c.Status.Phase == v1alpha1.ClaimBound:
		return "MacOSMachine " + c.Status.MachineName + " is torn down"
	case c.Status.Phase == v1alpha1.ClaimLost:
		return "it was Lost, its machine already gone"
	}
	return "it was not bound to a machine"
}
