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
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A leader that wakes from a stall longer than its lease (SIGSTOP, a paused
// VM) still believes it leads until its next renewal fails, up to the renew
// deadline later, while another replica may lead with fresh caches. Its
// workers must act on nothing meanwhile: the keys wait on their queues and
// are reconciled once it can say again that it leads.
func TestWorker_ReconcilesNothingWhileItCannotSayItLeads(t *testing.T) {
	q := newQueue("test-not-leading")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var leading atomic.Bool
	var reconciled atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		worker(ctx, q, func(context.Context, string) (time.Duration, error) {
			reconciled.Add(1)
			return 0, nil
		}, leading.Load, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { q.ShutDown(); <-done }()

	q.Add("ci/mac-0")
	time.Sleep(3 * notLeadingRetry)
	assert.Zero(t, reconciled.Load(), "reconciled while not leading")

	leading.Store(true)
	assert.Eventually(t, func() bool { return reconciled.Load() == 1 }, 5*notLeadingRetry, 10*time.Millisecond,
		"the key that waited is reconciled once the replica leads again")
}
