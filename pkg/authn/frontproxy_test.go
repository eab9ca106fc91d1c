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

package authn

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// testCA is a certificate authority that issues client certificates.
type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

var serial atomic.Int64

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key}
}

func (ca *testCA) pem() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// issue signs a certificate for cn valid from notBefore to notAfter; an
// intermediate CA when isCA.
func (ca *testCA) issue(t *testing.T, cn string, notBefore, notAfter time.Time, isCA bool) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key}
}

// request is a request from a client presenting certs, naming user in the
// front proxy's headers (none when user is empty).
func request(user string, certs ...*x509.Certificate) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, "https://dockerios/apis/dockerios.io/v1alpha1/namespaces/a/macosmachines", nil)
	if len(certs) > 0 {
		req.TLS = &tls.ConnectionState{PeerCertificates: certs}
	}
	if user != "" {
		req.Header.Set("X-Remote-User", user)
		req.Header.Add("X-Remote-Group", "developers")
		req.Header.Set("X-Remote-Extra-Scopes", "machines")
	}
	return req
}

func requestHeaderConfig(t *testing.T, ca dynamiccertificates.CAContentProvider) *authenticatorfactory.RequestHeaderConfig {
	t.Helper()
	return &authenticatorfactory.RequestHeaderConfig{
		UsernameHeaders:     headerrequest.StaticStringSlice{"X-Remote-User"},
		UIDHeaders:          headerrequest.StaticStringSlice{"X-Remote-Uid"},
		GroupHeaders:        headerrequest.StaticStringSlice{"X-Remote-Group"},
		ExtraHeaderPrefixes: headerrequest.StaticStringSlice{"X-Remote-Extra-"},
		CAContentProvider:   ca,
		AllowedClientNames:  headerrequest.StaticStringSlice{"front-proxy-client"},
	}
}

// library returns the generic apiserver's own delegating authenticator
// for cfg, trusting clientCA for ordinary client certificates.
func library(t *testing.T, cfg *authenticatorfactory.RequestHeaderConfig, clientCA *testCA) authenticator.Request {
	t.Helper()
	clientCAs, err := dynamiccertificates.NewStaticCAContent("client-ca", clientCA.pem())
	require.NoError(t, err)
	a, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                          &apiserver.AnonymousAuthConfig{Enabled: true},
		RequestHeaderConfig:                cfg,
		ClientCertificateCAContentProvider: clientCAs,
	}.New()
	require.NoError(t, err)
	return a
}

// answer is what an authenticator said, comparably.
type answer struct {
	OK     bool
	Err    bool
	Name   string
	Groups []string
	Extra  map[string][]string
}

func ask(a authenticator.Request, req *http.Request) answer {
	resp, ok, err := a.AuthenticateRequest(req)
	ans := answer{OK: ok, Err: err != nil}
	if resp != nil && resp.User != nil {
		ans.Name, ans.Groups, ans.Extra = resp.User.GetName(), resp.User.GetGroups(), resp.User.GetExtra()
	}
	return ans
}

// countingVerify counts the chains verified.
func countingVerify(n *atomic.Int64) func(*x509.Certificate, x509.VerifyOptions) ([][]*x509.Certificate, error) {
	return func(c *x509.Certificate, opts x509.VerifyOptions) ([][]*x509.Certificate, error) {
		n.Add(1)
		return c.Verify(opts)
	}
}

func TestFrontProxyChains_AnswersAsTheLibraryDoes(t *testing.T) {
	frontProxyCA, clientCA, otherCA := newCA(t, "front-proxy-ca"), newCA(t, "client-ca"), newCA(t, "other-ca")
	now := time.Now()
	proxy := frontProxyCA.issue(t, "front-proxy-client", now.Add(-time.Hour), now.Add(time.Hour), false).cert
	intermediate := frontProxyCA.issue(t, "front-proxy-intermediate", now.Add(-time.Hour), now.Add(time.Hour), true)
	viaIntermediate := intermediate.issue(t, "front-proxy-client", now.Add(-time.Hour), now.Add(time.Hour), false).cert
	notAllowed := frontProxyCA.issue(t, "somebody-else", now.Add(-time.Hour), now.Add(time.Hour), false).cert
	expired := frontProxyCA.issue(t, "front-proxy-client", now.Add(-2*time.Hour), now.Add(-time.Hour), false).cert
	notYet := frontProxyCA.issue(t, "front-proxy-client", now.Add(time.Hour), now.Add(2*time.Hour), false).cert
	foreign := otherCA.issue(t, "front-proxy-client", now.Add(-time.Hour), now.Add(time.Hour), false).cert
	user := clientCA.issue(t, "alice", now.Add(-time.Hour), now.Add(time.Hour), false).cert

	cases := map[string]func() *http.Request{
		"front proxy":                             func() *http.Request { return request("bob", proxy) },
		"front proxy through an intermediate":     func() *http.Request { return request("bob", viaIntermediate, intermediate.cert) },
		"front proxy without its intermediate":    func() *http.Request { return request("bob", viaIntermediate) },
		"front proxy without a user":              func() *http.Request { return request("", proxy) },
		"a name the front proxy may not have":     func() *http.Request { return request("bob", notAllowed) },
		"an expired front-proxy certificate":      func() *http.Request { return request("bob", expired) },
		"a front-proxy certificate not yet valid": func() *http.Request { return request("bob", notYet) },
		"another CA's certificate":                func() *http.Request { return request("bob", foreign) },
		"an ordinary client certificate":          func() *http.Request { return request("", user) },
		"an ordinary client certificate, headers": func() *http.Request { return request("bob", user) },
		"no certificate":                          func() *http.Request { return request("bob") },
	}
	frontProxyCAs, err := dynamiccertificates.NewStaticCAContent("front-proxy-ca", frontProxyCA.pem())
	require.NoError(t, err)
	cfg := requestHeaderConfig(t, frontProxyCAs)
	lib := library(t, cfg, clientCA)
	wrapped := FrontProxyChains(cfg, library(t, cfg, clientCA))
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			want := ask(lib, req())
			// The second time, a chain verified before is not verified again.
			for range 2 {
				assert.Equal(t, want, ask(wrapped, req()))
			}
		})
	}
	// The cases cover what matters: one is the front proxy's user, with
	// system:authenticated added; one an ordinary client certificate's.
	assert.Equal(t, answer{OK: true, Name: "bob", Groups: []string{"developers", "system:authenticated"}, Extra: map[string][]string{"scopes": {"machines"}}},
		ask(wrapped, request("bob", proxy)))
	assert.Equal(t, "alice", ask(wrapped, request("bob", user)).Name)
	assert.Equal(t, answer{Err: true}, ask(wrapped, request("bob", foreign)), "a certificate nobody trusts is refused")
}

func TestFrontProxyChains_VerifiesAChainOnce(t *testing.T) {
	ca := newCA(t, "front-proxy-ca")
	now := time.Now()
	proxy := ca.issue(t, "front-proxy-client", now.Add(-time.Hour), now.Add(time.Hour), false).cert
	other := ca.issue(t, "front-proxy-client", now.Add(-time.Hour), now.Add(time.Hour), false).cert
	cas, err := dynamiccertificates.NewStaticCAContent("front-proxy-ca", ca.pem())
	require.NoError(t, err)
	f := FrontProxyChains(requestHeaderConfig(t, cas), authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		t.Error("a verified chain went to the library's authenticator")
		return nil, false, nil
	})).(*frontProxy)
	var verified atomic.Int64
	f.verify = countingVerify(&verified)

	for range 100 {
		assert.Equal(t, "bob", ask(f, request("bob", proxy)).Name)
	}
	assert.EqualValues(t, 1, verified.Load(), "the same chain is verified once")
	assert.Equal(t, "bob", ask(f, request("bob", other)).Name)
	assert.EqualValues(t, 2, verified.Load(), "another certificate is verified")
}

func TestFrontProxyChains_VerifiesAgainOutsideTheChainsValidity(t *testing.T) {
	root := newCA(t, "front-proxy-ca")
	now := time.Now()
	// The intermediate expires before the leaf: the chain is valid until
	// the earliest NotAfter of its certificates.
	intermediate := root.issue(t, "intermediate", now.Add(-time.Hour), now.Add(time.Hour), true)
	proxy := intermediate.issue(t, "front-proxy-client", now.Add(-time.Hour), now.Add(2*time.Hour), false).cert
	cas, err := dynamiccertificates.NewStaticCAContent("front-proxy-ca", root.pem())
	require.NoError(t, err)
	var inner atomic.Int64
	f := FrontProxyChains(requestHeaderConfig(t, cas), authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		inner.Add(1)
		return nil, false, nil
	})).(*frontProxy)
	var verified atomic.Int64
	f.verify = countingVerify(&verified)
	clock := now
	f.now = func() time.Time { return clock }

	assert.Equal(t, "bob", ask(f, request("bob", proxy, intermediate.cert)).Name)
	clock = now.Add(59 * time.Minute)
	assert.Equal(t, "bob", ask(f, request("bob", proxy, intermediate.cert)).Name)
	assert.EqualValues(t, 1, verified.Load(), "verified once while every certificate is valid")

	clock = now.Add(61 * time.Minute)
	assert.False(t, ask(f, request("bob", proxy, intermediate.cert)).OK)
	assert.EqualValues(t, 2, verified.Load(), "verified again once the intermediate expired")
	assert.EqualValues(t, 1, inner.Load(), "an expired chain goes to the library's authenticator")

	// A clock set back before the chain was valid verifies again too.
	clock = now.Add(-2 * time.Hour)
	assert.False(t, ask(f, request("bob", proxy, intermediate.cert)).OK)
	assert.EqualValues(t, 3, verified.Load())
}

func TestFrontProxyChains_VerifiesAgainWhenTheIntermediatesSentDiffer(t *testing.T) {
	root := newCA(t, "front-proxy-ca")
	now := time.Now()
	intermediate := root.issue(t, "intermediate", now.Add(-time.Hour), now.Add(time.Hour), true)
	proxy := intermediate.issue(t, "front-proxy-client", now.Add(-time.Hour), now.Add(time.Hour), false).cert
	cas, err := dynamiccertificates.NewStaticCAContent("front-proxy-ca", root.pem())
	require.NoError(t, err)
	f := FrontProxyChains(requestHeaderConfig(t, cas), authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		return nil, false, nil
	})).(*frontProxy)
	var verified atomic.Int64
	f.verify = countingVerify(&verified)

	assert.True(t, ask(f, request("bob", proxy, intermediate.cert)).OK)
	// The same leaf without the intermediate that made it verify does not
	// verify, however recently the leaf did.
	assert.False(t, ask(f, request("bob", proxy)).OK)
	assert.EqualValues(t, 2, verified.Load())
}

// rotatingCA is a CA provider whose bundle is replaced, as a CA file or
// the extension-apiserver-authentication ConfigMap is on rotation.
type rotatingCA struct {
	dynamiccertificates.CAContentProvider
	current atomic.Pointer[x509.VerifyOptions]
}

func (r *rotatingCA) VerifyOptions() (x509.VerifyOptions, bool) { return *r.current.Load(), true }

func (r *rotatingCA) rotate(t *testing.T, bundle []byte) {
	t.Helper()
	p, err := dynamiccertificates.NewStaticCAContent("front-proxy-ca", bundle)
	require.NoError(t, err)
	opts, _ := p.VerifyOptions()
	r.current.Store(&opts)
	r.CAContentProvider = p
}

func TestFrontProxyChains_ForgetsChainsVerifiedWithAnotherCABundle(t *testing.T) {
	oldCA, newCA := newCA(t, "front-proxy-ca"), newCA(t, "front-proxy-ca-2")
	now := time.Now()
	proxy := oldCA.issue(t, "front-proxy-client", now.Add(-time.Hour), now.Add(time.Hour), false).cert
	cas := &rotatingCA{}
	cas.rotate(t, oldCA.pem())
	f := FrontProxyChains(requestHeaderConfig(t, cas), authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		return nil, false, nil
	})).(*frontProxy)
	var verified atomic.Int64
	f.verify = countingVerify(&verified)

	assert.True(t, ask(f, request("bob", proxy)).OK)
	assert.True(t, ask(f, request("bob", proxy)).OK)
	assert.EqualValues(t, 1, verified.Load())

	// The old CA is no longer trusted: the same certificate is refused.
	cas.rotate(t, newCA.pem())
	assert.False(t, ask(f, request("bob", proxy)).OK)
	assert.EqualValues(t, 2, verified.Load())

	// Trusted again (a new bundle holding both), it is verified again.
	cas.rotate(t, append(oldCA.pem(), newCA.pem()...))
	assert.True(t, ask(f, request("bob", proxy)).OK)
	assert.EqualValues(t, 3, verified.Load())
}
