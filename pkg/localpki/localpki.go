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

// Package localpki makes and keeps the certificates of the apiserver's
// standalone local mode: a private CA, a serving certificate for loopback,
// and an admin client certificate in group system:masters. Files are reused
// across restarts while still valid, so a kubeconfig written once keeps
// working; anything missing, expiring or not issued by the CA is replaced.
//
// It is for development on one machine. Clusters use their own PKI and the
// delegated authentication of kube-apiserver instead.
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
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// AdminUser and AdminGroup are the identity of the admin client certificate.
// system:masters is allowed everything by the apiserver's authorizer.
const (
	AdminUser  = "dockerios-admin"
	AdminGroup = "system:masters"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore replaces a certificate this long before it expires.
	renewBefore = 30 * 24 * time.Hour
)

// Bundle names the files Ensure keeps.
type Bundle struct {
	CACert      string
	CAKey       string
	ServingCert string
	ServingKey  string
	AdminCert   string
	AdminKey    string
}

// Ensure makes or reuses the CA, a serving certificate valid for hosts (DNS
// names and IP addresses) and the admin client certificate, in dir.
func Ensure(dir string, hosts []string, now time.Time) (*Bundle, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	b := &Bundle{
		CACert: filepath.Join(dir, "ca.crt"), CAKey: filepath.Join(dir, "ca.key"),
		ServingCert: filepath.Join(dir, "serving.crt"), ServingKey: filepath.Join(dir, "serving.key"),
		AdminCert: filepath.Join(dir, "admin.crt"), AdminKey: filepath.Join(dir, "admin.key"),
	}
	ca, caKey, err := ensureCA(b.CACert, b.CAKey, now)
	if err != nil {
		return nil, err
	}
	dnsNames, ips := splitHosts(hosts)
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "dockerios-apiserver"},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if err := ensureLeaf(b.ServingCert, b.ServingKey, serving, ca, caKey, now); err != nil {
		return nil, err
	}
	admin := &x509.Certificate{
		Subject:     pkix.Name{CommonName: AdminUser, Organization: []string{AdminGroup}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := ensureLeaf(b.AdminCert, b.AdminKey, admin, ca, caKey, now); err != nil {
		return nil, err
	}
	return b, nil
}

func ensureCA(certFile, keyFile string, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	if cert, key, err := load(certFile, keyFile); err == nil && cert.IsCA && usable(cert, now) {
		return cert, key, nil
	}
	ca, err := NewCA("dockerios-local-ca", now)
	if err != nil {
		return nil, nil, err
	}
	if err := write(certFile, keyFile, ca.cert, ca.key.(*ecdsa.PrivateKey)); err != nil {
		return nil, nil, err
	}
	return ca.cert, ca.key, nil
}

// ensureLeaf keeps an existing certificate that the CA issued, that is not
// about to expire and that says what want says; otherwise it issues a new one.
func ensureLeaf(certFile, keyFile string, want, ca *x509.Certificate, caKey crypto.Signer, now time.Time) error {
	if cert, _, err := load(certFile, keyFile); err == nil && usable(cert, now) &&
		cert.CheckSignatureFrom(ca) == nil && sameSubject(cert, want) {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	cert, err := sign(want, key.Public(), ca, caKey, now, leafValidity)
	if err != nil {
		return err
	}
	return write(certFile, keyFile, cert, key)
}

func sameSubject(have, want *x509.Certificate) bool {
	return have.Subject.CommonName == want.Subject.CommonName &&
		slices.Equal(have.Subject.Organization, want.Subject.Organization) &&
		slices.Equal(have.DNSNames, want.DNSNames) &&
		slices.EqualFunc(have.IPAddresses, want.IPAddresses, net.IP.Equal)
}

func usable(cert *x509.Certificate, now time.Time) bool {
	return now.After(cert.NotBefore) && now.Add(renewBefore).Before(cert.NotAfter)
}

func sign(tmpl *x509.Certificate, pub crypto.PublicKey, parent *x509.Certificate, parentKey crypto.Signer, now time.Time, validity time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	t := *tmpl
	t.SerialNumber = serial
	// Backdated a little so that a clock slightly behind ours still accepts it.
	t.NotBefore = now.Add(-time.Hour)
	t.NotAfter = now.Add(validity)
	der, err := x509.CreateCertificate(rand.Reader, &t, parent, pub, parentKey)
	if err != nil {
		return nil, fmt.Errorf("signing certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	return x509.ParseCertificate(der)
}

func load(certFile, keyFile string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("%s holds no certificate", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := keyutil.PrivateKeyFromFile(keyFile)
	if err != nil {
		return nil, nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("key cannot sign")
	}
	return cert, signer, nil
}

// write stores the key before the certificate, each through a temporary
// file and a rename, so a crash never leaves a certificate without its key.
func write(certFile, keyFile string, cert *x509.Certificate, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeAtomic(keyFile, pem.EncodeToMemory(&pem.Block{Type: keyutil.ECPrivateKeyBlockType, Bytes: der}), 0o600); err != nil {
		return err
	}
	return writeAtomic(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func splitHosts(hosts []string) (dnsNames []string, ips []net.IP) {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dnsNames = append(dnsNames, h)
		}
	}
	return dnsNames, ips
}
