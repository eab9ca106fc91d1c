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

// Command gitlab-runner-controller runs the GitLabRunner controller: GitLab
// runners on macOS machines claimed from DockerIOS. deploy/ runs it in a
// cluster (a Deployment with two replicas behind a Lease); the local stack
// runs it as a process.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dockeriov1alpha1 "github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/version"

	"github.com/dockerios/dockerios/examples/gitlab-runner/api/v1alpha1"
	"github.com/dockerios/dockerios/examples/gitlab-runner/internal/controller"
)

func main() {
	var (
		metricsAddr, probeAddr string
		leaderElect            bool
		leaderElectionNS       string
		namespaces             string
		parallel               int
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "where /metrics is served (0: not served)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "where /healthz and /readyz are served (0: not served)")
	flag.BoolVar(&leaderElect, "leader-elect", false, "run behind a Lease, so that one of several replicas acts")
	flag.StringVar(&leaderElectionNS, "leader-election-namespace", "", "the Lease's namespace (default: the pod's)")
	flag.StringVar(&namespaces, "namespaces", "", "comma-separated namespaces to watch (default: all); with it, namespaced RBAC is enough")
	flag.IntVar(&parallel, "parallel-provisioning", 16, "machines provisioned at once")
	showVersion := flag.Bool("version", false, "print the version (DockerIOS's, which this example is built from) and exit")
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.String())
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, dockeriov1alpha1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			log.Error(err, "building the scheme")
			os.Exit(1)
		}
	}
	// Only the claims GitLabRunners made are cached; machines are all
	// cached, as a claim's machine may be any of its namespace's.
	ours, err := labels.NewRequirement(controller.RunnerLabel, selection.Exists, nil)
	if err != nil {
		log.Error(err, "building the claims' selector")
		os.Exit(1)
	}
	cacheOpts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&dockeriov1alpha1.MacOSMachineClaim{}: {Label: labels.NewSelector().Add(*ours)},
	}}
	if namespaces != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range strings.Split(namespaces, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				cacheOpts.DefaultNamespaces[ns] = cache.Config{}
			}
		}
	}

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "gitlab-runner-controller.gitlab.examples.dockerios.io",
		LeaderElectionNamespace: leaderElectionNS,
		// The new leader's caches are fresh: it never acts on what the
		// old one may still be doing for long.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	r := &controller.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("gitlab-runner-controller"),
		Parallel:  parallel,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		log.Error(err, "setting up the controller")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "adding the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "adding the readiness check")
		os.Exit(1)
	}
	log.Info("starting")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}
