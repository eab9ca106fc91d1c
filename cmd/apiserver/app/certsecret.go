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
	"fmt"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/dockerios/dockerios/pkg/selfcert"
)

// validateCertSecret checks --cert-secret and the flags that go with it.
func (o *Options) validateCertSecret() []error {
	if o.CertSecret == "" {
		if len(o.APIServices) > 0 {
			return []error{fmt.Errorf("--apiservice: needs --cert-secret (the CA it injects is that Secret's)")}
		}
		return nil
	}
	var errs []error
	if _, err := selfcert.ParseNamespacedName(o.CertSecret); err != nil {
		errs = append(errs, fmt.Errorf("--cert-secret: %w", err))
	}
	if _, err := selfcert.ParseNamespacedName(o.Service); err != nil {
		errs = append(errs, fmt.Errorf("--service: %w", err))
	}
	if o.Local {
		errs = append(errs, fmt.Errorf("--cert-secret: not with --local, which makes its own certificates and has no kube-apiserver"))
	}
	if ck := o.RecommendedOptions.SecureServing.ServerCert.CertKey; ck.CertFile != "" || ck.KeyFile != "" {
		errs = append(errs, fmt.Errorf("--cert-secret and --tls-cert-file/--tls-private-key-file: choose one source of the serving certificate"))
	}
	return errs
}

// configSelfCert serves the key pair of --cert-secret. The Secret's pair
// is handed to secure serving as a dynamiccertificates provider, in memory,
// rather than written into --cert-dir for the file watcher to pick up:
// the provider tells the serving controller the moment the pair changes,
// there is never a certificate on disk without its key (or a disk at all:
// replicas on an external etcd run with no volume and a read-only root),
// and the Secret stays the one place the pair lives.
func (o *Options) configSelfCert(cfg *genericapiserver.RecommendedConfig) error {
	if cfg.ClientConfig == nil {
		return fmt.Errorf("--cert-secret: needs a client of kube-apiserver (--kubeconfig, or in-cluster)")
	}
	secret, _ := selfcert.ParseNamespacedName(o.CertSecret)
	service, _ := selfcert.ParseNamespacedName(o.Service)
	client, err := kubernetes.NewForConfig(cfg.ClientConfig)
	if err != nil {
		return err
	}
	apiservices, err := dynamic.NewForConfig(cfg.ClientConfig)
	if err != nil {
		return err
	}
	var targets []selfcert.Target
	for _, name := range o.APIServices {
		targets = append(targets, selfcert.APIService(apiservices, name))
	}
	o.selfCert, err = selfcert.New(client, selfcert.Config{
		Secret:     secret,
		CommonName: service.Name,
		Hosts:      append(selfcert.ServiceDNSNames(service), o.ServingCertHosts...),
		Targets:    targets,
		Log:        klog.Background().WithName("selfcert"),
		CAValidity: o.CertValidity.CA, ServingValidity: o.CertValidity.Serving, Overlap: o.CertValidity.Overlap,
	})
	if err != nil {
		return err
	}
	if cfg.SecureServing != nil {
		cfg.SecureServing.Cert = o.selfCert
	}
	// Beside the ledger's metrics on /metrics.
	legacyregistry.RawMustRegister(o.selfCert.Collector())
	return nil
}
