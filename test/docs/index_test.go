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

package docs

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeMaxLines is the README's budget: what DockerIOS is, the two
// commands, the first five minutes, installing, and the map of the docs.
// Everything else lives in docs/, by reader.
const readmeMaxLines = 250

// TestDocsIndex_EveryPageIsReachable: a page nobody links is a page
// nobody reads. Every page under docs/ must be linked from the README and
// from docs/README.md, and the README stays short enough to read in five
// minutes.
func TestDocsIndex_EveryPageIsReachable(t *testing.T) {
	root := repoRoot(t)
	var pages []string
	require.NoError(t, filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err == nil && rel != filepath.Join("docs", "README.md") {
			pages = append(pages, filepath.ToSlash(rel))
		}
		return err
	}))
	require.NotEmpty(t, pages)

	for _, index := range []string{"README.md", "docs/README.md"} {
		src, err := os.ReadFile(filepath.Join(root, index))
		require.NoError(t, err)
		linked := linkedPages(index, string(src))
		for _, page := range pages {
			assert.True(t, linked[page], "%s links no %s: link it (by reader) or remove the page", index, page)
		}
	}

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	lines := strings.Count(string(readme), "\n")
	assert.LessOrEqual(t, lines, readmeMaxLines, "README.md has %d lines: move what a newcomer need not read into docs/", lines)
}

// linkedPages are the repository paths of the pages src (the file index)
// links, anchors dropped.
func linkedPages(index, src string) map[string]bool {
	linked := map[string]bool{}
	for _, l := range markdownLinks(src) {
		target, _, _ := strings.Cut(l.Target, "#")
		if target == "" {
			continue
		}
		linked[path.Clean(path.Join(path.Dir(index), target))] = true
	}
	return linked
}
