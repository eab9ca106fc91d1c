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

// Package harness plays, in end-to-end tests, the cluster components that
// cannot run on a development machine, so the DockerIOS controller can be
// tested against a real kube-apiserver from machine create to Ready and
// through every failure rule:
//
//   - kube-controller-manager's Job controller, for the bootdisk Jobs
//     (labelled app.kubernetes.io/component=bootdisk): it writes their
//     status (and their finished Pods, as the kubelet would) through the
//     status subresource, as the Job controller does;
//   - the same Job controller and kubelet for a MacOSImage's recovery Jobs
//     (labelled dockerios.io/image): each pod ends with the builder's exit
//     code and JSON result line as its termination message, as queued by
//     SetRecoveryRuns (Converted when none is);
//   - CDI, for DataVolumes: CloneScheduled → CloneInProgress → Succeeded,
//     or Failed (a blank disk's phases are an import's); with
//     Config.DataSources, CDI's DataSource controller too;
//   - KubeVirt's virt-controller and virt-handler, for VirtualMachines and
//     VirtualMachineInstances: a VM that should run gets a VMI made from
//     its template, scheduled on one of a few fake Nodes and Running with
//     a loopback address per network;
//   - the guest: for every Running VMI, after a boot delay, the REAL guest
//     agent binary listens on the VMI's agent address with the machine's
//     token and goes Booted → SessionStarted → Ready like a golden image;
//     with Config.SSH, the guest also serves SSH on its addresses, as a
//     golden image with Remote Login on, recording each command it is
//     asked to run (SSHCommands) and running none — for workload-layer
//     tests (examples/gitlab-runner); DockerIOS never logs in to a guest.
//
// Faults are injected through methods (FailBootdiskJobs, FailClones,
// StallBoot, DegradeGuest, CrashGuest, PartitionAgents, LoseNode), each
// documented with the real-world failure it stands for.
//
// Of the objects the controller makes (Jobs, DataVolumes, VirtualMachines)
// the harness writes only status, through the status subresource; it
// creates and deletes only what those components would (VMIs, the Job's
// Pods, Nodes), and plays nothing the controller must do itself. The
// CRDs it needs (KubeVirt's and CDI's own) are installed by InstallCRDs.
//
// Timing is compressed (Config's durations), never reordered: every
// status write happens in the order, and with the fields, the real
// component uses, one write per step so watchers see each.
//
// It is test code: nothing under pkg/ or cmd/ imports it.
package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchv1listers "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/bootdisk"
)

// Labels the harness keys on; they are the controller's (pkg/bootdisk and
// pkg/controller/machine), repeated here so the harness does not import
// the code it tests.
const (
	componentLabel  = "app.kubernetes.io/component"
	machineUIDLabel = bootdisk.MachineUIDLabel
	tokenSecretKey  = bootdisk.DefaultTokenSecretKey
	// agentNetworkName is the network the controller dials the agent on
	// when the VM has one (pkg/controller/machine.AgentInterface).
	agentNetworkName = "agent"
)

// Config configures a Harness. Zero durations take the defaults noted.
type Config struct {
	// RESTConfig is an admin client config of the kube-apiserver.
	RESTConfig *rest.Config
	// AgentBinary is the dockerios-agent to run per guest (AgentBinary(t)).
	AgentBinary string
	// WorkDir holds one directory per guest (token, agent config, console
	// device, setup-done file, agent log). Empty: a temporary directory
	// removed by Stop.
	WorkDir string
	// AgentPort is the port agents listen on (v1alpha1.DefaultAgentPort).
	AgentPort int
	// Nodes are the fake node names VMIs are scheduled on
	// (harness-node-1..3). The harness creates a Ready Node for each.
	Nodes []string

	// JobDuration is how long a bootdisk Job runs (300ms). The Job
	// controller's pod backoff between retries (10s, 20s, ...) is
	// compressed into it.
	JobDuration time.Duration
	// CloneDuration is how long a DataVolume clone takes (500ms).
	CloneDuration time.Duration
	// BootDelay is from a VMI Running to its agent starting (500ms).
	BootDelay time.Duration
	// SetupDelay is from the agent starting to the console session
	// (halfway) and the image's setup-done marker (the end) (500ms).
	SetupDelay time.Duration
	// AgentPollInterval is the agents' pollInterval (200ms). Benchmarks
	// with many guests raise it so the agents do not crowd out what is
	// measured.
	AgentPollInterval time.Duration
	// RestartDelay is how long after a VMI of a VM that should run fails
	// KubeVirt replaces it (KubeVirt's restart backoff; 10s). Negative:
	// never.
	RestartDelay time.Duration
	// NodeUnresponsiveAfter is how long after LoseNode KubeVirt marks the
	// node's VMIs Failed with reason NodeUnresponsive (its virt-handler
	// heartbeat timeout, 5m in a cluster). Zero: never within a test.
	NodeUnresponsiveAfter time.Duration

	// GuestNetwork is the /16 guests' addresses are taken from, as its
	// first two octets ("127.1"). A controller in a pod (test/node) cannot
	// reach this machine's loopback: its test gives a range its pods
	// reach.
	GuestNetwork string
	// RealJobs leaves the bootdisk Jobs to a real Job controller and
	// kubelet (test/node), which run the builder's image for real.
	RealJobs bool
	// DataSources plays CDI's DataSource controller too: a DataSource
	// whose source is a PersistentVolumeClaim is Ready once the claim
	// exists (or a DataVolume of its name Succeeded), else not, with
	// reason NotFound. Off by default: tests that write a DataSource's
	// status themselves keep it as they wrote it.
	DataSources bool
	// GuestOSVersion is the macOS version the guests' agents report
	// (sw_vers -productVersion in a real guest). Empty: none, as an agent
	// off macOS reports.
	GuestOSVersion string

	// SSH makes the guests serve SSH, recording what they are asked to
	// run (SSHCommands), for workload-layer tests. Off unless SSH.User is
	// set.
	SSH SSHConfig

	// Logf, if set, receives a line per action (e.g. t.Logf).
	Logf func(format string, args ...any)
}

func (c *Config) defaults() {
	if c.AgentPort == 0 {
		c.AgentPort = v1alpha1.DefaultAgentPort
	}
	if c.GuestNetwork == "" {
		c.GuestNetwork = "127.1"
	}
	if c.SSH.Port == 0 {
		c.SSH.Port = DefaultSSHPort
	}
	if len(c.Nodes) == 0 {
		c.Nodes = []string{"harness-node-1", "harness-node-2", "harness-node-3"}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.JobDuration, 300*time.Millisecond)
	def(&c.CloneDuration, 500*time.Millisecond)
	def(&c.BootDelay, 500*time.Millisecond)
	def(&c.SetupDelay, 500*time.Millisecond)
	def(&c.AgentPollInterval, 200*time.Millisecond)
	def(&c.RestartDelay, 10*time.Second)
}

// Stats counts what the harness has driven since Start.
type Stats struct {
	JobsStarted, JobsSucceeded, JobsFailed  int
	PodsCreated                             int
	DataVolumesSucceeded, DataVolumesFailed int
	VMIsCreated, VMIsDeleted, VMIsRunning   int
	VMIsFailed                              int
	AgentsStarted                           int
	// AgentsRunning is the number of agent processes alive now.
	AgentsRunning int
	NodesLost     int
}

type kind int

const (
	kindJob kind = iota
	kindDataVolume
	kindVM
	kindVMI
	kindRecoveryJob
	kindDataSource
)

type key struct {
	kind      kind
	namespace string
	name      string
}

// Harness plays the Job controller, CDI, KubeVirt and the guests. Its
// methods are safe for concurrent use.
type Harness struct {
	cfg  Config
	kube kubernetes.Interface
	dyn  dynamic.Interface

	ctx    context.Context
	cancel context.CancelFunc
	queue  workqueue.TypedRateLimitingInterface[key]
	wg     sync.WaitGroup // workers, boot goroutines, process reapers
	stop   sync.Once
	tmpDir bool

	jobLister         batchv1listers.JobLister
	recoveryJobLister batchv1listers.JobLister
	dataSourceLister  cache.GenericLister
	vmLister          cache.GenericLister
	vmiLister         cache.GenericLister
	dataVolumeLister  cache.GenericLister

	mu sync.Mutex
	// jobFailures: machine UID → failures the next Jobs of that machine get.
	jobFailures map[string][]JobFailure
	jobRuns     map[types.UID]*jobRun
	// recoveryRuns: MacOSImage name → how its next recovery Jobs end.
	recoveryRuns map[string][]RecoveryRun
	clones       map[types.UID]*cloneRun
	// failingClasses: StorageClass ("" = none named) → clones fail.
	failingClasses map[string]bool
	stalled        map[string]bool // machine UID → boots hang
	unschedulable  map[string]bool // machine UID → its VMIs find no node
	partitioned    bool
	lostNodes      map[string]time.Time
	deletedNodes   map[string]bool // Nodes deleted while lost, until restored
	nextNode       int
	guests         map[string]*guest // "ns/name" of the VMI
	ips            map[string]bool
	nextIP         uint32
	restartAt      map[types.UID]time.Time // failed VMI → KubeVirt replaces it
	seenVMIs       map[types.UID]string    // VMI UID → "ns/name", until it is gone
	stats          Stats

	sshConfig   *ssh.ServerConfig       // nil: the guests serve no SSH
	sshLog      map[string][]SSHCommand // VMI "ns/name" → commands run
	sshFailures []sshFailure
}

// Start creates the fake Nodes (InstallCRDs must have run before), starts
// watching Jobs, DataVolumes, VirtualMachines and VirtualMachineInstances
// in all namespaces, and plays their owners until Stop. Objects that
// exist already are picked up where they are (a VMI already Running keeps
// its addresses and gets a fresh guest).
func Start(ctx context.Context, cfg Config) (*Harness, error) {
	cfg.defaults()
	if cfg.RESTConfig == nil {
		return nil, fmt.Errorf("harness: RESTConfig is required")
	}
	if cfg.AgentBinary == "" {
		return nil, fmt.Errorf("harness: AgentBinary is required")
	}
	rc := StrictFieldValidation(cfg.RESTConfig)
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 200, 400
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	h := &Harness{
		cfg: cfg, kube: kube, dyn: dyn,
		queue:          workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[key]()),
		jobFailures:    map[string][]JobFailure{},
		jobRuns:        map[types.UID]*jobRun{},
		recoveryRuns:   map[string][]RecoveryRun{},
		clones:         map[types.UID]*cloneRun{},
		failingClasses: map[string]bool{},
		stalled:        map[string]bool{},
		unschedulable:  map[string]bool{},
		lostNodes:      map[string]time.Time{},
		deletedNodes:   map[string]bool{},
		guests:         map[string]*guest{},
		ips:            map[string]bool{},
		// A random start keeps harnesses of test packages running in
		// parallel on this machine mostly off each other's addresses;
		// allocation also probes that an address is free.
		nextIP:    rand.Uint32N(250 * 254),
		restartAt: map[types.UID]time.Time{},
		seenVMIs:  map[types.UID]string{},
		sshLog:    map[string][]SSHCommand{},
	}
	if err := h.setUpSSH(); err != nil {
		return nil, err
	}
	if h.cfg.WorkDir == "" {
		if h.cfg.WorkDir, err = os.MkdirTemp("", "dockerios-harness"); err != nil {
			return nil, err
		}
		h.tmpDir = true
	}
	if h.cfg.WorkDir, err = filepath.Abs(h.cfg.WorkDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(h.cfg.WorkDir, 0o755); err != nil {
		return nil, err
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())

	if err := h.ensureNodes(ctx); err != nil {
		h.Stop()
		return nil, err
	}

	kubeFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{componentLabel: bootdisk.ComponentLabelValue}.String()
	}))
	jobInformer := kubeFactory.Batch().V1().Jobs()
	h.jobLister = jobInformer.Lister()
	if !cfg.RealJobs {
		if _, err := jobInformer.Informer().AddEventHandler(h.handler(kindJob)); err != nil {
			h.Stop()
			return nil, err
		}
	}
	// A MacOSImage's recovery Jobs (pkg/bootdisk.RecoveryJob), by their
	// dockerios.io/image label.
	recoveryFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = recoveryImageLabel
	}))
	recoveryInformer := recoveryFactory.Batch().V1().Jobs()
	h.recoveryJobLister = recoveryInformer.Lister()
	if !cfg.RealJobs {
		if _, err := recoveryInformer.Informer().AddEventHandler(h.handler(kindRecoveryJob)); err != nil {
			h.Stop()
			return nil, err
		}
	}
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	if cfg.DataSources {
		inf := dynFactory.ForResource(DataSourceGVR)
		h.dataSourceLister = inf.Lister()
		if _, err := inf.Informer().AddEventHandler(h.handler(kindDataSource)); err != nil {
			h.Stop()
			return nil, err
		}
	}
	for gvr, k := range map[schema.GroupVersionResource]kind{VirtualMachineGVR: kindVM, VirtualMachineInstanceGVR: kindVMI, DataVolumeGVR: kindDataVolume} {
		inf := dynFactory.ForResource(gvr)
		switch k {
		case kindVM:
			h.vmLister = inf.Lister()
		case kindVMI:
			h.vmiLister = inf.Lister()
		case kindDataVolume:
			h.dataVolumeLister = inf.Lister()
		}
		if _, err := inf.Informer().AddEventHandler(h.handler(k)); err != nil {
			h.Stop()
			return nil, err
		}
	}
	// Nodes: a deleted Node takes its pods with it (the pod garbage
	// collector), which is what lets KubeVirt let go of its VMIs.
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{partOfLabel: partOfValue}.String()
	}))
	if _, err := nodeFactory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: h.nodeDeleted}); err != nil {
		h.Stop()
		return nil, err
	}
	nodeFactory.Start(h.ctx.Done())
	kubeFactory.Start(h.ctx.Done())
	recoveryFactory.Start(h.ctx.Done())
	dynFactory.Start(h.ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for typ, ok := range nodeFactory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			h.Stop()
			return nil, fmt.Errorf("harness: %v informer did not sync", typ)
		}
	}
	for _, f := range []informers.SharedInformerFactory{kubeFactory, recoveryFactory} {
		for typ, ok := range f.WaitForCacheSync(syncCtx.Done()) {
			if !ok {
				h.Stop()
				return nil, fmt.Errorf("harness: %v informer did not sync", typ)
			}
		}
	}
	for gvr, ok := range dynFactory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			h.Stop()
			return nil, fmt.Errorf("harness: %v informer did not sync (did InstallCRDs run?)", gvr)
		}
	}
	for range 4 {
		h.wg.Add(1)
		go h.worker()
	}
	return h, nil
}

// Stop stops playing, stops every agent (SIGTERM, then SIGKILL) and waits
// for them and for every goroutine of the harness. Objects in the cluster
// are left as they are. It is idempotent.
func (h *Harness) Stop() {
	h.stop.Do(func() {
		h.cancel()
		h.queue.ShutDown()
		h.mu.Lock()
		var all []*guest
		for _, g := range h.guests {
			all = append(all, g)
		}
		h.mu.Unlock()
		var wg sync.WaitGroup
		for _, g := range all {
			wg.Add(1)
			go func() { defer wg.Done(); h.stopAgent(g, false) }()
		}
		wg.Wait()
		h.wg.Wait()
		if h.tmpDir {
			_ = os.RemoveAll(h.cfg.WorkDir)
		}
	})
}

func (h *Harness) logf(format string, args ...any) {
	if h.cfg.Logf != nil && h.ctx.Err() == nil {
		h.cfg.Logf("harness: "+format, args...)
	}
}

func (h *Harness) handler(k kind) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		o, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		h.queue.Add(key{k, o.GetNamespace(), o.GetName()})
		// A VMI's changes are its VM's status.
		if k == kindVMI {
			h.queue.Add(key{kindVM, o.GetNamespace(), o.GetName()})
		}
		// A DataVolume's are the readiness of the DataSources naming its
		// claim (the cache holds the change by now).
		if k == kindDataVolume {
			h.dataSourcesOf(o.GetNamespace(), o.GetName())
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
}

func (h *Harness) worker() {
	defer h.wg.Done()
	for {
		k, quit := h.queue.Get()
		if quit {
			return
		}
		var err error
		switch k.kind {
		case kindJob:
			err = h.syncJob(h.ctx, k.namespace, k.name)
		case kindRecoveryJob:
			err = h.syncRecoveryJob(h.ctx, k.namespace, k.name)
		case kindDataSource:
			err = h.syncDataSource(h.ctx, k.namespace, k.name)
		case kindDataVolume:
			err = h.syncDataVolume(h.ctx, k.namespace, k.name)
		case kindVM:
			err = h.syncVM(h.ctx, k.namespace, k.name)
		case kindVMI:
			err = h.syncVMI(h.ctx, k.namespace, k.name)
		}
		if err != nil && h.ctx.Err() == nil {
			// A conflict only means the cache was behind our own last
			// write: retry quietly.
			if !apierrors.IsConflict(err) {
				h.logf("%s %s/%s: %v (retrying)", k.kind, k.namespace, k.name, err)
			}
			h.queue.AddRateLimited(k)
		} else {
			h.queue.Forget(k)
		}
		h.queue.Done(k)
	}
}

func (k kind) String() string {
	return [...]string{"Job", "DataVolume", "VirtualMachine", "VirtualMachineInstance", "recovery Job", "DataSource"}[k]
}

// after requeues k in d (at once if d <= 0).
func (h *Harness) after(k key, d time.Duration) {
	if d <= 0 {
		h.queue.Add(k)
		return
	}
	h.queue.AddAfter(k, d)
}

// Stats returns the counts so far.
func (h *Harness) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.stats
	s.AgentsRunning = 0
	for _, g := range h.guests {
		if g.alive() {
			s.AgentsRunning++
		}
	}
	return s
}

// Nodes returns the fake node names.
func (h *Harness) Nodes() []string {
	out := append([]string(nil), h.cfg.Nodes...)
	sort.Strings(out)
	return out
}

// WorkDir is where the guests' files are.
func (h *Harness) WorkDir() string { return h.cfg.WorkDir }
