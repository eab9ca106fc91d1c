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

// RunQueueAudit audits the claim queues every interval until ctx ends.
func (b *Binder) RunQueueAudit(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := b.AuditQueue(ctx); err != nil && ctx.Err() == nil {
				klog.InfoS("Audit of the claim queues failed", "err", err)
			} else if n > 0 {
				klog.InfoS("Dropped stale claim queue entries", "count", n)
			}
		}
	}
}
