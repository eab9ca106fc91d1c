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
	"runtime"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/dockerios/dockerios/pkg/localpki"
	"github.com/dockerios/dockerios/pkg/version"
)

// Behind kube-apiserver, the server's authenticator verifies the front
// proxy's certificate chain once (pkg/authn), and its etcd watches decode
// events in the watch's own goroutine.
func TestConfig_BehindKubeAPIServer(t *testing.T) {
	cfg, err := behindKubeAPIServer(t).Config()
	require.NoError(t, err)
	assert.Equal(t, "*authn.frontProxy", fmt.Sprintf("%T", cfg.GenericConfig.Authentication.Authenticator))
	assert.False(t, utilfeature.DefaultFeatureGate.Enabled(features.ConcurrentWatchObjectDecode))
}

// The authorizer keeps answers itself (authz.Fresh) for the TTLs the
// webhook cache flags give, and the options still say those TTLs after.
func TestConfig_AuthorizationAnsweredAhead(t *testing.T) {
	o := behindKubeAPIServer(t)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--authorization-webhook-cache-authorized-ttl=20s", "--authorization-webhook-cache-refresh-window=2m"}))
	cfg, err := o.Config()
	require.NoError(t, err)
	assert.Equal(t, "*authz.Fresh", fmt.Sprintf("%T", cfg.GenericConfig.Authorization.Authorizer))
	assert.Equal(t, 20*time.Second, o.RecommendedOptions.Authorization.AllowCacheTTL)
	assert.Equal(t, 10*time.Second, o.RecommendedOptions.Authorization.DenyCacheTTL)
	assert.Equal(t, 2*time.Minute, o.AuthorizationRefreshWindow)

	o = NewOptions(io.Discard, io.Discard)
	fs = pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--authorization-webhook-cache-refresh-window=-1s"}))
	o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList = []string{"http://127.0.0.1:1"}
	assert.ErrorContains(t, o.Validate(), "--authorization-webhook-cache-refresh-window must not be negative")
}

// /version says which DockerIOS runs, while the API and the feature gates
// still emulate the Kubernetes version of the libraries built in.
func TestConfig_VersionIsDockerIOSsAndEmulationStaysKubernetes(t *testing.T) {
	cfg, err := behindKubeAPIServer(t).Config()
	require.NoError(t, err)

	ev := cfg.GenericConfig.EffectiveVersion
	info := ev.Info() // what the generic apiserver serves at /version
	assert.Equal(t, version.Get().GitVersion, info.GitVersion)
	assert.Equal(t, version.Get().GitCommit, info.GitCommit)
	assert.Equal(t, version.Get().BuildDate, info.BuildDate)
	assert.Equal(t, runtime.Version(), info.GoVersion)
	assert.Equal(t, runtime.GOOS+"/"+runtime.GOARCH, info.Platform)
	assert.Empty(t, info.EmulationMajor)

	kube := compatibility.DefaultBuildEffectiveVersion()
	assert.True(t, ev.BinaryVersion().EqualTo(kube.BinaryVersion()), "binary version %s, want Kubernetes' %s", ev.BinaryVersion(), kube.BinaryVersion())
	assert.True(t, ev.EmulationVersion().EqualTo(kube.EmulationVersion()), "emulation version %s, want Kubernetes' %s", ev.EmulationVersion(), kube.EmulationVersion())
	assert.Empty(t, ev.Validate())
}

// behindKubeAPIServer is the options of a server behind kube-apiserver,
// with what the extension-apiserver-authentication ConfigMap would say
// given as flags, so no kube-apiserver is needed to build its config.
func behindKubeAPIServer(t *testing.T) *Options {
	t.Helper()
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
	return o
}

// The shutdown flags reach the generic apiserver's config: by default
// the server stops at once and answers late requests 429 with
// Retry-After; --shutdown-delay-duration keeps it serving, not ready,
// for a while first.
func TestConfig_ShutdownFlags(t *testing.T) {
	o := behindKubeAPIServer(t)
	cfg, err := o.Config()
	require.NoError(t, err)
	assert.Zero(t, cfg.GenericConfig.ShutdownDelayDuration)
	assert.True(t, cfg.GenericConfig.ShutdownSendRetryAfter)
	assert.Zero(t, cfg.GenericConfig.ShutdownWatchTerminationGracePeriod)

	o = behindKubeAPIServer(t)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--shutdown-delay-duration=7s", "--shutdown-send-retry-after=false", "--shutdown-watch-termination-grace-period=3s"}))
	require.NoError(t, o.Validate())
	cfg, err = o.Config()
	require.NoError(t, err)
	assert.Equal(t, 7*time.Second, cfg.GenericConfig.ShutdownDelayDuration)
	assert.False(t, cfg.GenericConfig.ShutdownSendRetryAfter)
	assert.Equal(t, 3*time.Second, cfg.GenericConfig.ShutdownWatchTerminationGracePeriod)

	o = behindKubeAPIServer(t)
	o.Shutdown.Delay = -time.Second
	assert.ErrorContains(t, o.Validate(), "--shutdown-delay-duration must not be negative")
}

// --gc-heap-floor is a quantity, 128Mi by default; a bad one is refused by
// name before the server starts.
func TestConfig_GCHeapFloor(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    uint64
		wantErr string
	}{
		{args: nil, want: 128 << 20},
		{args: []string{"--gc-heap-floor=1Gi"}, want: 1 << 30},
		{args: []string{"--gc-heap-floor=0"}, want: 0},
		{args: []string{"--gc-heap-floor=lots"}, wantErr: `--gc-heap-floor "lots"`},
		{args: []string{"--gc-heap-floor=-1Mi"}, wantErr: "--gc-heap-floor must not be negative"},
	} {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			o := behindKubeAPIServer(t)
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			require.NoError(t, fs.Parse(tc.args))
			got, err := o.gcHeapFloorBytes()
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				assert.ErrorContains(t, o.Validate(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
