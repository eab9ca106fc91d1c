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
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
	"k8s.io/klog/v2"
)

// freeView is this apiserver's copy of the free lists, kept by an etcd
// watch, so that an allocation picks a free identity in memory instead of
// asking etcd. It is only ever a hint: the allocation's transaction requires
// the free-list entry unchanged, so an entry another replica took meanwhile
// costs a retry, never a double allocation. Until it has loaded, and after
// its watch breaks until it has reloaded, allocations ask etcd.
//
// The same watch keeps each pool's counts (members, free and pending keys)
// as of the revision it has reached, for the pools' status (see
// RunPoolStatus): counting them in etcd instead costs a read of every key
// of the pool each time, which under steady allocation was a fifth of
// etcd's CPU; here each change costs an increment.
type freeView struct {
	mu    sync.Mutex
	ready bool
	pools map[string]*freeSet
	// counts are every pool's index keys, by kind, as of rev: every
	// change under the pools' prefix up to rev, and none after, is in
	// them.
	counts map[string]*indexCounts
	rev    int64
	// changed are the pools whose counts changed since changedPools was
	// last asked.
	changed map[string]bool
	// countedInEtcd are the pools whose counts were read from etcd while
	// the view was not loaded: once it has loaded they are changed, as
	// the view may never see their keys go (they may all go before).
	countedInEtcd map[string]bool
	// requestProgress asks the watch to say how far it has come, when it
	// has no change to deliver.
	requestProgress func()
}

// indexCounts are the keys of one pool's index, by kind.
type indexCounts struct {
	members, free, pending int32
}

func (c *indexCounts) add(kind string, n int32) bool {
	switch kind {
	case "members":
		c.members += n
	case "free":
		c.free += n
	case "pending":
		c.pending += n
	default:
		return false
	}
	return true
}

// freeSet is one pool's free entries, with O(1) random pick and removal.
type freeSet struct {
	entries []freeIdentity
	index   map[string]int // key → position in entries
}

func (s *freeSet) put(e freeIdentity) {
	if i, ok := s.index[e.key]; ok {
		s.entries[i] = e
		return
	}
	s.index[e.key] = len(s.entries)
	s.entries = append(s.entries, e)
}

func (s *freeSet) remove(key string) {
	i, ok := s.index[key]
	if !ok {
		return
	}
	last := len(s.entries) - 1
	s.entries[i] = s.entries[last]
	s.index[s.entries[i].key] = i
	s.entries = s.entries[:last]
	delete(s.index, key)
}

// pick returns a random free entry of pool. ok is false when the view
// cannot say (not loaded); an empty pool is (nil, true).
func (v *freeView) pick(pool string, random func(n int) int) (*freeIdentity, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.ready {
		return nil, false
	}
	s := v.pools[pool]
	if s == nil || len(s.entries) == 0 {
		return nil, true
	}
	e := s.entries[random(len(s.entries))]
	return &e, true
}

// forget drops an entry the caller learnt is taken or stale.
func (v *freeView) forget(pool, key string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s := v.pools[pool]; s != nil {
		s.remove(key)
	}
}

// apply applies one key of the pools' index, as loaded (created true) or
// as a watch event: a put of a new key (version 1) or a delete changes its
// pool's counts; a put over an existing key does not.
func (v *freeView) apply(l *Ledger, kv *mvccpb.KeyValue, created, deleted bool) {
	pool, kind, _, ok := l.keys.parsePoolKey(string(kv.Key))
	if !ok {
		return
	}
	c := v.counts[pool]
	if c == nil {
		c = &indexCounts{}
		v.counts[pool] = c
	}
	switch {
	case deleted:
		v.changed[pool] = c.add(kind, -1) || v.changed[pool]
	case created:
		v.changed[pool] = c.add(kind, 1) || v.changed[pool]
	}
	if kind != "free" {
		return
	}
	s := v.pools[pool]
	if s == nil {
		s = &freeSet{index: map[string]int{}}
		v.pools[pool] = s
	}
	key := string(kv.Key)
	if deleted {
		s.remove(key)
		return
	}
	s.put(freeIdentity{key: key, rev: kv.ModRevision, identity: key[len(l.keys.freePrefix(pool))+bucketDigits+1:]})
}

// poolCounts returns pool's counts as of rev, the revision the view has
// reached; ok is false while the view is not loaded, and then pool is
// changed once it has loaded (the caller counts it in etcd meanwhile).
func (v *freeView) poolCounts(pool string) (c PoolCounts, rev int64, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.ready {
		if v.countedInEtcd == nil {
			v.countedInEtcd = map[string]bool{}
		}
		v.countedInEtcd[pool] = true
		return PoolCounts{}, 0, false
	}
	if n := v.counts[pool]; n != nil {
		c = PoolCounts{Total: n.members, Free: n.free, Allocated: n.members - n.free, Pending: n.pending}
	}
	return c, v.rev, true
}

// changedPools returns the pools whose counts changed since it was last
// asked (every pool, after the view loaded again).
func (v *freeView) changedPools() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	pools := make([]string, 0, len(v.changed))
	for pool := range v.changed {
		pools = append(pools, pool)
	}
	clear(v.changed)
	return pools
}

// askProgress asks the view's watch to report the revision it has
// reached even when nothing changed under it.
func (v *freeView) askProgress() {
	v.mu.Lock()
	request := v.requestProgress
	v.mu.Unlock()
	if request != nil {
		request()
	}
}

// RunFreeView keeps this apiserver's view of the free lists until ctx
// ends. Allocations work without it, asking etcd; with it, they ask nobody.
func (l *Ledger) RunFreeView(ctx context.Context) {
	for ctx.Err() == nil {
		if err := l.watchFree(ctx); err != nil && ctx.Err() == nil {
			klog.InfoS("Free-list view of the identity ledger restarts", "reason", err)
		}
		l.free.mu.Lock()
		l.free.ready = false
		l.free.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// watchFree loads the free lists and the pools' counts and follows them
// until the watch ends.
func (l *Ledger) watchFree(ctx context.Context) error {
	prefix := l.keys.poolsPrefix()
	resp, err := l.client.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	// The watch has a gRPC stream of its own (metadata no other watch of
	// the client has): etcd answers a progress request only when every
	// watch of the stream is synced and has started, so another watch of
	// the stream (the class view's, just restarted past etcd's current
	// revision) would leave the request, and the pools' status, waiting
	// for some write to etcd.
	watchCtx := clientv3.WithRequireLeader(metadata.AppendToOutgoingContext(ctx, "dockerios-watch", "free-view"))
	l.free.mu.Lock()
	l.free.pools = map[string]*freeSet{}
	// Every pool's counts are new, including those of pools whose last
	// key went while the watch was down.
	l.free.changed = map[string]bool{}
	for pool := range l.free.counts {
		l.free.changed[pool] = true
	}
	for pool := range l.free.countedInEtcd {
		l.free.changed[pool] = true
	}
	l.free.countedInEtcd = nil
	l.free.counts = map[string]*indexCounts{}
	for _, kv := range resp.Kvs {
		l.free.apply(l, kv, true, false)
	}
	l.free.rev = resp.Header.Revision
	// A progress request goes to every watch of the stream watchCtx's
	// metadata selects: this one alone.
	l.free.requestProgress = func() { _ = l.client.RequestProgress(watchCtx) }
	l.free.ready = true
	l.free.mu.Unlock()

	w := l.client.Watch(watchCtx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	for wr := range w {
		if err := wr.Err(); err != nil {
			return err
		}
		l.free.mu.Lock()
		for _, ev := range wr.Events {
			l.free.apply(l, ev.Kv, ev.IsCreate(), ev.Type == clientv3.EventTypeDelete)
			l.free.rev = ev.Kv.ModRevision
		}
		if wr.IsProgressNotify() {
			// Every change up to the header's revision was delivered.
			l.free.rev = max(l.free.rev, wr.Header.Revision)
		}
		l.free.mu.Unlock()
	}
	return ctx.Err()
}
