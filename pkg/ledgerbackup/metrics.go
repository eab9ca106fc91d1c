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

package ledgerbackup

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the apiserver's periodic backups (--backup-dir), served on
// its /metrics. The alert DockerIOSLedgerBackupStale
// (artifacts/monitoring) compares the first with the second.
var (
	metricLastSuccess = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "dockerios",
		Subsystem:      "ledger_backup",
		Name:           "last_success_timestamp_seconds",
		Help:           "When the newest backup of the identity ledger in --backup-dir was taken (Unix time), read from the directory at start.",
		StabilityLevel: metrics.ALPHA,
	})
	metricInterval = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "dockerios",
		Subsystem:      "ledger_backup",
		Name:           "interval_seconds",
		Help:           "How often the apiserver backs up the identity ledger (--backup-interval).",
		StabilityLevel: metrics.ALPHA,
	})
	metricFailures = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "dockerios",
		Subsystem:      "ledger_backup",
		Name:           "failures_total",
		Help:           "Backups of the identity ledger that failed.",
		StabilityLevel: metrics.ALPHA,
	})
	metricSize = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "dockerios",
		Subsystem:      "ledger_backup",
		Name:           "size_bytes",
		Help:           "The size of the newest backup of the identity ledger.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

// RegisterMetrics adds the backup metrics to the apiserver's registry.
func RegisterMetrics(interval time.Duration) {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(metricLastSuccess, metricInterval, metricFailures, metricSize)
	})
	metricInterval.Set(interval.Seconds())
}

// ObserveSuccess records a backup taken (or found at start).
func ObserveSuccess(md *Metadata) {
	metricLastSuccess.Set(float64(md.Time.UnixNano()) / 1e9)
	metricSize.Set(float64(md.Size))
}

// ObserveFailure records a backup that failed.
func ObserveFailure() { metricFailures.Inc() }
