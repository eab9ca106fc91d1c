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

package checks

import (
	"context"
	"os/exec"
	"strings"
	"time"

	"github.com/dockerios/dockerios/agent/config"
)

// waitDelay bounds how long Wait lingers for output pipes after the
// process has exited or been killed; a grandchild that escaped the process
// group may still hold them.
const waitDelay = 2 * time.Second

func runCommand(ctx context.Context, c config.Check) (bool, string) {
	cmd := exec.CommandContext(ctx, c.Command[0], c.Command[1:]...)
	cmd.Dir = "/"
	out := &tail{max: maxMessage}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = waitDelay
	// A check is often a shell script; killing only the shell would leave
	// its children running, so the command gets its own process group and
	// the whole group is killed at the deadline.
	setProcessGroup(cmd)
	err := cmd.Run()
	if ctx.Err() != nil {
		return false, timeoutMessage(c)
	}
	detail := strings.TrimSpace(out.String())
	if err != nil {
		if detail != "" {
			return false, err.Error() + ": " + detail
		}
		return false, err.Error()
	}
	if detail != "" {
		return true, "exit status 0: " + detail
	}
	return true, "exit status 0"
}

// tail keeps the last max bytes written, where failures usually explain
// themselves.
type tail struct {
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > t.max {
		p = p[len(p)-t.max:]
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tail) String() string { return string(t.buf) }
