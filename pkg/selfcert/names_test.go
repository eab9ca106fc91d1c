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
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestParseNamespacedName(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    types.NamespacedName
		wantErr string
	}{
		{"dockerios-system/dockerios-apiserver-tls", types.NamespacedName{Namespace: "dockerios-system", Name: "dockerios-apiserver-tls"}, ""},
		{"dockerios-apiserver-tls", types.NamespacedName{}, "is not NAMESPACE/NAME"},
		{"/name", types.NamespacedName{}, "is not NAMESPACE/NAME"},
		{"ns/", types.NamespacedName{}, "is not NAMESPACE/NAME"},
		{"a/b/c", types.NamespacedName{}, "is not NAMESPACE/NAME"},
		{"Dockerios/x", types.NamespacedName{}, `namespace "Dockerios"`},
		{"ns/tls_secret", types.NamespacedName{}, `name "tls_secret"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseNamespacedName(tc.in)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestServiceDNSNames_AreWhatKubeAPIServerDials(t *testing.T) {
	assert.Equal(t, []string{"dockerios-controller.dockerios-system.svc", "dockerios-controller.dockerios-system.svc.cluster.local"},
		ServiceDNSNames(types.NamespacedName{Namespace: "dockerios-system", Name: "dockerios-controller"}))
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}
