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
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// kubectlTimeout bounds one kubectl call; none of ours should take long.
const kubectlTimeout = time.Minute

// Kubectl runs the real kubectl ($KUBECTL, else /usr/bin/kubectl, else the
// one on PATH) against one kubeconfig.
type Kubectl struct {
	Bin        string
	Kubeconfig string
	// Env is added to kubectl's environment, as PATH to find plugins.
	Env []string
	// kubeconfigInEnv passes the kubeconfig as KUBECONFIG rather than as a
	// flag, which kubectl refuses before a plugin's name.
	kubeconfigInEnv bool
}

// WithPlugin returns a kubectl that finds the kubectl-dockerios plugin
// built from this checkout, as a user who installed it on PATH would.
func (k *Kubectl) WithPlugin(t TB) *Kubectl {
	t.Helper()
	plugin := PluginBinary(t)
	withPlugin := *k
	// kubectl does not hand its own flags to a plugin: the plugin finds
	// the cluster through KUBECONFIG, as it does for a user.
	withPlugin.Env = append(append([]string{}, k.Env...),
		"PATH="+filepath.Dir(plugin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+k.Kubeconfig)
	withPlugin.kubeconfigInEnv = true
	return &withPlugin
}

// NewKubectl returns a kubectl for kubeconfig.
func NewKubectl(t TB, kubeconfig string) *Kubectl {
	t.Helper()
	bin := os.Getenv(KubectlBinEnv)
	if bin == "" {
		bin = "/usr/bin/kubectl"
		if _, err := os.Stat(bin); err != nil {
			if bin, err = exec.LookPath("kubectl"); err != nil {
				t.Fatalf("kubectl not found: set %s or install kubectl", KubectlBinEnv)
			}
		}
	}
	return &Kubectl{Bin: bin, Kubeconfig: kubeconfig}
}

// Result is what one kubectl call printed.
type Result struct {
	Stdout, Stderr string
	Err            error
}

// Run runs kubectl with args, feeding it stdin when not empty.
func (k *Kubectl) Run(stdin string, args ...string) Result {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	if !k.kubeconfigInEnv {
		args = append([]string{"--kubeconfig", k.Kubeconfig}, args...)
	}
	cmd := exec.CommandContext(ctx, k.Bin, args...)
	cmd.Env = append(os.Environ(), k.Env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return Result{Stdout: out.String(), Stderr: filterSkewWarning(errOut.String()), Err: err}
}

// MustRun runs kubectl and fails the test unless it succeeds.
func (k *Kubectl) MustRun(t TB, stdin string, args ...string) string {
	t.Helper()
	r := k.Run(stdin, args...)
	if r.Err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.Err, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// Stream starts a long-running kubectl (such as get --watch) and delivers
// its output line by line. It is stopped when the test ends.
func (k *Kubectl) Stream(t TB, args ...string) <-chan string {
	t.Helper()
	cmd := exec.Command(k.Bin, append([]string{"--kubeconfig", k.Kubeconfig}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting kubectl %s: %v", strings.Join(args, " "), err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return lines
}

// filterSkewWarning drops kubectl's warning about its version being older
// than the server's, which every call against a newer server prints.
func filterSkewWarning(stderr string) string {
	var kept []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "version difference between client") || strings.Contains(line, "exceeds the supported minor version skew") {
			continue
		}
		kept = append(kept, line)
	}
	return strings.Join(kept, "\n")
}
