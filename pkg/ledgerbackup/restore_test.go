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

package ledgerbackup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	"github.com/dockerios/dockerios/pkg/ledgerguard"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
)

// holdKey is where identityledger keeps a pool's hold (hold.go).
func holdKey(pool string) string { return prefix + "dockerios.io/identity-holds/" + pool }

// backup seeds a ledger of two pools, takes a backup, then changes the
// ledger as a fleet would after it: an identity is taken off a free list
// and a machine created.
func backup(t *testing.T) (*testEtcd, *Metadata, string) {
	t.Helper()
	e := startEtcd(t)
	seed(t, e.client, "ledger-a", map[string][]string{"imac": {"id-1", "id-2"}, "macpro": {"id-3"}})
	dir := t.TempDir()
	md, err := Take(context.Background(), Options{Transport: storagebackend.TransportConfig{ServerList: []string{e.url}}, StoragePrefix: prefix, Dir: dir, Keep: 5})
	require.NoError(t, err)
	_, err = e.client.Delete(context.Background(), freeKey("imac", "id-2"))
	require.NoError(t, err)
	put(t, e.client, prefix+"dockerios.io/macosmachines/default/after-the-backup", "{}")
	return e, md, filepath.Join(dir, md.Snapshot)
}

func get(t *testing.T, c *clientv3.Client, key string) string {
	t.Helper()
	resp, err := c.Get(context.Background(), key)
	require.NoError(t, err)
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

func count(t *testing.T, c *clientv3.Client, keyPrefix string) int64 {
	t.Helper()
	resp, err := c.Get(context.Background(), keyPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	return resp.Count
}

// A restore into the apiserver's data directory gives back the ledger as
// it was at the backup, with every pool on hold (free lists emptied, a
// hold naming the snapshot's revision and time), the restore recorded,
// and the revision moved past every revision a client may hold.
func TestRestore_GivesBackTheSnapshotWithEveryPoolOnHold(t *testing.T) {
	_, md, snap := backup(t)
	dataDir := filepath.Join(t.TempDir(), "dockerios")
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	res, err := Restore(context.Background(), RestoreOptions{
		HoldOptions:  HoldOptions{Snapshot: snap, StoragePrefix: prefix, Now: func() time.Time { return now }},
		DataDir:      filepath.Join(dataDir, "etcd"),
		Member:       Embedded,
		RevisionBump: DefaultRevisionBump,
	})
	require.NoError(t, err)
	assert.True(t, res.VerifiedSHA256)
	assert.Equal(t, "ledger-a", res.LedgerID)
	assert.Equal(t, []string{"imac", "macpro"}, res.Record.HeldPools)
	assert.Equal(t, md.Revision, res.Record.SnapshotRevision)
	entries, err := os.ReadDir(dataDir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the scratch etcd is gone")

	e, err := embeddedetcd.Start(filepath.Join(dataDir, "etcd"), io.Discard)
	require.NoError(t, err)
	defer e.Stop()
	c := client(t, e.ClientURL)
	assert.Equal(t, "ledger-a", get(t, c, ledgerguard.LedgerIDKey(prefix)))
	assert.Equal(t, "", get(t, c, prefix+"dockerios.io/macosmachines/default/after-the-backup"), "the state is the snapshot's")
	assert.Equal(t, int64(3), count(t, c, prefix+"dockerios.io/macosidentities/"))
	assert.Equal(t, int64(0), count(t, c, prefix+"dockerios.io/identity-index/pools/"), "every free list is emptied")
	for _, pool := range []string{"imac", "macpro"} {
		var h identityledger.Hold
		require.NoError(t, json.Unmarshal([]byte(get(t, c, holdKey(pool))), &h), pool)
		assert.Equal(t, identityledger.ReasonRestored, h.Reason)
		assert.Contains(t, h.Message, fmt.Sprintf("etcd revision %d", md.Revision))
		assert.Contains(t, h.Message, "taken "+md.Time.UTC().Format(time.RFC3339))
		assert.Equal(t, now, h.Since)
	}
	var r ledgerguard.RestoreRecord
	require.NoError(t, json.Unmarshal([]byte(get(t, c, ledgerguard.RestoreKey(prefix))), &r))
	assert.Equal(t, res.Record.ID, r.ID)
	assert.Equal(t, md.Revision, r.SnapshotRevision)
	assert.Equal(t, md.SHA256, r.SnapshotSHA256)

	state, err := ledgerguard.ReadEtcd(context.Background(), c, prefix)
	require.NoError(t, err)
	assert.Greater(t, state.Revision, int64(DefaultRevisionBump), "the revision is bumped")
	_, err = c.Get(context.Background(), ledgerguard.LedgerIDKey(prefix), clientv3.WithRev(md.Revision))
	assert.ErrorIs(t, err, rpctypes.ErrCompacted, "revisions before the bump are compacted: watchers list afresh")
}

// A snapshot that does not match its metadata is not restored, and no
// data directory is made.
func TestRestore_RefusesASnapshotThatDoesNotMatchItsMetadata(t *testing.T) {
	_, _, snap := backup(t)
	data, err := os.ReadFile(snap)
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff
	require.NoError(t, os.WriteFile(snap, data, 0o600))
	target := filepath.Join(t.TempDir(), "etcd")
	_, err = Restore(context.Background(), RestoreOptions{HoldOptions: HoldOptions{Snapshot: snap, StoragePrefix: prefix}, DataDir: target, Member: Embedded})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not match its metadata")
	assert.NoDirExists(t, target)
}

// A restore never overwrites a ledger.
func TestRestore_NeverOverwritesALedger(t *testing.T) {
	_, _, snap := backup(t)
	target := filepath.Join(t.TempDir(), "etcd")
	require.NoError(t, os.MkdirAll(filepath.Join(target, "member"), 0o700))
	_, err := Restore(context.Background(), RestoreOptions{HoldOptions: HoldOptions{Snapshot: snap, StoragePrefix: prefix}, DataDir: target, Member: Embedded})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not empty")
	assert.Contains(t, err.Error(), "mv "+target)
}

// Without metadata the snapshot is restored all the same (etcd's own
// checksum is still checked), and says it was not verified.
func TestRestore_WithoutMetadata(t *testing.T) {
	_, _, snap := backup(t)
	require.NoError(t, os.Remove(MetadataPath(snap)))
	res, err := Restore(context.Background(), RestoreOptions{HoldOptions: HoldOptions{Snapshot: snap, StoragePrefix: prefix},
		DataDir: filepath.Join(t.TempDir(), "etcd"), Member: Embedded})
	require.NoError(t, err)
	assert.False(t, res.VerifiedSHA256)
	assert.Equal(t, []string{"imac", "macpro"}, res.Record.HeldPools)
}

// Every member of a cluster restores one held snapshot: restoring a
// plain one for a member of three is refused; the held snapshot, made
// once, restored on three members, makes a cluster that serves the
// snapshot's ledger with its pools on hold and one restore record.
func TestRestore_ThreeMembersRestoreOneHeldSnapshot(t *testing.T) {
	_, md, snap := backup(t)
	dir := t.TempDir()
	ports := freePorts(t, 6)
	var cluster []string
	members := make([]Member, 3)
	for i := range members {
		name := fmt.Sprintf("m%d", i)
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[2*i+1])
		cluster = append(cluster, name+"="+peer)
		members[i] = Member{Name: name, PeerURLs: []string{peer}, ClusterToken: "restored"}
	}
	for i := range members {
		members[i].InitialCluster = strings.Join(cluster, ",")
	}

	_, err := Restore(context.Background(), RestoreOptions{HoldOptions: HoldOptions{Snapshot: snap, StoragePrefix: prefix},
		DataDir: filepath.Join(dir, "m0"), Member: members[0]})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ledger hold")

	held := filepath.Join(dir, "held.db")
	h, err := Hold(context.Background(), HoldOptions{Snapshot: snap, StoragePrefix: prefix}, held)
	require.NoError(t, err)
	assert.True(t, h.Held.Held)
	assert.Equal(t, h.Record.ID, h.Held.RestoreID)
	for i, m := range members {
		res, err := Restore(context.Background(), RestoreOptions{HoldOptions: HoldOptions{Snapshot: held, StoragePrefix: prefix},
			DataDir: filepath.Join(dir, m.Name), Member: m, RevisionBump: DefaultRevisionBump})
		require.NoError(t, err, "member %d", i)
		assert.True(t, res.VerifiedSHA256)
		assert.Equal(t, h.Record.ID, res.Record.ID)
	}

	var wg sync.WaitGroup
	servers := make([]*embed.Etcd, 3)
	errs := make([]error, 3)
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := embed.NewConfig()
			cfg.Name, cfg.Dir = m.Name, filepath.Join(dir, m.Name)
			client := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(ports[2*i])}
			peer, _ := url.Parse(m.PeerURLs[0])
			cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
			cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
			cfg.InitialCluster, cfg.InitialClusterToken = m.InitialCluster, m.ClusterToken
			cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
			e, err := embed.StartEtcd(cfg)
			if err != nil {
				errs[i] = err
				return
			}
			servers[i] = e
			select {
			case <-e.Server.ReadyNotify():
			case <-time.After(time.Minute):
				errs[i] = fmt.Errorf("member %s not ready", m.Name)
			}
		}()
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			defer s.Close()
		}
	}
	for _, err := range errs {
		require.NoError(t, err)
	}
	var endpoints []string
	for i := range members {
		endpoints = append(endpoints, "http://127.0.0.1:"+strconv.Itoa(ports[2*i]))
	}
	for _, ep := range endpoints {
		c := client(t, ep)
		list, err := c.MemberList(context.Background())
		require.NoError(t, err)
		assert.Len(t, list.Members, 3)
		// Serializable: this member's own data, not the leader's.
		resp, err := c.Get(context.Background(), prefix+"dockerios.io/", clientv3.WithPrefix(), clientv3.WithSerializable())
		require.NoError(t, err)
		var keys []string
		for _, kv := range resp.Kvs {
			keys = append(keys, strings.TrimPrefix(string(kv.Key), prefix+"dockerios.io/"))
		}
		sort.Strings(keys)
		assert.Equal(t, []string{
			"identity-holds/imac", "identity-holds/macpro", "ledger-id", "ledger-restore",
			"macosidentities/id-1", "macosidentities/id-2", "macosidentities/id-3",
			"macosidentitypools/imac", "macosidentitypools/macpro",
		}, keys, "member %s", ep)
		var r ledgerguard.RestoreRecord
		require.NoError(t, json.Unmarshal([]byte(get(t, c, ledgerguard.RestoreKey(prefix))), &r))
		assert.Equal(t, h.Record.ID, r.ID)
		assert.Equal(t, md.Revision, r.SnapshotRevision)
	}
	// A backup of the restored cluster names its leader.
	all, err := Take(context.Background(), Options{Transport: storagebackend.TransportConfig{ServerList: endpoints}, StoragePrefix: prefix, Dir: filepath.Join(dir, "backups"), Keep: 1})
	require.NoError(t, err)
	assert.Greater(t, all.Revision, int64(DefaultRevisionBump))
}

// listing is every path under dir (relative), for comparing a directory
// before and after.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		paths = append(paths, rel)
		return nil
	}))
	return paths
}

// damage writes a damaged copy of the snapshot snap into dir, with its
// metadata beside it when withMetadata: cut short (as `head -c` would),
// or with one byte flipped.
func damage(t *testing.T, snap, dir, how string, withMetadata bool) string {
	t.Helper()
	data, err := os.ReadFile(snap)
	require.NoError(t, err)
	switch how {
	case "truncated":
		require.Greater(t, len(data), 4096)
		data = data[:len(data)/2+100]
	case "flipped":
		data[len(data)/2] ^= 0xff
	default:
		t.Fatalf("unknown damage %q", how)
	}
	out := filepath.Join(dir, how+".db")
	require.NoError(t, os.WriteFile(out, data, 0o600))
	if withMetadata {
		md, err := os.ReadFile(MetadataPath(snap))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(MetadataPath(out), md, 0o600))
	}
	return out
}

// A snapshot cut short or with a byte changed, without metadata to check
// it against, is refused before etcd's database library opens it (which
// would crash the process on a truncated file), and nothing is left
// behind: neither in the target nor in the scratch directory beside it.
func TestRestore_RefusesADamagedSnapshotWithoutMetadata(t *testing.T) {
	_, _, snap := backup(t)
	for _, tc := range []struct {
		how  string
		want string
	}{
		{"truncated", "is not a whole etcd snapshot"},
		{"flipped", "is damaged: its contents hash to"},
	} {
		t.Run(tc.how, func(t *testing.T) {
			bad := damage(t, snap, t.TempDir(), tc.how, false)
			parent := t.TempDir()
			target := filepath.Join(parent, "etcd")
			before := listing(t, parent)
			_, err := Restore(context.Background(), RestoreOptions{HoldOptions: HoldOptions{Snapshot: bad, StoragePrefix: prefix}, DataDir: target, Member: Embedded})
			require.Error(t, err)
			assert.Contains(t, err.Error(), bad+" "+tc.want)
			assert.Equal(t, before, listing(t, parent), "neither the target nor the scratch directory gains anything")

			out := filepath.Join(t.TempDir(), "held.db")
			_, err = Hold(context.Background(), HoldOptions{Snapshot: bad, StoragePrefix: prefix, Scratch: parent}, out)
			require.Error(t, err)
			assert.Contains(t, err.Error(), bad+" "+tc.want)
			assert.NoFileExists(t, out)
			assert.Equal(t, before, listing(t, parent))
		})
	}
}

// The trailing hash is etcd's own: every snapshot this package writes (a
// backup, a held snapshot) passes the check.
func TestVerify_AcceptsTheSnapshotsThisPackageWrites(t *testing.T) {
	_, _, snap := backup(t)
	held := filepath.Join(t.TempDir(), "held.db")
	_, err := Hold(context.Background(), HoldOptions{Snapshot: snap, StoragePrefix: prefix}, held)
	require.NoError(t, err)
	for _, path := range []string{snap, held} {
		require.NoError(t, os.Remove(MetadataPath(path)), "the trailing hash alone is checked")
		_, verified, err := verify(path)
		require.NoError(t, err, path)
		assert.False(t, verified)
	}
}

// A restore with --move-aside of a snapshot that cannot be restored moves
// nothing: the ledger in the target stays where it is.
func TestRestore_MoveAsideMovesNothingWhenTheSnapshotIsDamaged(t *testing.T) {
	_, _, snap := backup(t)
	for _, tc := range []struct {
		name         string
		how          string
		withMetadata bool
		want         string
	}{
		{"truncated, no metadata", "truncated", false, "is not a whole etcd snapshot"},
		{"flipped, no metadata", "flipped", false, "is damaged"},
		{"truncated, with metadata", "truncated", true, "is not a whole etcd snapshot"},
		{"flipped, with metadata", "flipped", true, "does not match its metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := damage(t, snap, t.TempDir(), tc.how, tc.withMetadata)
			parent := t.TempDir()
			target := filepath.Join(parent, "etcd")
			require.NoError(t, os.MkdirAll(filepath.Join(target, "member", "snap"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(target, "member", "snap", "db"), []byte("the live ledger"), 0o600))
			before := listing(t, parent)
			_, err := Restore(context.Background(), RestoreOptions{HoldOptions: HoldOptions{Snapshot: bad, StoragePrefix: prefix}, DataDir: target, Member: Embedded, MoveAside: true})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, before, listing(t, parent), "the target is as it was, nothing moved aside")
			moved, err := filepath.Glob(target + ".before-restore-*")
			require.NoError(t, err)
			assert.Empty(t, moved)
			db, err := os.ReadFile(filepath.Join(target, "member", "snap", "db"))
			require.NoError(t, err)
			assert.Equal(t, "the live ledger", string(db))
		})
	}
}

// When the restore into the target fails after what it held was moved
// aside, what it partly wrote is removed and what it held moved back.
func TestRestore_MoveAsideMovesBackWhenTheRestoreFails(t *testing.T) {
	_, _, snap := backup(t)
	parent := t.TempDir()
	target := filepath.Join(parent, "etcd")
	require.NoError(t, os.MkdirAll(filepath.Join(target, "member", "snap"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(target, "member", "snap", "db"), []byte("the live ledger"), 0o600))
	before := listing(t, parent)
	restoreInto = func(src, dir string, m Member, bump uint64) error {
		// etcd writes the target, then something fails.
		if err := etcdRestore(src, dir, m, bump); err != nil {
			return err
		}
		return fmt.Errorf("injected failure")
	}
	defer func() { restoreInto = etcdRestore }()
	_, err := Restore(context.Background(), RestoreOptions{HoldOptions: HoldOptions{Snapshot: snap, StoragePrefix: prefix}, DataDir: target, Member: Embedded, MoveAside: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "injected failure")
	assert.Contains(t, err.Error(), "moved back")
	assert.Equal(t, before, listing(t, parent), "the target holds what it held, and nothing else is left")
	db, err := os.ReadFile(filepath.Join(target, "member", "snap", "db"))
	require.NoError(t, err)
	assert.Equal(t, "the live ledger", string(db))
}

// A restore with --move-aside of a whole snapshot that fails on the way
// (holding its pools in the scratch etcd fails; a plain snapshot for a
// member of several) moves nothing either.
func TestRestore_MoveAsideMovesNothingWhenTheHoldFails(t *testing.T) {
	_, _, snap := backup(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	three := Member{Name: "m0", PeerURLs: []string{"http://127.0.0.1:2380"}, ClusterToken: "t",
		InitialCluster: "m0=http://127.0.0.1:2380,m1=http://127.0.0.1:2381,m2=http://127.0.0.1:2382"}
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		member Member
		want   string
	}{
		{"the hold fails", cancelled, Embedded, "context canceled"},
		{"a member of three", context.Background(), three, "is not a held snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			target := filepath.Join(parent, "etcd")
			require.NoError(t, os.MkdirAll(filepath.Join(target, "member", "snap"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(target, "member", "snap", "db"), []byte("the live ledger"), 0o600))
			before := listing(t, parent)
			_, err := Restore(tc.ctx, RestoreOptions{HoldOptions: HoldOptions{Snapshot: snap, StoragePrefix: prefix}, DataDir: target, Member: tc.member, MoveAside: true})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, before, listing(t, parent), "the target is as it was, nothing moved aside")
		})
	}
}
