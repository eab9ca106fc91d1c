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
	"path/filepath"

	"github.com/spf13/pflag"
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
	// HealthBindAddress serves /healthz and /readyz over plain HTTP for
	// the kubelet's probes.
	HealthBindAddress string
	// LogLevel is slog's level name.
	LogLevel string
}

// NewOptions returns the defaults a Deployment in artifacts/ relies on.
func NewOptions() *Options {
	return &Options{
		WebhookBindAddress: ":9443",
		WebhookCertDir:     "/var/run/dockerios/webhook-tls",
		HealthBindAddress:  ":8081",
		LogLevel:           "info",
	}
}

// Parse reads flags and checks them.
func (o *Options) Parse(args []string) error {
	fs := pflag.NewFlagSet("dockerios-controller", pflag.ContinueOnError)
	fs.StringVar(&o.WebhookBindAddress, "webhook-bind-address", o.WebhookBindAddress,
		"host:port serving the virt-launcher pod webhook over TLS; empty turns it off")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", o.WebhookCertDir,
		"directory with tls.crt and tls.key for the webhook (a mounted kubernetes.io/tls Secret); re-read when they change")
	fs.StringVar(&o.HealthBindAddress, "health-bind-address", o.HealthBindAddress,
		"host:port serving /healthz and /readyz over HTTP")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o.Validate()
}

// Validate reports every flag problem at once.
func (o *Options) Validate() error {
	var errs []error
	if o.HealthBindAddress == "" {
		errs = append(errs, errors.New("--health-bind-address: required (the kubelet probes it)"))
	}
	if o.WebhookBindAddress != "" && o.WebhookCertDir == "" {
		errs = append(errs, errors.New("--webhook-cert-dir: required while --webhook-bind-address is set"))
	}
	if _, err := parseLevel(o.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %w", err))
	}
	return errors.Join(errs...)
}

func (o *Options) certFile() string { return filepath.Join(o.WebhookCertDir, "tls.crt") }
func (o *Options) keyFile() string  { return filepath.Join(o.WebhookCertDir, "tls.key") }
