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

// Package registrytest gives registry tests what the apiserver gives the
// registries: REST options backed by a real etcd, with the server's own
// storage codec. It is imported by tests only.
package registrytest

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	etcd3testing "k8s.io/apiserver/pkg/storage/etcd3/testing"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/apiserver/scheme"
)

// NewRESTOptions starts an embedded etcd for the test (stopped when the test
// ends) and returns options that store resource in it, encoded as the
// apiserver encodes it: v1alpha1 JSON.
func NewRESTOptions(t *testing.T, resource string) (generic.RESTOptions, *etcd3testing.EtcdTestServer) {
	t.Helper()
	server, config := etcd3testing.NewUnsecuredEtcd3TestClientServer(t)
	t.Cleanup(func() { server.Terminate(t) })
	config.Codec = scheme.Codecs.LegacyCodec(v1alpha1.SchemeGroupVersion)
	config.EncodeVersioner = runtime.NewMultiGroupVersioner(v1alpha1.SchemeGroupVersion, schema.GroupKind{Group: dockerio.GroupName})
	return generic.RESTOptions{
		StorageConfig:           &storagebackend.ConfigForResource{Config: *config, GroupResource: dockerio.Resource(resource)},
		Decorator:               generic.UndecoratedStorage,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          resource,
	}, server
}
