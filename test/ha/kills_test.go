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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	typedv1alpha1 "github.com/dockerios/dockerios/pkg/generated/clientset/versioned/typed/dockerio/v1alpha1"
)

const (
	burstWriters = 6
	// The burst keeps at most this many machines (more than the pool's
	// identities: some wait for one).
	maxMachines = fleetSize + 6
)

// What the writers know of what they wrote. Only acknowledged writes
// count: a write answered with an error may or may not have happened.
type objState int

const (
	acked    objState = iota // created, and the create acknowledged
	deleting                 // the delete acknowledged, the finalizer not yet removed
	gone                     // deleted, and acknowledged
	unknown                  // a write answered with an error
)

type trackedMachine struct {
	uid   types.UID
	state objState
	ready bool // a write making it Ready was acknowledged
	busy  bool // a writer acts on it
}

type trackedClaim struct {
	uid     types.UID
	state   objState
	boundTo string // the machine the create's answer bound it to
	busy    bool
}

// burst is writers making machine and claim writes through kube-apiserver
// until stopped, pausable for checks.
type burst struct {
	c      *cluster
	client versioned.Interface
	gate   sync.RWMutex
	stop   atomic.Bool
	wg     sync.WaitGroup
	seq    atomic.Int64

	mu       sync.Mutex
	machines map[string]*trackedMachine
	claims   map[string]*trackedClaim

	outcomes counter // "<op> <ok|code>"
	unclean  counter // "<op>: <error>": no API answer
	slow     counter // "<op> <ok|code>" of requests that took over 3s
	slowest  atomic.Int64
}

func (c *cluster) newBurst() *burst {
	return &burst{c: c, client: c.client(nil), machines: map[string]*trackedMachine{}, claims: map[string]*trackedClaim{}}
}

// outcome is "ok", the API status code, "reset" for an answer
// kube-apiserver began and then cut off, or "unclean" for any other
// error that is no API answer (a timeout, a connection error).
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return fmt.Sprint(st.Status().Code)
	}
	if cutOff(err) {
		return "reset"
	}
	return "unclean"
}

// explain is err with what the answer's body said, when client-go kept
// it as a cause (kube-apiserver's proxy answers in plain text).
func explain(err error) string {
	msg := err.Error()
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Details != nil {
		for _, c := range st.Status().Details.Causes {
			msg += " [" + strings.TrimSpace(c.Message) + "]"
		}
	}
	return msg
}

// cutOff says kube-apiserver reset the request's HTTP/2 stream: it had
// begun to proxy the replica's answer (its status line sent) when the
// replica's connection broke, and can only abort it. Only a replica
// killed with the answer on the wire does that.
func cutOff(err error) bool {
	return strings.Contains(err.Error(), "stream error: stream ID") && strings.Contains(err.Error(), "INTERNAL_ERROR; received from peer")
}

// record counts a request's outcome; an error that is no API answer fails
// the test.
func (b *burst) record(op string, started time.Time, err error) {
	took := time.Since(started)
	for cur := b.slowest.Load(); int64(took) > cur && !b.slowest.CompareAndSwap(cur, int64(took)); cur = b.slowest.Load() {
	}
	o := outcome(err)
	if err != nil {
		b.outcomes.addMessage(op+" "+o, fmt.Sprintf("after %s: %s", took.Round(time.Millisecond), explain(err)))
	} else {
		b.outcomes.add(op + " " + o)
	}
	if took > 3*time.Second {
		b.slow.addMessage(op+" "+o, took.Round(time.Millisecond).String())
	}
	if o == "unclean" {
		b.unclean.add(fmt.Sprintf("%s: %v", op, err))
	}
}

func (b *burst) start() {
	for w := range burstWriters {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			for !b.stop.Load() {
				b.gate.RLock()
				b.step(r)
				b.gate.RUnlock()
			}
		}()
	}
}

func (b *burst) halt() {
	b.stop.Store(true)
	b.wg.Wait()
}

// pause waits for the writes in flight and holds the writers until the
// returned func is called.
func (b *burst) pause() func() {
	b.gate.Lock()
	return b.gate.Unlock
}

// step makes one write, chosen by r.
func (b *burst) step(r *rand.Rand) {
	b.mu.Lock()
	live := 0
	for _, m := range b.machines {
		if m.state == acked || m.state == unknown {
			live++
		}
	}
	b.mu.Unlock()
	switch n := r.IntN(100); {
	case n < 35 && live < maxMachines:
		b.createMachine()
	case n < 55:
		b.readyMachine(r)
	case n < 75:
		b.createClaim()
	case n < 85:
		b.deleteClaim(r)
	default:
		b.deleteMachine(r)
	}
}

func (b *burst) machineClient() typedv1alpha1.MacOSMachineInterface {
	return b.client.DockeriosV1alpha1().MacOSMachines(testNS)
}

func (b *burst) createMachine() {
	name := fmt.Sprintf("m-%d", b.seq.Add(1))
	started := time.Now()
	m, err := b.machineClient().Create(context.Background(), &v1alpha1.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.MachinePoolLabel: machinePool}},
		Spec:       v1alpha1.MacOSMachineSpec{ClassName: className, PoolName: machinePool},
	}, metav1.CreateOptions{})
	b.record("machine create", started, err)
	t := &trackedMachine{state: unknown}
	if err == nil {
		t.uid, t.state = m.UID, acked
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MachineIdentityAllocated)
		if c == nil || (m.Status.IdentityRef != nil) != (c.Status == metav1.ConditionTrue) {
			b.c.t.Errorf("machine create %s answered identity %v with IdentityAllocated %v", name, m.Status.IdentityRef, c)
		}
	}
	b.mu.Lock()
	b.machines[name] = t
	b.mu.Unlock()
}

// take marks an acknowledged machine (ready or not) busy for one writer.
func (b *burst) takeMachine(r *rand.Rand, ok func(*trackedMachine) bool) (string, *trackedMachine) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var names []string
	for n, m := range b.machines {
		if m.state == acked && !m.busy && ok(m) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "", nil
	}
	sort.Strings(names)
	n := names[r.IntN(len(names))]
	b.machines[n].busy = true
	return n, b.machines[n]
}

func (b *burst) release(m *trackedMachine) {
	b.mu.Lock()
	m.busy = false
	b.mu.Unlock()
}

// readyMachine reports a machine that holds an identity Ready, as the
// controller does when its guest says so: claims bind to it.
func (b *burst) readyMachine(r *rand.Rand) {
	name, t := b.takeMachine(r, func(m *trackedMachine) bool { return !m.ready })
	if t == nil {
		return
	}
	defer b.release(t)
	started := time.Now()
	m, err := b.machineClient().Get(context.Background(), name, metav1.GetOptions{})
	b.record("machine get", started, err)
	if err != nil || m.Status.IdentityRef == nil {
		return
	}
	m.Status.Phase = v1alpha1.MachineReady
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionTrue,
		Reason: "AgentReady", Message: "made Ready by the test", ObservedGeneration: m.Generation})
	started = time.Now()
	_, err = b.machineClient().UpdateStatus(context.Background(), m, metav1.UpdateOptions{})
	b.record("machine ready", started, err)
	if err == nil {
		b.mu.Lock()
		t.ready = true
		b.mu.Unlock()
	}
}

// deleteMachine deletes a machine as its controller does: delete, then
// the teardown finalizer goes, which gives its identity back.
func (b *burst) deleteMachine(r *rand.Rand) {
	name, t := b.takeMachine(r, func(*trackedMachine) bool { return true })
	if t == nil {
		return
	}
	defer b.release(t)
	started := time.Now()
	err := b.machineClient().Delete(context.Background(), name, metav1.DeleteOptions{})
	b.record("machine delete", started, err)
	if err != nil {
		// Deleted or not: an error says nothing of it.
		b.mu.Lock()
		t.state = unknown
		b.mu.Unlock()
		return
	}
	b.mu.Lock()
	t.state = deleting
	b.mu.Unlock()
	b.finalize(name, t)
}

// finalize removes a deleted machine's finalizer.
func (b *burst) finalize(name string, t *trackedMachine) {
	started := time.Now()
	_, err := b.machineClient().Patch(context.Background(), name, types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
	b.record("machine finalize", started, err)
	b.mu.Lock()
	if err == nil || apierrors.IsNotFound(err) {
		t.state = gone
	}
	b.mu.Unlock()
}

func (b *burst) createClaim() {
	name := fmt.Sprintf("c-%d", b.seq.Add(1))
	started := time.Now()
	cl, err := b.client.DockeriosV1alpha1().MacOSMachineClaims(testNS).Create(context.Background(), &v1alpha1.MacOSMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.MacOSMachineClaimSpec{PoolName: machinePool},
	}, metav1.CreateOptions{})
	b.record("claim create", started, err)
	t := &trackedClaim{state: unknown}
	if err == nil {
		t.uid, t.state = cl.UID, acked
		if cl.Status.Phase == v1alpha1.ClaimBound {
			t.boundTo = cl.Status.MachineName
		}
	}
	b.mu.Lock()
	b.claims[name] = t
	b.mu.Unlock()
}

func (b *burst) deleteClaim(r *rand.Rand) {
	b.mu.Lock()
	var names []string
	for n, cl := range b.claims {
		if cl.state == acked && !cl.busy {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		b.mu.Unlock()
		return
	}
	sort.Strings(names)
	name := names[r.IntN(len(names))]
	t := b.claims[name]
	t.busy = true
	b.mu.Unlock()
	started := time.Now()
	err := b.client.DockeriosV1alpha1().MacOSMachineClaims(testNS).Delete(context.Background(), name, metav1.DeleteOptions{})
	b.record("claim delete", started, err)
	b.mu.Lock()
	switch {
	case err == nil || apierrors.IsNotFound(err):
		t.state = gone
	default:
		t.state = unknown // deleted or not: an error says nothing of it
	}
	t.busy = false
	b.mu.Unlock()
}

// finishDeletes, with the writers paused, removes the finalizer of every
// machine whose delete was acknowledged and whose finalizer is still on.
func (b *burst) finishDeletes() {
	b.mu.Lock()
	var names []string
	for n, m := range b.machines {
		if m.state == deleting {
			names = append(names, n)
		}
	}
	b.mu.Unlock()
	for _, n := range names {
		b.finalize(n, b.machines[n])
	}
}

// checkAcknowledged checks that every acknowledged write is in s: each
// machine and claim created (and not deleted since) with the uid its
// create answered, Ready if made so, each claim bound at its create
// still bound to that machine while it exists; and nothing whose delete
// was acknowledged.
func (b *burst) checkAcknowledged(s *snapshot, when string) (machines, claims int) {
	t := b.c.t
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, m := range b.machines {
		got := s.machines[name]
		switch m.state {
		case acked:
			machines++
			switch {
			case got == nil:
				t.Errorf("%s: machine %s, whose create was acknowledged, is gone", when, name)
			case got.UID != m.uid:
				t.Errorf("%s: machine %s has uid %s, its create answered %s", when, name, got.UID, m.uid)
			case got.DeletionTimestamp != nil:
				t.Errorf("%s: machine %s is being deleted; nobody deleted it", when, name)
			case m.ready && got.Status.Phase != dockerio.MachineReady:
				t.Errorf("%s: machine %s was made Ready (acknowledged); it is %s", when, name, got.Status.Phase)
			}
		case deleting:
			if got != nil && got.DeletionTimestamp == nil {
				t.Errorf("%s: machine %s's delete was acknowledged; it is not being deleted", when, name)
			}
		case gone:
			if got != nil && got.UID == m.uid {
				t.Errorf("%s: machine %s's delete was acknowledged; it is still there", when, name)
			}
		}
	}
	for name, cl := range b.claims {
		got := s.claims[name]
		switch cl.state {
		case acked:
			claims++
			switch {
			case got == nil:
				t.Errorf("%s: claim %s, whose create was acknowledged, is gone", when, name)
			case got.UID != cl.uid:
				t.Errorf("%s: claim %s has uid %s, its create answered %s", when, name, got.UID, cl.uid)
			case cl.boundTo != "":
				if m := b.machines[cl.boundTo]; m != nil && m.state == acked && got.Status.MachineName != cl.boundTo {
					t.Errorf("%s: claim %s was bound to %s at its create, which still exists; it is %s to %q", when, name, cl.boundTo, got.Status.Phase, got.Status.MachineName)
				}
			}
		case gone:
			if got != nil && got.UID == cl.uid {
				t.Errorf("%s: claim %s's delete was acknowledged; it is still there", when, name)
			}
		}
	}
	return machines, claims
}

// round is what one kill did.
type round struct {
	target      string
	leader      bool // the member killed led the cluster
	writes      map[string]int
	rejoin      time.Duration
	ackMachines int
	ackClaims   int
}

// testKills SIGKILLs each etcd member in turn, then each apiserver
// replica, under a burst of writes through kube-apiserver; restarts it
// and waits until it has rejoined; then, with the writers paused, checks
// the ledger's invariants, the audit and that every acknowledged write is
// there. Every write must get an answer (success or an API error) within
// the client's timeout.
func (c *cluster) testKills() {
	t := c.t
	ctx := context.Background()
	start := time.Now()
	b := c.newBurst()
	b.start()
	defer b.halt()

	var rounds []round
	var targets []string
	targets = append(targets, c.memberNames()...)
	replicas := c.carrierFirst()
	targets = append(targets, replicas...)
	for _, target := range targets {
		time.Sleep(1500 * time.Millisecond)
		before := b.outcomes.get()
		rd := round{target: target}
		if m := c.member(target); m != nil {
			rd.leader = c.leader(ctx) == m.name
			m.mu.Lock()
			p := m.proc
			m.mu.Unlock()
			p.Signal(t, syscall.SIGKILL)
			t.Logf("SIGKILLed etcd member %s (leader: %v)", m.name, rd.leader)
			// Right after the kill, with the writes going on: whatever
			// was in flight on it is either all in the ledger or not.
			c.audit(ctx, "right after killing "+target)
			time.Sleep(1500 * time.Millisecond)
			restarted := time.Now()
			c.startMember(m)
			c.waitMemberReady(m, time.Minute)
			rd.rejoin = time.Since(restarted)
			c.checkMembers(ctx)
		} else {
			r := c.replica(target)
			// kube-apiserver's connection moves to the next one when
			// this one dies.
			i := slices.Index(replicas, target)
			c.lb.prefer(replicas[(i+1)%len(replicas)])
			open := c.lb.open(r.name)
			r.process().Signal(t, syscall.SIGKILL)
			t.Logf("SIGKILLed replica %s, with %d connections from kube-apiserver open to it", r.name, open)
			if open == 0 {
				t.Errorf("%s carried no traffic when it was killed", r.name)
			}
			c.audit(ctx, "right after killing "+target)
			time.Sleep(1500 * time.Millisecond)
			restarted := time.Now()
			c.startReplica(r)
			c.waitReplicaReady(r, time.Minute)
			rd.rejoin = time.Since(restarted)
		}
		time.Sleep(time.Second) // writes with every member and replica back
		resume := b.pause()
		b.finishDeletes()
		when := "after killing " + target
		s := c.checkLedger(ctx, when)
		if s != nil {
			rd.ackMachines, rd.ackClaims = b.checkAcknowledged(s, when)
			if r := c.replica(target); r != nil {
				c.checkServes(r, s)
			}
		}
		resume()
		rd.writes = diff(b.outcomes.get(), before)
		rounds = append(rounds, rd)
		t.Logf("round %s: %s; rejoined in %s; %d machines and %d claims acknowledged and there",
			target, describe(rd.writes), rd.rejoin.Round(time.Millisecond), rd.ackMachines, rd.ackClaims)
	}
	b.halt()
	if s := c.checkLedger(ctx, "after the burst"); s != nil {
		b.checkAcknowledged(s, "after the burst")
	}

	total := b.outcomes.get()
	n, ok := 0, 0
	for k, v := range total {
		n += v
		if strings.HasSuffix(k, " ok") {
			ok += v
		}
	}
	t.Logf("%d kill rounds in %s: %d requests, %d succeeded, the others answered: %s; slowest %s",
		len(rounds), time.Since(start).Round(time.Millisecond), n, ok, describe(errorsOnly(total)), time.Duration(b.slowest.Load()).Round(time.Millisecond))
	if m := b.outcomes.describeMessages(); m != "" {
		t.Logf("what the failed requests answered (the first of each):\n  %s", m)
	}
	if m := b.slow.describeMessages(); m != "" {
		t.Logf("requests that took over 3s:\n  %s", m)
	}
	if u := b.unclean.get(); len(u) > 0 {
		t.Errorf("requests with no API answer (hung or cut off): %v", u)
	}
	// An answer cut off by a killed replica is no API answer either; it
	// is the HTTP/2 form of the 503 kube-apiserver gives when the
	// replica's connection breaks before the answer began. It comes only
	// with a replica killed, never with an etcd member killed.
	for _, rd := range rounds {
		for k, v := range rd.writes {
			if strings.HasSuffix(k, " reset") && c.member(rd.target) != nil {
				t.Errorf("round %s: %d answers of %q cut off, with no replica killed", rd.target, v, k)
			}
		}
	}
	if ok < n/2 {
		t.Errorf("only %d of %d requests succeeded", ok, n)
	}
	b.cleanUp()
}

// describe prints counts sorted by key.
func describe(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s: %d", k, m[k]))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

func errorsOnly(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if !strings.HasSuffix(k, " ok") {
			out[k] = v
		}
	}
	return out
}

// carrierFirst is the replicas' names, the one kube-apiserver's
// connection is open to first, preferred by the balancer meanwhile.
func (c *cluster) carrierFirst() []string {
	carrier := c.lb.carrier()
	c.lb.prefer(carrier)
	names := []string{carrier}
	for _, r := range c.replicas {
		if r.name != carrier {
			names = append(names, r.name)
		}
	}
	return names
}

func (c *cluster) replica(name string) *replica {
	for _, r := range c.replicas {
		if r.name == name {
			return r
		}
	}
	return nil
}

// checkMembers checks that every member is started and a voting member,
// and that all agree on the leader.
func (c *cluster) checkMembers(ctx context.Context) {
	t := c.t
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := c.etcd.MemberList(ctx)
	if err != nil {
		t.Errorf("member list: %v", err)
		return
	}
	var names []string
	for _, m := range list.Members {
		if m.IsLearner || m.Name == "" {
			t.Errorf("member %x (%q) is a learner or not started", m.ID, m.Name)
		}
		names = append(names, m.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, c.memberNames()) {
		t.Errorf("members %v, want %v", names, c.memberNames())
	}
	leaders := map[uint64]bool{}
	for _, m := range c.members {
		st, err := c.etcd.Status(ctx, m.clientURL)
		if err != nil {
			t.Errorf("status of %s: %v", m.name, err)
			continue
		}
		leaders[st.Leader] = true
	}
	if len(leaders) != 1 {
		t.Errorf("the members follow %d leaders", len(leaders))
	}
}

// checkServes checks that replica r, asked directly (as the aggregator
// asks it), lists the machines etcd holds.
func (c *cluster) checkServes(r *replica, s *snapshot) {
	t := c.t
	req, err := http.NewRequest(http.MethodGet, "https://"+r.addr+"/apis/dockerios.io/v1alpha1/namespaces/"+testNS+"/macosmachines", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Remote-User", "admin")
	req.Header.Set("X-Remote-Group", "system:masters")
	resp, err := c.direct.Do(req)
	if err != nil {
		t.Errorf("listing machines on %s: %v", r.name, err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("listing machines on %s: %s %s", r.name, resp.Status, body)
		return
	}
	var list v1alpha1.MacOSMachineList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Errorf("listing machines on %s: %v", r.name, err)
		return
	}
	var got, want []string
	for _, m := range list.Items {
		got = append(got, m.Name+"/"+string(m.UID))
	}
	for _, m := range s.machines {
		want = append(want, m.Name+"/"+string(m.UID))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s lists %d machines, etcd holds %d", r.name, len(got), len(want))
	}
}

// cleanUp deletes every machine and claim the burst left, so that the
// next test starts with the pool's identities free.
func (b *burst) cleanUp() {
	t, ctx := b.c.t, context.Background()
	claims := b.client.DockeriosV1alpha1().MacOSMachineClaims(testNS)
	if err := claims.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting the claims: %v", err)
	}
	list, err := b.machineClient().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("listing the machines: %v", err)
		return
	}
	for _, m := range list.Items {
		if err := b.machineClient().Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", m.Name, err)
		}
		_, err := b.machineClient().Patch(ctx, m.Name, types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("finalizing %s: %v", m.Name, err)
		}
	}
}
