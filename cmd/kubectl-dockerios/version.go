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
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/dockerios/dockerios/pkg/version"
)

// newVersionCommand prints the plugin's own version. It asks no server:
// the DockerIOS apiserver's /version is not reachable through
// kube-apiserver's aggregation, which proxies only the API group.
func newVersionCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Long: `Version prints the plugin's DockerIOS version (also "kubectl dockerios
--version"); with -o json or yaml, also the commit, tree state, build date,
Go version and platform it was built from.`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			w := cmd.OutOrStdout()
			switch format {
			case "":
				_, err := fmt.Fprintln(w, info.String())
				return err
			case "json":
				b, err := json.MarshalIndent(info, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(w, "%s\n", b)
				return err
			case "yaml":
				b, err := yaml.Marshal(info)
				if err != nil {
					return err
				}
				_, err = w.Write(b)
				return err
			default:
				return fmt.Errorf("--output must be json or yaml, not %q", format)
			}
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "", "Output format. One of: (json, yaml). Without it, the version alone.")
	_ = cmd.RegisterFlagCompletionFunc("output", completeFixed("json", "yaml"))
	return cmd
}
