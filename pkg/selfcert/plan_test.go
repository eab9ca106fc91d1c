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
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/pkg/localpki"
)

var (
	now   = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	day   = 24 * time.Hour
	hosts = []string{"dockerios-apiserver.dockerios-system.svc", "dockerios-apiserver.dockerios-system.svc.cluster.local"}
)

// secretOf is a Secret as the manager writes it: ca's certificate and key,
// and a serving certificate for servingHosts issued by issuer at issued.
func secretOf(t *testing.T, ca, issuer *localpki.CA, servingHosts []string, issued time.Time) *corev1.Secret {
	t.Helper()
	certPEM, keyPEM, err := issuer.IssueServingValidFor("dockerios-apiserver", servingHosts, issued, DefaultServingValidity)
	require.NoError(t, err)
	caKey, err := ca.KeyPEM()
	require.NoError(t, err)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "dockerios-system", Name: "dockerios-apiserver-tls"},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{CACertKey: ca.CertPEM(), CAKeyKey: caKey, CABundleKey: ca.CertPEM(),
			corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}
}

var defaultPolicy = policy{hosts: hosts, caValidity: DefaultCAValidity, servingValidity: DefaultServingValidity, overlap: DefaultOverlap}

func newCAAt(t *testing.T, at time.Time, validity time.Duration) *localpki.CA {
	t.Helper()
	ca, err := localpki.NewCAValidFor("test-ca", at, validity)
	require.NoError(t, err)
	return ca
}

func TestPlan(t *testing.T) {
	ca := newCAAt(t, now.Add(-300*day), DefaultCAValidity)
	other := newCAAt(t, now.Add(-300*day), DefaultCAValidity)
	fresh := func(t *testing.T) *corev1.Secret { return secretOf(t, ca, ca, hosts, now.Add(-day)) }

	for _, tc := range []struct {
		name   string
		secret func(t *testing.T) *corev1.Secret
		want   action
		// reason (or, with wantErr, the error) contains this.
		reason  string
		wantErr bool
	}{
		{"no Secret: make everything", func(*testing.T) *corev1.Secret { return nil }, newCA, "does not exist", false},
		{"fresh certificate covering the hosts is kept", fresh, keep, "", false},
		{"a certificate for more names than asked is kept", func(t *testing.T) *corev1.Secret {
			return secretOf(t, ca, ca, append([]string{"extra.example", "127.0.0.1"}, hosts...), now.Add(-day))
		}, keep, "", false},
		{"a missing DNS name is re-issued from the same CA", func(t *testing.T) *corev1.Secret {
			return secretOf(t, ca, ca, hosts[:1], now.Add(-day))
		}, issueServing, "does not cover [" + hosts[1] + "]", false},
		// A third of a year is about 121.7 days.
		{"125 days left: not yet due", func(t *testing.T) *corev1.Secret {
			return secretOf(t, ca, ca, hosts, now.Add(-240*day))
		}, keep, "", false},
		{"115 days left: past two thirds of its life, re-issued", func(t *testing.T) *corev1.Secret {
			return secretOf(t, ca, ca, hosts, now.Add(-250*day))
		}, issueServing, "expires at 2027-03-28", false},
		{"expired serving certificate is re-issued", func(t *testing.T) *corev1.Secret {
			return secretOf(t, ca, ca, hosts, now.Add(-400*day))
		}, issueServing, "expires at", false},
		{"serving certificate of another CA is re-issued", func(t *testing.T) *corev1.Secret {
			return secretOf(t, ca, other, hosts, now.Add(-day))
		}, issueServing, "not issued by the CA", false},
		{"garbage serving pair is re-issued, the CA kept", func(t *testing.T) *corev1.Secret {
			s := fresh(t)
			s.Data[corev1.TLSCertKey] = []byte("garbage")
			return s
		}, issueServing, "tls.crt and tls.key do not hold a key pair", false},
		{"serving key of another certificate is re-issued", func(t *testing.T) *corev1.Secret {
			s := fresh(t)
			s.Data[corev1.TLSPrivateKeyKey] = secretOf(t, ca, ca, hosts, now).Data[corev1.TLSPrivateKeyKey]
			return s
		}, issueServing, "do not hold a key pair", false},
		{"garbage everywhere: a new CA", func(t *testing.T) *corev1.Secret {
			s := fresh(t)
			for k := range s.Data {
				s.Data[k] = []byte("garbage")
			}
			return s
		}, newCA, "ca.crt and ca.key do not hold a CA: no PEM certificate", false},
		{"no CA key: a new CA", func(t *testing.T) *corev1.Secret {
			s := fresh(t)
			delete(s.Data, CAKeyKey)
			return s
		}, newCA, "ca.crt and ca.key do not hold a CA", false},
		{"CA key of another CA: a new CA", func(t *testing.T) *corev1.Secret {
			s := fresh(t)
			s.Data[CAKeyKey], _ = other.KeyPEM()
			return s
		}, newCA, "is not the key of certificate", false},
		{"a serving certificate in ca.crt is no CA", func(t *testing.T) *corev1.Secret {
			s := fresh(t)
			s.Data[CACertKey], s.Data[CAKeyKey] = s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
			return s
		}, newCA, "is not a CA", false},
		{"CA within the renewal window of its end: rotated, the old one kept in the bundle", func(t *testing.T) *corev1.Secret {
			old := newCAAt(t, now.Add(-DefaultCAValidity+1000*day), DefaultCAValidity)
			return secretOf(t, old, old, hosts, now.Add(-day))
		}, rotateCA, "the CA expires at", false},
		{"expired CA: replaced outright", func(t *testing.T) *corev1.Secret {
			old := newCAAt(t, now.Add(-DefaultCAValidity-day), DefaultCAValidity)
			return secretOf(t, old, old, hosts, now.Add(-day))
		}, newCA, "the CA expired at", false},
		{"no bundle (a Secret from before bundles): written", func(t *testing.T) *corev1.Secret {
			s := fresh(t)
			delete(s.Data, CABundleKey)
			return s
		}, rewriteBundle, "the Secret has no ca-bundle.crt", false},
		{"a bundle without the CA: rewritten", func(t *testing.T) *corev1.Secret {
			s := fresh(t)
			s.Data[CABundleKey] = other.CertPEM()
			return s
		}, rewriteBundle, "ca-bundle.crt does not hold ca.crt", false},
		{"a bundle with an expired CA: pruned", func(t *testing.T) *corev1.Secret {
			s := fresh(t)
			s.Data[CABundleKey] = append(s.Data[CABundleKey], newCAAt(t, now.Add(-2*day), day).CertPEM()...)
			return s
		}, rewriteBundle, "holds a CA that expired at", false},
		{"CA from the future (clock skew beyond the backdating)", func(t *testing.T) *corev1.Secret {
			ahead := newCAAt(t, now.Add(2*time.Hour), DefaultCAValidity)
			return secretOf(t, ahead, ahead, hosts, now.Add(2*time.Hour))
		}, newCA, "the CA is not valid before", false},
		{"a Secret of another type is not ours to replace", func(t *testing.T) *corev1.Secret {
			s := fresh(t)
			s.Type = corev1.SecretTypeOpaque
			return s
		}, 0, `has type "Opaque", not "kubernetes.io/tls"`, true},
		{"a Secret cert-manager issues is not ours to replace", func(t *testing.T) *corev1.Secret {
			s := fresh(t)
			s.Annotations = map[string]string{"cert-manager.io/certificate-name": "dockerios-apiserver"}
			return s
		}, 0, `issued by cert-manager (Certificate "dockerios-apiserver")`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// setup
			secret := tc.secret(t)
			// execute
			v, err := plan(secret, defaultPolicy, now)
			// assert
			if tc.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.reason)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want.String(), v.action.String())
			assert.Contains(t, v.reason, tc.reason)
			if tc.want != newCA {
				require.NotNil(t, v.ca, "the CA is kept")
				assert.Equal(t, secret.Data[CACertKey], v.ca.CertPEM())
			}
		})
	}
}

// Through a CA rotation the serving certificate of the previous CA is
// kept for the overlap, while the bundle trusts both; then it moves.
func TestPlan_ServingCertificateMovesToTheNewCAAfterTheOverlap(t *testing.T) {
	previous := newCAAt(t, now.Add(-300*day), DefaultCAValidity)
	current := newCAAt(t, now.Add(-time.Minute), DefaultCAValidity)
	stranger := newCAAt(t, now.Add(-time.Minute), DefaultCAValidity)
	rotated := func(t *testing.T, issuer *localpki.CA, at time.Time, bundle ...*localpki.CA) *corev1.Secret {
		s := secretOf(t, current, issuer, hosts, now.Add(-day))
		s.Data[CABundleKey] = nil
		for _, c := range bundle {
			s.Data[CABundleKey] = append(s.Data[CABundleKey], c.CertPEM()...)
		}
		s.Annotations = map[string]string{RotatedAtAnnotation: at.Format(time.RFC3339)}
		return s
	}
	for _, tc := range []struct {
		name     string
		secret   *corev1.Secret
		want     action
		moves    bool
		wantNext time.Time
	}{
		{"within the overlap: kept", rotated(t, previous, now.Add(-time.Minute), current, previous), keep, false, now.Add(DefaultOverlap - time.Minute)},
		{"after the overlap: moves", rotated(t, previous, now.Add(-DefaultOverlap), current, previous), issueServing, true, time.Time{}},
		{"the previous CA no longer trusted: re-issued at once", rotated(t, previous, now.Add(-time.Minute), current), issueServing, false, time.Time{}},
		{"a stranger's certificate: re-issued at once", rotated(t, stranger, now.Add(-time.Minute), current, previous), issueServing, false, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := plan(tc.secret, defaultPolicy, now)
			require.NoError(t, err)
			assert.Equal(t, tc.want.String(), v.action.String(), v.reason)
			assert.Equal(t, tc.moves, v.movesToNewCA)
			if !tc.wantNext.IsZero() {
				assert.Equal(t, tc.wantNext, v.next)
			}
			if v.action == issueServing {
				assert.Equal(t, current.CertPEM(), v.ca.CertPEM(), "issued by the current CA")
			}
		})
	}
}

func TestPlan_ReissueForMissingNameKeepsTheNamesItHad(t *testing.T) {
	ca := newCAAt(t, now.Add(-day), DefaultCAValidity)
	secret := secretOf(t, ca, ca, []string{"old.dockerios-system.svc", "10.0.0.1"}, now.Add(-day))

	v, err := plan(secret, defaultPolicy, now)

	require.NoError(t, err)
	assert.Equal(t, issueServing, v.action)
	assert.ElementsMatch(t, []string{"old.dockerios-system.svc", "10.0.0.1"}, v.alsoCover,
		"a replica still asking for the old name must not have to re-issue in turn")
}

func TestRenewalTime_IsAtTwoThirdsOfTheConfiguredValidity(t *testing.T) {
	for _, tc := range []struct {
		name     string
		validity time.Duration
		want     time.Duration // before NotAfter
	}{
		{"one year", DefaultServingValidity, DefaultServingValidity / 3},
		{"nine seconds, as tests shorten it", 9 * time.Second, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca := newCAAt(t, now, DefaultCAValidity)
			certPEM, _, err := ca.IssueServingValidFor("x", hosts, now, tc.validity)
			require.NoError(t, err)
			secret := &corev1.Secret{Data: map[string][]byte{corev1.TLSCertKey: certPEM}}
			cert := parseCert(t, secret.Data[corev1.TLSCertKey])

			assert.Equal(t, cert.NotAfter.Add(-tc.want), renewalTime(cert, tc.validity))
			assert.Equal(t, now.Add(tc.validity-tc.want), renewalTime(cert, tc.validity),
				"the hour of backdating does not move renewal")
		})
	}
}
