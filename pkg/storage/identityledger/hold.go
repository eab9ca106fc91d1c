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
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A restored ledger is older than the fleet: an identity it records as free
// may have been given, after the snapshot was taken, to a machine whose VM
// still runs. Until something has compared what runs with the ledger, no
// such identity may be given out again. So a restore puts every pool on
// hold: its free list is emptied and nothing is put back on it (machines
// wait, as for an exhausted pool) until the hold is lifted. The controller
// lifts it once it has quarantined every identity it found in use by a VM
// the ledger does not record as the holder (see MacOSIdentity's
// HeldOutsideLedger condition); a person can lift it too.
//
// The hold keys live outside the resources' prefixes and outside the index
// (so the audit neither reports nor removes them):
//
//	<storage prefix>dockerios.io/identity-holds/<pool> → Hold, as JSON

// Hold is why a pool's identities are held back.
type Hold struct {
	// Reason is a CamelCase word, e.g. Restored.
	Reason string `json:"reason"`
	// Message says what happened, for a person.
	Message string `json:"message"`
	// Since is when the hold was raised.
	Since time.Time `json:"since"`
}

// ReasonRestored is the reason of a hold raised by a restore.
const ReasonRestored = "Restored"

// PoolOnHold is the MacOSIdentityPool condition that is True, with the
// hold's reason and message, while the pool is on hold.
const PoolOnHold = "OnHold"

func holdsRoot(storagePrefix string) string { return storagePrefix + "dockerios.io/identity-holds/" }

func (l *Ledger) holdKey(pool string) string { return holdsRoot(l.identities.StoragePrefix()) + pool }

// RaiseRestoreHolds puts every identity pool of the etcd behind client on
// hold, as a restore must before the apiserver serves the restored ledger:
// for each pool it writes the hold key and empties the free list, in one
// transaction per pool. storagePrefix is the apiserver's (e.g. "/registry/").
// It returns the pools held. Raising it again is harmless.
func RaiseRestoreHolds(ctx context.Context, client *clientv3.Client, storagePrefix, message string, now time.Time) ([]string, error) {
	poolsPrefix := storagePrefix + "dockerios.io/macosidentitypools/"
	resp, err := client.Get(ctx, poolsPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	keys := newLayout(storagePrefix)
	var pools []string
	for _, kv := range resp.Kvs {
		pool := strings.TrimPrefix(string(kv.Key), poolsPrefix)
		if pool == "" || strings.Contains(pool, "/") {
			continue
		}
		hold, err := json.Marshal(Hold{Reason: ReasonRestored, Message: message, Since: now.UTC().Truncate(time.Second)})
		if err != nil {
			return nil, err
		}
		if _, err := client.Txn(ctx).Then(
			clientv3.OpPut(holdsRoot(storagePrefix)+pool, string(hold)),
			clientv3.OpDelete(keys.freePrefix(pool), clientv3.WithPrefix()),
		).Commit(); err != nil {
			return nil, fmt.Errorf("holding pool %s: %w", pool, err)
		}
		pools = append(pools, pool)
	}
	sort.Strings(pools)
	return pools, nil
}

// hold reads pool's hold; nil when it is not held. rev is the hold key's
// create revision, for a transaction that must not outlive the hold.
func (l *Ledger) hold(ctx context.Context, pool string) (h *Hold, rev int64, err error) {
	resp, err := l.client.Get(ctx, l.holdKey(pool))
	if err != nil || len(resp.Kvs) == 0 {
		return nil, 0, err
	}
	h = &Hold{}
	if err := json.Unmarshal(resp.Kvs[0].Value, h); err != nil {
		// Unreadable, but there: held all the same.
		h = &Hold{Reason: ReasonRestored, Message: "the pool's hold record is unreadable: " + err.Error()}
	}
	return h, resp.Kvs[0].CreateRevision, nil
}

// Hold says whether pool is on hold, and why.
func (l *Ledger) Hold(ctx context.Context, pool string) (*Hold, error) {
	h, _, err := l.hold(ctx, pool)
	return h, err
}

// holds reads every pool's hold.
func (l *Ledger) holds(ctx context.Context, opts ...clientv3.OpOption) (map[string]*Hold, error) {
	root := holdsRoot(l.identities.StoragePrefix())
	resp, err := l.client.Get(ctx, root, append([]clientv3.OpOption{clientv3.WithPrefix()}, opts...)...)
	if err != nil {
		return nil, err
	}
	out := map[string]*Hold{}
	for _, kv := range resp.Kvs {
		h := &Hold{}
		if json.Unmarshal(kv.Value, h) != nil {
			h = &Hold{Reason: ReasonRestored}
		}
		out[strings.TrimPrefix(string(kv.Key), root)] = h
	}
	return out, nil
}

// LiftHold ends pool's hold and gives its free identities back: each to the
// oldest waiting machine, or onto the free list. Identities found in use
// outside the ledger meanwhile stay withheld. It says whether there was a
// hold to lift.
func (l *Ledger) LiftHold(ctx context.Context, pool string) (bool, error) {
	resp, err := l.client.Delete(ctx, l.holdKey(pool))
	if err != nil {
		return false, err
	}
	if resp.Deleted == 0 {
		return false, nil
	}
	// The repair finds every free identity of the pool off its free list
	// and every machine waiting while one is free, and fixes each in its
	// own conditional transaction.
	if _, err := l.Repair(ctx); err != nil {
		return true, fmt.Errorf("hold on pool %s lifted, but giving its identities back failed (the next repair pass retries): %w", pool, err)
	}
	// The status says OnHold until it is written again; a pool with no
	// free identity would see no other change that writes it.
	if err := l.updatePoolStatus(ctx, pool); err != nil && !errors.Is(err, errViewBehind) {
		return true, err
	}
	return true, nil
}
