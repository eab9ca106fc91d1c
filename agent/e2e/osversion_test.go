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

package e2e

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dockerios/dockerios/agent/api"
)

// The agent reports the OS version its osVersionCommand prints, read once
// at start: a later change of what the command prints is not seen until
// the agent starts again (the OS does not change under a running agent).
func TestAgent_ReportsTheOSVersionReadAtStart(t *testing.T) {
	dir := t.TempDir()
	versionFile := filepath.Join(dir, "version")
	mustWrite(t, versionFile, "14.6.1\n")
	a := startAgent(t, `
listen: "%ADDR%"
token:
  file: "%TOKENFILE%"
pollInterval: 150ms
disk:
  path: /
  floor: 0
osVersionCommand: ["/bin/cat", "`+versionFile+`"]
`)
	c := a.client(t, testToken)
	st := a.waitFor(t, c, "a status", func(*api.Status) bool { return true })
	if st.OSVersion != "14.6.1" {
		t.Fatalf("osVersion %q, want 14.6.1\n%s", st.OSVersion, a.logs())
	}
	mustWrite(t, versionFile, "15.0\n")
	later := a.waitFor(t, c, "a later poll", func(s *api.Status) bool { return s.ObservedAt.After(st.ObservedAt) })
	if later.OSVersion != "14.6.1" {
		t.Errorf("osVersion %q after the command's output changed; it is read once, at start", later.OSVersion)
	}
}

// Off macOS, with no osVersionCommand, nothing is reported; a command that
// fails leaves the version empty and the agent serving, and says why in its
// log.
func TestAgent_OSVersionUnknownIsEmpty(t *testing.T) {
	if runtime.GOOS == "darwin" {
		t.Skip("sw_vers answers on macOS")
	}
	for name, extra := range map[string]string{
		"no command":        "",
		"a failing command": `osVersionCommand: ["/bin/sh", "-c", "exit 1"]`,
	} {
		t.Run(name, func(t *testing.T) {
			a := startAgent(t, `
listen: "%ADDR%"
token:
  file: "%TOKENFILE%"
pollInterval: 150ms
disk:
  path: /
  floor: 0
`+extra+"\n")
			st := a.waitFor(t, a.client(t, testToken), "a status", func(*api.Status) bool { return true })
			if st.OSVersion != "" {
				t.Errorf("osVersion %q, want none", st.OSVersion)
			}
			if extra != "" && !strings.Contains(a.logs(), "OS version unavailable") {
				t.Errorf("the log does not say why:\n%s", a.logs())
			}
		})
	}
}
