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

package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/test/framework"
	"github.com/dockerios/dockerios/test/harness"
)

var (
	benchMachines = flag.Int("bench-machines", 1000, "machines created for the reconciles/CPU per machine figure")
	benchClaims   = flag.Int("bench-claims", 50, "concurrent claims against a warm pool of as many machines")
)

// BenchmarkController prints, from one run (use -benchtime 1x):
//   - claim → Bound latency, p50 and p99, for -bench-claims claims made at
//     once against a warm pool of as many Ready machines (goal p99 < 100 ms);
//   - reconciles and controller CPU per machine from create to Ready, over
//     -bench-machines machines (goal ≤ 12 reconciles).
//
// Everything runs on this machine's cores: the control plane, the
// controller, the harness and one real agent process per guest.
func BenchmarkController(b *testing.B) {
	e := start(b, func(c *harness.Config) {
		// Many guests: agents poll slowly so they do not crowd out what is
		// measured; boots stay quick.
		c.AgentPollInterval = 2 * time.Second
		c.BootDelay, c.SetupDelay = 200*time.Millisecond, 200*time.Millisecond
	})
	for range b.N {
		e.benchClaims(b, *benchClaims)
		e.benchMachines(b, *benchMachines)
	}
}

func (e *env) benchClaims(b *testing.B, n int) {
	ns := e.namespace(b, "bench-claims")
	e.fleet(b, "bench-claims", 2*n, nil)
	ctx := context.Background()
	_, err := e.client.DockeriosV1alpha1().MacOSMachinePools(ns).Create(ctx, &v1alpha1.MacOSMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "warm"},
		Spec:       v1alpha1.MacOSMachinePoolSpec{ClassName: "bench-claims", Replicas: ptr.To(int32(n)), MaxMachines: ptr.To(int32(n))},
	}, metav1.CreateOptions{})
	require.NoError(b, err)
	e.waitPool(b, ns, "warm", 10*time.Minute, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == int32(n) })

	w, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(b, err)
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	bound := map[string]time.Duration{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			c, ok := ev.Object.(*v1alpha1.MacOSMachineClaim)
			if !ok || ev.Type == watch.Deleted || c.Status.Phase != v1alpha1.ClaimBound {
				continue
			}
			now := time.Now()
			mu.Lock()
			if at, ok := created[c.Name]; ok {
				if _, seen := bound[c.Name]; !seen {
					bound[c.Name] = now.Sub(at)
				}
			}
			all := len(bound) == n
			mu.Unlock()
			if all {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	var boundAtCreate atomic.Int64
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("claim-%03d", i)
			mu.Lock()
			created[name] = time.Now()
			mu.Unlock()
			c, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).Create(ctx, &v1alpha1.MacOSMachineClaim{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MacOSMachineClaimSpec{PoolName: "warm"}}, metav1.CreateOptions{})
			if err != nil {
				b.Error(err)
			} else if c.Status.Phase == v1alpha1.ClaimBound {
				boundAtCreate.Add(1)
			}
		}()
	}
	wg.Wait()
	b.Logf("%d of %d claims came back Bound from their create; the controller bound the rest", boundAtCreate.Load(), n)
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatalf("only %d of %d claims bound", len(bound), n)
	}
	var lat []time.Duration
	for _, d := range bound {
		lat = append(lat, d)
	}
	slices.Sort(lat)
	p50, p99 := lat[len(lat)*50/100], lat[min(len(lat)-1, len(lat)*99/100)]
	b.ReportMetric(float64(p50.Milliseconds()), "claim-bound-p50-ms")
	b.ReportMetric(float64(p99.Milliseconds()), "claim-bound-p99-ms")
	b.Logf("claim → Bound, %d concurrent claims against %d warm machines: p50 %s, p99 %s (goal p99 < 100ms), max %s",
		n, n, p50.Round(time.Millisecond), p99.Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))

	// Tear the pool down so its guests do not weigh on the next figure.
	require.NoError(b, e.client.DockeriosV1alpha1().MacOSMachinePools(ns).Delete(ctx, "warm", metav1.DeleteOptions{}))
	require.NoError(b, e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	require.NoError(b, e.client.DockeriosV1alpha1().MacOSMachines(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	framework.Eventually(b, 10*time.Minute, func() string {
		if k := len(e.machines(b, ns)); k > 0 {
			return fmt.Sprintf("%d machines left", k)
		}
		return ""
	})
}

func (e *env) benchMachines(b *testing.B, n int) {
	ns := e.namespace(b, "bench-scale")
	// The figure is reconciles, not time: a harness slowed by a
	// thousand guests on two cores must not fail machines.
	e.fleet(b, "bench-scale", n, func(c *v1alpha1.MacOSMachineClass) {
		c.Spec.StartTimeout = &metav1.Duration{Duration: 30 * time.Minute}
	})
	reconciles0, cpu0 := e.reconciles(b), e.controllerCPU(b)
	writes := e.countWritesToReady(b, ns)
	start := time.Now()
	e.createMachines(b, ns, "bench-scale", "mac-%04d", n)
	framework.Eventually(b, 60*time.Minute, func() string {
		ready := 0
		for _, m := range e.machines(b, ns) {
			if m.Status.Phase == v1alpha1.MachineReady {
				ready++
			}
		}
		if ready < n {
			time.Sleep(2 * time.Second)
			return fmt.Sprintf("%d of %d machines Ready", ready, n)
		}
		return ""
	})
	took := time.Since(start)
	reconciles := e.reconciles(b) - reconciles0
	cpu := e.controllerCPU(b) - cpu0
	toReady := e.histogramMean(b, "dockerios_machine_reconciles_to_ready")
	writesToReady := writes()
	b.ReportMetric(writesToReady, "writes-to-ready/machine")
	b.ReportMetric(reconciles/float64(n), "reconciles/machine")
	b.ReportMetric(toReady, "reconciles-to-ready/machine")
	b.ReportMetric(cpu.Seconds()*1000/float64(n), "controller-cpu-ms/machine")
	b.Logf("%d machines created → all Ready in %s: %.1f reconciles per machine from its creation to its Ready (goal ≤ 12); "+
		"%.1f machine reconciles in all per machine while the last ones came up (polls of machines already Ready included); "+
		"controller CPU %.1f ms per machine (%s in all)",
		n, took.Round(time.Second), toReady, reconciles/float64(n), cpu.Seconds()*1000/float64(n), cpu.Round(time.Millisecond))
	b.Logf("%.1f writes per machine from its creation to its Ready (each an etcd write and a watch event to every client)", writesToReady)
}

// countWritesToReady watches the machines of ns and counts, per machine,
// the writes after its creation up to the one that shows it Ready; the
// returned func stops and gives their mean.
func (e *env) countWritesToReady(b *testing.B, ns string) func() float64 {
	w, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Watch(context.Background(), metav1.ListOptions{})
	require.NoError(b, err)
	counts, ready := map[string]int{}, map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*v1alpha1.MacOSMachine)
			if !ok || ev.Type != watch.Modified || ready[m.Name] {
				continue
			}
			counts[m.Name]++
			ready[m.Name] = m.Status.Phase == v1alpha1.MachineReady
		}
	}()
	return func() float64 {
		w.Stop()
		<-done
		total := 0
		for _, c := range counts {
			total += c
		}
		return float64(total) / float64(max(len(counts), 1))
	}
}

// reconciles reads the controller's machine reconcile counter.
func (e *env) reconciles(t testing.TB) float64 {
	for _, line := range strings.Split(e.metrics(t), "\n") {
		if strings.HasPrefix(line, `dockerios_controller_reconciles_total{queue="machines"}`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			require.NoError(t, err)
			return v
		}
	}
	return 0
}

// histogramMean reads a histogram's sum/count from the controller's metrics
// (this environment's controller started fresh, so it covers the run).
func (e *env) histogramMean(t testing.TB, name string) float64 {
	var sum, count float64
	for _, line := range strings.Split(e.metrics(t), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case name + "_sum":
			sum = v
		case name + "_count":
			count = v
		}
	}
	if count == 0 {
		return 0
	}
	return sum / count
}

// controllerCPU is the controller process's user+system CPU time so far.
func (e *env) controllerCPU(t testing.TB) time.Duration {
	pid, ok := e.cp.PIDs()["dockerios-controller"]
	require.True(t, ok, "controller not running")
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	require.NoError(t, err)
	// Fields after the command name (which is in parentheses).
	f := strings.Fields(string(raw)[strings.LastIndexByte(string(raw), ')')+2:])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}
