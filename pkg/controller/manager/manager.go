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

// Package manager wires the reconcilers to informers and work queues: one
// queue per kind of work, keys only (never objects) in the queues, every
// decision made from the caches at the time a key is processed.
package manager

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/controller/containerimages"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/controller/image"
	"github.com/dockerios/dockerios/pkg/controller/machine"
	"github.com/dockerios/dockerios/pkg/controller/pool"
	"github.com/dockerios/dockerios/pkg/controller/vmaudit"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	dscheme "github.com/dockerios/dockerios/pkg/generated/clientset/versioned/scheme"
	dinformers "github.com/dockerios/dockerios/pkg/generated/informers/externalversions"
)

// Config is what the manager needs.
type Config struct {
	RESTConfig *rest.Config
	Settings   machine.Settings
	// ImagesPodTemplate, when its Name is set, is the PodTemplate the
	// bootdisk and hook sidecar images and the pull secrets are read from
	// (containerimages.PodTemplate), in place of Settings'.
	ImagesPodTemplate types.NamespacedName
	// MachineWorkers reconcile machines in parallel; PoolWorkers pools and
	// claims.
	MachineWorkers, PoolWorkers int
	// AgentProbeWorkers call guest agents in parallel, each call bounded by
	// AgentTimeout (machine.DefaultProbeWorkers when zero).
	AgentProbeWorkers int
	AgentTimeout      time.Duration
	StorageHoldBack   time.Duration
	// LedgerGuardInterval is how often running VMs are compared with the
	// identity ledger (30s when zero).
	LedgerGuardInterval time.Duration
	// Resync re-reads every object this often, as a safety net for events
	// lost while the controller was not leader.
	Resync   time.Duration
	Log      *slog.Logger
	Registry prometheus.Registerer
	// RecoveryBackoff and RecoveryBackoffMax bound the wait between
	// attempts of an image's recovery fetch (image.DefaultRecoveryBackoff
	// and image.DefaultRecoveryBackoffMax when zero).
	RecoveryBackoff, RecoveryBackoffMax time.Duration
	// Leading, when set, says whether this replica may write now. A leader
	// stopped for longer than its lease (a SIGSTOP, a VM pause, a long GC
	// or swap stall) wakes up believing it leads, with caches as old as the
	// stall, while another replica has taken over; client-go notices only
	// at its next renewal, up to the renew deadline later. Until Leading
	// says yes, keys wait on their queues instead of being reconciled.
	Leading func() bool
}

const uidIndex = "uid"

// eventScheme knows every typed object an Event of the controller is about:
// DockerIOS's own and Kubernetes' (an identity Secret the ledger guard
// reports, a Job, a PVC). An Event about an object of a kind the recorder's
// scheme lacks is dropped, with only a line in the log.
func eventScheme() *kruntime.Scheme {
	s := kruntime.NewScheme()
	runtime.Must(clientgoscheme.AddToScheme(s))
	runtime.Must(dscheme.AddToScheme(s))
	return s
}

// Run runs the reconcilers until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	kube, err := kubernetes.NewForConfig(cfg.RESTConfig)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg.RESTConfig)
	if err != nil {
		return err
	}
	client, err := versioned.NewForConfig(cfg.RESTConfig)
	if err != nil {
		return err
	}
	if cfg.MachineWorkers <= 0 {
		cfg.MachineWorkers = 8
	}
	if cfg.PoolWorkers <= 0 {
		cfg.PoolWorkers = 2
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 10 * time.Minute
	}

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(eventScheme(), eventSource())

	// Only objects DockerIOS made are cached: not every Secret of the cluster.
	owned, err := labels.NewRequirement(machine.MachineUIDLabel, selection.Exists, nil)
	if err != nil {
		return err
	}
	ownedOnly := func(o *metav1.ListOptions) { o.LabelSelector = labels.NewSelector().Add(*owned).String() }
	df := dinformers.NewSharedInformerFactory(client, cfg.Resync)
	kf := informers.NewSharedInformerFactoryWithOptions(kube, cfg.Resync, informers.WithTweakListOptions(ownedOnly))
	xf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, cfg.Resync, metav1.NamespaceAll, ownedOnly)

	// Nodes are read whole (their readiness decides the fate of machines
	// with passed-through devices); a factory of their own, unfiltered.
	nf := informers.NewSharedInformerFactory(kube, cfg.Resync)
	nodes := nf.Core().V1().Nodes()
	d := df.Dockerios().V1alpha1()
	machines := d.MacOSMachines()
	if err := machines.Informer().AddIndexers(cache.Indexers{uidIndex: func(obj any) ([]string, error) {
		if m, ok := obj.(*v1alpha1.MacOSMachine); ok {
			return []string{string(m.UID)}, nil
		}
		return nil, nil
	}}); err != nil {
		return err
	}
	vms, vmis, dvs := xf.ForResource(external.VirtualMachines), xf.ForResource(external.VirtualMachineInstances), xf.ForResource(external.DataVolumes)

	mr := &machine.Reconciler{
		Kube: kube, Dynamic: dyn, Client: client, Settings: cfg.Settings, Recorder: recorder,
		Log: cfg.Log.With("reconciler", "machine"), StorageHoldBack: cfg.StorageHoldBack,
		Listers: machine.Listers{
			Machines: machines.Lister(), Classes: d.MacOSMachineClasses().Lister(), Images: d.MacOSImages().Lister(),
			Identities: d.MacOSIdentities().Lister(), IdentityPools: d.MacOSIdentityPools().Lister(),
			Secrets: kf.Core().V1().Secrets().Lister(), PVCs: kf.Core().V1().PersistentVolumeClaims().Lister(),
			Jobs: kf.Batch().V1().Jobs().Lister(), Nodes: nodes.Lister(),
			VMs: vms.Lister(), VMIs: vmis.Lister(), DVs: dvs.Lister(),
		},
	}
	if cfg.ImagesPodTemplate.Name != "" {
		mr.Images = &containerimages.PodTemplate{Client: kube.CoreV1(), Template: cfg.ImagesPodTemplate}
	}
	if cfg.Registry != nil {
		mr.Metrics = machine.NewMetrics(cfg.Registry)
	}
	mr.Fleet = machine.NewFleetWatch(machines.Lister(), recorder, cfg.Log.With("component", "fleet"), cfg.Registry)
	pr := &pool.Reconciler{Client: client, Pools: d.MacOSMachinePools().Lister(), Machines: machines.Lister(),
		Claims: d.MacOSMachineClaims().Lister(), Recorder: recorder, Log: cfg.Log.With("reconciler", "pool")}

	ir := &image.Reconciler{Images: d.MacOSImages().Lister(), Client: client, Kube: kube, Dynamic: dyn,
		Machines: machines.Lister(), VMIs: vmis.Lister(), Recorder: recorder,
		ContainerImages: containerimages.Fixed{Bootdisk: cfg.Settings.BootdiskImage, PullSecrets: cfg.Settings.ImagePullSecrets},
		RecoveryBackoff: cfg.RecoveryBackoff, RecoveryBackoffMax: cfg.RecoveryBackoffMax}
	if mr.Images != nil {
		// Recovery Jobs run the machines' bootdisk builder image.
		ir.ContainerImages = mr.Images
	}
	images := newQueue("images")
	m := &queues{
		machines: newQueue("machines"), pools: newQueue("pools"), claims: newQueue("class-claims"), classMachines: newQueue("class-machines"),
		machineIndex: machines.Informer().GetIndexer(), reconciled: newReconciledMachines(),
	}
	m.registerMetrics(cfg.Registry, d)
	// Agents' answers come back to the machine queue as events.
	mr.Prober = machine.NewProber(machine.ProberConfig{Workers: cfg.AgentProbeWorkers, Timeout: cfg.AgentTimeout,
		Enqueue: func(ns, name string) { m.machines.Add(ns + "/" + name) }}, cfg.Registry)

	// Event wiring.
	handleRelevant(machines.Informer(), machineRelevant, func(obj any) { m.machines.Add(key(obj.(metav1.Object))) })
	// Pools and class claims care about phases and readiness too.
	handle(machines.Informer(), func(obj any) {
		mm := obj.(*v1alpha1.MacOSMachine)
		if p := mm.Labels[v1alpha1.MachinePoolLabel]; p != "" {
			m.pools.Add(mm.Namespace + "/" + p)
		}
		if _, ok := mm.Labels[v1alpha1.ClaimUIDLabel]; ok {
			m.classMachines.Add(key(mm))
			m.claims.Add(key(mm))
		}
	})
	// A machine an image promotes from: its agent's report and its guest's
	// shutdown move the promotion on.
	handle(machines.Informer(), func(obj any) {
		mm := obj.(*v1alpha1.MacOSMachine)
		imgs, _ := d.MacOSImages().Lister().List(labels.Everything())
		for _, img := range imgs {
			if pf := img.Spec.PromoteFrom; pf != nil && pf.Namespace == mm.Namespace && pf.Name == mm.Name {
				images.Add(img.Name)
			}
		}
	})
	forgetGone(machines.Informer(), mr.Prober)
	handle(d.MacOSMachinePools().Informer(), func(obj any) { m.pools.Add(key(obj.(metav1.Object))) })
	handle(d.MacOSMachineClaims().Informer(), func(obj any) {
		c := obj.(*v1alpha1.MacOSMachineClaim)
		if c.Spec.PoolName != "" {
			m.pools.Add(c.Namespace + "/" + c.Spec.PoolName)
		}
		if c.Spec.ClassName != "" {
			m.claims.Add(key(c))
			m.classMachines.Add(key(c))
		}
	})
	handleRelevant(d.MacOSMachineClasses().Informer(), classRelevant, func(obj any) {
		c := obj.(*v1alpha1.MacOSMachineClass)
		all, _ := machines.Lister().List(labels.Everything())
		for _, mm := range all {
			if mm.Spec.ClassName == c.Name {
				m.machines.Add(key(mm))
			}
		}
	})
	handleRelevant(d.MacOSImages().Informer(), func(old, new any) bool {
		return old.(*v1alpha1.MacOSImage).Generation != new.(*v1alpha1.MacOSImage).Generation
	}, func(obj any) { images.Add(obj.(metav1.Object).GetName()) })
	// An install session waits on its image: the recovery volume's
	// readiness (image status) and a promotion naming it (image spec).
	handle(d.MacOSImages().Informer(), func(obj any) {
		all, _ := machines.Lister().List(labels.Everything())
		for _, k := range installSessionsOf(all, obj.(metav1.Object).GetName()) {
			m.machines.Add(k)
		}
	})
	_ = d.MacOSIdentities().Informer()
	_ = d.MacOSIdentityPools().Informer()
	for inf, relevant := range map[cache.SharedIndexInformer]relevantFunc{
		kf.Core().V1().Secrets().Informer(): metadataOnly, kf.Core().V1().PersistentVolumeClaims().Informer(): metadataOnly,
		kf.Batch().V1().Jobs().Informer(): jobRelevant,
		vms.Informer():                    virtualMachineRelevant, vmis.Informer(): virtualMachineInstanceRelevant, dvs.Informer(): dataVolumeRelevant,
	} {
		handleOwned(inf, relevant, m.enqueueOwner)
	}

	// A node's readiness change reaches the machines running there.
	handleRelevant(nodes.Informer(), nodeRelevant, func(obj any) {
		n := obj.(metav1.Object)
		all, _ := machines.Lister().List(labels.Everything())
		for _, mm := range all {
			if mm.Status.NodeName == n.GetName() {
				m.machines.Add(key(mm))
			}
		}
	})
	nf.Start(ctx.Done())
	df.Start(ctx.Done())
	kf.Start(ctx.Done())
	xf.Start(ctx.Done())
	synced := map[string]bool{"nodes": allSynced(nf.WaitForCacheSync(ctx.Done())), "dockerios": allSynced(df.WaitForCacheSync(ctx.Done())),
		"kubernetes": allSynced(kf.WaitForCacheSync(ctx.Done())), "kubevirt/cdi": allSynced(xf.WaitForCacheSync(ctx.Done()))}
	if ctx.Err() != nil {
		// Stopped while the caches filled (a SIGTERM, a lost lease): the
		// waits ended for that, not because a kind is missing.
		return nil
	}
	for name, synced := range synced {
		if !synced {
			return fmt.Errorf("caches of %s did not sync (are KubeVirt's and CDI's CRDs installed, and may the controller list them?)", name)
		}
	}
	cfg.Log.Info("caches synced; reconciling")

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); mr.Fleet.Run(ctx) }()
	guard := &vmaudit.Guard{Client: client, Identities: d.MacOSIdentities().Lister(), Machines: machines.Lister(),
		Pools: d.MacOSIdentityPools().Lister(), VMs: vms.Lister(), VMIs: vmis.Lister(), Secrets: kf.Core().V1().Secrets().Lister(),
		Recorder: recorder, Log: cfg.Log.With("component", "vmaudit"), Leading: cfg.Leading}
	guardInterval := cfg.LedgerGuardInterval
	if guardInterval <= 0 {
		guardInterval = 30 * time.Second
	}
	wg.Add(1)
	go func() { defer wg.Done(); guard.Run(ctx, guardInterval) }()
	wg.Add(1)
	go func() { defer wg.Done(); mr.Prober.Run(ctx) }()
	run := func(q workqueue.TypedRateLimitingInterface[string], n int, f func(context.Context, string) (time.Duration, error)) {
		for range n {
			wg.Add(1)
			go func() { defer wg.Done(); worker(ctx, q, f, cfg.Leading, cfg.Log) }()
		}
	}
	run(m.machines, cfg.MachineWorkers, func(ctx context.Context, k string) (time.Duration, error) {
		ns, name, _ := cache.SplitMetaNamespaceKey(k)
		res, err := mr.Reconcile(ctx, ns, name)
		if err == nil {
			if mm, gerr := machines.Lister().MacOSMachines(ns).Get(name); gerr == nil {
				m.reconciled.add(mm.UID)
			}
		}
		return res.RequeueAfter, err
	})
	run(m.pools, cfg.PoolWorkers, func(ctx context.Context, k string) (time.Duration, error) {
		ns, name, _ := cache.SplitMetaNamespaceKey(k)
		return 0, pr.ReconcilePool(ctx, ns, name)
	})
	run(m.claims, cfg.PoolWorkers, func(ctx context.Context, k string) (time.Duration, error) {
		ns, name, _ := cache.SplitMetaNamespaceKey(k)
		return 0, pr.ReconcileClassClaim(ctx, ns, name)
	})
	run(images, 1, func(ctx context.Context, k string) (time.Duration, error) { return ir.Reconcile(ctx, k) })
	run(m.classMachines, 1, func(ctx context.Context, k string) (time.Duration, error) {
		ns, name, _ := cache.SplitMetaNamespaceKey(k)
		return 0, pr.ReconcileClassMachine(ctx, ns, name)
	})
	<-ctx.Done()
	for _, q := range []workqueue.TypedRateLimitingInterface[string]{m.machines, m.pools, m.claims, m.classMachines, images} {
		q.ShutDown()
	}
	wg.Wait()
	return nil
}

// installSessionsOf names the install sessions of image among machines:
// what a change of the image may move on.
func installSessionsOf(machines []*v1alpha1.MacOSMachine, image string) []string {
	var keys []string
	for _, mm := range machines {
		if machine.Installing(mm) && mm.Spec.ImageName == image {
			keys = append(keys, key(mm))
		}
	}
	return keys
}

type queues struct {
	machines, pools, claims, classMachines workqueue.TypedRateLimitingInterface[string]
	machineIndex                           cache.Indexer
	reconciled                             *reconciledMachines
}

// queueNames labels each queue's metrics.
var queueNames = map[workqueue.TypedRateLimitingInterface[string]]string{}

func newQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 2*time.Minute),
		),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
	queueNames[q] = name
	return q
}

// enqueueOwner maps an owned object to its machine through the UID label.
func (q *queues) enqueueOwner(obj any) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	uid := o.GetLabels()[machine.MachineUIDLabel]
	if uid == "" {
		return
	}
	items, _ := q.machineIndex.ByIndex(uidIndex, uid)
	for _, it := range items {
		q.machines.Add(key(it.(metav1.Object)))
	}
}

func key(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// forgetGone drops the prober's answers of machines being torn down or
// gone: nothing asks their agents any more.
func forgetGone(inf cache.SharedIndexInformer, p *machine.Prober) {
	forget := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if mm, ok := obj.(*v1alpha1.MacOSMachine); ok {
			p.Forget(mm.UID)
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if obj.(*v1alpha1.MacOSMachine).DeletionTimestamp != nil {
				forget(obj)
			}
		},
		DeleteFunc: forget,
	})
	runtime.Must(err)
}

// handle passes every event of inf to f.
func handle(inf cache.SharedIndexInformer, f func(any)) {
	handleFiltered(inf, true, func(_, _ any) bool { return true }, f)
}

func allSynced[K comparable](m map[K]bool) bool {
	for _, ok := range m {
		if !ok {
			return false
		}
	}
	return true
}

// notLeadingRetry is how soon a key is tried again while the replica
// cannot say it leads: a renewal takes a RetryPeriod (2 s) or the process
// exits for a lost lease.
const notLeadingRetry = time.Second

func worker(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], f func(context.Context, string) (time.Duration, error),
	leading func() bool, log *slog.Logger) {
	name := queueNames[q]
	for {
		k, quit := q.Get()
		if quit {
			return
		}
		if leading != nil && !leading() {
			// Act on nothing with caches that may be a stall old, while
			// another replica may lead: the key waits, without counting
			// as a failure.
			q.AddAfter(k, notLeadingRetry)
			q.Done(k)
			continue
		}
		after, err := f(ctx, k)
		switch {
		case err != nil && pool.IsRetry(err):
			reconciles.WithLabelValues(name).Inc()
			q.AddRateLimited(k)
		case err != nil:
			reconcileErrors.WithLabelValues(name).Inc()
			log.Error("reconcile failed", "queue", name, "key", k, "error", err.Error())
			q.AddRateLimited(k)
		default:
			reconciles.WithLabelValues(name).Inc()
			q.Forget(k)
			if after > 0 {
				q.AddAfter(k, after)
			}
		}
		q.Done(k)
	}
}
