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

package manager

import (
	"os"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	dinformers "github.com/dockerios/dockerios/pkg/generated/informers/externalversions/dockerio/v1alpha1"
)

var (
	reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dockerios_controller_reconciles_total",
		Help: "Reconciles done, by queue (machines, pools, class-claims, class-machines).",
	}, []string{"queue"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dockerios_controller_reconcile_errors_total",
		Help: "Reconciles that failed and were retried, by queue.",
	}, []string{"queue"})
)

// registerMetrics adds the counters and gauges read from the caches at
// scrape time (never kept in step by hand, so they cannot drift).
func (q *queues) registerMetrics(reg prometheus.Registerer, d dinformers.Interface) {
	if reg == nil {
		return
	}
	machines, pools := d.MacOSMachines().Lister(), d.MacOSIdentityPools().Lister()
	reg.MustRegister(reconciles, reconcileErrors, &cacheCollector{
		phase: prometheus.NewDesc("dockerios_machines", "MacOSMachines by namespace and phase.", []string{"namespace", "phase"}, nil),
		pool:  prometheus.NewDesc("dockerios_identity_pool_identities", "Identities of a MacOSIdentityPool by state (free, allocated) and machines waiting for one (pending).", []string{"pool", "state"}, nil),
		collect: func(ch chan<- prometheus.Metric, c *cacheCollector) {
			ms, _ := machines.List(labels.Everything())
			counts := map[[2]string]int{}
			for _, m := range ms {
				phase := string(m.Status.Phase)
				if phase == "" {
					phase = string(v1alpha1.MachinePending)
				}
				counts[[2]string{m.Namespace, phase}]++
			}
			for k, n := range counts {
				ch <- prometheus.MustNewConstMetric(c.phase, prometheus.GaugeValue, float64(n), k[0], k[1])
			}
			ps, _ := pools.List(labels.Everything())
			for _, p := range ps {
				ch <- prometheus.MustNewConstMetric(c.pool, prometheus.GaugeValue, float64(p.Status.Free), p.Name, "free")
				ch <- prometheus.MustNewConstMetric(c.pool, prometheus.GaugeValue, float64(p.Status.Allocated), p.Name, "allocated")
				ch <- prometheus.MustNewConstMetric(c.pool, prometheus.GaugeValue, float64(p.Status.Pending), p.Name, "pending")
			}
		},
	})
}

type cacheCollector struct {
	phase, pool *prometheus.Desc
	collect     func(chan<- prometheus.Metric, *cacheCollector)
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.phase; ch <- c.pool }
func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) { c.collect(ch, c) }

func eventSource() corev1.EventSource {
	host, _ := os.Hostname()
	return corev1.EventSource{Component: "dockerios-controller", Host: host}
}
