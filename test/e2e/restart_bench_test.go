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
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/test/framework"
	"github.com/dockerios/dockerios/test/harness"
)

var benchRestartMachines = flag.Int("bench-restart-machines", 1000, "Ready machines BenchmarkControllerRestart restarts the controller over")

// Issue 31's goals for a controller restart over a Ready fleet.
const (
	restartWritesGoal = 0.05 // writes per machine in the first full resync
	restartSyncGoal   = time.Minute
	// resyncTail is how long after every machine has been reconciled the
	// first resync's writes are still counted: one agent poll of a Ready
	// machine (30 s), whose answers come back to the machines' queue,
	// and some.
	resyncTail = 35 * time.Second
)

// BenchmarkControllerRestart makes -bench-restart-machines machines Ready,
// counts what the running controller writes in a minute, kills it
// (SIGKILL), creates a pool claim while it is down, starts it again and
// prints:
//   - the writes the controller makes in its first full resync (every
//     create, update, patch and delete it sends, counted by a proxy it
//     talks to kube-apiserver through — the DockerIOS kinds included, via
//     the aggregator), per machine (goal ≤ 0.05), listed by resource, the
//     machine status writes sorted by what they changed, and how many are
//     beyond the periodic refresh of a Ready machine's agent report;
//   - the time from its start until it has reconciled every machine
//     (dockerios_machines_reconciled; goal ≤ 60 s), the leader election
//     Lease the dead process held included;
//
// and fails if any machine's phase leaves Ready or any of its conditions
// changes status meanwhile, or if the claim is not Bound or is lost.
//
//	go test ./test/e2e -run '^$' -bench ControllerRestart -benchtime 1x -v
func BenchmarkControllerRestart(b *testing.B) {
	cp := framework.StartControlPlane(b)
	proxy := startWriteCounter(b, cp)
	e := startOn(b, cp, []string{"--kubeconfig=" + proxy.kubeconfig}, func(c *harness.Config) {
		// As BenchmarkController: agents poll slowly, boots stay quick.
		c.AgentPollInterval = 2 * time.Second
		c.BootDelay, c.SetupDelay = 200*time.Millisecond, 200*time.Millisecond
	})
	n := *benchRestartMachines
	ns := e.namespace(b, "bench-restart")
	claimNS := e.namespace(b, "bench-restart-claim")
	e.fleet(b, "bench-restart", n+1, func(c *v1alpha1.MacOSMachineClass) {
		c.Spec.StartTimeout = &metav1.Duration{Duration: 30 * time.Minute}
	})
	// One warm machine, and never more: the claim made while the
	// controller is down takes it, and the restarted controller has
	// nothing to make for it.
	e.createPool(b, claimNS, "warm", v1alpha1.MacOSMachinePoolSpec{ClassName: "bench-restart", Replicas: ptr.To(int32(1)), MaxMachines: ptr.To(int32(1))})
	start := time.Now()
	e.createMachines(b, ns, "bench-restart", "mac-%04d", n)
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
	e.waitPool(b, claimNS, "warm", 10*time.Minute, func(p *v1alpha1.MacOSMachinePool) bool { return p.Status.ReadyReplicas == 1 })
	b.Logf("%d machines Ready in %s", n, time.Since(start).Round(time.Second))

	// Restart from a quiet fleet: the last machines' way to Ready (and
	// the first agent polls of each) is not the resync's.
	machines := e.watchMachines(b, ns)
	machines.waitQuiet(b, 15*time.Second, 10*time.Minute)

	for range b.N {
		e.restartController(b, proxy, machines, ns, claimNS, n)
	}
	machines.stop()
}

// window is what the controller wrote over a stretch of time.
type window struct {
	length  time.Duration
	writes  writeCounts
	refresh int // machine status writes of the periodic agent refresh
	explain string
}

func (w window) perMachine(n int) (all, beyondRefresh float64) {
	return float64(w.writes.total()) / float64(n), float64(w.writes.total()-w.refresh) / float64(n)
}

// recordWindow counts the controller's writes while during runs.
func recordWindow(proxy *writeCounter, machines *machineWatch, during func()) window {
	before := proxy.snapshot()
	machines.mu.Lock()
	snapshot := map[string]*v1alpha1.MacOSMachine{}
	for k, m := range machines.last {
		snapshot[k] = m
	}
	machines.mu.Unlock()
	proxy.record(true)
	t0 := time.Now()
	during()
	w := window{length: time.Since(t0)}
	proxy.record(false)
	w.writes = proxy.snapshot().minus(before)
	w.explain, w.refresh = proxy.explain(snapshot)
	return w
}

func (e *env) restartController(b *testing.B, proxy *writeCounter, machines *machineWatch, ns, claimNS string, n int) {
	ctx := context.Background()
	// What a running controller writes anyway, over a Ready fleet: the
	// periodic agent refresh of each machine's status.
	baseline := recordWindow(proxy, machines, func() { time.Sleep(time.Minute) })
	baseAll, _ := baseline.perMachine(n)
	b.Logf("before the restart, in %s the controller wrote (%.3f per machine):\n%s\n%s", baseline.length.Round(time.Second), baseAll, baseline.writes, baseline.explain)

	e.ctrl.Kill(b)
	// While the controller is down, a claim on a pool with a Ready
	// machine: the apiserver binds it at create, or the controller does
	// once back.
	claim := fmt.Sprintf("while-down-%d", time.Now().UnixNano())
	c, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(claimNS).Create(ctx, &v1alpha1.MacOSMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim}, Spec: v1alpha1.MacOSMachineClaimSpec{PoolName: "warm"}}, metav1.CreateOptions{})
	require.NoError(b, err)
	b.Logf("claim %s/%s created %s while the controller was down", claimNS, claim, c.Status.Phase)

	machines.resetFlaps()
	var started, synced time.Duration
	resync := recordWindow(proxy, machines, func() {
		t0 := time.Now()
		e.ctrl.Start(b)
		started = time.Since(t0)
		framework.Eventually(b, 10*time.Minute, func() string {
			total, reconciled := e.machinesReconciled(b)
			if total > 0 && reconciled >= total {
				synced = time.Since(t0)
				return ""
			}
			return fmt.Sprintf("%v of %v machines reconciled since the restart", reconciled, total)
		})
		time.Sleep(resyncTail)
	})

	// The claim: still there, Bound to a machine that holds it.
	framework.Eventually(b, 2*time.Minute, func() string {
		c, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(claimNS).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return fmt.Sprintf("claim %s made while the controller was down: %v", claim, err)
		}
		if c.Status.Phase != v1alpha1.ClaimBound {
			return fmt.Sprintf("claim %s made while the controller was down is %s", claim, c.Status.Phase)
		}
		m := e.machine(b, claimNS, c.Status.MachineName)
		if m.Status.ClaimRef == nil || m.Status.ClaimRef.Name != claim {
			return fmt.Sprintf("claim %s is Bound to machine %s, whose claimRef is %+v", claim, m.Name, m.Status.ClaimRef)
		}
		return ""
	})
	if flaps := machines.flaps(); len(flaps) > 0 {
		b.Fatalf("machines flapped across the controller's restart:\n%s", strings.Join(flaps, "\n"))
	}

	all, beyond := resync.perMachine(n)
	b.ReportMetric(all, "writes/machine")
	b.ReportMetric(beyond, "writes-beyond-refresh/machine")
	b.ReportMetric(float64(resync.writes.status())/float64(n), "status-writes/machine")
	b.ReportMetric(synced.Seconds(), "s-to-all-reconciled")
	b.Logf("from its start to %s after every machine was reconciled (%s), the restarted controller wrote:\n%s\n%s",
		resyncTail, resync.length.Round(time.Second), resync.writes, resync.explain)
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Printf("controller restart (SIGKILL) over %d Ready machines: every machine reconciled %s after the start (ready after %s; goal ≤ %s: %s); "+
		"first resync (%s) wrote %d times, %d of them status writes: %.3f writes per machine (goal ≤ %.2f: %s), "+
		"%.3f beyond the periodic agent refresh (%d writes; %s) — a running controller wrote %.3f per machine in %s before the restart; "+
		"no phase or condition flapped; the claim made while it was down (created %s) is Bound\n",
		n, synced.Round(100*time.Millisecond), started.Round(100*time.Millisecond), restartSyncGoal, met(synced <= restartSyncGoal),
		resync.length.Round(time.Second), resync.writes.total(), resync.writes.status(), all, restartWritesGoal, met(all <= restartWritesGoal),
		beyond, resync.writes.total()-resync.refresh, met(beyond <= restartWritesGoal), baseAll, baseline.length.Round(time.Second), c.Status.Phase)
}

// machinesReconciled sums dockerios_machines (every phase) and
// dockerios_machines_reconciled over namespaces.
func (e *env) machinesReconciled(t testing.TB) (total, reconciled float64) {
	for _, line := range strings.Split(e.metrics(t), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch {
		case strings.HasPrefix(f[0], "dockerios_machines{"):
			total += v
		case strings.HasPrefix(f[0], "dockerios_machines_reconciled{"):
			reconciled += v
		}
	}
	return total, reconciled
}

// machineWatch follows the machines of a namespace from a snapshot, and
// notes every change of a Ready machine's phase or of any condition's
// status (a flap) after resetFlaps.
type machineWatch struct {
	w       watch.Interface
	done    chan struct{}
	mu      sync.Mutex
	before  map[string]*v1alpha1.MacOSMachine // at resetFlaps
	last    map[string]*v1alpha1.MacOSMachine
	lastAt  time.Time
	flapped []string
}

func (e *env) watchMachines(b *testing.B, ns string) *machineWatch {
	l, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(b, err)
	w, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Watch(context.Background(), metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	require.NoError(b, err)
	mw := &machineWatch{w: w, done: make(chan struct{}), last: map[string]*v1alpha1.MacOSMachine{}, lastAt: time.Now()}
	for i := range l.Items {
		mw.last[l.Items[i].Name] = &l.Items[i]
	}
	go func() {
		defer close(mw.done)
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*v1alpha1.MacOSMachine)
			if !ok {
				continue
			}
			mw.mu.Lock()
			if old := mw.last[m.Name]; ev.Type != watch.Modified || old == nil || !agentRefresh(statusDiff(&old.Status, &m.Status)) {
				mw.lastAt = time.Now()
			}
			if mw.before != nil {
				if f := flap(mw.last[m.Name], m, ev.Type); f != "" {
					mw.flapped = append(mw.flapped, f)
				}
			}
			mw.last[m.Name] = m
			mw.mu.Unlock()
		}
	}()
	return mw
}

// flap says how m changed from old in a way a restart must not cause.
func flap(old, m *v1alpha1.MacOSMachine, ev watch.EventType) string {
	if ev != watch.Modified || old == nil {
		return fmt.Sprintf("machine %s: %s", m.Name, ev)
	}
	if m.Status.Phase != old.Status.Phase {
		return fmt.Sprintf("machine %s: phase %s → %s", m.Name, old.Status.Phase, m.Status.Phase)
	}
	was := map[string]metav1.ConditionStatus{}
	for _, c := range old.Status.Conditions {
		was[c.Type] = c.Status
	}
	var changed []string
	for _, c := range m.Status.Conditions {
		if s, ok := was[c.Type]; !ok || s != c.Status {
			changed = append(changed, fmt.Sprintf("%s %s → %s (%s)", c.Type, s, c.Status, c.Reason))
		}
		delete(was, c.Type)
	}
	for typ, s := range was {
		changed = append(changed, fmt.Sprintf("%s %s → gone", typ, s))
	}
	if len(changed) > 0 {
		return fmt.Sprintf("machine %s: %s", m.Name, strings.Join(changed, ", "))
	}
	return ""
}

// waitQuiet waits until no machine has changed for quiet, but for the
// periodic agent refresh (which never stops).
func (mw *machineWatch) waitQuiet(b *testing.B, quiet, within time.Duration) {
	framework.Eventually(b, within, func() string {
		mw.mu.Lock()
		defer mw.mu.Unlock()
		if since := time.Since(mw.lastAt); since < quiet {
			return fmt.Sprintf("a machine changed %s ago", since.Round(time.Second))
		}
		return ""
	})
}

// resetFlaps takes the machines as they are now as the state that must
// not flap, and forgets earlier flaps.
func (mw *machineWatch) resetFlaps() {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	mw.before = map[string]*v1alpha1.MacOSMachine{}
	for k, m := range mw.last {
		mw.before[k] = m
	}
	mw.flapped = nil
}

func (mw *machineWatch) flaps() []string {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	return append([]string(nil), mw.flapped...)
}

func (mw *machineWatch) stop() {
	mw.w.Stop()
	<-mw.done
}

// writeCounter is a plain-HTTP reverse proxy in front of kube-apiserver
// that the controller is pointed at (with its ServiceAccount's token), so
// that every request it makes — the DockerIOS kinds' too, which reach our
// apiserver through the aggregator — is counted, by verb and resource.
type writeCounter struct {
	kubeconfig string

	mu        sync.Mutex
	counts    writeCounts
	recording bool
	bodies    []recordedWrite
}

type writeKey struct{ verb, group, resource, subresource string }

type writeCounts map[writeKey]int

type recordedWrite struct {
	key       writeKey
	namespace string
	name      string
	body      []byte
}

func startWriteCounter(b *testing.B, cp *framework.ControlPlane) *writeCounter {
	// Go runs a package's tests in its directory.
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(b, err)
	framework.NewKubectl(b, cp.AdminKubeconfig).MustRun(b, "", "apply", "-f", filepath.Join(root, "artifacts", "deploy", "09-controller.yaml"))
	cfg, err := clientcmd.LoadFromFile(cp.ServiceAccountKubeconfig(b, "dockerios-controller"))
	require.NoError(b, err)
	ctx := cfg.Contexts[cfg.CurrentContext]
	cluster, user := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
	target, err := url.Parse(cluster.Server)
	require.NoError(b, err)
	pool := x509.NewCertPool()
	require.True(b, pool.AppendCertsFromPEM(cluster.CertificateAuthorityData))

	token := user.Token
	user.Token = ""
	wc := &writeCounter{counts: writeCounts{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 100}
	rp.FlushInterval = -1 // watches stream
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if verb := writeVerb(r.Method); verb != "" {
			wc.count(verb, r)
		}
		// client-go sends no bearer token over plain HTTP: the proxy
		// authenticates as the controller's ServiceAccount instead.
		r.Header.Set("Authorization", "Bearer "+token)
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	b.Cleanup(func() { _ = srv.Close() })

	cluster.Server = "http://" + l.Addr().String()
	cluster.CertificateAuthorityData = nil
	wc.kubeconfig = filepath.Join(b.TempDir(), "controller-via-counter.kubeconfig")
	require.NoError(b, clientcmd.WriteToFile(*cfg, wc.kubeconfig))
	return wc
}

func writeVerb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

func (wc *writeCounter) count(verb string, r *http.Request) {
	k, ns, name := writeKeyOf(verb, r.URL.Path)
	var body []byte
	wc.mu.Lock()
	recording := wc.recording
	wc.counts[k]++
	wc.mu.Unlock()
	if recording && r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		wc.mu.Lock()
		wc.bodies = append(wc.bodies, recordedWrite{key: k, namespace: ns, name: name, body: body})
		wc.mu.Unlock()
	}
}

// writeKeyOf reads group, resource, subresource, namespace and name from
// a request path: /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]] or
// /apis/GROUP/VERSION/[namespaces/NS/]RESOURCE[/NAME[/SUB]].
func writeKeyOf(verb, path string) (k writeKey, namespace, name string) {
	k.verb = verb
	p := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(p) >= 2 && p[0] == "api":
		p = p[2:]
	case len(p) >= 3 && p[0] == "apis":
		k.group, p = p[1], p[3:]
	default:
		k.resource = path
		return k, "", ""
	}
	if len(p) >= 3 && p[0] == "namespaces" {
		namespace, p = p[1], p[2:]
	}
	if len(p) > 0 {
		k.resource = p[0]
	}
	if len(p) > 1 {
		name = p[1]
	}
	if len(p) > 2 {
		k.subresource = p[2]
	}
	return k, namespace, name
}

func (wc *writeCounter) record(on bool) {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	wc.recording = on
	if on {
		wc.bodies = nil
	}
}

func (wc *writeCounter) snapshot() writeCounts {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	out := writeCounts{}
	for k, v := range wc.counts {
		out[k] = v
	}
	return out
}

func (c writeCounts) minus(o writeCounts) writeCounts {
	out := writeCounts{}
	for k, v := range c {
		if d := v - o[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// total is every write but the leader election Lease's renewals, which a
// controller makes every few seconds whatever the fleet.
func (c writeCounts) total() int {
	n := 0
	for k, v := range c {
		if k.resource != "leases" {
			n += v
		}
	}
	return n
}

func (c writeCounts) status() int {
	n := 0
	for k, v := range c {
		if k.subresource == "status" {
			n += v
		}
	}
	return n
}

func (c writeCounts) String() string {
	var lines []string
	for k, v := range c {
		res := k.resource
		if k.group != "" {
			res += "." + k.group
		}
		if k.subresource != "" {
			res += "/" + k.subresource
		}
		note := ""
		if k.resource == "leases" {
			note = " (leader election; not counted)"
		}
		lines = append(lines, fmt.Sprintf("  %6d %s %s%s", v, k.verb, res, note))
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		return "  none"
	}
	return strings.Join(lines, "\n")
}

// explain sorts the machine status writes recorded by what each changed
// against the machine in before, and says how many were only the
// periodic agent refresh; a write that changes nothing is a no-op
// rewrite. Other writes are listed, the first few with their bodies.
func (wc *writeCounter) explain(before map[string]*v1alpha1.MacOSMachine) (summary string, refresh int) {
	wc.mu.Lock()
	bodies := append([]recordedWrite(nil), wc.bodies...)
	wc.mu.Unlock()
	what := map[string]int{}
	var other []string
	for _, r := range bodies {
		if r.key.resource == "leases" {
			continue
		}
		if r.key.resource != "macosmachines" || r.key.subresource != "status" || r.key.verb != "update" {
			if len(other) < 20 {
				other = append(other, fmt.Sprintf("  %s %s %s/%s %s: %.300s", r.key.verb, r.key.resource, r.namespace, r.name, r.key.subresource, r.body))
			}
			continue
		}
		var m v1alpha1.MacOSMachine
		if err := json.Unmarshal(r.body, &m); err != nil {
			what["(undecodable: "+err.Error()+")"]++
			continue
		}
		old := before[m.Name]
		if old == nil || old.Namespace != r.namespace {
			what["(a machine outside the fleet)"]++
			continue
		}
		diffs := statusDiff(&old.Status, &m.Status)
		switch {
		case len(diffs) == 0:
			what["nothing (a no-op rewrite)"]++
		case agentRefresh(diffs):
			refresh++
			what[strings.Join(diffs, ", ")+" (the periodic agent refresh)"]++
		default:
			what[strings.Join(diffs, ", ")]++
		}
	}
	var lines []string
	for k, v := range what {
		lines = append(lines, fmt.Sprintf("  %6d machine status writes changed %s", v, k))
	}
	sort.Strings(lines)
	return strings.Join(append(lines, other...), "\n"), refresh
}

// statusDiff names the status fields (the agent report's and conditions'
// fields one by one) that differ between a and b.
func statusDiff(a, b *v1alpha1.MacOSMachineStatus) []string {
	var diffs []string
	fields := func(prefix string, av, bv reflect.Value, skip string) {
		for i := range av.NumField() {
			name := av.Type().Field(i).Name
			if name != skip && !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
				diffs = append(diffs, prefix+name)
			}
		}
	}
	fields("", reflect.ValueOf(*a), reflect.ValueOf(*b), "Conditions")
	if a.Agent != nil && b.Agent != nil && slices.Contains(diffs, "Agent") {
		diffs = slices.DeleteFunc(diffs, func(s string) bool { return s == "Agent" })
		fields("Agent.", reflect.ValueOf(*a.Agent), reflect.ValueOf(*b.Agent), "")
	}
	conds := map[string]metav1.Condition{}
	for _, c := range a.Conditions {
		conds[c.Type] = c
	}
	for _, c := range b.Conditions {
		o, ok := conds[c.Type]
		switch {
		case !ok:
			diffs = append(diffs, "+condition "+c.Type)
		case o.Status != c.Status:
			diffs = append(diffs, "condition "+c.Type+".status")
		case o.Reason != c.Reason || o.Message != c.Message:
			diffs = append(diffs, "condition "+c.Type+".reason/message")
		case !o.LastTransitionTime.Equal(&c.LastTransitionTime):
			diffs = append(diffs, "condition "+c.Type+".lastTransitionTime")
		case o.ObservedGeneration != c.ObservedGeneration:
			diffs = append(diffs, "condition "+c.Type+".observedGeneration")
		}
		delete(conds, c.Type)
	}
	for typ := range conds {
		diffs = append(diffs, "-condition "+typ)
	}
	sort.Strings(diffs)
	return diffs
}

// agentRefresh says whether a status change is only the agent report's
// times and free disk space: the controller's periodic refresh of a Ready
// machine's report (every ten minutes, never in a restarted controller's
// first five), which it makes with or without a restart.
func agentRefresh(diffs []string) bool {
	for _, d := range diffs {
		switch d {
		case "Agent.LastSeenTime", "Agent.ObservedTime", "Agent.LastProgressTime", "Agent.DiskFreeBytes":
		default:
			return false
		}
	}
	return len(diffs) > 0
}
