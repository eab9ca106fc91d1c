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
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	acv1alpha1 "github.com/dockerios/dockerios/pkg/generated/applyconfiguration/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	typedv1alpha1 "github.com/dockerios/dockerios/pkg/generated/clientset/versioned/typed/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/pkg/identityimport"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
	"github.com/dockerios/dockerios/pkg/storage/txn"
	"github.com/dockerios/dockerios/test/framework"
)

var (
	modelSeed = flag.Int64("model-seed", 0, "seed of TestModel's random operations and kills (0: time-based)")
	modelOps  = flag.Int("model-ops", 2000, "how many write operations TestModel makes (at least)")
)

const (
	modelNS      = metav1.NamespaceDefault
	modelWorkers = 4
	// Every checkEvery operations the invariants are checked at one etcd
	// revision while the writers go on; every quietEvery operations the
	// writers pause for the checks that need a quiet system.
	checkEvery = 20
	quietEvery = 250
	// The test stops early once this many failures are recorded.
	maxModelFailures = 40
	fieldManager     = "model-test"
)

var (
	// Identity pools by class, and classes by MacOSMachinePool.
	modelClassPool = map[string]string{"standard": "imacpro", "second": "imacpro-b"}
	modelPoolClass = map[string]string{"warm-a": "standard", "warm-b": "second"}
	modelClasses   = []string{"standard", "second"}
	modelIDPools   = []string{"imacpro", "imacpro-b"}
	modelMMPools   = []string{"warm-a", "warm-b"}
	dryRunAll      = []string{metav1.DryRunAll}
)

// TestModel is a randomized model-based test of the identity ledger and of
// claims: several clients make random writes of every kind (creates and
// server-side applies of identities, some duplicating another identity's
// values; machine creates and applies; Failed; deletes as the controller
// makes them; Ready; claims, binds and claim deletes; each now and then as
// a dry run) through two apiserver replicas sharing one etcd, while the
// replicas are SIGKILLed and restarted at random moments. After every few
// operations it reads etcd at one revision and checks the ledger's
// invariants; it watches machines in etcd to check that waiting machines
// are served oldest first; when the writers pause it checks pool counts,
// audits index keys, and makes each kind of write as a dry run and then for
// real, which must answer alike and of which the dry run must write nothing.
//
// -model-seed replays a run's choices (the interleaving of the clients is
// the machine's); -model-ops sets how many operations it makes.
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % (1 << 40)
	}
	t.Logf("seed %d (rerun with -model-seed=%d), %d operations", seed, seed, *modelOps)
	defer func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d: rerun with go test ./test/integration/ -run TestModel -v -model-seed=%d", seed, seed)
		}
	}()
	start := time.Now()

	etcdDir := t.TempDir()
	etcd, err := embeddedetcd.Start(filepath.Join(etcdDir, "data"), os.Stderr)
	if err != nil {
		t.Fatalf("seed %d: starting etcd: %v", seed, err)
	}
	t.Cleanup(etcd.Stop)

	h := newModelHarness(t, seed, etcd.ClientURL)
	h.startReplica(0)
	h.startReplica(1)
	h.setUp()

	// Watch machines from before the first one exists.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := h.etcd.Get(ctx, "/registry/", clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		h.watcher.run(ctx, resp.Header.Revision+1)
	}()

	// Kills at seeded moments, every 150-400 operations.
	kr := rand.New(rand.NewPCG(uint64(seed), 0xdead))
	for n := 150 + kr.IntN(251); n < *modelOps; n += 150 + kr.IntN(251) {
		h.killAt[int64(n)] = true
	}
	pr := rand.New(rand.NewPCG(uint64(seed), 0xfa5e))
	for n := int64(0); n < int64(*modelOps)+1000; {
		n += 100 + int64(pr.IntN(200))
		h.phaseEnds = append(h.phaseEnds, n)
	}
	killCh := make(chan struct{}, 1)
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		h.killer(ctx, killCh, kr)
	}()

	var wg sync.WaitGroup
	for w := range modelWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			(&modelWorker{h: h, id: w, r: rand.New(rand.NewPCG(uint64(seed), uint64(w+1)))}).run(killCh)
		}()
	}
	wg.Wait()
	close(killCh)
	<-killerDone
	writersDone := time.Now()

	// The final checkpoint: everything, with the writers stopped.
	h.quietCheckpoint("at the end", true)
	cancel()
	<-watchDone

	h.report(writersDone.Sub(start), time.Since(start))
}

// ---------------------------------------------------------------------------
// The harness: two replicas, one etcd, the model of what exists, the stats.

type modelHarness struct {
	t       *testing.T
	seed    int64
	etcdURL string

	replicas [2]*modelReplica
	etcd     *clientv3.Client
	ledger   *identityledger.Ledger
	res      struct{ identities, machines, claims, pools *txn.Resource }

	genMu sync.Mutex
	gen   *identity.Generator

	model   modelObjects
	stats   modelStats
	watcher *handoffWatcher

	// gate: writers hold it for reading around each operation; a quiet
	// checkpoint holds it for writing.
	gate sync.RWMutex
	// killMu is held from a kill to the end of the restart.
	killMu sync.Mutex
	killAt map[int64]bool
	// phaseEnds: where each demand or supply phase ends (they alternate,
	// demand first)
	phaseEnds []int64
	kills     atomic.Int32
	retries   atomic.Int32 // requests sent again after getting no answer
	sent      atomic.Int64
	failures  atomic.Int32
	checks    atomic.Int32
	// checks that found machines waiting, and the most found at once
	checksWaiting, maxWaiting atomic.Int32
	quiets                    atomic.Int32
	qr                        *rand.Rand // the quiet checkpoints' choices
}

type modelReplica struct {
	dataDir string
	mu      sync.RWMutex
	server  *framework.LocalServer
	client  versioned.Interface // nil while the replica is down
}

func (r *modelReplica) get() versioned.Interface {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.client
}

func newModelHarness(t *testing.T, seed int64, etcdURL string) *modelHarness {
	h := &modelHarness{t: t, seed: seed, etcdURL: etcdURL, killAt: map[int64]bool{},
		gen: identity.NewGenerator(seed, "iMacPro1,1"), qr: rand.New(rand.NewPCG(uint64(seed), 0x9e1e7))}
	for i := range h.replicas {
		h.replicas[i] = &modelReplica{dataDir: t.TempDir()}
	}
	client, err := txn.NewClient(storagebackend.TransportConfig{ServerList: []string{etcdURL}})
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	t.Cleanup(func() { client.Close() })
	h.etcd = client
	getter := registrytest.RESTOptionsGetterFor(etcdURL)
	h.ledger, _ = registrytest.NewLedger(t, getter)
	newRes := func(resource string, namespaced bool, f func() runtime.Object) *txn.Resource {
		r, err := txn.NewResource(getter, dockerio.Resource(resource), namespaced, f)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		return r
	}
	h.res.identities = newRes("macosidentities", false, func() runtime.Object { return &dockerio.MacOSIdentity{} })
	h.res.machines = newRes("macosmachines", true, func() runtime.Object { return &dockerio.MacOSMachine{} })
	h.res.claims = newRes("macosmachineclaims", true, func() runtime.Object { return &dockerio.MacOSMachineClaim{} })
	h.res.pools = newRes("macosidentitypools", false, func() runtime.Object { return &dockerio.MacOSIdentityPool{} })
	h.model = modelObjects{attempted: map[string]bool{}}
	h.model.identities.init()
	h.model.machines.init()
	h.model.claims.init()
	h.stats.byKind = map[string]*kindStats{}
	h.watcher = &handoffWatcher{h: h, machines: map[string]watchedMachine{}}
	return h
}

// fail records a broken rule, with the seed.
func (h *modelHarness) fail(format string, args ...any) {
	if n := h.failures.Add(1); n > 3*maxModelFailures {
		return
	}
	h.t.Errorf("seed %d: "+format, append([]any{h.seed}, args...)...)
}

// startReplica starts (or restarts, on its data dir) replica i.
func (h *modelHarness) startReplica(i int) {
	r := h.replicas[i]
	// The periodic repair would mend drift before the checks see it; it
	// still runs once at every start.
	s := framework.StartLocalServer(h.t, r.dataDir, "--etcd-servers", h.etcdURL, "--identity-repair-interval", "1h")
	cfg := restConfig(h.t, s.Kubeconfig)
	cfg.Timeout = 2 * time.Minute
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		h.fail("client of replica %d: %v", i, err)
		return
	}
	r.mu.Lock()
	r.server, r.client = s, client
	r.mu.Unlock()
}

// setUp makes a second identity pool and class beside createClassAndPool's,
// and two MacOSMachinePools of no replicas (no controller runs here).
func (h *modelHarness) setUp() {
	t := h.t
	createClassAndPool(t, h.replicas[0].server)
	c := h.replicas[0].get()
	ctx := context.Background()
	_, err := c.DockeriosV1alpha1().MacOSIdentityPools().Create(ctx, &v1alpha1.MacOSIdentityPool{
		ObjectMeta: metav1.ObjectMeta{Name: "imacpro-b"},
		Spec:       v1alpha1.MacOSIdentityPoolSpec{Model: "iMacPro1,1"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("seed %d: %v", h.seed, err)
	}
	_, err = c.DockeriosV1alpha1().MacOSMachineClasses().Create(ctx, &v1alpha1.MacOSMachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: "second"},
		Spec: v1alpha1.MacOSMachineClassSpec{
			CPU:              v1alpha1.CPUSpec{Cores: 2},
			Memory:           ptr.To(resource.MustParse("8Gi")),
			SystemDisk:       v1alpha1.SystemDiskSpec{Size: resource.MustParse("64Gi")},
			ImageName:        "sonoma",
			IdentityPoolName: "imacpro-b",
			SMBIOSModel:      "iMacPro1,1",
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("seed %d: %v", h.seed, err)
	}
	for _, p := range modelMMPools {
		_, err := c.DockeriosV1alpha1().MacOSMachinePools(modelNS).Create(ctx, &v1alpha1.MacOSMachinePool{
			ObjectMeta: metav1.ObjectMeta{Name: p},
			Spec:       v1alpha1.MacOSMachinePoolSpec{ClassName: modelPoolClass[p], Replicas: ptr.To[int32](0)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("seed %d: %v", h.seed, err)
		}
	}
}

func (h *modelHarness) nextValues() identity.Values {
	h.genMu.Lock()
	defer h.genMu.Unlock()
	return h.gen.Next()
}

// isConnectionError says the request did not get an answer from the
// server: its replica was killed under it.
func isConnectionError(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	return !errors.As(err, &status)
}

// call makes one request through a replica chosen by r, and again through
// the other one when the first gave no answer (it was killed). retried
// says an earlier attempt may or may not have been applied.
func (h *modelHarness) call(r *rand.Rand, f func(c versioned.Interface) error) (err error, retried bool) {
	deadline := time.Now().Add(3 * time.Minute)
	i := 0
	if r != nil {
		i = r.IntN(2)
	}
	for {
		c := h.replicas[i].get()
		if c == nil {
			i = 1 - i
			c = h.replicas[i].get()
		}
		if c == nil {
			if time.Now().After(deadline) {
				return errors.New("no replica up"), retried
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		err = f(c)
		if !isConnectionError(err) {
			return err, retried
		}
		retried = true
		h.retries.Add(1)
		if time.Now().After(deadline) {
			return err, retried
		}
		i = 1 - i
		time.Sleep(50 * time.Millisecond)
	}
}

// killer SIGKILLs a replica whenever told to, audits the ledger while the
// other replica goes on writing, and restarts the killed one on its data
// directory after a short pause.
func (h *modelHarness) killer(ctx context.Context, killCh <-chan struct{}, r *rand.Rand) {
	for range killCh {
		func() {
			h.killMu.Lock()
			defer h.killMu.Unlock()
			i := r.IntN(2)
			rep := h.replicas[i]
			rep.mu.Lock()
			s := rep.server
			rep.client = nil
			rep.mu.Unlock()
			s.Kill(h.t)
			n := h.kills.Add(1)
			h.t.Logf("kill %d: SIGKILLed replica %d after %d operations", n, i, h.sent.Load())
			if drifts, err := h.ledger.Audit(ctx); err != nil {
				h.fail("audit after killing replica %d: %v", i, err)
			} else if len(drifts) > 0 {
				h.fail("drift after killing replica %d (after %d operations): %s", i, h.sent.Load(), summarize(drifts))
			}
			time.Sleep(time.Duration(200+r.IntN(1300)) * time.Millisecond)
			h.startReplica(i)
		}()
	}
}

// ---------------------------------------------------------------------------
// What the writers know exists: where they pick the objects they act on.
// It is only a guide; the invariants are read from etcd.

type modelIdentity struct {
	name, pool string
	v          identity.Values
}

type modelMachine struct {
	name, class, pool string // pool: the MacOSMachinePool, if any
}

type modelClaim struct {
	name, pool string
}

type nameSet[T any] struct {
	keys []string
	vals map[string]T
}

func (s *nameSet[T]) init() { s.vals = map[string]T{} }

func (s *nameSet[T]) add(k string, v T) {
	if _, ok := s.vals[k]; ok {
		return
	}
	s.vals[k] = v
	s.keys = append(s.keys, k)
}

func (s *nameSet[T]) remove(k string) {
	if _, ok := s.vals[k]; !ok {
		return
	}
	delete(s.vals, k)
	i := slices.Index(s.keys, k)
	s.keys[i] = s.keys[len(s.keys)-1]
	s.keys = s.keys[:len(s.keys)-1]
}

func (s *nameSet[T]) pick(r *rand.Rand) (T, bool) {
	var zero T
	if len(s.keys) == 0 {
		return zero, false
	}
	return s.vals[s.keys[r.IntN(len(s.keys))]], true
}

type modelObjects struct {
	mu         sync.Mutex
	identities nameSet[modelIdentity]
	machines   nameSet[modelMachine]
	claims     nameSet[modelClaim]
	// attempted: real writes that were sent ("delete/mid/x", "fail/mm/x",
	// "bind/mmclaim/x", ...), which may explain what a dry run cannot.
	attempted map[string]bool
}

func (m *modelObjects) do(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
}

func (m *modelObjects) attempt(key string) { m.do(func() { m.attempted[key] = true }) }

func (m *modelObjects) wasAttempted(key string) (ok bool) {
	m.do(func() { ok = m.attempted[key] })
	return ok
}

// ---------------------------------------------------------------------------
// Statistics

type modelStats struct {
	mu     sync.Mutex
	byKind map[string]*kindStats
}

type kindStats struct {
	sent, ok int
	refused  map[string]int
}

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return fmt.Sprintf("%d %s", status.Status().Code, status.Status().Reason)
	}
	return "no answer"
}

func errCode(err error) int32 {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Code
	}
	return 0
}

func (s *modelStats) record(kind string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.byKind[kind]
	if k == nil {
		k = &kindStats{refused: map[string]int{}}
		s.byKind[kind] = k
	}
	k.sent++
	if err == nil {
		k.ok++
	} else {
		k.refused[outcome(err)]++
	}
}

// ---------------------------------------------------------------------------
// The writers

type modelWorker struct {
	h   *modelHarness
	id  int
	r   *rand.Rand
	seq int
}

type modelOp struct {
	// weight in the demand phases and in the supply phases
	weight, supplyWeight int
	run                  func(w *modelWorker, dry bool) bool // whether it sent a write
	dry                  bool                                // whether it has a dry-run form
}

// In demand phases machines are made faster than identities, so pools run
// out and machines queue for the identities freed or added; in supply
// phases identities are added faster, the queues drain and free identities
// can be deleted.
var modelOpsTable = []modelOp{
	{2, 13, func(w *modelWorker, dry bool) bool { return w.createIdentity(false, false, dry) }, true},
	{5, 5, func(w *modelWorker, dry bool) bool { return w.createIdentity(false, true, dry) }, true},
	{1, 6, func(w *modelWorker, dry bool) bool { return w.createIdentity(true, false, dry) }, true},
	{3, 3, func(w *modelWorker, dry bool) bool { return w.createIdentity(true, true, dry) }, true},
	{6, 6, (*modelWorker).deleteIdentity, true},
	{17, 4, func(w *modelWorker, dry bool) bool { return w.createMachine(false, dry) }, true},
	{7, 2, func(w *modelWorker, dry bool) bool { return w.createMachine(true, dry) }, true},
	{6, 6, (*modelWorker).failMachine, true},
	{9, 9, (*modelWorker).deleteMachine, true},
	{10, 10, func(w *modelWorker, _ bool) bool { return w.readyMachine() }, false},
	{7, 7, func(w *modelWorker, _ bool) bool { return w.createClaim() }, false},
	{2, 4, func(w *modelWorker, _ bool) bool { return w.importIdentity() }, false},
	{10, 10, (*modelWorker).bindClaim, true},
	{5, 5, (*modelWorker).deleteClaim, true},
}

func (w *modelWorker) run(killCh chan<- struct{}) {
	h := w.h
	for h.sent.Load() < int64(*modelOps) && h.failures.Load() < maxModelFailures {
		supply := h.supplyPhase(h.sent.Load())
		total := 0
		for _, op := range modelOpsTable {
			total += op.weightIn(supply)
		}
		x := w.r.IntN(total)
		var op modelOp
		for _, op = range modelOpsTable {
			if x < op.weightIn(supply) {
				break
			}
			x -= op.weightIn(supply)
		}
		dry := op.dry && w.r.IntN(6) == 0
		h.gate.RLock()
		sent := op.run(w, dry)
		h.gate.RUnlock()
		if !sent {
			continue
		}
		n := h.sent.Add(1)
		if n%checkEvery == 0 {
			h.checkNow(fmt.Sprintf("after %d operations", n))
		}
		if n%quietEvery == 0 {
			h.quietCheckpoint(fmt.Sprintf("after %d operations", n), false)
		}
		if h.killAt[n] {
			select {
			case killCh <- struct{}{}:
			default:
			}
		}
	}
}

func (op modelOp) weightIn(supply bool) int {
	if supply {
		return op.supplyWeight
	}
	return op.weight
}

// supplyPhase says whether operation n falls in a supply phase.
func (h *modelHarness) supplyPhase(n int64) bool {
	i := sort.Search(len(h.phaseEnds), func(i int) bool { return h.phaseEnds[i] > n })
	return i%2 == 1
}

func (w *modelWorker) name(prefix string) string {
	w.seq++
	return fmt.Sprintf("%s-w%d-%d", prefix, w.id, w.seq)
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// duplicateOf gives v some of src's values: all of them, or one (the MAC
// with its ROM, which must agree).
func duplicateOf(v, src identity.Values, mode int) (identity.Values, string) {
	switch mode {
	case 0:
		src.Model = v.Model
		return src, "all values"
	case 1:
		v.SerialNumber = src.SerialNumber
		return v, "serialNumber"
	case 2:
		v.BoardSerialNumber = src.BoardSerialNumber
		return v, "boardSerialNumber"
	case 3:
		v.SystemUUID = src.SystemUUID
		return v, "systemUUID"
	default:
		v.MACAddress, v.ROM = src.MACAddress, src.ROM
		return v, "macAddress"
	}
}

func identityObject(name, pool string, v identity.Values) *v1alpha1.MacOSIdentity {
	return &v1alpha1.MacOSIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MacOSIdentitySpec{PoolName: pool, Model: v.Model, SerialNumber: v.SerialNumber,
			BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
	}
}

func identityApply(name, pool string, v identity.Values) *acv1alpha1.MacOSIdentityApplyConfiguration {
	return acv1alpha1.MacOSIdentity(name).WithSpec(acv1alpha1.MacOSIdentitySpec().
		WithPoolName(pool).WithModel(v.Model).WithSerialNumber(v.SerialNumber).
		WithBoardSerialNumber(v.BoardSerialNumber).WithSystemUUID(v.SystemUUID).
		WithMACAddress(v.MACAddress).WithROM(v.ROM))
}

// writeIdentity creates (or server-side applies) an identity.
func writeIdentity(ctx context.Context, c versioned.Interface, apply bool, name, pool string, v identity.Values, dry bool) (*v1alpha1.MacOSIdentity, error) {
	var dryRun []string
	if dry {
		dryRun = dryRunAll
	}
	if apply {
		return c.DockeriosV1alpha1().MacOSIdentities().Apply(ctx, identityApply(name, pool, v),
			metav1.ApplyOptions{FieldManager: fieldManager, Force: true, DryRun: dryRun})
	}
	return c.DockeriosV1alpha1().MacOSIdentities().Create(ctx, identityObject(name, pool, v), metav1.CreateOptions{DryRun: dryRun})
}

func kindName(base string, dry bool) string {
	if dry {
		return base + " (dry run)"
	}
	return base
}

// createIdentity creates or applies a new identity, with fresh values or
// with some of an existing identity's (which must be refused with 409).
func (w *modelWorker) createIdentity(apply, dup, dry bool) bool {
	h, ctx := w.h, context.Background()
	kind := "identity create"
	if apply {
		kind = "identity apply"
	}
	if dup {
		kind += " duplicate"
	}
	kind = kindName(kind, dry)
	pool := pick(w.r, modelIDPools)
	v := h.nextValues()
	var src modelIdentity
	what := ""
	if dup {
		var ok bool
		h.model.do(func() { src, ok = h.model.identities.pick(w.r) })
		if !ok {
			return false
		}
		v, what = duplicateOf(v, src.v, w.r.IntN(5))
	}
	name := w.name("id")
	var out *v1alpha1.MacOSIdentity
	err, retried := h.call(w.r, func(c versioned.Interface) (err error) {
		out, err = writeIdentity(ctx, c, apply, name, pool, v, dry)
		return err
	})
	h.stats.record(kind, err)
	srcGone := dup && h.model.wasAttempted("delete/mid/"+src.name)
	switch {
	case dup && err == nil:
		if !srcGone {
			h.fail("%s: %s duplicating the %s of %s (which nobody deleted) was accepted", kind, name, what, src.name)
		}
		if !dry {
			h.model.do(func() { h.model.identities.add(name, modelIdentity{name, pool, v}) })
		}
	case dup && errCode(err) == 409:
		if !srcGone && !strings.Contains(err.Error(), "MacOSIdentity "+src.name) {
			h.fail("%s: the 409 for %s duplicating the %s of %s does not name it: %v", kind, name, what, src.name, err)
		}
	case dup:
		h.fail("%s: %s duplicating the %s of %s: want 409, got %s: %v", kind, name, what, src.name, outcome(err), err)
	case err == nil:
		if out.Spec.SerialNumber != v.SerialNumber {
			h.fail("%s: %s answered with serial %s, sent %s", kind, name, out.Spec.SerialNumber, v.SerialNumber)
		}
		if !dry {
			h.model.do(func() { h.model.identities.add(name, modelIdentity{name, pool, v}) })
		}
	case retried && apierrors.IsAlreadyExists(err) && !dry:
		h.model.do(func() { h.model.identities.add(name, modelIdentity{name, pool, v}) })
	default:
		h.fail("%s: %s with fresh values: want success, got %s: %v", kind, name, outcome(err), err)
	}
	if dry {
		w.wroteNothing(kind, name, func(c versioned.Interface) error {
			_, err := c.DockeriosV1alpha1().MacOSIdentities().Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
	return true
}

// importIdentity imports one serial-set row as kubectl dockerios identities
// import does (package identityimport): fresh values are created, under a
// name that says nothing of them; a row sharing a value with an identity is
// rejected naming that identity, or, when it is that very identity
// imported before, found already present.
func (w *modelWorker) importIdentity() bool {
	h, ctx := w.h, context.Background()
	pool := pick(w.r, modelIDPools)
	v := h.nextValues()
	kind := "identity import"
	var src modelIdentity
	dup := w.r.IntN(2) == 0
	if dup {
		var ok bool
		h.model.do(func() { src, ok = h.model.identities.pick(w.r) })
		if !ok {
			return false
		}
		v, _ = duplicateOf(v, src.v, w.r.IntN(5))
		kind += " duplicate"
	}
	row := fmt.Sprintf("%q,%q,%q,%q,%q,\"1920\",\"1080\",\"\"\n", v.Model, v.SerialNumber, v.BoardSerialNumber, v.SystemUUID, v.MACAddress)
	name := identityimport.Name(pool, v)
	var results []identityimport.Result
	err, _ := h.call(w.r, func(c versioned.Interface) (err error) {
		results, _, err = (&identityimport.Importer{Client: c, Pool: pool}).Import(ctx, strings.NewReader(row))
		return err
	})
	h.stats.record(kind, err)
	if err != nil {
		h.fail("%s: %s: %v", kind, name, err)
		return true
	}
	if len(results) != 1 {
		h.fail("%s: %s: want one result, got %+v", kind, name, results)
		return true
	}
	res := results[0]
	srcGone := dup && h.model.wasAttempted("delete/mid/"+src.name)
	switch {
	case res.Outcome == identityimport.Created || (res.Outcome == identityimport.AlreadyPresent && !dup):
		// A fresh row, or one a retry after a cut-off call already made.
		if dup && !srcGone {
			h.fail("%s: %s duplicating %s (which nobody deleted) was created", kind, name, src.name)
		}
		if strings.Contains(name, v.SerialNumber) {
			h.fail("%s: the name %s says the serial", kind, name)
		}
		h.model.do(func() { h.model.identities.add(name, modelIdentity{name, pool, v}) })
	case dup && res.Outcome == identityimport.AlreadyPresent && name == src.name:
	case dup && res.Outcome == identityimport.Rejected:
		if !srcGone && !strings.Contains(res.Reason, src.name) {
			h.fail("%s: the rejection of %s duplicating %s does not name it: %s", kind, name, src.name, res.Reason)
		}
	default:
		h.fail("%s: %s (duplicate %v): unexpected %s: %s", kind, name, dup, res.Outcome, res.Reason)
	}
	return true
}

// wroteNothing checks that the object a dry-run create named does not exist.
func (w *modelWorker) wroteNothing(kind, name string, get func(c versioned.Interface) error) {
	err, _ := w.h.call(w.r, get)
	if !apierrors.IsNotFound(err) {
		w.h.fail("%s: after the dry run, %s: want 404, got %s: %v", kind, name, outcome(err), err)
	}
}

// deleteIdentity deletes an identity: refused with 409 while a machine
// holds it.
func (w *modelWorker) deleteIdentity(dry bool) bool {
	h, ctx := w.h, context.Background()
	var id modelIdentity
	var ok bool
	h.model.do(func() { id, ok = h.model.identities.pick(w.r) })
	if !ok {
		return false
	}
	ids := func(c versioned.Interface) typedv1alpha1.MacOSIdentityInterface {
		return c.DockeriosV1alpha1().MacOSIdentities()
	}
	kind := "identity delete"
	var before *v1alpha1.MacOSIdentity
	if dry {
		err, _ := h.call(w.r, func(c versioned.Interface) (err error) {
			before, err = ids(c).Get(ctx, id.name, metav1.GetOptions{})
			return err
		})
		if err != nil {
			before = nil
		} else if before.Status.Allocation != nil {
			kind += " of a held identity"
		} else {
			kind += " of a free identity"
		}
	} else {
		h.model.attempt("delete/mid/" + id.name)
	}
	kind = kindName(kind, dry)
	err, _ := h.call(w.r, func(c versioned.Interface) error {
		return ids(c).Delete(ctx, id.name, metav1.DeleteOptions{DryRun: dryRunIf(dry)})
	})
	h.stats.record(kind, err)
	switch {
	case err == nil && !dry:
		h.model.do(func() { h.model.identities.remove(id.name) })
	case err == nil:
		var after *v1alpha1.MacOSIdentity
		gerr, _ := h.call(w.r, func(c versioned.Interface) (err error) {
			after, err = ids(c).Get(ctx, id.name, metav1.GetOptions{})
			return err
		})
		switch {
		case apierrors.IsNotFound(gerr):
			if !h.model.wasAttempted("delete/mid/" + id.name) {
				h.fail("%s: the dry run deleted %s", kind, id.name)
			}
		case gerr != nil:
			h.fail("%s: reading %s: %v", kind, id.name, gerr)
		case before != nil && before.Status.Allocation != nil && after.ResourceVersion == before.ResourceVersion:
			h.fail("%s: the dry run of deleting %s, held by %s and unchanged since, answered success, not 409",
				kind, id.name, before.Status.Allocation.MachineName)
		}
	case apierrors.IsNotFound(err):
		if !dry {
			h.model.do(func() { h.model.identities.remove(id.name) })
		}
	case errCode(err) == 409:
		if !strings.Contains(err.Error(), "held by MacOSMachine") && !strings.Contains(err.Error(), "concurrent writes") {
			h.fail("%s: %s refused with a 409 that names no machine: %v", kind, id.name, err)
		}
	default:
		h.fail("%s: %s: want success, 404 or 409, got %s: %v", kind, id.name, outcome(err), err)
	}
	return true
}

func dryRunIf(dry bool) []string {
	if dry {
		return dryRunAll
	}
	return nil
}

func machineObject(name, class, pool string) *v1alpha1.MacOSMachine {
	m := &v1alpha1.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: modelNS},
		Spec:       v1alpha1.MacOSMachineSpec{ClassName: class, PoolName: pool},
	}
	if pool != "" {
		m.Labels = map[string]string{v1alpha1.MachinePoolLabel: pool}
	}
	return m
}

func machineApply(name, class, pool string) *acv1alpha1.MacOSMachineApplyConfiguration {
	spec := acv1alpha1.MacOSMachineSpec().WithClassName(class)
	a := acv1alpha1.MacOSMachine(name, modelNS)
	if pool != "" {
		spec.WithPoolName(pool)
		a.WithLabels(map[string]string{v1alpha1.MachinePoolLabel: pool})
	}
	return a.WithSpec(spec)
}

func writeMachine(ctx context.Context, c versioned.Interface, apply bool, name, class, pool string, dry bool) (*v1alpha1.MacOSMachine, error) {
	machines := c.DockeriosV1alpha1().MacOSMachines(modelNS)
	if apply {
		return machines.Apply(ctx, machineApply(name, class, pool), metav1.ApplyOptions{FieldManager: fieldManager, Force: true, DryRun: dryRunIf(dry)})
	}
	return machines.Create(ctx, machineObject(name, class, pool), metav1.CreateOptions{DryRun: dryRunIf(dry)})
}

// allocationProblem says what is wrong with a newly created machine's
// allocation: it holds an identity, or waits (PoolExhausted).
func allocationProblem(m *v1alpha1.MacOSMachine) string {
	c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MachineIdentityAllocated)
	switch {
	case c == nil:
		return "no IdentityAllocated condition"
	case m.Status.IdentityRef != nil && c.Status != metav1.ConditionTrue:
		return fmt.Sprintf("holds %s but IdentityAllocated is %s/%s", m.Status.IdentityRef.Name, c.Status, c.Reason)
	case m.Status.IdentityRef == nil && c.Reason != identityledger.ReasonPoolExhausted:
		return fmt.Sprintf("holds nothing and IdentityAllocated is %s/%s, not PoolExhausted", c.Status, c.Reason)
	}
	return ""
}

// createMachine creates or applies a machine of either class, half of
// them of a MacOSMachinePool.
func (w *modelWorker) createMachine(apply, dry bool) bool {
	h, ctx := w.h, context.Background()
	kind := "machine create"
	if apply {
		kind = "machine apply"
	}
	kind = kindName(kind, dry)
	class, pool := pick(w.r, modelClasses), ""
	if w.r.IntN(2) == 0 {
		pool = pick(w.r, modelMMPools)
		class = modelPoolClass[pool]
	}
	name := w.name("m")
	var out *v1alpha1.MacOSMachine
	err, retried := h.call(w.r, func(c versioned.Interface) (err error) {
		out, err = writeMachine(ctx, c, apply, name, class, pool, dry)
		return err
	})
	h.stats.record(kind, err)
	switch {
	case err == nil:
		if p := allocationProblem(out); p != "" {
			h.fail("%s: %s: %s", kind, name, p)
		}
		if !dry {
			h.model.do(func() { h.model.machines.add(name, modelMachine{name, class, pool}) })
		}
	case retried && apierrors.IsAlreadyExists(err) && !dry:
		h.model.do(func() { h.model.machines.add(name, modelMachine{name, class, pool}) })
	case errCode(err) == 409 && strings.Contains(err.Error(), "too many concurrent writes"):
		// The ledger's answer after losing 1000 races: legitimate, if rare.
	default:
		h.fail("%s: %s of class %s: want success, got %s: %v", kind, name, class, outcome(err), err)
	}
	if dry {
		w.wroteNothing(kind, name, func(c versioned.Interface) error {
			_, err := c.DockeriosV1alpha1().MacOSMachines(modelNS).Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
	return true
}

func (w *modelWorker) pickMachine() (modelMachine, bool) {
	var m modelMachine
	var ok bool
	w.h.model.do(func() { m, ok = w.h.model.machines.pick(w.r) })
	return m, ok
}

// failMachine marks a machine Failed through its status, by merge patch or
// by update: it gives back its identity in the same write.
func (w *modelWorker) failMachine(dry bool) bool {
	h, ctx := w.h, context.Background()
	m, ok := w.pickMachine()
	if !ok {
		return false
	}
	byPatch := w.r.IntN(2) == 0
	kind := "machine fail (status update)"
	if byPatch {
		kind = "machine fail (status merge patch)"
	}
	kind = kindName(kind, dry)
	if !dry {
		h.model.attempt("fail/mm/" + m.name)
	}
	var out *v1alpha1.MacOSMachine
	err, _ := h.call(w.r, func(c versioned.Interface) (err error) {
		machines := c.DockeriosV1alpha1().MacOSMachines(modelNS)
		if byPatch {
			out, err = machines.Patch(ctx, m.name, types.MergePatchType, []byte(`{"status":{"phase":"Failed"}}`),
				metav1.PatchOptions{DryRun: dryRunIf(dry)}, "status")
			return err
		}
		cur, err := machines.Get(ctx, m.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Phase = v1alpha1.MachineFailed
		out, err = machines.UpdateStatus(ctx, cur, metav1.UpdateOptions{DryRun: dryRunIf(dry)})
		return err
	})
	h.stats.record(kind, err)
	switch {
	case err == nil:
		if out.Status.Phase != v1alpha1.MachineFailed || out.Status.IdentityRef != nil {
			h.fail("%s: %s answered phase %s holding %v: want Failed holding nothing", kind, m.name, out.Status.Phase, out.Status.IdentityRef)
		}
	case apierrors.IsNotFound(err):
		if !dry {
			h.model.do(func() { h.model.machines.remove(m.name) })
		}
	case apierrors.IsConflict(err):
	default:
		h.fail("%s: %s: want success, 404 or 409, got %s: %v", kind, m.name, outcome(err), err)
	}
	if dry && err == nil {
		var after *v1alpha1.MacOSMachine
		gerr, _ := h.call(w.r, func(c versioned.Interface) (err error) {
			after, err = c.DockeriosV1alpha1().MacOSMachines(modelNS).Get(ctx, m.name, metav1.GetOptions{})
			return err
		})
		if gerr == nil && after.Status.Phase == v1alpha1.MachineFailed && !h.model.wasAttempted("fail/mm/"+m.name) {
			h.fail("%s: the dry run made %s Failed", kind, m.name)
		}
	}
	return true
}

// deleteMachine deletes a machine as its controller does: delete, then
// remove the teardown finalizer, which gives back its identity.
func (w *modelWorker) deleteMachine(dry bool) bool {
	h, ctx := w.h, context.Background()
	m, ok := w.pickMachine()
	if !ok {
		return false
	}
	kind := kindName("machine delete", dry)
	if !dry {
		h.model.attempt("delete/mm/" + m.name)
	}
	err, _ := h.call(w.r, func(c versioned.Interface) error {
		return c.DockeriosV1alpha1().MacOSMachines(modelNS).Delete(ctx, m.name, metav1.DeleteOptions{DryRun: dryRunIf(dry)})
	})
	if dry {
		h.stats.record(kind, err)
		switch {
		case err == nil:
			var after *v1alpha1.MacOSMachine
			gerr, _ := h.call(w.r, func(c versioned.Interface) (err error) {
				after, err = c.DockeriosV1alpha1().MacOSMachines(modelNS).Get(ctx, m.name, metav1.GetOptions{})
				return err
			})
			attempted := h.model.wasAttempted("delete/mm/" + m.name)
			if gerr == nil && after.DeletionTimestamp != nil && !attempted || apierrors.IsNotFound(gerr) && !attempted {
				h.fail("%s: the dry run deleted %s", kind, m.name)
			}
		case apierrors.IsNotFound(err):
		default:
			h.fail("%s: %s: want success or 404, got %s: %v", kind, m.name, outcome(err), err)
		}
		return true
	}
	if err != nil && !apierrors.IsNotFound(err) {
		h.stats.record(kind, err)
		h.fail("%s: %s: want success or 404, got %s: %v", kind, m.name, outcome(err), err)
		return true
	}
	if err == nil {
		err, _ = h.call(w.r, func(c versioned.Interface) error {
			_, err := c.DockeriosV1alpha1().MacOSMachines(modelNS).Patch(ctx, m.name, types.JSONPatchType,
				[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
			return err
		})
	}
	h.stats.record(kind, err)
	switch {
	case err == nil || apierrors.IsNotFound(err):
		h.model.do(func() { h.model.machines.remove(m.name) })
	case errCode(err) == 422 && strings.Contains(err.Error(), "finalizers"):
		// Another deleter removed the finalizer between our reads.
	default:
		h.fail("%s: removing the finalizer of %s: want success or 404, got %s: %v", kind, m.name, outcome(err), err)
	}
	return true
}

func readyCondition() metav1.Condition {
	return metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionTrue, Reason: "ModelTest",
		Message: "made Ready by the model test", LastTransitionTime: metav1.Now()}
}

// readyMachine makes a machine holding an identity Ready, as the
// controller does when its guest reports, so that claims can be bound to it.
func (w *modelWorker) readyMachine() bool {
	h, ctx := w.h, context.Background()
	var cur *v1alpha1.MacOSMachine
	for range 4 {
		m, ok := w.pickMachine()
		if !ok {
			return false
		}
		err, _ := h.call(w.r, func(c versioned.Interface) (err error) {
			cur, err = c.DockeriosV1alpha1().MacOSMachines(modelNS).Get(ctx, m.name, metav1.GetOptions{})
			return err
		})
		if apierrors.IsNotFound(err) {
			h.model.do(func() { h.model.machines.remove(m.name) })
		}
		if err == nil && cur.Status.IdentityRef != nil && cur.Status.Phase != v1alpha1.MachineReady {
			break
		}
		cur = nil
	}
	if cur == nil {
		return false
	}
	kind := "machine ready"
	h.model.attempt("ready/mm/" + cur.Name)
	cur.Status.Phase = v1alpha1.MachineReady
	meta.SetStatusCondition(&cur.Status.Conditions, readyCondition())
	var out *v1alpha1.MacOSMachine
	err, _ := h.call(w.r, func(c versioned.Interface) (err error) {
		out, err = c.DockeriosV1alpha1().MacOSMachines(modelNS).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	h.stats.record(kind, err)
	switch {
	case err == nil:
		if out.Status.Phase != v1alpha1.MachineReady || out.Status.IdentityRef == nil {
			h.fail("%s: %s answered phase %s holding %v", kind, cur.Name, out.Status.Phase, out.Status.IdentityRef)
		}
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
	default:
		h.fail("%s: %s: want success, 404 or 409, got %s: %v", kind, cur.Name, outcome(err), err)
	}
	return true
}

func (w *modelWorker) createClaim() bool {
	h, ctx := w.h, context.Background()
	pool := pick(w.r, modelMMPools)
	name := w.name("c")
	err, retried := h.call(w.r, func(c versioned.Interface) error {
		_, err := c.DockeriosV1alpha1().MacOSMachineClaims(modelNS).Create(ctx, &v1alpha1.MacOSMachineClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1alpha1.MacOSMachineClaimSpec{PoolName: pool},
		}, metav1.CreateOptions{})
		return err
	})
	h.stats.record("claim create", err)
	if err == nil || retried && apierrors.IsAlreadyExists(err) {
		h.model.do(func() { h.model.claims.add(name, modelClaim{name, pool}) })
	} else {
		h.fail("claim create: %s: want success, got %s: %v", name, outcome(err), err)
	}
	return true
}

func bindable(m *v1alpha1.MacOSMachine) bool {
	return m.Status.Phase == v1alpha1.MachineReady && meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineConditionReady) &&
		m.Status.ClaimRef == nil && m.DeletionTimestamp == nil && !meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineReleased)
}

// bindClaim binds a pending claim to a Ready, unbound machine of its pool,
// both as the server's cache last saw them.
func (w *modelWorker) bindClaim(dry bool) bool {
	h, ctx := w.h, context.Background()
	pool := pick(w.r, modelMMPools)
	var machines []v1alpha1.MacOSMachine
	var claims []v1alpha1.MacOSMachineClaim
	err, _ := h.call(w.r, func(c versioned.Interface) error {
		ml, err := c.DockeriosV1alpha1().MacOSMachines(modelNS).List(ctx, metav1.ListOptions{
			LabelSelector: v1alpha1.MachinePoolLabel + "=" + pool, ResourceVersion: "0"})
		if err != nil {
			return err
		}
		cl, err := c.DockeriosV1alpha1().MacOSMachineClaims(modelNS).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return err
		}
		machines, claims = nil, nil
		for _, m := range ml.Items {
			if bindable(&m) {
				machines = append(machines, m)
			}
		}
		for _, c := range cl.Items {
			if c.Spec.PoolName == pool && c.Status.MachineName == "" && c.DeletionTimestamp == nil {
				claims = append(claims, c)
			}
		}
		return nil
	})
	if err != nil {
		h.fail("claim bind: listing: %v", err)
		return false
	}
	if len(machines) == 0 || len(claims) == 0 {
		return false
	}
	m, c := pick(w.r, machines), pick(w.r, claims)
	kind := kindName("claim bind", dry)
	if !dry {
		h.model.attempt("bind/mmclaim/" + c.Name)
	}
	var out *v1alpha1.MacOSMachineClaim
	err, _ = h.call(w.r, func(cl versioned.Interface) (err error) {
		out, err = cl.DockeriosV1alpha1().MacOSMachineClaims(modelNS).Bind(ctx, c.Name,
			&v1alpha1.MacOSMachineBinding{MachineName: m.Name}, metav1.CreateOptions{DryRun: dryRunIf(dry)})
		return err
	})
	h.stats.record(kind, err)
	switch {
	case err == nil:
		if out.Status.MachineName != m.Name || out.Status.Phase != v1alpha1.ClaimBound {
			h.fail("%s: %s to %s answered machine %q phase %s", kind, c.Name, m.Name, out.Status.MachineName, out.Status.Phase)
		}
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
	default:
		h.fail("%s: %s to %s: want success, 404 or 409, got %s: %v", kind, c.Name, m.Name, outcome(err), err)
	}
	if dry && err == nil {
		var after *v1alpha1.MacOSMachineClaim
		gerr, _ := h.call(w.r, func(cl versioned.Interface) (err error) {
			after, err = cl.DockeriosV1alpha1().MacOSMachineClaims(modelNS).Get(ctx, c.Name, metav1.GetOptions{})
			return err
		})
		if gerr == nil && after.Status.MachineName != "" && !h.model.wasAttempted("bind/mmclaim/"+c.Name) {
			h.fail("%s: the dry run bound %s to %s", kind, c.Name, after.Status.MachineName)
		}
	}
	return true
}

// deleteClaim deletes a claim: its machine, if bound, is Released in the
// same write.
func (w *modelWorker) deleteClaim(dry bool) bool {
	h, ctx := w.h, context.Background()
	var c modelClaim
	var ok bool
	h.model.do(func() { c, ok = h.model.claims.pick(w.r) })
	if !ok {
		return false
	}
	kind := kindName("claim delete", dry)
	if !dry {
		h.model.attempt("delete/mmclaim/" + c.name)
	}
	err, _ := h.call(w.r, func(cl versioned.Interface) error {
		return cl.DockeriosV1alpha1().MacOSMachineClaims(modelNS).Delete(ctx, c.name, metav1.DeleteOptions{DryRun: dryRunIf(dry)})
	})
	h.stats.record(kind, err)
	switch {
	case err == nil || apierrors.IsNotFound(err):
		if !dry {
			h.model.do(func() { h.model.claims.remove(c.name) })
		}
	case apierrors.IsConflict(err):
	default:
		h.fail("%s: %s: want success or 404, got %s: %v", kind, c.name, outcome(err), err)
	}
	if dry && err == nil {
		gerr, _ := h.call(w.r, func(cl versioned.Interface) error {
			_, err := cl.DockeriosV1alpha1().MacOSMachineClaims(modelNS).Get(ctx, c.name, metav1.GetOptions{})
			return err
		})
		if apierrors.IsNotFound(gerr) && !h.model.wasAttempted("delete/mmclaim/"+c.name) {
			h.fail("%s: the dry run deleted %s", kind, c.name)
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Reading etcd at one revision, and the invariants

type modelSnapshot struct {
	rev        int64
	identities map[string]*dockerio.MacOSIdentity
	machines   map[string]*dockerio.MacOSMachine // by name (one namespace)
	created    map[string]int64                  // machine name -> create revision
	claims     map[string]*dockerio.MacOSMachineClaim
	pools      map[string]*dockerio.MacOSIdentityPool
	// queue: the claim queue's keys (<pool>/<claim>, one namespace) and
	// the claim uid each holds.
	queue map[string]string
	// queueCreated: each queue key's create revision (the queue's order).
	queueCreated map[string]int64
	// bindable: the bindable index's keys (<pool>/<machine>, one namespace).
	bindable map[string]bool
	// modRevs: every key under /registry/dockerios.io/ but the identity
	// pools' (whose status is written in the background), by mod revision.
	modRevs map[string]int64
}

func (h *modelHarness) snapshot(ctx context.Context) (*modelSnapshot, error) {
	resp, err := h.etcd.Get(ctx, "/registry/dockerios.io/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	s := &modelSnapshot{rev: resp.Header.Revision, identities: map[string]*dockerio.MacOSIdentity{},
		machines: map[string]*dockerio.MacOSMachine{}, created: map[string]int64{}, claims: map[string]*dockerio.MacOSMachineClaim{},
		pools: map[string]*dockerio.MacOSIdentityPool{}, modRevs: map[string]int64{}, queue: map[string]string{},
		bindable: map[string]bool{}, queueCreated: map[string]int64{}}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		decode := func(r *txn.Resource) (runtime.Object, error) {
			return r.Decode(ctx, key, kv.Value, kv.ModRevision)
		}
		if !strings.HasPrefix(key, h.res.pools.KeyPrefix()) {
			s.modRevs[key] = kv.ModRevision
		}
		switch {
		case strings.HasPrefix(key, modelQueuePrefix):
			s.queue[strings.TrimPrefix(key, modelQueuePrefix)] = string(kv.Value)
			s.queueCreated[strings.TrimPrefix(key, modelQueuePrefix)] = kv.CreateRevision
		case strings.HasPrefix(key, modelBindablePrefix):
			s.bindable[strings.TrimPrefix(key, modelBindablePrefix)] = true
		case strings.HasPrefix(key, h.res.identities.KeyPrefix()):
			obj, err := decode(h.res.identities)
			if err != nil {
				return nil, err
			}
			id := obj.(*dockerio.MacOSIdentity)
			s.identities[id.Name] = id
		case strings.HasPrefix(key, h.res.machines.KeyPrefix()):
			obj, err := decode(h.res.machines)
			if err != nil {
				return nil, err
			}
			m := obj.(*dockerio.MacOSMachine)
			s.machines[m.Name] = m
			s.created[m.Name] = kv.CreateRevision
		case strings.HasPrefix(key, h.res.claims.KeyPrefix()):
			obj, err := decode(h.res.claims)
			if err != nil {
				return nil, err
			}
			c := obj.(*dockerio.MacOSMachineClaim)
			s.claims[c.Name] = c
		case strings.HasPrefix(key, h.res.pools.KeyPrefix()):
			obj, err := decode(h.res.pools)
			if err != nil {
				return nil, err
			}
			p := obj.(*dockerio.MacOSIdentityPool)
			s.pools[p.Name] = p
		}
	}
	return s, nil
}

func machineWaits(m *dockerio.MacOSMachine) bool {
	return m.Status.IdentityRef == nil && m.Status.Phase != dockerio.MachineFailed
}

// machineNeedsIdentity is a waiting machine that is not being deleted: a
// machine being torn down still counts as pending in its pool's status
// (its queue entry goes when the queue next meets it) but no longer needs
// an identity, and a hand-off passes over it.
func machineNeedsIdentity(m *dockerio.MacOSMachine) bool {
	return machineWaits(m) && m.DeletionTimestamp == nil
}

// violations lists every invariant the snapshot breaks (but pool counts,
// which are written a moment after each change).
func (s *modelSnapshot) violations() []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	// 1. An identity is held by at most one machine, which exists and
	// names it back; a machine holds at most one identity, of its
	// class's pool, which names it back. 2. No value in two identities.
	out = append(out, framework.LedgerViolations(modelNS, s.machines, s.identities)...)
	for _, m := range s.machines {
		ref := m.Status.IdentityRef
		if ref == nil {
			continue
		}
		if m.Status.Phase == dockerio.MachineFailed {
			add("inv1: Failed machine %s still holds identity %s", m.Name, ref.Name)
		}
		if id := s.identities[ref.Name]; id != nil && id.Spec.PoolName != modelClassPool[m.Spec.ClassName] {
			add("inv1: machine %s of class %s holds identity %s of pool %s", m.Name, m.Spec.ClassName, id.Name, id.Spec.PoolName)
		}
	}

	// 4. No pool has a free identity and a waiting machine at once.
	free, waiting := map[string][]string{}, map[string][]string{}
	for _, id := range s.identities {
		if id.Status.Allocation == nil {
			free[id.Spec.PoolName] = append(free[id.Spec.PoolName], id.Name)
		}
	}
	for _, m := range s.machines {
		if machineNeedsIdentity(m) {
			p := modelClassPool[m.Spec.ClassName]
			waiting[p] = append(waiting[p], m.Name)
		}
	}
	for p := range free {
		if len(waiting[p]) > 0 {
			add("inv4: pool %s has %d free identities (%v) while %d machines wait (%v)", p, len(free[p]), first(free[p]), len(waiting[p]), first(waiting[p]))
		}
	}

	// 5. A claim is bound to at most one machine, and back.
	boundTo := map[string][]string{}
	for _, m := range s.machines {
		ref := m.Status.ClaimRef
		if ref == nil {
			continue
		}
		boundTo[ref.UID] = append(boundTo[ref.UID], m.Name)
		c := s.claims[ref.Name]
		switch {
		case c == nil || string(c.UID) != ref.UID:
			if !meta.IsStatusConditionTrue(m.Status.Conditions, dockerio.MachineReleased) {
				add("inv5: machine %s is bound to claim %s (uid %s), which is gone, and is not Released", m.Name, ref.Name, ref.UID)
			}
		case c.Status.MachineName != m.Name:
			add("inv5: machine %s is bound to claim %s, whose machine is %q (phase %s)", m.Name, c.Name, c.Status.MachineName, c.Status.Phase)
		case c.Status.Phase == dockerio.ClaimLost && m.DeletionTimestamp == nil:
			add("inv5: machine %s is bound to claim %s, which is Lost, and is not being deleted", m.Name, c.Name)
		case c.Status.Phase != dockerio.ClaimBound && c.Status.Phase != dockerio.ClaimLost:
			add("inv5: machine %s is bound to claim %s, which is %s", m.Name, c.Name, c.Status.Phase)
		case c.Status.Phase == dockerio.ClaimBound && m.DeletionTimestamp != nil:
			add("inv5: machine %s is being deleted, and its claim %s is still Bound (it is Lost from the write that starts the teardown)", m.Name, c.Name)
		}
	}
	for uid, ms := range boundTo {
		if len(ms) > 1 {
			add("inv5: claim uid %s is bound to %d machines: %v", uid, len(ms), ms)
		}
	}
	for _, c := range s.claims {
		name := c.Status.MachineName
		switch {
		case c.Status.Phase == dockerio.ClaimBound && name == "":
			add("inv5: claim %s is Bound to no machine", c.Name)
		case name == "":
		case c.Status.Phase == dockerio.ClaimBound:
			m := s.machines[name]
			if m == nil {
				add("inv5: claim %s is Bound to %s, which is gone (the claim should be Lost)", c.Name, name)
			} else if ref := m.Status.ClaimRef; ref == nil || ref.Name != c.Name || ref.UID != string(c.UID) {
				add("inv5: claim %s is Bound to %s, whose claimRef is %v", c.Name, name, ref)
			}
		case c.Status.Phase == dockerio.ClaimLost:
			if m := s.machines[name]; m != nil && m.DeletionTimestamp == nil {
				add("inv5: claim %s is Lost, but its machine %s exists and is not being deleted (claimRef %v)", c.Name, name, m.Status.ClaimRef)
			}
		default:
			add("inv5: claim %s names machine %s in phase %q", c.Name, name, c.Status.Phase)
		}
	}
	// 5b. The claim queue holds exactly the pool claims still waiting.
	for _, c := range s.claims {
		key := c.Spec.PoolName + "/" + c.Name
		waits := c.Spec.PoolName != "" && c.Status.MachineName == "" && c.DeletionTimestamp == nil && c.Status.Phase != dockerio.ClaimLost
		switch uid, queued := s.queue[key]; {
		case waits && !queued:
			add("inv5b: claim %s waits but is not in its pool's queue", c.Name)
		case waits && uid != string(c.UID):
			add("inv5b: claim %s waits, and its queue entry holds uid %s, not %s", c.Name, uid, c.UID)
		case !waits && queued:
			add("inv5b: claim %s does not wait (phase %s, machine %q) but is in its pool's queue", c.Name, c.Status.Phase, c.Status.MachineName)
		}
	}
	for key := range s.queue {
		if _, name, _ := strings.Cut(key, "/"); s.claims[name] == nil {
			add("inv5b: queue entry %s outlived its claim", key)
		}
	}

	// 6. No claim of a pool waits while a machine of that pool is free
	// (the model's claims have no selector: any free machine of the pool
	// would do). This holds at every revision, with no controller: the
	// write that frees a machine binds the oldest waiting claim, and a
	// claim joins the queue only while no machine is free.
	free6 := map[string][]string{}
	for _, m := range s.machines {
		if machineFree(m) {
			free6[m.Spec.PoolName] = append(free6[m.Spec.PoolName], m.Name)
		}
	}
	for _, c := range s.claims {
		waits := c.Spec.PoolName != "" && c.Status.MachineName == "" && c.DeletionTimestamp == nil && c.Status.Phase != dockerio.ClaimLost
		if ms := free6[c.Spec.PoolName]; waits && len(ms) > 0 {
			add("inv6: claim %s of pool %s is Pending while %d machines of the pool are free: %v", c.Name, c.Spec.PoolName, len(ms), first(ms))
		}
	}
	// 6b. The bindable index holds exactly the free machines.
	for _, m := range s.machines {
		key := m.Spec.PoolName + "/" + m.Name
		if machineFree(m) != s.bindable[key] {
			add("inv6b: machine %s is free: %v, in the bindable index: %v (phase %s, claimRef %v, deleting %v, conditions %v)", m.Name, machineFree(m), s.bindable[key],
				m.Status.Phase, m.Status.ClaimRef, m.DeletionTimestamp != nil, m.Status.Conditions)
		}
	}
	for key := range s.bindable {
		if _, name, _ := strings.Cut(key, "/"); s.machines[name] == nil {
			add("inv6b: bindable index entry %s outlived its machine", key)
		}
	}
	sort.Strings(out)
	return out
}

// modelQueuePrefix is where the model's namespace's claims wait, and
// modelBindablePrefix where its free machines are indexed (see package
// binding).
const (
	modelQueuePrefix    = "/registry/dockerios.io/claim-queue/" + modelNS + "/"
	modelBindablePrefix = "/registry/dockerios.io/bindable-machines/" + modelNS + "/"
)

// machineFree is a machine a claim of its pool could be bound to now.
func machineFree(m *dockerio.MacOSMachine) bool {
	return m.Spec.PoolName != "" && m.DeletionTimestamp == nil && m.Status.ClaimRef == nil &&
		m.Status.Phase == dockerio.MachineReady && meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineConditionReady) &&
		!meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineReleased)
}

func first(xs []string) []string {
	sort.Strings(xs)
	if len(xs) > 5 {
		return xs[:5]
	}
	return xs
}

// poolCountsMismatch compares every identity pool's status with a
// recount from the objects; "" if all agree.
func (s *modelSnapshot) poolCountsMismatch() string {
	type counts struct{ total, free, allocated, pending int32 }
	want := map[string]*counts{}
	for p := range s.pools {
		want[p] = &counts{}
	}
	for _, id := range s.identities {
		c := want[id.Spec.PoolName]
		if c == nil {
			return fmt.Sprintf("identity %s is of pool %s, which does not exist", id.Name, id.Spec.PoolName)
		}
		c.total++
		if id.Status.Allocation == nil {
			c.free++
		} else {
			c.allocated++
		}
	}
	for _, m := range s.machines {
		if machineWaits(m) {
			want[modelClassPool[m.Spec.ClassName]].pending++
		}
	}
	var bad []string
	for p, w := range want {
		st := s.pools[p].Status
		got := counts{st.Total, st.Free, st.Allocated, st.Pending}
		if got != *w {
			bad = append(bad, fmt.Sprintf("pool %s status says total/free/allocated/pending %d/%d/%d/%d, the objects %d/%d/%d/%d",
				p, got.total, got.free, got.allocated, got.pending, w.total, w.free, w.allocated, w.pending))
		}
	}
	sort.Strings(bad)
	return strings.Join(bad, "; ")
}

// checkNow checks the invariants at one revision while the writers go on.
func (h *modelHarness) checkNow(when string) *modelSnapshot {
	h.checks.Add(1)
	s, err := h.snapshot(context.Background())
	if err != nil {
		h.fail("reading etcd %s: %v", when, err)
		return nil
	}
	if v := s.violations(); len(v) > 0 {
		shown := v[:min(len(v), 10)]
		h.fail("%s, at etcd revision %d, %d invariants broken:\n  %s", when, s.rev, len(v), strings.Join(shown, "\n  "))
	}
	waiting := int32(0)
	for _, m := range s.machines {
		if machineWaits(m) {
			waiting++
		}
	}
	if waiting > 0 {
		h.checksWaiting.Add(1)
	}
	for cur := h.maxWaiting.Load(); waiting > cur && !h.maxWaiting.CompareAndSwap(cur, waiting); cur = h.maxWaiting.Load() {
	}
	return s
}

// quietCheckpoint pauses the writers (and waits out a restart), then checks
// everything: the invariants, the pools' counts (eventually), the audit,
// the watcher's view against etcd's, and a dry run and real write of each
// kind.
func (h *modelHarness) quietCheckpoint(when string, final bool) {
	h.gate.Lock()
	defer h.gate.Unlock()
	h.killMu.Lock()
	defer h.killMu.Unlock()
	h.quiets.Add(1)
	ctx := context.Background()
	if !final {
		h.dryRunBattery(ctx, when)
	}
	s := h.checkNow(when + " (quiet)")
	if s == nil {
		return
	}
	// 3. Pool counts, written a moment after each change.
	deadline := time.Now().Add(15 * time.Second)
	for {
		mismatch := s.poolCountsMismatch()
		if mismatch == "" {
			break
		}
		if time.Now().After(deadline) {
			h.fail("inv3 %s: %s", when, mismatch)
			break
		}
		time.Sleep(200 * time.Millisecond)
		var err error
		if s, err = h.snapshot(ctx); err != nil {
			h.fail("reading etcd %s: %v", when, err)
			return
		}
	}
	// 6. Objects and index keys agree.
	if drifts, err := h.ledger.Audit(ctx); err != nil {
		h.fail("audit %s: %v", when, err)
	} else if len(drifts) > 0 {
		h.fail("inv6 %s: the audit found drift: %s", when, summarize(drifts))
	}
	// The watcher saw exactly what etcd holds.
	h.watcher.catchUp(ctx, s.rev)
	if d := h.watcher.diff(s); d != "" {
		h.fail("%s: the machines watched differ from etcd's at revision %d: %s", when, s.rev, d)
	}
	if final {
		h.t.Logf("final state at revision %d: %d identities, %d machines, %d claims; %s", s.rev, len(s.identities), len(s.machines), len(s.claims), describePools(s))
	}
}

// summarize lists the first few drifts the audit found.
func summarize(drifts []identityledger.Drift) string {
	var out []string
	for _, d := range drifts[:min(len(drifts), 5)] {
		out = append(out, d.String())
	}
	if len(drifts) > 5 {
		out = append(out, fmt.Sprintf("and %d more", len(drifts)-5))
	}
	return fmt.Sprintf("%d drifts:\n  %s", len(drifts), strings.Join(out, "\n  "))
}

func describePools(s *modelSnapshot) string {
	var out []string
	for _, p := range modelIDPools {
		st := s.pools[p].Status
		out = append(out, fmt.Sprintf("pool %s total %d free %d allocated %d pending %d", p, st.Total, st.Free, st.Allocated, st.Pending))
	}
	return strings.Join(out, ", ")
}

// ---------------------------------------------------------------------------
// Invariant 4, oldest first: every hand-off seen in etcd

type watchedMachine struct {
	m                 *dockerio.MacOSMachine
	createRev, modRev int64
}

type handoffWatcher struct {
	h        *modelHarness
	mu       sync.Mutex
	machines map[string]watchedMachine // by etcd key
	rev      int64                     // every event up to rev is applied
	handoffs int
}

func (w *handoffWatcher) run(ctx context.Context, from int64) {
	h := w.h
	wch := h.etcd.Watch(ctx, h.res.machines.KeyPrefix(), clientv3.WithPrefix(), clientv3.WithRev(from))
	for resp := range wch {
		if err := resp.Err(); err != nil {
			if ctx.Err() == nil {
				h.fail("watching machines: %v", err)
			}
			return
		}
		if resp.IsProgressNotify() {
			w.mu.Lock()
			w.rev = max(w.rev, resp.Header.Revision)
			w.mu.Unlock()
			continue
		}
		evs := resp.Events
		for i := 0; i < len(evs); {
			j := i
			for j < len(evs) && evs[j].Kv.ModRevision == evs[i].Kv.ModRevision {
				j++
			}
			w.apply(ctx, evs[i:j])
			i = j
		}
	}
}

// apply applies the events of one revision (one transaction), then checks
// each hand-off it made: no machine of that pool that still waits was
// created before the one served.
func (w *handoffWatcher) apply(ctx context.Context, evs []*clientv3.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rev := evs[0].Kv.ModRevision
	type served struct {
		name, identity string
		createRev      int64
	}
	var handoffs []served
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		if ev.Type == clientv3.EventTypeDelete {
			delete(w.machines, key)
			continue
		}
		obj, err := w.h.res.machines.Decode(ctx, key, ev.Kv.Value, ev.Kv.ModRevision)
		if err != nil {
			w.h.fail("decoding %s at revision %d: %v", key, rev, err)
			continue
		}
		m := obj.(*dockerio.MacOSMachine)
		prev, existed := w.machines[key]
		if existed && prev.m.Status.IdentityRef == nil && m.Status.IdentityRef != nil {
			handoffs = append(handoffs, served{m.Name, m.Status.IdentityRef.Name, ev.Kv.CreateRevision})
		}
		w.machines[key] = watchedMachine{m: m, createRev: ev.Kv.CreateRevision, modRev: ev.Kv.ModRevision}
	}
	for _, s := range handoffs {
		w.handoffs++
		pool := modelClassPool[w.machines[w.h.res.machines.Key(modelNS, s.name)].m.Spec.ClassName]
		var older []string
		for _, o := range w.machines {
			if o.createRev < s.createRev && machineNeedsIdentity(o.m) && modelClassPool[o.m.Spec.ClassName] == pool {
				older = append(older, fmt.Sprintf("%s (created at revision %d)", o.m.Name, o.createRev))
			}
		}
		if len(older) > 0 {
			w.h.fail("inv4: at revision %d identity %s of pool %s went to %s (created at revision %d) while %d machines created earlier still wait: %s",
				rev, s.identity, pool, s.name, s.createRev, len(older), strings.Join(first(older), ", "))
		}
	}
	w.rev = max(w.rev, rev)
}

// catchUp waits until the watcher has applied every event up to rev.
func (w *handoffWatcher) catchUp(ctx context.Context, rev int64) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		w.mu.Lock()
		done := w.rev >= rev
		w.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			w.h.fail("the machine watch did not reach revision %d within 30s", rev)
			return
		}
		_ = w.h.etcd.RequestProgress(ctx)
		time.Sleep(50 * time.Millisecond)
	}
}

// diff compares the machines watched with those of a snapshot.
func (w *handoffWatcher) diff(s *modelSnapshot) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for key, wm := range w.machines {
		m := s.machines[wm.m.Name]
		if m == nil {
			out = append(out, "watched "+key+", not in etcd")
		} else if m.ResourceVersion != wm.m.ResourceVersion {
			out = append(out, fmt.Sprintf("%s at %s watched, %s in etcd", key, wm.m.ResourceVersion, m.ResourceVersion))
		}
	}
	if len(w.machines) != len(s.machines) {
		out = append(out, fmt.Sprintf("%d machines watched, %d in etcd", len(w.machines), len(s.machines)))
	}
	return strings.Join(first(out), "; ")
}

// ---------------------------------------------------------------------------
// Dry runs against real writes, with nothing else writing

// dryThenReal makes write as a dry run, checks that etcd holds exactly what
// it held before, then makes it for real and checks both answered alike.
func (h *modelHarness) dryThenReal(kind string, write func(c versioned.Interface, dry bool) (runtime.Object, error)) (dryOut, realOut runtime.Object, realErr error) {
	ctx := context.Background()
	before, err := h.snapshot(ctx)
	if err != nil {
		h.fail("%s: reading etcd: %v", kind, err)
		return nil, nil, err
	}
	var dryErr error
	dryErr, _ = h.call(h.qr, func(c versioned.Interface) (err error) {
		dryOut, err = write(c, true)
		return err
	})
	h.stats.record("quiet "+kind+" (dry run)", dryErr)
	after, err := h.snapshot(ctx)
	if err != nil {
		h.fail("%s: reading etcd: %v", kind, err)
		return nil, nil, err
	}
	if d := diffRevs(before.modRevs, after.modRevs); d != "" {
		h.fail("%s: the dry run wrote: %s", kind, d)
	}
	realErr, _ = h.call(h.qr, func(c versioned.Interface) (err error) {
		realOut, err = write(c, false)
		return err
	})
	h.stats.record("quiet "+kind, realErr)
	if outcome(dryErr) != outcome(realErr) {
		h.fail("%s: the dry run answered %s (%v), the real write %s (%v)", kind, outcome(dryErr), dryErr, outcome(realErr), realErr)
	} else if dryErr != nil && dryErr.Error() != realErr.Error() {
		h.fail("%s: the dry run answered %q, the real write %q", kind, dryErr, realErr)
	}
	if dryErr != nil {
		dryOut = nil
	}
	if realErr != nil {
		realOut = nil
	}
	return dryOut, realOut, realErr
}

func diffRevs(before, after map[string]int64) string {
	var d []string
	for k, r := range after {
		if b, ok := before[k]; !ok {
			d = append(d, "created "+k)
		} else if b != r {
			d = append(d, "changed "+k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			d = append(d, "deleted "+k)
		}
	}
	sort.Strings(d)
	return strings.Join(first(d), ", ")
}

// expect fails unless err is what the quiet battery expects.
func (h *modelHarness) expect(kind string, err error, code int32) {
	if errCode(err) != code && !(code == 0 && err == nil) {
		h.fail("%s: want %d, got %s: %v", kind, code, outcome(err), err)
	}
}

func pickName[T any](r *rand.Rand, m map[string]T, ok func(T) bool) string {
	var names []string
	for n, v := range m {
		if ok(v) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return names[r.IntN(len(names))]
}

// dryRunBattery makes one write of each kind as a dry run and for real,
// with the writers paused, so that the two must answer exactly alike.
func (h *modelHarness) dryRunBattery(ctx context.Context, when string) {
	r := h.qr
	q := h.quiets.Load()
	s, err := h.snapshot(ctx)
	if err != nil {
		h.fail("reading etcd %s: %v", when, err)
		return
	}

	for _, apply := range []bool{false, true} {
		verb := "create"
		if apply {
			verb = "apply"
		}
		// A fresh identity is written; a duplicate is refused, 409 naming
		// the identity holding the value.
		name, pool, v := fmt.Sprintf("id-q%d-%s", q, verb), pick(r, modelIDPools), h.nextValues()
		_, out, err := h.dryThenReal("identity "+verb, func(c versioned.Interface, dry bool) (runtime.Object, error) {
			return writeIdentity(ctx, c, apply, name, pool, v, dry)
		})
		h.expect("quiet identity "+verb, err, 0)
		if out != nil {
			h.model.do(func() { h.model.identities.add(name, modelIdentity{name, pool, v}) })
		}
		src := pickName(r, s.identities, func(*dockerio.MacOSIdentity) bool { return true })
		if src == "" {
			continue
		}
		sv := s.identities[src].Spec
		dupV, what := duplicateOf(h.nextValues(), identity.Values{Model: sv.Model, SerialNumber: sv.SerialNumber, BoardSerialNumber: sv.BoardSerialNumber,
			SystemUUID: sv.SystemUUID, MACAddress: sv.MACAddress, ROM: sv.ROM}, r.IntN(5))
		dupName := fmt.Sprintf("id-q%d-%s-dup", q, verb)
		kind := "identity " + verb + " duplicate"
		dupPool := pick(r, modelIDPools)
		_, _, err = h.dryThenReal(kind, func(c versioned.Interface, dry bool) (runtime.Object, error) {
			return writeIdentity(ctx, c, apply, dupName, dupPool, dupV, dry)
		})
		h.expect("quiet "+kind+" of the "+what+" of "+src, err, 409)
		if err != nil && !strings.Contains(err.Error(), "MacOSIdentity "+src) {
			h.fail("quiet %s: the 409 does not name %s: %v", kind, src, err)
		}
	}

	// A held identity cannot be deleted; a free one can.
	if held := pickName(r, s.identities, func(id *dockerio.MacOSIdentity) bool { return id.Status.Allocation != nil }); held != "" {
		_, _, err := h.dryThenReal("identity delete of a held identity", func(c versioned.Interface, dry bool) (runtime.Object, error) {
			return nil, c.DockeriosV1alpha1().MacOSIdentities().Delete(ctx, held, metav1.DeleteOptions{DryRun: dryRunIf(dry)})
		})
		h.expect("quiet identity delete of held "+held, err, 409)
	}
	if free := pickName(r, s.identities, func(id *dockerio.MacOSIdentity) bool { return id.Status.Allocation == nil }); free != "" {
		h.model.attempt("delete/mid/" + free)
		_, _, err := h.dryThenReal("identity delete of a free identity", func(c versioned.Interface, dry bool) (runtime.Object, error) {
			return nil, c.DockeriosV1alpha1().MacOSIdentities().Delete(ctx, free, metav1.DeleteOptions{DryRun: dryRunIf(dry)})
		})
		h.expect("quiet identity delete of free "+free, err, 0)
		h.model.do(func() { h.model.identities.remove(free) })
	}

	// Machines: created holding an identity or waiting, alike in both.
	for _, apply := range []bool{false, true} {
		verb := "create"
		if apply {
			verb = "apply"
		}
		mmpool := pick(r, modelMMPools)
		class := modelPoolClass[mmpool]
		name := fmt.Sprintf("m-q%d-%s", q, verb)
		dryOut, out, err := h.dryThenReal("machine "+verb, func(c versioned.Interface, dry bool) (runtime.Object, error) {
			return writeMachine(ctx, c, apply, name, class, mmpool, dry)
		})
		h.expect("quiet machine "+verb, err, 0)
		if out != nil && dryOut != nil {
			d, o := dryOut.(*v1alpha1.MacOSMachine), out.(*v1alpha1.MacOSMachine)
			if (d.Status.IdentityRef == nil) != (o.Status.IdentityRef == nil) {
				h.fail("quiet machine %s: the dry run answered identity %v, the real write %v", verb, d.Status.IdentityRef, o.Status.IdentityRef)
			}
			if p := allocationProblem(d); p != "" {
				h.fail("quiet machine %s (dry run): %s", verb, p)
			}
			h.model.do(func() { h.model.machines.add(name, modelMachine{name, class, mmpool}) })
		}
	}

	// Refresh: the writes above changed what is free and who waits.
	if s, err = h.snapshot(ctx); err != nil {
		h.fail("reading etcd %s: %v", when, err)
		return
	}
	live := func(m *dockerio.MacOSMachine) bool {
		return m.DeletionTimestamp == nil && m.Status.Phase != dockerio.MachineFailed && m.Status.ClaimRef == nil
	}
	// Ready, then a claim bound to it, then the claim deleted.
	if mname := pickName(r, s.machines, func(m *dockerio.MacOSMachine) bool {
		return live(m) && m.Spec.PoolName != "" && m.Status.IdentityRef != nil && m.Status.Phase != dockerio.MachineReady
	}); mname != "" {
		mmpool := s.machines[mname].Spec.PoolName
		// The oldest claim of the pool waiting, if any, is bound to the
		// machine in the status write that makes it Ready.
		oldest, oldestRev := "", int64(0)
		for key, rev := range s.queueCreated {
			if pool, name, _ := strings.Cut(key, "/"); pool == mmpool && (oldest == "" || rev < oldestRev) {
				oldest, oldestRev = name, rev
			}
		}
		_, readyOut, err := h.dryThenReal("machine ready", func(c versioned.Interface, dry bool) (runtime.Object, error) {
			cur, err := c.DockeriosV1alpha1().MacOSMachines(modelNS).Get(ctx, mname, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			cur.Status.Phase = v1alpha1.MachineReady
			meta.SetStatusCondition(&cur.Status.Conditions, readyCondition())
			return c.DockeriosV1alpha1().MacOSMachines(modelNS).UpdateStatus(ctx, cur, metav1.UpdateOptions{DryRun: dryRunIf(dry)})
		})
		h.expect("quiet machine ready "+mname, err, 0)
		if ready, ok := readyOut.(*v1alpha1.MacOSMachine); ok {
			switch ref := ready.Status.ClaimRef; {
			case oldest == "" && ref != nil:
				h.fail("quiet machine ready: %s was bound to claim %s, but no claim of pool %s waited", mname, ref.Name, mmpool)
			case oldest != "" && (ref == nil || ref.Name != oldest):
				h.fail("quiet machine ready: %s became Ready with claimRef %v while claim %s, the oldest of pool %s, waited", mname, ref, oldest, mmpool)
			}
		}
		cname := fmt.Sprintf("c-q%d", q)
		err, _ = h.call(r, func(c versioned.Interface) error {
			_, err := c.DockeriosV1alpha1().MacOSMachineClaims(modelNS).Create(ctx, &v1alpha1.MacOSMachineClaim{
				ObjectMeta: metav1.ObjectMeta{Name: cname}, Spec: v1alpha1.MacOSMachineClaimSpec{PoolName: mmpool}}, metav1.CreateOptions{})
			return err
		})
		h.stats.record("quiet claim create", err)
		h.expect("quiet claim create", err, 0)
		h.model.do(func() { h.model.claims.add(cname, modelClaim{cname, mmpool}) })
		var bound *v1alpha1.MacOSMachineClaim
		err, _ = h.call(r, func(c versioned.Interface) (err error) {
			bound, err = c.DockeriosV1alpha1().MacOSMachineClaims(modelNS).Get(ctx, cname, metav1.GetOptions{})
			return err
		})
		if err == nil && bound.Status.MachineName != "" {
			// Bound at create, to the pool's machine Ready longest (which
			// need not be the one just made Ready): that one is released
			// when the claim goes.
			mname = bound.Status.MachineName
		}
		// Refused: a machine that is not Ready, and one of another pool.
		for _, refusal := range []struct {
			kind string
			ok   func(m *dockerio.MacOSMachine) bool
		}{
			{"claim bind to a machine that is not Ready", func(m *dockerio.MacOSMachine) bool {
				return m.Spec.PoolName == mmpool && m.Status.Phase != dockerio.MachineReady
			}},
			{"claim bind to a machine of another pool", func(m *dockerio.MacOSMachine) bool {
				return m.Spec.PoolName != mmpool && live(m)
			}},
		} {
			other := pickName(r, s.machines, func(m *dockerio.MacOSMachine) bool { return m.Name != mname && refusal.ok(m) })
			if other == "" {
				continue
			}
			_, _, err := h.dryThenReal(refusal.kind, func(c versioned.Interface, dry bool) (runtime.Object, error) {
				return c.DockeriosV1alpha1().MacOSMachineClaims(modelNS).Bind(ctx, cname, &v1alpha1.MacOSMachineBinding{MachineName: other},
					metav1.CreateOptions{DryRun: dryRunIf(dry)})
			})
			h.expect("quiet "+refusal.kind+" ("+other+")", err, 409)
		}
		boundAtCreate := err == nil && bound.Status.MachineName != ""
		if err == nil && !boundAtCreate {
			// Pending: no machine of the pool was free, so the one just
			// made Ready went to the oldest waiting claim — and a bound
			// machine cannot be bound again.
			_, _, err = h.dryThenReal("claim bind to a bound machine", func(c versioned.Interface, dry bool) (runtime.Object, error) {
				return c.DockeriosV1alpha1().MacOSMachineClaims(modelNS).Bind(ctx, cname, &v1alpha1.MacOSMachineBinding{MachineName: mname},
					metav1.CreateOptions{DryRun: dryRunIf(dry)})
			})
			h.expect("quiet claim bind of "+cname+" to bound "+mname, err, 409)
		}
		if boundAtCreate {
			// A bound machine cannot be bound again.
			other := fmt.Sprintf("c-q%d-b", q)
			err, _ = h.call(r, func(c versioned.Interface) error {
				_, err := c.DockeriosV1alpha1().MacOSMachineClaims(modelNS).Create(ctx, &v1alpha1.MacOSMachineClaim{
					ObjectMeta: metav1.ObjectMeta{Name: other}, Spec: v1alpha1.MacOSMachineClaimSpec{PoolName: mmpool}}, metav1.CreateOptions{})
				return err
			})
			h.expect("quiet claim create", err, 0)
			h.model.do(func() { h.model.claims.add(other, modelClaim{other, mmpool}) })
			_, _, err = h.dryThenReal("claim bind to a bound machine", func(c versioned.Interface, dry bool) (runtime.Object, error) {
				return c.DockeriosV1alpha1().MacOSMachineClaims(modelNS).Bind(ctx, other, &v1alpha1.MacOSMachineBinding{MachineName: mname},
					metav1.CreateOptions{DryRun: dryRunIf(dry)})
			})
			h.expect("quiet claim bind of "+other+" to bound "+mname, err, 409)
		}
		h.model.attempt("delete/mmclaim/" + cname)
		_, _, err = h.dryThenReal("claim delete", func(c versioned.Interface, dry bool) (runtime.Object, error) {
			return nil, c.DockeriosV1alpha1().MacOSMachineClaims(modelNS).Delete(ctx, cname, metav1.DeleteOptions{DryRun: dryRunIf(dry)})
		})
		h.expect("quiet claim delete "+cname, err, 0)
		h.model.do(func() { h.model.claims.remove(cname) })
		var m *v1alpha1.MacOSMachine
		if err, _ := h.call(r, func(c versioned.Interface) (err error) {
			m, err = c.DockeriosV1alpha1().MacOSMachines(modelNS).Get(ctx, mname, metav1.GetOptions{})
			return err
		}); boundAtCreate && err == nil && (m.Status.ClaimRef != nil || !meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineReleased)) {
			h.fail("quiet claim delete: %s's machine %s has claimRef %v and Released %v", cname, mname, m.Status.ClaimRef,
				meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineReleased))
		}
	}

	// Failed gives back the identity; so does a delete and the finalizer's
	// removal.
	if mname := pickName(r, s.machines, func(m *dockerio.MacOSMachine) bool { return live(m) && m.Status.IdentityRef != nil }); mname != "" {
		h.model.attempt("fail/mm/" + mname)
		dryOut, out, err := h.dryThenReal("machine fail", func(c versioned.Interface, dry bool) (runtime.Object, error) {
			return c.DockeriosV1alpha1().MacOSMachines(modelNS).Patch(ctx, mname, types.MergePatchType, []byte(`{"status":{"phase":"Failed"}}`),
				metav1.PatchOptions{DryRun: dryRunIf(dry)}, "status")
		})
		h.expect("quiet machine fail "+mname, err, 0)
		for _, o := range []runtime.Object{dryOut, out} {
			if m, ok := o.(*v1alpha1.MacOSMachine); ok && (m.Status.IdentityRef != nil || m.Status.Phase != v1alpha1.MachineFailed) {
				h.fail("quiet machine fail: %s answered phase %s holding %v", mname, m.Status.Phase, m.Status.IdentityRef)
			}
		}
	}
	if mname := pickName(r, s.machines, func(m *dockerio.MacOSMachine) bool { return live(m) }); mname != "" {
		h.model.attempt("delete/mm/" + mname)
		_, _, err := h.dryThenReal("machine delete", func(c versioned.Interface, dry bool) (runtime.Object, error) {
			return nil, c.DockeriosV1alpha1().MacOSMachines(modelNS).Delete(ctx, mname, metav1.DeleteOptions{DryRun: dryRunIf(dry)})
		})
		h.expect("quiet machine delete "+mname, err, 0)
		_, _, err = h.dryThenReal("machine finalizer removal", func(c versioned.Interface, dry bool) (runtime.Object, error) {
			return c.DockeriosV1alpha1().MacOSMachines(modelNS).Patch(ctx, mname, types.JSONPatchType,
				[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{DryRun: dryRunIf(dry)})
		})
		h.expect("quiet machine finalizer removal "+mname, err, 0)
		h.model.do(func() { h.model.machines.remove(mname) })
	}
}

// ---------------------------------------------------------------------------
// The report

func (h *modelHarness) report(writing, total time.Duration) {
	t := h.t
	h.stats.mu.Lock()
	defer h.stats.mu.Unlock()
	var kinds []string
	sent, ok := 0, 0
	for k, s := range h.stats.byKind {
		kinds = append(kinds, k)
		if !strings.HasPrefix(k, "quiet ") {
			sent += s.sent
			ok += s.ok
		}
	}
	sort.Strings(kinds)
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d operations by %d writers in %s (%s in all), %d succeeded; %d replica kills, %d requests retried on the other replica; %d invariant checks (%d with machines waiting, at most %d), %d quiet; %d hand-offs watched\n",
		h.seed, h.sent.Load(), modelWorkers, writing.Round(time.Second), total.Round(time.Second), ok, h.kills.Load(), h.retries.Load(), h.checks.Load(), h.checksWaiting.Load(), h.maxWaiting.Load(), h.quiets.Load(), h.watcher.handoffs)
	fmt.Fprintf(&b, "  %-60s %6s %6s  %s\n", "operation", "sent", "ok", "refused")
	for _, k := range kinds {
		s := h.stats.byKind[k]
		var refused []string
		for o, n := range s.refused {
			refused = append(refused, fmt.Sprintf("%s ×%d", o, n))
		}
		sort.Strings(refused)
		fmt.Fprintf(&b, "  %-60s %6d %6d  %s\n", k, s.sent, s.ok, strings.Join(refused, ", "))
	}
	t.Log(b.String())

	if h.failures.Load() > 0 {
		return // the failures say what went wrong; the counts would not
	}
	if sent < *modelOps {
		t.Errorf("seed %d: %d operations sent, want at least %d", h.seed, sent, *modelOps)
	}
	// Every kind of operation succeeded at least once, so the run was not
	// vacuous; and the dry runs the rules single out were refused.
	for _, k := range []string{
		"identity create", "identity create (dry run)", "identity apply", "identity delete",
		"machine create", "machine create (dry run)", "machine apply", "machine fail (status update)", "machine fail (status merge patch)",
		"machine delete", "machine ready", "claim create", "claim delete",
		"quiet identity create (dry run)", "quiet identity apply (dry run)", "quiet machine create (dry run)", "quiet machine apply (dry run)",
		"quiet identity delete of a free identity (dry run)", "quiet machine fail (dry run)", "quiet machine delete (dry run)",
		"quiet machine finalizer removal (dry run)", "quiet machine ready (dry run)", "quiet claim delete (dry run)",
	} {
		if s := h.stats.byKind[k]; s == nil || s.ok == 0 {
			t.Errorf("seed %d: no %q succeeded", h.seed, k)
		}
	}
	for _, k := range []string{
		"identity create duplicate", "identity apply duplicate",
		"quiet identity create duplicate (dry run)", "quiet identity apply duplicate (dry run)",
		"quiet identity delete of a held identity (dry run)", "quiet claim bind to a bound machine (dry run)",
		"quiet claim bind to a machine that is not Ready (dry run)", "quiet claim bind to a machine of another pool (dry run)",
	} {
		if s := h.stats.byKind[k]; s == nil || s.refused[fmt.Sprintf("409 %s", metav1.StatusReasonConflict)] == 0 {
			t.Errorf("seed %d: no %q was refused with 409", h.seed, k)
		}
	}
	if h.kills.Load() == 0 && *modelOps >= 400 {
		t.Errorf("seed %d: no replica was killed", h.seed)
	}
	if h.watcher.handoffs == 0 {
		t.Errorf("seed %d: no identity was handed to a waiting machine", h.seed)
	}
}
