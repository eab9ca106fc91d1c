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
	"errors"
	"fmt"
	"log/slog"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"

	"github.com/dockerios/dockerios/pkg/selfcert"
)

// webhookCerts returns the webhook's serving key pair: the files of
// --webhook-cert-dir, re-read when they change (a Secret mounted from
// cert-manager), or the Secret of --webhook-cert-secret, kept by the
// controller itself. The latter is being fetched while the webhook already
// listens: until it has a key pair, handshakes fail and /readyz says not
// ready, so no Service routes to this replica, while /healthz keeps the
// kubelet from restarting it over a kube-apiserver that is slow to answer.
func webhookCerts(ctx context.Context, o *Options, log *slog.Logger, reg prometheus.Registerer) (dynamiccertificates.CertKeyContentProvider, error) {
	if o.WebhookCertSecret == "" {
		certs, err := dynamiccertificates.NewDynamicServingContentFromFiles("webhook-serving", o.certFile(), o.keyFile())
		if err != nil {
			return nil, fmt.Errorf("webhook serving certificate: %w", err)
		}
		go certs.Run(ctx, 1)
		return certs, nil
	}
	cfg, err := restConfig(o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "dockerios-controller"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	secret, _ := selfcert.ParseNamespacedName(o.WebhookCertSecret)
	service, _ := selfcert.ParseNamespacedName(o.WebhookService)
	// Every replica injects the CA, not only the leader: every replica
	// serves the webhook, including those of a webhook-only Deployment
	// (--reconcile=false) that elect no one, and one that has just written
	// a new Secret must not wait for a leader to publish its CA. Injection
	// writes only when the bundle differs and all replicas read the same
	// Secret, so the cost is a read per replica per resync.
	var targets []selfcert.Target
	if o.WebhookConfiguration != "" {
		targets = append(targets, selfcert.MutatingWebhookConfiguration(client, o.WebhookConfiguration))
	}
	certs, err := selfcert.New(client, selfcert.Config{
		Secret:     secret,
		CommonName: service.Name,
		Hosts:      selfcert.ServiceDNSNames(service),
		Targets:    targets,
		Log:        logr.FromSlogHandler(log.With("component", "webhook-certificate").Handler()),
		CAValidity: o.WebhookCertValidity.CA, ServingValidity: o.WebhookCertValidity.Serving, Overlap: o.WebhookCertValidity.Overlap,
	})
	if err != nil {
		return nil, err
	}
	reg.MustRegister(certs.Collector())
	go func() {
		if err := certs.Start(ctx); err != nil {
			log.Error("no webhook serving certificate", "err", err)
		}
	}()
	return certs, nil
}

// validateWebhookCerts checks that the webhook has exactly one source of
// its serving certificate.
func (o *Options) validateWebhookCerts() []error {
	if o.WebhookBindAddress == "" {
		if o.WebhookCertSecret != "" {
			return []error{errors.New("--webhook-cert-secret: needs --webhook-bind-address (the webhook is off)")}
		}
		return nil
	}
	switch {
	case o.WebhookCertDir != "" && o.WebhookCertSecret != "":
		return []error{errors.New("--webhook-cert-dir and --webhook-cert-secret are mutually exclusive: the certificate comes from a mounted Secret or from one the controller keeps, not both")}
	case o.WebhookCertSecret == "":
		if o.WebhookCertDir == "" {
			return []error{errors.New("--webhook-cert-dir: required while --webhook-bind-address is set, unless --webhook-cert-secret names a Secret the controller keeps")}
		}
		if o.WebhookConfiguration != "" {
			return []error{errors.New("--webhook-configuration: needs --webhook-cert-secret (the CA it injects is that Secret's)")}
		}
		return nil
	}
	var errs []error
	if _, err := selfcert.ParseNamespacedName(o.WebhookCertSecret); err != nil {
		errs = append(errs, fmt.Errorf("--webhook-cert-secret: %w", err))
	}
	if _, err := selfcert.ParseNamespacedName(o.WebhookService); err != nil {
		errs = append(errs, fmt.Errorf("--webhook-service: %w", err))
	}
	return errs
}
