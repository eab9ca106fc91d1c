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
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// ownWrites lets a reconcile read the controller's own last status write
// of a machine while the informer has not delivered it yet.
//
// A machine's status writes are filtered out of its events (they are the
// controller's own), so the pass after a write is triggered by something
// else — an agent's answer, a VMI's step — and often comes before the
// write reaches the cache. Built on the cache's older copy, that pass's
// write is refused with a conflict and the whole pass is repeated. The
// write's response is the server's own state at a newer revision, so it is
// used instead, but only while the cache still holds exactly the revision
// the write replaced: any other revision in the cache means the cache has
// moved on (to this write or past it) and is the truth again. Nothing here
// is progress: losing it (a restart) costs at most that conflict.
type ownWrites struct {
	mu sync.Mutex
	m  map[types.NamespacedName]ownWrite
}

type ownWrite struct {
	replaced string // the resourceVersion the write was made over
	written  *v1alpha1.MacOSMachine
}

// remember records that written replaced revision replaced.
func (w *ownWrites) remember(replaced string, written *v1alpha1.MacOSMachine) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.NamespacedName]ownWrite{}
	}
	w.m[types.NamespacedName{Namespace: written.Namespace, Name: written.Name}] = ownWrite{replaced: replaced, written: written}
}

// freshest returns the controller's own write of the machine when cached
// is the revision that write replaced (and is of the same machine), else
// cached; and forgets a write the cache has caught up with.
func (w *ownWrites) freshest(cached *v1alpha1.MacOSMachine) *v1alpha1.MacOSMachine {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := types.NamespacedName{Namespace: cached.Namespace, Name: cached.Name}
	own, ok := w.m[key]
	if !ok {
		return cached
	}
	if own.written.UID == cached.UID && own.replaced == cached.ResourceVersion {
		return own.written
	}
	delete(w.m, key)
	return cached
}

// forget drops what is remembered of a machine that is gone.
func (w *ownWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}
