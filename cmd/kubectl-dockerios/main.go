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

// Command kubectl-dockerios is DockerIOS's kubectl plugin:
//
//	kubectl dockerios identities import --pool POOL FILE
//
// imports a serial-set file made by osx-serial-generator (or the bootdisk
// image's generate command) into a MacOSIdentityPool.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	clientset "github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/identityimport"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	root := &cobra.Command{
		Use:          "kubectl dockerios",
		Short:        "Work with DockerIOS macOS machines and their identities",
		SilenceUsage: true,
	}
	root.PersistentFlags().StringVar(&loading.ExplicitPath, "kubeconfig", "", "Path to the kubeconfig file to use.")
	root.PersistentFlags().StringVar(&overrides.CurrentContext, "context", "", "The kubeconfig context to use.")

	identities := &cobra.Command{Use: "identities", Short: "Manage Apple identities (MacOSIdentity)"}
	var pool string
	importCmd := &cobra.Command{
		Use:   "import --pool POOL FILE",
		Short: "Import a serial-set file (osx-serial-generator CSV or TSV) into an identity pool",
		Long: `Import creates one MacOSIdentity per row of FILE in the pool, named
<pool>-<16 hex digits of a sha256 of the row's five values>: anyone who may
read a machine sees the name of its identity, so the name says no value.
Each row is reported: created, already present (the same identity exists),
or rejected with the reason (a malformed value, or a value another identity
already holds). Re-running on the same file changes nothing. The exit status
is 1 when any row was rejected.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides).ClientConfig()
			if err != nil {
				return err
			}
			client, err := clientset.NewForConfig(cfg)
			if err != nil {
				return err
			}
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			im := &identityimport.Importer{Client: client, Pool: pool}
			results, summary, err := im.Import(context.Background(), f)
			if perr := identityimport.Print(cmd.OutOrStdout(), results, summary); perr != nil && err == nil {
				err = perr
			}
			if err != nil {
				return err
			}
			if summary.Rejected > 0 {
				return fmt.Errorf("%d of %d rows rejected", summary.Rejected, len(results))
			}
			return nil
		},
	}
	importCmd.Flags().StringVar(&pool, "pool", "", "The MacOSIdentityPool to import into (required).")
	_ = importCmd.MarkFlagRequired("pool")
	identities.AddCommand(importCmd)
	root.AddCommand(identities)
	return root
}
