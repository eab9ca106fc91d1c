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

package integration

import (
	"os/exec"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dockerios/dockerios/pkg/version/versiontest"
	"github.com/dockerios/dockerios/test/framework"
)

// Every binary of this module prints the version the build stamped with
// --version, exits 0, and needs nothing else: no kubeconfig, no config
// file, no cluster. (The bootdisk builder and the gitlab-runner example,
// modules of their own, test theirs.)
func TestVersionFlag_EveryBinaryPrintsTheStampedVersion(t *testing.T) {
	for _, pkg := range []string{
		"github.com/dockerios/dockerios/cmd/apiserver",
		"github.com/dockerios/dockerios/cmd/controller",
		"github.com/dockerios/dockerios/cmd/kubectl-dockerios",
		"github.com/dockerios/dockerios/agent/cmd/dockerios-agent",
		"github.com/dockerios/dockerios/sidecar-hook/cmd/dockerios-sidecar-hook",
	} {
		t.Run(pkg, func(t *testing.T) {
			bin := versiontest.Build(t, pkg, versiontest.Stamp)
			cmd := exec.Command(bin, "--version")
			cmd.Dir = t.TempDir()
			cmd.Env = []string{"HOME=" + cmd.Dir, "KUBECONFIG=/nonexistent"}
			out, err := cmd.Output()
			require.NoError(t, err, "--version: %s", out)
			assert.Equal(t, versiontest.Stamp+"\n", string(out))
		})
	}
}

// The apiserver's /version says which DockerIOS serves (the version the
// build stamped), not the version of the Kubernetes libraries in it.
func TestVersionEndpoint_IsDockerIOSs(t *testing.T) {
	bin := versiontest.Build(t, "github.com/dockerios/dockerios/cmd/apiserver", versiontest.Stamp)
	s := framework.StartLocalServerBinary(t, bin, t.TempDir())
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	require.NoError(t, err)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	info, err := client.Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, versiontest.Stamp, info.GitVersion)
	assert.Equal(t, "9", info.Major)
	assert.Equal(t, "8", info.Minor)
	assert.Equal(t, runtime.Version(), info.GoVersion, "built by this test's toolchain")
	assert.Equal(t, runtime.GOOS+"/"+runtime.GOARCH, info.Platform)
	assert.Empty(t, info.EmulationMajor, "Kubernetes' emulation version is not DockerIOS's")

	// The API itself is unchanged: the Kubernetes emulation version still
	// decides what is served.
	_, err = client.Discovery().ServerResourcesForGroupVersion("dockerios.io/v1alpha1")
	require.NoError(t, err)
}
