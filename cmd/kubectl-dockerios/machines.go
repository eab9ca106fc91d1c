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
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

func newMachinesCommand(o *options) *cobra.Command {
	var allNamespaces bool
	var out *output
	cmd := &cobra.Command{
		Use:   "machines",
		Short: "Show pools, their machines and the claims on them, as a tree",
		Long: `Machines shows each warm pool with its machines, and each machine with the
claim it is bound to; claims still waiting hang off their pool. Machines of
no pool (those made for a class claim, or created by hand) are grouped by
their class. For each machine: its phase, the identity it boots with, its
node, its age and, unless it is Ready, why not (its Ready condition); a
machine whose claim was released says so until it is gone.

With -o json, yaml, name or a template, the machines are printed as a
MacOSMachineList, in the tree's order.`,
		Example: `  # The current namespace
  kubectl dockerios machines

  # Every namespace
  kubectl dockerios machines -A

  # The names of the machines, for a script
  kubectl dockerios machines -o name`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			ns := metav1.NamespaceAll
			if !allNamespaces {
				var err error
				if ns, err = o.namespace(); err != nil {
					return err
				}
			}
			f, err := o.fleet(cmd.Context(), ns)
			if err != nil {
				return err
			}
			groups := f.tree()
			if !out.human() {
				list := &v1alpha1.MacOSMachineList{}
				for _, g := range groups {
					for _, m := range g.machines {
						list.Items = append(list.Items, *m.machine)
					}
				}
				return out.print(list, cmd.OutOrStdout())
			}
			if len(groups) == 0 {
				where := " in " + ns + " namespace"
				if allNamespaces {
					where = ""
				}
				_, err := fmt.Fprintf(cmd.ErrOrStderr(), "No MacOSMachinePools, MacOSMachines or MacOSMachineClaims found%s.\n", where)
				return err
			}
			return printTree(cmd.OutOrStdout(), groups, allNamespaces, time.Now())
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Show every namespace, not only the current one.")
	out = addOutputFlags(cmd)
	return cmd
}

// fleet is the pools, machines and claims of a namespace (or of all).
type fleet struct {
	pools    []v1alpha1.MacOSMachinePool
	machines []v1alpha1.MacOSMachine
	claims   []v1alpha1.MacOSMachineClaim
}

func (o *options) fleet(ctx context.Context, ns string) (*fleet, error) {
	client, err := o.newClient()
	if err != nil {
		return nil, err
	}
	api := client.DockeriosV1alpha1()
	pools, err := api.MacOSMachinePools(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	machines, err := api.MacOSMachines(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	claims, err := api.MacOSMachineClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return &fleet{pools: pools.Items, machines: machines.Items, claims: claims.Items}, nil
}

// group is the top of a tree: a pool, or the class of machines of no pool.
type group struct {
	namespace string
	// pool is set for a pool's group; it is nil for a pool that is gone
	// while machines or claims of it remain.
	pool      *v1alpha1.MacOSMachinePool
	isPool    bool
	name      string
	machines  []machineNode
	unclaimed []*v1alpha1.MacOSMachineClaim // claims bound to no machine shown here
}

type machineNode struct {
	machine *v1alpha1.MacOSMachine
	claim   *v1alpha1.MacOSMachineClaim
}

// tree groups the fleet: namespaces in order, in each its pools, then the
// classes of machines of no pool, each by name; machines by name, each
// with its claim; then the claims no machine answers.
func (f *fleet) tree() []*group {
	type groupKey struct {
		namespace string
		isPool    bool
		name      string
	}
	groups := map[groupKey]*group{}
	get := func(ns string, isPool bool, name string) *group {
		k := groupKey{ns, isPool, name}
		if groups[k] == nil {
			groups[k] = &group{namespace: ns, isPool: isPool, name: name}
		}
		return groups[k]
	}
	for i := range f.pools {
		get(f.pools[i].Namespace, true, f.pools[i].Name).pool = &f.pools[i]
	}
	type claimKey struct{ namespace, name string }
	claims := map[claimKey]*v1alpha1.MacOSMachineClaim{}
	byUID := map[string]*v1alpha1.MacOSMachineClaim{}
	for i := range f.claims {
		c := &f.claims[i]
		claims[claimKey{c.Namespace, c.Name}] = c
		byUID[string(c.UID)] = c
	}
	shown := map[*v1alpha1.MacOSMachineClaim]bool{}
	for i := range f.machines {
		m := &f.machines[i]
		node := machineNode{machine: m}
		switch {
		case m.Status.ClaimRef != nil:
			if c := claims[claimKey{m.Namespace, m.Status.ClaimRef.Name}]; c != nil && string(c.UID) == m.Status.ClaimRef.UID {
				node.claim = c
			}
		case m.Labels[v1alpha1.ClaimUIDLabel] != "":
			// A class claim's machine, being made: the claim is not bound
			// yet, but this machine is the one it waits for.
			if c := byUID[m.Labels[v1alpha1.ClaimUIDLabel]]; c != nil && c.Namespace == m.Namespace {
				node.claim = c
			}
		}
		if node.claim != nil {
			shown[node.claim] = true
		}
		g := get(m.Namespace, m.Spec.PoolName != "", cmp.Or(m.Spec.PoolName, m.Spec.ClassName))
		g.machines = append(g.machines, node)
	}
	for i := range f.claims {
		c := &f.claims[i]
		if shown[c] {
			continue
		}
		g := get(c.Namespace, c.Spec.PoolName != "", cmp.Or(c.Spec.PoolName, c.Spec.ClassName))
		g.unclaimed = append(g.unclaimed, c)
	}
	out := make([]*group, 0, len(groups))
	for _, g := range groups {
		slices.SortFunc(g.machines, func(a, b machineNode) int { return strings.Compare(a.machine.Name, b.machine.Name) })
		slices.SortFunc(g.unclaimed, func(a, b *v1alpha1.MacOSMachineClaim) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *group) int {
		if c := strings.Compare(a.namespace, b.namespace); c != 0 {
			return c
		}
		if a.isPool != b.isPool {
			if a.isPool {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// printTree prints groups as kubectl get prints a table, the NAME column
// drawn as a tree. Kinds are written by their short names, so that a name
// can be pasted into kubectl get.
func printTree(w io.Writer, groups []*group, withNamespace bool, now time.Time) error {
	var table bytes.Buffer
	tw := printers.GetNewTabWriter(&table)
	header := "NAME\tPHASE\tIDENTITY\tNODE\tAGE\tREASON"
	if withNamespace {
		header = "NAMESPACE\t" + header
	}
	fmt.Fprintln(tw, header)
	row := func(ns string, cells ...string) {
		if withNamespace {
			cells = append([]string{ns}, cells...)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	for _, g := range groups {
		row(g.namespace, g.row(now)...)
		children := len(g.machines) + len(g.unclaimed)
		branch := func(i int) (string, string) {
			if i == children-1 {
				return "└─", "  "
			}
			return "├─", "│ "
		}
		for i, n := range g.machines {
			here, below := branch(i)
			m := n.machine
			identity := ""
			if m.Status.IdentityRef != nil {
				identity = m.Status.IdentityRef.Name
			}
			row(g.namespace, here+"mm/"+m.Name, machinePhase(m), orNone(identity), orNone(m.Status.NodeName),
				age(m.CreationTimestamp, now), machineReason(m))
			if n.claim != nil {
				row(g.namespace, claimRow(below+"└─", n.claim, now)...)
			}
		}
		for i, c := range g.unclaimed {
			here, _ := branch(len(g.machines) + i)
			row(g.namespace, claimRow(here, c, now)...)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Rows of a group, or of a Ready machine, end in empty cells, which
	// the tab writer pads with spaces nobody needs.
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		trimmed := strings.TrimRight(strings.TrimSuffix(line, "\n"), " ")
		if len(trimmed) < len(line) {
			trimmed += "\n"
		}
		if _, err := io.WriteString(w, trimmed); err != nil {
			return err
		}
	}
	return nil
}

func (g *group) row(now time.Time) []string {
	if !g.isPool {
		return []string{"mmclass/" + g.name, "", "", "", "", ""}
	}
	if g.pool == nil {
		return []string{"mmpool/" + g.name, "<not found>", "", "", "", "the pool does not exist; these are what is left of it"}
	}
	// A pool has no phase; its Ready condition's reason (Warm, Filling,
	// MaxMachinesReached) says as much in one word.
	phase, reason := "<unknown>", ""
	if c := meta.FindStatusCondition(g.pool.Status.Conditions, "Ready"); c != nil {
		phase = c.Reason
		if c.Status != metav1.ConditionTrue {
			reason = c.Message
		}
	}
	return []string{"mmpool/" + g.name, phase, "", "", age(g.pool.CreationTimestamp, now), reason}
}

func claimRow(prefix string, c *v1alpha1.MacOSMachineClaim, now time.Time) []string {
	reason := ""
	switch c.Status.Phase {
	case v1alpha1.ClaimLost:
		reason = claimLostReason(c)
	case v1alpha1.ClaimBound:
	default:
		reason = "waiting for a Ready machine"
		if c.Spec.ClassName != "" {
			reason = "waiting for a machine of class " + c.Spec.ClassName + " to be made and Ready"
		}
	}
	return []string{prefix + "mmclaim/" + c.Name, claimPhase(c), "", "", age(c.CreationTimestamp, now), reason}
}
