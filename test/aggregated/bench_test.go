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

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/test/framework"
)

var (
	benchClients  = flag.Int("bench-clients", 32, "concurrent clients of BenchmarkCreatesThroughKubeAPIServer")
	benchRounds   = flag.Int("bench-rounds", 3, "rounds BenchmarkCreatesThroughKubeAPIServer alternates the two kinds over")
	benchPerRound = flag.Int("bench-per-round", 400, "objects of each kind created in one round")
	benchProfile  = flag.String("bench-dockerios-cpuprofile", "", "write a CPU profile of the DockerIOS apiserver during the first DockerIOS round to this file")
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
	pids := e.cp.PIDs()
	pids["benchmark client"] = os.Getpid()
	for round := range *benchRounds {
		before := readCPU(b, pids)
		var profiled chan struct{}
		if round == 0 && *benchProfile != "" {
			profiled = e.profileDockerIOS(b, *benchProfile, 3*time.Second)
		}
		d := timeCreates(b, *benchClients, *benchPerRound, dockerIOS)
		if profiled != nil {
			<-profiled
		}
		middle := readCPU(b, pids)
		c := timeCreates(b, *benchClients, *benchPerRound, crd)
		after := readCPU(b, pids)
		dockerIOSCPU.add(middle.minus(before))
		crdCPU.add(after.minus(middle))
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

	dRate, cRate := rate(total, dockerIOSTime), rate(total, crdTime)
	b.ReportMetric(dRate, "dockerios-creates/s")
	b.ReportMetric(cRate, "crd-creates/s")
	b.ReportMetric(dRate/cRate, "dockerios/crd")
	fmt.Printf("identity-allocating MacOSMachine creates through kube-apiserver ÷ CRD creates: %.0f/s ÷ %.0f/s = %.2f (%d clients, %d rounds of %d)\n",
		dRate, cRate, dRate/cRate, *benchClients, *benchRounds, *benchPerRound)
}

// profileDockerIOS fetches a CPU profile of the DockerIOS apiserver over
// the next d into path, straight from the server with the front-proxy
// certificate (kube-apiserver proxies only /apis/dockerios.io).
func (e *env) profileDockerIOS(b *testing.B, path string, d time.Duration) chan struct{} {
	done := make(chan struct{})
	cert, key := e.cp.FrontProxyClient(b, "front-proxy-client")
	pair, err := tls.X509KeyPair(cert, key)
	require.NoError(b, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(e.cp.DockerIOSServingCA())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", e.cp.DockerIOSURL, int(d.Seconds())), nil)
	require.NoError(b, err)
	req.Header.Set("X-Remote-User", "admin")
	req.Header.Set("X-Remote-Group", "system:masters")
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
			b.Errorf("profiling: %s: %s", resp.Status, data)
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
