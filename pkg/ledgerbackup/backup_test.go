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
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	"github.com/dockerios/dockerios/pkg/ledgerguard"
	"github.com/dockerios/dockerios/pkg/localpki"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

const prefix = "/registry/"

type testEtcd struct {
	url    string
	client *clientv3.Client
}

func startEtcd(t *testing.T) *testEtcd {
	t.Helper()
	e, err := embeddedetcd.Start(filepath.Join(t.TempDir(), "etcd"), io.Discard)
	require.NoError(t, err)
	t.Cleanup(e.Stop)
	return &testEtcd{url: e.ClientURL, client: client(t, e.ClientURL)}
}

func client(t *testing.T, url string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func put(t *testing.T, c *clientv3.Client, key, value string) {
	t.Helper()
	_, err := c.Put(context.Background(), key, value)
	require.NoError(t, err)
}

// seed writes a small ledger: its ID, and per pool the pool object, its
// identities and their free-list keys, as the ledger lays them out.
func seed(t *testing.T, c *clientv3.Client, ledgerID string, pools map[string][]string) {
	t.Helper()
	put(t, c, ledgerguard.LedgerIDKey(prefix), ledgerID)
	for pool, ids := range pools {
		put(t, c, prefix+"dockerios.io/macosidentitypools/"+pool, `{"kind":"MacOSIdentityPool"}`)
		for _, id := range ids {
			put(t, c, prefix+"dockerios.io/macosidentities/"+id, `{"kind":"MacOSIdentity"}`)
			put(t, c, freeKey(pool, id), id)
		}
	}
}

func freeKey(pool, id string) string {
	return prefix + "dockerios.io/identity-index/pools/" + pool + "/free/000/" + id
}

func revision(t *testing.T, c *clientv3.Client) int64 {
	t.Helper()
	resp, err := c.Get(context.Background(), "probe")
	require.NoError(t, err)
	return resp.Header.Revision
}

func clock(start time.Time) func() time.Time {
	now := start
	return func() time.Time { now = now.Add(time.Minute); return now }
}

// A backup is a snapshot of the etcd at one revision and its metadata,
// which says that revision, the file's size and sha256, the ledger and
// where it came from; nothing temporary is left, and nobody else can read
// them.
func TestTake_WritesTheSnapshotAndItsMetadata(t *testing.T) {
	e := startEtcd(t)
	seed(t, e.client, "ledger-a", map[string][]string{"imac": {"id-1", "id-2"}})
	rev := revision(t, e.client)
	dir := filepath.Join(t.TempDir(), "backups")

	md, err := Take(context.Background(), Options{Transport: storagebackend.TransportConfig{ServerList: []string{e.url}}, StoragePrefix: prefix, Dir: dir, Keep: 3})
	require.NoError(t, err)
	assert.Equal(t, rev, md.Revision)
	assert.Equal(t, "ledger-a", md.LedgerID)
	assert.Equal(t, e.url, md.Endpoint)
	assert.Equal(t, "dockerios", md.EtcdMember)
	assert.NotEmpty(t, md.EtcdClusterID)
	assert.NotEmpty(t, md.EtcdVersion)
	assert.NotEmpty(t, md.DockerIOSVersion)
	assert.Equal(t, 6, md.Keys, "the ID, the pool, two identities, two free keys")
	assert.True(t, strings.HasSuffix(md.Snapshot, fmt.Sprintf("-r%d.db", rev)), md.Snapshot)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
		info, err := en.Info()
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), en.Name())
	}
	assert.ElementsMatch(t, []string{md.Snapshot, strings.TrimSuffix(md.Snapshot, ".db") + ".json"}, names)
	path := filepath.Join(dir, md.Snapshot)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, info.Size(), md.Size)
	sum, body, trailer, err := snapshotHashes(path, info.Size())
	require.NoError(t, err)
	assert.Equal(t, sum, md.SHA256)
	assert.Equal(t, body, trailer, "etcd's integrity hash ends the snapshot")
	onDisk, err := ReadMetadata(path)
	require.NoError(t, err)
	assert.Equal(t, md.SHA256, onDisk.SHA256)
	assert.Equal(t, md.Revision, onDisk.Revision)
}

// An etcd with no ledger (a wiped one) is not backed up: its snapshots
// would push the real ones out of retention.
func TestTake_RefusesAnEtcdWithoutALedger(t *testing.T) {
	e := startEtcd(t)
	put(t, e.client, "/registry/configmaps/default/x", "not ours")
	dir := t.TempDir()
	_, err := Take(context.Background(), Options{Transport: storagebackend.TransportConfig{ServerList: []string{e.url}}, StoragePrefix: prefix, Dir: dir, Keep: 3})
	require.ErrorIs(t, err, ErrNoLedger)
	all, err := List(dir)
	require.NoError(t, err)
	assert.Empty(t, all)
}

// Retention keeps the newest N backups of the ledger backed up, and never
// removes another ledger's.
func TestTake_KeepsTheNewestOfTheLedgerAndEveryOtherLedgers(t *testing.T) {
	e := startEtcd(t)
	seed(t, e.client, "ledger-a", map[string][]string{"imac": {"id-1"}})
	dir := t.TempDir()
	now := clock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	take := func() *Metadata {
		put(t, e.client, prefix+"dockerios.io/macosmachines/default/m", strconv.FormatInt(time.Now().UnixNano(), 10))
		md, err := Take(context.Background(), Options{Transport: storagebackend.TransportConfig{ServerList: []string{e.url}}, StoragePrefix: prefix, Dir: dir, Keep: 2, Now: now})
		require.NoError(t, err)
		return md
	}
	var a []*Metadata
	for range 4 {
		a = append(a, take())
	}
	put(t, e.client, ledgerguard.LedgerIDKey(prefix), "ledger-b")
	var b []*Metadata
	for range 3 {
		b = append(b, take())
	}
	all, err := List(dir)
	require.NoError(t, err)
	var got []string
	for _, md := range all {
		got = append(got, md.LedgerID+" "+md.Snapshot)
	}
	assert.Equal(t, []string{
		"ledger-b " + b[2].Snapshot, "ledger-b " + b[1].Snapshot,
		"ledger-a " + a[3].Snapshot, "ledger-a " + a[2].Snapshot,
	}, got, "newest first")
}

// With several endpoints, one that does not answer is passed over.
func TestTake_PassesOverAMemberThatDoesNotAnswer(t *testing.T) {
	e := startEtcd(t)
	seed(t, e.client, "ledger-a", nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + l.Addr().String()
	l.Close()
	md, err := Take(context.Background(), Options{Transport: storagebackend.TransportConfig{ServerList: []string{dead, e.url}}, StoragePrefix: prefix, Dir: t.TempDir(), Keep: 1})
	require.NoError(t, err)
	assert.Equal(t, e.url, md.Endpoint)
}

// An external etcd with TLS and client certificates is backed up with
// the apiserver's own --etcd-* files; without a client certificate it
// refuses.
func TestTake_OverTLSWithClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, err := localpki.NewCA("etcd-ca", time.Now())
	require.NoError(t, err)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	caFile := write("ca.crt", ca.CertPEM())
	cert, key, err := ca.IssueServing("etcd", []string{"127.0.0.1", "localhost"}, time.Now())
	require.NoError(t, err)
	serverCert, serverKey := write("server.crt", cert), write("server.key", key)
	cert, key, err = ca.IssueClient("dockerios-apiserver", nil, time.Now())
	require.NoError(t, err)
	clientCert, clientKey := write("client.crt", cert), write("client.key", key)

	ports := freePorts(t, 2)
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "tls", filepath.Join(dir, "etcd")
	clientURL := url.URL{Scheme: "https", Host: "127.0.0.1:" + strconv.Itoa(ports[0])}
	peerURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(ports[1])}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile, cfg.ClientTLSInfo.TrustedCAFile = serverCert, serverKey, caFile
	cfg.ClientTLSInfo.ClientCertAuth = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	<-e.Server.ReadyNotify()

	transport := storagebackend.TransportConfig{ServerList: []string{clientURL.String()}, TrustedCAFile: caFile, CertFile: clientCert, KeyFile: clientKey}
	c, err := txn.NewClient(transport)
	require.NoError(t, err)
	defer c.Close()
	seed(t, c, "ledger-tls", map[string][]string{"imac": {"id-1"}})

	md, err := Take(context.Background(), Options{Transport: transport, StoragePrefix: prefix, Dir: filepath.Join(dir, "backups"), Keep: 1})
	require.NoError(t, err)
	assert.Equal(t, "ledger-tls", md.LedgerID)
	assert.Equal(t, clientURL.String(), md.Endpoint)

	noCert := transport
	noCert.CertFile, noCert.KeyFile = "", ""
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = Take(ctx, Options{Transport: noCert, StoragePrefix: prefix, Dir: filepath.Join(dir, "refused"), Keep: 1})
	require.Error(t, err, "etcd requires a client certificate")
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
