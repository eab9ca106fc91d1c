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

// Package docs keeps the docs true: every command the README and the user
// guide (docs/users/) show runs against the local stack, as a newcomer
// would type it, and every relative link in every Markdown file leads
// somewhere.
//
// Which commands run is decided by the page itself
// (docs/contributors/testing.md, "The docs' own tests"): fenced blocks with
// the info string sh are run line by line; in console blocks the lines
// beginning with "$ " are (the rest is sample output, not compared); a
// command ending in "# not run here: <why>" is skipped, and one without a
// why fails the test. Other fences are not run.
package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	// pageTimeout bounds one page: the stack's start (~1 minute once
	// bin/ is built) and every command on it.
	pageTimeout = 10 * time.Minute
	// stateDir is where hack/local-up.sh keeps the stack when DATA_DIR is
	// unset, which is what the docs' `export KUBECONFIG=$PWD/.dockerios/
	// admin.kubeconfig` relies on: the test cannot move it elsewhere.
	stateDir = ".dockerios"
	// stackUp is what the test says when a stack it did not start is up.
	stackUp = "stop your local stack first (hack/local-down.sh): this test runs the docs' own hack/local-up.sh"
)

// watchSeconds is how long a watching command (kubectl get -w) runs
// before it is stopped, as a reader would stop it with Ctrl-C.
var watchSeconds = 5

// builtinSkips are commands the docs show that the test never runs, with
// the reason; a page need not mark them.
var builtinSkips = map[string]string{
	// The README's "run the tests" line: hack/test.sh runs this very test
	// (and every other, for an hour), so running it here would recurse.
	"hack/test.sh": "hack/test.sh runs every test, this one included",
}

// commandPages are the pages whose commands run: the README and the user
// guide. Operator, reference and contributor pages show commands for real
// clusters and are not run.
func commandPages(t *testing.T, root string) []string {
	t.Helper()
	users, err := filepath.Glob(filepath.Join(root, "docs", "users", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages := []string{"README.md"}
	for _, p := range users {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, filepath.ToSlash(rel))
	}
	sort.Strings(pages[1:])
	return pages
}

// TestDocsCommands_AreMarkedProperly checks what the extraction decides for
// each page without running anything: a skip has its reason, every command
// is complete shell, and no command sits in a fence the convention does
// not know (bash, shell), where it would silently not run.
func TestDocsCommands_AreMarkedProperly(t *testing.T) {
	root := repoRoot(t)
	for _, page := range commandPages(t, root) {
		src, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		steps, errs := extractCommands(page, src)
		for _, err := range errs {
			t.Error(err)
		}
		run, skipped := 0, 0
		for _, s := range steps {
			first, _, _ := strings.Cut(s.Text, "\n")
			switch {
			case s.Skip != "":
				skipped++
				t.Logf("%s:%d: skip (%s): %s", s.Page, s.Line, s.Skip, first)
			case s.Watch:
				run++
				t.Logf("%s:%d: watch %ds: %s", s.Page, s.Line, watchSeconds, first)
			default:
				run++
				t.Logf("%s:%d: run: %s", s.Page, s.Line, first)
			}
		}
		t.Logf("%s: %d commands run, %d skipped", page, run, skipped)
	}
}

// TestDocsCommands runs each page's commands as one bash script, on a
// fresh local stack of its own (hack/local-up.sh before the page, or the
// page's own first command when that is hack/local-up.sh;
// hack/local-down.sh after it, pass or fail).
func TestDocsCommands(t *testing.T) {
	root := repoRoot(t)
	// hack/local-up.sh would build a missing control plane (many minutes)
	// inside the page's time; fail at once instead, as test/framework does.
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(root, "bin", name)); err != nil {
			t.Fatalf("bin/%s not found: run hack/build-control-plane.sh (hack/local-up.sh runs the binaries in bin/)", name)
		}
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatal("kubectl not found on PATH: the docs' commands call it by that name")
	}
	for _, page := range commandPages(t, root) {
		t.Run(strings.ReplaceAll(page, "/", "_"), func(t *testing.T) {
			runPage(t, root, page)
		})
	}
}

func runPage(t *testing.T, root, page string) {
	src, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	steps, errs := extractCommands(page, src)
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}

	// Never reuse, nor stop, a stack this test did not start: the check
	// is hack/local-up.sh's own (a live pid in the state directory).
	if pid, up := stackRunning(root); up {
		t.Fatalf("a local stack is up (pid %d in %s/localstack.pid): %s", pid, stateDir, stackUp)
	}
	_, statErr := os.Stat(filepath.Join(root, stateDir))
	createdStateDir := errors.Is(statErr, os.ErrNotExist)

	tmp := t.TempDir()
	env := pageEnv(tmp)
	t.Cleanup(func() { stopStack(t, root, env, createdStateDir) })

	script := pageScript(page, steps)
	scriptPath := filepath.Join(tmp, "page.sh")
	if err := os.WriteFile(scriptPath, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}

	// Within go test's own -timeout too, with time left to stop the stack:
	// a test killed by that timeout runs no Cleanup and would leave it up.
	timeout := pageTimeout
	if deadline, ok := t.Deadline(); ok && time.Until(deadline)-2*time.Minute < timeout {
		timeout = time.Until(deadline) - 2*time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.Command("bash", scriptPath)
	cmd.Dir = root
	cmd.Env = env
	cmd.Stdin = nil
	cmd.Stdout = &out
	cmd.Stderr = &out
	// A group of its own, so that whatever the page leaves running (a
	// watch, a background job) is stopped with it. The stack is not in
	// it: hack/local-up.sh starts it in a session of its own.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var runErr error
	timedOut := false
	select {
	case runErr = <-done:
	case <-ctx.Done():
		timedOut = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		runErr = <-done
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	elapsed := time.Since(start).Round(time.Second)

	output := out.String()
	switch {
	case timedOut:
		t.Fatalf("%s did not finish within %s; it was at %s\noutput so far:\n%s", page, timeout.Round(time.Second), lastStep(output), output)
	case runErr != nil:
		t.Fatalf("%s failed after %s at %s (%v)\noutput:\n%s", page, elapsed, lastStep(output), runErr, output)
	}
	t.Logf("%s: %d commands in %s (the stack's start included)\n%s", page, len(steps), elapsed, output)
}

// pageEnv is the test's environment for a page, without what would take
// the page elsewhere: DATA_DIR (the docs use .dockerios/), LOCALSTACK_ARGS,
// and KUBECONFIG, which points nowhere until the page exports its own, so
// that a command before that export fails here instead of reaching the
// cluster of whoever runs the test.
func pageEnv(tmp string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "DATA_DIR", "LOCALSTACK_ARGS", "KUBECONFIG":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "KUBECONFIG="+filepath.Join(tmp, "no-kubeconfig-until-the-page-exports-one"))
}

// stopStack runs hack/local-down.sh for the stack the page started, pass
// or fail, and removes the state directory when the test made it (its
// logs are printed first when the page failed).
func stopStack(t *testing.T, root string, env []string, createdStateDir bool) {
	if t.Failed() {
		for _, log := range []string{"localstack.log", "controller.log"} {
			if data, err := os.ReadFile(filepath.Join(root, stateDir, log)); err == nil {
				t.Logf("%s/%s ends with:\n%s", stateDir, log, tail(string(data), 40))
			}
		}
	}
	cmd := exec.Command(filepath.Join(root, "hack", "local-down.sh"))
	cmd.Dir = root
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("hack/local-down.sh: %v\n%s", err, out)
	}
	if pid, up := stackRunning(root); up {
		t.Errorf("the stack (pid %d) is still up after hack/local-down.sh:\n%s", pid, out)
		return
	}
	if createdStateDir {
		if err := os.RemoveAll(filepath.Join(root, stateDir)); err != nil {
			t.Error(err)
		}
	}
}

// stackRunning is hack/local-up.sh's test for a stack already up.
func stackRunning(root string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(root, stateDir, "localstack.pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	err = syscall.Kill(pid, 0)
	return pid, err == nil || errors.Is(err, syscall.EPERM)
}

// step is one command of a page.
type step struct {
	Page string
	Line int    // where the command starts, 1-based
	Text string // the command, as the page shows it (several lines for a heredoc or a continuation)
	Skip string // why it is not run; empty when it runs
	// Watch commands (kubectl get -w) run until stopped: they run for
	// watchSeconds and pass if they printed something and were still
	// running.
	Watch bool
}

var (
	fenceRE = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*([^`\\s]*)")
	// A marker anywhere but inside quotes is good enough: the docs'
	// commands put it last, after the command's own comment if any.
	notRunRE  = regexp.MustCompile(`#\s*not run here\b(:?)(.*)$`)
	heredocRE = regexp.MustCompile(`(?:^|[^<])<<(-?)\s*(?:'([A-Za-z_][A-Za-z0-9_]*)'|"([A-Za-z_][A-Za-z0-9_]*)"|\\?([A-Za-z_][A-Za-z0-9_]*))`)
	watchRE   = regexp.MustCompile(`\bkubectl\b.*\s(?:-w|--watch|--watch-only)(?:[\s=]|$)`)
	envRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=\S*$`)
	// Fences whose commands would silently not run.
	shellLikeInfo = map[string]bool{"bash": true, "shell": true, "zsh": true, "shell-session": true}
)

// extractCommands returns the commands of a page in order, with an error
// for each misuse of the convention.
func extractCommands(page string, src []byte) ([]step, []error) {
	lines := strings.Split(string(src), "\n")
	var steps []step
	var errs []error
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, fence, info := m[1], m[2], strings.ToLower(m[3])
		// The block's lines, with the fence's indentation removed (a block
		// in a list item is indented).
		start := i + 2 // the 1-based line of the block's first line
		fenceLine := i + 1
		var body []string
		for i++; i < len(lines); i++ {
			l := strings.TrimRight(lines[i], " \t")
			if strings.HasPrefix(strings.TrimLeft(l, " "), fence) && strings.Trim(strings.TrimLeft(l, " "), fence[:1]) == "" {
				break
			}
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		switch {
		case info == "sh":
			s, e := shellCommands(page, start, body)
			steps, errs = append(steps, s...), append(errs, e...)
		case info == "console":
			s, e := consoleCommands(page, start, body)
			steps, errs = append(steps, s...), append(errs, e...)
		case shellLikeInfo[info]:
			errs = append(errs, fmt.Errorf("%s:%d: a ```%s block: use ```sh (its commands run in the docs test) or ```console (its $ lines run), or ```text for what is not run", page, fenceLine, info))
		}
	}
	for i := range steps {
		finishStep(&steps[i], &errs)
	}
	return steps, errs
}

// shellCommands splits an sh block into commands: a command goes on while
// a line ends in a backslash, a heredoc is open, or bash says it is
// incomplete (an open quote, if, for, a brace).
func shellCommands(page string, start int, body []string) ([]step, []error) {
	var steps []step
	var errs []error
	for i := 0; i < len(body); i++ {
		first := strings.TrimSpace(body[i])
		if first == "" || strings.HasPrefix(first, "#") {
			if notRunRE.MatchString(first) {
				errs = append(errs, fmt.Errorf("%s:%d: a \"# not run here\" marker on a line of its own: put it at the end of the command it skips", page, start+i))
			}
			continue
		}
		s := step{Page: page, Line: start + i}
		j := i
		for {
			end, ok := readHeredocs(body, j)
			if !ok {
				errs = append(errs, fmt.Errorf("%s:%d: a heredoc with no end in its block", page, s.Line))
				j = len(body) - 1
				break
			}
			j = end
			if strings.HasSuffix(strings.TrimRight(body[j], " \t"), `\`) && j+1 < len(body) {
				j++
				continue
			}
			complete, err := bashComplete(strings.Join(body[i:j+1], "\n"))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: not valid shell: %v", page, s.Line, err))
				break
			}
			if complete {
				break
			}
			if j+1 >= len(body) {
				errs = append(errs, fmt.Errorf("%s:%d: a command with no end in its block (an open quote, if, for or brace)", page, s.Line))
				break
			}
			j++
		}
		s.Text = strings.Join(body[i:j+1], "\n")
		steps = append(steps, s)
		i = j
	}
	return steps, errs
}

// readHeredocs: when line i opens heredocs, the index of the last line of
// the last one's body (its delimiter); i otherwise. ok is false when a
// heredoc has no end.
func readHeredocs(body []string, i int) (int, bool) {
	for _, m := range heredocRE.FindAllStringSubmatch(body[i], -1) {
		delim := m[2] + m[3] + m[4]
		tabs := m[1] == "-"
		for i++; ; i++ {
			if i >= len(body) {
				return i, false
			}
			l := body[i]
			if tabs {
				l = strings.TrimLeft(l, "\t")
			}
			if l == delim {
				break
			}
		}
	}
	return i, true
}

// bashComplete asks bash whether text is a whole command (true) or needs
// more lines (false); any other syntax error is returned.
func bashComplete(text string) (bool, error) {
	out, err := exec.Command("bash", "-n", "-c", text).CombinedOutput()
	if err == nil {
		return true, nil
	}
	msg := string(out)
	if strings.Contains(msg, "unexpected end of file") || strings.Contains(msg, "unexpected EOF") {
		return false, nil
	}
	return false, fmt.Errorf("%s", strings.TrimSpace(msg))
}

// consoleCommands takes the "$ " lines of a console block, with their
// continuation lines (after a trailing backslash, or a heredoc's body).
func consoleCommands(page string, start int, body []string) ([]step, []error) {
	var steps []step
	var errs []error
	for i := 0; i < len(body); i++ {
		if !strings.HasPrefix(body[i], "$ ") {
			continue
		}
		s := step{Page: page, Line: start + i}
		text := []string{strings.TrimPrefix(body[i], "$ ")}
		for {
			last := text[len(text)-1]
			if !strings.HasSuffix(strings.TrimRight(last, " \t"), `\`) || i+1 >= len(body) {
				break
			}
			i++
			text = append(text, strings.TrimPrefix(body[i], "> "))
		}
		// A heredoc's body follows its line unprefixed.
		j, ok := readHeredocs(append(text[:len(text):len(text)], body[i+1:]...), len(text)-1)
		if !ok {
			errs = append(errs, fmt.Errorf("%s:%d: a heredoc with no end in its block", page, s.Line))
		} else if extra := j - (len(text) - 1); extra > 0 {
			text = append(text, body[i+1:i+1+extra]...)
			i += extra
		}
		s.Text = strings.Join(text, "\n")
		if _, err := bashComplete(s.Text); err != nil && !strings.Contains(err.Error(), "end of file") {
			errs = append(errs, fmt.Errorf("%s:%d: not valid shell: %v", page, s.Line, err))
		}
		steps = append(steps, s)
	}
	return steps, errs
}

// finishStep reads a step's "# not run here" marker, the built-in skips
// and whether it watches.
func finishStep(s *step, errs *[]error) {
	for _, l := range codeLines(s.Text) {
		m := notRunRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		reason := strings.TrimSpace(m[2])
		if m[1] != ":" || reason == "" {
			*errs = append(*errs, fmt.Errorf("%s:%d: %q skips a command without saying why: write \"# not run here: <why>\"", s.Page, s.Line, strings.TrimSpace(l)))
			reason = "(no reason given)"
		}
		s.Skip = reason
	}
	if s.Skip == "" {
		if reason, ok := builtinSkips[commandName(s.Text)]; ok {
			s.Skip = reason
		}
	}
	s.Watch = watchRE.MatchString(codeLines(s.Text)[0])
}

// codeLines are a command's lines that are shell, not a heredoc's body.
func codeLines(text string) []string {
	lines := strings.Split(text, "\n")
	var code []string
	for i := 0; i < len(lines); i++ {
		code = append(code, lines[i])
		if j, ok := readHeredocs(lines, i); ok {
			i = j
		} else {
			break
		}
	}
	return code
}

// commandName is the program a command runs first, past any VAR=value
// words, with a leading ./ dropped.
func commandName(text string) string {
	for _, w := range strings.Fields(text) {
		if envRE.MatchString(w) {
			continue
		}
		return strings.TrimPrefix(w, "./")
	}
	return ""
}

// pageScript is the bash script that runs a page: strict mode, from the
// repository root, each command announced with its page and line (so a
// failure names them) and the stack brought up first unless the page's
// first command does it.
func pageScript(page string, steps []step) string {
	var b strings.Builder
	fmt.Fprintf(&b, `set -euo pipefail
docs_step() { printf '\n==> %%s:%%s: %%s\n' "$1" "$2" "$3"; }
docs_test_step() { printf '\n==> (the docs test, before the page): %%s\n' "$1"; }
docs_skip() { printf '\n==> %%s:%%s: skipped (%%s): %%s\n' "$1" "$2" "$3" "$4"; }
# docs_watch PAGE LINE COMMAND: runs a watching command for %[1]ds, in a
# process group of its own (set -m) so that stopping it stops all of it;
# it passes if it printed something and was still running.
docs_watch() {
  local out pid rc=0 i
  out="$(mktemp)"
  set -m
  ( eval "$3" ) >"${out}" 2>&1 </dev/null &
  pid=$!
  set +m
  for ((i = 0; i < %[1]d * 10; i++)); do
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "${pid}" 2>/dev/null; then
    kill -TERM -- "-${pid}" 2>/dev/null || true
    wait "${pid}" 2>/dev/null || true
    cat "${out}"
    if [[ ! -s "${out}" ]]; then
      echo "$1:$2: the watch printed nothing in %[1]ds" >&2
      rm -f "${out}"
      return 1
    fi
    rm -f "${out}"
    echo "(stopped after %[1]ds, as a reader would stop it)"
    return 0
  fi
  wait "${pid}" || rc=$?
  cat "${out}"
  rm -f "${out}"
  echo "$1:$2: the watch ended by itself (exit status ${rc}) within %[1]ds; a watch runs until it is stopped" >&2
  return 1
}
`, watchSeconds)
	if len(steps) == 0 || commandName(steps[0].Text) != "hack/local-up.sh" || steps[0].Skip != "" {
		b.WriteString("docs_test_step 'hack/local-up.sh   # a fresh stack for this page'\nhack/local-up.sh\n")
	}
	for _, s := range steps {
		switch {
		case s.Skip != "":
			fmt.Fprintf(&b, "docs_skip %s %d %s %s\n", shQuote(s.Page), s.Line, shQuote(s.Skip), shQuote(s.Text))
		case s.Watch:
			fmt.Fprintf(&b, "docs_step %s %d %s\n", shQuote(s.Page), s.Line, shQuote(s.Text))
			fmt.Fprintf(&b, "docs_watch %s %d %s\n", shQuote(s.Page), s.Line, shQuote(s.Text))
		default:
			fmt.Fprintf(&b, "docs_step %s %d %s\n", shQuote(s.Page), s.Line, shQuote(s.Text))
			b.WriteString(s.Text + "\n")
		}
	}
	return b.String()
}

func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// lastStep is the last command the script announced: the one that failed
// or was running.
func lastStep(output string) string {
	lines := strings.Split(output, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "==> ") {
			return strings.TrimPrefix(lines[i], "==> ")
		}
	}
	return "(before the first command)"
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// repoRoot is the directory holding the module's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

func TestExtractCommands(t *testing.T) {
	fence := "```"
	for _, tc := range []struct {
		name    string
		page    string
		want    []step
		wantErr string
	}{{
		name: "sh runs every command, console only its $ lines, other fences nothing",
		page: fence + "sh\nexport A=1   # a comment\n\n# a comment line\ncd docs\n" + fence + "\n" +
			fence + "console\n$ kubectl get mm\nNAME  PHASE\n$ echo a \\\n> b\n" + fence + "\n" +
			fence + "yaml\nkind: X\n" + fence + "\n" + fence + "\nkubectl delete all\n" + fence + "\n",
		want: []step{
			{Line: 2, Text: "export A=1   # a comment"},
			{Line: 5, Text: "cd docs"},
			{Line: 8, Text: "kubectl get mm"},
			{Line: 10, Text: "echo a \\\nb"},
		},
	}, {
		name: "a heredoc, a continuation and an if are one command each",
		page: fence + "sh\nkubectl apply -f - <<'EOF'\nkind: X\n# not run here\nEOF\nkubectl get \\\n  mm\nif true; then\n  echo y\nfi\n" + fence + "\n",
		want: []step{
			{Line: 2, Text: "kubectl apply -f - <<'EOF'\nkind: X\n# not run here\nEOF"},
			{Line: 6, Text: "kubectl get \\\n  mm"},
			{Line: 8, Text: "if true; then\n  echo y\nfi"},
		},
	}, {
		name: "a marker skips, hack/test.sh is skipped, a watch is a watch",
		page: fence + "sh\nvirtctl vnc m   # not run here: a console for a person\nhack/test.sh   # every test\nkubectl get mm -n demo -w\n" + fence + "\n",
		want: []step{
			{Line: 2, Text: "virtctl vnc m   # not run here: a console for a person", Skip: "a console for a person"},
			{Line: 3, Text: "hack/test.sh   # every test", Skip: builtinSkips["hack/test.sh"]},
			{Line: 4, Text: "kubectl get mm -n demo -w", Watch: true},
		},
	}, {
		name:    "a skip without a reason fails",
		page:    fence + "sh\nvirtctl vnc m   # not run here\n" + fence + "\n",
		wantErr: `page.md:2: "virtctl vnc m   # not run here" skips a command without saying why`,
	}, {
		name:    "an empty reason fails too",
		page:    fence + "console\n$ virtctl vnc m   # not run here:  \n" + fence + "\n",
		wantErr: `page.md:2: "virtctl vnc m   # not run here:" skips a command without saying why`,
	}, {
		name:    "a bash fence would silently not run",
		page:    fence + "bash\nkubectl get mm\n" + fence + "\n",
		wantErr: "page.md:1: a ```bash block: use ```sh",
	}, {
		name:    "a heredoc must end in its block",
		page:    fence + "sh\ncat <<EOF\nx\n" + fence + "\n",
		wantErr: "page.md:2: a heredoc with no end in its block",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			steps, errs := extractCommands("page.md", []byte(tc.page))
			if tc.wantErr != "" {
				require.NotEmpty(t, errs)
				assert.Contains(t, errors.Join(errs...).Error(), tc.wantErr)
				return
			}
			require.Empty(t, errs)
			for i := range tc.want {
				tc.want[i].Page = "page.md"
			}
			assert.Equal(t, tc.want, steps)
		})
	}
}

func TestPageScript_StartsTheStackUnlessThePageDoes(t *testing.T) {
	own := pageScript("p.md", []step{{Page: "p.md", Line: 3, Text: "hack/local-up.sh  # up"}})
	assert.NotContains(t, own, "docs_test_step 'hack/local-up.sh")
	assert.Contains(t, own, "docs_step 'p.md' 3 'hack/local-up.sh  # up'\nhack/local-up.sh  # up\n")
	ours := pageScript("p.md", []step{{Page: "p.md", Line: 3, Text: "kubectl get mm"}})
	assert.Contains(t, ours, "docs_test_step 'hack/local-up.sh   # a fresh stack for this page'\nhack/local-up.sh\n")
	assert.Contains(t, ours, "set -euo pipefail\n")
}

// TestPageScript_RunsLikeAReader runs a script on a stub hack/local-up.sh:
// exports and cd carry over, a watch passes only if it printed and was
// still running, and the failing command is the last one announced.
func TestPageScript_RunsLikeAReader(t *testing.T) {
	watchSeconds = 1
	defer func() { watchSeconds = 5 }()
	run := func(t *testing.T, steps ...step) (string, error) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "hack"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "hack", "local-up.sh"), []byte("#!/bin/sh\necho stack up\n"), 0o755))
		for i := range steps {
			steps[i].Page, steps[i].Line = "p.md", i+10
			steps[i].Watch = watchRE.MatchString(steps[i].Text)
		}
		cmd := exec.Command("bash", "-c", pageScript("p.md", steps))
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run(t, step{Text: "export A=1"}, step{Text: "cd sub"},
		step{Text: `test "$A" = 1 && test "$(basename "$PWD")" = sub`},
		step{Text: "kubectl() { while true; do echo tick; sleep 0.3; done; }; kubectl get mm -w"})
	require.NoError(t, err, out)
	assert.Contains(t, out, "stack up")
	assert.Contains(t, out, "tick\n")
	assert.Contains(t, out, "(stopped after 1s")

	out, err = run(t, step{Text: "kubectl() { echo once; }; kubectl get mm -w"})
	require.Error(t, err)
	assert.Contains(t, out, "p.md:10: the watch ended by itself")

	out, err = run(t, step{Text: "kubectl() { sleep 30; }; kubectl get mm --watch"})
	require.Error(t, err)
	assert.Contains(t, out, "p.md:10: the watch printed nothing")

	out, err = run(t, step{Text: "true"}, step{Text: "false | cat"}, step{Text: "echo never"})
	require.Error(t, err)
	assert.Equal(t, "p.md:11: false | cat", lastStep(out))
	assert.NotContains(t, out, "never")
}
