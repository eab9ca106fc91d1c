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

package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// AgentBinEnv points tests at a prebuilt dockerios-agent; hack/test.sh can
// set it so the suite builds the agent once.
const AgentBinEnv = "DOCKERIOS_AGENT_BIN"

var agentBin = &binary{env: AgentBinEnv, name: "dockerios-agent", pkg: "./agent/cmd/dockerios-agent"}

// AgentBinary returns the real guest agent to run in every simulated guest:
// $DOCKERIOS_AGENT_BIN when set, otherwise one built from this checkout
// (once per test process). The harness runs the very binary that ships in
// the golden images, so what the controller talks to is the real thing.
func AgentBinary(t testing.TB) string {
	t.Helper()
	return agentBin.get(t)
}

// binary is a program of this module, built at most once per test process
// (the same pattern as test/framework's).
type binary struct {
	env, name, pkg string
	once           sync.Once
	path           string
	err            error
}

func (b *binary) get(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(b.env); bin != "" {
		return bin
	}
	b.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			b.err = err
			return
		}
		dir, err := os.MkdirTemp("", "dockerios-harness-bin")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, b.name)
		cmd := exec.Command("go", "build", "-o", b.path, b.pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %v\n%s", b.pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("tests must run inside the DockerIOS module")
	}
	return filepath.Dir(gomod), nil
}
