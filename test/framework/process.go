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
	"os/exec"
	"syscall"
	"time"
)

// stopTimeout bounds how long a process may take to exit after a signal.
// Every server here must stop well within a pod's grace period; one that
// does not is a bug the test reports.
const stopTimeout = time.Minute

// process is one server binary the tests run: its output and whether it
// has exited.
type process struct {
	name   string
	cmd    *exec.Cmd
	output *syncBuffer
	exited chan struct{}
}

// startProcess starts bin with args, collecting its output.
func startProcess(t TB, name, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(bin, args...), output: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	return p
}

// signal sends sig and waits for the process to exit, killing it (and
// failing the test) if it has not within stopTimeout.
func (p *process) signal(t TB, sig syscall.Signal) {
	t.Helper()
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s did not exit within %s of %v", p.name, stopTimeout, sig)
	}
}

// Eventually calls f every 200ms until it returns "" and fails the test
// with f's last complaint if that has not happened within the given time.
func Eventually(t TB, within time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		complaint := f()
		if complaint == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, complaint)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Consistently calls f every 200ms for the given time and fails the test
// with f's complaint the first time it returns one: Eventually's twin, for
// what must stay true.
func Consistently(t TB, within time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if complaint := f(); complaint != "" {
			t.Fatalf("within %s: %s", within, complaint)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// PID is the process's id, to read its resource use from /proc.
func (p *process) PID() int { return p.cmd.Process.Pid }
