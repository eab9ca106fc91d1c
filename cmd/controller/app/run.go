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

package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"

	"github.com/dockerios/dockerios/pkg/launcherwebhook"
)

// shutdownGrace bounds how long in-flight requests may finish after a
// signal: well inside a pod's default 30 s grace period.
const shutdownGrace = 10 * time.Second

// Run serves until ctx ends.
func Run(ctx context.Context, o *Options, logOut io.Writer) error {
	log := o.Logger(logOut)

	var ready atomic.Bool
	// haveCert says whether the webhook has a key pair to serve with.
	haveCert := func() bool { return true }
	health := http.NewServeMux()
	health.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	health.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	health.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() || !haveCert() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	servers := []*server{{name: "health", addr: o.HealthBindAddress, handler: health}}

	if o.WebhookBindAddress != "" {
		certs, err := webhookCerts(ctx, o, log, registry)
		if err != nil {
			return err
		}
		haveCert = func() bool { cert, _ := certs.CurrentCertKeyContent(); return len(cert) > 0 }
		mux := http.NewServeMux()
		mux.Handle(launcherwebhook.Path, launcherwebhook.Handler{Log: log.With("component", "launcher-pod-webhook")})
		servers = append(servers, &server{name: "webhook", addr: o.WebhookBindAddress, handler: mux,
			tls: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: (&certCache{content: certs}).get}})
	}

	for _, s := range servers {
		if err := s.listen(); err != nil {
			return err
		}
		log.Info("serving", "server", s.name, "address", s.ln.Addr().String())
	}
	errc := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errc <- s.serve() }()
	}
	ready.Store(true)

	if o.Reconcile {
		go func() { errc <- reconcile(ctx, o, log, registry) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		if err != nil {
			return err
		}
		<-ctx.Done()
	}
	log.Info("shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	for _, s := range servers {
		_ = s.http.Shutdown(shutdown)
	}
	return nil
}

type server struct {
	name, addr string
	handler    http.Handler
	tls        *tls.Config
	ln         net.Listener
	http       *http.Server
}

func (s *server) listen() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("%s server: %w", s.name, err)
	}
	s.ln = ln
	s.http = &http.Server{Handler: s.handler, TLSConfig: s.tls,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: 90 * time.Second, MaxHeaderBytes: 64 << 10}
	if s.tls != nil {
		s.ln = tls.NewListener(ln, s.tls)
	}
	return nil
}

func (s *server) serve() error {
	if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s server: %w", s.name, err)
	}
	return nil
}

// certCache parses the serving key pair once per change of the files.
type certCache struct {
	content dynamiccertificates.CertKeyContentProvider
	mu      sync.Mutex
	pem     string
	cert    *tls.Certificate
}

func (c *certCache) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	certPEM, keyPEM := c.content.CurrentCertKeyContent()
	key := string(certPEM) + string(keyPEM)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && c.pem == key {
		return c.cert, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("webhook serving certificate: %w", err)
	}
	c.pem, c.cert = key, &cert
	return c.cert, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("unknown level %q", s)
	}
	return l, nil
}
