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

package ha

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// balancer plays, for the replicas on this machine, what the Service's
// Endpoints and kube-proxy do in a cluster: it listens where the
// APIService routes dockerios.io (the ExternalName Service's port on
// localhost) and hands each new connection to the next replica, in turn,
// whose /readyz answered 200 the last time it was probed, and never to
// one whose last answer was anything else. The test may name a replica
// it prefers while that one is ready (see prefer), so that it knows which
// replica carries kube-apiserver's traffic. Replicas are probed every
// probeEvery, as the kubelet's readiness probe would (with no
// certificate check, as the kubelet makes none). A connection stays with
// its replica until either end closes it, as kube-proxy's do; when no
// replica is ready a connection is closed at once.
type balancer struct {
	t        *testing.T
	ln       net.Listener
	backends []*backend
	next     atomic.Uint64
	start    time.Time

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	stop  chan struct{}
	wg    sync.WaitGroup
	// refused counts connections closed for want of a ready replica, or
	// because the chosen one refused it.
	refused atomic.Int64
	// preferred, when set and ready, is handed every new connection.
	preferred atomic.Pointer[backend]
}

const probeEvery = 200 * time.Millisecond

type backend struct {
	name, addr string
	ready      atomic.Bool
	routed     atomic.Int64 // connections handed to it
	open       atomic.Int64 // connections to it open now
}

// newBalancer listens on 127.0.0.1:port for backends (name → address).
func newBalancer(t *testing.T, port int, names, addrs []string) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("load balancer: %v", err)
	}
	b := &balancer{t: t, ln: ln, conns: map[net.Conn]struct{}{}, stop: make(chan struct{}), start: time.Now()}
	for i := range names {
		b.backends = append(b.backends, &backend{name: names[i], addr: addrs[i]})
	}
	for _, be := range b.backends {
		b.wg.Add(1)
		go b.probe(be)
	}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(b.close)
	return b
}

func (b *balancer) probe(be *backend) {
	defer b.wg.Done()
	client := &http.Client{
		Timeout: time.Second, // the kubelet's default timeoutSeconds
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet's HTTPS probes
			DisableKeepAlives: true,
		},
	}
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		ready := false
		if resp, err := client.Get("https://" + be.addr + "/readyz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
		if was := be.ready.Swap(ready); was != ready {
			b.logf("%s ready=%v", be.name, ready)
		}
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
	}
}

func (b *balancer) logf(format string, args ...any) {
	select {
	case <-b.stop:
	default:
		b.t.Logf("balancer +%s: "+format, append([]any{time.Since(b.start).Round(time.Millisecond)}, args...)...)
	}
}

func (b *balancer) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				b.logf("accept: %v", err)
			}
			return
		}
		b.wg.Add(1)
		go b.forward(c)
	}
}

// pick is the preferred replica if it is ready, else the next ready
// replica after the last one picked, or nil.
func (b *balancer) pick() *backend {
	if p := b.preferred.Load(); p != nil && p.ready.Load() {
		return p
	}
	n := uint64(len(b.backends))
	start := b.next.Add(1)
	for i := range n {
		be := b.backends[(start+i)%n]
		if be.ready.Load() {
			return be
		}
	}
	return nil
}

func (b *balancer) track(c net.Conn, add bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !add {
		delete(b.conns, c)
		return true
	}
	select {
	case <-b.stop:
		return false
	default:
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *balancer) forward(down net.Conn) {
	defer b.wg.Done()
	defer down.Close()
	be := b.pick()
	if be == nil {
		b.refused.Add(1)
		return
	}
	up, err := net.DialTimeout("tcp", be.addr, time.Second)
	if err != nil {
		b.refused.Add(1)
		b.logf("%s refused a connection: %v", be.name, err)
		return
	}
	defer up.Close()
	be.routed.Add(1)
	be.open.Add(1)
	defer be.open.Add(-1)
	if !b.track(down, true) {
		return
	}
	defer b.track(down, false)
	b.track(up, true)
	defer b.track(up, false)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, down); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
	<-done
	// Either end closed: close both, as a connection through kube-proxy
	// ends when its pod's socket does.
	down.Close()
	up.Close()
	<-done
}

// ready says whether backend name's last probe answered 200.
func (b *balancer) ready(name string) bool {
	for _, be := range b.backends {
		if be.name == name {
			return be.ready.Load()
		}
	}
	return false
}

// prefer hands new connections to backend name while it is ready.
// kube-apiserver's aggregator sends all its requests over one HTTP/2
// connection, which stays with the replica it was handed to: the test
// steers it to the replica it stops next, so that each stop hits the
// replica carrying the traffic. Readiness still rules: a preferred
// replica that is not ready gets nothing.
func (b *balancer) prefer(name string) {
	for _, be := range b.backends {
		if be.name == name {
			b.preferred.Store(be)
		}
	}
}

// open is how many connections to backend name are open now.
func (b *balancer) open(name string) int64 {
	for _, be := range b.backends {
		if be.name == name {
			return be.open.Load()
		}
	}
	return 0
}

// carrier is the backend with the most connections open now.
func (b *balancer) carrier() string {
	var best *backend
	for _, be := range b.backends {
		if best == nil || be.open.Load() > best.open.Load() {
			best = be
		}
	}
	return best.name
}

// routed is how many connections each backend was handed.
func (b *balancer) routed() map[string]int64 {
	out := map[string]int64{}
	for _, be := range b.backends {
		out[be.name] = be.routed.Load()
	}
	return out
}

func (b *balancer) close() {
	b.mu.Lock()
	select {
	case <-b.stop:
		b.mu.Unlock()
		return
	default:
	}
	close(b.stop)
	b.ln.Close()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}
