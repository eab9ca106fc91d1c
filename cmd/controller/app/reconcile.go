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

package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/pkg/controller/manager"
	"github.com/dockerios/dockerios/pkg/version"
)

// reconcile runs the reconcilers, behind leader election when asked. It
// returns when ctx ends; losing the lease ends the process (exit 1), so the
// kubelet restarts it into a fresh election with fresh caches.
func reconcile(ctx context.Context, o *Options, log *slog.Logger, reg prometheus.Registerer) error {
	cfg, err := restConfig(o.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	cfg.UserAgent = "dockerios-controller"
	podTemplate, images := o.imageSettings()
	mcfg := manager.Config{
		RESTConfig: cfg, Log: log, Registry: reg, MachineWorkers: o.MachineWorkers, AgentProbeWorkers: o.AgentProbeWorkers, AgentTimeout: o.AgentTimeout, StorageHoldBack: o.StorageHoldBack,
		LedgerGuardInterval: o.LedgerGuardInterval, RecoveryBackoff: o.RecoveryBackoff, RecoveryBackoffMax: o.RecoveryBackoffMax,
		Settings: machine.Settings{BootdiskImage: images.Bootdisk, HookSidecarImage: images.HookSidecar, ImagePullSecrets: images.PullSecrets,
			OSKSecretName: o.OSKSecretName, TerminationGracePeriodSeconds: int64(o.TerminationGracePeriod / time.Second)},
		ImagesPodTemplate: podTemplate,
	}
	if !o.LeaderElect {
		// The only replica: it always leads.
		if reg != nil {
			reg.MustRegister(leaderGauge(func() bool { return true }))
		}
		return manager.Run(ctx, mcfg)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	id := host + "_" + uuid.NewString()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.LeaderElectionNamespace, o.LeaderElectionName,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	renewed := newRenewals(lock)
	errc := make(chan error, 1)
	var le *leaderelection.LeaderElector
	le, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: renewed, ReleaseOnCancel: true,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: 2 * time.Second,
		Name: o.LeaderElectionName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info("leading; starting reconcilers", "identity", id, "version", version.String())
				mcfg.Leading = func() bool { return leadsNow(le.IsLeader, renewed) }
				errc <- manager.Run(ctx, mcfg)
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					log.Error("lost the leader lease; exiting so a fresh replica takes over", "identity", id)
					os.Exit(1)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	if reg != nil {
		reg.MustRegister(leaderGauge(func() bool { return leadsNow(le.IsLeader, renewed) }))
	}
	le.Run(ctx)
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
		}
		return cfg, nil
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}
