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
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// ledgerCheck is what the apiserver said, once per pass, about whether the
// pass may make things for its machine.
type ledgerCheck struct {
	done bool
	// refused says why not ("" when it may); cacheBehind that the
	// refusal is the cache's lag (nothing to tell the machine about).
	refused     string
	cacheBehind bool
}

// cacheBehindRetry is how soon a machine the cache shows but the ledger
// does not is looked at again: the informer's relist (and the delete it
// brings) is due any moment.
const cacheBehindRetry = 2 * time.Second

// mayMake says whether this pass may create anything for m, from the
// ledger itself rather than the informer cache: the identity m holds is
// read from the apiserver, and must still name m (by UID) as its holder,
// be held by no VM outside the ledger, and come from a pool that is not on
// a restore's hold.
//
// The cache is not enough. Everything made for a machine carries, or
// boots with, its identity's values; and the cache can show a machine the
// ledger no longer has for tens of seconds — after the ledger is restored
// from an older snapshot (the relist waits out the watch's backoff while
// the apiserver restarts), or whenever a watch is slow. A pass that made a
// VirtualMachine, or an identity Secret, for such a machine would run an
// identity the ledger may already have given to another machine, and the
// ledger guard would rightly withhold it from that one. The garbage
// collector would not save us: a restore keeps the VMs of machines the
// ledger lacks on purpose (package vmaudit).
//
// Only passes that make something pay for the reads (at most two GETs, once
// per pass): a machine that has everything it needs never does.
func (r *Reconciler) mayMake(ctx context.Context, m *v1alpha1.MacOSMachine, o *Observed, requeue *time.Duration) (bool, error) {
	if !o.ledger.done {
		refused, behind, err := r.readLedger(ctx, m)
		if err != nil {
			return false, err
		}
		o.ledger = ledgerCheck{done: true, refused: refused, cacheBehind: behind}
		switch {
		case behind:
			r.Log.Info("The cache shows what the ledger does not; making nothing until it catches up",
				"namespace", m.Namespace, "machine", m.Name, "why", refused)
		case refused != "":
			r.Recorder.Eventf(m, corev1.EventTypeWarning, "IdentityInDoubt", "nothing is started with MacOSIdentity %s: %s", m.Status.IdentityRef.Name, refused)
		}
	}
	switch {
	case o.ledger.cacheBehind:
		*requeue = minPositive(*requeue, cacheBehindRetry)
	case o.ledger.refused != "":
		*requeue = minPositive(*requeue, 15*time.Second)
	}
	return o.ledger.refused == "", nil
}

// readLedger reads m's identity, and its pool when needed, from the
// apiserver: why nothing may be made for m ("" when it may), and whether
// that is because the cache is behind the ledger.
func (r *Reconciler) readLedger(ctx context.Context, m *v1alpha1.MacOSMachine) (refused string, cacheBehind bool, err error) {
	ref := m.Status.IdentityRef
	if ref == nil {
		return "the machine holds no identity", true, nil
	}
	id, err := r.Client.DockeriosV1alpha1().MacOSIdentities().Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("MacOSIdentity %s is not in the ledger", ref.Name), true, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading MacOSIdentity %s before making anything with it: %w", ref.Name, err)
	}
	if a := id.Status.Allocation; a == nil || a.MachineUID != string(m.UID) {
		holder := "nobody"
		if a != nil {
			holder = fmt.Sprintf("MacOSMachine %s/%s (uid %s)", a.MachineNamespace, a.MachineName, a.MachineUID)
		}
		return fmt.Sprintf("the ledger records %s, not this machine (uid %s), as the holder of MacOSIdentity %s", holder, m.UID, id.Name), true, nil
	}
	if why := doubt(id, nil); why != "" {
		return why, false, nil // no need to read the pool
	}
	pool, err := r.Client.DockeriosV1alpha1().MacOSIdentityPools().Get(ctx, id.Spec.PoolName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", false, nil // a pool deleted since: no hold can be on it
	}
	if err != nil {
		return "", false, fmt.Errorf("reading MacOSIdentityPool %s before making anything with its identity: %w", id.Spec.PoolName, err)
	}
	return doubt(id, pool), false, nil
}
