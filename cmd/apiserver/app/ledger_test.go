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
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	"github.com/dockerios/dockerios/pkg/ledgerbackup"
	"github.com/dockerios/dockerios/pkg/ledgerguard"
)

// run executes the apiserver's command with args and returns its output.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(context.Background(), NewOptions(&out, &errOut))
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.Execute()
	if err != nil {
		t.Logf("stderr: %s", errOut.String())
	}
	return out.String(), err
}

// The ledger subcommands have flags of their own: the server's are not
// theirs, and theirs are not the server's.
func TestLedgerCommand_FlagsAreTheSubcommandsOwn(t *testing.T) {
	root := NewCommand(context.Background(), NewOptions(io.Discard, io.Discard))
	for _, f := range []string{"etcd-servers", "data-dir", "backup-dir", "backup-interval", "backup-keep", "ledger-marker", "confirm-empty-ledger", "adopt-ledger", "secure-port"} {
		assert.NotNil(t, root.Flags().Lookup(f), "the server has --%s", f)
	}
	backup, _, err := root.Find([]string{"ledger", "backup"})
	require.NoError(t, err)
	for _, f := range []string{"etcd-servers", "etcd-cafile", "etcd-certfile", "etcd-keyfile", "etcd-prefix", "data-dir", "out", "keep"} {
		assert.NotNil(t, backup.Flags().Lookup(f), "ledger backup has --%s", f)
	}
	for _, f := range []string{"secure-port", "backup-dir", "cert-secret"} {
		assert.Nil(t, backup.Flags().Lookup(f), "ledger backup does not take the server's --%s", f)
	}
	restore, _, err := root.Find([]string{"ledger", "restore"})
	require.NoError(t, err)
	for _, f := range []string{"snapshot", "data-dir", "etcd-data-dir", "name", "initial-cluster", "initial-advertise-peer-urls", "initial-cluster-token", "bump-revision"} {
		assert.NotNil(t, restore.Flags().Lookup(f), "ledger restore has --%s", f)
	}
	_, err = run(t, "ledger", "backup", "--secure-port=1", "--out", t.TempDir())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unknown flag: --secure-port")
}

// --backup-dir snapshots the embedded etcd only; with --etcd-servers a
// CronJob runs `ledger backup`.
func TestLedgerOptions_BackupsNeedTheEmbeddedEtcd(t *testing.T) {
	l := NewLedgerOptions()
	l.BackupDir = "/backups"
	assert.Empty(t, l.Validate(true))
	errs := l.Validate(false)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "ledger backup")
	l.BackupKeep, l.BackupInterval = 0, 0
	assert.Len(t, l.Validate(true), 2)
	l = NewLedgerOptions()
	l.Marker = "no-namespace"
	assert.Len(t, l.Validate(true), 1)
}

// `ledger backup --data-dir` finds the embedded etcd of a server running
// there, `ledger list` lists what it wrote, and `ledger restore
// --data-dir` restores it into a new data directory with its pools held.
func TestLedgerCommand_BackupListRestoreTheEmbeddedEtcd(t *testing.T) {
	dataDir := t.TempDir()
	etcd, err := embeddedetcd.Start(filepath.Join(dataDir, "etcd"), io.Discard)
	require.NoError(t, err)
	defer etcd.Stop()
	o := NewOptions(io.Discard, io.Discard)
	o.DataDir = dataDir
	require.NoError(t, o.embeddedEtcdStarted(etcd.ClientURL))
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.ClientURL}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer c.Close()
	for k, v := range map[string]string{
		"/registry/dockerios.io/ledger-id":                                      "ledger-cli",
		"/registry/dockerios.io/macosidentitypools/imac":                        "{}",
		"/registry/dockerios.io/identity-index/pools/imac/free/000/id-1":        "id-1",
		"/registry/dockerios.io/macosmachines/default/mac-1":                    "{}",
		"/registry/dockerios.io/identity-index/values/serialNumber/C02XXXXXXXX": "id-2",
	} {
		_, err := c.Put(context.Background(), k, v)
		require.NoError(t, err)
	}

	backups := filepath.Join(t.TempDir(), "backups")
	out, err := run(t, "ledger", "backup", "--data-dir", dataDir, "--out", backups, "--keep", "2")
	require.NoError(t, err)
	var md ledgerbackup.Metadata
	require.NoError(t, json.Unmarshal([]byte(out), &md), out)
	assert.Equal(t, "ledger-cli", md.LedgerID)
	assert.FileExists(t, filepath.Join(backups, md.Snapshot))

	out, err = run(t, "ledger", "list", "--dir", backups)
	require.NoError(t, err)
	var all []ledgerbackup.Metadata
	require.NoError(t, json.Unmarshal([]byte(out), &all), out)
	require.Len(t, all, 1)
	assert.Equal(t, md.SHA256, all[0].SHA256)

	// Off the cluster and back, through standard output and input: the
	// same bytes, which the metadata's sha256 still matches.
	snap := filepath.Join(backups, md.Snapshot)
	out, err = run(t, "ledger", "cp", snap, "-")
	require.NoError(t, err)
	original, err := os.ReadFile(snap)
	require.NoError(t, err)
	require.Equal(t, original, []byte(out))
	elsewhere := filepath.Join(t.TempDir(), md.Snapshot)
	cmd := NewCommand(context.Background(), NewOptions(io.Discard, io.Discard))
	cmd.SetArgs([]string{"ledger", "cp", "-", elsewhere})
	cmd.SetIn(bytes.NewReader(original))
	require.NoError(t, cmd.Execute())
	copied, err := os.ReadFile(elsewhere)
	require.NoError(t, err)
	assert.Equal(t, original, copied)
	_, err = run(t, "ledger", "cp", snap, elsewhere)
	require.Error(t, err, "an existing backup is never overwritten")

	restored := filepath.Join(t.TempDir(), "restored")
	out, err = run(t, "ledger", "restore", "--snapshot", filepath.Join(backups, md.Snapshot), "--data-dir", restored)
	require.NoError(t, err)
	var res ledgerbackup.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, []string{"imac"}, res.Record.HeldPools)
	assert.True(t, res.VerifiedSHA256)
	assert.DirExists(t, filepath.Join(restored, "etcd", "member"))

	_, err = run(t, "ledger", "restore", "--snapshot", filepath.Join(backups, md.Snapshot), "--data-dir", restored)
	require.Error(t, err, "a second restore into the same directory")
	assert.Contains(t, err.Error(), "not empty")
	// --move-aside keeps what was there, under another name.
	out, err = run(t, "ledger", "restore", "--snapshot", filepath.Join(backups, md.Snapshot), "--data-dir", restored, "--move-aside")
	require.NoError(t, err)
	res = ledgerbackup.Result{}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.NotEmpty(t, res.MovedAside)
	assert.DirExists(t, filepath.Join(res.MovedAside, "member"), "the data moved aside is all there")
	assert.DirExists(t, filepath.Join(restored, "etcd", "member"))

	// Three members of an external etcd restore one held snapshot.
	held := filepath.Join(t.TempDir(), "held.db")
	out, err = run(t, "ledger", "hold", "--snapshot", filepath.Join(backups, md.Snapshot), "--out", held)
	require.NoError(t, err)
	var h ledgerbackup.Result
	require.NoError(t, json.Unmarshal([]byte(out), &h), out)
	require.True(t, h.Held.Held)
	members := t.TempDir()
	cluster := "m0=https://m0.etcd:2380,m1=https://m1.etcd:2380,m2=https://m2.etcd:2380"
	_, err = run(t, "ledger", "restore", "--snapshot", filepath.Join(backups, md.Snapshot), "--etcd-data-dir", filepath.Join(members, "m0"),
		"--name", "m0", "--initial-cluster", cluster, "--initial-advertise-peer-urls", "https://m0.etcd:2380")
	require.Error(t, err, "a member of three restores a held snapshot only")
	assert.Contains(t, err.Error(), "ledger hold")
	for _, m := range []string{"m0", "m1", "m2"} {
		out, err = run(t, "ledger", "restore", "--snapshot", held, "--etcd-data-dir", filepath.Join(members, m),
			"--name", m, "--initial-cluster", cluster, "--initial-advertise-peer-urls", "https://"+m+".etcd:2380", "--initial-cluster-token", "dockerios-etcd")
		require.NoError(t, err, m)
		var r ledgerbackup.Result
		require.NoError(t, json.Unmarshal([]byte(out), &r), out)
		assert.Equal(t, h.Record.ID, r.Record.ID, "every member holds the same restore")
		assert.DirExists(t, filepath.Join(members, m, "member", "wal"))
	}

	_, err = run(t, "ledger", "restore", "--snapshot", filepath.Join(backups, md.Snapshot), "--data-dir", t.TempDir(), "--name", "x")
	require.Error(t, err)
	_, err = run(t, "ledger", "backup", "--data-dir", t.TempDir(), "--out", backups)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is the apiserver running there")
}

// The guard sits in the handler chain in front of dockerios.io, and its
// readiness check is the server's.
func TestInstallLedgerGuard_BlocksTheGroupUntilTheLedgerIsChecked(t *testing.T) {
	o := behindKubeAPIServer(t)
	cfg, err := o.Config()
	require.NoError(t, err)
	require.NoError(t, o.installLedgerGuard(cfg.GenericConfig))
	inner := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "inner") })
	// The generic chain would authenticate and authorize first; here
	// the chain is only the guard.
	cfg.GenericConfig.BuildHandlerChainFunc = func(h http.Handler, _ *genericapiserver.Config) http.Handler { return h }
	h := o.Ledger.guard.Filter(inner)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/apis/dockerios.io/v1alpha1", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), ledgerguard.CheckName)
	assert.Error(t, o.Ledger.guard.ReadyzCheck().Check(nil))
	assert.Equal(t, ledgerguard.CheckName, o.Ledger.guard.ReadyzCheck().Name())
}

// The URL file is written atomically and only its owner reads it.
func TestEmbeddedEtcdStarted_RecordsTheURL(t *testing.T) {
	o := NewOptions(io.Discard, io.Discard)
	o.DataDir = t.TempDir()
	require.NoError(t, o.embeddedEtcdStarted("http://127.0.0.1:2379"))
	info, err := os.Stat(filepath.Join(o.DataDir, EmbeddedEtcdURLFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	assert.True(t, o.Ledger.embedded)
}
