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
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestStart_DataSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	dataDir, logFile := filepath.Join(dir, "etcd"), filepath.Join(dir, "etcd.log")

	first, err := Start(dataDir, logFile)
	require.NoError(t, err)
	put(t, first.ClientURL, "/registry/dockerios.io/probe", "written by the first run")
	first.Stop()

	second, err := Start(dataDir, logFile)
	require.NoError(t, err)
	defer second.Stop()
	assert.NotEqual(t, first.ClientURL, "", "a client URL is reported")
	assert.Equal(t, "written by the first run", get(t, second.ClientURL, "/registry/dockerios.io/probe"))
}

func TestStart_RefusesUnusableDataDir(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	require.NoError(t, writeFile(blocker))
	_, err := Start(filepath.Join(blocker, "etcd"), filepath.Join(dir, "etcd.log"))
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
