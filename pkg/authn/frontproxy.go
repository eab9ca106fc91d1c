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

// Package authn holds the apiserver's authenticator wrappers. None may change
// an answer: each only changes how often the same work is done.
package authn

import (
	"bytes"
	"crypto/x509"
	"net/http"
	"slices"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
)

// maxVerifiedChains bounds the chains remembered. Only chains that
// verified against the front-proxy CA are remembered, so there are as many
// as there are front-proxy certificates in use (one per kube-apiserver, or
// one for all); the bound only keeps a misconfiguration from growing it.
const maxVerifiedChains = 64

// FrontProxyChains returns inner, except that it verifies the front
// proxy's client certificate chain once, not on every request.
//
// Why: behind kube-apiserver every request arrives from the aggregator,
// authenticated by its front-proxy client certificate and the user in the
// X-Remote-* headers. The generic apiserver checks that certificate with
// x509.Certificate.Verify on every request — building the chain and
// checking its signatures (ECDSA here) — although every request on a
// connection, and every connection of that kube-apiserver, presents the
// very same certificate: about a twentieth of our CPU per create.
//
// Verifying a chain is a function of the certificates' bytes, the CA
// bundle, and the time; so a chain this wrapper verified against the same
// CA bundle, presented again byte for byte while every certificate in it is
// still within its validity period, verifies again. For those requests the
// wrapper skips only Verify: it checks the common name against the allowed
// names and reads the user from the request headers exactly as the
// library's front-proxy authenticator does, with the same header names, and
// adds system:authenticated as the library's union does. Anything else —
// no client certificate, a chain that does not verify against the
// front-proxy CA (then it is verified a second time by inner, which also
// tries it as an ordinary client certificate), a name not allowed, a
// request without the user header — goes to inner unchanged.
//
// The TLS handshake has proven that the client holds the certificate's
// private key; Verify does not check revocation, so remembering its answer
// loses nothing. A new CA bundle (a rotation: the CA provider hands out new
// verify options) forgets every chain remembered.
//
// cfg is the request-header configuration the generic apiserver built its
// authenticator with (AuthenticationInfo.RequestHeaderConfig); nil returns
// inner.
func FrontProxyChains(cfg *authenticatorfactory.RequestHeaderConfig, inner authenticator.Request) authenticator.Request {
	if cfg == nil || inner == nil {
		return inner
	}
	return &frontProxy{
		inner:   inner,
		cfg:     cfg,
		headers: group.NewAuthenticatedGroupAdder(headerrequest.NewDynamic(cfg.UsernameHeaders, cfg.UIDHeaders, cfg.GroupHeaders, cfg.ExtraHeaderPrefixes)),
		now:     time.Now,
		verify:  (*x509.Certificate).Verify,
	}
}

type frontProxy struct {
	inner   authenticator.Request
	cfg     *authenticatorfactory.RequestHeaderConfig
	headers authenticator.Request
	now     func() time.Time
	verify  func(*x509.Certificate, x509.VerifyOptions) ([][]*x509.Certificate, error)

	mu sync.RWMutex
	// roots and intermediates are the pools of the verify options the
	// chains were verified with; other pools forget them.
	roots, intermediates *x509.CertPool
	// verified holds the verified chains by their leaf's DER bytes.
	verified map[string]verifiedChain
}

// verifiedChain is a chain Verify accepted, and when it would accept it.
type verifiedChain struct {
	// sent is the DER of the certificates the client sent after its leaf,
	// which Verify used as intermediates.
	sent [][]byte
	// notBefore and notAfter bound the time every certificate of the
	// chain is valid in.
	notBefore, notAfter time.Time
}

func (f *frontProxy) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return f.inner.AuthenticateRequest(req)
	}
	opts, ok := f.cfg.CAContentProvider.VerifyOptions()
	if !ok || !f.verifies(opts, req.TLS.PeerCertificates) || !f.allowed(req.TLS.PeerCertificates[0]) {
		return f.inner.AuthenticateRequest(req)
	}
	resp, ok, err := f.headers.AuthenticateRequest(req)
	if err != nil || !ok {
		// The header authenticator changes nothing when it has no user:
		// inner answers as if this wrapper were not there.
		return f.inner.AuthenticateRequest(req)
	}
	return resp, true, nil
}

// allowed is the library's check of the front proxy's common name.
func (f *frontProxy) allowed(leaf *x509.Certificate) bool {
	names := f.cfg.AllowedClientNames.Value()
	return len(names) == 0 || slices.Contains(names, leaf.Subject.CommonName)
}

// verifies says whether certs verify against opts, verifying them only if
// they were not verified against the same pools before, or if the time is
// outside the chain's validity.
func (f *frontProxy) verifies(opts x509.VerifyOptions, certs []*x509.Certificate) bool {
	leaf, now := certs[0], f.now()
	roots, intermediates := opts.Roots, opts.Intermediates
	f.mu.RLock()
	c, ok := f.verified[string(leaf.Raw)]
	samePools := f.roots == roots && f.intermediates == intermediates
	f.mu.RUnlock()
	if ok && samePools && c.covers(now) && c.sentAgain(certs[1:]) {
		return true
	}

	// As the library's front-proxy authenticator verifies: the
	// certificates sent after the leaf are the intermediates, unless the
	// provider has its own.
	if opts.Intermediates == nil && len(certs) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range certs[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	opts.CurrentTime = now
	chains, err := f.verify(leaf, opts)
	if err != nil || len(chains) == 0 {
		return false
	}
	verified := verifiedChain{notBefore: leaf.NotBefore, notAfter: leaf.NotAfter}
	for _, c := range chains[0] {
		if c.NotBefore.After(verified.notBefore) {
			verified.notBefore = c.NotBefore
		}
		if c.NotAfter.Before(verified.notAfter) {
			verified.notAfter = c.NotAfter
		}
	}
	for _, c := range certs[1:] {
		verified.sent = append(verified.sent, c.Raw)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	// Chains verified with other pools (the CA bundle changed, or changed
	// back) are forgotten.
	if f.verified == nil || f.roots != roots || f.intermediates != intermediates || len(f.verified) >= maxVerifiedChains {
		f.verified = map[string]verifiedChain{}
		f.roots, f.intermediates = roots, intermediates
	}
	f.verified[string(leaf.Raw)] = verified
	return true
}

// covers says whether every certificate of the chain is valid at now.
func (c verifiedChain) covers(now time.Time) bool {
	return !now.Before(c.notBefore) && !now.After(c.notAfter)
}

// sentAgain says whether the client sent the same certificates after its
// leaf as when the chain was verified.
func (c verifiedChain) sentAgain(certs []*x509.Certificate) bool {
	return slices.EqualFunc(c.sent, certs, func(raw []byte, cert *x509.Certificate) bool { return bytes.Equal(raw, cert.Raw) })
}
