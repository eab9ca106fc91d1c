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

package selfcert

import (
	"github.com/prometheus/client_golang/prometheus"
)

// ExpiryMetric is the gauge an alert watches so that a renewal that keeps
// failing (RBAC taken away, kube-apiserver unreachable) is noticed months
// before anything stops working.
const ExpiryMetric = "dockerios_certificate_expiry_timestamp_seconds"

var expiryDesc = prometheus.NewDesc("dockerios_certificate_expiry_timestamp_seconds",
	"When the certificate this replica serves (certificate=serving) and the CA of its Secret (certificate=ca) expire, in seconds since the epoch.",
	[]string{"secret", "certificate"}, nil)

// Collector reports the expiry of what the Manager serves; nothing until
// it has a key pair.
func (m *Manager) Collector() prometheus.Collector { return expiryCollector{m} }

type expiryCollector struct{ m *Manager }

func (c expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- expiryDesc }

func (c expiryCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.m.current.Load()
	if p == nil {
		return
	}
	secret := c.m.cfg.Secret.String()
	ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(p.cert.Leaf.NotAfter.Unix()), secret, "serving")
	if !p.caNotAfter.IsZero() {
		ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(p.caNotAfter.Unix()), secret, "ca")
	}
}
