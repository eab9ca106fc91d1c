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

package binding

import (
	"context"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// A queue key outlives its claim only when the claim left by a path that
// cannot read it: a corrupt claim deleted with
// IgnoreStoreReadErrorWithClusterBreakingPotential, or an edit of etcd.
// Left alone, it would stop every claim of its pool from being bound at
// create (they would all wait for the controller), so the audit drops it.

// AuditQueue drops every queue key whose claim is gone, is another object
// of the same name, or no longer waits (bound, Lost or being deleted), each
// only if neither the key nor the claim changed since read. It returns how
// many it dropped.
func (b *Binder) AuditQueue(ctx context.Context) (int, error) {
	resp, err := b.client.Get(ctx, b.queueRoot, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	dropped := 0
	for _, kv := range resp.Kvs {
		parts := strings.Split(strings.TrimPrefix(string(kv.Key), b.queueRoot), "/")
		if len(parts) != 3 {
			continue
		}
		namespace, pool, name := parts[0], parts[1], parts[2]
		claimKey := b.claims.Key(namespace, name)
		obj, rev, err := b.claims.Get(ctx, b.client, claimKey)
		var tx txn.Txn
		tx.IfUnchanged(string(kv.Key), kv.ModRevision)
		switch {
		case storage.IsNotFound(err):
			tx.IfAbsent(claimKey)
		case err != nil:
			return dropped, err
		default:
			c := obj.(*dockerio.MacOSMachineClaim)
			if string(c.UID) == string(kv.Value) && c.Spec.PoolName == pool && waiting(c) {
				continue
			}
			tx.IfUnchanged(claimKey, rev)
		}
		tx.Delete(string(kv.Key))
		res, err := txn.Commit(ctx, b.client, &tx)
		if err != nil {
			return dropped, err
		}
		if res.Succeeded {
			dropped++
			b.event(&metav1.ObjectMeta{Namespace: namespace, Name: pool}, "MacOSMachinePool", corev1.EventTypeWarning, "StaleQueueEntry",
				"dropped the queue entry of MacOSMachineClaim %s, which no longer waits; claims of the pool are bound at create again", name)
		}
	}
	return dropped, nil
}

// waiting is a claim still waiting for a machine.
func waiting(c *dockerio.MacOSMachineClaim) bool {
	return c.DeletionTimestamp == nil && c.Status.MachineName == "" && c.Status.Phase != dockerio.ClaimLost
}

// RunQueueAudit audits the claim queues and the bindable index once this
// apiserver's view of machines has loaded (an upgrade from a release
// without the index finds every free machine missing from it), then every
// interval until ctx ends.
func (b *Binder) RunQueueAudit(ctx context.Context, interval time.Duration) {
	audit := func() {
		if n, err := b.AuditQueue(ctx); err != nil && ctx.Err() == nil {
			klog.InfoS("Audit of the claim queues failed", "err", err)
		} else if n > 0 {
			klog.InfoS("Dropped stale claim queue entries", "count", n)
		}
		if n, err := b.AuditBindable(ctx); err != nil && ctx.Err() == nil {
			klog.InfoS("Audit of the bindable machine index failed", "err", err)
		} else if n > 0 {
			klog.InfoS("Mended the bindable machine index", "count", n)
		}
	}
	for !b.view.loaded() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	audit()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			audit()
		}
	}
}

// AuditBindable mends the bindable index from the machines themselves: a
// free machine missing from it (written by a release without the index,
// or an edit of etcd) is settled as if it had just become free — bound to
// the oldest waiting claim of its pool it may take, or indexed — and a
// key whose machine is gone or not free is dropped. Each fix is
// conditioned on what it read. It needs this apiserver's view of machines
// loaded, and returns how many it mended.
func (b *Binder) AuditBindable(ctx context.Context) (int, error) {
	resp, err := b.client.Get(ctx, b.bindableRoot, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, err
	}
	indexed := map[string]int64{}
	for _, kv := range resp.Kvs {
		indexed[string(kv.Key)] = kv.ModRevision
	}
	mended := 0
	free := map[string]bool{} // index keys of the machines the view shows free
	for _, m := range b.view.all() {
		key := b.bindableKey(m)
		free[key] = true
		if _, ok := indexed[key]; ok {
			continue
		}
		ok, err := b.indexStray(ctx, m.Namespace, m.Name)
		if err != nil {
			return mended, err
		}
		if ok {
			mended++
		}
	}
	for key, rev := range indexed {
		parts := strings.Split(strings.TrimPrefix(key, b.bindableRoot), "/")
		if len(parts) != 3 || free[key] {
			// A key of a machine the view shows free needs no read: a
			// fleet's audit reads only what the view disagrees with.
			continue
		}
		mKey := b.machines.Key(parts[0], parts[2])
		obj, mRev, err := b.machines.Get(ctx, b.client, mKey)
		var tx txn.Txn
		tx.IfUnchanged(key, rev)
		switch {
		case storage.IsNotFound(err):
			tx.IfAbsent(mKey)
		case err != nil:
			return mended, err
		case isBindable(obj.(*dockerio.MacOSMachine)) && obj.(*dockerio.MacOSMachine).Spec.PoolName == parts[1]:
			continue
		default:
			tx.IfUnchanged(mKey, mRev)
		}
		tx.Delete(key)
		res, err := txn.Commit(ctx, b.client, &tx)
		if err != nil {
			return mended, err
		}
		if res.Succeeded {
			mended++
		}
	}
	return mended, nil
}

// indexStray settles a free machine missing from the index, if it still
// is one.
func (b *Binder) indexStray(ctx context.Context, namespace, name string) (bool, error) {
	mKey := b.machines.Key(namespace, name)
	obj, rev, err := b.machines.Get(ctx, b.client, mKey)
	if storage.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	m := obj.(*dockerio.MacOSMachine)
	if !isBindable(m) {
		return false, nil
	}
	var tx txn.Txn
	tx.IfUnchanged(mKey, rev).IfAbsent(b.bindableKey(m))
	write, report, err := b.SettleMachine(ctx, &tx, nil, m)
	if err != nil {
		return false, err
	}
	if write != m {
		if err := tx.WriteObject(ctx, b.machines, mKey, write); err != nil {
			return false, err
		}
	}
	res, err := txn.Commit(ctx, b.client, &tx)
	if err != nil || !res.Succeeded {
		return false, err
	}
	report()
	b.event(m, "MacOSMachine", corev1.EventTypeNormal, "Indexed",
		"the free machine was missing from its pool's bindable index (written by an earlier release, or etcd was edited); claims of the pool may take it now")
	return true, nil
}
