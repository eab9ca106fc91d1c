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

package aggregated

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/test/framework"
)

var (
	benchClients  = flag.Int("bench-clients", 32, "concurrent clients of BenchmarkCreatesThroughKubeAPIServer")
	benchRounds   = flag.Int("bench-rounds", 3, "rounds BenchmarkCreatesThroughKubeAPIServer alternates the two kinds over")
	benchPerRound = flag.Int("bench-per-round", 400, "objects of each kind created in one round")
	benchProfile  = flag.String("bench-dockerios-cpuprofile", "", "write a CPU profile of the DockerIOS apiserver during the first DockerIOS round to this file")
	benchEtcdProf = flag.String("bench-etcd-cpuprofile", "", "write a CPU profile of etcd during the first DockerIOS round to this file (etcd must run with --enable-pprof: point DOCKERIOS_ETCD_BIN at a script that adds it)")
	benchProfileD = flag.Duration("bench-dockerios-cpuprofile-duration", 3*time.Second, "how long -bench-dockerios-cpuprofile profiles (whole seconds); the round should last longer")
)

// crdMachines is MacOSMachine again, as a CustomResourceDefinition in a
// group of its own: the same spec, validated by a structural schema, and
// nothing unique about it.
var crdMachines = schema.GroupVersionResource{Group: "crd.dockerios.io", Version: "v1alpha1", Resource: "macosmachines"}

const crdManifest = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: macosmachines.crd.dockerios.io}
spec:
  group: crd.dockerios.io
  scope: Namespaced
  names: {plural: macosmachines, singular: macosmachine, kind: MacOSMachine}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            required: [className]
            properties:
              className: {type: string, maxLength: 63}
              poolName: {type: string, maxLength: 63}
              preserveVolumes: {type: boolean}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

// BenchmarkCreatesThroughKubeAPIServer compares, on one control plane and
// one etcd, identity-allocating MacOSMachine creates per second through
// kube-apiserver and the aggregator to DockerIOS, with creates per second
// of the same objects as a CRD served by that kube-apiserver itself. The
// two alternate in rounds so that a noisy neighbour hits both alike. It
// does its whole comparison once, whatever b.N is:
//
//	go test ./test/aggregated -run '^$' -bench CreatesThroughKubeAPIServer -benchtime 1x
func BenchmarkCreatesThroughKubeAPIServer(b *testing.B) {
	e := startEnv(b)
	e.admin.MustRun(b, crdManifest, "apply", "-f", "-")
	e.admin.MustRun(b, "", "wait", "--for=condition=Established", "crd/macosmachines.crd.dockerios.io", "--timeout=60s")
	e.admin.MustRun(b, "", "create", "namespace", "bench")
	dyn, err := dynamic.NewForConfig(framework.RESTConfig(b, e.cp.AdminKubeconfig))
	require.NoError(b, err)

	total := *benchRounds * *benchPerRound
	seedStart := time.Now()
	e.addIdentities(b, identityPool, "bench", fleetSize, total, *benchClients)
	b.Logf("seeded %d identities in %s", total, time.Since(seedStart).Round(time.Millisecond))

	// kube-controller-manager's garbage collector watches every resource,
	// ours included, as in any cluster; each create is an event to it.
	// Measure only once it does, so that every run measures the same.
	e.waitForWatches(b, "macosmachines", "macosidentities")

	var next atomic.Int64
	dockerIOS := func(ctx context.Context) error {
		_, err := e.client.DockeriosV1alpha1().MacOSMachines("bench").Create(ctx, &v1alpha1.MacOSMachine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mac-%d", next.Add(1))},
			Spec:       v1alpha1.MacOSMachineSpec{ClassName: className},
		}, metav1.CreateOptions{})
		return err
	}
	crd := func(ctx context.Context) error {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crdMachines.GroupVersion().String(), "kind": "MacOSMachine",
			"metadata": map[string]any{"name": fmt.Sprintf("mac-%d", next.Add(1))},
			"spec":     map[string]any{"className": className},
		}}
		_, err := dyn.Resource(crdMachines).Namespace("bench").Create(ctx, obj, metav1.CreateOptions{})
		return err
	}

	var dockerIOSTime, crdTime time.Duration
	dockerIOSCPU, crdCPU := cpuTimes{}, cpuTimes{}
	dockerIOSEtcd, crdEtcd := etcdCounters{}, etcdCounters{}
	pids := e.cp.PIDs()
	pids["benchmark client"] = os.Getpid()
	for round := range *benchRounds {
		etcdBefore := readEtcdCounters(b, e.cp.EtcdURL)
		before := readCPU(b, pids)
		var profiled, etcdProfiled chan struct{}
		if round == 0 && *benchProfile != "" {
			profiled = e.profileDockerIOS(b, "profile", *benchProfile, *benchProfileD)
		}
		if round == 0 && *benchEtcdProf != "" {
			etcdProfiled = fetchProfile(b, http.DefaultClient, e.cp.EtcdURL, nil, *benchEtcdProf, *benchProfileD)
		}
		d := timeCreates(b, *benchClients, *benchPerRound, dockerIOS)
		for _, done := range []chan struct{}{profiled, etcdProfiled} {
			if done != nil {
				<-done
			}
		}
		middle := readCPU(b, pids)
		etcdMiddle := readEtcdCounters(b, e.cp.EtcdURL)
		c := timeCreates(b, *benchClients, *benchPerRound, crd)
		after := readCPU(b, pids)
		etcdAfter := readEtcdCounters(b, e.cp.EtcdURL)
		dockerIOSCPU.add(middle.minus(before))
		crdCPU.add(after.minus(middle))
		dockerIOSEtcd.add(etcdMiddle.minus(etcdBefore))
		crdEtcd.add(etcdAfter.minus(etcdMiddle))
		b.Logf("round %d CPU per 1000 creates: dockerios-apiserver %.2fs, etcd %.2fs (CRD path: kube-apiserver %.2fs, etcd %.2fs)", round+1,
			perThousand(middle.minus(before)["dockerios-apiserver"], *benchPerRound), perThousand(middle.minus(before)["etcd"], *benchPerRound),
			perThousand(after.minus(middle)["kube-apiserver"], *benchPerRound), perThousand(after.minus(middle)["etcd"], *benchPerRound))
		dockerIOSTime += d
		crdTime += c
		b.Logf("round %d: DockerIOS %.0f creates/s, CRD %.0f creates/s, ratio %.2f", round+1,
			rate(*benchPerRound, d), rate(*benchPerRound, c), rate(*benchPerRound, d)/rate(*benchPerRound, c))
	}

	// Every DockerIOS machine got an identity: the benchmark measured
	// allocations, not PoolExhausted answers.
	machines, err := e.client.DockeriosV1alpha1().MacOSMachines("bench").List(context.Background(), metav1.ListOptions{})
	require.NoError(b, err)
	require.Len(b, machines.Items, total)
	for _, m := range machines.Items {
		require.NotNil(b, m.Status.IdentityRef, "machine %s waited for an identity: the benchmark would not measure allocation", m.Name)
	}

	// Where the CPU went: a 2-core machine runs every component, so CPU
	// per create bounds the rate.
	for _, name := range dockerIOSCPU.names() {
		b.Logf("CPU per 1000 creates, %-24s DockerIOS %6.2fs  CRD %6.2fs", name,
			dockerIOSCPU[name].Seconds()*1000/float64(total), crdCPU[name].Seconds()*1000/float64(total))
	}

	// What etcd did for them: requests, keys and bytes per create, from
	// etcd's own counters (everything etcd served meanwhile, watches and
	// background work of every component included).
	for _, name := range etcdCounterNames {
		b.Logf("etcd per create, %-36s DockerIOS %8.1f  CRD %8.1f", name,
			dockerIOSEtcd[name]/float64(total), crdEtcd[name]/float64(total))
	}

	dRate, cRate := rate(total, dockerIOSTime), rate(total, crdTime)
	b.ReportMetric(dRate, "dockerios-creates/s")
	b.ReportMetric(cRate, "crd-creates/s")
	b.ReportMetric(dRate/cRate, "dockerios/crd")
	fmt.Printf("identity-allocating MacOSMachine creates through kube-apiserver ÷ CRD creates: %.0f/s ÷ %.0f/s = %.2f (%d clients, %d rounds of %d)\n",
		dRate, cRate, dRate/cRate, *benchClients, *benchRounds, *benchPerRound)
}

// frontProxyClient reaches the DockerIOS apiserver directly, as
// kube-apiserver's aggregator does.
func (e *env) frontProxyClient(b testing.TB) (*http.Client, http.Header) {
	cert, key := e.cp.FrontProxyClient(b, "front-proxy-client")
	pair, err := tls.X509KeyPair(cert, key)
	require.NoError(b, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(e.cp.DockerIOSServingCA())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}}
	return client, frontProxyUser()
}

// frontProxyUser is the user a front-proxy client of these benchmarks acts
// for, in the headers the aggregator would set.
func frontProxyUser() http.Header {
	return http.Header{"X-Remote-User": {"admin"}, "X-Remote-Group": {"system:masters"}}
}

// directClient returns a clientset that talks to the DockerIOS apiserver
// itself, as kube-apiserver's aggregator does: with the front-proxy client
// certificate, the admin named in its headers.
func (e *env) directClient(b testing.TB) versioned.Interface {
	cert, key := e.cp.FrontProxyClient(b, "front-proxy-client")
	header := frontProxyUser()
	cfg := &rest.Config{Host: e.cp.DockerIOSURL, QPS: 1000, Burst: 1000,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.cp.DockerIOSServingCA(), CertData: cert, KeyData: key}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return withHeader{rt, header} })
	client, err := versioned.NewForConfig(cfg)
	require.NoError(b, err)
	return client
}

// withHeader adds its header to every request.
type withHeader struct {
	rt     http.RoundTripper
	header http.Header
}

func (w withHeader) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range w.header {
		req.Header[k] = v
	}
	return w.rt.RoundTrip(req)
}

// waitForWatches waits until somebody (kube-controller-manager's garbage
// collector) watches each of resources on the DockerIOS apiserver.
func (e *env) waitForWatches(b *testing.B, resources ...string) {
	client, header := e.frontProxyClient(b)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, err := http.NewRequest(http.MethodGet, e.cp.DockerIOSURL+"/metrics", nil)
		require.NoError(b, err)
		req.Header = header.Clone()
		resp, err := client.Do(req)
		require.NoError(b, err)
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		watched := 0
		for _, r := range resources {
			for _, line := range strings.Split(string(data), "\n") {
				if strings.HasPrefix(line, "apiserver_longrunning_requests{") && strings.Contains(line, `resource="`+r+`"`) &&
					strings.Contains(line, `verb="WATCH"`) && !strings.HasSuffix(line, " 0") {
					watched++
					break
				}
			}
		}
		if watched == len(resources) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("nobody watches %v on the DockerIOS apiserver: is kube-controller-manager's garbage collector running?", resources)
		}
		time.Sleep(time.Second)
	}
}

// profileDockerIOS fetches the DockerIOS apiserver's pprof profile called
// name ("profile" for CPU, "allocs" for what it allocates) over the next d
// into path, straight from the server with the front-proxy certificate
// (kube-apiserver proxies only /apis/dockerios.io).
func (e *env) profileDockerIOS(b *testing.B, name, path string, d time.Duration) chan struct{} {
	client, header := e.frontProxyClient(b)
	return fetchPprof(b, client, e.cp.DockerIOSURL, header, name, path, d)
}

// profileKubeAPIServer fetches a CPU profile of kube-apiserver over the
// next d into path, as the cluster's admin.
func (e *env) profileKubeAPIServer(b *testing.B, path string, d time.Duration) chan struct{} {
	cfg := framework.RESTConfig(b, e.cp.AdminKubeconfig)
	client, err := rest.HTTPClientFor(cfg)
	require.NoError(b, err)
	return fetchProfile(b, client, cfg.Host, nil, path, d)
}

// fetchProfile fetches a CPU profile over the next d from the pprof
// handler at base into path; the returned channel closes when it is written.
func fetchProfile(b *testing.B, client *http.Client, base string, header http.Header, path string, d time.Duration) chan struct{} {
	return fetchPprof(b, client, base, header, "profile", path, d)
}

// fetchPprof fetches the pprof profile called name over the next d.
func fetchPprof(b *testing.B, client *http.Client, base string, header http.Header, name, path string, d time.Duration) chan struct{} {
	done := make(chan struct{})
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/debug/pprof/%s?seconds=%d", base, name, int(d.Seconds())), nil)
	require.NoError(b, err)
	for k, v := range header {
		req.Header[k] = v
	}
	go func() {
		defer close(done)
		resp, err := client.Do(req)
		if err != nil {
			b.Errorf("profiling: %v", err)
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			b.Errorf("profiling %s: %s: %s", base, resp.Status, data)
			return
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			b.Errorf("profiling: %v", err)
		}
	}()
	return done
}

// cpuTimes is CPU time (user and system) by component.
type cpuTimes map[string]time.Duration

func (c cpuTimes) add(o cpuTimes) {
	for k, v := range o {
		c[k] += v
	}
}

func (c cpuTimes) minus(o cpuTimes) cpuTimes {
	d := cpuTimes{}
	for k, v := range c {
		d[k] = v - o[k]
	}
	return d
}

func (c cpuTimes) names() []string {
	names := make([]string, 0, len(c))
	for k := range c {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// readCPU reads each process's CPU time from /proc/<pid>/stat (utime and
// stime, fields 14 and 15, in clock ticks of 1/100 s on Linux).
func readCPU(b *testing.B, pids map[string]int) cpuTimes {
	b.Helper()
	times := cpuTimes{}
	for name, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		require.NoError(b, err)
		// The command name (field 2) may hold spaces; fields after it don't.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
		utime, err := strconv.ParseInt(fields[11], 10, 64)
		require.NoError(b, err)
		stime, err := strconv.ParseInt(fields[12], 10, 64)
		require.NoError(b, err)
		times[name] = time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return times
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

func perThousand(d time.Duration, n int) float64 { return d.Seconds() * 1000 / float64(n) }

// etcdCounters are etcd's cumulative counters, by the names below.
type etcdCounters map[string]float64

// etcdCounterNames are the etcd metrics (with their labels, as etcd
// prints them) the benchmark reports per create.
var etcdCounterNames = []string{
	`grpc_server_handled_total{grpc_method="Range"}`,
	`grpc_server_handled_total{grpc_method="Txn"}`,
	`etcd_mvcc_range_total`,
	`etcd_mvcc_put_total`,
	`etcd_mvcc_delete_total`,
	`etcd_debugging_mvcc_total_put_size_in_bytes`,
	`etcd_debugging_mvcc_events_total`,
	`etcd_network_client_grpc_received_bytes_total`,
	`etcd_network_client_grpc_sent_bytes_total`,
	`etcd_disk_wal_write_bytes_total`,
}

func (c etcdCounters) add(o etcdCounters) {
	for k, v := range o {
		c[k] += v
	}
}

func (c etcdCounters) minus(o etcdCounters) etcdCounters {
	d := etcdCounters{}
	for k, v := range c {
		d[k] = v - o[k]
	}
	return d
}

// readEtcdCounters reads etcdCounterNames from etcd's /metrics. A gRPC
// method's count is summed over its result codes.
func readEtcdCounters(b *testing.B, etcdURL string) etcdCounters {
	b.Helper()
	resp, err := http.Get(etcdURL + "/metrics")
	require.NoError(b, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(b, err)
	c := etcdCounters{}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		for _, want := range etcdCounterNames {
			if name == want {
				c[want] += v
				continue
			}
			// grpc_server_handled_total{grpc_method="Txn"} stands for
			// every code and service of that method.
			if metric, method, ok := strings.Cut(want, "{grpc_method="); ok && strings.HasPrefix(name, metric+"{") &&
				strings.Contains(name, "grpc_method="+strings.TrimSuffix(method, "}")+",") {
				c[want] += v
			}
		}
	}
	return c
}

// timeCreates runs create n times across clients and returns how long all
// took; any error fails the benchmark.
func timeCreates(b *testing.B, clients, n int, create func(context.Context) error) time.Duration {
	b.Helper()
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if err := create(context.Background()); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return took
}
