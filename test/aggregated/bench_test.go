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
	for round := range *benchRounds {
		d := timeCreates(b, *benchClients, *benchPerRound, dockerIOS)
		c := timeCreates(b, *benchClients, *benchPerRound, crd)
		dockerIOSTime += d
		crdTime += c
		b.Logf("round %d: DockerIOS %.0f creates/s, CRD %.0f creates/s, ratio %.2f", round+1,
			rate(*benchPerRound, d), rate(*benchPerRound, c), rate(*benchPerRound, d)/rate(*benchPerRound, c))
	}

	// Every DockerIOS machine got an identity: the benchmark measured
	// allocations, not PoolExhausted answers.
	pool, err := e.client.DockeriosV1alpha1().MacOSIdentityPools().Get(context.Background(), identityPool, metav1.GetOptions{})
	require.NoError(b, err)
	b.Logf("identity pool %s: %d total, %d allocated, %d pending", identityPool, pool.Status.Total, pool.Status.Allocated, pool.Status.Pending)
	require.Zero(b, pool.Status.Pending, "machines waited for identities: the benchmark would not measure allocation")

	dRate, cRate := rate(total, dockerIOSTime), rate(total, crdTime)
	b.ReportMetric(dRate, "dockerios-creates/s")
	b.ReportMetric(cRate, "crd-creates/s")
	b.ReportMetric(dRate/cRate, "dockerios/crd")
	fmt.Printf("identity-allocating MacOSMachine creates through kube-apiserver ÷ CRD creates: %.0f/s ÷ %.0f/s = %.2f (%d clients, %d rounds of %d)\n",
		dRate, cRate, dRate/cRate, *benchClients, *benchRounds, *benchPerRound)
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
