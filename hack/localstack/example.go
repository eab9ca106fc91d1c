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

package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/dockerios/dockerios/test/framework"
)

// The workload-layer example (examples/gitlab-runner) on the local stack:
// its controller and a fake GitLab run as processes beside the stack, so
// that `kubectl apply -f examples/gitlab-runner/deploy/` registers runners
// on the played guests. The stack knows only how to start them; what a
// GitLab runner is stays in the example.
const (
	// exampleSSHUser and exampleSSHPassword are the played golden image's
	// login: what examples/gitlab-runner/deploy/04-secrets.yaml holds. A
	// dummy, accepted by nothing but these played guests.
	exampleSSHUser     = "runner"
	exampleSSHPassword = "local-stack-dummy-password"
	// exampleGitLabAddr is where the fake GitLab listens (the sample's
	// spec.gitlab.url), and exampleGitLabToken the access token it takes
	// (deploy/04-secrets.yaml's gitlab-token).
	exampleGitLabAddr  = "127.0.0.1:8929"
	exampleGitLabToken = "glpat-local-stack-dummy-token"
	exampleCRD         = "examples/gitlab-runner/deploy/01-crd.yaml"
)

// exampleStack is what startExample started, or why it could not.
type exampleStack struct {
	controllerLog, gitlabLog string
	healthURL                string
	// pids are the processes started, by name.
	pids map[string]int
	err  error
}

// startExample starts the fake GitLab and the example's controller (both
// built into bin/ by hack/local-up.sh), with the GitLabRunner CRD
// installed first: the controller needs it to start, and with it in place
// a single `kubectl apply -f examples/gitlab-runner/deploy/` (CRD and
// GitLabRunner together) works, which it does not on a cluster without
// the CRD (kubectl maps every object before it creates any).
func startExample(t *stackTB, root string, cp *framework.ControlPlane, stateDir string) (*exampleStack, error) {
	controller := filepath.Join(root, "bin", "gitlab-runner-controller")
	fakeGitLab := filepath.Join(root, "bin", "fake-gitlab")
	for _, bin := range []string{controller, fakeGitLab} {
		if !isFile(bin) {
			return nil, fmt.Errorf("%s is missing: hack/local-up.sh builds it (or pass --no-example)", bin)
		}
	}
	k := framework.NewKubectl(t, cp.AdminKubeconfig)
	crd := filepath.Join(root, exampleCRD)
	if r := k.Run("", "apply", "-f", crd); r.Err != nil {
		return nil, fmt.Errorf("installing the GitLabRunner CRD: %v: %s", r.Err, r.Stderr)
	}
	if r := k.Run("", "wait", "--for=condition=Established", "-f", crd, "--timeout=60s"); r.Err != nil {
		return nil, fmt.Errorf("the GitLabRunner CRD is not Established: %v: %s", r.Err, r.Stderr)
	}

	ex := &exampleStack{
		controllerLog: filepath.Join(stateDir, "gitlab-runner-controller.log"),
		gitlabLog:     filepath.Join(stateDir, "fake-gitlab.log"),
		pids:          map[string]int{},
	}
	if err := startLogged(t, ex.pids, "fake-gitlab", ex.gitlabLog, fakeGitLab, "--listen="+exampleGitLabAddr, "--token="+exampleGitLabToken); err != nil {
		return nil, err
	}
	if err := waitHTTP("http://"+exampleGitLabAddr+"/api/v4/runners/all", http.StatusUnauthorized); err != nil {
		return nil, fmt.Errorf("the fake GitLab (log %s): %w", ex.gitlabLog, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ex.healthURL = "http://127.0.0.1:" + strconv.Itoa(port)
	// The admin's kubeconfig: in a cluster the controller runs as the
	// ServiceAccount deploy/ makes, which does not exist until the user
	// applies it (the example's e2e test runs it that way).
	if err := startLogged(t, ex.pids, "gitlab-runner-controller", ex.controllerLog, controller, "--kubeconfig="+cp.AdminKubeconfig,
		"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(port)); err != nil {
		return nil, err
	}
	if err := waitHTTP(ex.healthURL+"/readyz", http.StatusOK); err != nil {
		return nil, fmt.Errorf("gitlab-runner-controller (log %s): %w", ex.controllerLog, err)
	}
	return ex, nil
}

// startLogged starts bin with its output appended to logPath, stopped
// (SIGTERM, then SIGKILL) by the stack's cleanup and killed with the
// stack should that die first, and records its pid in pids under name.
func startLogged(t *stackTB, pids map[string]int, name, logPath, bin string, args ...string) error {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(exited) }()
	t.Cleanup(func() {
		t.Logf("stopping %s ...", name)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("%s did not stop within 30s of SIGTERM", name)
		}
	})
	pids[name] = cmd.Process.Pid
	t.Logf("%s started (pid %d, log %s)", name, cmd.Process.Pid, logPath)
	return nil
}

// waitHTTP waits up to a minute for url to answer with status.
func waitHTTP(url string, status int) error {
	deadline := time.Now().Add(time.Minute)
	last := errors.New("no answer")
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == status {
				return nil
			}
			last = fmt.Errorf("%s answered %s", url, resp.Status)
		} else {
			last = err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return last
}
