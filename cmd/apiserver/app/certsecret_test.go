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

package app

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	netutils "k8s.io/utils/net"

	"github.com/dockerios/dockerios/pkg/localpki"
)

func TestOptions_ValidateCertSecret(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // "" means valid
	}{
		{"neither: the self-signed --cert-dir as before", nil, ""},
		{"a Secret, a Service and an APIService", []string{"--cert-secret=dockerios-system/dockerios-apiserver-tls", "--service=dockerios-system/dockerios-apiserver", "--apiservice=v1alpha1.dockerios.io"}, ""},
		{"a Secret without its namespace", []string{"--cert-secret=dockerios-apiserver-tls"}, `--cert-secret: "dockerios-apiserver-tls" is not NAMESPACE/NAME`},
		{"a Service without its namespace", []string{"--cert-secret=ns/tls", "--service=dockerios-apiserver"}, `--service: "dockerios-apiserver" is not NAMESPACE/NAME`},
		{"a Secret and certificate files", []string{"--cert-secret=ns/tls", "--tls-cert-file=/tls.crt", "--tls-private-key-file=/tls.key"}, "choose one source of the serving certificate"},
		{"a Secret in local mode", []string{"--cert-secret=ns/tls", "--local"}, "--cert-secret: not with --local"},
		{"an APIService without a Secret", []string{"--apiservice=v1alpha1.dockerios.io"}, "--apiservice: needs --cert-secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions(io.Discard, io.Discard)
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			require.NoError(t, fs.Parse(tc.args))
			o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList = []string{"http://127.0.0.1:1"}

			err := o.Validate()

			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// With --cert-secret, secure serving takes its key pair from the Secret's
// keeper, in memory, and nothing is generated into --cert-dir.
func TestConfig_CertSecretServesFromMemory(t *testing.T) {
	dir := t.TempDir()
	bundle, err := localpki.Ensure(filepath.Join(dir, "pki"), []string{"localhost"}, time.Now())
	require.NoError(t, err)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c}}]\ncurrent-context: c\n"), 0o600))

	o := NewOptions(io.Discard, io.Discard)
	o.CertSecret, o.APIServices = "dockerios-system/dockerios-apiserver-tls", []string{"v1alpha1.dockerios.io"}
	ro := o.RecommendedOptions
	ro.SecureServing.BindAddress = netutils.ParseIPSloppy("127.0.0.1")
	ro.SecureServing.Listener, ro.SecureServing.BindPort, err = genericoptions.CreateListener("tcp", "127.0.0.1:0", net.ListenConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { ro.SecureServing.Listener.Close() })
	ro.SecureServing.ServerCert.CertDirectory = filepath.Join(dir, "serving")
	ro.Etcd.StorageConfig.Transport.ServerList = []string{"http://127.0.0.1:1"}
	ro.CoreAPI.CoreAPIKubeconfigPath = kubeconfig
	ro.Authentication.RemoteKubeConfigFileOptional = true
	ro.Authentication.SkipInClusterLookup = true
	ro.Authentication.RequestHeader.ClientCAFile = bundle.CACert
	ro.Authentication.RequestHeader.UsernameHeaders = []string{"X-Remote-User"}
	ro.Authorization.RemoteKubeConfigFileOptional = true
	ro.Admission = nil
	ro.Features.EnablePriorityAndFairness = false
	require.NoError(t, o.Validate())

	cfg, err := o.Config()

	require.NoError(t, err)
	require.NotNil(t, o.selfCert)
	assert.Same(t, o.selfCert, cfg.GenericConfig.SecureServing.Cert, "the Secret's keeper is the serving certificate")
	assert.NoDirExists(t, ro.SecureServing.ServerCert.CertDirectory, "nothing self-signed is written")
}
