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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	"github.com/dockerios/dockerios/pkg/ledgerguard"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
	"github.com/dockerios/dockerios/pkg/version"
)

// DefaultRevisionBump is how far a restore moves etcd's revision forward
// (and marks everything before it compacted), as etcd advises for
// Kubernetes: every client (the watch cache, the controller's informers,
// kube-apiserver's) holds a resourceVersion of the ledger as it was
// before, newer than the snapshot's; without the bump they would wait
// for revisions that mean something else, with it they list afresh.
const DefaultRevisionBump = 1_000_000_000

// Embedded is the member an apiserver's embedded etcd (pkg/embeddedetcd)
// is restored as.
var Embedded = Member{Name: "dockerios", PeerURLs: []string{"http://127.0.0.1:2380"}, InitialCluster: "dockerios=http://127.0.0.1:2380", ClusterToken: "etcd-cluster"}

// Member is the etcd member a restore makes, as etcd's own flags say it
// (--name, --initial-advertise-peer-urls, --initial-cluster,
// --initial-cluster-token).
type Member struct {
	Name           string
	PeerURLs       []string
	InitialCluster string
	ClusterToken   string
}

// members is how many members InitialCluster names.
func (m Member) members() int { return len(strings.Split(m.InitialCluster, ",")) }

// HoldOptions say what snapshot to put on hold.
type HoldOptions struct {
	// Snapshot is the file to restore; its metadata, when beside it, is
	// checked (sha256).
	Snapshot string
	// StoragePrefix is the apiserver's ("/registry/").
	StoragePrefix string
	// Scratch is a directory for a temporary etcd (created inside it
	// and removed); the system's temporary directory when empty.
	Scratch string
	// Log receives the temporary etcd's warnings.
	Log io.Writer
	// Now defaults to the clock.
	Now func() time.Time
}

// RestoreOptions say what snapshot to restore, into what member.
type RestoreOptions struct {
	HoldOptions
	// DataDir is the etcd data directory to make; it must not exist, or
	// be empty.
	DataDir string
	Member  Member
	// RevisionBump: see DefaultRevisionBump; 0 restores the revision as
	// it was.
	RevisionBump uint64
	// MoveAside renames a DataDir that holds data to
	// DataDir.before-restore-<UTC time> instead of refusing: nothing is
	// deleted, and a restore in a pod needs no shell (the image has none).
	MoveAside bool
}

// Result says what a restore did.
type Result struct {
	// Source is the snapshot restored, and its metadata (nil when it had
	// none).
	Source   string
	Metadata *Metadata
	// VerifiedSHA256: the snapshot matched its metadata's sha256.
	VerifiedSHA256 bool
	// Record is the restore record written into the ledger.
	Record ledgerguard.RestoreRecord
	// LedgerID is the restored ledger's.
	LedgerID string
	// Held is the held snapshot (Hold's output; a temporary file, gone,
	// for Restore).
	Held *Metadata
	// MovedAside is where what the target held was moved (MoveAside).
	MovedAside string `json:",omitempty"`
}

// Restore makes DataDir an etcd member holding the snapshot's ledger with
// every identity pool on hold: unless the snapshot is already held (Hold),
// it is restored into a temporary etcd first, its pools are held and the
// restore recorded, and that state is what DataDir gets. A cluster of
// several members must restore one held snapshot on every member (Hold
// once, then Restore it on each); Restore refuses to hold separately for
// a member of several, which would give the members different data.
func Restore(ctx context.Context, o RestoreOptions) (*Result, error) {
	o.defaults()
	md, verified, err := verify(o.Snapshot)
	if err != nil {
		return nil, err
	}
	res := &Result{Source: o.Snapshot, Metadata: md, VerifiedSHA256: verified}
	// Nothing is moved until everything that can fail about the snapshot
	// has succeeded: a failed restore leaves DataDir as it was.
	moveAside := false
	if err := checkEmptyDir(o.DataDir); err != nil {
		if !o.MoveAside || errors.Is(err, errNoDataDir) {
			return nil, err
		}
		moveAside = true
	}
	held := o.Snapshot
	if md == nil || !md.Held {
		if o.Member.members() > 1 {
			return nil, fmt.Errorf("%s is not a held snapshot: every member of a cluster of %d must restore the same held snapshot; make it once with `dockerios-apiserver ledger hold --snapshot %s --out HELD.db`, then restore HELD.db on each member",
				o.Snapshot, o.Member.members(), o.Snapshot)
		}
		if err := os.MkdirAll(o.Scratch, 0o700); err != nil {
			return nil, fmt.Errorf("making a scratch directory: %w", err)
		}
		scratch, err := os.MkdirTemp(o.Scratch, ".ledger-restore-")
		if err != nil {
			return nil, fmt.Errorf("making a scratch directory: %w", err)
		}
		defer os.RemoveAll(scratch)
		h, err := hold(ctx, o.HoldOptions, md, scratch, filepath.Join(scratch, "held.db"))
		if err != nil {
			return nil, err
		}
		res.Held, res.Record, res.LedgerID = h.md, h.record, h.md.LedgerID
		held = filepath.Join(scratch, "held.db")
	} else {
		res.Held, res.LedgerID = md, md.LedgerID
		res.Record = ledgerguard.RestoreRecord{ID: md.RestoreID, SnapshotRevision: md.Revision, SnapshotTime: md.Time}
	}
	_, statErr := os.Stat(o.DataDir)
	existed := statErr == nil
	if moveAside {
		res.MovedAside = fmt.Sprintf("%s.before-restore-%s", filepath.Clean(o.DataDir), o.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(o.DataDir, res.MovedAside); err != nil {
			return nil, fmt.Errorf("moving %s aside: %w", o.DataDir, err)
		}
	}
	if err := restoreInto(held, o.DataDir, o.Member, o.RevisionBump); err != nil {
		return nil, undoRestore(o.DataDir, existed, res.MovedAside, err)
	}
	return res, nil
}

// restoreInto is the restore into the target: etcdRestore; tests replace
// it to make it fail.
var restoreInto = etcdRestore

// undoRestore puts dir back as it was before a restore into it failed
// (with err): what the restore wrote is removed, and what was moved aside
// (when movedAside is not empty) is moved back.
func undoRestore(dir string, existed bool, movedAside string, err error) error {
	if movedAside != "" {
		if rerr := os.RemoveAll(dir); rerr != nil {
			return fmt.Errorf("%w; removing what the restore wrote into %s failed (%v): what %s held is in %s", err, dir, rerr, dir, movedAside)
		}
		if rerr := os.Rename(movedAside, dir); rerr != nil {
			return fmt.Errorf("%w; moving %s back to %s failed (%v): what %s held is in %s", err, movedAside, dir, rerr, dir, movedAside)
		}
		return fmt.Errorf("%w; %s was moved back to %s as it was", err, movedAside, dir)
	}
	if !existed {
		if rerr := os.RemoveAll(dir); rerr != nil {
			return fmt.Errorf("%w; removing what the restore wrote into %s failed: %v", err, dir, rerr)
		}
		return err
	}
	// dir was empty: empty it again.
	entries, rerr := os.ReadDir(dir)
	for _, e := range entries {
		if rerr == nil {
			rerr = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	if rerr != nil {
		return fmt.Errorf("%w; removing what the restore wrote into %s failed: %v", err, dir, rerr)
	}
	return err
}

// Hold writes to out a snapshot of the given one's ledger with every
// identity pool on hold and the restore recorded, and its metadata
// beside it (Held: true): what every member of a cluster restores.
func Hold(ctx context.Context, o HoldOptions, out string) (*Result, error) {
	o.defaults()
	if _, err := os.Stat(out); err == nil {
		return nil, fmt.Errorf("%s exists: choose another --out", out)
	}
	md, verified, err := verify(o.Snapshot)
	if err != nil {
		return nil, err
	}
	if md != nil && md.Held {
		return nil, fmt.Errorf("%s is already a held snapshot: restore it on each member", o.Snapshot)
	}
	scratch, err := os.MkdirTemp(o.Scratch, ".ledger-hold-")
	if err != nil {
		return nil, fmt.Errorf("making a scratch directory: %w", err)
	}
	defer os.RemoveAll(scratch)
	h, err := hold(ctx, o, md, scratch, out)
	if err != nil {
		return nil, err
	}
	return &Result{Source: o.Snapshot, Metadata: md, VerifiedSHA256: verified, Record: h.record, LedgerID: h.md.LedgerID, Held: h.md}, nil
}

func (o *HoldOptions) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.StoragePrefix == "" {
		o.StoragePrefix = ledgerguard.StoragePrefix("/registry")
	}
}

func (o *RestoreOptions) defaults() {
	o.HoldOptions.defaults()
	if o.Scratch == "" {
		// Beside the target: on its volume, which is writable where the
		// root filesystem is not.
		o.Scratch = filepath.Dir(filepath.Clean(o.DataDir))
	}
}

// verify checks the snapshot before anything opens it: that it is whole
// and undamaged (the sha256 etcd appends to a snapshot it saves matches
// what precedes it), and, when it has metadata, that it is the file the
// metadata describes. etcd's database library crashes the process on a
// truncated file, with a panic nothing can recover: it must never see one.
func verify(path string) (*Metadata, bool, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, false, err
	}
	// etcdutl's rule: a snapshot saved through the maintenance API ends
	// with the sha256 of what precedes it, and only then is its size
	// 32 bytes past a multiple of 512.
	if fi.Size()%512 != sha256.Size {
		return nil, false, fmt.Errorf("%s is not a whole etcd snapshot (%d bytes, no integrity hash at its end): it is truncated or not a snapshot", path, fi.Size())
	}
	md, err := ReadMetadata(path)
	if err != nil {
		return nil, false, err
	}
	sum, body, trailer, err := snapshotHashes(path, fi.Size())
	if err != nil {
		return nil, false, err
	}
	verified := false
	if md != nil && md.SHA256 != "" {
		if sum != md.SHA256 {
			return nil, false, fmt.Errorf("%s does not match its metadata: sha256 %s, the metadata says %s; the file is damaged or not the one the metadata describes", path, sum, md.SHA256)
		}
		verified = true
	}
	if body != trailer {
		return nil, false, fmt.Errorf("%s is damaged: its contents hash to %s, its trailing integrity hash says %s", path, body, trailer)
	}
	return md, verified, nil
}

// snapshotHashes reads the snapshot at path (of size bytes) once and
// returns, in hex, the sha256 of the whole file, that of everything but
// its last 32 bytes, and those 32 bytes.
func snapshotHashes(path string, size int64) (sum, body, trailer string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", "", err
	}
	defer f.Close()
	whole, b := sha256.New(), sha256.New()
	if _, err := io.CopyN(io.MultiWriter(whole, b), f, size-sha256.Size); err != nil {
		return "", "", "", fmt.Errorf("reading %s: %w", path, err)
	}
	t := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, t); err != nil {
		return "", "", "", fmt.Errorf("reading %s: %w", path, err)
	}
	whole.Write(t)
	return hex.EncodeToString(whole.Sum(nil)), hex.EncodeToString(b.Sum(nil)), hex.EncodeToString(t), nil
}

var errNoDataDir = errors.New("no data directory to restore into")

func checkEmptyDir(dir string) error {
	if dir == "" {
		return errNoDataDir
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty: a restore never overwrites a ledger; move it aside first (mv %s %s.old, or --move-aside)", dir, dir, dir)
	}
	return nil
}

type held struct {
	md     *Metadata
	record ledgerguard.RestoreRecord
}

// hold restores src into a temporary etcd under scratch, holds every
// pool, records the restore, and snapshots the result to out (with its
// metadata).
func hold(ctx context.Context, o HoldOptions, md *Metadata, scratch, out string) (*held, error) {
	st, err := snapshot.NewV3(zap.NewNop()).Status(o.Snapshot)
	if err != nil {
		return nil, fmt.Errorf("reading the snapshot %s: %w", o.Snapshot, err)
	}
	dir := filepath.Join(scratch, "etcd")
	if err := etcdRestore(o.Snapshot, dir, Embedded, 0); err != nil {
		return nil, err
	}
	etcd, err := embeddedetcd.Start(dir, o.Log)
	if err != nil {
		return nil, err
	}
	defer etcd.Stop()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.ClientURL}, DialTimeout: 20 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer client.Close()

	now := o.Now().UTC().Truncate(time.Second)
	r := ledgerguard.RestoreRecord{ID: uuid.NewString(), SnapshotRevision: st.Revision, RestoredAt: now}
	if md != nil {
		r.SnapshotTime, r.SnapshotSHA256 = md.Time, md.SHA256
	}
	when := "at an unknown time (the snapshot has no metadata)"
	if !r.SnapshotTime.IsZero() {
		when = "taken " + r.SnapshotTime.UTC().Format(time.RFC3339)
	}
	message := fmt.Sprintf("Restored on %s from a snapshot at etcd revision %d %s: an identity it records as free may have been given, after the snapshot, to a VM that still runs. "+
		"No identity of this pool is given out until that is checked and the hold lifted.", now.Format(time.RFC3339), st.Revision, when)
	if r.HeldPools, err = identityledger.RaiseRestoreHolds(ctx, client, o.StoragePrefix, message, now); err != nil {
		return nil, fmt.Errorf("putting the restored pools on hold: %w", err)
	}
	if r.HeldPools == nil {
		r.HeldPools = []string{}
	}
	if err := ledgerguard.WriteRestoreRecord(ctx, client, o.StoragePrefix, r); err != nil {
		return nil, err
	}
	ledgerID, err := ledgerguard.ReadLedgerID(ctx, client, o.StoragePrefix)
	if err != nil {
		return nil, err
	}
	start := o.Now()
	tmp, sum, size, etcdVersion, err := saveSnapshot(ctx, client, filepath.Dir(out))
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	hst, err := snapshot.NewV3(zap.NewNop()).Status(tmp)
	if err != nil {
		return nil, fmt.Errorf("checking the held snapshot: %w", err)
	}
	hmd := &Metadata{
		Snapshot: filepath.Base(out), Revision: hst.Revision, Time: start.UTC().Truncate(time.Millisecond), LedgerID: ledgerID,
		EtcdVersion: etcdVersion, Size: size, SHA256: sum, Keys: hst.TotalKey, DockerIOSVersion: version.String(),
		Held: true, RestoreID: r.ID,
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, fmt.Errorf("naming the held snapshot: %w", err)
	}
	if err := writeMetadata(out, hmd); err != nil {
		return nil, err
	}
	return &held{md: hmd, record: r}, syncDir(filepath.Dir(out))
}

// etcdRestore is etcdutl's snapshot restore of src into dir as member m.
func etcdRestore(src, dir string, m Member, bump uint64) error {
	cfg := snapshot.RestoreConfig{
		SnapshotPath:        src,
		Name:                m.Name,
		OutputDataDir:       dir,
		PeerURLs:            m.PeerURLs,
		InitialCluster:      m.InitialCluster,
		InitialClusterToken: m.ClusterToken,
		RevisionBump:        bump,
		MarkCompacted:       bump > 0,
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := snapshot.NewV3(zap.NewNop()).Restore(cfg); err != nil {
		return fmt.Errorf("restoring %s into %s: %w", src, dir, err)
	}
	// etcd refuses a data directory others can read.
	return os.Chmod(dir, 0o700)
}
