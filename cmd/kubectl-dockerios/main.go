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
	"io"
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
		// kubectl runs kubectl-dockerios for "kubectl dockerios": usage
		// lines must show the words a user types, which cobra derives
		// from the display name and not from Use.
		Use:          "kubectl-dockerios",
		Annotations:  map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl dockerios"},
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
is 1 when any row was rejected.

FILE is a serial set as osx-serial-generator's
generate-unique-machine-values.sh writes it: one identity a line, no header,
CSV or TSV (TSV when the first line has a tab). Eight columns, in this
order:

  DEVICE_MODEL   SMBIOS model, the pool's (iMacPro1,1)
  SERIAL         system serial number, 12 characters (C02CK029HX87)
  BOARD_SERIAL   main logic board serial (MLB), 17 characters
  UUID           system UUID (4B408A88-4062-4532-9AA1-3D8A3549327F)
  MAC_ADDRESS    unicast, from one of Apple's OUIs (34:31:8F:D3:88:E4)
  WIDTH, HEIGHT  display size in pixels
  KERNEL_ARGS    extra boot-args; may be empty, or the column left out

  "iMacPro1,1","C02CK029HX87","C02015700QXJG36CB","4B408A88-4062-4532-9AA1-3D8A3549327F","34:31:8F:D3:88:E4","1920","1080",""

The ROM is not in the file: it is the MAC address's six bytes. WIDTH,
HEIGHT and KERNEL_ARGS are checked but not imported (a machine's display
comes from its class). Unquoted fields, a first line naming the columns,
blank lines, a UTF-8 byte order mark and CRLF line ends are accepted, as
files edited by hand or by a spreadsheet have them.`,
		Example: `  # Make a serial set with osx-serial-generator, then import it
  ./generate-unique-machine-values.sh --count 50 --model iMacPro1,1 --csv serials.csv
  kubectl dockerios identities import --pool imacpro serials.csv`,
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
			return importFile(cmd.Context(), client, pool, args[0], cmd.OutOrStdout())
		},
	}
	importCmd.Flags().StringVar(&pool, "pool", "", "The MacOSIdentityPool to import into (required).")
	_ = importCmd.MarkFlagRequired("pool")
	identities.AddCommand(importCmd)
	root.AddCommand(identities)
	return root
}

// importFile imports the serial set at path into pool and prints what
// became of each row.
func importFile(ctx context.Context, client clientset.Interface, pool, path string, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	im := &identityimport.Importer{Client: client, Pool: pool}
	results, summary, err := im.Import(ctx, f)
	// An import that stopped before any row (no such pool, an unreadable
	// file) has nothing to report but the error; an empty table above it
	// would read as a file without rows.
	if err != nil && len(results) == 0 {
		return err
	}
	if perr := identityimport.Print(out, results, summary); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	if summary.Rejected > 0 {
		return fmt.Errorf("%d of %d rows rejected", summary.Rejected, len(results))
	}
	return nil
}
