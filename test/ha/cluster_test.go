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
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/dockerios/dockerios/pkg/localpki"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
	"github.com/dockerios/dockerios/pkg/storage/txn"
	"github.com/dockerios/dockerios/test/framework"
)

// shutdownDelay replaces the manifest's --shutdown-delay-duration, to see
// what the rolling restart does without it (e.g. -ha-shutdown-delay=0s).
var (
	shutdownDelay  = flag.String("ha-shutdown-delay", "", "run the replicas with this --shutdown-delay-duration instead of artifacts/ha's")
	sendRetryAfter = flag.String("ha-shutdown-send-retry-after", "", "run the replicas with this --shutdown-send-retry-after instead of the default")
)

// cluster is artifacts/ha on this machine: three etcd members and three
// apiserver replicas run with the rendered manifests' arguments (names
// and paths moved to loopback and temporary directories), a balancer in
// front of the replicas, and a real kube-apiserver aggregating them.
type cluster struct {
	t   *testing.T
	cp  *framework.ControlPlane
	dir string

	members  []*etcdMember
	replicas []*replica
	lb       *balancer

	// etcd: a client of the members with a certificate of the etcd CA,
	// for reading the ledger at one revision; ledger audits it.
	etcd   *clientv3.Client
	ledger *identityledger.Ledger
	res    struct{ identities, machines, claims, pools *txn.Resource }
	// direct reaches a replica without kube-apiserver, as its front
	// proxy (kube-apiserver's aggregator) does.
	direct *http.Client
}

type etcdMember struct {
	name                  string
	args                  []string
	clientURL, metricsURL string
	mu                    sync.Mutex
	proc                  *framework.Process
}

type replica struct {
	name string
	addr string
	args []string
	mu   sync.Mutex
	proc *framework.Process
}

func (r *replica) process() *framework.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// loopback moves what the manifests name to this machine: a member's
// name and ports in the headless Service become 127.0.0.1 and a port of
// its own, the members' listen addresses this member's, and absolute
// paths go under root.
type loopback struct {
	podName string
	hosts   map[string]string // "host:port" -> "127.0.0.1:port"
	root    string
}

func (l loopback) arg(a string) string {
	a = strings.ReplaceAll(a, "$(POD_NAME)", l.podName)
	// Longest first: a member's name is a prefix of none other's, but
	// 0.0.0.0:2379 must not meet a host:2379 half-replaced.
	keys := make([]string, 0, len(l.hosts))
	for k := range l.hosts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return len(b) - len(a) })
	for _, k := range keys {
		a = strings.ReplaceAll(a, k, l.hosts[k])
	}
	if name, value, ok := strings.Cut(a, "="); ok && strings.HasPrefix(value, "/") {
		a = name + "=" + filepath.Join(l.root, value)
	}
	return a
}

// startCluster renders artifacts/ha and runs it.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	objs := renderHA(t)
	cp := framework.StartKubeAPIServerForDockerIOS(t)
	c := &cluster{t: t, cp: cp, dir: t.TempDir()}
	ca, err := localpki.NewCA("test-etcd-ca", time.Now())
	require.NoError(t, err)

	// The members' names and ports on loopback.
	sts := objs.statefulSet(t, etcdName)
	svc := objs.service(t, sts.Spec.ServiceName)
	ports := map[string]int32{}
	for _, p := range sts.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	n := int(*sts.Spec.Replicas)
	hosts := map[string]string{}
	local := make([]map[string]string, n)
	for i := range n {
		name := fmt.Sprintf("%s-%d", sts.Name, i)
		local[i] = map[string]string{}
		for pname, port := range ports {
			addr := fmt.Sprintf("127.0.0.1:%d", framework.FreePort(t))
			local[i][fmt.Sprintf("0.0.0.0:%d", port)] = addr
			if pname != "metrics" {
				hosts[fmt.Sprintf("%s.%s.%s.svc:%d", name, svc.Name, svc.Namespace, port)] = addr
			}
		}
		c.members = append(c.members, &etcdMember{name: name,
			clientURL:  "https://" + local[i][fmt.Sprintf("0.0.0.0:%d", ports["client"])],
			metricsURL: "http://" + local[i][fmt.Sprintf("0.0.0.0:%d", ports["metrics"])]})
	}
	for i, m := range c.members {
		l := loopback{podName: m.name, hosts: map[string]string{}, root: filepath.Join(c.dir, m.name)}
		for k, v := range hosts {
			l.hosts[k] = v
		}
		for k, v := range local[i] {
			l.hosts[k] = v
		}
		for _, a := range sts.Spec.Template.Spec.Containers[0].Args {
			m.args = append(m.args, l.arg(a))
		}
		writeSecrets(t, objs, ca, sts.Spec.Template.Spec, l.root)
		require.NoError(t, os.MkdirAll(filepath.Join(l.root, "var", "lib", "etcd"), 0o700))
	}
	for _, m := range c.members {
		for _, a := range m.args {
			require.False(t, strings.Contains(a, ".svc") || strings.Contains(a, "0.0.0.0") || strings.Contains(a, "$("),
				"%s: %s still names something of the cluster", m.name, a)
		}
		c.startMember(m)
	}
	for _, m := range c.members {
		c.waitMemberReady(m, time.Minute)
	}

	// The test's own etcd client, as a backup tool would have one.
	cert, key, err := ca.IssueClient("ha-test", nil, time.Now())
	require.NoError(t, err)
	tlsDir := filepath.Join(c.dir, "checker")
	require.NoError(t, os.MkdirAll(tlsDir, 0o700))
	for name, data := range map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": ca.CertPEM()} {
		require.NoError(t, os.WriteFile(filepath.Join(tlsDir, name), data, 0o600))
	}
	var urls []string
	for _, m := range c.members {
		urls = append(urls, m.clientURL)
	}
	c.etcd, err = txn.NewClient(storagebackend.TransportConfig{ServerList: urls,
		CertFile: filepath.Join(tlsDir, "tls.crt"), KeyFile: filepath.Join(tlsDir, "tls.key"), TrustedCAFile: filepath.Join(tlsDir, "ca.crt")})
	require.NoError(t, err)
	t.Cleanup(func() { c.etcd.Close() })
	getter := registrytest.RESTOptionsGetterFor(urls...)
	c.ledger, err = identityledger.New(c.etcd, getter, identityledger.Options{})
	require.NoError(t, err)
	c.res.identities = newResource(t, getter, "macosidentities", false)
	c.res.machines = newResource(t, getter, "macosmachines", true)
	c.res.claims = newResource(t, getter, "macosmachineclaims", true)
	c.res.pools = newResource(t, getter, "macosidentitypools", false)

	// The replicas: the manifest's etcd and shutdown flags, with the
	// control plane's authentication and serving certificate.
	d := objs.deployment(t, apiserverName)
	var haArgs []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--etcd-") || strings.HasPrefix(a, "--shutdown-") || strings.HasPrefix(a, "--disable-http2") {
			haArgs = append(haArgs, a)
		}
	}
	if *shutdownDelay != "" {
		haArgs = setArg(haArgs, "shutdown-delay-duration", *shutdownDelay)
	}
	if *sendRetryAfter != "" {
		haArgs = setArg(haArgs, "shutdown-send-retry-after", *sendRetryAfter)
	}
	t.Logf("replicas run with %v", haArgs)
	var names, addrs []string
	for i := range int(*d.Spec.Replicas) {
		r := &replica{name: fmt.Sprintf("apiserver-%d", i)}
		port := framework.FreePort(t)
		r.addr = fmt.Sprintf("127.0.0.1:%d", port)
		l := loopback{hosts: hosts, root: filepath.Join(c.dir, r.name)}
		writeSecrets(t, objs, ca, d.Spec.Template.Spec, l.root)
		r.args = cp.DockerIOSReplicaArgs(port, filepath.Join(l.root, "data"))
		for _, a := range haArgs {
			r.args = append(r.args, l.arg(a))
		}
		// The periodic repair would mend drift before the audits see
		// it; it still runs once at every start.
		r.args = append(r.args, "--identity-repair-interval=1h", "--logging-format=text")
		c.replicas = append(c.replicas, r)
		names, addrs = append(names, r.name), append(addrs, r.addr)
	}
	c.lb = newBalancer(t, cp.DockerIOSPort(), names, addrs)
	for _, r := range c.replicas {
		c.startReplica(r)
	}
	for _, r := range c.replicas {
		c.waitReplicaReady(r, 2*time.Minute)
	}
	cp.WaitAPIServiceAvailable(t, 2*time.Minute)
	// Stop the replicas together when the test ends: one after the other
	// each would wait out its shutdown delay.
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, r := range c.replicas {
			wg.Go(func() { r.process().Signal(t, syscall.SIGTERM) })
		}
		wg.Wait()
	})

	proxyCert, proxyKey := cp.FrontProxyClient(t, "front-proxy-client")
	pair, err := tls.X509KeyPair(proxyCert, proxyKey)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(cp.DockerIOSServingCA())
	c.direct = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots, ServerName: "localhost"},
		DisableKeepAlives: true,
	}}
	return c
}

func newResource(t *testing.T, getter *registrytest.RESTOptionsGetter, resource string, namespaced bool) *txn.Resource {
	t.Helper()
	r, err := txn.NewResource(getter, dockerioResource(resource), namespaced, newObject(resource))
	require.NoError(t, err)
	return r
}

// setArg replaces --name's value in args, or adds it.
func setArg(args []string, name, value string) []string {
	out := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, "--"+name+"=") })
	return append(out, "--"+name+"="+value)
}

// writeSecrets writes, under root, every Secret pod mounts that a
// Certificate of the manifests writes: tls.crt, tls.key and ca.crt as
// cert-manager would, issued by the test's etcd CA with the Certificate's
// usages, for loopback.
func writeSecrets(t *testing.T, objs rendered, ca *localpki.CA, pod corev1.PodSpec, root string) {
	t.Helper()
	for _, m := range pod.Containers[0].VolumeMounts {
		var secret string
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				secret = v.Secret.SecretName
			}
		}
		if secret == "" {
			continue
		}
		var cert *certificate
		for _, o := range objs {
			if o.GetKind() == "Certificate" {
				if c := objs.certificate(t, o.GetName()); c.Spec.SecretName == secret {
					cert = c
				}
			}
		}
		if cert == nil {
			continue
		}
		hosts := []string{"127.0.0.1", "localhost"}
		var crt, key []byte
		var err error
		server, client := slices.Contains(cert.Spec.Usages, "server auth"), slices.Contains(cert.Spec.Usages, "client auth")
		switch {
		case server && client:
			crt, key, err = ca.IssuePeer(cert.Spec.CommonName, hosts, time.Now())
		case server:
			crt, key, err = ca.IssueServing(cert.Spec.CommonName, hosts, time.Now())
		case client:
			crt, key, err = ca.IssueClient(cert.Spec.CommonName, nil, time.Now())
		default:
			t.Fatalf("Secret %s: a certificate for neither server nor client auth: %v", secret, cert.Spec.Usages)
		}
		require.NoError(t, err)
		dir := filepath.Join(root, m.MountPath)
		require.NoError(t, os.MkdirAll(dir, 0o700))
		for name, data := range map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.CertPEM()} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
		}
	}
}

func (c *cluster) startMember(m *etcdMember) {
	c.t.Helper()
	p := c.cp.StartProcess(c.t, m.name, framework.EtcdBinary(c.t), m.args...)
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
}

func (c *cluster) member(name string) *etcdMember {
	for _, m := range c.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

// waitMemberReady waits until member m answers /readyz on its metrics
// port: it has a leader and serves linearizable reads, as the
// StatefulSet's readiness probe asks.
func (c *cluster) waitMemberReady(m *etcdMember, within time.Duration) {
	c.t.Helper()
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	framework.Eventually(c.t, within, func() string {
		select {
		case <-p.Exited():
			c.t.Fatalf("%s exited:\n%s", m.name, p.Output())
		default:
		}
		return httpOK(http.DefaultClient, m.metricsURL+"/readyz")
	})
}

func (c *cluster) startReplica(r *replica) {
	c.t.Helper()
	p := c.cp.StartProcess(c.t, r.name, framework.APIServerBinary(c.t), r.args...)
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
}

// waitReplicaReady waits until replica r answers /readyz and the
// balancer routes to it.
func (c *cluster) waitReplicaReady(r *replica, within time.Duration) {
	c.t.Helper()
	p := r.process()
	framework.Eventually(c.t, within, func() string {
		select {
		case <-p.Exited():
			c.t.Fatalf("%s exited:\n%s", r.name, p.Output())
		default:
		}
		if !c.lb.ready(r.name) {
			return r.name + " is not ready in the balancer"
		}
		return ""
	})
}

// httpOK is "" if url answers 200, else what it answered.
func httpOK(client *http.Client, url string) string {
	resp, err := client.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("%s: %s %s", url, resp.Status, body)
	}
	return ""
}

// leader is the name of the member the others follow, "" if none.
func (c *cluster) leader(ctx context.Context) string {
	for _, m := range c.members {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := c.etcd.Status(ctx, m.clientURL)
		cancel()
		if err != nil || st.Leader == 0 {
			continue
		}
		ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
		list, err := c.etcd.MemberList(ctx)
		cancel()
		if err != nil {
			return ""
		}
		for _, mm := range list.Members {
			if mm.ID == st.Leader {
				return mm.Name
			}
		}
	}
	return ""
}
