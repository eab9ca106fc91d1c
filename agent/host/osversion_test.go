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
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOSVersion(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		argv []string
		want string
		err  string
	}{
		{"what the command prints, trimmed", []string{"/bin/sh", "-c", "echo '  14.6.1  '"}, "14.6.1", ""},
		{"its first line only", []string{"/bin/sh", "-c", "printf '15.1\\nBuildVersion: 24B83\\n'"}, "15.1", ""},
		{"a command that fails says so, with what it said", []string{"/bin/sh", "-c", "echo 'no such thing' >&2; exit 3"}, "",
			"/bin/sh -c echo 'no such thing' >&2; exit 3: exit status 3: no such thing"},
		{"a command that does not exist", []string{"/nonexistent/sw_vers"}, "", "/nonexistent/sw_vers:"},
		{"nothing printed", []string{"/bin/sh", "-c", "true"}, "", "printed nothing"},
		{"not a version", []string{"/bin/sh", "-c", "printf '\\001\\002'"}, "", "not a version"},
		{"none: nothing to report", []string{}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := OSVersion(ctx, tc.argv)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, v)
		})
	}
}

// Off macOS the platform has no command: the version is empty, without
// an error. On macOS it is sw_vers -productVersion.
func TestOSVersion_PlatformDefault(t *testing.T) {
	v, err := OSVersion(context.Background(), nil)
	require.NoError(t, err)
	if runtime.GOOS == "darwin" {
		assert.Equal(t, []string{"/usr/bin/sw_vers", "-productVersion"}, DefaultOSVersionCommand)
		assert.NotEmpty(t, v)
		return
	}
	assert.Nil(t, DefaultOSVersionCommand)
	assert.Empty(t, v)
}
