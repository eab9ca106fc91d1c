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

// Package app holds the DockerIOS apiserver's command: its options, how
// they become a server config, and how the server is run, in one of two
// ways:
//
//   - behind kube-apiserver (the default): an aggregated API server with
//     delegated authentication and authorization (the usual
//     RecommendedOptions), reached through an APIService; with
//     --cert-secret it makes its own serving certificate in a Secret and
//     writes the CA into the APIService (pkg/selfcert);
//   - --local: a standalone development server on 127.0.0.1 that makes its
//     own CA, serving certificate and admin client certificate, writes a
//     kubeconfig, and needs nothing else installed.
//
// Either way, without --etcd-servers the server runs an embedded etcd in
// --data-dir.
package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/features"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	basecompatibility "k8s.io/component-base/compatibility"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"github.com/dockerios/dockerios/pkg/apiserver"
	"github.com/dockerios/dockerios/pkg/authn"
	"github.com/dockerios/dockerios/pkg/authz"
	"github.com/dockerios/dockerios/pkg/embeddedetcd"
	generatedopenapi "github.com/dockerios/dockerios/pkg/generated/openapi"
	"github.com/dockerios/dockerios/pkg/heapfloor"
	"github.com/dockerios/dockerios/pkg/localpki"
	"github.com/dockerios/dockerios/pkg/scheme"
	"github.com/dockerios/dockerios/pkg/selfcert"
	storagecodec "github.com/dockerios/dockerios/pkg/storage/codec"
	"github.com/dockerios/dockerios/pkg/storage/identityledger"
	"github.com/dockerios/dockerios/pkg/version"
)

const (
	// EtcdPrefix is where DockerIOS keeps its objects in etcd; the store adds
	// <group>/<resource>, so a machine is at
	// /registry/dockerios.io/macosmachines/<namespace>/<name>, where
	// kube-apiserver would keep a custom resource of the same group.
	EtcdPrefix = "/registry"
	// DefaultSecurePort is unprivileged, so the server runs as non-root.
	DefaultSecurePort = 9443
	// DefaultDataDir holds the embedded etcd and the local mode's files.
	DefaultDataDir = ".dockerios"
	// LocalKubeconfigName is the kubeconfig --local writes into --data-dir.
	LocalKubeconfigName = "admin.kubeconfig"
	// DefaultGCHeapFloor is about five times the live heap of a small
	// fleet's server (20–30 MiB), which then collects about three times
	// less often, and under what GOGC alone lets the heap of 10,000
	// machines reach (a live heap of about 100 MiB): 256 MiB would have
	// cost that fleet 160 MiB of resident memory more, 128 MiB cost it
	// 22 MiB (docs/contributors/benchmarks.md).
	DefaultGCHeapFloor = "128Mi"
)

func init() {
	// --logging-format's formats are gated (json is beta); kube-apiserver
	// registers the gates the same way.
	utilruntime.Must(logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate))
}

// Options are the apiserver's flags.
type Options struct {
	RecommendedOptions *genericoptions.RecommendedOptions

	// Local runs the standalone development mode.
	Local bool
	// DataDir holds the embedded etcd data and, in local mode, the PKI and kubeconfig.
	DataDir string
	// IdentityRepairInterval is how often the identity ledger is audited.
	IdentityRepairInterval time.Duration
	// AuthorizationRefreshWindow: a delegated authorization question asked
	// within it is asked again before its cached answer expires (pkg/authz).
	AuthorizationRefreshWindow time.Duration
	// GCHeapFloor is the heap size under which the garbage collector does
	// not start a collection (pkg/heapfloor); "0" turns it off.
	GCHeapFloor string
	// ServingCertHosts are DNS names the self-signed serving certificate is
	// valid for besides localhost, such as the Service the APIService names;
	// with CertSecret, names the certificate covers besides the Service's.
	ServingCertHosts []string
	// CertSecret (NAMESPACE/NAME), when set, holds the serving CA and
	// certificate, made and renewed by the server itself (pkg/selfcert).
	CertSecret string
	// Service (NAMESPACE/NAME) is the Service the APIServices route to:
	// with CertSecret, the serving certificate covers its DNS names.
	Service string
	// APIServices get the CertSecret's CA in their caBundle.
	APIServices []string
	// CertValidity is the CertSecret's validities and CA overlap; zero
	// means selfcert's defaults. Hidden flags: only tests shorten them.
	CertValidity selfcert.Validity

	// Ledger is the ledger's marker and backups (ledger_options.go).
	Ledger LedgerOptions

	// Shutdown is how the server stops when told to (SIGTERM), as
	// kube-apiserver's --shutdown-* flags say it.
	Shutdown ShutdownOptions

	// Logs is the log format and verbosity (--logging-format, -v). JSON by
	// default, like the controller's and the embedded etcd's, so one
	// collector parses every DockerIOS pod; text is there for a person at
	// a terminal.
	Logs *logsapi.LoggingConfiguration

	// stopping is closed when the server is told to stop (Run's
	// context).
	stopping <-chan struct{}

	// selfCert keeps CertSecret once Config has made it; Run starts it.
	selfCert *selfcert.Manager

	Out, ErrOut io.Writer
}

// NewOptions returns the defaults.
func NewOptions(out, errOut io.Writer) *Options {
	o := &Options{
		RecommendedOptions:         genericoptions.NewRecommendedOptions(EtcdPrefix, nil), // Config sets the storage codec, from --storage-media-type
		DataDir:                    DefaultDataDir,
		IdentityRepairInterval:     apiserver.DefaultIdentityRepairInterval,
		AuthorizationRefreshWindow: time.Minute,
		GCHeapFloor:                DefaultGCHeapFloor,
		Service:                    "dockerios-system/dockerios-apiserver",
		Logs:                       logsapi.NewLoggingConfiguration(),
		// Behind kube-apiserver, the aggregator and every informer in the
		// cluster hold watches open on us. Without SendRetryAfter the
		// server waits for them for RequestTimeout (60s) when told to
		// stop, longer than a pod's termination grace period, so a
		// rolling update would end in SIGKILL. With it, it drains
		// ordinary requests (answering new ones with 429 and Retry-After
		// meanwhile), then gives watches two seconds to see the
		// connection close: clients re-watch through kube-apiserver.
		Shutdown: ShutdownOptions{SendRetryAfter: true},
		Out:      out,
		ErrOut:   errOut,
	}
	o.Logs.Format = logsapi.JSONLogFormat
	o.Ledger = NewLedgerOptions()
	o.RecommendedOptions.Etcd.DefaultStorageMediaType = storagecodec.DefaultMediaType
	o.RecommendedOptions.SecureServing.BindPort = DefaultSecurePort
	// No watch cache of identities (see DefaultWatchCacheSizes);
	// --watch-cache-sizes overrides it.
	o.RecommendedOptions.Etcd.WatchCacheSizes = append([]string(nil), identityledger.DefaultWatchCacheSizes...)
	return o
}

// NewCommand returns the apiserver command.
func NewCommand(ctx context.Context, o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dockerios-apiserver",
		Short: "Serve the dockerios.io API: macOS machines as Kubernetes resources",
		Long: `dockerios-apiserver serves the dockerios.io API group (macOS machine classes,
images, identities, machines, pools and claims) from etcd.

Behind kube-apiserver it is an aggregated API server with delegated
authentication and authorization. With --local it is a standalone
development server on 127.0.0.1 that writes its own kubeconfig.
Without --etcd-servers it runs an embedded etcd in --data-dir.`,
		SilenceUsage: true,
		// --version prints DockerIOS's version alone and exits, before
		// any other flag is looked at.
		Version: version.String(),
		RunE: func(c *cobra.Command, _ []string) error {
			// Before anything logs: the format is global to the process.
			if err := logsapi.ValidateAndApply(o.Logs, utilfeature.DefaultFeatureGate); err != nil {
				return err
			}
			if err := o.Complete(); err != nil {
				return err
			}
			return o.Run(c.Context())
		},
	}
	cmd.SetContext(ctx)
	cmd.SetVersionTemplate("{{.Version}}\n")
	// `dockerios-apiserver ledger ...`: the server's flags are its own
	// (cmd.Flags), so they neither reach nor take the subcommand's.
	cmd.AddCommand(newLedgerCommand(o.Out, o.ErrOut))
	o.AddFlags(cmd.Flags())
	return cmd
}

// AddFlags adds the options' flags to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.RecommendedOptions.AddFlags(fs)
	logsapi.AddFlags(o.Logs, fs)
	fs.BoolVar(&o.Local, "local", o.Local, "Run standalone on 127.0.0.1 for development: make a CA, serving and admin certificates and an admin kubeconfig in --data-dir; no kube-apiserver is needed.")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "Directory for the embedded etcd (used when --etcd-servers is empty) and for --local's certificates and kubeconfig.")
	fs.StringSliceVar(&o.ServingCertHosts, "serving-cert-hosts", o.ServingCertHosts, "DNS names the self-signed serving certificate (made when no --tls-cert-file is given) is valid for besides localhost, such as dockerios-apiserver.dockerios-system.svc, the name kube-apiserver's aggregator dials. With --cert-secret, names (or IP addresses) its certificate covers besides --service's.")
	fs.StringVar(&o.CertSecret, "cert-secret", o.CertSecret, "NAMESPACE/NAME of a kubernetes.io/tls Secret in which the server keeps a CA and its serving certificate, creating it if absent and renewing the certificate at two thirds of its one-year life, shared by every replica; the key pair is served from memory and follows the Secret without a restart. Replaces --tls-cert-file and --cert-dir; needs kube-apiserver (--kubeconfig or in-cluster).")
	fs.StringVar(&o.Service, "service", o.Service, "NAMESPACE/NAME of the Service the APIServices route to; with --cert-secret, the serving certificate covers NAME.NAMESPACE.svc (the name kube-apiserver's aggregator checks) and NAME.NAMESPACE.svc.cluster.local.")
	fs.StringSliceVar(&o.APIServices, "apiservice", o.APIServices, "APIService (e.g. v1alpha1.dockerios.io) whose spec.caBundle the server keeps equal to --cert-secret's CA; repeatable.")
	o.CertValidity.AddHiddenFlags(fs, "cert-")
	o.Ledger.AddFlags(fs)
	o.Shutdown.AddFlags(fs)
	fs.DurationVar(&o.IdentityRepairInterval, "identity-repair-interval", o.IdentityRepairInterval, "How often the identity ledger is audited against the identities and machines, and drift repaired (also once at start).")
	fs.StringVar(&o.GCHeapFloor, "gc-heap-floor", o.GCHeapFloor, "Heap size (a quantity, such as 128Mi) under which the Go garbage collector starts no collection: a server whose live heap is small collects once per floor allocated rather than once per live heap, and each collection's mark workers take every core the server leaves idle, which on a shared node is the CPU the requests in flight wait for. Once GOGC's own goal is over the floor (from a live heap of half the floor on, at GOGC=100), GOGC alone decides, as without it. Never more than half of GOMEMLIMIT or of the container's memory limit; ignored with GOGC=off. 0 turns it off.")
	fs.DurationVar(&o.AuthorizationRefreshWindow, "authorization-webhook-cache-refresh-window", o.AuthorizationRefreshWindow, "A delegated authorization question (a SubjectAccessReview to kube-apiserver) asked within this window is asked again before its cached answer expires, so that requests do not wait for it; answers are never older than --authorization-webhook-cache-authorized-ttl and --authorization-webhook-cache-unauthorized-ttl either way. 0 asks only when a request needs an answer.")
}

// Complete fills in what follows from other options.
func (o *Options) Complete() error {
	if !o.Local {
		return nil
	}
	// Standalone: nobody to delegate to. Client certificates from our own
	// CA authenticate; system:masters is allowed everything and everyone
	// else nothing. There is no core API to watch namespaces or webhooks
	// from, so admission and priority-and-fairness (which read it) are off.
	ro := o.RecommendedOptions
	ro.SecureServing.BindAddress = netutils.ParseIPSloppy("127.0.0.1")
	ro.Authentication.RemoteKubeConfigFileOptional = true
	ro.Authentication.SkipInClusterLookup = true
	ro.Authentication.RemoteKubeConfigFile = ""
	ro.Authentication.ClientCert.ClientCA = filepath.Join(o.pkiDir(), "ca.crt")
	ro.Authorization.RemoteKubeConfigFileOptional = true
	ro.Authorization.RemoteKubeConfigFile = ""
	ro.Authorization.AlwaysAllowGroups = []string{localpki.AdminGroup}
	ro.CoreAPI = nil
	ro.Admission = nil
	ro.Features.EnablePriorityAndFairness = false
	return nil
}

// Validate checks the options once etcd servers are known.
func (o *Options) Validate() error {
	errs := o.RecommendedOptions.Validate()
	if o.DataDir == "" {
		errs = append(errs, fmt.Errorf("--data-dir must not be empty"))
	}
	if o.AuthorizationRefreshWindow < 0 {
		errs = append(errs, fmt.Errorf("--authorization-webhook-cache-refresh-window must not be negative, not %s", o.AuthorizationRefreshWindow))
	}
	if _, err := o.gcHeapFloorBytes(); err != nil {
		errs = append(errs, err)
	}
	if o.IdentityRepairInterval <= 0 {
		errs = append(errs, fmt.Errorf("--identity-repair-interval must be positive, not %s", o.IdentityRepairInterval))
	}
	errs = append(errs, o.validateCertSecret()...)
	errs = append(errs, o.Ledger.Validate(o.Ledger.embedded)...)
	errs = append(errs, o.Shutdown.Validate()...)
	return utilerrors.NewAggregate(errs)
}

// gcHeapFloorBytes is --gc-heap-floor in bytes.
func (o *Options) gcHeapFloorBytes() (uint64, error) {
	q, err := resource.ParseQuantity(o.GCHeapFloor)
	if err != nil {
		return 0, fmt.Errorf("--gc-heap-floor %q: %w", o.GCHeapFloor, err)
	}
	if q.Sign() < 0 {
		return 0, fmt.Errorf("--gc-heap-floor must not be negative, not %s", o.GCHeapFloor)
	}
	return uint64(q.Value()), nil
}

// EmbedsEtcd says whether the server runs its own etcd.
func (o *Options) EmbedsEtcd() bool {
	return len(o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList) == 0
}

// KubeconfigPath is where --local writes the admin kubeconfig.
func (o *Options) KubeconfigPath() string { return filepath.Join(o.DataDir, LocalKubeconfigName) }

func (o *Options) pkiDir() string { return filepath.Join(o.DataDir, "pki") }

// Config turns the options into a server config.
func (o *Options) Config() (*apiserver.Config, error) {
	if o.Local {
		bundle, err := localpki.Ensure(o.pkiDir(), []string{"localhost", "127.0.0.1"}, time.Now())
		if err != nil {
			return nil, fmt.Errorf("preparing local certificates: %w", err)
		}
		o.RecommendedOptions.SecureServing.ServerCert.CertKey = genericoptions.CertKey{CertFile: bundle.ServingCert, KeyFile: bundle.ServingKey}
	} else if o.CertSecret != "" {
		// Served from the Secret below; nothing is written to --cert-dir.
	} else if err := o.RecommendedOptions.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", o.ServingCertHosts, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating self-signed certificates: %w", err)
	}

	cfg := genericapiserver.NewRecommendedConfig(scheme.Codecs)
	cfg.Serializer = scheme.Serializer
	o.Shutdown.ApplyTo(&cfg.Config, o.stopping)
	namer := openapi.NewDefinitionNamer(scheme.Scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(generatedopenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title = "DockerIOS"
	cfg.OpenAPIConfig.Info.Version = "v1alpha1"
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title = "DockerIOS"
	cfg.OpenAPIV3Config.Info.Version = "v1alpha1"
	cfg.EffectiveVersion = effectiveVersion{compatibility.DefaultBuildEffectiveVersion()}
	if err := overrideFeatureDefaults(); err != nil {
		return nil, err
	}
	cfg.FeatureGate = utilfeature.DefaultFeatureGate

	// The delegated authorizer's answers are kept by authz.Fresh, with
	// the TTLs its flags give; its own cache would keep them a second time
	// and hide the refreshes.
	var freshOpts authz.FreshOptions
	if az := o.RecommendedOptions.Authorization; az != nil {
		freshOpts = authz.DefaultFreshOptions(az.AllowCacheTTL, az.DenyCacheTTL)
		freshOpts.RefreshWindow = o.AuthorizationRefreshWindow
		az.AllowCacheTTL, az.DenyCacheTTL = 0, 0
		defer func() { az.AllowCacheTTL, az.DenyCacheTTL = freshOpts.AllowTTL, freshOpts.DenyTTL }()
	}
	// The generic options store with the codec they are given, whatever
	// --storage-media-type says; the flag is honoured here.
	etcd := o.RecommendedOptions.Etcd
	codec, versioner, err := storagecodec.For(etcd.DefaultStorageMediaType)
	if err != nil {
		return nil, fmt.Errorf("--storage-media-type: %w", err)
	}
	etcd.StorageConfig.Codec, etcd.StorageConfig.EncodeVersioner = codec, versioner
	if err := o.RecommendedOptions.ApplyTo(cfg); err != nil {
		return nil, err
	}
	// Behind kube-apiserver every request presents the front proxy's
	// client certificate: verify its chain once, not on every request.
	cfg.Authentication.Authenticator = authn.FrontProxyChains(cfg.Authentication.RequestHeaderConfig, cfg.Authentication.Authenticator)
	if cfg.Authorization.Authorizer != nil {
		authz.RegisterMetrics()
		fresh := authz.NewFresh(authz.Coalesce(cfg.Authorization.Authorizer), freshOpts)
		cfg.Authorization.Authorizer = fresh
		if err := cfg.AddPostStartHook("dockerios-authorization-refresh", func(ctx genericapiserver.PostStartHookContext) error {
			go fresh.Run(ctx)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if o.CertSecret != "" {
		if err := o.configSelfCert(cfg); err != nil {
			return nil, err
		}
	}
	return &apiserver.Config{GenericConfig: cfg, IdentityRepairInterval: o.IdentityRepairInterval}, nil
}

// effectiveVersion is the Kubernetes libraries' effective version, which
// decides the API's and the feature gates' emulation (and must stay
// theirs: feature gates are registered against it), except for what
// /version answers. The generic apiserver serves EffectiveVersion.Info()
// there, which would be the library's version (v0.37.x, or v0.0.0-master
// unstamped) and tell an operator nothing about the DockerIOS they run.
type effectiveVersion struct {
	basecompatibility.EffectiveVersion
}

// Info is DockerIOS's version (pkg/version): major, minor, gitVersion,
// gitCommit, gitTreeState, buildDate, goVersion, compiler and platform.
// The emulation and minimum compatibility fields are left out: they are
// Kubernetes' versions, which beside DockerIOS's major and minor would
// read as a DockerIOS 1.37.
func (effectiveVersion) Info() *apimachineryversion.Info {
	info := apimachineryversion.Info(version.Get())
	return &info
}

// overrideFeatureDefaults sets the defaults of the generic apiserver's
// features that this server needs otherwise.
//
// ConcurrentWatchObjectDecode decodes every event of an etcd watch in a
// goroutine of its own, so that a slow conversion webhook of a custom
// resource does not hold up the watch cache. This server converts in
// process, in microseconds; the goroutine per event only costs its start
// and the growth of its stack to the depth of a JSON decode, for each
// machine and identity every create writes.
func overrideFeatureDefaults() error {
	return utilfeature.DefaultMutableFeatureGate.OverrideDefault(features.ConcurrentWatchObjectDecode, false)
}

// Run starts the embedded etcd if needed, then serves until ctx is done.
func (o *Options) Run(ctx context.Context) error {
	klog.InfoS("Starting dockerios-apiserver", "version", version.String(), "gitCommit", version.Get().GitCommit)
	floor, err := o.gcHeapFloorBytes()
	if err != nil {
		return err
	}
	heap, err := heapfloor.Keep(floor)
	if err != nil {
		return err
	}
	defer heap.Stop()
	klog.InfoS("Garbage collection", "heapFloorBytes", heap.Bytes, "gogc", heap.Base)
	if o.EmbedsEtcd() {
		// etcd's warnings and errors go to stderr beside ours, so `kubectl
		// logs` shows why the ledger is slow or refuses writes.
		etcd, err := embeddedetcd.Start(filepath.Join(o.DataDir, "etcd"), o.ErrOut)
		if err != nil {
			return err
		}
		defer etcd.Stop()
		o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList = []string{etcd.ClientURL}
		klog.InfoS("Running embedded etcd", "dataDir", filepath.Join(o.DataDir, "etcd"), "clientURL", etcd.ClientURL)
		if err := o.embeddedEtcdStarted(etcd.ClientURL); err != nil {
			return err
		}
	}
	if err := o.Validate(); err != nil {
		return err
	}
	o.stopping = ctx.Done()
	config, err := o.Config()
	if err != nil {
		return err
	}
	if err := o.installLedgerGuard(config.GenericConfig); err != nil {
		return err
	}
	if o.selfCert != nil {
		// Serve nothing until there is a certificate to serve with; the
		// APIService's caBundle follows in the background if its
		// injection fails now.
		if err := o.selfCert.Start(ctx); err != nil {
			return err
		}
	}
	server, err := config.Complete().New()
	if err != nil {
		return err
	}
	if err := o.startLedgerGuard(server.GenericAPIServer); err != nil {
		return err
	}
	if o.Local {
		server.GenericAPIServer.AddPostStartHookOrDie("dockerios-local-kubeconfig", func(genericapiserver.PostStartHookContext) error {
			if err := o.writeLocalKubeconfig(); err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "DockerIOS is serving on https://%s\nUse it with:\n  kubectl --kubeconfig %s api-resources --api-group=dockerios.io\n",
				o.serverAddress(), o.KubeconfigPath())
			return nil
		})
	}
	return server.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}

func (o *Options) serverAddress() string {
	ss := o.RecommendedOptions.SecureServing
	return net.JoinHostPort(ss.BindAddress.String(), strconv.Itoa(ss.BindPort))
}

// writeLocalKubeconfig writes a kubeconfig for the admin client certificate,
// replacing the file atomically so a reader never sees half of it.
func (o *Options) writeLocalKubeconfig() error {
	pki := o.pkiDir()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["dockerios-local"] = &clientcmdapi.Cluster{
		Server:               "https://" + o.serverAddress(),
		CertificateAuthority: filepath.Join(pki, "ca.crt"),
	}
	cfg.AuthInfos[localpki.AdminUser] = &clientcmdapi.AuthInfo{
		ClientCertificate: filepath.Join(pki, "admin.crt"),
		ClientKey:         filepath.Join(pki, "admin.key"),
	}
	cfg.Contexts["dockerios-local"] = &clientcmdapi.Context{Cluster: "dockerios-local", AuthInfo: localpki.AdminUser, Namespace: "default"}
	cfg.CurrentContext = "dockerios-local"
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return err
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	tmp := o.KubeconfigPath() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, o.KubeconfigPath())
}
