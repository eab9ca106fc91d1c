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

package identityledger

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// PoolCounts is what a MacOSIdentityPool's status reports.
type PoolCounts struct {
	Total, Free, Allocated, Pending int32
}

// Counts reads a pool's counts from its index keys, all at one revision, so
// they agree with each other however many writers are at work.
func (l *Ledger) Counts(ctx context.Context, pool string) (PoolCounts, error) {
	resp, err := l.client.Txn(ctx).Then(
		clientv3.OpGet(l.keys.membersPrefix(pool), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(l.keys.freePrefix(pool), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(l.keys.pendingPrefix(pool), clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return PoolCounts{}, err
	}
	count := func(i int) int32 { return int32(resp.Responses[i].GetResponseRange().Count) }
	c := PoolCounts{Total: count(0), Free: count(1), Pending: count(2)}
	c.Allocated = c.Total - c.Free
	return c, nil
}

// statusDebounce gathers a burst of ledger changes into one status write per pool.
const statusDebounce = 250 * time.Millisecond

// RunPoolStatus keeps every MacOSIdentityPool's status counts equal to its
// index keys until ctx ends: all pools at start, then each pool whose keys
// or object change. The counts, and which pools' keys changed, come from the
// free view, which follows the index keys anyway: RunFreeView must run
// beside it. While the view is not loaded the counts are read from etcd,
// and once it has loaded again every pool is counted anew. Several
// apiserver replicas may run it at once; their writes are conditional, and
// none writes counts older than those written before it.
func (l *Ledger) RunPoolStatus(ctx context.Context) {
	var mu sync.Mutex
	dirty := map[string]bool{}
	markAll := func() {
		resp, err := l.client.Get(ctx, l.pools.KeyPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			klog.ErrorS(err, "Listing identity pools for their status")
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, kv := range resp.Kvs {
			dirty[string(kv.Key)[len(l.pools.KeyPrefix()):]] = true
		}
	}
	markAll()

	go func() {
		// The pools themselves: a new pool, or one written by anyone else,
		// gets its counts (again). Changes of the index keys come from the
		// free view.
		for ctx.Err() == nil {
			w := l.client.Watch(clientv3.WithRequireLeader(ctx), l.pools.KeyPrefix(), clientv3.WithPrefix())
			for resp := range w {
				if resp.Err() != nil {
					break
				}
				mu.Lock()
				for _, ev := range resp.Events {
					dirty[string(ev.Kv.Key)[len(l.pools.KeyPrefix()):]] = true
				}
				mu.Unlock()
			}
			if ctx.Err() != nil {
				return
			}
			// The watch broke (compaction, leader change): recount everything.
			markAll()
			time.Sleep(time.Second)
		}
	}()

	ticker := time.NewTicker(statusDebounce)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		mu.Lock()
		pools := dirty
		dirty = map[string]bool{}
		mu.Unlock()
		for _, pool := range l.free.changedPools() {
			pools[pool] = true
		}
		for pool := range pools {
			if err := l.updatePoolStatus(ctx, pool); err != nil && ctx.Err() == nil {
				if !errors.Is(err, errViewBehind) {
					klog.ErrorS(err, "Updating identity pool status", "pool", pool)
				}
				mu.Lock()
				dirty[pool] = true
				mu.Unlock()
			}
		}
	}
}

// errViewBehind says the free view has not yet reached the revision of the
// pool's last write, so its counts may be older than the status written.
var errViewBehind = errors.New("the free view is behind the pool's last write")

// poolCounts returns pool's counts, from the free view when it is loaded,
// and the revision they are as of; otherwise from etcd, as of now (rev 0).
func (l *Ledger) poolCounts(ctx context.Context, pool string) (PoolCounts, int64, error) {
	if c, rev, ok := l.free.poolCounts(pool); ok {
		return c, rev, nil
	}
	c, err := l.Counts(ctx, pool)
	return c, 0, err
}

// updatePoolStatus writes pool's counts to its status if they differ.
func (l *Ledger) updatePoolStatus(ctx context.Context, pool string) error {
	key := l.pools.Key("", pool)
	for range maxAttempts {
		obj, rev, err := l.pools.Get(ctx, l.client, key)
		if storage.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		p := obj.(*dockerio.MacOSIdentityPool)
		c, asOf, err := l.poolCounts(ctx, pool)
		if err != nil {
			return err
		}
		updated := p.DeepCopy()
		updated.Status.Total, updated.Status.Free, updated.Status.Allocated, updated.Status.Pending = c.Total, c.Free, c.Allocated, c.Pending
		exhausted := metav1.Condition{Type: "Exhausted", Status: metav1.ConditionFalse, Reason: "IdentitiesFree",
			Message: "identities are free for new machines", ObservedGeneration: p.Generation,
			LastTransitionTime: metav1.NewTime(l.clock.Now())}
		if c.Free == 0 {
			exhausted.Status, exhausted.Reason, exhausted.Message = metav1.ConditionTrue, "NoFreeIdentity", "every identity is held; new machines wait until one is freed or added"
		}
		hold, _, err := l.hold(ctx, pool)
		if err != nil {
			return err
		}
		onHold := metav1.Condition{Type: PoolOnHold, Status: metav1.ConditionFalse, Reason: "NotHeld",
			Message: "free identities are given to machines", ObservedGeneration: p.Generation,
			LastTransitionTime: metav1.NewTime(l.clock.Now())}
		if hold != nil {
			onHold.Status, onHold.Reason, onHold.Message = metav1.ConditionTrue, hold.Reason,
				hold.Message+"; no identity is given to a machine until the controller has compared the VMs that run with the ledger and lifted the hold (DELETE macosidentitypools/"+pool+"/hold)"
			exhausted.Status, exhausted.Reason, exhausted.Message = metav1.ConditionTrue, "OnHold", "the pool is on hold; new machines wait until the hold is lifted"
		}
		meta.SetStatusCondition(&updated.Status.Conditions, exhausted)
		meta.SetStatusCondition(&updated.Status.Conditions, onHold)
		if updated.Status.Total == p.Status.Total && updated.Status.Free == p.Status.Free &&
			updated.Status.Allocated == p.Status.Allocated && updated.Status.Pending == p.Status.Pending &&
			meta.IsStatusConditionPresentAndEqual(p.Status.Conditions, exhausted.Type, exhausted.Status) &&
			meta.IsStatusConditionPresentAndEqual(p.Status.Conditions, onHold.Type, onHold.Status) {
			return nil
		}
		if asOf != 0 && asOf < rev {
			// The pool was written after the last change the view has
			// seen — perhaps by another replica, with counts newer than
			// these. Write once the view has caught up: it says how far
			// it is when asked, even when nothing changed.
			l.free.askProgress()
			return errViewBehind
		}
		var tx txn.Txn
		tx.IfUnchanged(key, rev)
		if err := tx.WriteObject(ctx, l.pools, key, updated); err != nil {
			return err
		}
		res, err := txn.Commit(ctx, l.client, &tx)
		if err != nil || res.Succeeded {
			return err
		}
	}
	return nil
}
