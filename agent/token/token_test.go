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

package token

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dockerios/dockerios/agent/config"
)

const tok = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestRead_FileTrimsWhitespace(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(p, []byte("  "+tok+"\n"), 0o600))
	got, err := Read(context.Background(), config.Token{File: p})
	require.NoError(t, err)
	assert.Equal(t, tok, string(got))
}

func TestRead_RejectsUnusableTokens(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"short":     "abc",
		"empty":     "\n",
		"space":     tok[:20] + " " + tok[:20],
		"control":   tok + "\x01",
		"too long":  strings.Repeat("a", MaxLen+1),
		"non-ascii": tok + "é",
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		_, err := Read(context.Background(), config.Token{File: p})
		assert.Error(t, err, name)
	}
	_, err := Read(context.Background(), config.Token{File: filepath.Join(dir, "missing")})
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestParseNVRAMOutput(t *testing.T) {
	for _, tc := range []struct {
		name, out, want string
		err             bool
	}{
		{"plain", config.DefaultNVRAMVariable + "\t" + tok + "\n", tok, false},
		{"short name", "dockerios-agent-token\t" + tok, tok, false},
		{"percent escapes", "x\tab%25cd%00", "ab%cd", false},
		{"trailing NUL from OpenCore string", "x\t" + tok + "%00\n", tok, false},
		{"CRLF", "x\t" + tok + "\r\n", tok, false},
		{"no tab", "nvram: Error getting variable", "", true},
		{"bad escape", "x\tab%zz", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNVRAMOutput([]byte(tc.out))
			if tc.err {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}

func TestRead_NVRAMUnsupportedOffMacOS(t *testing.T) {
	if runtime.GOOS == "darwin" {
		t.Skip("NVRAM exists here")
	}
	_, err := Read(context.Background(), config.Token{NVRAMVariable: config.DefaultNVRAMVariable})
	assert.ErrorIs(t, err, ErrUnsupported)
}
