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

// Command kubectl-dockerios is DockerIOS's kubectl plugin, for the people
// who want a Mac and for the people who keep the identities Macs boot with:
//
//	kubectl dockerios claim --pool POOL          ask for a Mac, wait until it is Ready
//	kubectl dockerios release CLAIM...           give Macs back
//	kubectl dockerios machines                   pools, machines and claims as a tree
//	kubectl dockerios identities import|generate fill an identity pool
//	kubectl dockerios image install|promote      make a golden image by hand
//	kubectl dockerios image list|get             the images
//	kubectl dockerios completion SHELL           shell completion
//	kubectl dockerios version                    the plugin's version (also --version)
//
// It takes kubectl's connection flags (k8s.io/cli-runtime's ConfigFlags),
// so --kubeconfig, --context, -n and the rest mean what they mean to
// kubectl.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	clientset "github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/version"
)

// Exit statuses. Anything that is not a success or one of the statuses
// below is 1, as for kubectl.
const (
	exitOK = 0
	// exitError is every error: a refused request, a Lost claim, a failed
	// machine, a bad flag.
	exitError = 1
	// exitTimeout is claim --wait giving up at --timeout. The claim is
	// left in place, so a script can tell "not yet" from "broken".
	exitTimeout = 2
	// exitInterrupted is claim --wait stopped by Ctrl-C (SIGINT) or
	// SIGTERM; 128+SIGINT, as a shell reports a command SIGINT killed.
	exitInterrupted = 130
)

// exitStatusHelp is the exit statuses as the help says them.
const exitStatusHelp = `Exit status: 0 on success; 1 on an error; 2 when claim --wait gave up at
--timeout (the claim is left in place); 130 when claim --wait was
interrupted (the claim is left in place).`

func main() {
	// kubectl prints the server's warnings (a deprecated field, a class
	// with little memory) as "Warning: ..." once each; so does the plugin,
	// rather than as klog lines.
	rest.SetDefaultWarningHandler(rest.NewWarningWriter(os.Stderr, rest.WarningWriterOptions{Deduplicate: true}))
	// Ctrl-C while claim waits ends the wait with a word on the claim left
	// behind, rather than killing the plugin mid-sentence.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cmd := newCommand(newOptions())
	err := cmd.ExecuteContext(ctx)
	stop()
	os.Exit(exitStatus(cmd.ErrOrStderr(), err))
}

// exitStatus prints err as kubectl prints errors and returns the status
// to exit with.
func exitStatus(w io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	// Errors of several objects (release a b c) are one line each.
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			fmt.Fprintf(w, "error: %v\n", e)
		}
	} else {
		fmt.Fprintf(w, "error: %v\n", err)
	}
	var coded *codedError
	if errors.As(err, &coded) {
		return coded.code
	}
	return exitError
}

// codedError is an error that ends the plugin with a status other than 1.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// options are what every command shares: kubectl's connection flags, and
// how to make clients from them. Tests replace the clients with fakes.
type options struct {
	config    *genericclioptions.ConfigFlags
	newClient func() (clientset.Interface, error)
	// newMetadataClient reads objects of other groups by their metadata
	// alone (namespaces, for -n completion): the typed Kubernetes clients
	// would double the plugin's size for one list.
	newMetadataClient func() (metadata.Interface, error)
}

func newOptions() *options {
	o := &options{config: genericclioptions.NewConfigFlags(true)}
	o.newClient = func() (clientset.Interface, error) {
		cfg, err := o.restConfig()
		if err != nil {
			return nil, err
		}
		return clientset.NewForConfig(cfg)
	}
	o.newMetadataClient = func() (metadata.Interface, error) {
		cfg, err := o.restConfig()
		if err != nil {
			return nil, err
		}
		return metadata.NewForConfig(cfg)
	}
	return o
}

func (o *options) restConfig() (*rest.Config, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	// client-go's default (5 per second) would make identities generate
	// of a few hundred wait on the client; kubectl allows 50 too.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// namespace is -n, else the namespace of the kubeconfig's context, else
// "default", as for kubectl.
func (o *options) namespace() (string, error) {
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

func newCommand(o *options) *cobra.Command {
	root := &cobra.Command{
		// kubectl runs kubectl-dockerios for "kubectl dockerios": usage
		// lines must show the words a user types, which cobra derives
		// from the display name and not from Use.
		Use:         "kubectl-dockerios",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl dockerios"},
		Short:       "Ask DockerIOS for Macs, give them back, and fill identity pools",
		Long: `kubectl dockerios asks DockerIOS for macOS machines, shows them, gives them
back, and fills the identity pools they boot with.

` + exitStatusHelp,
		// main prints errors, as kubectl does ("error: ..."); a usage
		// dump under a refused request would bury the reason.
		SilenceUsage:  true,
		SilenceErrors: true,
		// The completion command is ours: it also says how to make
		// "kubectl dockerios <TAB>" complete, which cobra's cannot.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		// --version, as "version" says it.
		Version: version.String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	o.config.AddFlags(root.PersistentFlags())
	registerConnectionCompletion(root, o)

	identities := &cobra.Command{Use: "identities", Short: "Fill identity pools with Apple identities (MacOSIdentity)"}
	identities.AddCommand(newImportCommand(o), newGenerateCommand(o))
	root.AddCommand(newClaimCommand(o), newReleaseCommand(o), newMachinesCommand(o), identities, newImageCommand(o), newCompletionCommand(root), newVersionCommand())
	return root
}
