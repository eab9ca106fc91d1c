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

// Command dockerios-controller turns admitted dockerios.io objects into the
// Kubernetes and KubeVirt objects that make a Mac exist, and serves the
// virt-launcher pod webhook that gives the hook sidecar its OSK Secret.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dockerios/dockerios/cmd/controller/app"
	"github.com/dockerios/dockerios/pkg/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := app.NewOptions()
	if err := opts.Parse(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if opts.PrintVersion {
		fmt.Println(version.String())
		return
	}
	if err := app.Run(ctx, opts, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "dockerios-controller:", err)
		os.Exit(1)
	}
}
