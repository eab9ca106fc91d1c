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

// Command dockerios-sidecar-hook is the DockerIOS KubeVirt hook sidecar. It
// runs next to virt-launcher in a macOS VMI's pod and, just before libvirt
// defines the domain, adds Apple's SMC device and key, moves the system disk
// to the bus the machine class asks for, and optionally overrides QEMU's
// -cpu. See sidecar-hook/README.md.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dockerios/dockerios/pkg/version"
	"github.com/dockerios/dockerios/sidecar-hook/annotations"
	"github.com/dockerios/dockerios/sidecar-hook/hook"
	"github.com/dockerios/dockerios/sidecar-hook/server"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if versionAsked(args) {
		fmt.Println(version.String())
		return 0
	}
	fs := flag.NewFlagSet("dockerios-sidecar-hook", flag.ContinueOnError)
	socketDir := fs.String("socket-dir", annotations.HookSocketsDir,
		"directory to create the hook socket ("+annotations.SocketName+") in; KubeVirt mounts this sidecar's share of the pod's hook sockets there")
	oskFile := fs.String("osk-file", annotations.DefaultOSKFile,
		"file holding Apple's 64-character SMC key (OSK), read on every call that needs it")
	// KubeVirt's own sidecar images take --version VERSION (the hook
	// protocol's); accept and ignore it so a hookSidecars entry copied from
	// KubeVirt's docs does not crash us. A bare --version is ours
	// (versionAsked).
	_ = fs.String("version", "", "alone: print the version and exit; with a value (KubeVirt's hook protocol version): ignored, every supported protocol version is served")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	if _, err := os.Stat(*oskFile); err != nil {
		// Not fatal: a VMI that does not ask for the SMC needs no key, and
		// one that does gets a precise error at OnDefineDomain.
		log.Warn("OSK file not readable yet; VMIs asking for the Apple SMC will fail to start until it is", "osk-file", *oskFile, "error", err.Error())
	}

	path := filepath.Join(*socketDir, annotations.SocketName)
	l, err := server.Listen(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dockerios-sidecar-hook: listening on %s: %v\n", path, err)
		return 1
	}
	defer os.Remove(path)

	srv := server.New(hook.Hook{OSKFile: *oskFile}, log)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-sigs
		log.Info("signal received; exiting", "signal", sig.String())
		srv.Stop()
	}()

	log.Info("serving KubeVirt hook sidecar protocol", "socket", path, "versions", server.Versions, "osk-file", *oskFile)
	if err := srv.Serve(l); err != nil {
		log.Error("serving failed", "error", err.Error())
		return 1
	}
	log.Info("stopped")
	return 0
}

// versionAsked says whether args ask for this binary's version: a bare
// --version, last or followed by another flag. --version VALUE and
// --version=VALUE are KubeVirt's hook protocol version, which its example
// sidecars take and a hookSidecars entry may pass on; they are not.
func versionAsked(args []string) bool {
	for i, a := range args {
		if a == "--" {
			return false
		}
		if a == "--version" || a == "-version" {
			if i+1 == len(args) || strings.HasPrefix(args[i+1], "-") {
				return true
			}
		}
	}
	return false
}
