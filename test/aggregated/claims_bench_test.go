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
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/test/framework"
)

var (
	claimBenchClients = flag.String("bench-claim-clients", "1,10,50", "concurrent clients of BenchmarkClaimBoundThroughKubeAPIServer, comma-separated: each number is a measurement of its own")
	claimBenchBurst   = flag.Int("bench-claim-burst", 50, "objects of each kind one burst of BenchmarkClaimBoundThroughKubeAPIServer creates, shared among its clients, each making its share one after another")
	claimBenchRounds  = flag.Int("bench-claim-rounds", 8, "rounds BenchmarkClaimBoundThroughKubeAPIServer alternates claims, look-alike CRD objects and ConfigMaps over, at each number of clients")
	claimBenchProfB   = flag.Int("bench-claim-profiled-bursts", 6, "with -bench-dockerios-cpuprofile, -bench-dockerios-allocprofile or -bench-kube-apiserver-cpuprofile, bursts of claims BenchmarkClaimBoundThroughKubeAPIServer prepares for the profile after its measured rounds; it makes them until the profile (-bench-dockerios-cpuprofile-duration) ends")
	claimBenchProfC   = flag.Int("bench-claim-profiled-clients", 0, "concurrent clients of the profiled bursts (0: the most -bench-claim-clients names)")
	kubeAPIProfile    = flag.String("bench-kube-apiserver-cpuprofile", "", "write a CPU profile of kube-apiserver during BenchmarkClaimBoundThroughKubeAPIServer's profiled bursts of claims to this file")
	allocProfile      = flag.String("bench-dockerios-allocprofile", "", "write what the DockerIOS apiserver allocates during BenchmarkClaimBoundThroughKubeAPIServer's profiled bursts of claims to this file")
	claimBenchDirect  = flag.Bool("bench-claim-direct", false, "BenchmarkClaimBoundThroughKubeAPIServer also times claims created on the DockerIOS apiserver itself, as kube-apiserver's aggregator sends them (its front-proxy client certificate, the user in headers): a claim without the aggregation hop")
)

// crdClaims is MacOSMachineClaim again, as a CustomResourceDefinition in a
// group of its own: what the same object costs when kube-apiserver serves
// it itself, the anchor a claim's latency is judged against, since both pay
// kube-apiserver's authentication, authorization, admission and etcd write.
var crdClaims = schema.GroupVersionResource{Group: "bench.dockerios.io", Version: "v1alpha1", Resource: "macosmachineclaims"}

// crdClaimsManifest gives the look-alike the shape of v1alpha1's claim
// (pkg/generated/openapi): spec.poolName, spec.className and a label
// selector, a status of the same fields, served through /status. It
// validates structure only: our server's further rules (exactly one of
// poolName and className, names that are names) are a few microseconds of
// Go, not what the comparison is about.
const crdClaimsManifest = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: macosmachineclaims.bench.dockerios.io}
spec:
  group: bench.dockerios.io
  scope: Namespaced
  names: {plural: macosmachineclaims, singular: macosmachineclaim, kind: MacOSMachineClaim, listKind: MacOSMachineClaimList}
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
            properties:
              poolName: {type: string}
              className: {type: string}
              selector:
                type: object
                x-kubernetes-map-type: atomic
                properties:
                  matchLabels: {type: object, additionalProperties: {type: string}}
                  matchExpressions:
                    type: array
                    x-kubernetes-list-type: atomic
                    items:
                      type: object
                      required: [key, operator]
                      properties:
                        key: {type: string}
                        operator: {type: string}
                        values: {type: array, x-kubernetes-list-type: atomic, items: {type: string}}
          status:
            type: object
            properties:
              phase: {type: string, enum: [Bound, Lost, Pending]}
              machineName: {type: string}
              boundTime: {type: string, format: date-time}
              conditions:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [type]
                items:
                  type: object
                  required: [type, status, lastTransitionTime, reason, message]
                  properties:
                    type: {type: string, maxLength: 316}
                    status: {type: string, enum: ["True", "False", Unknown]}
                    observedGeneration: {type: integer, format: int64, minimum: 0}
                    lastTransitionTime: {type: string, format: date-time}
                    reason: {type: string, maxLength: 1024, minLength: 1}
                    message: {type: string, maxLength: 32768}
`

// claimBenchKind is one of the kinds BenchmarkClaimBoundThroughKubeAPIServer
// times, and what it measured of it at one number of clients.
type claimBenchKind struct {
	name   string
	create func(round, i int) error
	lat    []time.Duration
	cpu    cpuTimes // each process's CPU from a burst's start until the control plane is quiet again
	gc     gcCounters
}

// gcCounters are our server's garbage collections and the CPU they took,
// from its /metrics.
type gcCounters struct{ cycles, cpuSeconds float64 }

func (c gcCounters) minus(o gcCounters) gcCounters {
	return gcCounters{c.cycles - o.cycles, c.cpuSeconds - o.cpuSeconds}
}

// dockerIOSGC reads our server's gcCounters through client, a front-proxy
// client of e.frontProxyClient kept for the run: rendering /metrics (and a
// new client's TLS handshake) costs our server some 20 ms of CPU, which
// must not fall inside a burst's CPU window.
func (e *env) dockerIOSGC(b *testing.B, client *http.Client, header http.Header) gcCounters {
	req, err := http.NewRequest(http.MethodGet, e.cp.DockerIOSURL+"/metrics", nil)
	require.NoError(b, err)
	req.Header = header.Clone()
	resp, err := client.Do(req)
	require.NoError(b, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(b, err)
	var c gcCounters
	for _, line := range strings.Split(string(data), "\n") {
		name, value, _ := strings.Cut(line, " ")
		v, _ := strconv.ParseFloat(value, 64)
		switch name {
		case "go_gc_cycles_total_gc_cycles_total":
			c.cycles = v
		case "go_cpu_classes_gc_total_cpu_seconds_total":
			c.cpuSeconds = v
		}
	}
	return c
}

// BenchmarkClaimBoundThroughKubeAPIServer measures, side by side on one
// control plane and one etcd, how long a pool claim takes from the
// client's create call to the client holding it Bound, with a warm
// (Ready, unbound) machine for each claim — against creates of the same
// object as a CRD, which kube-apiserver serves itself (the fair anchor:
// both pay kube-apiserver; the claim also pays the aggregator's proxying,
// our server and its binding), and against ConfigMap creates. It does so
// at each number of concurrent clients of -bench-claim-clients, separately:
// a burst is -bench-claim-burst objects of one kind shared among that many
// clients. The kinds take turns going first, round after round, so that a
// noisy neighbour hits all alike, and every burst starts on a quiet control
// plane. Every claim must come back Bound from its create (docs/reference/api.md
// rule 8): there is no controller here to bind it later.
//
//	go test ./test/aggregated -run '^$' -bench ClaimBoundThroughKubeAPIServer -benchtime 1x -v
func BenchmarkClaimBoundThroughKubeAPIServer(b *testing.B) {
	levels := parseClients(b, *claimBenchClients)
	perBurst, rounds := *claimBenchBurst, *claimBenchRounds
	e := startEnv(b)
	const ns = "claims-bench"
	e.admin.MustRun(b, "", "create", "namespace", ns)
	e.admin.MustRun(b, crdClaimsManifest, "apply", "-f", "-")
	e.admin.MustRun(b, "", "wait", "--for=condition=Established", "crd/"+crdClaims.Resource+"."+crdClaims.Group, "--timeout=60s")
	cfg := framework.RESTConfig(b, e.cp.AdminKubeconfig)
	core, err := kubernetes.NewForConfig(cfg)
	require.NoError(b, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(b, err)
	ctx := context.Background()
	_, err = e.client.DockeriosV1alpha1().MacOSMachinePools(ns).Create(ctx, &v1alpha1.MacOSMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "warm"},
		Spec:       v1alpha1.MacOSMachinePoolSpec{ClassName: className, Replicas: ptr.To(int32(0))},
	}, metav1.CreateOptions{})
	require.NoError(b, err)
	// With -bench-claim-direct, claims made past kube-apiserver take
	// machines from the same pool: twice the machines each round.
	machinesPerRound := perBurst
	if *claimBenchDirect {
		machinesPerRound *= 2
	}
	measured := len(levels) * rounds * machinesPerRound
	e.addIdentities(b, identityPool, "claims-bench", fleetSize, measured, 8)

	extra := 0
	if *benchProfile != "" || *kubeAPIProfile != "" || *allocProfile != "" {
		extra = *claimBenchProfB // bursts of claims profiled after the measured rounds
	}
	e.addIdentities(b, identityPool, "claims-bench-profiled", fleetSize+measured, perBurst*extra, 8)

	// burstNo numbers bursts across levels, so names never repeat.
	warm := func(burstNo int) {
		// Warm machines, Ready as the controller reports them.
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1)) - 1; i < machinesPerRound; i = int(next.Add(1)) - 1 {
					if err := e.warmMachine(ctx, ns, fmt.Sprintf("warm-%d-%03d", burstNo, i)); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatalf("warming the pool: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // the apiserver's view follows its watch cache
	}
	claimThrough := func(client versioned.Interface, name string) error {
		c, err := client.DockeriosV1alpha1().MacOSMachineClaims(ns).Create(ctx, &v1alpha1.MacOSMachineClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1alpha1.MacOSMachineClaimSpec{PoolName: "warm"},
		}, metav1.CreateOptions{})
		if err == nil && (c.Status.Phase != v1alpha1.ClaimBound || c.Status.MachineName == "") {
			err = fmt.Errorf("claim %s came back %s, not Bound at create", c.Name, c.Status.Phase)
		}
		return err
	}
	claim := func(burstNo, i int) error { return claimThrough(e.client, fmt.Sprintf("claim-%d-%03d", burstNo, i)) }
	crd := func(burstNo, i int) error {
		_, err := dyn.Resource(crdClaims).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crdClaims.GroupVersion().String(), "kind": "MacOSMachineClaim",
			"metadata": map[string]any{"name": fmt.Sprintf("claim-%d-%03d", burstNo, i)},
			"spec":     map[string]any{"poolName": "warm"},
		}}, metav1.CreateOptions{})
		return err
	}
	configMap := func(burstNo, i int) error {
		_, err := core.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d-%03d", burstNo, i)},
			Data:       map[string]string{"poolName": "warm"},
		}, metav1.CreateOptions{})
		return err
	}

	var direct versioned.Interface
	if *claimBenchDirect {
		direct = e.directClient(b)
	}

	// kube-controller-manager's garbage collector watches every kind, ours
	// and the CRD's, as in any cluster: measure only once it does, so every
	// run measures the same.
	e.waitForWatches(b, "macosmachines", "macosmachineclaims")
	e.waitForKubeWatch(b, core, crdClaims.Group, crdClaims.Resource)
	pids := e.cp.PIDs()
	metricsClient, metricsHeader := e.frontProxyClient(b)
	type result struct {
		clients           int
		claims, crds, cms []time.Duration
		direct            []time.Duration // claims made past kube-apiserver, with -bench-claim-direct
		cpu               []cpuTimes      // claim, CRD, ConfigMap, and claim direct
		gc                gcCounters      // our server's, in claims' bursts
		gcElsewhere       float64         // our server's collections around the CRDs' and ConfigMaps' bursts
	}
	var results []result
	burstNo := 0
	for _, clients := range levels {
		kinds := []*claimBenchKind{{name: "claim", create: claim, cpu: cpuTimes{}}, {name: "CRD", create: crd, cpu: cpuTimes{}}, {name: "ConfigMap", create: configMap, cpu: cpuTimes{}}}
		if direct != nil {
			kinds = append(kinds, &claimBenchKind{name: "claim direct", cpu: cpuTimes{}, create: func(burstNo, i int) error {
				return claimThrough(direct, fmt.Sprintf("direct-%d-%03d", burstNo, i))
			}})
		}
		for round := range rounds {
			warm(burstNo)
			roundGC := make([]float64, len(kinds)) // our server's collections around this round's bursts, by kind
			// Each burst starts on a quiet control plane — not during what
			// warming the pool, or the burst before, left to do (the garbage
			// collector's and the watch caches' share of those writes) — and
			// the kinds take turns going first.
			for k := range kinds {
				kind := kinds[(round+k)%len(kinds)]
				n := burstNo
				// Our server's collections are read around every burst
				// and its settling, outside its CPU window: a claim
				// burst's are the claims' cost, and one around another
				// kind's burst may be our server taking CPU from it. The
				// read allocates in our server: a collection it sets off
				// ends in the settling, before the burst.
				gcBefore := e.dockerIOSGC(b, metricsClient, metricsHeader)
				settle(b, pids)
				before := readCPU(b, pids)
				kind.lat = append(kind.lat, burst(b, clients, perBurst, func(i int) error { return kind.create(n, i) })...)
				// What the burst set off (watch events, the garbage
				// collector's share) is its cost too.
				settle(b, pids)
				kind.cpu.add(readCPU(b, pids).minus(before))
				gc := e.dockerIOSGC(b, metricsClient, metricsHeader).minus(gcBefore)
				kind.gc.cycles += gc.cycles
				kind.gc.cpuSeconds += gc.cpuSeconds
				roundGC[(round+k)%len(kinds)] = gc.cycles
			}
			b.Logf("%d clients, round %d: p50/p99 claim → Bound %s/%s, CRD %s/%s, ConfigMap %s/%s; our server's collections around the claims' burst %.0f, the CRDs' %.0f, the ConfigMaps' %.0f", clients, round+1,
				pct(kinds[0].lat[round*perBurst:], 50), pct(kinds[0].lat[round*perBurst:], 99),
				pct(kinds[1].lat[round*perBurst:], 50), pct(kinds[1].lat[round*perBurst:], 99),
				pct(kinds[2].lat[round*perBurst:], 50), pct(kinds[2].lat[round*perBurst:], 99), roundGC[0], roundGC[1], roundGC[2])
			if len(kinds) > 3 {
				b.Logf("%d clients, round %d: p50/p99 claim → Bound past kube-apiserver %s/%s; our server's collections around its burst %.0f", clients, round+1,
					pct(kinds[3].lat[round*perBurst:], 50), pct(kinds[3].lat[round*perBurst:], 99), roundGC[3])
			}
			burstNo++
		}
		r := result{clients: clients, claims: kinds[0].lat, crds: kinds[1].lat, cms: kinds[2].lat, gc: kinds[0].gc,
			gcElsewhere: kinds[1].gc.cycles + kinds[2].gc.cycles}
		for _, k := range kinds {
			r.cpu = append(r.cpu, k.cpu)
		}
		if len(kinds) > 3 {
			r.direct = kinds[3].lat
		}
		results = append(results, r)
	}

	if extra > 0 {
		// Where a claim's time goes in our server and in kube-apiserver:
		// bursts of claims only, under the profilers, until they end.
		clients := *claimBenchProfC
		if clients <= 0 {
			clients = slices.Max(levels)
		}
		machinesPerRound = perBurst // the profiled bursts are of claims through kube-apiserver only
		for r := range extra {
			warm(burstNo + r)
		}
		settle(b, pids)
		var profiles []chan struct{}
		if *benchProfile != "" {
			profiles = append(profiles, e.profileDockerIOS(b, "profile", *benchProfile, *benchProfileD))
		}
		if *kubeAPIProfile != "" {
			profiles = append(profiles, e.profileKubeAPIServer(b, *kubeAPIProfile, *benchProfileD))
		}
		if *allocProfile != "" {
			profiles = append(profiles, e.profileDockerIOS(b, "allocs", *allocProfile, *benchProfileD))
		}
		profiling := time.Now()
		made := 0
		for r := range extra {
			if time.Since(profiling) > *benchProfileD {
				break
			}
			n := burstNo + r
			burst(b, clients, perBurst, func(i int) error { return claim(n, i) })
			made++
		}
		for _, p := range profiles {
			<-p
		}
		b.Logf("profiled %d bursts of %d claims by %d clients over %s (prepared %d)", made, perBurst, clients, *benchProfileD, extra)
	}

	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	fmt.Printf("pool claim create → Bound vs the same object as a CRD vs ConfigMap create, through one kube-apiserver, %d rounds of %d objects of each kind (goal: claim p99 ≤ 1.25 × CRD p99)\n", rounds, perBurst)
	// p99 of 400 latencies is the slowest few of the slowest burst, which
	// a neighbour's spike decides; the p50 ratio shows the steady cost.
	fmt.Printf("%7s  %9s %9s  %9s %9s  %9s %9s  %13s %13s %12s  %s\n", "clients", "claim p50", "claim p99", "CRD p50", "CRD p99", "CM p50", "CM p99",
		"claim/CRD p50", "claim/CRD p99", "claim/CM p99", "p99 goal")
	for _, r := range results {
		c := fmt.Sprintf("c%d", r.clients)
		cp50, cp99 := pct(r.claims, 50), pct(r.claims, 99)
		dp50, dp99 := pct(r.crds, 50), pct(r.crds, 99)
		mp50, mp99 := pct(r.cms, 50), pct(r.cms, 99)
		b.ReportMetric(ms(cp50), "claim-bound-p50-ms-"+c)
		b.ReportMetric(ms(cp99), "claim-bound-p99-ms-"+c)
		b.ReportMetric(ms(dp50), "crd-p50-ms-"+c)
		b.ReportMetric(ms(dp99), "crd-p99-ms-"+c)
		b.ReportMetric(ms(mp50), "configmap-p50-ms-"+c)
		b.ReportMetric(ms(mp99), "configmap-p99-ms-"+c)
		b.ReportMetric(cp50.Seconds()/dp50.Seconds(), "claim/crd-p50-"+c)
		b.ReportMetric(cp99.Seconds()/dp99.Seconds(), "claim/crd-p99-"+c)
		b.ReportMetric(cp99.Seconds()/mp99.Seconds(), "claim/configmap-p99-"+c)
		met := "met"
		if cp99.Seconds() > 1.25*dp99.Seconds() {
			met = "NOT met"
		}
		fmt.Printf("%7d  %9s %9s  %9s %9s  %9s %9s  %13.2f %13.2f %12.2f  %s\n", r.clients,
			cp50.Round(100*time.Microsecond), cp99.Round(100*time.Microsecond), dp50.Round(100*time.Microsecond), dp99.Round(100*time.Microsecond),
			mp50.Round(100*time.Microsecond), mp99.Round(100*time.Microsecond), cp50.Seconds()/dp50.Seconds(), cp99.Seconds()/dp99.Seconds(), cp99.Seconds()/mp99.Seconds(), met)
	}
	if *claimBenchDirect {
		// What is left of the gap without the aggregation hop: a claim
		// made on our server itself, against the CRD and the claim
		// through kube-apiserver.
		fmt.Printf("claims created on the DockerIOS apiserver itself, past kube-apiserver:\n%7s  %10s %10s  %14s %14s  %15s\n",
			"clients", "direct p50", "direct p99", "direct/CRD p50", "direct/CRD p99", "claim/direct p50")
		for _, r := range results {
			c := fmt.Sprintf("c%d", r.clients)
			xp50, xp99 := pct(r.direct, 50), pct(r.direct, 99)
			dp50, dp99 := pct(r.crds, 50), pct(r.crds, 99)
			b.ReportMetric(ms(xp50), "claim-direct-p50-ms-"+c)
			b.ReportMetric(ms(xp99), "claim-direct-p99-ms-"+c)
			b.ReportMetric(xp50.Seconds()/dp50.Seconds(), "claim-direct/crd-p50-"+c)
			b.ReportMetric(xp99.Seconds()/dp99.Seconds(), "claim-direct/crd-p99-"+c)
			fmt.Printf("%7d  %10s %10s  %14.2f %14.2f  %15.2f\n", r.clients, xp50.Round(100*time.Microsecond), xp99.Round(100*time.Microsecond),
				xp50.Seconds()/dp50.Seconds(), xp99.Seconds()/dp99.Seconds(), pct(r.claims, 50).Seconds()/xp50.Seconds())
		}
	}
	// Where the CPU goes, per object: at 10 and 50 clients the two cores
	// are the limit, and latency follows this sum.
	fmt.Printf("CPU per object (ms), from each burst's start until the control plane is quiet again:\n")
	names := results[0].cpu[0].names()
	fmt.Printf("%7s  %-12s", "clients", "kind")
	for _, n := range names {
		fmt.Printf(" %24s", n)
	}
	fmt.Printf(" %8s\n", "total")
	for _, r := range results {
		for k, kind := range []string{"claim", "CRD", "ConfigMap", "claim direct"}[:len(r.cpu)] {
			objects := float64(rounds * perBurst)
			fmt.Printf("%7d  %-12s", r.clients, kind)
			var total time.Duration
			for _, n := range names {
				fmt.Printf(" %24.2f", ms(r.cpu[k][n])/objects)
				total += r.cpu[k][n]
			}
			fmt.Printf(" %8.2f\n", ms(total)/objects)
			if k < 2 {
				b.ReportMetric(ms(total)/objects, fmt.Sprintf("%s-cpu-ms-per-object-c%d", strings.ToLower(kind), r.clients))
			}
		}
	}
	// How often our server collects garbage while it binds claims, and
	// what that costs it (--gc-heap-floor decides the first).
	// Collections around the other kinds' bursts may take CPU from them.
	fmt.Printf("dockerios-apiserver's garbage collection in the claims' bursts:\n%7s  %26s  %22s  %32s\n", "clients", "collections per 1000 claims", "GC CPU per claim (ms)", "collections around other kinds' bursts")
	for _, r := range results {
		claims := float64(rounds * perBurst)
		fmt.Printf("%7d  %26.1f  %22.3f  %32.0f\n", r.clients, r.gc.cycles*1000/claims, r.gc.cpuSeconds*1000/claims, r.gcElsewhere)
		b.ReportMetric(r.gcElsewhere, fmt.Sprintf("dockerios-gc-around-other-bursts-c%d", r.clients))
		b.ReportMetric(r.gc.cycles*1000/claims, fmt.Sprintf("dockerios-gc-per-1000-claims-c%d", r.clients))
		b.ReportMetric(r.gc.cpuSeconds*1000/claims, fmt.Sprintf("dockerios-gc-cpu-ms-per-claim-c%d", r.clients))
	}
}

// parseClients parses -bench-claim-clients.
func parseClients(b *testing.B, s string) []int {
	var levels []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("-bench-claim-clients %q: want positive numbers separated by commas", s)
		}
		levels = append(levels, n)
	}
	return levels
}

// warmMachine creates a machine of the pool warm and reports it Ready, as
// the controller does once its guest agent says so.
func (e *env) warmMachine(ctx context.Context, ns, name string) error {
	machines := e.client.DockeriosV1alpha1().MacOSMachines(ns)
	m, err := machines.Create(ctx, &v1alpha1.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.MachinePoolLabel: "warm"}},
		Spec:       v1alpha1.MacOSMachineSpec{ClassName: className, PoolName: "warm"},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	m.Status.Phase = v1alpha1.MachineReady
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionTrue,
		Reason: "AgentReady", Message: "the guest agent reports Ready", ObservedGeneration: m.Generation})
	_, err = machines.UpdateStatus(ctx, m, metav1.UpdateOptions{})
	return err
}

// waitForKubeWatch waits until somebody (kube-controller-manager's garbage
// collector, once its discovery finds a new CRD) watches resource of group
// on kube-apiserver.
func (e *env) waitForKubeWatch(b *testing.B, core kubernetes.Interface, group, resource string) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		data, err := core.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		require.NoError(b, err)
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "apiserver_longrunning_requests{") && strings.Contains(line, `group="`+group+`"`) &&
				strings.Contains(line, `resource="`+resource+`"`) && strings.Contains(line, `verb="WATCH"`) && !strings.HasSuffix(line, " 0") {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("nobody watches %s.%s on kube-apiserver: is kube-controller-manager's garbage collector running?", resource, group)
		}
		time.Sleep(time.Second)
	}
}

// settle waits, up to 5 s, until the control plane's processes have used
// less than a fifth of a core over two 100 ms windows in a row (their
// CPU time is counted in ticks of 10 ms; idle servers tick now and then).
func settle(b *testing.B, pids map[string]int) {
	b.Helper()
	busy := func(before, after cpuTimes) bool {
		var used time.Duration
		for _, d := range after.minus(before) {
			used += d
		}
		return used > 20*time.Millisecond
	}
	quiet := 0
	prev := readCPU(b, pids)
	for deadline := time.Now().Add(5 * time.Second); quiet < 2 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		now := readCPU(b, pids)
		if busy(prev, now) {
			quiet = 0
		} else {
			quiet++
		}
		prev = now
	}
}

// burst makes n calls f(0..n-1) by clients at once, each client making
// its share one after another, and returns each call's latency; any error
// fails the benchmark.
func burst(b *testing.B, clients, n int, f func(i int) error) []time.Duration {
	b.Helper()
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var next atomic.Int64
	var ready, wg sync.WaitGroup
	start := make(chan struct{})
	for range min(clients, n) {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-start
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				t := time.Now()
				errs[i] = f(i)
				lat[i] = time.Since(t)
			}
		}()
	}
	ready.Wait()
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(b, err)
	}
	return lat
}

// pct is the p-th percentile of lat.
func pct(lat []time.Duration, p int) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(10 * time.Microsecond)
}
