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
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/dockerios/dockerios/pkg/localpki"
)

// Behind kube-apiserver, the server's authenticator verifies the front
// proxy's certificate chain once (pkg/authn), and its etcd watches decode
// events in the watch's own goroutine.
func TestConfig_BehindKubeAPIServer(t *testing.T) {
	dir := t.TempDir()
	bundle, err := localpki.Ensure(filepath.Join(dir, "pki"), []string{"localhost"}, time.Now())
	require.NoError(t, err)
	caFile := bundle.CACert

	o := NewOptions(io.Discard, io.Discard)
	ro := o.RecommendedOptions
	ro.SecureServing.BindPort = 0 // no listener
	ro.SecureServing.ServerCert.CertDirectory = filepath.Join(dir, "serving")
	ro.Etcd.StorageConfig.Transport.ServerList = []string{"http://127.0.0.1:1"}
	// What the extension-apiserver-authentication ConfigMap would say,
	// from flags, so no kube-apiserver is needed.
	ro.Authentication.RemoteKubeConfigFileOptional = true
	ro.Authentication.SkipInClusterLookup = true
	ro.Authentication.RequestHeader.ClientCAFile = caFile
	ro.Authentication.RequestHeader.UsernameHeaders = []string{"X-Remote-User"}
	ro.Authentication.RequestHeader.AllowedNames = []string{"front-proxy-client"}
	ro.Authorization.RemoteKubeConfigFileOptional = true
	ro.CoreAPI, ro.Admission = nil, nil
	ro.Features.EnablePriorityAndFairness = false

	cfg, err := o.Config()
	require.NoError(t, err)
	assert.Equal(t, "*authn.frontProxy", fmt.Sprintf("%T", cfg.GenericConfig.Authentication.Authenticator))
	assert.False(t, utilfeature.DefaultFeatureGate.Enabled(features.ConcurrentWatchObjectDecode))
}
