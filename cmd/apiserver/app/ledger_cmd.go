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

package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/dockerios/dockerios/pkg/ledgerbackup"
	"github.com/dockerios/dockerios/pkg/ledgerguard"
)

// newLedgerCommand is `dockerios-apiserver ledger`: backing up and
// restoring the identity ledger with the server's own binary, so the
// image that serves a ledger can always back it up and restore it.
func newLedgerCommand(out, errOut io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "Back up and restore the identity ledger (the etcd DockerIOS stores in)",
		Long: `Back up and restore the identity ledger: the whole etcd DockerIOS stores in,
through etcd's own snapshot and restore. See docs/operators/backup-restore.md.`,
		SilenceUsage: true,
	}
	cmd.AddCommand(newBackupCommand(out), newListCommand(out), newCopyCommand(out), newHoldCommand(out, errOut), newRestoreCommand(out, errOut))
	return cmd
}

// newCopyCommand is `ledger cp SRC DST`: the image has no shell, cat or
// tar (kubectl cp needs tar), so backups go in and out of a pod through
// this, over kubectl exec's standard input and output.
func newCopyCommand(out io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a backup file; - is standard input or output (kubectl exec -i)",
		Long: `Copy a file, - being standard input or output, so that backups can be taken
off the cluster and brought back through kubectl exec, the image having no
shell:

  kubectl -n dockerios-system exec deploy/dockerios-apiserver -- dockerios-apiserver ledger cp /var/lib/dockerios-backups/NAME.db - > NAME.db
  kubectl -n dockerios-system exec -i deploy/dockerios-apiserver -- dockerios-apiserver ledger cp - /var/lib/dockerios-backups/NAME.db < NAME.db

A file is written to a temporary name, synced and renamed; an existing one
is not overwritten.`,
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			src, dst := args[0], args[1]
			var in io.Reader = c.InOrStdin()
			if src != "-" {
				f, err := os.Open(src)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			if dst == "-" {
				_, err := io.Copy(out, in)
				return err
			}
			if _, err := os.Stat(dst); err == nil {
				return fmt.Errorf("%s exists: a backup is never overwritten", dst)
			}
			f, err := os.CreateTemp(filepath.Dir(dst), ".ledger-cp-*.part")
			if err != nil {
				return err
			}
			defer os.Remove(f.Name())
			if _, err := io.Copy(f, in); err != nil {
				f.Close()
				return err
			}
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			return os.Rename(f.Name(), dst)
		},
	}
}

// etcdFlags are the apiserver's flags that reach its etcd, under the same
// names, or --data-dir for a running server's embedded etcd.
type etcdFlags struct {
	servers                   []string
	caFile, certFile, keyFile string
	prefix                    string
	dataDir                   string
}

func (e *etcdFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&e.servers, "etcd-servers", e.servers, "The etcd members to back up from, as the apiserver's --etcd-servers (the leader's snapshot is taken).")
	fs.StringVar(&e.caFile, "etcd-cafile", e.caFile, "SSL Certificate Authority file used to secure etcd communication, as the apiserver's.")
	fs.StringVar(&e.certFile, "etcd-certfile", e.certFile, "SSL certification file used to secure etcd communication, as the apiserver's.")
	fs.StringVar(&e.keyFile, "etcd-keyfile", e.keyFile, "SSL key file used to secure etcd communication, as the apiserver's.")
	fs.StringVar(&e.dataDir, "data-dir", e.dataDir, "Instead of --etcd-servers: the --data-dir of an apiserver running its embedded etcd on this machine (in its pod: kubectl exec), whose URL it records there.")
}

func addPrefixFlag(fs *pflag.FlagSet, prefix *string) {
	fs.StringVar(prefix, "etcd-prefix", *prefix, "The apiserver's --etcd-prefix.")
}

func (e *etcdFlags) transport() (storagebackend.TransportConfig, error) {
	switch {
	case len(e.servers) > 0 && e.dataDir != "":
		return storagebackend.TransportConfig{}, fmt.Errorf("give --etcd-servers or --data-dir, not both")
	case e.dataDir != "":
		data, err := os.ReadFile(filepath.Join(e.dataDir, EmbeddedEtcdURLFile))
		if err != nil {
			return storagebackend.TransportConfig{}, fmt.Errorf("no running apiserver's embedded etcd in %s (is the apiserver running there, without --etcd-servers?): %w", e.dataDir, err)
		}
		return storagebackend.TransportConfig{ServerList: []string{strings.TrimSpace(string(data))}}, nil
	case len(e.servers) > 0:
		return storagebackend.TransportConfig{ServerList: e.servers, TrustedCAFile: e.caFile, CertFile: e.certFile, KeyFile: e.keyFile}, nil
	default:
		return storagebackend.TransportConfig{}, fmt.Errorf("give --etcd-servers (an external etcd) or --data-dir (a running apiserver's embedded etcd)")
	}
}

func printJSON(out io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, string(data))
	return err
}

func newBackupCommand(out io.Writer) *cobra.Command {
	e := &etcdFlags{prefix: EtcdPrefix}
	var dir string
	keep := 24
	var timeout time.Duration = 10 * time.Minute
	cmd := &cobra.Command{
		Use:   "backup --out DIR (--etcd-servers URLS [--etcd-cafile ...] | --data-dir DIR)",
		Short: "Snapshot the ledger's etcd into a directory, keeping the newest --keep",
		Long: `Snapshot the ledger's etcd into --out: ledger-<time>-r<revision>.db, written
atomically, and its metadata beside it (.json: revision, time, etcd cluster
and member, size, sha256, ledger ID, version), printed to standard output.
Backups of the same ledger beyond the newest --keep are removed.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			t, err := e.transport()
			if err != nil {
				return err
			}
			if dir == "" {
				return fmt.Errorf("--out is required")
			}
			ctx, cancel := contextWithTimeout(c, timeout)
			defer cancel()
			md, err := ledgerbackup.Take(ctx, ledgerbackup.Options{Transport: t, StoragePrefix: ledgerguard.StoragePrefix(e.prefix), Dir: dir, Keep: keep})
			if err != nil {
				return err
			}
			return printJSON(out, md)
		},
	}
	e.addFlags(cmd.Flags())
	addPrefixFlag(cmd.Flags(), &e.prefix)
	cmd.Flags().StringVar(&dir, "out", dir, "Directory to keep backups in (created if missing).")
	cmd.Flags().IntVar(&keep, "keep", keep, "How many backups of this ledger to keep in --out; older ones are removed, backups of other ledgers never.")
	cmd.Flags().DurationVar(&timeout, "timeout", timeout, "How long the backup may take.")
	return cmd
}

func newListCommand(out io.Writer) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "list --dir DIR",
		Short: "List the backups in a directory, newest first, with their metadata",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if dir == "" {
				return fmt.Errorf("--dir is required")
			}
			all, err := ledgerbackup.List(dir)
			if err != nil {
				return err
			}
			if all == nil {
				all = []ledgerbackup.Metadata{}
			}
			return printJSON(out, all)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", dir, "The backup directory.")
	return cmd
}

func newHoldCommand(out, errOut io.Writer) *cobra.Command {
	o := ledgerbackup.HoldOptions{}
	prefix := EtcdPrefix
	var held string
	timeout := 10 * time.Minute
	cmd := &cobra.Command{
		Use:   "hold --snapshot FILE --out HELD.db",
		Short: "Make, once, the held snapshot every member of an etcd cluster restores",
		Long: `Make from a backup the snapshot a restore of several etcd members restores
on each member: the backup's ledger with every identity pool on hold and the
restore recorded (what ledger restore does by itself for one member). The
members must all restore the same held snapshot.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if o.Snapshot == "" || held == "" {
				return fmt.Errorf("--snapshot and --out are required")
			}
			o.StoragePrefix, o.Log = ledgerguard.StoragePrefix(prefix), errOut
			if o.Scratch == "" {
				o.Scratch = filepath.Dir(held)
			}
			ctx, cancel := contextWithTimeout(c, timeout)
			defer cancel()
			res, err := ledgerbackup.Hold(ctx, o, held)
			if err != nil {
				return err
			}
			return printJSON(out, res)
		},
	}
	cmd.Flags().StringVar(&o.Snapshot, "snapshot", o.Snapshot, "The backup to hold (its .json metadata, when beside it, is checked).")
	cmd.Flags().StringVar(&held, "out", held, "Where to write the held snapshot (and its .json).")
	addPrefixFlag(cmd.Flags(), &prefix)
	cmd.Flags().DurationVar(&timeout, "timeout", timeout, "How long it may take.")
	return cmd
}

func newRestoreCommand(out, errOut io.Writer) *cobra.Command {
	o := ledgerbackup.RestoreOptions{RevisionBump: ledgerbackup.DefaultRevisionBump}
	prefix := EtcdPrefix
	var dataDir, etcdDataDir, peerURLs string
	m := ledgerbackup.Member{}
	timeout := 30 * time.Minute
	cmd := &cobra.Command{
		Use:   "restore --snapshot FILE (--data-dir DIR | --etcd-data-dir DIR --name ... --initial-cluster ... --initial-advertise-peer-urls ... --initial-cluster-token ...)",
		Short: "Restore the ledger from a backup, every identity pool on hold, into a new data directory",
		Long: `Restore the ledger from a backup into a new etcd data directory, with etcd's
own restore: --data-dir, the apiserver's, for its embedded etcd (DIR/etcd),
or --etcd-data-dir and etcd's member flags for a member of an external etcd.
The snapshot's sha256 is checked against its metadata when beside it. The
restored ledger has every identity pool on hold (an identity it records as
free may be in use by a VM created after the snapshot) and records the
restore, before anything serves it. A restore never overwrites a ledger: the
target must not hold data, or, with --move-aside, what it holds is renamed.
Stop whatever uses the target first.

A cluster of several etcd members restores one held snapshot on every member:
make it once with ledger hold, then restore it with --etcd-data-dir and the
member's flags on each.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if o.Snapshot == "" {
				return fmt.Errorf("--snapshot is required")
			}
			switch {
			case dataDir != "" && etcdDataDir != "":
				return fmt.Errorf("give --data-dir (the embedded etcd) or --etcd-data-dir (an etcd member), not both")
			case dataDir != "":
				if c.Flags().Changed("name") || c.Flags().Changed("initial-cluster") || c.Flags().Changed("initial-advertise-peer-urls") {
					return fmt.Errorf("--data-dir restores the apiserver's embedded etcd, a member of its own; the member flags are for --etcd-data-dir")
				}
				o.DataDir, o.Member = filepath.Join(dataDir, "etcd"), ledgerbackup.Embedded
			case etcdDataDir != "":
				if m.Name == "" || m.InitialCluster == "" || peerURLs == "" {
					return fmt.Errorf("--etcd-data-dir needs the member's --name, --initial-cluster and --initial-advertise-peer-urls, as the etcd member is started with")
				}
				m.PeerURLs = strings.Split(peerURLs, ",")
				o.DataDir, o.Member = etcdDataDir, m
			default:
				return fmt.Errorf("give --data-dir (the apiserver's, for its embedded etcd) or --etcd-data-dir (an etcd member's)")
			}
			o.StoragePrefix, o.Log = ledgerguard.StoragePrefix(prefix), errOut
			ctx, cancel := contextWithTimeout(c, timeout)
			defer cancel()
			start := time.Now()
			res, err := ledgerbackup.Restore(ctx, o)
			if err != nil {
				return err
			}
			if res.MovedAside != "" {
				fmt.Fprintf(errOut, "Moved what %s held to %s\n", o.DataDir, res.MovedAside)
			}
			fmt.Fprintf(errOut, "Restored ledger %s from %s (etcd revision %d) into %s in %s; identity pools on hold: %s\n",
				res.LedgerID, o.Snapshot, res.Record.SnapshotRevision, o.DataDir, time.Since(start).Round(time.Millisecond), strings.Join(res.Record.HeldPools, ", "))
			return printJSON(out, res)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Snapshot, "snapshot", o.Snapshot, "The backup to restore (its .json metadata, when beside it, is checked).")
	fs.StringVar(&dataDir, "data-dir", dataDir, "The apiserver's --data-dir: its embedded etcd is restored into DIR/etcd, which must not hold data.")
	fs.StringVar(&etcdDataDir, "etcd-data-dir", etcdDataDir, "An external etcd member's --data-dir to make, which must not hold data.")
	fs.StringVar(&m.Name, "name", m.Name, "With --etcd-data-dir: the member's --name.")
	fs.StringVar(&m.InitialCluster, "initial-cluster", m.InitialCluster, "With --etcd-data-dir: the cluster's --initial-cluster (NAME=PEER-URL,...).")
	fs.StringVar(&peerURLs, "initial-advertise-peer-urls", peerURLs, "With --etcd-data-dir: the member's --initial-advertise-peer-urls.")
	fs.StringVar(&m.ClusterToken, "initial-cluster-token", "etcd-cluster", "With --etcd-data-dir: the cluster's --initial-cluster-token.")
	fs.BoolVar(&o.MoveAside, "move-aside", o.MoveAside, "If the target holds data, rename it to TARGET.before-restore-<UTC time> and restore, instead of refusing; nothing is deleted.")
	fs.Uint64Var(&o.RevisionBump, "bump-revision", o.RevisionBump, "How far to move etcd's revision past the snapshot's (and mark the ones before compacted), so that clients holding newer resourceVersions list afresh instead of waiting; 0 keeps it.")
	fs.StringVar(&o.Scratch, "scratch-dir", o.Scratch, "Directory for the temporary etcd the pools are held in (default: the target's parent).")
	addPrefixFlag(fs, &prefix)
	fs.DurationVar(&timeout, "timeout", timeout, "How long the restore may take.")
	return cmd
}

// contextWithTimeout is the command's context (the signal context main
// sets up) with a deadline.
func contextWithTimeout(c *cobra.Command, d time.Duration) (context.Context, context.CancelFunc) {
	ctx := c.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, d)
}
