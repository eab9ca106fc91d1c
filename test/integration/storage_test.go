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
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	"github.com/dockerios/dockerios/pkg/scheme"
	"github.com/dockerios/dockerios/test/framework"
)

// TestEtcdServers_ObjectsAreStoredInTheGivenEtcd points the apiserver at an
// etcd of its own (--etcd-servers) and reads the stored object straight out
// of that etcd: v1alpha1 JSON, the default --storage-media-type.
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

	m, gvk := decodeStored(t, storedMachine(t, etcd.ClientURL, "mac-1"), runtime.ContentTypeJSON)
	assert.Equal(t, "dockerios.io/v1alpha1, Kind=MacOSMachine", gvk.String(), "stored as v1alpha1")
	assert.Equal(t, uid, string(m.UID))

	_, err = os.Stat(filepath.Join(dataDir, "etcd"))
	assert.True(t, os.IsNotExist(err), "no embedded etcd is started when --etcd-servers is given")
}

// TestStorageMediaType_WhateverOneWritesTheOtherReads: an apiserver reads
// objects in either media type --storage-media-type offers, whichever it
// writes, and rewrites each in its own the next time it changes. It is
// what lets the default become protobuf in a later release: a rollback to
// this one, or a replica of this one still running in a rolling upgrade,
// reads what the later one wrote.
func TestStorageMediaType_WhateverOneWritesTheOtherReads(t *testing.T) {
	etcd, err := embeddedetcd.Start(filepath.Join(t.TempDir(), "data"), os.Stderr)
	require.NoError(t, err)
	t.Cleanup(etcd.Stop)
	machine := func(name string) string {
		return "apiVersion: dockerios.io/v1alpha1\nkind: MacOSMachine\nmetadata: {name: " + name + ", namespace: default}\nspec: {className: standard}\n"
	}
	protobufArgs := []string{"--etcd-servers", etcd.ClientURL, "--storage-media-type", runtime.ContentTypeProtobuf}

	first := framework.StartLocalServer(t, t.TempDir(), protobufArgs...)
	k := framework.NewKubectl(t, first.Kubeconfig)
	createClassAndPool(t, first)
	k.MustRun(t, machine("mac-1"), "create", "-f", "-")
	k.MustRun(t, "", "label", "mm", "mac-1", "written=protobuf")
	uid1 := k.MustRun(t, "", "get", "mm", "mac-1", "-o", "jsonpath={.metadata.uid}")
	m, _ := decodeStored(t, storedMachine(t, etcd.ClientURL, "mac-1"), runtime.ContentTypeProtobuf)
	assert.Equal(t, uid1, string(m.UID))
	first.Stop(t)

	// The default, JSON, reads protobuf: mac-1 beside mac-2, which it
	// writes in JSON.
	second := framework.StartLocalServer(t, t.TempDir(), "--etcd-servers", etcd.ClientURL)
	k = framework.NewKubectl(t, second.Kubeconfig)
	k.MustRun(t, machine("mac-2"), "create", "-f", "-")
	uid2 := k.MustRun(t, "", "get", "mm", "mac-2", "-o", "jsonpath={.metadata.uid}")
	assert.Equal(t, "mac-1="+uid1+"/protobuf mac-2="+uid2+"/ ",
		k.MustRun(t, "", "get", "mm", "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.uid}/{.metadata.labels.written} {end}`),
		"both listed, as written")
	assert.Equal(t, uid1, k.MustRun(t, "", "get", "mm", "mac-1", "-o", "jsonpath={.metadata.uid}"))
	decodeStored(t, storedMachine(t, etcd.ClientURL, "mac-1"), runtime.ContentTypeProtobuf) // reading rewrote nothing
	k.MustRun(t, "", "label", "mm", "mac-1", "--overwrite", "written=json")
	m, _ = decodeStored(t, storedMachine(t, etcd.ClientURL, "mac-1"), runtime.ContentTypeJSON)
	assert.Equal(t, "json", m.Labels["written"], "rewritten in JSON by its next write")
	second.Stop(t)

	// And protobuf reads JSON.
	third := framework.StartLocalServer(t, t.TempDir(), protobufArgs...)
	k = framework.NewKubectl(t, third.Kubeconfig)
	assert.Equal(t, uid2, k.MustRun(t, "", "get", "mm", "mac-2", "-o", "jsonpath={.metadata.uid}"))
	k.MustRun(t, "", "label", "mm", "mac-2", "written=protobuf")
	m, _ = decodeStored(t, storedMachine(t, etcd.ClientURL, "mac-2"), runtime.ContentTypeProtobuf)
	assert.Equal(t, uid2, string(m.UID))
	assert.Equal(t, "protobuf", m.Labels["written"])
}

// storedMachine returns the bytes etcd holds for the machine name of the
// default namespace.
func storedMachine(t *testing.T, endpoint, name string) []byte {
	t.Helper()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.Get(ctx, "/registry/dockerios.io/macosmachines/default/"+name)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "the machine is stored under the documented key")
	return resp.Kvs[0].Value
}

// decodeStored decodes a machine stored in mediaType, without conversion:
// what was written, and the kind and version it was written as. It fails
// the test when the bytes are in another media type.
func decodeStored(t *testing.T, stored []byte, mediaType string) (*v1alpha1.MacOSMachine, *schema.GroupVersionKind) {
	t.Helper()
	var s runtime.Decoder = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	if mediaType == runtime.ContentTypeJSON {
		require.True(t, bytes.HasPrefix(stored, []byte("{")), "stored as JSON: %q", stored)
		s = k8sjson.NewSerializerWithOptions(k8sjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, k8sjson.SerializerOptions{})
	} else {
		require.True(t, bytes.HasPrefix(stored, []byte("k8s\x00")), "stored as protobuf: %q", stored)
	}
	m := &v1alpha1.MacOSMachine{}
	_, gvk, err := s.Decode(stored, nil, m)
	require.NoError(t, err)
	return m, gvk
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
