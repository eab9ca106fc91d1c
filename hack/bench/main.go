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

// Command bench measures the identity ledger against etcd itself, side by
// side in one run on one etcd, and prints ratios — absolute rates on a
// shared machine say little, ratios measured together say a lot:
//
//  1. identity-allocating MacOSMachine creates per second (through the
//     registry: strategy, validation, the ledger's transaction) ÷ raw etcd
//     transactions per second that write an object and five
//     create-if-absent index keys, with the same number of clients;
//  2. the median latency of one allocation from a pool of 100,000
//     identities ÷ from a pool of 1,000.
//
// Run it with `go run ./hack/bench` (see -help). It starts its own etcd in a
// temporary directory, with fsync on, in a process of its own, as in
// production: an etcd inside the measured process would share its heap and
// garbage collector, and slow the apiserver side in a way no cluster sees.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	"github.com/dockerios/dockerios/pkg/identity"
	identitystorage "github.com/dockerios/dockerios/pkg/registry/macosidentity/storage"
	machinestorage "github.com/dockerios/dockerios/pkg/registry/macosmachine/storage"
	"github.com/dockerios/dockerios/pkg/storage/codec"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

func main() {
	clients := flag.Int("clients", 32, "concurrent clients in the throughput comparison")
	duration := flag.Duration("duration", 10*time.Second, "how long each kind of write runs in all, split into rounds")
	flag.IntVar(&rounds, "rounds", 5, "rounds the throughput comparison alternates over")
	small := flag.Int("small-pool", 1000, "identities in the small pool of the latency comparison")
	large := flag.Int("large-pool", 100000, "identities in the large pool of the latency comparison")
	samples := flag.Int("samples", 500, "allocations timed in each pool")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the create phase to this file")
	allocProfile := flag.String("allocprofile", "", "write an allocation profile (after the create phase) to this file")
	etcdOnly := flag.String("etcd-only", "", "internal: serve etcd with its data in this directory and print its URL")
	flag.Parse()
	profilePath, allocProfilePath = *cpuProfile, *allocProfile
	if *etcdOnly != "" {
		serveEtcd(*etcdOnly)
		return
	}
	if err := run(*clients, *duration, *small, *large, *samples); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

var (
	profilePath, allocProfilePath string
	rounds                        int
)

// startProfile profiles the CPU until the returned function is called.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

type bench struct {
	etcd       *clientv3.Client
	ledger     *identityledger.Ledger
	machines   machinestorage.MachineStorage
	identities identitystorage.IdentityStorage
	getter     generic.RESTOptionsGetter
	stopViews  context.CancelFunc
	views      sync.WaitGroup
}

// close lets go of etcd before it stops: a client still open then (the
// ledger's, the stores' and their watch caches') redials it until the
// program exits, and gRPC logs every refused dial.
func (b *bench) close() {
	b.stopViews()
	b.views.Wait()
	b.machines.Machine.Destroy()
	b.identities.Identity.Destroy()
	_ = b.etcd.Close()
}

func run(clients int, duration time.Duration, small, large, samples int) error {
	dir, err := os.MkdirTemp("", "dockerios-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	etcdURL, stopEtcd, err := startEtcdProcess(dir)
	if err != nil {
		return err
	}
	defer stopEtcd()
	b, err := newBench(etcdURL)
	if err != nil {
		return err
	}
	defer b.close()
	ctx := context.Background()
	fmt.Printf("etcd v3.7 in its own process, fsync on; clients: %d; %s of each kind of write over %d rounds\n\n", clients, duration, rounds)

	// 1. Throughput, side by side: the two kinds of write alternate in
	// short rounds, so that whatever else the machine does in the meantime
	// weighs on both alike.
	probe, err := b.rawTxnRate(ctx, clients, time.Second, 0)
	if err != nil {
		return err
	}
	// Enough identities that no create of any round waits for one: creates
	// are never faster than the raw transactions.
	supply := int(probe*(duration+2*time.Second).Seconds()) + 2000
	if err := b.seed(ctx, "throughput", supply, clients); err != nil {
		return err
	}
	stopProfile, err := startProfile(profilePath)
	if err != nil {
		return err
	}
	// A warm-up round of each, not counted: the watch caches first take in
	// everything the seeding wrote.
	if _, err := b.rawTxnRate(ctx, clients, time.Second, -1); err != nil {
		return err
	}
	if _, err := b.createRate(ctx, "throughput", clients, time.Second, -1); err != nil {
		return err
	}
	var rawTotal, createTotal float64
	round := duration / time.Duration(rounds)
	for r := range rounds {
		raw, err := b.rawTxnRate(ctx, clients, round, r+1)
		if err != nil {
			return err
		}
		creates, err := b.createRate(ctx, "throughput", clients, round, r)
		if err != nil {
			return err
		}
		fmt.Printf("round %d: raw %6.0f /s, creates %6.0f /s, ratio %.2f\n", r+1, raw, creates, creates/raw)
		rawTotal += raw
		createTotal += creates
	}
	stopProfile()
	if allocProfilePath != "" {
		if f, err := os.Create(allocProfilePath); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	fmt.Printf("raw etcd transactions (object + 5 create-if-absent keys): %8.0f /s\n", rawTotal/float64(rounds))
	fmt.Printf("identity-allocating machine creates:                    %8.0f /s\n", createTotal/float64(rounds))
	fmt.Printf("ratio creates ÷ raw transactions:                       %8.2f   (target ≥ 0.5)\n\n", createTotal/rawTotal)

	// 2. Allocation latency against pool size.
	if err := b.seed(ctx, "small", small, clients); err != nil {
		return err
	}
	if err := b.seed(ctx, "large", large, clients); err != nil {
		return err
	}
	smallP50, err := b.allocationP50(ctx, "small", samples)
	if err != nil {
		return err
	}
	largeP50, err := b.allocationP50(ctx, "large", samples)
	if err != nil {
		return err
	}
	fmt.Printf("allocation p50 with %6d identities in the pool: %v\n", small, smallP50)
	fmt.Printf("allocation p50 with %6d identities in the pool: %v\n", large, largeP50)
	fmt.Printf("ratio %d ÷ %d:                          %8.2f   (target ≤ 1.25)\n", large, small, float64(largeP50)/float64(smallP50))
	return nil
}

// startEtcdProcess runs this program again as an etcd server with its data
// in dir, and returns its client URL.
func startEtcdProcess(dir string) (string, func(), error) {
	cmd := exec.Command(os.Args[0], "-etcd-only", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("etcd process did not start: %w", err)
	}
	return strings.TrimSpace(line), stop, nil
}

// serveEtcd is the etcd process: it prints its client URL and serves until
// told to stop.
func serveEtcd(dir string) {
	etcd, err := embeddedetcd.Start(filepath.Join(dir, "etcd"), os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench etcd:", err)
		os.Exit(1)
	}
	fmt.Println(etcd.ClientURL)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	select {
	case <-stop:
	case err := <-etcd.Err():
		fmt.Fprintln(os.Stderr, "bench etcd:", err)
	}
	etcd.Stop()
}

// getter lays resources out as the apiserver does, watch caches included
// (none for identities, as the apiserver's default --watch-cache-sizes).
type getter struct{ config storagebackend.Config }

func (g getter) GetRESTOptions(gr schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	decorator := genericregistry.StorageWithCacher()
	if !identityledger.WatchCached(gr) {
		decorator = generic.UndecoratedStorage
	}
	return generic.RESTOptions{
		StorageConfig:           &storagebackend.ConfigForResource{Config: g.config, GroupResource: gr},
		Decorator:               decorator,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          gr.Group + "/" + gr.Resource,
	}, nil
}

func newBench(endpoint string) (*bench, error) {
	// Seeded as the apiserver writes with its default --storage-media-type;
	// it reads the others too.
	cfg, err := codec.Config("/registry", codec.DefaultMediaType)
	if err != nil {
		return nil, err
	}
	cfg.Transport.ServerList = []string{endpoint}
	g := getter{config: *cfg}
	client, err := txn.NewClient(cfg.Transport)
	if err != nil {
		return nil, err
	}
	ledger, err := identityledger.New(client, g, identityledger.Options{})
	if err != nil {
		return nil, err
	}
	machines, err := machinestorage.NewStorage(g, ledger, authorizerfactory.NewAlwaysAllowAuthorizer())
	if err != nil {
		return nil, err
	}
	identities, err := identitystorage.NewStorage(g, ledger)
	if err != nil {
		return nil, err
	}
	b := &bench{etcd: client, ledger: ledger, machines: machines, identities: identities, getter: g}
	// As the apiserver does once it has started.
	var ctx context.Context
	ctx, b.stopViews = context.WithCancel(context.Background())
	b.views.Go(func() { ledger.RunFreeView(ctx) })
	b.views.Go(func() { ledger.RunClassView(ctx) })
	return b, nil
}

// rawTxnRate is the baseline: what etcd does with transactions of the same
// shape as an allocating create, with nothing of ours in the way.
func (b *bench) rawTxnRate(ctx context.Context, clients int, d time.Duration, round int) (float64, error) {
	object := make([]byte, 1200) // about a stored MacOSMachine
	var n atomic.Int64
	err := forClients(clients, d, func(worker, i int) error {
		key := fmt.Sprintf("/bench/raw/%d/%d/%d", round, worker, i)
		var conds []clientv3.Cmp
		ops := []clientv3.Op{clientv3.OpPut(key, string(object))}
		conds = append(conds, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
		for k := range 5 {
			idx := fmt.Sprintf("/bench/raw-index/%d/%d/%d/%d", round, k, worker, i)
			conds = append(conds, clientv3.Compare(clientv3.CreateRevision(idx), "=", 0))
			ops = append(ops, clientv3.OpPut(idx, key))
		}
		resp, err := b.etcd.Txn(ctx).If(conds...).Then(ops...).Commit()
		if err == nil && !resp.Succeeded {
			err = fmt.Errorf("raw transaction failed its conditions")
		}
		n.Add(1)
		return err
	})
	return float64(n.Load()) / d.Seconds(), err
}

// createRate creates machines of class <pool> for d with clients workers.
func (b *bench) createRate(ctx context.Context, pool string, clients int, d time.Duration, round int) (float64, error) {
	var n atomic.Int64
	nsCtx := genericapirequest.WithNamespace(ctx, "bench")
	err := forClients(clients, d, func(worker, i int) error {
		m := &dockerio.MacOSMachine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d-%d-%d", pool, round, worker, i), Namespace: "bench"},
			Spec:       dockerio.MacOSMachineSpec{ClassName: pool},
		}
		obj, err := b.machines.Machine.Create(nsCtx, m, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if obj.(*dockerio.MacOSMachine).Status.IdentityRef == nil {
			return fmt.Errorf("machine %s got no identity: the pool ran dry", m.Name)
		}
		n.Add(1)
		return nil
	})
	return float64(n.Load()) / d.Seconds(), err
}

// allocationP50 times samples machine creates, one at a time, from pool.
func (b *bench) allocationP50(ctx context.Context, pool string, samples int) (time.Duration, error) {
	nsCtx := genericapirequest.WithNamespace(ctx, "bench")
	latencies := make([]time.Duration, 0, samples)
	for i := range samples {
		m := &dockerio.MacOSMachine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("latency-%s-%d", pool, i), Namespace: "bench"},
			Spec:       dockerio.MacOSMachineSpec{ClassName: pool},
		}
		start := time.Now()
		if _, err := b.machines.Machine.Create(nsCtx, m, rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
			return 0, err
		}
		latencies = append(latencies, time.Since(start))
	}
	slices.Sort(latencies)
	return latencies[len(latencies)/2], nil
}

// seed creates pool (with a class of the same name) holding count identities.
func (b *bench) seed(ctx context.Context, pool string, count, clients int) error {
	start := time.Now()
	if err := b.put(ctx, "macosidentitypools", &dockerio.MacOSIdentityPool{
		ObjectMeta: metav1.ObjectMeta{Name: pool, UID: types.UID("bench-pool-" + pool)},
		Spec:       dockerio.MacOSIdentityPoolSpec{Model: "iMacPro1,1"},
	}); err != nil {
		return err
	}
	if err := b.put(ctx, "macosmachineclasses", &dockerio.MacOSMachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: pool, UID: types.UID("bench-class-" + pool)},
		Spec:       dockerio.MacOSMachineClassSpec{ImageName: "sonoma", IdentityPoolName: pool, SMBIOSModel: "iMacPro1,1", Memory: ptr.To(resource.MustParse("8Gi"))},
	}); err != nil {
		return err
	}
	gen := identity.NewGenerator(int64(len(pool))*7919+int64(count), "iMacPro1,1")
	var mu sync.Mutex
	next := func() identity.Values { mu.Lock(); defer mu.Unlock(); return gen.Next() }
	var made atomic.Int64
	clusterCtx := genericapirequest.WithNamespace(ctx, "")
	err := forEach(clients, count, func(i int) error {
		v := next()
		id := &dockerio.MacOSIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%06d", pool, i)},
			Spec: dockerio.MacOSIdentitySpec{PoolName: pool, Model: v.Model, SerialNumber: v.SerialNumber,
				BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
		}
		_, err := b.identities.Identity.Create(clusterCtx, id, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		made.Add(1)
		return err
	})
	fmt.Printf("seeded pool %-10s with %6d identities in %v\n", pool, made.Load(), time.Since(start).Round(time.Second))
	return err
}

func (b *bench) put(ctx context.Context, resource string, obj runtime.Object) error {
	r, err := txn.NewResource(b.getter, dockerio.Resource(resource), false, func() runtime.Object { return obj.DeepCopyObject() })
	if err != nil {
		return err
	}
	key := r.Key("", obj.(metav1.Object).GetName())
	var tx txn.Txn
	if _, err := tx.IfAbsent(key).PutObject(ctx, r, key, obj); err != nil {
		return err
	}
	_, err = txn.Commit(ctx, b.etcd, &tx)
	return err
}

// forClients runs fn in clients workers until d has passed.
func forClients(clients int, d time.Duration, fn func(worker, i int) error) error {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				if err := fn(w, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// forEach runs fn for 0..count-1 in clients workers.
func forEach(clients, count int, fn func(i int) error) error {
	work := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			failed := false
			for i := range work {
				if failed {
					continue // drain, so the sender never blocks
				}
				if err := fn(i); err != nil {
					errs <- err
					failed = true
				}
			}
		}()
	}
	for i := range count {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}
