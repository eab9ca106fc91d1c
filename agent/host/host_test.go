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

package host

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDiskUsage(t *testing.T) {
	u, err := DiskUsage(t.TempDir())
	require.NoError(t, err)
	assert.Positive(t, u.TotalBytes)
	assert.LessOrEqual(t, u.FreeBytes, u.TotalBytes)

	_, err = DiskUsage(filepath.Join(t.TempDir(), "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestConsoleOwner(t *testing.T) {
	p := filepath.Join(t.TempDir(), "console")
	require.NoError(t, os.WriteFile(p, nil, 0o600))
	uid, err := ConsoleOwner(p)
	require.NoError(t, err)
	assert.Equal(t, uint32(os.Geteuid()), uid)
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chown(p, 501, 20))
		uid, err = ConsoleOwner(p)
		require.NoError(t, err)
		assert.Equal(t, uint32(501), uid)
	}
	_, err = ConsoleOwner(p + "-missing")
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestBootTime(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("unsupported platform")
	}
	bt, err := BootTime()
	require.NoError(t, err)
	assert.True(t, bt.Before(time.Now()))
	assert.True(t, bt.After(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)))
}
