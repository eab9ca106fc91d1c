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
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	clientset "github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
)

// kubectlCompletionScript is what kubectl (1.26 and later) runs, found on
// PATH as kubectl_complete-dockerios, to complete "kubectl dockerios ...":
// it hands over the words after "dockerios", the word being completed
// last, and reads back cobra's completion protocol.
const kubectlCompletionScript = `#!/usr/bin/env sh
# kubectl runs this, as kubectl_complete-dockerios on PATH, to complete
# "kubectl dockerios ..." (kubectl 1.26 or later).
exec kubectl-dockerios __complete "$@"
`

func newCompletionCommand(root *cobra.Command) *cobra.Command {
	shells := map[string]func(io.Writer) error{
		"bash":       func(w io.Writer) error { return root.GenBashCompletionV2(w, true) },
		"zsh":        root.GenZshCompletion,
		"fish":       func(w io.Writer) error { return root.GenFishCompletion(w, true) },
		"powershell": root.GenPowerShellCompletionWithDesc,
		"kubectl": func(w io.Writer) error {
			_, err := io.WriteString(w, kubectlCompletionScript)
			return err
		},
	}
	names := []string{"bash", "zsh", "fish", "powershell", "kubectl"}
	return &cobra.Command{
		Use:   "completion (bash|zsh|fish|powershell|kubectl)",
		Short: "Print a shell completion script",
		Long: `Completion prints a script that makes your shell complete the plugin's
commands and flags, and the names of pools, classes, claims and identity
pools, read from the API as you type.

"kubectl dockerios <TAB>" is completed by kubectl (1.26 or later, with its
own completion set up: kubectl completion --help), which asks
kubectl_complete-dockerios on PATH. Install that next to the plugin:

  dir=$(dirname "$(command -v kubectl-dockerios)")
  kubectl dockerios completion kubectl > "$dir/kubectl_complete-dockerios"
  chmod +x "$dir/kubectl_complete-dockerios"

"kubectl-dockerios <TAB>", the plugin run by its own name, is completed by
the shell's script:

  source <(kubectl dockerios completion bash)                              # bash, in ~/.bashrc
  kubectl dockerios completion zsh > "${fpath[1]}/_kubectl-dockerios"     # zsh
  kubectl dockerios completion fish | source                               # fish
  kubectl dockerios completion powershell | Out-String | Invoke-Expression # PowerShell`,
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: names,
		RunE: func(cmd *cobra.Command, args []string) error {
			return shells[args[0]](cmd.OutOrStdout())
		},
	}
}

// completionTimeout bounds the API call behind one TAB: a shell that hangs
// is worse than one that completes nothing.
const completionTimeout = 5 * time.Second

type completionFunc = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)

// completeNames completes with the names list returns that start with
// what is typed, less those in args (the positional arguments already on
// the command line: a flag's completion passes nil, since a claim may be
// named after its pool). It never fails out loud: a TAB that cannot reach
// the API completes nothing.
func completeNames(list func(ctx context.Context) ([]string, error)) completionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		ctx, cancel := context.WithTimeout(ctx, completionTimeout)
		defer cancel()
		names, err := list(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) && !slices.Contains(args, n) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeFixed completes a flag with the words given that start with
// what is typed.
func completeFixed(words ...string) completionFunc {
	return flagCompletion(func(context.Context) ([]string, error) { return words, nil })
}

// flagCompletion completes a flag's value with the names list returns:
// the positional arguments have nothing to do with it.
func flagCompletion(list func(ctx context.Context) ([]string, error)) completionFunc {
	complete := completeNames(list)
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return complete(cmd, nil, toComplete)
	}
}

// names lists the names of a list's items.
func names[T any](items []T, name func(*T) string) []string {
	out := make([]string, 0, len(items))
	for i := range items {
		out = append(out, name(&items[i]))
	}
	return out
}

func (o *options) completeMachinePools(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return flagCompletion(func(ctx context.Context) ([]string, error) {
		ns, client, err := o.namespacedClient()
		if err != nil {
			return nil, err
		}
		l, err := client.DockeriosV1alpha1().MacOSMachinePools(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return names(l.Items, func(p *v1alpha1.MacOSMachinePool) string { return p.Name }), nil
	})(cmd, args, toComplete)
}

func (o *options) completeMachineClasses(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return flagCompletion(func(ctx context.Context) ([]string, error) {
		client, err := o.newClient()
		if err != nil {
			return nil, err
		}
		l, err := client.DockeriosV1alpha1().MacOSMachineClasses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return names(l.Items, func(c *v1alpha1.MacOSMachineClass) string { return c.Name }), nil
	})(cmd, args, toComplete)
}

func (o *options) completeClaims(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return completeNames(func(ctx context.Context) ([]string, error) {
		ns, client, err := o.namespacedClient()
		if err != nil {
			return nil, err
		}
		l, err := client.DockeriosV1alpha1().MacOSMachineClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return names(l.Items, func(c *v1alpha1.MacOSMachineClaim) string { return c.Name }), nil
	})(cmd, args, toComplete)
}

func (o *options) completeIdentityPools(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return flagCompletion(func(ctx context.Context) ([]string, error) {
		client, err := o.newClient()
		if err != nil {
			return nil, err
		}
		l, err := client.DockeriosV1alpha1().MacOSIdentityPools().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return names(l.Items, func(p *v1alpha1.MacOSIdentityPool) string { return p.Name }), nil
	})(cmd, args, toComplete)
}

func (o *options) namespacedClient() (string, clientset.Interface, error) {
	ns, err := o.namespace()
	if err != nil {
		return "", nil, err
	}
	client, err := o.newClient()
	return ns, client, err
}

// registerConnectionCompletion completes kubectl's -n and --context as
// kubectl does: namespaces from the cluster, contexts from the kubeconfig.
func registerConnectionCompletion(root *cobra.Command, o *options) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return flagCompletion(func(ctx context.Context) ([]string, error) {
			client, err := o.newMetadataClient()
			if err != nil {
				return nil, err
			}
			l, err := client.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return names(l.Items, func(n *metav1.PartialObjectMetadata) string { return n.Name }), nil
		})(cmd, args, toComplete)
	})
	_ = root.RegisterFlagCompletionFunc("context", func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return flagCompletion(func(context.Context) ([]string, error) {
			cfg, err := o.config.ToRawKubeConfigLoader().RawConfig()
			if err != nil {
				return nil, err
			}
			out := make([]string, 0, len(cfg.Contexts))
			for name := range cfg.Contexts {
				out = append(out, name)
			}
			slices.Sort(out)
			return out, nil
		})(cmd, args, toComplete)
	})
}
