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
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/dockerios/dockerios/pkg/ledgerbackup"
	"github.com/dockerios/dockerios/pkg/ledgerguard"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// LedgerOptions are the flags of the ledger's safety: the marker that
// keeps an empty or foreign ledger from being served (pkg/ledgerguard)
// and the embedded etcd's periodic backups (pkg/ledgerbackup).
type LedgerOptions struct {
	// Marker is NAMESPACE/NAME of the ConfigMap recording the ledger;
	// empty keeps none. Needs kube-apiserver (not with --local).
	Marker string
	// ConfirmEmpty and Adopt: a person's answers to a refusal, naming
	// the ledger they answer for.
	ConfirmEmpty, Adopt string
	// BackupDir, when set, is where the server snapshots its embedded
	// etcd every BackupInterval, keeping the newest BackupKeep.
	BackupDir      string
	BackupInterval time.Duration
	BackupKeep     int

	// embedded is set once the embedded etcd runs.
	embedded bool
	guard    *ledgerguard.Guard
}

// EmbeddedEtcdURLFile, in --data-dir, holds the running embedded etcd's
// client URL (loopback, a new port at every start), for
// `dockerios-apiserver ledger backup --data-dir` run beside the server
// (kubectl exec).
const EmbeddedEtcdURLFile = "embedded-etcd.url"

// NewLedgerOptions returns the defaults: the marker of the shipped
// install, no backups.
func NewLedgerOptions() LedgerOptions {
	return LedgerOptions{Marker: ledgerguard.DefaultMarker.String(), BackupInterval: time.Hour, BackupKeep: 24}
}

// AddFlags adds the ledger's flags to fs.
func (l *LedgerOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&l.Marker, "ledger-marker", l.Marker, "NAMESPACE/NAME of the ConfigMap in which the server records the identity ledger it serves (its ID and last etcd revision), outside its etcd. While etcd is empty, or holds another ledger, than this records, dockerios.io is answered 503 and /readyz/dockerios-ledger says why and what to do, so that nothing is deleted for want of the ledger's objects. Empty keeps no record. Not used with --local.")
	fs.StringVar(&l.ConfirmEmpty, "confirm-empty-ledger", l.ConfirmEmpty, "The ID of the ledger the marker records, to serve an empty ledger in its place: a fresh start, every identity allocation lost. Prefer restoring a backup (dockerios-apiserver ledger restore).")
	fs.StringVar(&l.Adopt, "adopt-ledger", l.Adopt, "The ID of the ledger etcd holds, to serve it although the marker records another.")
	fs.StringVar(&l.BackupDir, "backup-dir", l.BackupDir, "Directory in which the server snapshots its embedded etcd every --backup-interval while it serves the ledger, keeping the newest --backup-keep (see `dockerios-apiserver ledger backup`). Only with the embedded etcd: with --etcd-servers, run `dockerios-apiserver ledger backup` from a CronJob.")
	fs.DurationVar(&l.BackupInterval, "backup-interval", l.BackupInterval, "How often --backup-dir gets a snapshot.")
	fs.IntVar(&l.BackupKeep, "backup-keep", l.BackupKeep, "How many snapshots of the ledger --backup-dir keeps.")
}

// Validate checks the ledger's flags; embedded says whether the server
// runs its own etcd.
func (l *LedgerOptions) Validate(embedded bool) []error {
	var errs []error
	if l.Marker != "" {
		if _, err := parseNamespacedName(l.Marker); err != nil {
			errs = append(errs, fmt.Errorf("--ledger-marker: %w", err))
		}
	}
	if l.BackupDir != "" {
		if !embedded {
			errs = append(errs, fmt.Errorf("--backup-dir snapshots the embedded etcd; with --etcd-servers, run `dockerios-apiserver ledger backup` against them (a CronJob) instead"))
		}
		if l.BackupInterval <= 0 {
			errs = append(errs, fmt.Errorf("--backup-interval must be positive, not %s", l.BackupInterval))
		}
		if l.BackupKeep < 1 {
			errs = append(errs, fmt.Errorf("--backup-keep must be at least 1, not %d", l.BackupKeep))
		}
	}
	return errs
}

func parseNamespacedName(s string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("%q is not NAMESPACE/NAME", s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// embeddedEtcdStarted records that the server runs its own etcd at
// clientURL, in the file `ledger backup --data-dir` reads.
func (o *Options) embeddedEtcdStarted(clientURL string) error {
	o.Ledger.embedded = true
	path := filepath.Join(o.DataDir, EmbeddedEtcdURLFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(clientURL+"\n"), 0o600); err != nil {
		return fmt.Errorf("recording the embedded etcd's URL: %w", err)
	}
	return os.Rename(tmp, path)
}

// installLedgerGuard puts the guard in front of dockerios.io in cfg's
// handler chain: from the first request on, the group is answered 503
// until the guard has found the ledger to be this cluster's.
func (o *Options) installLedgerGuard(cfg *genericapiserver.RecommendedConfig) error {
	gc := ledgerguard.Config{
		StoragePrefix: ledgerguard.StoragePrefix(o.RecommendedOptions.Etcd.StorageConfig.Prefix),
		Answers:       ledgerguard.Answers{ConfirmEmpty: o.Ledger.ConfirmEmpty, Adopt: o.Ledger.Adopt},
		APIServices:   o.APIServices,
	}
	if len(gc.APIServices) == 0 {
		gc.APIServices = []string{"v1alpha1." + ledgerguard.Group}
	}
	if o.Ledger.Marker != "" && cfg.ClientConfig != nil {
		name, err := parseNamespacedName(o.Ledger.Marker)
		if err != nil {
			return err
		}
		kube, err := kubernetes.NewForConfig(cfg.ClientConfig)
		if err != nil {
			return err
		}
		gc.Kube, gc.Marker = kube, name
	}
	etcd, err := txn.NewClient(o.RecommendedOptions.Etcd.StorageConfig.Transport)
	if err != nil {
		return fmt.Errorf("connecting the ledger guard to etcd: %w", err)
	}
	gc.Etcd = etcd
	o.Ledger.guard = ledgerguard.New(gc)
	ledgerguard.RegisterMetrics()
	build := cfg.BuildHandlerChainFunc
	cfg.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return build(o.Ledger.guard.Filter(h), c)
	}
	return nil
}

// startLedgerGuard adds the guard's readiness check, and starts it and
// the backups with the server.
func (o *Options) startLedgerGuard(server *genericapiserver.GenericAPIServer) error {
	g := o.Ledger.guard
	if g == nil {
		return errors.New("the ledger guard was not installed")
	}
	if err := server.AddReadyzChecks(g.ReadyzCheck()); err != nil {
		return err
	}
	return server.AddPostStartHook("dockerios-ledger-guard", func(ctx genericapiserver.PostStartHookContext) error {
		go g.Run(ctx)
		if o.Ledger.BackupDir != "" {
			go o.runBackups(ctx, g)
		}
		return nil
	})
}

// runBackups snapshots the embedded etcd into --backup-dir every
// --backup-interval, while the guard serves the ledger: never a ledger
// it refuses, whose snapshots would push the good ones out of retention.
func (o *Options) runBackups(ctx context.Context, g *ledgerguard.Guard) {
	l := o.Ledger
	ledgerbackup.RegisterMetrics(l.BackupInterval)
	var next time.Time
	if all, err := ledgerbackup.List(l.BackupDir); err == nil {
		for _, md := range all {
			if md.SHA256 != "" {
				ledgerbackup.ObserveSuccess(&md)
				next = md.Time.Add(l.BackupInterval)
				break
			}
		}
	}
	for {
		if err := g.WaitServing(ctx); err != nil {
			return
		}
		if wait := time.Until(next); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(wait, l.BackupInterval)):
			}
			continue
		}
		if !g.Serving() {
			continue
		}
		md, err := ledgerbackup.Take(ctx, ledgerbackup.Options{
			Transport:     o.RecommendedOptions.Etcd.StorageConfig.Transport,
			StoragePrefix: ledgerguard.StoragePrefix(o.RecommendedOptions.Etcd.StorageConfig.Prefix),
			Dir:           l.BackupDir,
			Keep:          l.BackupKeep,
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			ledgerbackup.ObserveFailure()
			retry := min(5*time.Minute, l.BackupInterval)
			klog.ErrorS(err, "Backing up the identity ledger failed; trying again in "+retry.String(), "dir", l.BackupDir)
			next = time.Now().Add(retry)
			continue
		}
		ledgerbackup.ObserveSuccess(md)
		klog.InfoS("Backed up the identity ledger", "snapshot", filepath.Join(l.BackupDir, md.Snapshot), "revision", md.Revision,
			"size", md.Size, "seconds", md.Duration, "ledgerID", md.LedgerID)
		next = md.Time.Add(l.BackupInterval)
	}
}
