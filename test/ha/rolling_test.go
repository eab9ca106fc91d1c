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
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/test/framework"
)

const loopClients = 4

// testRollingRestart restarts the replicas one at a time as a rolling
// update does (SIGTERM, wait until it has exited, start it again, wait
// until it is ready, next) while clients read and write through
// kube-apiserver without pause: no request may fail.
func (c *cluster) testRollingRestart() {
	t := c.t
	k := framework.NewKubectl(t, c.cp.AdminKubeconfig)
	for i := range loopClients {
		k.MustRun(t, fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSMachinePool
metadata: {name: loop-%d, namespace: %s}
spec: {className: %s, replicas: 0, maxMachines: 10}
`, i, testNS, className), "apply", "-f", "-")
	}

	var codes answers
	client := c.client(&codes)
	var requests, failures, boundAtCreate atomic.Int64
	var failed counter
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range loopClients {
		wg.Go(func() {
			l := &loop{client: client, pool: fmt.Sprintf("loop-%d", i), requests: &requests, failures: &failures, failed: &failed, boundAtCreate: &boundAtCreate}
			for n := 0; !stop.Load(); n++ {
				l.iteration(fmt.Sprintf("loop-%d-%d", i, n))
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()

	start := time.Now()
	time.Sleep(2 * time.Second)
	before := c.lb.routed()
	order := c.carrierFirst()
	for i, name := range order {
		r := c.replica(name)
		// Once this one closes kube-apiserver's connection, it opens
		// the next one to the replica stopped next.
		c.lb.prefer(order[(i+1)%len(order)])
		if open := c.lb.open(r.name); open == 0 {
			t.Errorf("%s carries no traffic: stopping it tests nothing", r.name)
		}
		sent := time.Now()
		r.process().Signal(t, syscall.SIGTERM)
		stopped := time.Since(sent)
		c.startReplica(r)
		c.waitReplicaReady(r, time.Minute)
		t.Logf("%s: stopped %s after SIGTERM, ready %s after its start; %d requests so far, %d failed",
			r.name, stopped.Round(time.Millisecond), (time.Since(sent) - stopped).Round(time.Millisecond), requests.Load(), failures.Load())
		time.Sleep(2 * time.Second)
	}
	stop.Store(true)
	wg.Wait()
	routed := c.lb.routed()
	for k, v := range before {
		routed[k] -= v
	}
	t.Logf("rolling restart of %d replicas in %s: %d requests through kube-apiserver, %d failed; HTTP answers %v (a 429 is retried by client-go after its Retry-After); connections per replica %v",
		len(c.replicas), time.Since(start).Round(time.Millisecond), requests.Load(), failures.Load(), codes.get(), routed)
	t.Logf("%d claims bound at their create, the others Pending until the replica answering saw their machine Ready", boundAtCreate.Load())
	if f := failures.Load(); f > 0 {
		t.Errorf("%d of %d requests failed through the rolling restart: %s\n  %s", f, requests.Load(), describe(failed.get()), failed.describeMessages())
	}
	if requests.Load() < 100 {
		t.Errorf("only %d requests: the loop did not run", requests.Load())
	}
}

// loop is one client's requests: a machine of its own pool made Ready, a
// claim bound to it and released, the machine deleted, with reads
// between. Every answer is the one a healthy API gives; anything else is
// a failure.
type loop struct {
	client             versioned.Interface
	pool               string
	requests, failures *atomic.Int64
	failed             *counter
	boundAtCreate      *atomic.Int64
}

func (l *loop) do(op string, f func() error) error {
	l.requests.Add(1)
	started := time.Now()
	err := f()
	if err != nil {
		l.failures.Add(1)
		l.failed.addMessage(fmt.Sprintf("%s: %s", op, outcome(err)), fmt.Sprintf("at %s, after %s: %s",
			started.Format("15:04:05.000"), time.Since(started).Round(time.Millisecond), explain(err)))
	}
	return err
}

func (l *loop) iteration(name string) {
	ctx := context.Background()
	machines := l.client.DockeriosV1alpha1().MacOSMachines(testNS)
	claims := l.client.DockeriosV1alpha1().MacOSMachineClaims(testNS)
	var m *v1alpha1.MacOSMachine
	if l.do("machine create", func() (err error) {
		m, err = machines.Create(ctx, &v1alpha1.MacOSMachine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.MachinePoolLabel: l.pool}},
			Spec:       v1alpha1.MacOSMachineSpec{ClassName: className, PoolName: l.pool},
		}, metav1.CreateOptions{})
		return err
	}) != nil {
		return
	}
	defer l.deleteMachine(name)
	if l.do("machine get", func() (err error) { m, err = machines.Get(ctx, name, metav1.GetOptions{}); return err }) != nil {
		return
	}
	_ = l.do("machine list", func() error {
		_, err := machines.List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.MachinePoolLabel + "=" + l.pool})
		return err
	})
	if m.Status.IdentityRef == nil {
		l.failures.Add(1)
		l.failed.add("machine create: no identity")
		return
	}
	m.Status.Phase = v1alpha1.MachineReady
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionTrue,
		Reason: "AgentReady", Message: "made Ready by the test", ObservedGeneration: m.Generation})
	if l.do("machine ready", func() (err error) { _, err = machines.UpdateStatus(ctx, m, metav1.UpdateOptions{}); return err }) != nil {
		return
	}
	var cl *v1alpha1.MacOSMachineClaim
	if l.do("claim create", func() (err error) {
		cl, err = claims.Create(ctx, &v1alpha1.MacOSMachineClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1alpha1.MacOSMachineClaimSpec{PoolName: l.pool},
		}, metav1.CreateOptions{})
		return err
	}) != nil {
		return
	}
	// Bound at once when the replica answering has seen the machine
	// Ready (its watch tells it within moments), else Pending until then:
	// both are answers, counted apart.
	if cl.Status.MachineName == name {
		l.boundAtCreate.Add(1)
	}
	_ = l.do("claim get", func() error { _, err := claims.Get(ctx, name, metav1.GetOptions{}); return err })
	_ = l.do("claim delete", func() error { return claims.Delete(ctx, name, metav1.DeleteOptions{}) })
}

func (l *loop) deleteMachine(name string) {
	ctx := context.Background()
	machines := l.client.DockeriosV1alpha1().MacOSMachines(testNS)
	if l.do("machine delete", func() error { return machines.Delete(ctx, name, metav1.DeleteOptions{}) }) != nil {
		return
	}
	if l.do("machine finalize", func() error {
		_, err := machines.Patch(ctx, name, types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
		return err
	}) != nil {
		return
	}
	// Gone: a 404 is the answer.
	l.requests.Add(1)
	if _, err := machines.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		l.failures.Add(1)
		l.failed.add(fmt.Sprintf("machine get after delete: %s", outcome(err)))
	}
}
