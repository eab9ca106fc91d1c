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
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	"github.com/dockerios/dockerios/test/framework"
)

// TestEtcdServers_ObjectsAreStoredInTheGivenEtcd points the apiserver at an
// etcd of its own (--etcd-servers) and reads the stored object straight out
// of that etcd.
func TestEtcdServers_ObjectsAreStoredInTheGivenEtcd(t *testing.T) {
	etcdDir := t.TempDir()
	etcd, err := embeddedetcd.Start(filepath.Join(etcdDir, "data"), os.Stderr)
	require.NoError(t, err)
	t.Cleanup(etcd.Stop)

	dataDir := t.TempDir()
	s := framework.StartLocalServer(t, dataDir, "--etcd-servers", etcd.ClientURL)
	k := framework.NewKubectl(t, s.Kubeconfig)
	createClassAndPool(t, s)
	k.MustRun(t, "", "create", "-f", filepath.Join(examplesDir(t), "04-machine.yaml"))
	uid := k.MustRun(t, "", "get", "mm", "mac-1", "-o", "jsonpath={.metadata.uid}")

	client, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.ClientURL}, DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.Get(ctx, "/registry/dockerios.io/macosmachines/default/mac-1")
	require.NoError(t, err)

	require.Len(t, resp.Kvs, 1, "the machine is stored under the documented key")

	var stored struct {
		APIVersion string `json:"apiVersion"`
		Metadata   struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(resp.Kvs[0].Value, &stored))
	assert.Equal(t, "dockerios.io/v1alpha1", stored.APIVersion, "stored as v1alpha1 JSON")
	assert.Equal(t, uid, stored.Metadata.UID)

	_, err = os.Stat(filepath.Join(dataDir, "etcd"))
	assert.True(t, os.IsNotExist(err), "no embedded etcd is started when --etcd-servers is given")
}

// TestOpenAPI_BothVersionsDescribeEveryKind checks the documents kubectl
// explain and server-side apply read.
func TestOpenAPI_BothVersionsDescribeEveryKind(t *testing.T) {
	s := framework.StartLocalServer(t, t.TempDir())
	k := framework.NewKubectl(t, s.Kubeconfig)
	kinds := []string{"MacOSMachineClass", "MacOSImage", "MacOSIdentityPool", "MacOSIdentity", "MacOSMachine", "MacOSMachinePool", "MacOSMachineClaim"}

	var v2 struct {
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(k.MustRun(t, "", "get", "--raw", "/openapi/v2")), &v2))
	for _, kind := range kinds {
		assert.Contains(t, v2.Definitions, "io.dockerios.v1alpha1."+kind)
	}
	assert.Contains(t, v2.Definitions, "io.k8s.api.autoscaling.v1.Scale")

	var v3 struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal([]byte(k.MustRun(t, "", "get", "--raw", "/openapi/v3/apis/dockerios.io/v1alpha1")), &v3))
	for _, kind := range kinds {
		assert.Contains(t, v3.Components.Schemas, "io.dockerios.v1alpha1."+kind)
	}
}
