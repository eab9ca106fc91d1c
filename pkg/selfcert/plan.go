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

package selfcert

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dockerios/dockerios/pkg/localpki"
)

// The keys of the Secret. tls.crt and tls.key are what a kubernetes.io/tls
// Secret must hold (and what --webhook-cert-dir reads, so the Secret can
// also be mounted); ca.crt is where cert-manager puts the CA too. ca.key
// is ours alone.
const (
	CACertKey = "ca.crt"
	CAKeyKey  = "ca.key"
)

// Validities. A serving certificate is re-issued once less than a third
// of ServingValidity is left: at two thirds of its life, about four months
// before a one-year certificate expires. That is cert-manager's default
// (renewBefore is a third of the duration); it leaves months, not days,
// for a renewal that keeps failing (RBAC taken away, kube-apiserver
// unreachable) to be noticed and fixed before anything stops working, at
// the cost of a re-issue a year per install. Measuring the window against
// the configured validity, not each certificate's own span, keeps it sane
// when tests shorten the validity to seconds (certificates are backdated
// an hour for clock skew).
const (
	DefaultCAValidity      = 10 * 365 * 24 * time.Hour
	DefaultServingValidity = 365 * 24 * time.Hour
)

// renewBefore is how long before its end a certificate is replaced.
func renewBefore(servingValidity time.Duration) time.Duration { return servingValidity / 3 }

// action is what the Secret needs.
type action int

const (
	// keep: the Secret is fine as it is.
	keep action = iota
	// issueServing: keep the CA, issue a new serving certificate.
	issueServing
	// newCA: make a new CA and a serving certificate from it.
	newCA
)

func (a action) String() string {
	return [...]string{"keep", "issue a serving certificate", "make a new CA and serving certificate"}[a]
}

// verdict is what plan decided, and why.
type verdict struct {
	action action
	// reason says why anything is to be written, for the log.
	reason string
	// ca is the Secret's CA when it is kept.
	ca *localpki.CA
	// alsoCover are hosts the new serving certificate keeps from the one
	// it replaces, besides the hosts asked for.
	alsoCover []string
}

// plan decides what secret (nil when absent) needs so that it holds a
// usable CA and a serving certificate from it that covers hosts and is
// not yet due for renewal at now. It returns an error, and no verdict, for
// a Secret it must not replace.
func plan(secret *corev1.Secret, hosts []string, now time.Time, servingValidity time.Duration) (verdict, error) {
	if secret == nil {
		return verdict{action: newCA, reason: "the Secret does not exist"}, nil
	}
	if secret.Type != corev1.SecretTypeTLS {
		// The type cannot be changed by an update, and a Secret of
		// another type was not made here: someone else's, perhaps.
		return verdict{}, fmt.Errorf("Secret %s/%s has type %q, not %q: it was not made by this component; delete it or name another Secret",
			secret.Namespace, secret.Name, secret.Type, corev1.SecretTypeTLS)
	}
	if name, ok := secret.Annotations["cert-manager.io/certificate-name"]; ok {
		// Replacing it would start a tug of war with cert-manager.
		return verdict{}, fmt.Errorf("Secret %s/%s is issued by cert-manager (Certificate %q): mount it and use the certificate directory flag instead",
			secret.Namespace, secret.Name, name)
	}
	renew := renewBefore(servingValidity)

	ca, err := localpki.ParseCA(secret.Data[CACertKey], secret.Data[CAKeyKey])
	if err != nil {
		return verdict{action: newCA, reason: fmt.Sprintf("%s and %s do not hold a CA: %v", CACertKey, CAKeyKey, err)}, nil
	}
	caCert := ca.Certificate()
	switch {
	case now.Before(caCert.NotBefore):
		return verdict{action: newCA, reason: fmt.Sprintf("the CA is not valid before %s", caCert.NotBefore.UTC().Format(time.RFC3339))}, nil
	case !now.Add(renew).Before(caCert.NotAfter):
		return verdict{action: newCA, reason: fmt.Sprintf("the CA expires at %s", caCert.NotAfter.UTC().Format(time.RFC3339))}, nil
	}

	keepCA := func(reason string) (verdict, error) {
		return verdict{action: issueServing, reason: reason, ca: ca}, nil
	}
	pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return keepCA(fmt.Sprintf("%s and %s do not hold a key pair: %v", corev1.TLSCertKey, corev1.TLSPrivateKeyKey, err))
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return keepCA(fmt.Sprintf("%s: %v", corev1.TLSCertKey, err))
	}
	if err := leaf.CheckSignatureFrom(caCert); err != nil {
		return keepCA("the serving certificate was not issued by the CA")
	}
	if missing := uncovered(leaf, hosts); len(missing) > 0 {
		// Covering is enough, equality is not asked, and the names the
		// certificate had are kept: replicas of two versions asking for
		// different names during a rolling update settle on a certificate
		// for both instead of re-issuing in turn. Names no one asks for
		// any more go at the next renewal.
		v, _ := keepCA(fmt.Sprintf("the serving certificate does not cover %v", missing))
		v.alsoCover = hostsOf(leaf)
		return v, nil
	}
	switch {
	case now.Before(leaf.NotBefore):
		return keepCA(fmt.Sprintf("the serving certificate is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339)))
	case !now.Add(renew).Before(leaf.NotAfter):
		return keepCA(fmt.Sprintf("the serving certificate expires at %s, less than %s from now", leaf.NotAfter.UTC().Format(time.RFC3339), renew))
	}
	return verdict{action: keep, ca: ca}, nil
}

// uncovered returns the hosts (DNS names or IP addresses) cert is not
// valid for.
func uncovered(cert *x509.Certificate, hosts []string) []string {
	var missing []string
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
				missing = append(missing, h)
			}
			continue
		}
		if !slices.Contains(cert.DNSNames, h) {
			missing = append(missing, h)
		}
	}
	return missing
}

func hostsOf(cert *x509.Certificate) []string {
	hosts := slices.Clone(cert.DNSNames)
	for _, ip := range cert.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	return hosts
}

// renewalTime is when the serving certificate cert is due for renewal.
func renewalTime(cert *x509.Certificate, servingValidity time.Duration) time.Time {
	return cert.NotAfter.Add(-renewBefore(servingValidity))
}
