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

package localpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// CA is a certificate authority held in memory, for what needs more
// certificates than the local mode's: a test control plane's client,
// front-proxy and serving CAs, and the CA pkg/selfcert keeps in a Secret.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// NewCA makes a CA named commonName, valid from now for ten years.
func NewCA(commonName string, now time.Time) (*CA, error) {
	return NewCAValidFor(commonName, now, caValidity)
}

// NewCAValidFor makes a CA named commonName, valid from now for validity.
func NewCAValidFor(commonName string, now time.Time, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	cert, err := sign(tmpl, key.Public(), tmpl, key, now, validity)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key}, nil
}

// ParseCA reads a CA back from its PEM certificate and key, as CertPEM and
// KeyPEM wrote them. It refuses a certificate that is not a CA and a key
// that is not the certificate's, so that nothing is signed that its own
// bundle would not verify.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("certificate %q is not a CA", cert.Subject.CommonName)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("key cannot sign")
	}
	if pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("key is not the key of certificate %q", cert.Subject.CommonName)
	}
	return &CA{cert: cert, key: signer}, nil
}

// Certificate is the CA's certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// KeyPEM is the CA's private key, PEM-encoded, for keeping the CA where
// ParseCA reads it back.
func (ca *CA) KeyPEM() ([]byte, error) { return keyutil.MarshalPrivateKeyToPEM(ca.key) }

// CertPEM is the CA's certificate, as a client or an APIService caBundle
// trusts it.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// IssueServing issues a serving certificate for hosts (DNS names and IP
// addresses) and its key, PEM-encoded.
func (ca *CA) IssueServing(commonName string, hosts []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	return ca.IssueServingValidFor(commonName, hosts, now, leafValidity)
}

// IssueServingValidFor is IssueServing with a validity of the caller's.
func (ca *CA) IssueServingValidFor(commonName string, hosts []string, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	dnsNames, ips := splitHosts(hosts)
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, now, validity)
}

// IssuePeer issues a certificate that serves hosts and authenticates as
// a client with the same key, as each member of an etcd cluster with peer
// TLS presents to the others (it answers their connections and makes its
// own), and its key, PEM-encoded.
func (ca *CA) IssuePeer(commonName string, hosts []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	dnsNames, ips := splitHosts(hosts)
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, now, leafValidity)
}

// IssueClient issues a client certificate for user in groups (Kubernetes
// reads the common name as the user, the organizations as groups) and its
// key, PEM-encoded.
func (ca *CA) IssueClient(user string, groups []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now, leafValidity)
}

func (ca *CA) issue(tmpl *x509.Certificate, now time.Time, validity time.Duration) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	cert, err := sign(tmpl, key.Public(), ca.cert, ca.key, now, validity)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: keyutil.ECPrivateKeyBlockType, Bytes: der}), nil
}
