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

// Package ledgerbackup backs up and restores the identity ledger: the
// whole etcd DockerIOS stores in, through etcd's own snapshot (the
// Maintenance API) and restore (etcdutl) — an export of objects cannot
// rebuild it: index keys live outside the resources' prefixes, status
// cannot be written back, and UIDs would change.
//
// A backup is two files in a directory: the snapshot
// (ledger-<UTC time>-r<revision>.db, written to a temporary file, synced
// and renamed, so a crash never leaves a partial one under that name) and
// its metadata (the same name with .json: revision, time, etcd cluster
// and member, size, sha256, the ledger's ID and DockerIOS's version). The
// newest N backups of a ledger are kept; backups of another ledger are
// never removed by retention.
//
// A restore never serves a ledger older than the fleet as it was: it
// puts every identity pool on hold (identityledger.RaiseRestoreHolds) and
// records itself (ledgerguard.RestoreRecord) in the restored data before
// any apiserver can serve it.
package ledgerbackup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/dockerios/dockerios/pkg/ledgerguard"
	"github.com/dockerios/dockerios/pkg/storage/txn"
	"github.com/dockerios/dockerios/pkg/version"
)

// Metadata describes one backup; it is written beside the snapshot.
type Metadata struct {
	// Snapshot is the snapshot's file name, in the same directory.
	Snapshot string `json:"snapshot"`
	// Revision is the etcd revision the snapshot holds the state at.
	Revision int64 `json:"revision"`
	// Time is when the snapshot was taken.
	Time time.Time `json:"time"`
	// LedgerID is the ledger's ID (ledgerguard); empty for a ledger
	// written before IDs.
	LedgerID string `json:"ledgerID"`
	// The etcd cluster and member it was taken from, and that member's
	// version.
	EtcdClusterID string `json:"etcdClusterID"`
	EtcdMemberID  string `json:"etcdMemberID"`
	EtcdMember    string `json:"etcdMember"`
	Endpoint      string `json:"endpoint"`
	EtcdVersion   string `json:"etcdVersion"`
	// Size, SHA256 and Keys are the snapshot file's.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Keys   int    `json:"keys"`
	// DockerIOSVersion is the version of the binary that took it.
	DockerIOSVersion string `json:"dockeriosVersion"`
	// Duration is how long taking it took, in seconds.
	Duration float64 `json:"durationSeconds"`
	// Held: a snapshot made by Hold, whose pools are on hold and which
	// carries its restore record; every member of a cluster restores the
	// same one.
	Held bool `json:"held,omitempty"`
	// RestoreID is the held snapshot's restore record's ID.
	RestoreID string `json:"restoreID,omitempty"`
}

// Options say where to take a backup from and where to keep it.
type Options struct {
	// Transport is the etcd's endpoints and TLS files (the apiserver's
	// --etcd-servers and --etcd-{cafile,certfile,keyfile}).
	Transport storagebackend.TransportConfig
	// StoragePrefix is the apiserver's ("/registry/").
	StoragePrefix string
	// Dir is where backups are kept; created if missing.
	Dir string
	// Keep is how many backups of the ledger to keep (at least 1).
	Keep int
	// Now defaults to the clock.
	Now func() time.Time
}

// ErrNoLedger is returned for an etcd that holds no DockerIOS ledger:
// nothing worth a backup, and a backup of it would push real ones out of
// retention.
var ErrNoLedger = errors.New("etcd holds no DockerIOS ledger (no ledger ID and no dockerios.io keys): nothing to back up")

// Take snapshots the etcd (its leader, when several members answer) into
// o.Dir, writes its metadata, and removes backups of the same ledger
// beyond the newest o.Keep.
func Take(ctx context.Context, o Options) (*Metadata, error) {
	if o.Keep < 1 {
		return nil, fmt.Errorf("keep must be at least 1, not %d", o.Keep)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the backup directory: %w", err)
	}
	endpoint, status, err := pickMember(ctx, o.Transport)
	if err != nil {
		return nil, err
	}
	single := o.Transport
	single.ServerList = []string{endpoint}
	client, err := txn.NewClient(single)
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd at %s: %w", endpoint, err)
	}
	defer client.Close()

	state, err := ledgerguard.ReadEtcd(ctx, client, o.StoragePrefix)
	if err != nil {
		return nil, err
	}
	if state.LedgerID == "" && !state.HasObjects {
		return nil, ErrNoLedger
	}
	start := o.Now()
	removeStaleParts(o.Dir, start)
	tmp, sum, size, etcdVersion, err := saveSnapshot(ctx, client, o.Dir)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp) // gone once renamed
	st, err := snapshot.NewV3(zap.NewNop()).Status(tmp)
	if err != nil {
		return nil, fmt.Errorf("checking the snapshot taken: %w", err)
	}
	md := &Metadata{
		Revision:         st.Revision,
		Time:             start.UTC().Truncate(time.Millisecond),
		LedgerID:         state.LedgerID,
		EtcdClusterID:    fmt.Sprintf("%x", status.Header.ClusterId),
		EtcdMemberID:     fmt.Sprintf("%x", status.Header.MemberId),
		EtcdMember:       memberName(ctx, client, status.Header.MemberId),
		Endpoint:         endpoint,
		EtcdVersion:      etcdVersion,
		Size:             size,
		SHA256:           sum,
		Keys:             st.TotalKey,
		DockerIOSVersion: version.String(),
		Duration:         o.Now().Sub(start).Seconds(),
	}
	md.Snapshot = fmt.Sprintf("ledger-%s-r%d.db", md.Time.Format("20060102T150405.000Z"), md.Revision)
	if err := commit(o.Dir, tmp, md); err != nil {
		return nil, err
	}
	if _, err := Prune(o.Dir, md.LedgerID, o.Keep); err != nil {
		return md, fmt.Errorf("backup %s written, but removing older ones failed: %w", md.Snapshot, err)
	}
	return md, nil
}

// pickMember returns the endpoint to snapshot: the leader's if some
// member says who it is, otherwise the first that answers. A snapshot is
// one member's state; the leader's is the newest.
func pickMember(ctx context.Context, t storagebackend.TransportConfig) (string, *clientv3.StatusResponse, error) {
	if len(t.ServerList) == 0 {
		return "", nil, fmt.Errorf("no etcd endpoints")
	}
	client, err := txn.NewClient(t)
	if err != nil {
		return "", nil, fmt.Errorf("connecting to etcd: %w", err)
	}
	defer client.Close()
	var (
		first       string
		firstStatus *clientv3.StatusResponse
		errs        []error
	)
	for _, ep := range t.ServerList {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := client.Status(sctx, ep)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
			continue
		}
		if st.Header.MemberId == st.Leader {
			return ep, st, nil
		}
		if first == "" {
			first, firstStatus = ep, st
		}
	}
	if first == "" {
		return "", nil, fmt.Errorf("no etcd member answered: %w", errors.Join(errs...))
	}
	return first, firstStatus, nil
}

func memberName(ctx context.Context, client *clientv3.Client, id uint64) string {
	resp, err := client.MemberList(ctx)
	if err != nil {
		return ""
	}
	for _, m := range resp.Members {
		if m.ID == id {
			return m.Name
		}
	}
	return ""
}

// partPrefix names snapshots being written.
const partPrefix = ".ledger-"

// saveSnapshot streams a snapshot from the client's (single) member into
// a new temporary file of dir, synced, and returns its path, sha256 and
// size, and the member's etcd version.
func saveSnapshot(ctx context.Context, client *clientv3.Client, dir string) (path, sum string, size int64, etcdVersion string, err error) {
	f, err := os.CreateTemp(dir, partPrefix+"*.part")
	if err != nil {
		return "", "", 0, "", fmt.Errorf("creating the snapshot file: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	resp, err := client.SnapshotWithVersion(ctx)
	if err != nil {
		return "", "", 0, "", fmt.Errorf("requesting a snapshot: %w", err)
	}
	defer resp.Snapshot.Close()
	h := sha256.New()
	size, err = io.Copy(io.MultiWriter(f, h), resp.Snapshot)
	if err != nil {
		return "", "", 0, "", fmt.Errorf("receiving the snapshot: %w", err)
	}
	// etcd appends the sha256 of the database; a stream cut short lacks it.
	if size%512 != sha256.Size {
		return "", "", 0, "", fmt.Errorf("the snapshot received (%d bytes) is incomplete: it does not end with its checksum", size)
	}
	if err = f.Sync(); err != nil {
		return "", "", 0, "", fmt.Errorf("syncing the snapshot: %w", err)
	}
	if err = f.Close(); err != nil {
		return "", "", 0, "", err
	}
	return f.Name(), hex.EncodeToString(h.Sum(nil)), size, resp.Version, nil
}

// commit renames the synced snapshot tmp to md.Snapshot and writes the
// metadata beside it, each atomically, and syncs the directory.
func commit(dir, tmp string, md *Metadata) error {
	if err := os.Rename(tmp, filepath.Join(dir, md.Snapshot)); err != nil {
		return fmt.Errorf("naming the snapshot: %w", err)
	}
	if err := writeMetadata(filepath.Join(dir, md.Snapshot), md); err != nil {
		return err
	}
	return syncDir(dir)
}

// MetadataPath is where the metadata of the snapshot at path is.
func MetadataPath(snapshotPath string) string {
	return strings.TrimSuffix(snapshotPath, filepath.Ext(snapshotPath)) + ".json"
}

func writeMetadata(snapshotPath string, md *Metadata) error {
	data, err := json.MarshalIndent(md, "", "  ")
	if err != nil {
		return err
	}
	path := MetadataPath(snapshotPath)
	f, err := os.CreateTemp(filepath.Dir(path), partPrefix+"*.json.part")
	if err != nil {
		return fmt.Errorf("writing the backup's metadata: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("writing the backup's metadata: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o600); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// ReadMetadata reads the metadata beside the snapshot at path; nil, with
// no error, when there is none.
func ReadMetadata(snapshotPath string) (*Metadata, error) {
	data, err := os.ReadFile(MetadataPath(snapshotPath))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	md := &Metadata{}
	if err := json.Unmarshal(data, md); err != nil {
		return nil, fmt.Errorf("reading %s: %w", MetadataPath(snapshotPath), err)
	}
	return md, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

var backupName = regexp.MustCompile(`^ledger-\d{8}T\d{6}\.\d{3}Z-r\d+\.db$`)

// List returns the backups in dir with their metadata, newest first. A
// snapshot without readable metadata is listed with only its name.
func List(dir string) ([]Metadata, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Metadata
	for _, e := range entries {
		if e.IsDir() || !backupName.MatchString(e.Name()) {
			continue
		}
		md, err := ReadMetadata(filepath.Join(dir, e.Name()))
		if err != nil || md == nil {
			md = &Metadata{}
		}
		md.Snapshot = e.Name()
		out = append(out, *md)
	}
	// The name starts with the UTC time, so it sorts by age.
	sort.Slice(out, func(i, j int) bool { return out[i].Snapshot > out[j].Snapshot })
	return out, nil
}

// Prune removes the backups of ledgerID in dir beyond the newest keep,
// and returns the snapshots removed. Backups of another ledger, or whose
// metadata is unreadable, are never removed.
func Prune(dir, ledgerID string, keep int) ([]string, error) {
	all, err := List(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	kept := 0
	for _, md := range all {
		if md.SHA256 == "" || md.LedgerID != ledgerID {
			continue
		}
		kept++
		if kept <= keep {
			continue
		}
		path := filepath.Join(dir, md.Snapshot)
		if err := os.Remove(MetadataPath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, err
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, err
		}
		removed = append(removed, md.Snapshot)
	}
	return removed, nil
}

// removeStaleParts removes temporary files left by a backup that was
// killed, an hour after: one being written now is younger.
func removeStaleParts(dir string, now time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), partPrefix) || !strings.HasSuffix(e.Name(), ".part") {
			continue
		}
		if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > time.Hour {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
