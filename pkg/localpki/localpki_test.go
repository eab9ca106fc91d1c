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
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var start = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestEnsure_IssuesServingAndAdminCertificatesFromOneCA(t *testing.T) {
	b, err := Ensure(t.TempDir(), []string{"localhost", "127.0.0.1"}, start)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, b.CACert))

	serving := readCert(t, b.ServingCert)
	_, err = serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost", CurrentTime: start, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	assert.NoError(t, err)
	_, err = serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1", CurrentTime: start, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	assert.NoError(t, err)

	admin := readCert(t, b.AdminCert)
	_, err = admin.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: start, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, err)
	assert.Equal(t, AdminUser, admin.Subject.CommonName)
	assert.Equal(t, []string{AdminGroup}, admin.Subject.Organization)

	info, err := os.Stat(b.AdminKey)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "private keys are readable by their owner only")
}

func TestEnsure_ReusesValidFilesSoKubeconfigsKeepWorking(t *testing.T) {
	dir := t.TempDir()
	first, err := Ensure(dir, []string{"localhost"}, start)
	require.NoError(t, err)
	before := readAll(t, first)

	second, err := Ensure(dir, []string{"localhost"}, start.Add(24*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, before, readAll(t, second))
}

func TestEnsure_ReissuesServingCertificateForNewHostsButKeepsCA(t *testing.T) {
	dir := t.TempDir()
	b, err := Ensure(dir, []string{"localhost"}, start)
	require.NoError(t, err)
	ca, admin := readFile(t, b.CACert), readFile(t, b.AdminCert)

	_, err = Ensure(dir, []string{"localhost", "dockerios.dockerios-system.svc"}, start)
	require.NoError(t, err)
	assert.Equal(t, ca, readFile(t, b.CACert))
	assert.Equal(t, admin, readFile(t, b.AdminCert))
	assert.Contains(t, readCert(t, b.ServingCert).DNSNames, "dockerios.dockerios-system.svc")
}

func TestEnsure_RenewsCertificatesNearExpiry(t *testing.T) {
	dir := t.TempDir()
	b, err := Ensure(dir, []string{"localhost"}, start)
	require.NoError(t, err)
	oldAdmin := readCert(t, b.AdminCert)

	later := start.Add(leafValidity - renewBefore/2)
	_, err = Ensure(dir, []string{"localhost"}, later)
	require.NoError(t, err)
	renewed := readCert(t, b.AdminCert)
	assert.NotEqual(t, oldAdmin.SerialNumber, renewed.SerialNumber)
	assert.True(t, renewed.NotAfter.After(later.Add(renewBefore)))
}

func TestEnsure_ReplacesCorruptFiles(t *testing.T) {
	dir := t.TempDir()
	b, err := Ensure(dir, []string{"localhost"}, start)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.ServingKey, []byte("garbage"), 0o600))

	_, err = Ensure(dir, []string{"localhost"}, start)
	require.NoError(t, err)
	_, err = os.ReadFile(b.ServingKey)
	require.NoError(t, err)
	_, _, err = load(b.ServingCert, b.ServingKey)
	assert.NoError(t, err, "a usable key and certificate were written back")
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}

func readAll(t *testing.T, b *Bundle) [][]byte {
	var all [][]byte
	for _, f := range []string{b.CACert, b.CAKey, b.ServingCert, b.ServingKey, b.AdminCert, b.AdminKey} {
		all = append(all, readFile(t, f))
	}
	return all
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(readFile(t, path))
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}
