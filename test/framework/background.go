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

package framework

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Background is a kubectl call running while the test goes on, such as
// kubectl dockerios claim waiting for a machine the test is about to make
// Ready.
type Background struct {
	stdout, stderr *syncBuffer
	done           chan error
}

// Start runs kubectl with args in the background, as Run would, and
// returns at once. It is killed when the test ends, should it still run.
func (k *Kubectl) Start(t TB, args ...string) *Background {
	t.Helper()
	if !k.kubeconfigInEnv {
		args = append([]string{"--kubeconfig", k.Kubeconfig}, args...)
	}
	cmd := exec.Command(k.Bin, args...)
	cmd.Env = append(os.Environ(), k.Env...)
	b := &Background{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = b.stdout, b.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting kubectl %s: %v", strings.Join(args, " "), err)
	}
	exited := make(chan struct{})
	go func() {
		b.done <- cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return b
}

// Stdout is what the call has printed on stdout so far.
func (b *Background) Stdout() string { return b.stdout.String() }

// Stderr is what the call has printed on stderr so far, without kubectl's
// version skew warning.
func (b *Background) Stderr() string { return filterSkewWarning(b.stderr.String()) }

// AwaitStderr waits until the call has printed s on stderr.
func (b *Background) AwaitStderr(t TB, s string, within time.Duration) {
	t.Helper()
	Eventually(t, within, func() string {
		if !strings.Contains(b.Stderr(), s) {
			return fmt.Sprintf("kubectl has not said %q; stderr:\n%s", s, b.Stderr())
		}
		return ""
	})
}

// Wait waits for the call to exit and returns how it did, as Run's Err.
func (b *Background) Wait(t TB, within time.Duration) error {
	t.Helper()
	select {
	case err := <-b.done:
		b.done <- err
		return err
	case <-time.After(within):
		t.Fatalf("kubectl still runs after %s; stdout:\n%s\nstderr:\n%s", within, b.Stdout(), b.Stderr())
		return nil
	}
}
