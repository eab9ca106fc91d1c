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

package machine

import (
	"hash/fnv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// agentRefresh decides when a Ready machine's status is rewritten for the
// agent's times alone (lastSeenTime, observedTime, lastProgressTime, the
// free disk space): every agentSeenRefresh after the stored lastSeenTime,
// but never before the machine's own delay after this process first met
// it. Without that delay a restarted controller would rewrite, in its
// first pass over the fleet, every machine whose times fell due while it
// was down or starting — a write storm that says nothing new. With it the
// first pass writes only what changed, and the refreshes that fell due are
// spread over the agentSeenRefresh after the delay's start, at the rate a
// running controller writes them.
//
// What it holds is no progress: a process that forgets it (a restart)
// only waits again before refreshing times that nothing else needs.
type agentRefresh struct {
	mu  sync.Mutex
	met map[types.NamespacedName]firstMet
}

// firstMet is when this process first weighed a refresh of the machine.
type firstMet struct {
	uid types.UID
	at  time.Time
}

// due says whether m's agent times may be refreshed now.
func (s *agentRefresh) due(m *v1alpha1.MacOSMachine, now time.Time) bool {
	if m.Status.Agent == nil || m.Status.Agent.LastSeenTime == nil {
		return true
	}
	return !now.Before(refreshAt(m.UID, m.Status.Agent.LastSeenTime.Time, s.firstMet(m, now)))
}

func (s *agentRefresh) firstMet(m *v1alpha1.MacOSMachine, now time.Time) time.Time {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.met == nil {
		s.met = map[types.NamespacedName]firstMet{}
	}
	f, ok := s.met[key]
	if !ok || f.uid != m.UID {
		f = firstMet{uid: m.UID, at: now}
		s.met[key] = f
	}
	return f.at
}

// forget drops a machine that is gone.
func (s *agentRefresh) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.met, key)
}

// refreshAt is when the agent times of a machine whose stored lastSeenTime
// is lastSeen may be rewritten, by a process that first met it at met.
func refreshAt(uid types.UID, lastSeen, met time.Time) time.Time {
	at := lastSeen.Add(agentSeenRefresh)
	if spread := met.Add(firstRefreshDelay(uid)); spread.After(at) {
		return spread
	}
	return at
}

// firstRefreshDelay is how long after first meeting a machine a process
// waits before refreshing its agent times: at least half agentSeenRefresh
// (longer than a first pass over a large fleet takes), then a share of
// agentSeenRefresh fixed by the machine's UID, so the machines' refreshes
// are spread evenly over it.
func firstRefreshDelay(uid types.UID) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return agentSeenRefresh/2 + time.Duration(h.Sum64()%uint64(agentSeenRefresh))
}
