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

package ledgerguard

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The guard's keys, under the storage prefix, beside the resources'
// prefixes (<prefix>dockerios.io/<resource>/) and the ledger's index
// (<prefix>dockerios.io/identity-index/), so no watch, list or audit sees
// them.
const (
	ledgerIDKey = "dockerios.io/ledger-id"
	restoreKey  = "dockerios.io/ledger-restore"
)

// StoragePrefix is the prefix every key of an apiserver with etcd prefix
// etcdPrefix (its --etcd-prefix, "/registry" by default) has, ending in
// "/", as the etcd3 store and pkg/storage/txn compute it.
func StoragePrefix(etcdPrefix string) string {
	p := path.Join("/", etcdPrefix)
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// LedgerIDKey is the etcd key holding the ledger's ID.
func LedgerIDKey(storagePrefix string) string { return storagePrefix + ledgerIDKey }

// RestoreKey is the etcd key of the record a restore leaves.
func RestoreKey(storagePrefix string) string { return storagePrefix + restoreKey }

// groupPrefix is where everything DockerIOS keeps in etcd lives.
func groupPrefix(storagePrefix string) string { return storagePrefix + "dockerios.io/" }

// RestoreRecord is what `dockerios-apiserver ledger restore` writes into
// the ledger it restores, so that the apiserver that serves it next knows
// it is a restore, of what, and a person's deliberate act.
type RestoreRecord struct {
	// ID is random, one per restore: the marker records the last one
	// seen, so a restore is acted on once.
	ID string `json:"id"`
	// SnapshotRevision and SnapshotTime say which state came back: the
	// etcd revision the snapshot was taken at and when (zero when the
	// snapshot had no metadata).
	SnapshotRevision int64     `json:"snapshotRevision"`
	SnapshotTime     time.Time `json:"snapshotTime,omitempty"`
	SnapshotSHA256   string    `json:"snapshotSHA256,omitempty"`
	// RestoredAt is when the restore ran.
	RestoredAt time.Time `json:"restoredAt"`
	// HeldPools are the identity pools the restore put on hold.
	HeldPools []string `json:"heldPools"`
}

// EtcdState is what the guard reads from etcd.
type EtcdState struct {
	// LedgerID is empty when etcd holds none.
	LedgerID string
	// HasObjects: etcd holds some DockerIOS key besides the guard's own.
	HasObjects bool
	// Revision is etcd's revision when read.
	Revision int64
	// ClusterID is the etcd cluster's ID.
	ClusterID uint64
	// Restore is the record of the restore this ledger came from, if any.
	Restore *RestoreRecord
}

// ReadEtcd reads the guard's view of etcd, at one revision.
func ReadEtcd(ctx context.Context, client *clientv3.Client, storagePrefix string) (EtcdState, error) {
	group := groupPrefix(storagePrefix)
	// The guard's own keys sort among the others, so three keys show
	// whether anything else is there.
	resp, err := client.Get(ctx, group, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(3))
	if err != nil {
		return EtcdState{}, fmt.Errorf("reading the ledger in etcd: %w", err)
	}
	s := EtcdState{Revision: resp.Header.Revision, ClusterID: resp.Header.ClusterId}
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); k != LedgerIDKey(storagePrefix) && k != RestoreKey(storagePrefix) {
			s.HasObjects = true
		}
	}
	at := clientv3.WithRev(s.Revision)
	idResp, err := client.Get(ctx, LedgerIDKey(storagePrefix), at)
	if err != nil {
		return EtcdState{}, fmt.Errorf("reading the ledger ID in etcd: %w", err)
	}
	if len(idResp.Kvs) > 0 {
		s.LedgerID = string(idResp.Kvs[0].Value)
	}
	restoreResp, err := client.Get(ctx, RestoreKey(storagePrefix), at)
	if err != nil {
		return EtcdState{}, fmt.Errorf("reading the ledger's restore record in etcd: %w", err)
	}
	if len(restoreResp.Kvs) > 0 {
		r := &RestoreRecord{}
		if err := json.Unmarshal(restoreResp.Kvs[0].Value, r); err != nil {
			// Unreadable, but a restore all the same: the ID keeps it
			// from being acted on twice.
			r = &RestoreRecord{ID: fmt.Sprintf("unreadable@%d", restoreResp.Kvs[0].ModRevision)}
		}
		s.Restore = r
	}
	return s, nil
}

// WriteLedgerID writes id as the ledger's ID if etcd holds none; it says
// whether it did (false: another replica was first, read again).
func WriteLedgerID(ctx context.Context, client *clientv3.Client, storagePrefix, id string) (bool, error) {
	key := LedgerIDKey(storagePrefix)
	resp, err := client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, id)).Commit()
	if err != nil {
		return false, fmt.Errorf("writing the ledger ID into etcd: %w", err)
	}
	return resp.Succeeded, nil
}

// ReplaceLedgerID writes id as the ledger's ID if it still is old ("" for
// none); it says whether it did.
func ReplaceLedgerID(ctx context.Context, client *clientv3.Client, storagePrefix, old, id string) (bool, error) {
	if old == "" {
		return WriteLedgerID(ctx, client, storagePrefix, id)
	}
	key := LedgerIDKey(storagePrefix)
	resp, err := client.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", old)).Then(clientv3.OpPut(key, id)).Commit()
	if err != nil {
		return false, fmt.Errorf("writing the ledger ID into etcd: %w", err)
	}
	return resp.Succeeded, nil
}

// WriteRestoreRecord records a restore in the ledger (see RestoreRecord).
func WriteRestoreRecord(ctx context.Context, client *clientv3.Client, storagePrefix string, r RestoreRecord) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := client.Put(ctx, RestoreKey(storagePrefix), string(data)); err != nil {
		return fmt.Errorf("recording the restore in etcd: %w", err)
	}
	return nil
}

// ReadLedgerID reads the ledger's ID ("" when etcd holds none).
func ReadLedgerID(ctx context.Context, client *clientv3.Client, storagePrefix string) (string, error) {
	resp, err := client.Get(ctx, LedgerIDKey(storagePrefix))
	if err != nil {
		return "", fmt.Errorf("reading the ledger ID in etcd: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}
