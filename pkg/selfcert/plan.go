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
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"

	"github.com/dockerios/dockerios/pkg/localpki"
)

// The keys of the Secret. tls.crt and tls.key are what a kubernetes.io/tls
// Secret must hold (and what --webhook-cert-dir reads, so the Secret can
// also be mounted); ca.crt is where cert-manager puts the CA too. ca.key
// and ca-bundle.crt are ours alone: the bundle is every CA clients must
// trust (the current one and, through a rotation, the one before it), and
// it is what goes into the caBundles. A Secret without it (written before
// it existed) trusts ca.crt alone.
const (
	CACertKey   = "ca.crt"
	CAKeyKey    = "ca.key"
	CABundleKey = "ca-bundle.crt"
)

// RotatedAtAnnotation records when the Secret's CA replaced the previous
// one with an overlap (RFC 3339): serving certificates move to the new CA
// once the bundles have trusted it for Config.Overlap.
const RotatedAtAnnotation = "selfcert.dockerios.io/ca-rotated-at"

// Validities. A certificate is replaced once less than a third of its
// configured validity is left: a serving certificate at two thirds of its
// life, about four months before a one-year certificate expires, and the
// CA about three years before its ten are up. That is cert-manager's
// default (renewBefore is a third of the duration); it leaves months, not
// days, for a renewal that keeps failing (RBAC taken away, kube-apiserver
// unreachable) to be noticed and fixed before anything stops working.
// Measuring the window against the configured validity, not each
// certificate's own span, keeps it sane when tests shorten the validity
// to seconds (certificates are backdated an hour for clock skew).
//
// DefaultOverlap is how long the bundles trust a new CA beside the old
// one before any serving certificate from the new CA is served: enough
// for every replica to have injected the bundle and for kube-apiserver's
// informers to have seen it, so no client ever meets a certificate it
// does not yet trust.
const (
	DefaultCAValidity      = 10 * 365 * 24 * time.Hour
	DefaultServingValidity = 365 * 24 * time.Hour
	DefaultOverlap         = 10 * time.Minute
)

// renewBefore is how long before its end a certificate of validity is
// replaced.
func renewBefore(validity time.Duration) time.Duration { return validity / 3 }

// policy is what plan measures a Secret against.
type policy struct {
	hosts                       []string
	caValidity, servingValidity time.Duration
	overlap                     time.Duration
}

// action is what the Secret needs.
type action int

const (
	// keep: the Secret is fine as it is.
	keep action = iota
	// issueServing: keep the CA, issue a new serving certificate.
	issueServing
	// newCA: make a new CA and a serving certificate from it at once.
	// Only for a CA that is unusable anyway: clients that trusted it
	// fail until the bundles follow.
	newCA
	// rotateCA: make a new CA, add it to the bundle beside the old one,
	// keep serving the old serving certificate; it moves to the new CA
	// after the overlap.
	rotateCA
	// rewriteBundle: the bundle lacks the CA or holds expired CAs.
	rewriteBundle
)

func (a action) String() string {
	return [...]string{"keep", "issue a serving certificate", "make a new CA and serving certificate",
		"rotate the CA (both in the bundle until serving certificates move)", "rewrite the CA bundle"}[a]
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
	// trust are the CAs the bundle keeps besides the one it is written
	// with (for rotateCA, the old ones).
	trust []*x509.Certificate
	// next is when the Secret needs looking at again if nothing else
	// changes it (renewal, the end of an overlap, a CA in the bundle
	// expiring).
	next time.Time
	// movesToNewCA: issueServing replaces a certificate of the previous
	// CA, which must first be trusted wherever the bundle goes.
	movesToNewCA bool
	// keepServing is the certificate and key a rotateCA of a missing
	// Secret keeps serving (the Secret's own are kept otherwise).
	keepServing [2][]byte
}

// plan decides what secret (nil when absent) needs so that it holds a
// usable CA, a bundle that trusts it, and a serving certificate clients
// trust that covers the hosts and is not yet due for renewal at now. It
// returns an error, and no verdict, for a Secret it must not replace.
func plan(secret *corev1.Secret, p policy, now time.Time) (verdict, error) {
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

	ca, err := localpki.ParseCA(secret.Data[CACertKey], secret.Data[CAKeyKey])
	if err != nil {
		return verdict{action: newCA, reason: fmt.Sprintf("%s and %s do not hold a CA: %v", CACertKey, CAKeyKey, err)}, nil
	}
	caCert := ca.Certificate()
	switch {
	case now.Before(caCert.NotBefore):
		return verdict{action: newCA, reason: fmt.Sprintf("the CA is not valid before %s", caCert.NotBefore.UTC().Format(time.RFC3339))}, nil
	case !now.Before(caCert.NotAfter):
		return verdict{action: newCA, reason: fmt.Sprintf("the CA expired at %s", caCert.NotAfter.UTC().Format(time.RFC3339))}, nil
	}
	trust, bundleErr := trusted(secret, caCert, now)
	caRenewAt := caCert.NotAfter.Add(-renewBefore(p.caValidity))
	if !now.Before(caRenewAt) {
		if leaf := servingLeaf(secret); leaf != nil && leaf.CheckSignatureFrom(caCert) == nil &&
			!now.Add(p.overlap).Before(renewalTime(leaf, p.servingValidity)) {
			// It is due, or would fall due within the overlap, when the
			// key that could renew it is gone: renew it now, from the CA
			// clients trust, then rotate.
			return verdict{action: issueServing, ca: ca, trust: trust,
				reason: fmt.Sprintf("the CA is due for rotation and the serving certificate would fall due within its overlap of %s", p.overlap)}, nil
		}
		return verdict{action: rotateCA, reason: fmt.Sprintf("the CA expires at %s", caCert.NotAfter.UTC().Format(time.RFC3339)),
			ca: ca, trust: trust}, nil
	}
	next := caRenewAt
	for _, c := range trust {
		next = earliest(next, c.NotAfter)
	}

	keepCA := func(reason string) (verdict, error) {
		return verdict{action: issueServing, reason: reason, ca: ca, trust: trust}, nil
	}
	pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return keepCA(fmt.Sprintf("%s and %s do not hold a key pair: %v", corev1.TLSCertKey, corev1.TLSPrivateKeyKey, err))
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return keepCA(fmt.Sprintf("%s: %v", corev1.TLSCertKey, err))
	}
	missing := uncovered(leaf, p.hosts)
	fresh := !now.Before(leaf.NotBefore) && now.Add(renewBefore(p.servingValidity)).Before(leaf.NotAfter)
	if err := leaf.CheckSignatureFrom(caCert); err != nil {
		if !fresh || len(missing) > 0 || !signedByOneOf(leaf, trust) {
			return keepCA("the serving certificate was not issued by the CA")
		}
		// Issued by the previous CA, still trusted: it moves to the new
		// CA once the new one has been trusted for the overlap.
		rotatedAt, _ := time.Parse(time.RFC3339, secret.Annotations[RotatedAtAnnotation])
		if moveAt := rotatedAt.Add(p.overlap); now.Before(moveAt) {
			if bundleErr != nil {
				return verdict{action: rewriteBundle, reason: bundleErr.Error(), ca: ca, trust: trust}, nil
			}
			return verdict{action: keep, ca: ca, trust: trust, next: earliest(next, moveAt)}, nil
		}
		v, _ := keepCA(fmt.Sprintf("the serving certificate is the previous CA's, and the bundles have trusted the new CA for %s", p.overlap))
		v.movesToNewCA = true
		return v, nil
	}
	if len(missing) > 0 {
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
	case !fresh:
		return keepCA(fmt.Sprintf("the serving certificate expires at %s, less than %s from now",
			leaf.NotAfter.UTC().Format(time.RFC3339), renewBefore(p.servingValidity)))
	}
	next = earliest(next, renewalTime(leaf, p.servingValidity))
	if bundleErr != nil {
		return verdict{action: rewriteBundle, reason: bundleErr.Error(), ca: ca, trust: trust}, nil
	}
	return verdict{action: keep, ca: ca, trust: trust, next: next}, nil
}

// servingLeaf is secret's serving certificate, or nil if it holds no
// usable key pair.
func servingLeaf(secret *corev1.Secret) *x509.Certificate {
	pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}

// trusted returns the CAs of secret's bundle other than caCert that are
// still valid at now, and an error saying why the bundle needs writing
// (absent, unreadable, without caCert, or holding an expired CA).
func trusted(secret *corev1.Secret, caCert *x509.Certificate, now time.Time) ([]*x509.Certificate, error) {
	pemBytes, ok := secret.Data[CABundleKey]
	if !ok {
		return nil, fmt.Errorf("the Secret has no %s", CABundleKey)
	}
	certs, err := certutil.ParseCertsPEM(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", CABundleKey, err)
	}
	var trust []*x509.Certificate
	var problem error
	hasCA := false
	for _, c := range certs {
		switch {
		case c.Equal(caCert):
			hasCA = true
		case !now.Before(c.NotAfter):
			problem = fmt.Errorf("%s holds a CA that expired at %s", CABundleKey, c.NotAfter.UTC().Format(time.RFC3339))
		default:
			trust = append(trust, c)
		}
	}
	if !hasCA {
		problem = fmt.Errorf("%s does not hold %s", CABundleKey, CACertKey)
	}
	return trust, problem
}

// bundlePEM is ca followed by the other CAs to trust.
func bundlePEM(ca *x509.Certificate, others []*x509.Certificate) []byte {
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	for _, c := range others {
		if !c.Equal(ca) {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
	}
	return out
}

func signedByOneOf(leaf *x509.Certificate, cas []*x509.Certificate) bool {
	return slices.ContainsFunc(cas, func(ca *x509.Certificate) bool { return leaf.CheckSignatureFrom(ca) == nil })
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
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
