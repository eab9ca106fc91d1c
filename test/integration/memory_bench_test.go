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

package integration

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	restclient "k8s.io/client-go/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/identity"
	identitystorage "github.com/dockerios/dockerios/pkg/registry/macosidentity/storage"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
	"github.com/dockerios/dockerios/test/framework"
)

var (
	memIdentities = flag.Int("mem-identities", 100000, "identities stored for BenchmarkAPIServerMemory")
	memMachines   = flag.Int("mem-machines", 10000, "machines stored for BenchmarkAPIServerMemory (measured at a tenth of it and at all of it)")
	memProfile    = flag.String("mem-heap-profile", "", "write the DockerIOS apiserver's heap profile, at the end of BenchmarkAPIServerMemory, to this file")
)

// BenchmarkAPIServerMemory prints the DockerIOS apiserver's resident memory
// (VmRSS, the process's own, with etcd in another process) and Go heap in
// use, with -mem-identities identities stored and no machines, then with a
// tenth of -mem-machines machines, then with all of them, each holding an
// identity: what an apiserver serving a fleet costs, and how it grows.
//
//	go test ./test/integration -run '^$' -bench APIServerMemory -benchtime 1x -v
func BenchmarkAPIServerMemory(b *testing.B) {
	f := startBenchFleet(b)
	f.storeIdentities(b, *memIdentities)

	pid := f.server.PID()
	measure := func(what string) (rss, heap float64) {
		// Let the watch cache take in the last writes; then collect the
		// garbage (the heap profile endpoint's gc=1), so that what is
		// measured is what the server holds, not when its GC last ran.
		time.Sleep(5 * time.Second)
		heapProfile(b, f.client, "")
		rss, heap = vmRSS(b, pid), heapInUse(b, f.client)
		b.Logf("%-40s RSS %6.0f MiB, Go heap in use %6.0f MiB", what+":", rss, heap)
		return rss, heap
	}
	idsOnly, _ := measure(fmt.Sprintf("%d identities, 0 machines", *memIdentities))

	tenth := *memMachines / 10
	f.makeMachines(b, tenth, nil)
	small, smallHeap := measure(fmt.Sprintf("%d identities, %d machines", *memIdentities, tenth))
	f.makeMachines(b, *memMachines, nil)
	large, largeHeap := measure(fmt.Sprintf("%d identities, %d machines", *memIdentities, *memMachines))

	if *memProfile != "" {
		heapProfile(b, f.client, *memProfile)
	}
	perThousand := (large - small) / float64(*memMachines-tenth) * 1000
	b.ReportMetric(large, "rss-MiB")
	b.ReportMetric(perThousand, "rss-MiB-per-1000-machines")
	fmt.Printf("DockerIOS apiserver RSS: %.0f MiB with %d identities; %.0f MiB with %d machines; %.0f MiB with %d machines (goal ≤ 600); +%.1f MiB RSS and +%.1f MiB heap per 1,000 machines from %d to %d\n",
		idsOnly, *memIdentities, small, tenth, large, *memMachines, perThousand, (largeHeap-smallHeap)/float64(*memMachines-tenth)*1000, tenth, *memMachines)
}

// benchFleet is a DockerIOS apiserver over an etcd of the benchmark's own
// process (so that the server can be restarted on it), with identity pool
// imacpro and class standard, filled by storeIdentities and makeMachines.
type benchFleet struct {
	etcd   *embeddedetcd.Server
	server *framework.LocalServer
	cfg    *restclient.Config
	client versioned.Interface
	made   int
}

func startBenchFleet(b *testing.B) *benchFleet {
	etcd, err := embeddedetcd.Start(filepath.Join(b.TempDir(), "data"), os.Stderr)
	require.NoError(b, err)
	b.Cleanup(etcd.Stop)
	s := framework.StartLocalServer(b, b.TempDir(), "--etcd-servers", etcd.ClientURL)
	k := framework.NewKubectl(b, s.Kubeconfig)
	examples := examplesDir(b)
	k.MustRun(b, "", "create", "-f", filepath.Join(examples, "00-identitypool.yaml"), "-f", filepath.Join(examples, "03-class.yaml"))
	cfg := restConfig(b, s.Kubeconfig)
	client, err := versioned.NewForConfig(cfg)
	require.NoError(b, err)
	return &benchFleet{etcd: etcd, server: s, cfg: cfg, client: client}
}

// storeIdentities adds n identities to pool imacpro.
func (f *benchFleet) storeIdentities(b *testing.B, n int) {
	// Identities are written by the same registry code the server runs,
	// from this process, to the server's etcd: the server learns of them
	// through its watch, as it would of another replica's writes, and
	// seeding takes a fraction of the time of 100,000 HTTP round trips.
	start := time.Now()
	getter := registrytest.RESTOptionsGetterFor(f.etcd.ClientURL)
	ledger, _ := registrytest.NewLedger(b, getter)
	ids, err := identitystorage.NewStorage(getter, ledger)
	require.NoError(b, err)
	gen := identity.NewGenerator(7, "iMacPro1,1")
	values := make([]identity.Values, n)
	for i := range values {
		values[i] = gen.Next()
	}
	parallel(b, 16, len(values), func(i int) error {
		v := values[i]
		_, err := ids.Identity.Create(genericapirequest.WithNamespace(genericapirequest.NewContext(), metav1.NamespaceNone), &dockerio.MacOSIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mem-%06d", i)},
			Spec: dockerio.MacOSIdentitySpec{PoolName: "imacpro", Model: v.Model, SerialNumber: v.SerialNumber,
				BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
		}, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		return err
	})
	b.Logf("stored %d identities in %s", len(values), time.Since(start).Round(time.Second))
}

// makeMachines creates machines of class standard in namespace default,
// named mac-NNNNN, until there are upTo; each takes an identity. shape,
// when set, changes each before it is created (by its index).
func (f *benchFleet) makeMachines(b *testing.B, upTo int, shape func(i int, m *v1alpha1.MacOSMachine)) {
	from := f.made
	parallel(b, 16, upTo-from, func(i int) error {
		m := &v1alpha1.MacOSMachine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mac-%05d", from+i)},
			Spec:       v1alpha1.MacOSMachineSpec{ClassName: "standard"},
		}
		if shape != nil {
			shape(from+i, m)
		}
		_, err := f.client.DockeriosV1alpha1().MacOSMachines("default").Create(context.Background(), m, metav1.CreateOptions{})
		return err
	})
	f.made = upTo
}

// parallel runs f(0..n-1) across clients goroutines; any error fails b.
func parallel(b *testing.B, clients, n int, f func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := f(i); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// vmRSS is a process's resident set in MiB.
func vmRSS(b *testing.B, pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			require.NoError(b, err)
			return kb / 1024
		}
	}
	b.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// heapInUse reads go_memstats_heap_inuse_bytes from the server's /metrics,
// in MiB.
func heapInUse(b *testing.B, client versioned.Interface) float64 {
	data, err := client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(b, err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			bytes, err := strconv.ParseFloat(v, 64)
			require.NoError(b, err)
			return bytes / (1 << 20)
		}
	}
	b.Fatal("no go_memstats_heap_inuse_bytes in /metrics")
	return 0
}

// heapProfile fetches the server's heap profile after a garbage
// collection, into path unless path is empty.
func heapProfile(b *testing.B, client versioned.Interface, path string) {
	data, err := client.Discovery().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(context.Background())
	require.NoError(b, err)
	if path != "" {
		require.NoError(b, os.WriteFile(path, data, 0o600))
	}
}
