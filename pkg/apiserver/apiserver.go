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

// Package apiserver builds the DockerIOS API server from a generic server
// config: it installs the dockerios.io group and its resources. It owns
// nothing else — options and flags are in cmd/apiserver, rules per resource
// in pkg/registry.
package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	restclient "k8s.io/client-go/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	identitystorage "github.com/dockerios/dockerios/pkg/registry/macosidentity/storage"
	identitypoolstorage "github.com/dockerios/dockerios/pkg/registry/macosidentitypool/storage"
	imagestorage "github.com/dockerios/dockerios/pkg/registry/macosimage/storage"
	machinestorage "github.com/dockerios/dockerios/pkg/registry/macosmachine/storage"
	claimstorage "github.com/dockerios/dockerios/pkg/registry/macosmachineclaim/storage"
	classstorage "github.com/dockerios/dockerios/pkg/registry/macosmachineclass/storage"
	poolstorage "github.com/dockerios/dockerios/pkg/registry/macosmachinepool/storage"
	"github.com/dockerios/dockerios/pkg/scheme"
	"github.com/dockerios/dockerios/pkg/storage/binding"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// Config is the generic server config plus what DockerIOS adds to it.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	// IdentityRepairInterval is how often the identity ledger is audited
	// and repaired; 0 means DefaultIdentityRepairInterval.
	IdentityRepairInterval time.Duration
}

// DefaultIdentityRepairInterval is how often the ledger is audited unless
// told otherwise; also once at start.
const DefaultIdentityRepairInterval = 3 * time.Minute

// CompletedConfig is a Config with every default filled in.
type CompletedConfig struct {
	GenericConfig genericapiserver.CompletedConfig
	// CoreAPI reaches kube-apiserver's core API, where Events go; nil in
	// the standalone local mode.
	CoreAPI                *restclient.Config
	IdentityRepairInterval time.Duration
}

// Server is the DockerIOS API server.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

// Complete fills in the defaults of the generic config.
func (c *Config) Complete() CompletedConfig {
	interval := c.IdentityRepairInterval
	if interval <= 0 {
		interval = DefaultIdentityRepairInterval
	}
	return CompletedConfig{GenericConfig: c.GenericConfig.Complete(), CoreAPI: c.GenericConfig.ClientConfig, IdentityRepairInterval: interval}
}

// New returns a server serving dockerios.io/v1alpha1 from the configured storage.
func (c CompletedConfig) New() (*Server, error) {
	// The group offers protobuf (below) only as far as this filter lets
	// clients have it: for objects' metadata. Each request's goroutines
	// grow their stacks first (see stack.go).
	build := c.GenericConfig.BuildHandlerChainFunc
	c.GenericConfig.BuildHandlerChainFunc = func(h http.Handler, gc *genericapiserver.Config) http.Handler {
		return growStackFirst(build(protobufOnlyForMetadata(h), gc))
	}
	if a := c.GenericConfig.Authentication.Authenticator; a != nil {
		c.GenericConfig.Authentication.Authenticator = stackGrowingAuthenticator{a}
	}
	server, err := c.GenericConfig.New("dockerios-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	ledgers, err := newLedgers(c, server)
	if err != nil {
		return nil, err
	}
	storage, err := v1alpha1Storage(c.GenericConfig.RESTOptionsGetter, ledgers, c.GenericConfig.Authorization.Authorizer)
	if err != nil {
		return nil, err
	}
	// The binder's view of bindable machines follows the machines' own
	// storage (their watch cache), so it costs no second decode of them.
	machineReads := storage["macosmachines"].(*machinestorage.REST).Store.Storage.Storage
	server.AddPostStartHookOrDie("dockerios-claim-binder", func(ctx genericapiserver.PostStartHookContext) error {
		go ledgers.bindings.RunMachineView(ctx, machineReads)
		go ledgers.bindings.RunQueueAudit(ctx, c.IdentityRepairInterval)
		return nil
	})
	group := genericapiserver.NewDefaultAPIGroupInfo(dockerio.GroupName, scheme.Scheme, metav1.ParameterCodec, scheme.Codecs)
	// Protobuf included, for objects' metadata: see protobufOnlyForMetadata.
	group.NegotiatedSerializer = scheme.Codecs
	group.VersionedResourcesStorageMap[v1alpha1.SchemeGroupVersion.Version] = storage
	if err := server.InstallAPIGroup(&group); err != nil {
		return nil, err
	}
	return &Server{GenericAPIServer: server}, nil
}

// ledgers are the writers of DockerIOS's own transactions.
type ledgers struct {
	identities *identityledger.Ledger
	bindings   *binding.Binder
}

// newLedgers connects the identity ledger and the claim binder to the etcd
// the stores use, and ties their event recorder, etcd client and loops
// (free-list view, pool status counts, the repair audit) to the server's life.
func newLedgers(c CompletedConfig, server *genericapiserver.GenericAPIServer) (ledgers, error) {
	cfg := c.GenericConfig
	opts, err := cfg.RESTOptionsGetter.GetRESTOptions(dockerio.Resource("macosmachines"), &dockerio.MacOSMachine{})
	if err != nil {
		return ledgers{}, err
	}
	client, err := txn.NewClient(opts.StorageConfig.Config.Transport)
	if err != nil {
		return ledgers{}, fmt.Errorf("connecting the identity ledger to etcd: %w", err)
	}
	recorder, stopEvents, err := newEventRecorder(c.CoreAPI)
	if err != nil {
		client.Close()
		return ledgers{}, err
	}
	binder, err := binding.New(client, cfg.RESTOptionsGetter, nil, recorder)
	if err != nil {
		client.Close()
		return ledgers{}, err
	}
	identityledger.RegisterMetrics()
	binding.RegisterMetrics()
	ledger, err := identityledger.New(client, cfg.RESTOptionsGetter, identityledger.Options{Recorder: recorder, Claims: binder})
	if err != nil {
		client.Close()
		return ledgers{}, err
	}
	server.AddPostStartHookOrDie("dockerios-identity-ledger", func(ctx genericapiserver.PostStartHookContext) error {
		go ledger.RunFreeView(ctx)
		go ledger.RunClassView(ctx)
		go ledger.RunPoolStatus(ctx)
		go ledger.RunRepair(ctx, c.IdentityRepairInterval)
		go func() {
			<-ctx.Done()
			stopEvents()
			client.Close()
		}()
		return nil
	})
	return ledgers{identities: ledger, bindings: binder}, nil
}

// v1alpha1Storage returns the REST storage of every v1alpha1 resource and
// subresource, keyed by path as the generic server expects.
func v1alpha1Storage(opts generic.RESTOptionsGetter, l ledgers, authz authorizer.Authorizer) (map[string]rest.Storage, error) {
	image, err := imagestorage.NewStorage(opts)
	if err != nil {
		return nil, fmt.Errorf("macosimages: %w", err)
	}
	class, err := classstorage.NewStorage(opts, func(ctx context.Context, name string) (*dockerio.MacOSImage, error) {
		obj, err := image.Image.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return obj.(*dockerio.MacOSImage), nil
	})
	if err != nil {
		return nil, fmt.Errorf("macosmachineclasses: %w", err)
	}
	identityPool, err := identitypoolstorage.NewStorage(opts, l.identities)
	if err != nil {
		return nil, fmt.Errorf("macosidentitypools: %w", err)
	}
	identity, err := identitystorage.NewStorage(opts, l.identities)
	if err != nil {
		return nil, fmt.Errorf("macosidentities: %w", err)
	}
	machine, err := machinestorage.NewStorage(opts, l.identities, authz)
	if err != nil {
		return nil, fmt.Errorf("macosmachines: %w", err)
	}
	pool, err := poolstorage.NewStorage(opts, l.identities, authz)
	if err != nil {
		return nil, fmt.Errorf("macosmachinepools: %w", err)
	}
	claim, err := claimstorage.NewStorage(opts, claimstorage.Deps{Binder: l.bindings, Classes: l.identities, Authorizer: authz})
	if err != nil {
		return nil, fmt.Errorf("macosmachineclaims: %w", err)
	}
	return map[string]rest.Storage{
		"macosmachineclasses":        class.Class,
		"macosmachineclasses/status": class.Status,
		"macosimages":                image.Image,
		"macosimages/status":         image.Status,
		"macosidentitypools":         identityPool.Pool,
		"macosidentitypools/status":  identityPool.Status,
		"macosidentitypools/hold":    identityPool.Hold,
		"macosidentities":            identity.Identity,
		"macosidentities/status":     identity.Status,
		"macosmachines":              machine.Machine,
		"macosmachines/status":       machine.Status,
		"macosmachinepools":          pool.Pool,
		"macosmachinepools/status":   pool.Status,
		"macosmachinepools/scale":    pool.Scale,
		"macosmachineclaims":         claim.Claim,
		"macosmachineclaims/status":  claim.Status,
		"macosmachineclaims/bind":    claim.Bind,
	}, nil
}
