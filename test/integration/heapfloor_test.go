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
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/dockerios/dockerios/test/framework"
)

// The server keeps a heap floor (pkg/heapfloor), as its /metrics shows:
// while its live heap is under the floor, the garbage collector's heap goal
// is at least the floor and its percent is over GOGC's; with
// --gc-heap-floor=0 the percent is GOGC's.
func TestGCHeapFloor_ASmallHeapIsCollectedOncePerFloor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		floor float64
	}{
		{name: "default", floor: 128 << 20},
		{name: "1Gi", args: []string{"--gc-heap-floor=1Gi"}, floor: 1 << 30},
		{name: "off", args: []string{"--gc-heap-floor=0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := framework.StartLocalServer(t, t.TempDir(), tc.args...)
			client, err := kubernetes.NewForConfig(restConfig(t, s.Kubeconfig))
			require.NoError(t, err)
			m := gcMetrics(t, client)
			t.Logf("live heap %.1f MiB, heap goal %.1f MiB, GC percent %.0f", m["go_gc_heap_live_bytes"]/(1<<20), m["go_gc_heap_goal_bytes"]/(1<<20), m["go_gc_gogc_percent"])
			if tc.floor == 0 {
				assert.Equal(t, 100.0, m["go_gc_gogc_percent"], "GOGC's percent")
				assert.Less(t, m["go_gc_heap_goal_bytes"], float64(128<<20), "the goal of a small heap without a floor")
				return
			}
			require.Less(t, m["go_gc_heap_live_bytes"], tc.floor, "this test needs a live heap under the floor")
			assert.Greater(t, m["go_gc_gogc_percent"], 100.0)
			assert.GreaterOrEqual(t, m["go_gc_heap_goal_bytes"], tc.floor, "the next collection waits for the floor")
		})
	}
}

// gcMetrics reads the go_gc_* gauges and counters of the server's /metrics.
func gcMetrics(t *testing.T, client kubernetes.Interface) map[string]float64 {
	t.Helper()
	data, err := client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	m := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(name, "go_gc_") || strings.Contains(name, "{") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		require.NoError(t, err, line)
		m[name] = v
	}
	for _, name := range []string{"go_gc_gogc_percent", "go_gc_heap_goal_bytes", "go_gc_heap_live_bytes"} {
		require.Contains(t, m, name, "/metrics")
	}
	return m
}
