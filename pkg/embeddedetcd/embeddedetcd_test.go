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

package embeddedetcd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestStart_DataSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "etcd")

	first, err := Start(dataDir, io.Discard)
	require.NoError(t, err)
	put(t, first.ClientURL, "/registry/dockerios.io/probe", "written by the first run")
	first.Stop()

	second, err := Start(dataDir, io.Discard)
	require.NoError(t, err)
	defer second.Stop()
	assert.NotEqual(t, first.ClientURL, "", "a client URL is reported")
	assert.Equal(t, "written by the first run", get(t, second.ClientURL, "/registry/dockerios.io/probe"))
}

func TestStart_RefusesUnusableDataDir(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	require.NoError(t, writeFile(blocker))
	_, err := Start(filepath.Join(blocker, "etcd"), io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "creating etcd data directory")
}

func client(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func put(t *testing.T, endpoint, key, value string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := client(t, endpoint).Put(ctx, key, value)
	require.NoError(t, err)
}

func get(t *testing.T, endpoint, key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client(t, endpoint).Get(ctx, key)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	return string(resp.Kvs[0].Value)
}

func writeFile(path string) error { return os.WriteFile(path, []byte("not a directory"), 0o600) }

// A healthy member's start and clean stop log nothing: every line etcd
// writes to the server's stderr is worth reading.
func TestStart_HealthyLifecycleLogsNothing(t *testing.T) {
	var log bytes.Buffer
	dir := filepath.Join(t.TempDir(), "etcd")
	require.NoError(t, os.MkdirAll(dir, 0o755)) // as a volume mount may be
	s, err := Start(dir, &log)
	require.NoError(t, err)
	put(t, s.ClientURL, "/registry/dockerios.io/probe", "x")
	s.Stop()
	assert.Empty(t, log.String())
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the ledger's directory is its owner's only")
}

func TestLogger(t *testing.T) {
	for _, tc := range []struct {
		name     string
		log      func(*zap.Logger)
		stopping bool
		want     []string // "level msg" of each line
	}{
		{"info is dropped", func(l *zap.Logger) { l.Info("compacted") }, false, nil},
		{"warning", func(l *zap.Logger) { l.Warn("apply request took too long", zap.Duration("took", time.Second)) }, false,
			[]string{"warn apply request took too long"}},
		{"error", func(l *zap.Logger) { l.Error("failed to save snapshot") }, false, []string{"error failed to save snapshot"}},
		{"deliberate setup", func(l *zap.Logger) { l.Warn("simple token is not cryptographically signed") }, false, nil},
		{"a listener failing while running", func(l *zap.Logger) { l.Error("setting up serving from embedded etcd failed.") }, false,
			[]string{"error setting up serving from embedded etcd failed."}},
		{"listeners closed by Stop", func(l *zap.Logger) { l.Error("setting up serving from embedded etcd failed.") }, true, nil},
		{"other errors while stopping", func(l *zap.Logger) { l.With(zap.String("member", "m")).Error("failed to publish") }, true,
			[]string{"error failed to publish"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			stopping := new(atomic.Bool)
			stopping.Store(tc.stopping)
			tc.log(newLogger(&buf, stopping))
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				if line == "" {
					continue
				}
				var e struct{ Level, Logger, Msg string }
				require.NoError(t, json.Unmarshal([]byte(line), &e), "a JSON line: %s", line)
				assert.Equal(t, "etcd", e.Logger)
				got = append(got, e.Level+" "+e.Msg)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
