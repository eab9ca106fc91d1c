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
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCA_IssuesCertificatesItsPoolVerifies(t *testing.T) {
	ca, err := NewCA("test-ca", start)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca.CertPEM()))

	certPEM, keyPEM, err := ca.IssueServing("svc", []string{"dockerios-apiserver.dockerios-system.svc", "127.0.0.1"}, start)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err, "certificate and key belong together")
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "dockerios-apiserver.dockerios-system.svc", CurrentTime: start})
	assert.NoError(t, err)

	certPEM, _, err = ca.IssueClient("alice", []string{"team-ios"}, start)
	require.NoError(t, err)
	block, _ := pem.Decode(certPEM)
	client, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	assert.Equal(t, "alice", client.Subject.CommonName)
	assert.Equal(t, []string{"team-ios"}, client.Subject.Organization)
	_, err = client.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: start, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, err)
}

// A peer certificate is verified both as a server of its hosts and as a
// client: an etcd member is both to the others.
func TestCA_IssuePeer(t *testing.T) {
	ca, err := NewCA("test-ca", start)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca.CertPEM()))
	certPEM, keyPEM, err := ca.IssuePeer("member-0", []string{"member-0.etcd.svc", "127.0.0.1"}, start)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "member-0.etcd.svc", CurrentTime: start, KeyUsages: []x509.ExtKeyUsage{usage}})
		assert.NoError(t, err, "usage %v", usage)
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1", CurrentTime: start})
	assert.NoError(t, err)
}

func TestParseCA(t *testing.T) {
	ca, err := NewCA("test-ca", start)
	require.NoError(t, err)
	caKey, err := ca.KeyPEM()
	require.NoError(t, err)
	other, err := NewCA("other-ca", start)
	require.NoError(t, err)
	otherKey, err := other.KeyPEM()
	require.NoError(t, err)
	leaf, leafKey, err := ca.IssueServing("svc", []string{"svc.example"}, start)
	require.NoError(t, err)

	for _, tc := range []struct {
		name         string
		certPEM, key []byte
		wantErr      string
	}{
		{"what KeyPEM and CertPEM wrote", ca.CertPEM(), caKey, ""},
		{"no certificate", []byte("garbage"), caKey, "no PEM certificate"},
		{"no key", ca.CertPEM(), nil, "key:"},
		{"another CA's key", ca.CertPEM(), otherKey, `key is not the key of certificate "test-ca"`},
		{"a serving certificate", leaf, leafKey, `certificate "svc" is not a CA`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCA(tc.certPEM, tc.key)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			// What the parsed CA issues, the original's bundle verifies.
			certPEM, _, err := got.IssueServingValidFor("svc", []string{"svc.example"}, start, time.Hour)
			require.NoError(t, err)
			block, _ := pem.Decode(certPEM)
			cert, err := x509.ParseCertificate(block.Bytes)
			require.NoError(t, err)
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(ca.CertPEM())
			_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "svc.example", CurrentTime: start})
			assert.NoError(t, err)
			assert.Equal(t, start.Add(time.Hour), cert.NotAfter, "issued for the validity asked")
		})
	}
}
