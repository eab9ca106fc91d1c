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
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/clock"

	"github.com/dockerios/dockerios/pkg/localpki"
)

const (
	// DefaultResync is how often the Secret and the registration objects
	// are read again even when nothing said they changed: it bounds how
	// long a caBundle someone wiped stays wrong. Renewal does not wait
	// for it; it is timed to the certificate.
	DefaultResync = time.Minute
	// minRetry is the first wait after a failed sync; it doubles up to
	// the resync period.
	minRetry = time.Second
	// writeAttempts bounds how often one sync reads the Secret again
	// after losing a race for it to another replica.
	writeAttempts = 5
)

// Config says which Secret a Manager keeps, what the serving certificate
// must cover, and where the CA goes.
type Config struct {
	// Secret holds the CA and the serving certificate.
	Secret types.NamespacedName
	// CommonName names the serving certificate; the CA is named after it.
	CommonName string
	// Hosts are the DNS names (see ServiceDNSNames) and IP addresses the
	// serving certificate must be valid for.
	Hosts []string
	// Targets receive the CA bundle.
	Targets []Target
	// CAValidity and ServingValidity default to DefaultCAValidity and
	// DefaultServingValidity, Overlap to DefaultOverlap; tests shorten
	// them.
	CAValidity, ServingValidity, Overlap time.Duration
	// Resync defaults to DefaultResync.
	Resync time.Duration
	// Clock defaults to the real one.
	Clock clock.WithTicker
	Log   logr.Logger
}

// Manager keeps the Secret, serves its key pair and injects its CA. It is
// a dynamiccertificates.CertKeyContentProvider, so k8s.io/apiserver's
// secure serving takes it as its certificate.
type Manager struct {
	cfg    Config
	client kubernetes.Interface
	log    logr.Logger

	current atomic.Pointer[servingPair]
	// next is when the Secret needs looking at again, as the last plan
	// said (a renewal, the end of an overlap).
	next atomic.Pointer[time.Time]
	// seenVersion is the resourceVersion of the Secret last loaded: the
	// informer's event for it (often our own write) needs no sync.
	seenVersion atomic.Value
	kick        chan struct{}

	mu        sync.Mutex
	listeners []dynamiccertificates.Listener
}

var _ dynamiccertificates.CertKeyContentProvider = &Manager{}

// servingPair is what is served, parsed once per change of the Secret.
type servingPair struct {
	certPEM, keyPEM, caPEM []byte
	// bundlePEM is what the caBundles get: caPEM and the CAs still
	// trusted beside it.
	bundlePEM []byte
	cert      *tls.Certificate
	// caNotAfter is when the Secret's CA expires.
	caNotAfter time.Time
}

// New returns a Manager of cfg reading and writing through client. It
// does nothing until Start.
func New(client kubernetes.Interface, cfg Config) (*Manager, error) {
	if cfg.Secret.Namespace == "" || cfg.Secret.Name == "" {
		return nil, errors.New("selfcert: the Secret needs a namespace and a name")
	}
	if len(cfg.Hosts) == 0 {
		return nil, errors.New("selfcert: the serving certificate needs at least one host")
	}
	if cfg.CommonName == "" {
		cfg.CommonName = cfg.Secret.Name
	}
	if cfg.CAValidity == 0 {
		cfg.CAValidity = DefaultCAValidity
	}
	if cfg.ServingValidity == 0 {
		cfg.ServingValidity = DefaultServingValidity
	}
	if cfg.Overlap == 0 {
		cfg.Overlap = DefaultOverlap
	}
	// A CA is replaced a third of its life before its end, and the
	// serving certificates move to the new one an overlap later: by then
	// a certificate of the old CA must not be due yet.
	// A serving certificate renewed just before a rotation must stay
	// fresh through the overlap.
	if fresh := cfg.ServingValidity - renewBefore(cfg.ServingValidity); fresh <= cfg.Overlap {
		return nil, fmt.Errorf("selfcert: the overlap (%s) must be shorter than two thirds of the serving certificate's validity (%s)", cfg.Overlap, cfg.ServingValidity)
	}
	if cfg.CAValidity < cfg.ServingValidity+3*cfg.Overlap {
		return nil, fmt.Errorf("selfcert: the CA's validity (%s) must be at least the serving certificate's (%s) and three overlaps (%s)",
			cfg.CAValidity, cfg.ServingValidity, 3*cfg.Overlap)
	}
	if cfg.Resync == 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	m := &Manager{cfg: cfg, client: client, kick: make(chan struct{}, 1),
		log: cfg.Log.WithValues("secret", cfg.Secret.String())}
	m.seenVersion.Store("")
	return m, nil
}

// Start brings the Secret into shape and loads its key pair, retrying
// until it has one or ctx ends; then it keeps both fresh in the
// background until ctx ends. The component should serve only once Start
// has returned nil. A failure to inject the CA is logged and retried, and
// does not hold serving up: the serving certificate does not depend on it.
func (m *Manager) Start(ctx context.Context) error {
	retry := minRetry
	var err error
	for {
		if err = m.sync(ctx); m.current.Load() != nil {
			break
		}
		m.log.Error(err, "No serving certificate yet", "retryIn", retry)
		select {
		case <-ctx.Done():
			return fmt.Errorf("no serving certificate from Secret %s: %w", m.cfg.Secret, err)
		case <-m.cfg.Clock.After(retry):
		}
		retry = min(2*retry, m.cfg.Resync)
	}
	if err := m.watch(ctx); err != nil {
		return err
	}
	go m.loop(ctx, err)
	return nil
}

// watch syncs whenever the Secret changes: another replica's renewal,
// someone deleting the Secret to start over. An informer restricted to
// the one Secret by a field selector costs one watch per replica (RBAC
// allows list and watch by resourceNames for exactly such requests); a
// periodic Get alone would leave a replica serving a certificate of a
// replaced CA, which the bundle no longer verifies, for a resync period.
func (m *Manager) watch(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(m.client, 0,
		informers.WithNamespace(m.cfg.Secret.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", m.cfg.Secret.Name).String()
		}))
	changed := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok && s.ResourceVersion == m.seenVersion.Load().(string) {
			return
		}
		m.enqueue()
	}
	if _, err := factory.Core().V1().Secrets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: func(any) { m.enqueue() },
	}); err != nil {
		return fmt.Errorf("watching Secret %s: %w", m.cfg.Secret, err)
	}
	factory.Start(ctx.Done())
	return nil
}

func (m *Manager) enqueue() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// loop syncs on every change of the Secret, at the serving certificate's
// renewal time, every resync period, and sooner after a failure.
func (m *Manager) loop(ctx context.Context, err error) {
	retry := minRetry
	for {
		wait := m.cfg.Resync
		if err != nil {
			m.log.Error(err, "Keeping the serving certificate and its CA bundle failed", "retryIn", retry)
			wait, retry = retry, min(2*retry, m.cfg.Resync)
		} else {
			retry = minRetry
			if next := m.next.Load(); next != nil && !next.IsZero() {
				wait = min(wait, max(next.Sub(m.cfg.Clock.Now()), minRetry))
			}
		}
		timer := m.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-m.kick:
		case <-timer.C():
		}
		timer.Stop()
		err = m.sync(ctx)
	}
}

// sync brings the Secret into shape, serves its key pair, and injects its
// CA into every target.
func (m *Manager) sync(ctx context.Context) error {
	secret, err := m.ensureSecret(ctx)
	if err != nil {
		return err
	}
	if err := m.load(secret); err != nil {
		return err
	}
	ca := bundleOf(secret)
	var errs []error
	for _, t := range m.cfg.Targets {
		changed, err := t.Inject(ctx, ca)
		if err != nil {
			errs = append(errs, fmt.Errorf("injecting the CA into %s: %w", t, err))
			continue
		}
		if changed {
			m.log.Info("Injected the CA bundle", "into", t.String())
		}
	}
	return errors.Join(errs...)
}

// ensureSecret reads the Secret and writes it if plan says it needs it,
// until it reads one that needs nothing or has written one. Every write
// is conditional: a replica that loses a race reads the winner's Secret
// and, finding it good, keeps it.
func (m *Manager) ensureSecret(ctx context.Context) (*corev1.Secret, error) {
	secrets := m.client.CoreV1().Secrets(m.cfg.Secret.Namespace)
	for range writeAttempts {
		secret, err := secrets.Get(ctx, m.cfg.Secret.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			secret = nil
		case err != nil:
			return nil, fmt.Errorf("reading Secret %s: %w", m.cfg.Secret, err)
		}
		now := m.cfg.Clock.Now()
		v, err := plan(secret, m.policy(), now)
		if err != nil {
			return nil, err
		}
		if secret == nil {
			v = m.fromMemory(v, now)
		}
		if v.action == keep {
			m.setNext(v.next)
			return secret, nil
		}
		if v.movesToNewCA {
			if ok, why := m.targetsTrust(ctx, v.ca.CertPEM()); !ok {
				// sync injects the Secret's bundle next; look again soon.
				m.log.Info("Serving certificates wait for the new CA to be trusted", "reason", why)
				m.setNext(now.Add(minRetry))
				return secret, nil
			}
		}
		m.log.Info("Writing the Secret", "action", v.action.String(), "reason", v.reason)
		data, annotations, err := m.issue(v)
		if err != nil {
			return nil, fmt.Errorf("issuing for Secret %s: %w", m.cfg.Secret, err)
		}
		var written *corev1.Secret
		if secret == nil {
			written, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: m.cfg.Secret.Namespace, Name: m.cfg.Secret.Name, Annotations: annotations},
				Type:       corev1.SecretTypeTLS,
				Data:       data,
			}, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) {
				m.log.Info("Another replica created the Secret first; reading it")
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("creating Secret %s: %w", m.cfg.Secret, err)
			}
		} else {
			// Update carries the resourceVersion read above: if another
			// replica wrote in between, this fails and its write stands.
			secret = secret.DeepCopy()
			if secret.Data == nil {
				secret.Data = map[string][]byte{}
			}
			maps.Copy(secret.Data, data)
			for k, val := range annotations {
				if val == "" {
					delete(secret.Annotations, k)
					continue
				}
				if secret.Annotations == nil {
					secret.Annotations = map[string]string{}
				}
				secret.Annotations[k] = val
			}
			written, err = secrets.Update(ctx, secret, metav1.UpdateOptions{FieldManager: FieldManager})
			if apierrors.IsConflict(err) {
				m.log.Info("Another replica wrote the Secret first; reading it")
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("updating Secret %s: %w", m.cfg.Secret, err)
			}
		}
		after, err := plan(written, m.policy(), now)
		if err != nil || after.action != keep {
			after.next = now.Add(minRetry)
		}
		m.setNext(after.next)
		return written, nil
	}
	return nil, fmt.Errorf("Secret %s changed under every one of %d writes; will try again", m.cfg.Secret, writeAttempts)
}

func (m *Manager) policy() policy {
	return policy{hosts: m.cfg.Hosts, caValidity: m.cfg.CAValidity, servingValidity: m.cfg.ServingValidity, overlap: m.cfg.Overlap}
}

func (m *Manager) setNext(t time.Time) { m.next.Store(&t) }

// fromMemory turns the verdict on a missing Secret into a CA rotation when
// this replica still serves a valid certificate: someone deleted the
// Secret to start over (or lost it), and making a new CA outright would
// leave every client that trusts the old one facing a certificate it
// cannot verify until the bundles follow. The new Secret trusts the new CA
// beside what was trusted, keeps serving the certificate served, and moves
// it to the new CA after the overlap, as a scheduled rotation does. To drop
// the old CA at once, delete the Secret while no replica runs.
func (m *Manager) fromMemory(v verdict, now time.Time) verdict {
	p := m.current.Load()
	if p == nil || !now.Before(p.cert.Leaf.NotAfter) {
		return v
	}
	certs, err := certutil.ParseCertsPEM(p.bundlePEM)
	if err != nil {
		return v
	}
	var trust []*x509.Certificate
	for _, c := range certs {
		if now.Before(c.NotAfter) {
			trust = append(trust, c)
		}
	}
	if !signedByOneOf(p.cert.Leaf, trust) {
		return v
	}
	return verdict{action: rotateCA, reason: "the Secret does not exist; a new CA, trusted beside the one of the certificate served",
		trust: trust, keepServing: [2][]byte{p.certPEM, p.keyPEM}}
}

// targetsTrust says whether every target's caBundle holds caPEM, and if
// not, which does not.
func (m *Manager) targetsTrust(ctx context.Context, caPEM []byte) (bool, string) {
	for _, t := range m.cfg.Targets {
		ok, err := t.Trusts(ctx, caPEM)
		if err != nil {
			return false, fmt.Sprintf("reading %s: %v", t, err)
		}
		if !ok {
			return false, t.String() + " does not trust it yet"
		}
	}
	return true, ""
}

// issue makes what v says is needed, as the Secret's data and the
// annotations to set ("" removes one).
func (m *Manager) issue(v verdict) (map[string][]byte, map[string]string, error) {
	now := m.cfg.Clock.Now()
	data := map[string][]byte{}
	annotations := map[string]string{}
	ca := v.ca
	trust := v.trust
	switch v.action {
	case newCA, rotateCA:
		// The time in the name tells CAs apart in a bundle or a log.
		next, err := localpki.NewCAValidFor(fmt.Sprintf("%s-ca@%d", m.cfg.CommonName, now.Unix()), now, m.cfg.CAValidity)
		if err != nil {
			return nil, nil, err
		}
		if ca != nil {
			trust = append([]*x509.Certificate{ca.Certificate()}, trust...)
		}
		ca = next
		caKey, err := ca.KeyPEM()
		if err != nil {
			return nil, nil, err
		}
		data[CACertKey], data[CAKeyKey] = ca.CertPEM(), caKey
		annotations[RotatedAtAnnotation] = ""
		if v.action == rotateCA {
			annotations[RotatedAtAnnotation] = now.UTC().Format(time.RFC3339)
		}
	}
	data[CABundleKey] = bundlePEM(ca.Certificate(), trust)
	switch {
	case v.action == rotateCA && v.keepServing[0] != nil:
		data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey] = v.keepServing[0], v.keepServing[1]
	case v.action == newCA || v.action == issueServing:
		hosts := slices.Clone(m.cfg.Hosts)
		for _, h := range v.alsoCover {
			if !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
		// A certificate never outlives the CA that vouches for it.
		validity := min(m.cfg.ServingValidity, ca.Certificate().NotAfter.Sub(now))
		certPEM, keyPEM, err := ca.IssueServingValidFor(m.cfg.CommonName, hosts, now, validity)
		if err != nil {
			return nil, nil, err
		}
		data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey] = certPEM, keyPEM
	}
	return data, annotations, nil
}

// bundleOf is what secret says the caBundles must hold.
func bundleOf(secret *corev1.Secret) []byte {
	if b, ok := secret.Data[CABundleKey]; ok {
		return b
	}
	return secret.Data[CACertKey]
}

// load serves the Secret's key pair, telling listeners when it changed.
func (m *Manager) load(secret *corev1.Secret) error {
	certPEM, keyPEM, caPEM, bundle := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey], secret.Data[CACertKey], bundleOf(secret)
	if p := m.current.Load(); p != nil && bytes.Equal(p.certPEM, certPEM) && bytes.Equal(p.keyPEM, keyPEM) && bytes.Equal(p.caPEM, caPEM) && bytes.Equal(p.bundlePEM, bundle) {
		m.seenVersion.Store(secret.ResourceVersion)
		return nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("Secret %s: %w", m.cfg.Secret, err)
	}
	if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
		return fmt.Errorf("Secret %s: %w", m.cfg.Secret, err)
	}
	p := &servingPair{certPEM: certPEM, keyPEM: keyPEM, caPEM: caPEM, bundlePEM: bundle, cert: &pair}
	if cas, err := certutil.ParseCertsPEM(caPEM); err == nil {
		p.caNotAfter = cas[0].NotAfter
	}
	m.current.Store(p)
	m.seenVersion.Store(secret.ResourceVersion)
	m.log.Info("Serving certificate loaded", "serial", pair.Leaf.SerialNumber.Text(16),
		"notAfter", pair.Leaf.NotAfter.UTC(), "renewAt", renewalTime(pair.Leaf, m.cfg.ServingValidity).UTC(),
		"issuer", pair.Leaf.Issuer.CommonName, "dnsNames", pair.Leaf.DNSNames)
	m.mu.Lock()
	listeners := slices.Clone(m.listeners)
	m.mu.Unlock()
	for _, l := range listeners {
		l.Enqueue()
	}
	return nil
}

// GetCertificate serves the current key pair, for a tls.Config.
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	p := m.current.Load()
	if p == nil {
		return nil, fmt.Errorf("no serving certificate from Secret %s yet", m.cfg.Secret)
	}
	return p.cert, nil
}

// CABundle is what the caBundles get: the CAs clients must trust,
// PEM-encoded, among them the one the served certificate chains to.
func (m *Manager) CABundle() []byte {
	if p := m.current.Load(); p != nil {
		return p.bundlePEM
	}
	return nil
}

// Name names the provider in k8s.io/apiserver's logs.
func (m *Manager) Name() string { return "secret:" + m.cfg.Secret.String() }

// CurrentCertKeyContent is the current key pair, PEM-encoded.
func (m *Manager) CurrentCertKeyContent() ([]byte, []byte) {
	if p := m.current.Load(); p != nil {
		return p.certPEM, p.keyPEM
	}
	return nil, nil
}

// AddListener has l told whenever the key pair changes.
func (m *Manager) AddListener(l dynamiccertificates.Listener) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listeners = append(m.listeners, l)
}
