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

// Package app is the dockerios-controller program: its flags and what it
// runs.
package app

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/pkg/selfcert"
)

// Options are the controller's flags.
type Options struct {
	// WebhookBindAddress serves the virt-launcher pod webhook over TLS;
	// empty turns the webhook off (its MutatingWebhookConfiguration must
	// then not be installed).
	WebhookBindAddress string
	// WebhookCertDir holds tls.crt and tls.key, the layout of a
	// kubernetes.io/tls Secret mounted as a volume. The files are re-read
	// when they change, so a rotated Secret needs no restart.
	WebhookCertDir string
	// WebhookCertSecret (NAMESPACE/NAME), instead of WebhookCertDir, is a
	// kubernetes.io/tls Secret in which the controller keeps the webhook's
	// CA and serving certificate itself (pkg/selfcert), for installs with
	// no cert-manager. WebhookService names the Service the certificate
	// is for; WebhookConfiguration, if set, gets the CA in its caBundle.
	WebhookCertSecret    string
	WebhookService       string
	WebhookConfiguration string
	// HealthBindAddress serves /healthz and /readyz over plain HTTP for
	// the kubelet's probes.
	HealthBindAddress string
	// WebhookCertValidity is the WebhookCertSecret's validities and CA
	// overlap; zero means selfcert's defaults. Hidden flags: only tests
	// shorten them.
	WebhookCertValidity selfcert.Validity
	// LogLevel is slog's level name.
	LogLevel string
	// LogFormat is json (one object per line, like the apiserver's and
	// the embedded etcd's) or text (slog's key=value, for a terminal).
	LogFormat string

	// Kubeconfig reaches kube-apiserver; empty means in-cluster.
	Kubeconfig string
	// Reconcile turns the reconcilers on; off, the binary serves only the
	// webhook (for a webhook-only Deployment).
	Reconcile bool
	// LeaderElect makes replicas elect one reconciler through the Lease
	// LeaderElectionNamespace/LeaderElectionName; the webhook is served by
	// every replica.
	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionName      string
	// BootdiskImage, HookSidecarImage, ImagePullSecrets and OSKSecretName
	// go into every machine's objects (pkg/controller/machine.Settings).
	// ImagesPodTemplate (NAMESPACE/NAME), when set, replaces the first
	// three: they are read from that PodTemplate as each object is made
	// (images.go).
	BootdiskImage     string
	HookSidecarImage  string
	ImagePullSecrets  []string
	ImagesPodTemplate string
	OSKSecretName     string
	// TerminationGracePeriod is the ACPI shutdown grace of each VM.
	TerminationGracePeriod time.Duration
	MachineWorkers         int
	// AgentProbeWorkers call guest agents, off the machine workers.
	AgentProbeWorkers int
	AgentTimeout      time.Duration
	// StorageHoldBack is how long new machines wait after a clone into
	// their StorageClass failed.
	StorageHoldBack time.Duration
	// LedgerGuardInterval is how often running VMs are compared with the
	// identity ledger (package ledgerguard).
	LedgerGuardInterval time.Duration
	// RecoveryBackoff is the wait after a MacOSImage's recovery fetch
	// first fails, doubling after each further failure up to
	// RecoveryBackoffMax.
	RecoveryBackoff, RecoveryBackoffMax time.Duration

	// PrintVersion: print the version and exit, whatever else is asked.
	PrintVersion bool
}

// NewOptions returns the defaults a Deployment in artifacts/ relies on.
func NewOptions() *Options {
	return &Options{
		WebhookBindAddress: ":9443",
		WebhookCertDir:     "/var/run/dockerios/webhook-tls",
		WebhookService:     "dockerios-system/dockerios-controller",
		HealthBindAddress:  ":8081",
		LogLevel:           "info",
		LogFormat:          "json",

		Reconcile:               true,
		LeaderElect:             true,
		LeaderElectionNamespace: "dockerios-system",
		LeaderElectionName:      "dockerios-controller",
		BootdiskImage:           DefaultBootdiskImage(),
		HookSidecarImage:        DefaultHookSidecarImage(),
		OSKSecretName:           "dockerios-osk",
		TerminationGracePeriod:  3 * time.Minute,
		MachineWorkers:          16,
		AgentProbeWorkers:       machine.DefaultProbeWorkers,
		AgentTimeout:            5 * time.Second,
		StorageHoldBack:         5 * time.Minute,
		LedgerGuardInterval:     30 * time.Second,
		RecoveryBackoff:         time.Minute,
		RecoveryBackoffMax:      time.Hour,
	}
}

// Parse reads flags and checks them.
func (o *Options) Parse(args []string) error {
	fs := pflag.NewFlagSet("dockerios-controller", pflag.ContinueOnError)
	fs.StringVar(&o.WebhookBindAddress, "webhook-bind-address", o.WebhookBindAddress,
		"host:port serving the virt-launcher pod webhook over TLS; empty turns it off")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", o.WebhookCertDir,
		"directory with tls.crt and tls.key for the webhook (a mounted kubernetes.io/tls Secret); re-read when they change")
	fs.StringVar(&o.WebhookCertSecret, "webhook-cert-secret", o.WebhookCertSecret,
		"NAMESPACE/NAME of a kubernetes.io/tls Secret in which the controller keeps the webhook's CA and serving certificate itself (created if absent, renewed at two thirds of its one-year life, shared by all replicas); instead of --webhook-cert-dir")
	fs.StringVar(&o.WebhookService, "webhook-service", o.WebhookService,
		"NAMESPACE/NAME of the webhook's Service; with --webhook-cert-secret the certificate covers NAME.NAMESPACE.svc, the name kube-apiserver checks, and NAME.NAMESPACE.svc.cluster.local")
	fs.StringVar(&o.WebhookConfiguration, "webhook-configuration", o.WebhookConfiguration,
		"MutatingWebhookConfiguration whose webhooks' caBundle the controller keeps equal to --webhook-cert-secret's CA; empty injects nothing")
	fs.StringVar(&o.HealthBindAddress, "health-bind-address", o.HealthBindAddress,
		"host:port serving /healthz and /readyz over HTTP")
	o.WebhookCertValidity.AddHiddenFlags(fs, "webhook-cert-")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "json (one object per line) or text (key=value, for a terminal)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig reaching kube-apiserver; empty means in-cluster")
	fs.BoolVar(&o.Reconcile, "reconcile", o.Reconcile, "run the reconcilers (false: serve only the webhook)")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect one reconciling replica through a Lease")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "namespace of the leader election Lease")
	fs.StringVar(&o.LeaderElectionName, "leader-election-name", o.LeaderElectionName, "name of the leader election Lease")
	fs.StringVar(&o.BootdiskImage, "bootdisk-image", o.BootdiskImage, "bootdisk builder image for classes that name none (default: this release's); not with --images-pod-template")
	fs.StringVar(&o.HookSidecarImage, "hook-sidecar-image", o.HookSidecarImage, "DockerIOS KubeVirt hook sidecar image (default: this release's); not with --images-pod-template")
	fs.StringSliceVar(&o.ImagePullSecrets, "image-pull-secrets", o.ImagePullSecrets,
		"comma-separated Secrets each bootdisk Job's pod pulls its image with; each must exist in every machine's namespace (a pod uses pull secrets of its own namespace only); not with --images-pod-template")
	fs.StringVar(&o.ImagesPodTemplate, "images-pod-template", o.ImagesPodTemplate,
		"NAMESPACE/NAME of a PodTemplate whose containers \"bootdisk\" and \"hook-sidecar\" name the images, and whose imagePullSecrets the pull secrets, of every bootdisk Job and VirtualMachine made from now on, read as each is made (so kustomize images: retargets them and a re-applied PodTemplate needs no restart); instead of --bootdisk-image, --hook-sidecar-image and --image-pull-secrets")
	fs.BoolVar(&o.PrintVersion, "version", false, "print the version and exit")
	fs.StringVar(&o.OSKSecretName, "osk-secret-name", o.OSKSecretName, "Secret, in each machine's namespace, holding Apple's SMC key under \"osk\"")
	fs.DurationVar(&o.TerminationGracePeriod, "vm-termination-grace-period", o.TerminationGracePeriod, "how long a VM's ACPI shutdown may take")
	fs.IntVar(&o.MachineWorkers, "machine-workers", o.MachineWorkers, "machines reconciled in parallel")
	fs.IntVar(&o.AgentProbeWorkers, "agent-probe-workers", o.AgentProbeWorkers,
		"guest agents called in parallel, off the machine workers; at most half of them wait on agents that did not answer last time")
	fs.DurationVar(&o.AgentTimeout, "agent-timeout", o.AgentTimeout, "bound of one call to a guest agent")
	fs.DurationVar(&o.StorageHoldBack, "storage-hold-back", o.StorageHoldBack, "how long new machines of a class wait after a clone into its StorageClass failed")
	fs.DurationVar(&o.LedgerGuardInterval, "ledger-guard-interval", o.LedgerGuardInterval, "how often the VMs, VMIs and identity Secrets the controller made are compared with the identity ledger (and a restored pool's hold lifted)")
	fs.DurationVar(&o.RecoveryBackoff, "recovery-backoff", o.RecoveryBackoff, "wait after a MacOSImage's recovery image fetch failed, doubled after each further failure in a row")
	fs.DurationVar(&o.RecoveryBackoffMax, "recovery-backoff-max", o.RecoveryBackoffMax, "longest wait between attempts of a recovery image fetch")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.PrintVersion {
		return nil // whatever else is asked
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// The images have defaults: a PodTemplate replaces them, unless they
	// were asked for as well (which Validate refuses).
	if o.ImagesPodTemplate != "" {
		if !fs.Changed("bootdisk-image") {
			o.BootdiskImage = ""
		}
		if !fs.Changed("hook-sidecar-image") {
			o.HookSidecarImage = ""
		}
	}
	// --webhook-cert-dir has a default: naming a Secret replaces it,
	// unless the directory was asked for as well.
	if o.WebhookCertSecret != "" && !fs.Changed("webhook-cert-dir") {
		o.WebhookCertDir = ""
	}
	return o.Validate()
}

// Validate reports every flag problem at once.
func (o *Options) Validate() error {
	var errs []error
	if o.HealthBindAddress == "" {
		errs = append(errs, errors.New("--health-bind-address: required (the kubelet probes it)"))
	}
	errs = append(errs, o.validateWebhookCerts()...)
	if o.Reconcile {
		errs = append(errs, o.validateImages()...)
		if o.OSKSecretName == "" {
			errs = append(errs, errors.New("--osk-secret-name: required while --reconcile is on"))
		}
		if o.LeaderElect && (o.LeaderElectionNamespace == "" || o.LeaderElectionName == "") {
			errs = append(errs, errors.New("--leader-election-namespace and --leader-election-name: required with --leader-elect"))
		}
		if o.MachineWorkers < 1 {
			errs = append(errs, errors.New("--machine-workers: must be at least 1"))
		}
		if o.AgentProbeWorkers < 2 {
			errs = append(errs, errors.New("--agent-probe-workers: must be at least 2 (half of them may wait on unreachable agents)"))
		}
		if o.RecoveryBackoff <= 0 || o.RecoveryBackoffMax < o.RecoveryBackoff {
			errs = append(errs, errors.New("--recovery-backoff must be > 0 and --recovery-backoff-max at least as long"))
		}
		if o.TerminationGracePeriod < 0 || o.AgentTimeout <= 0 || o.StorageHoldBack <= 0 || o.LedgerGuardInterval <= 0 {
			errs = append(errs, errors.New("--vm-termination-grace-period must be ≥ 0, --agent-timeout and --storage-hold-back > 0"))
		}
	}
	if _, err := parseLevel(o.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %w", err))
	}
	if o.LogFormat != "json" && o.LogFormat != "text" {
		errs = append(errs, fmt.Errorf("--log-format: %q is neither json nor text", o.LogFormat))
	}
	return errors.Join(errs...)
}

// Logger is the controller's logger, writing to out in --log-format at
// --log-level (both validated).
func (o *Options) Logger(out io.Writer) *slog.Logger {
	level, _ := parseLevel(o.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if o.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(out, opts))
	}
	return slog.New(slog.NewJSONHandler(out, opts))
}

func (o *Options) certFile() string { return filepath.Join(o.WebhookCertDir, "tls.crt") }
func (o *Options) keyFile() string  { return filepath.Join(o.WebhookCertDir, "tls.key") }
