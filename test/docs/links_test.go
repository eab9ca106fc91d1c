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
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLinks_LeadSomewhere checks every relative link of every tracked
// Markdown file: the file or directory it names exists, and its #anchor
// (in the same page or in another .md) is a heading there, by GitHub's
// rules. Links with a scheme (https:, mailto:) are not followed: the test
// uses no network.
func TestLinks_LeadSomewhere(t *testing.T) {
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--", "*.md").Output()
	require.NoError(t, err, "git ls-files: the link test reads the tracked Markdown files")
	files := strings.Fields(string(out))
	require.NotEmpty(t, files)

	anchors := map[string]map[string]bool{} // by file, relative to root
	anchorsOf := func(file string) (map[string]bool, error) {
		if a, ok := anchors[file]; ok {
			return a, nil
		}
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		anchors[file] = headingAnchors(string(src))
		return anchors[file], nil
	}

	checked := 0
	for _, file := range files {
		src, err := os.ReadFile(filepath.Join(root, file))
		if os.IsNotExist(err) {
			continue // deleted in the working tree, not yet in the index
		}
		require.NoError(t, err)
		for _, l := range markdownLinks(string(src)) {
			if err := checkLink(root, file, l.Target, anchorsOf); err != nil {
				t.Errorf("%s:%d: link %q: %v", file, l.Line, l.Target, err)
			}
			checked++
		}
	}
	t.Logf("%d Markdown files, %d relative links checked", len(files), checked)
}

// checkLink resolves target, as found in file, against the repository.
func checkLink(root, file, target string, anchorsOf func(string) (map[string]bool, error)) error {
	p, frag, _ := strings.Cut(target, "#")
	p, err := url.PathUnescape(p)
	if err != nil {
		return err
	}
	dest := file
	if p != "" {
		if strings.HasPrefix(p, "/") {
			return fmt.Errorf("an absolute path: GitHub resolves it against the site, not the repository; use a relative one")
		}
		dest = path.Clean(path.Join(path.Dir(file), p))
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return fmt.Errorf("leads outside the repository")
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
			return fmt.Errorf("%s does not exist", dest)
		}
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return nil // anchors in code files (#L10) are GitHub's line numbers
	}
	a, err := anchorsOf(dest)
	if err != nil {
		return err
	}
	if !a[frag] {
		return fmt.Errorf("%s has no heading with the anchor #%s", dest, frag)
	}
	return nil
}

type mdLink struct {
	Line   int
	Target string
}

var (
	// [text](target "title") and ![alt](target); the target may be in <>.
	inlineLinkRE = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)`)
	// [label]: target
	refDefRE     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	codeSpanRE   = regexp.MustCompile("`+[^`]*`+")
	mdFenceRE    = regexp.MustCompile("^\\s*(```+|~~~+)")
	schemeRE     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	htmlAnchorRE = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// markdownLinks are the relative links of a Markdown text, outside code
// blocks and code spans.
func markdownLinks(src string) []mdLink {
	var links []mdLink
	forEachProseLine(src, func(n int, line string) {
		line = codeSpanRE.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLinkRE.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refDefRE.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			target = strings.TrimSuffix(strings.TrimPrefix(target, "<"), ">")
			if target == "" || schemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
				continue
			}
			links = append(links, mdLink{Line: n, Target: target})
		}
	})
	return links
}

// forEachProseLine calls fn with each line (1-based) outside fenced code
// blocks.
func forEachProseLine(src string, fn func(n int, line string)) {
	fence := ""
	for i, line := range strings.Split(src, "\n") {
		if m := mdFenceRE.FindStringSubmatch(line); m != nil {
			switch {
			case fence == "":
				fence = m[1]
				continue
			case strings.HasPrefix(m[1], fence) && strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), fence[:1])) == "":
				fence = ""
				continue
			}
		}
		if fence == "" {
			fn(i+1, line)
		}
	}
}

var (
	atxHeadingRE = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	setextRE     = regexp.MustCompile(`^\s{0,3}(=+|-+)\s*$`)
	mdLinkTextRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTagRE    = regexp.MustCompile(`<[^>]+>`)
)

// headingAnchors are the anchors GitHub gives a page's headings (and any
// <a name> or <a id> in it).
func headingAnchors(src string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	add := func(heading string) {
		slug := githubSlug(heading)
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	prev := ""
	forEachProseLine(src, func(_ int, line string) {
		for _, m := range htmlAnchorRE.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		if m := atxHeadingRE.FindStringSubmatch(line); m != nil {
			add(m[1])
		} else if strings.TrimSpace(prev) != "" && setextRE.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(prev), "|") &&
			!strings.HasPrefix(strings.TrimSpace(prev), "-") && !strings.HasPrefix(strings.TrimSpace(prev), "#") {
			add(prev)
		}
		prev = line
	})
	return anchors
}

// githubSlug is GitHub's anchor for a heading: its text as rendered
// (links and code marks dropped), lowercased, every character but
// letters, digits, spaces, hyphens and underscores removed, and spaces
// turned into hyphens.
func githubSlug(heading string) string {
	text := mdLinkTextRE.ReplaceAllString(heading, "$1")
	text = htmlTagRE.ReplaceAllString(text, "")
	text = strings.ReplaceAll(text, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestGithubSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Rule 4: binding is atomic", "rule-4-binding-is-atomic"},
		{"The docs' own tests", "the-docs-own-tests"},
		{"`kubectl dockerios claim`", "kubectl-dockerios-claim"},
		{"How fast (through kube-apiserver)", "how-fast-through-kube-apiserver"},
		{"Pending → Ready", "pending--ready"},
		{"[Links](other.md) and snake_case", "links-and-snake_case"},
		{"Café 1.2", "café-12"},
	} {
		assert.Equal(t, tc.want, githubSlug(tc.heading), tc.heading)
	}
}

func TestHeadingAnchors_NumberDuplicatesAndSkipCode(t *testing.T) {
	src := "# Title\n\n## Setup\n\n```sh\n# not a heading\n```\n\n## Setup\n\nText\n---\n\n## Setup\n<a name=\"custom\"></a>\n"
	assert.Equal(t, map[string]bool{
		"title": true, "setup": true, "setup-1": true, "text": true, "setup-2": true, "custom": true,
	}, headingAnchors(src))
}

func TestMarkdownLinks_RelativeOnlyOutsideCode(t *testing.T) {
	src := "See [a](a.md#x), ![img](<docs/a b.png>), [web](https://example.com), [mail](mailto:x@y),\n" +
		"`[not](code.md)` and [self](#here \"title\").\n\n```md\n[in](fence.md)\n```\n[ref]: ../up.md\n"
	assert.Equal(t, []mdLink{
		{Line: 1, Target: "a.md#x"},
		{Line: 1, Target: "docs/a b.png"},
		{Line: 2, Target: "#here"},
		{Line: 7, Target: "../up.md"},
	}, markdownLinks(src))
}
