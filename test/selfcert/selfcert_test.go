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

// Package selfcert proves pkg/selfcert against a real kube-apiserver, with
// the RBAC of artifacts/deploy/12-certificates.yaml and the
// registration objects of artifacts/deploy as they are shipped, empty
// caBundle and all: replicas agree on one Secret, the bundles are
// injected and verify what is served, a certificate due for renewal is
// replaced while serving, and a Secret in any state is either repaired or
// refused with a clear error.
package selfcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dockerios/dockerios/pkg/localpki"
	"github.com/dockerios/dockerios/pkg/selfcert"
	"github.com/dockerios/dockerios/test/framework"
)

const namespace = framework.SystemNamespace

var (
	apiServerSecret  = types.NamespacedName{Namespace: namespace, Name: "dockerios-apiserver-tls"}
	apiServerService = types.NamespacedName{Namespace: namespace, Name: framework.ServiceName}
	webhookSecret    = types.NamespacedName{Namespace: namespace, Name: "dockerios-controller-webhook-tls"}
	webhookService   = types.NamespacedName{Namespace: namespace, Name: framework.ControllerServiceName}
	apiServiceName   = "v1alpha1.dockerios.io"
	webhookConfig    = "dockerios-launcher-pods"
	apiServices      = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

// env is a kube-apiserver with DockerIOS's namespace, ServiceAccounts,
// the selfcert RBAC, the APIService and the webhook configuration.
type env struct {
	admin    kubernetes.Interface
	adminDyn dynamic.Interface
	// apiserverSA and controllerSA are the ServiceAccounts' credentials.
	apiserverSA, controllerSA *rest.Config
	// startedWith is the certificate each replica of the last
	// startReplicas served when its Start returned.
	startedWith [][]byte
	// writes are the requests other than reads the replicas sent.
	writes writeLog
}

func TestSelfCert(t *testing.T) {
	cp := framework.StartKubeAPIServer(t)
	k := framework.NewKubectl(t, cp.AdminKubeconfig)
	deploy := filepath.Join(moduleRoot(t), "artifacts", "deploy")
	k.MustRun(t, "", "apply", "-f", filepath.Join(moduleRoot(t), "artifacts", "ledger", "00-namespace.yaml"))
	for _, f := range []string{"01-serviceaccount.yaml", "08-apiservice.yaml", "10-launcher-webhook.yaml"} {
		k.MustRun(t, "", "apply", "-f", filepath.Join(deploy, f))
	}
	k.MustRun(t, "", "create", "serviceaccount", "dockerios-controller", "-n", namespace)
	k.MustRun(t, "", "apply", "-f", filepath.Join(deploy, "12-certificates.yaml"))
	e := &env{}
	e.apiserverSA = e.writes.wrap(framework.RESTConfig(t, cp.ServiceAccountKubeconfig(t, "dockerios-apiserver")))
	e.controllerSA = e.writes.wrap(framework.RESTConfig(t, cp.ServiceAccountKubeconfig(t, "dockerios-controller")))
	var err error
	admin := framework.RESTConfig(t, cp.AdminKubeconfig)
	e.admin, err = kubernetes.NewForConfig(admin)
	require.NoError(t, err)
	e.adminDyn, err = dynamic.NewForConfig(admin)
	require.NoError(t, err)

	// The subtests share the Secrets' names (the RBAC allows no other), so
	// they run one after another, each from a clean slate.
	t.Run("ReplicasConvergeOnOneCertificateTheAPIServiceBundleVerifies", e.testReplicasConverge)
	t.Run("WebhookBundleVerifiesTheControllersCertificate", e.testWebhookBundle)
	t.Run("DueCertificateIsReissuedAndServedWithoutRestart", e.testRenewal)
	t.Run("CARotatesWithAnOverlapAndNoHandshakeFails", e.testCARotation)
	t.Run("SecretFoundIsKeptRepairedOrRefused", e.testSecretFound)
	t.Run("DeletedSecretIsRemadeAndTheBundleFollows", e.testDeletedSecret)
}

func (e *env) testReplicasConverge(t *testing.T) {
	// setup
	e.reset(t)
	cfg := e.apiServerConfig(t)
	cfg.Resync = 300 * time.Millisecond

	// execute: two replicas start at once on no Secret.
	replicas := e.startReplicas(t, e.apiserverSA, cfg, 2)

	// assert
	secret := e.secret(t, apiServerSecret)
	for i, r := range replicas {
		assert.Equal(t, string(secret.Data[corev1.TLSCertKey]), string(e.startedWith[i]), "replica %d started with the Secret's certificate", i)
		cert, key := r.CurrentCertKeyContent()
		assert.Equal(t, string(secret.Data[corev1.TLSCertKey]), string(cert), "replica %d serves the Secret's certificate", i)
		assert.Equal(t, string(secret.Data[corev1.TLSPrivateKeyKey]), string(key), "replica %d serves the Secret's key", i)
	}
	bundle := e.apiServiceBundle(t)
	assert.Equal(t, string(secret.Data[selfcert.CACertKey]), string(bundle), "the APIService carries the Secret's CA")

	// Each replica says when what it serves and its CA expire.
	leaf, ca := parse(t, secret.Data[corev1.TLSCertKey]), parse(t, secret.Data[selfcert.CACertKey])
	want := fmt.Sprintf(`# HELP %[1]s When the certificate this replica serves (certificate=serving) and the CA of its Secret (certificate=ca) expire, in seconds since the epoch.
# TYPE %[1]s gauge
%[1]s{certificate="ca",secret="%[2]s"} %[3]d
%[1]s{certificate="serving",secret="%[2]s"} %[4]d
`, selfcert.ExpiryMetric, apiServerSecret, ca.NotAfter.Unix(), leaf.NotAfter.Unix())
	for i, r := range replicas {
		assert.NoError(t, testutil.CollectAndCompare(r.Collector(), strings.NewReader(want)), "replica %d", i)
	}

	for i, r := range replicas {
		addr := serve(t, r)
		for _, name := range selfcert.ServiceDNSNames(apiServerService) {
			_, err := dial(addr, bundle, name)
			assert.NoError(t, err, "replica %d as %s, trusting only the injected bundle", i, name)
		}
		_, err := dial(addr, bundle, "dockerios-apiserver.default.svc")
		assert.ErrorContains(t, err, "certificate is valid for", "a name the certificate does not carry is refused")
	}

	// Several resyncs of both replicas later, nothing was written again
	// (kube-apiserver would swallow an update that changes nothing
	// without a new resourceVersion: the requests themselves are counted).
	e.writes.reset()
	time.Sleep(5 * cfg.Resync)
	assert.Empty(t, e.writes.get(), "an APIService and a Secret already right are not written")
}

func (e *env) testWebhookBundle(t *testing.T) {
	e.reset(t)
	client, err := kubernetes.NewForConfig(e.controllerSA)
	require.NoError(t, err)
	cfg := selfcert.Config{
		Secret: webhookSecret, CommonName: webhookService.Name, Hosts: selfcert.ServiceDNSNames(webhookService),
		Targets: []selfcert.Target{selfcert.MutatingWebhookConfiguration(client, webhookConfig)},
	}

	r := e.startReplicas(t, e.controllerSA, cfg, 1)[0]

	config, err := e.admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), webhookConfig, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, config.Webhooks)
	ca := e.secret(t, webhookSecret).Data[selfcert.CACertKey]
	for _, w := range config.Webhooks {
		assert.Equal(t, string(ca), string(w.ClientConfig.CABundle), "webhook %s", w.Name)
	}
	// kube-apiserver calls the webhook as <service>.<namespace>.svc.
	_, err = dial(serve(t, r), config.Webhooks[0].ClientConfig.CABundle, "dockerios-controller.dockerios-system.svc")
	assert.NoError(t, err)
}

func (e *env) testRenewal(t *testing.T) {
	// setup: certificates of six seconds, renewed with two left.
	e.reset(t)
	cfg := e.apiServerConfig(t)
	cfg.ServingValidity, cfg.Overlap = 6*time.Second, time.Second
	replicas := e.startReplicas(t, e.apiserverSA, cfg, 2)
	addrs := []string{serve(t, replicas[0]), serve(t, replicas[1])}
	bundle := e.apiServiceBundle(t)
	name := selfcert.ServiceDNSNames(apiServerService)[0]
	first, err := dial(addrs[0], bundle, name)
	require.NoError(t, err)

	// execute: time passes; nobody restarts anything.
	// assert: both replicas serve one new certificate, from the same CA,
	// which the bundle still verifies.
	framework.Eventually(t, 20*time.Second, func() string {
		var serials []string
		for i, addr := range addrs {
			cert, err := dial(addr, bundle, name)
			if err != nil {
				return fmt.Sprintf("replica %d: %v", i, err)
			}
			serials = append(serials, cert.SerialNumber.String())
		}
		if serials[0] == first.SerialNumber.String() {
			return "still serving the first certificate"
		}
		if serials[0] != serials[1] {
			return fmt.Sprintf("replicas serve different certificates %v", serials)
		}
		return ""
	})
	assert.Equal(t, string(bundle), string(e.apiServiceBundle(t)), "the CA stays")
}

func (e *env) testCARotation(t *testing.T) {
	// setup: a CA of 36 s, replaced with 12 s left; serving certificates
	// of 9 s; an overlap of 3 s.
	e.reset(t)
	cfg := e.apiServerConfig(t)
	cfg.CAValidity, cfg.ServingValidity, cfg.Overlap = 36*time.Second, 9*time.Second, 3*time.Second
	cfg.Resync = time.Second
	replicas := e.startReplicas(t, e.apiserverSA, cfg, 2)
	addrs := []string{serve(t, replicas[0]), serve(t, replicas[1])}
	name := selfcert.ServiceDNSNames(apiServerService)[0]
	first := e.secret(t, apiServerSecret)

	// execute: a client keeps dialling both replicas, trusting what the
	// APIService said a second before, as kube-apiserver's aggregator and
	// webhook clients do through their informers' lag.
	const lag = time.Second
	type seen struct {
		at     time.Time
		bundle []byte
	}
	var history []seen
	var failures []string
	var dials int
	deadline := time.Now().Add(45 * time.Second)
	var rotated *corev1.Secret
	for time.Now().Before(deadline) {
		history = append(history, seen{time.Now(), e.apiServiceBundle(t)})
		bundle := history[0].bundle
		for _, h := range history {
			if time.Since(h.at) >= lag {
				bundle = h.bundle
			}
		}
		for i, addr := range addrs {
			dials++
			if _, err := dial(addr, bundle, name); err != nil {
				failures = append(failures, fmt.Sprintf("%s replica %d: %v", time.Now().Format(time.StampMilli), i, err))
			}
		}
		if s := e.secret(t, apiServerSecret); rotated == nil && string(s.Data[selfcert.CACertKey]) != string(first.Data[selfcert.CACertKey]) {
			rotated = s
		}
		time.Sleep(50 * time.Millisecond)
	}

	// assert
	assert.Empty(t, failures, "of %d handshakes", dials)
	require.NotNil(t, rotated, "the CA was rotated")
	assert.Contains(t, string(rotated.Data[selfcert.CABundleKey]), string(first.Data[selfcert.CACertKey]), "the old CA stays trusted through the rotation")
	assert.NotEmpty(t, rotated.Annotations[selfcert.RotatedAtAnnotation])
	last := e.secret(t, apiServerSecret)
	for i, addr := range addrs {
		_, err := dial(addr, last.Data[selfcert.CACertKey], name)
		assert.NoError(t, err, "replica %d serves a certificate of the newest CA", i)
	}
	t.Logf("%d handshakes through the rotation, trusting the bundle of %s before", dials, lag)
}

func (e *env) testSecretFound(t *testing.T) {
	now := time.Now()
	ca, err := localpki.NewCA("found-ca", now.Add(-300*24*time.Hour))
	require.NoError(t, err)
	hosts := selfcert.ServiceDNSNames(apiServerService)

	for _, tc := range []struct {
		name   string
		secret func(t *testing.T) *corev1.Secret
		// want: "kept", "reissued" (same CA), "new CA", or an error Start
		// reports.
		want string
		// log is what the replica's log says about it.
		log string
	}{
		{"fresh: kept as it is", func(t *testing.T) *corev1.Secret {
			return tlsSecret(t, ca, hosts, now.Add(-24*time.Hour))
		}, "kept", ""},
		{"from before bundles: the bundle is added, the CA and certificate kept", func(t *testing.T) *corev1.Secret {
			s := tlsSecret(t, ca, hosts, now.Add(-24*time.Hour))
			delete(s.Data, selfcert.CABundleKey)
			return s
		}, "bundle added", "the Secret has no ca-bundle.crt"},
		{"300 days into a year: re-issued from the same CA", func(t *testing.T) *corev1.Secret {
			return tlsSecret(t, ca, hosts, now.Add(-300*24*time.Hour))
		}, "reissued", "less than 2920h0m0s from now"},
		{"without the cluster.local name: re-issued from the same CA", func(t *testing.T) *corev1.Secret {
			return tlsSecret(t, ca, hosts[:1], now.Add(-24*time.Hour))
		}, "reissued", "does not cover [" + hosts[1] + "]"},
		{"garbage: replaced, with a new CA", func(t *testing.T) *corev1.Secret {
			s := tlsSecret(t, ca, hosts, now)
			for k := range s.Data {
				s.Data[k] = []byte("garbage")
			}
			return s
		}, "new CA", "ca.crt and ca.key do not hold a CA: no PEM certificate"},
		{"of another type: refused and left alone", func(t *testing.T) *corev1.Secret {
			s := tlsSecret(t, ca, hosts, now)
			s.Type = corev1.SecretTypeOpaque
			return s
		}, `no serving certificate from Secret dockerios-system/dockerios-apiserver-tls: Secret dockerios-system/dockerios-apiserver-tls has type "Opaque", not "kubernetes.io/tls"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// setup
			e.reset(t)
			found, err := e.admin.CoreV1().Secrets(namespace).Create(context.Background(), tc.secret(t), metav1.CreateOptions{})
			require.NoError(t, err)
			cfg := e.apiServerConfig(t)
			logs := &logBuffer{}
			cfg.Log = logs.logger()

			// execute
			if strings.HasPrefix(tc.want, "no serving certificate") {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				m := e.newManager(t, e.apiserverSA, cfg)
				err := m.Start(ctx)
				// assert
				assert.ErrorContains(t, err, tc.want)
				assert.Equal(t, found.ResourceVersion, e.secret(t, apiServerSecret).ResourceVersion, "the Secret is left alone")
				assert.Contains(t, logs.String(), `has type \"Opaque\"`, "the log says why, while it retries")
				return
			}
			r := e.startReplicas(t, e.apiserverSA, cfg, 1)[0]

			// assert
			secret := e.secret(t, apiServerSecret)
			cert, _ := r.CurrentCertKeyContent()
			assert.Equal(t, string(secret.Data[corev1.TLSCertKey]), string(cert))
			sameCA := string(secret.Data[selfcert.CACertKey]) == string(found.Data[selfcert.CACertKey])
			switch tc.want {
			case "kept":
				assert.Equal(t, found.ResourceVersion, secret.ResourceVersion, "nothing written")
			case "reissued":
				assert.True(t, sameCA, "the CA is kept")
				assert.NotEqual(t, string(found.Data[corev1.TLSCertKey]), string(cert))
				leaf := parse(t, cert)
				assert.WithinDuration(t, now.Add(selfcert.DefaultServingValidity), leaf.NotAfter, time.Minute, "a year from now")
				assert.Subset(t, leaf.DNSNames, hosts)
			case "new CA":
				assert.False(t, sameCA, "a new CA")
			case "bundle added":
				assert.True(t, sameCA, "the CA is kept")
				assert.Equal(t, string(found.Data[corev1.TLSCertKey]), string(cert), "the certificate is kept")
			}
			assert.Equal(t, string(secret.Data[selfcert.CACertKey]), string(secret.Data[selfcert.CABundleKey]), "the bundle is the CA")
			assert.Equal(t, string(secret.Data[selfcert.CACertKey]), string(e.apiServiceBundle(t)))
			_, err = dial(serve(t, r), e.apiServiceBundle(t), hosts[0])
			assert.NoError(t, err)
			assert.Contains(t, logs.String(), tc.log)
		})
	}
}

func (e *env) testDeletedSecret(t *testing.T) {
	// setup
	e.reset(t)
	cfg := e.apiServerConfig(t)
	cfg.Overlap = 10 * time.Second
	replicas := e.startReplicas(t, e.apiserverSA, cfg, 2)
	before := e.secret(t, apiServerSecret)
	addrs := []string{serve(t, replicas[0]), serve(t, replicas[1])}
	name := selfcert.ServiceDNSNames(apiServerService)[0]

	// execute: someone deletes the Secret to start over.
	require.NoError(t, e.admin.CoreV1().Secrets(namespace).Delete(context.Background(), apiServerSecret.Name, metav1.DeleteOptions{}))

	// assert: a new CA, trusted beside the old one, and meanwhile the
	// replicas keep serving what the bundle already trusted; after the
	// overlap they serve a certificate of the new CA.
	var secret *corev1.Secret
	framework.Eventually(t, 20*time.Second, func() string {
		var err error
		secret, err = e.admin.CoreV1().Secrets(namespace).Get(context.Background(), apiServerSecret.Name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if string(secret.Data[selfcert.CACertKey]) == string(before.Data[selfcert.CACertKey]) {
			return "the Secret has the old CA"
		}
		return ""
	})
	bundle := secret.Data[selfcert.CABundleKey]
	assert.Equal(t, string(secret.Data[selfcert.CACertKey])+string(before.Data[selfcert.CACertKey]), string(bundle), "the new CA, then the old")
	assert.Equal(t, string(before.Data[corev1.TLSCertKey]), string(secret.Data[corev1.TLSCertKey]), "the certificate served is kept through the overlap")
	for i, addr := range addrs {
		_, err := dial(addr, before.Data[selfcert.CACertKey], name)
		assert.NoError(t, err, "replica %d, within the overlap, serves what the old bundle trusts", i)
	}
	framework.Eventually(t, 20*time.Second, func() string {
		if got := e.apiServiceBundle(t); string(got) != string(e.secret(t, apiServerSecret).Data[selfcert.CABundleKey]) {
			return "the APIService's bundle is not the Secret's"
		}
		for i, addr := range addrs {
			if _, err := dial(addr, e.secret(t, apiServerSecret).Data[selfcert.CACertKey], name); err != nil {
				return fmt.Sprintf("replica %d does not serve a certificate of the new CA yet: %v", i, err)
			}
		}
		return ""
	})
	assert.Contains(t, string(e.apiServiceBundle(t)), string(before.Data[selfcert.CACertKey]),
		"the old CA stays trusted until it expires: a replica slow to follow still serves its certificate")
}

// reset deletes the Secrets and empties the bundles, as a fresh install
// has them.
func (e *env) reset(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, name := range []string{apiServerSecret.Name, webhookSecret.Name} {
		if err := e.admin.CoreV1().Secrets(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	_, err := selfcert.APIService(e.adminDyn, apiServiceName).Inject(ctx, nil)
	require.NoError(t, err)
	_, err = selfcert.MutatingWebhookConfiguration(e.admin, webhookConfig).Inject(ctx, nil)
	require.NoError(t, err)
}

func (e *env) apiServerConfig(t *testing.T) selfcert.Config {
	t.Helper()
	dyn, err := dynamic.NewForConfig(e.apiserverSA)
	require.NoError(t, err)
	return selfcert.Config{
		Secret: apiServerSecret, CommonName: apiServerService.Name, Hosts: selfcert.ServiceDNSNames(apiServerService),
		Targets: []selfcert.Target{selfcert.APIService(dyn, apiServiceName)},
	}
}

func (e *env) newManager(t *testing.T, as *rest.Config, cfg selfcert.Config) *selfcert.Manager {
	t.Helper()
	client, err := kubernetes.NewForConfig(as)
	require.NoError(t, err)
	if cfg.Log.GetSink() == nil {
		cfg.Log = testLogger(t)
	}
	m, err := selfcert.New(client, cfg)
	require.NoError(t, err)
	return m
}

// startReplicas starts n managers of cfg at once, as n replicas starting
// together, and waits until each has a key pair. They stop when the test
// ends.
func (e *env) startReplicas(t *testing.T, as *rest.Config, cfg selfcert.Config, n int) []*selfcert.Manager {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	managers := make([]*selfcert.Manager, n)
	e.startedWith = make([][]byte, n)
	for i := range managers {
		managers[i] = e.newManager(t, as, cfg)
	}
	// ctx is the replicas' whole life, not only their start.
	started := make(chan error, n)
	for i, m := range managers {
		go func() {
			err := m.Start(ctx)
			// What Start settled on, before the watch could correct it.
			e.startedWith[i], _ = m.CurrentCertKeyContent()
			started <- err
		}()
	}
	for range managers {
		select {
		case err := <-started:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("replicas have no key pair after 30s")
		}
	}
	return managers
}

func (e *env) secret(t *testing.T, name types.NamespacedName) *corev1.Secret {
	t.Helper()
	s, err := e.admin.CoreV1().Secrets(name.Namespace).Get(context.Background(), name.Name, metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

func (e *env) apiService(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	obj, err := e.adminDyn.Resource(apiServices).Get(context.Background(), apiServiceName, metav1.GetOptions{})
	require.NoError(t, err)
	return obj
}

func (e *env) apiServiceBundle(t *testing.T) []byte {
	t.Helper()
	encoded, _, _ := unstructured.NestedString(e.apiService(t).Object, "spec", "caBundle")
	bundle, err := base64.StdEncoding.DecodeString(encoded)
	require.NoError(t, err)
	return bundle
}

// writeLog records the requests other than reads sent through the
// configs it wraps.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeLog) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet {
				w.mu.Lock()
				w.writes = append(w.writes, req.Method+" "+req.URL.Path)
				w.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

func (w *writeLog) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = nil
}

func (w *writeLog) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// tlsSecret is a Secret laid out as the manager lays it out, with a
// serving certificate for hosts issued by ca at issued for a year.
func tlsSecret(t *testing.T, ca *localpki.CA, hosts []string, issued time.Time) *corev1.Secret {
	t.Helper()
	cert, key, err := ca.IssueServingValidFor(apiServerService.Name, hosts, issued, selfcert.DefaultServingValidity)
	require.NoError(t, err)
	caKey, err := ca.KeyPEM()
	require.NoError(t, err)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: apiServerSecret.Namespace, Name: apiServerSecret.Name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{selfcert.CACertKey: ca.CertPEM(), selfcert.CAKeyKey: caKey, selfcert.CABundleKey: ca.CertPEM(),
			corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
	}
}

// serve serves TLS handshakes with m's key pair on loopback, as the
// components do, and returns the address.
func serve(t *testing.T, m *selfcert.Manager) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: m.GetCertificate, MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.(*tls.Conn).Handshake()
			}()
		}
	}()
	return ln.Addr().String()
}

// dial connects to addr trusting only bundle and checking serverName, as
// kube-apiserver does, and returns the certificate served.
func dial(addr string, bundle []byte, serverName string) (*x509.Certificate, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return nil, fmt.Errorf("no certificate in the bundle %q", bundle)
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func parse(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

// logBuffer collects a manager's log, for what it must say.
type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.buf.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{})
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testLogger logs to the test's log while it runs.
func testLogger(t *testing.T) logr.Logger {
	var done sync.Mutex
	finished := false
	t.Cleanup(func() { done.Lock(); finished = true; done.Unlock() })
	return funcr.New(func(prefix, args string) {
		done.Lock()
		defer done.Unlock()
		if !finished {
			t.Log(prefix, args)
		}
	}, funcr.Options{})
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test")
		dir = parent
	}
}
