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

package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// hack/version.sh stamps every build from git: run it in a repository of
// its own, in each state a checkout can be in.
func TestVersionScript_StampsFromGit(t *testing.T) {
	script, err := os.ReadFile("../../hack/version.sh")
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		// setup runs in the repository after its first commit.
		setup func(t *testing.T, git func(args ...string) string)
		env   []string
		// want matches the version; {sha} is HEAD's abbreviated SHA.
		want      string
		treeState string
	}{
		{
			name:      "no tag yet",
			setup:     func(*testing.T, func(...string) string) {},
			want:      `^v0\.0\.0-g{sha}$`,
			treeState: "clean",
		},
		{
			name:      "on a tag",
			setup:     func(_ *testing.T, git func(...string) string) { git("tag", "-a", "-m", "v0.2.0", "v0.2.0") },
			want:      `^v0\.2\.0$`,
			treeState: "clean",
		},
		{
			name: "commits after a tag",
			setup: func(_ *testing.T, git func(...string) string) {
				git("tag", "-a", "-m", "v0.2.0", "v0.2.0")
				git("commit", "--allow-empty", "-m", "two")
				git("commit", "--allow-empty", "-m", "three")
			},
			want:      `^v0\.2\.0-2-g{sha}$`,
			treeState: "clean",
		},
		{
			name: "tags of another scheme are not versions",
			setup: func(_ *testing.T, git func(...string) string) {
				git("tag", "-a", "-m", "release", "release-2026")
			},
			want:      `^v0\.0\.0-g{sha}$`,
			treeState: "clean",
		},
		{
			name: "uncommitted changes",
			setup: func(t *testing.T, git func(...string) string) {
				git("tag", "-a", "-m", "v0.2.0", "v0.2.0")
				require.NoError(t, os.WriteFile(filepath.Join(git("rev-parse", "--show-toplevel"), "go.mod"), []byte("module github.com/dockerios/dockerios\n\ngo 1.26\n"), 0o644))
			},
			want:      `^v0\.2\.0-dirty$`,
			treeState: "dirty",
		},
		{
			name: "an untracked build output is not a change",
			setup: func(t *testing.T, git func(...string) string) {
				require.NoError(t, os.WriteFile(filepath.Join(git("rev-parse", "--show-toplevel"), "binary"), []byte("x"), 0o644))
			},
			want:      `^v0\.0\.0-g{sha}$`,
			treeState: "clean",
		},
		{
			name:      "a release names its version",
			setup:     func(*testing.T, func(...string) string) {},
			env:       []string{"DOCKERIOS_GIT_VERSION=v1.2.3-rc.1"},
			want:      `^v1\.2\.3-rc\.1$`,
			treeState: "clean",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// setup
			dir := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "hack"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "hack", "version.sh"), script, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module github.com/dockerios/dockerios\n"), 0o644))
			git := func(args ...string) string {
				t.Helper()
				cmd := exec.Command("git", args...)
				cmd.Dir = dir
				// A fixed author and commit time in another zone than UTC:
				// the build date must be the commit's, in UTC.
				cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
					"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
					"GIT_AUTHOR_DATE=2026-03-04T05:06:07+02:00", "GIT_COMMITTER_DATE=2026-03-04T05:06:07+02:00")
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "git %v: %s", args, out)
				return strings.TrimSpace(string(out))
			}
			git("init", "-q")
			git("add", ".")
			git("commit", "-q", "-m", "one")
			tc.setup(t, git)

			// execute
			cmd := exec.Command(filepath.Join(dir, "hack", "version.sh"), "--env")
			cmd.Env = append(os.Environ(), tc.env...)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			ldflags, err := exec.Command(filepath.Join(dir, "hack", "version.sh")).Output()
			require.NoError(t, err)

			// assert
			got := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				k, v, _ := strings.Cut(line, "=")
				got[k] = v
			}
			sha := git("rev-parse", "--short", "HEAD")
			assert.Regexp(t, regexp.MustCompile(strings.ReplaceAll(tc.want, "{sha}", sha)), got["GIT_VERSION"])
			_, err = utilversion.ParseSemantic(got["GIT_VERSION"])
			assert.NoError(t, err, "the version must be semantic")
			assert.Equal(t, git("rev-parse", "HEAD"), got["GIT_COMMIT"])
			assert.Equal(t, tc.treeState, got["GIT_TREE_STATE"])
			assert.Equal(t, "2026-03-04T03:06:07Z", got["BUILD_DATE"])
			if tc.env == nil {
				assert.Equal(t, "-X github.com/dockerios/dockerios/pkg/version.gitVersion="+got["GIT_VERSION"]+
					" -X github.com/dockerios/dockerios/pkg/version.gitCommit="+got["GIT_COMMIT"]+
					" -X github.com/dockerios/dockerios/pkg/version.gitTreeState="+got["GIT_TREE_STATE"]+
					" -X github.com/dockerios/dockerios/pkg/version.buildDate=2026-03-04T03:06:07Z\n", string(ldflags))
			}
		})
	}
}

// A version that is not semantic is refused, not stamped.
func TestVersionScript_RefusesAVersionThatIsNotSemantic(t *testing.T) {
	for _, v := range []string{"1.2.3", "v1.2", "v1.2.3+build.5", "v01.2.3"} {
		cmd := exec.Command("../../hack/version.sh")
		cmd.Env = append(os.Environ(), "DOCKERIOS_GIT_VERSION="+v)
		out, err := cmd.CombinedOutput()
		assert.Error(t, err, "%s: %s", v, out)
		assert.Contains(t, string(out), "is not a semantic version", v)
	}
}
