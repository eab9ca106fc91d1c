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
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	etcd3testing "k8s.io/apiserver/pkg/storage/etcd3/testing"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/value"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/storage/codec"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
)

// NewRESTOptions starts an embedded etcd for the test (stopped when the test
// ends) and returns options that store resource in it, encoded as the
// apiserver encodes it by default: v1alpha1 JSON.
func NewRESTOptions(t *testing.T, resource string) (generic.RESTOptions, *etcd3testing.EtcdTestServer) {
	t.Helper()
	getter := NewRESTOptionsGetter(t)
	opts, err := getter.GetRESTOptions(dockerio.Resource(resource), nil)
	if err != nil {
		t.Fatal(err)
	}
	return opts, getter.Server
}

// RESTOptionsGetter hands out REST options for any resource, all stored in
// one embedded etcd and laid out as the apiserver lays them out
// (/registry/<group>/<resource>/...), as a RESTOptionsGetter of the server does.
type RESTOptionsGetter struct {
	Server *etcd3testing.EtcdTestServer
	config storagebackend.Config
	// Transformer, when set, is the storage transformer of every resource,
	// as encryption at rest configures one.
	Transformer value.Transformer
	// WatchCache puts every store but identities' behind a watch cache,
	// as the apiserver does; otherwise stores read etcd directly.
	WatchCache bool
}

var _ generic.RESTOptionsGetter = &RESTOptionsGetter{}

// RESTOptionsGetterFor lays resources out in the etcd at endpoints exactly
// as the apiserver does with --etcd-servers, so a test can read what a
// running apiserver wrote.
func RESTOptionsGetterFor(endpoints ...string) *RESTOptionsGetter {
	config, err := codec.Config("/registry", codec.DefaultMediaType)
	if err != nil {
		panic(err) // the default media type is always known
	}
	config.Transport.ServerList = endpoints
	return &RESTOptionsGetter{config: *config}
}

// StoredAs makes the getter's resources stored in mediaType, as the
// apiserver's --storage-media-type does; it returns the getter.
func (g *RESTOptionsGetter) StoredAs(mediaType string) *RESTOptionsGetter {
	config, err := codec.Config(g.config.Prefix, mediaType)
	if err != nil {
		panic(err)
	}
	g.config.Codec, g.config.EncodeVersioner = config.Codec, config.EncodeVersioner
	return g
}

// Endpoints are the etcd the getter's resources are stored in.
func (g *RESTOptionsGetter) Endpoints() []string { return g.config.Transport.ServerList }

// NewRESTOptionsGetter starts an embedded etcd for the test, stopped when
// the test ends.
func NewRESTOptionsGetter(t testing.TB) *RESTOptionsGetter {
	t.Helper()
	server, config := etcd3testing.NewUnsecuredEtcd3TestClientServer(t)
	t.Cleanup(func() { server.Terminate(t) })
	getter := RESTOptionsGetterFor(config.Transport.ServerList...)
	getter.Server = server
	return getter
}

// GetRESTOptions implements generic.RESTOptionsGetter.
func (g *RESTOptionsGetter) GetRESTOptions(gr schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	cfg := g.config
	cfg.Transformer = g.Transformer
	decorator := generic.UndecoratedStorage
	if g.WatchCache && identityledger.WatchCached(gr) {
		// As the apiserver's default --watch-cache-sizes: every resource
		// but identities behind a watch cache.
		decorator = genericregistry.StorageWithCacher()
	}
	return generic.RESTOptions{
		StorageConfig:           &storagebackend.ConfigForResource{Config: cfg, GroupResource: gr},
		Decorator:               decorator,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          gr.Group + "/" + gr.Resource,
	}, nil
}
