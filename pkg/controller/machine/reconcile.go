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

package machine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/bootdisk"
	"github.com/dockerios/dockerios/pkg/controller/containerimages"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	dlisters "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/sidecar-hook/annotations"
)

// Annotations the controller keeps on objects it owns: progress that must
// survive a restart lives on objects, never only in memory.
const (
	// BootdiskFailuresAnnotation, on the bootdisk PVC, counts the builder
	// Jobs that failed for the machine; it sets the retry backoff.
	BootdiskFailuresAnnotation = "dockerios.io/bootdisk-failures"
	// PreservedLabel marks a system disk kept after its machine failed
	// (class preserveDiskOnFailure); teardown leaves it.
	PreservedLabel = "dockerios.io/preserved-from-failed-machine"
)

// Timing of the reconciler.
const (
	bootdiskBackoffBase = 10 * time.Second
	bootdiskBackoffMax  = 5 * time.Minute
	// DefaultStorageHoldBack is how long new machines of a class wait after
	// a clone into its StorageClass failed, before one tries again.
	DefaultStorageHoldBack = 5 * time.Minute
	// While a machine starts its agent is asked every quarter of the time
	// since its VM started running, between pollStartingMin and
	// pollStartingMax: quickly when an answer is due, rarely for a slow
	// boot. A Ready machine's agent is asked every pollReady.
	pollStartingMin = 2 * time.Second
	pollStartingMax = 15 * time.Second
	pollReady       = 30 * time.Second
	// agentSeenRefresh: a Ready machine's status is rewritten for the
	// agent's times alone (lastSeenTime and the like) about this often.
	// Liveness is not read from them: AgentReachable and Ready change at
	// the poll that finds a change. Each refresh is an etcd write and a
	// watch event to every client, N÷agentSeenRefresh of them a minute
	// over a fleet of N that says nothing new.
	agentSeenRefresh = 10 * time.Minute
	// teardownPoll is how often teardown looks again while waiting.
	teardownPoll = 2 * time.Second
	// imagesRetry is how often a machine waiting for the images'
	// PodTemplate to be fixed looks again.
	imagesRetry = 15 * time.Second
	// installPoll is how often an install session looks again at its
	// image (its recovery volume, a promotion naming the session) beyond
	// the image's events, which the manager passes on: the safety net.
	installPoll = 30 * time.Second
)

// Condition type on a MacOSMachineClass.
const (
	ClassStorageAvailable = "StorageAvailable"
	ReasonStorageOK       = "CloneSucceeded"
)

// Listers are the informer caches the reconciler reads.
type Listers struct {
	Machines   dlisters.MacOSMachineLister
	Classes    dlisters.MacOSMachineClassLister
	Images     dlisters.MacOSImageLister
	Identities dlisters.MacOSIdentityLister
	// IdentityPools say which pools are on hold after a restore.
	IdentityPools dlisters.MacOSIdentityPoolLister
	Secrets       corelisters.SecretLister
	PVCs          corelisters.PersistentVolumeClaimLister
	Jobs          batchlisters.JobLister
	Nodes         corelisters.NodeLister
	VMs           cache.GenericLister
	VMIs          cache.GenericLister
	DVs           cache.GenericLister
}

// Reconciler reconciles MacOSMachines.
type Reconciler struct {
	Kube     kubernetes.Interface
	Dynamic  dynamic.Interface
	Client   versioned.Interface
	Listers  Listers
	Settings Settings
	// Images, when set, gives the bootdisk and hook sidecar images and the
	// pull secrets in place of Settings', read as each bootdisk Job and
	// VirtualMachine is made (--images-pod-template).
	Images   containerimages.Source
	Recorder record.EventRecorder
	Log      *slog.Logger
	// Prober asks the guest agents, off the reconcile workers; nil asks
	// none (machines stay Starting).
	Prober *Prober
	// Metrics, when set, observes phase changes.
	Metrics *Metrics
	// Fleet, when set, suspends startTimeout during an agent network fault.
	Fleet *FleetWatch
	// StorageHoldBack is DefaultStorageHoldBack when zero.
	StorageHoldBack time.Duration
	Now             func() time.Time

	own     ownWrites
	refresh agentRefresh
}

// Result says when to look at the machine again without an event.
type Result struct{ RequeueAfter time.Duration }

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile brings one machine one step closer to what it should be.
func (r *Reconciler) Reconcile(ctx context.Context, namespace, name string) (Result, error) {
	m, err := r.Listers.Machines.MacOSMachines(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		r.own.forget(types.NamespacedName{Namespace: namespace, Name: name})
		r.refresh.forget(types.NamespacedName{Namespace: namespace, Name: name})
		return Result{}, nil
	}
	if err != nil {
		return Result{}, err
	}
	m = r.own.freshest(m).DeepCopy()
	if m.DeletionTimestamp != nil {
		r.Metrics.done(m.UID, false)
		return r.teardown(ctx, m)
	}
	r.Metrics.reconciled(m)
	o, err := r.observe(m)
	if err != nil {
		return Result{}, err
	}
	if m.Status.Phase == v1alpha1.MachineFailed {
		return r.disposeFailed(ctx, m, o)
	}

	var requeue time.Duration
	if err := r.act(ctx, m, o, &requeue); err != nil {
		return Result{}, err
	}
	// Read before the fault's end (below): FleetWatch records the end
	// before it drops the flag, so a pass that sees no fault sees the end.
	o.NetworkFault = r.Fleet.Fault()
	if o.VMI != nil && o.Secret != nil && o.Class != nil {
		if since, running := VMIRunningSince(o.VMI); running {
			if addr, ok := AgentAddress(o.VMI, o.Class); ok {
				// Never a call to the agent here (one that does not answer
				// would hold this worker for the whole timeout): the
				// prober's last answer, and the prober asks again when due.
				o.AgentAsked = true
				now := r.now()
				if res, ok := r.Prober.Result(ProbeTarget{Namespace: m.Namespace, Name: m.Name, UID: m.UID, Address: addr, Token: o.Secret.Data[TokenSecretKey]},
					agentPoll(m, since, now), answerNeededFrom(m, o, r.Fleet.Over(), now)); ok {
					o.Agent, o.AgentErr, o.AgentSeen, o.AgentUnmoved = res.Status, res.Err, res.At, res.Unmoved
				}
			}
		}
	}
	if !o.AgentAsked {
		r.Prober.Forget(m.UID)
	}

	d := Derive(m, o, r.now())
	if _, err := r.writeStatus(ctx, m, d.Status, o.AgentUnmoved); err != nil {
		return Result{}, err
	}
	if d.Fail != nil {
		r.Recorder.Eventf(m, corev1.EventTypeWarning, d.Fail.Reason, "machine failed: %s", d.Fail.Message)
		if d.Fail.Reason == ReasonCloneFailed && o.Class != nil {
			if err := r.holdBackStorage(ctx, o.Class, m, d.Fail.Message); err != nil {
				return Result{}, err
			}
		}
		return Result{RequeueAfter: time.Second}, nil
	}
	if o.DV != nil && o.DV.Status.Phase == cdiv1.Succeeded && o.Class != nil && !o.ClassGone {
		if err := r.storageRecovered(ctx, o.Class); err != nil {
			return Result{}, err
		}
	}
	if o.StorageHeldBack != "" && o.Class != nil {
		// Look again when the hold-back ends: no event will say so.
		if h := o.Class.Status.StorageHoldBack; h != nil && time.Until(h.Until.Time) > 0 {
			requeue = minPositive(requeue, time.Until(h.Until.Time)+time.Second)
		} else {
			// Waiting for a probe: its outcome changes the class, and
			// that brings this machine back; look now and then anyway.
			requeue = minPositive(requeue, 30*time.Second)
		}
	}
	if o.NodeNotReady != "" && o.Class != nil {
		// The end of the node's grace brings no event: look then.
		requeue = minPositive(requeue, time.Until(o.NodeNotReadySince.Add(NodeLostGracePeriod(o.Class)))+time.Second)
	}
	switch d.Status.Phase {
	case v1alpha1.MachineStarting:
		// The VMI's events, and the prober when the agent says something
		// new, bring the machine back; nothing does when its startTimeout
		// runs out: look then.
		if o.VM != nil && o.Class != nil && !Installing(m) {
			requeue = minPositive(requeue, time.Until(o.VM.CreationTimestamp.Add(startTimeout(o.Class)))+time.Second)
		}
	case v1alpha1.MachineReady:
		requeue = minPositive(requeue, pollReady)
		if at, ok := hungDeadline(&d.Status, o.Class); ok {
			// A silent agent brings no event when its machine's
			// agentUnresponsiveTimeout runs out: look then.
			requeue = minPositive(requeue, time.Until(at)+time.Second)
		}
	}
	return Result{RequeueAfter: requeue}, nil
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// observe reads the machine's world from the caches.
func (r *Reconciler) observe(m *v1alpha1.MacOSMachine) (*Observed, error) {
	o := &Observed{}
	n := NamesFor(m)
	var err error
	live, err := getOrNil(r.Listers.Classes.Get(m.Spec.ClassName))
	if err != nil {
		return nil, err
	}
	o.Class = madeOf(m, live)
	o.ClassGone = live == nil && o.Class != nil
	imageName := m.Spec.ImageName
	if imageName == "" && o.Class != nil {
		imageName = o.Class.Spec.ImageName
	}
	if imageName != "" {
		if o.Image, err = getOrNil(r.Listers.Images.Get(imageName)); err != nil {
			return nil, err
		}
	}
	if ref := m.Status.IdentityRef; ref != nil {
		if o.Identity, err = getOrNil(r.Listers.Identities.Get(ref.Name)); err != nil {
			return nil, err
		}
	}
	secret, err := getOrNil(r.Listers.Secrets.Secrets(m.Namespace).Get(n.TokenSecret))
	if err != nil {
		return nil, err
	}
	if secret != nil && mine(m, secret) {
		o.Secret = secret
	}
	pvc, err := getOrNil(r.Listers.PVCs.PersistentVolumeClaims(m.Namespace).Get(n.BootdiskPVC))
	if err != nil {
		return nil, err
	}
	if pvc != nil && mine(m, pvc) {
		o.PVC = pvc
	}
	if o.Class != nil && o.Identity != nil {
		job, err := getOrNil(r.Listers.Jobs.Jobs(m.Namespace).Get(bootdisk.JobName(m, o.Identity, o.Class)))
		if err != nil {
			return nil, err
		}
		if job != nil && mine(m, job) {
			o.Job = job
		}
	}
	if o.DV, err = ownedExternal[cdiv1.DataVolume](m, r.Listers.DVs, n.SystemDisk); err != nil {
		return nil, err
	}
	if o.VM, err = ownedExternal[kubevirtv1.VirtualMachine](m, r.Listers.VMs, n.VirtualMachine); err != nil {
		return nil, err
	}
	o.SystemDiskLost, o.BootdiskLost, o.TokenLost = o.VM != nil && o.DV == nil, o.VM != nil && o.PVC == nil, o.VM != nil && o.Secret == nil
	if o.VMI, err = external.Get[kubevirtv1.VirtualMachineInstance](r.Listers.VMIs, m.Namespace, n.VirtualMachine); err != nil {
		return nil, err
	}
	if o.VMI != nil && !mine(m, o.VMI) {
		o.VMI = nil
	}
	if o.Class != nil && o.DV == nil {
		o.StorageHeldBack, o.StorageProbe = r.heldBack(o.Class, m)
	}
	if o.Class != nil && o.Image != nil && o.DV == nil && o.VM == nil {
		// Read when the system disk is made, like the image itself: a
		// machine made runs what it was made from.
		o.ReleaseUnsupported = releaseUnsupported(o.Class, o.Image)
	}
	if Installing(m) {
		if o.RecoveryDV, err = ownedExternal[cdiv1.DataVolume](m, r.Listers.DVs, n.RecoveryDisk); err != nil {
			return nil, err
		}
		o.RecoveryNotReady = recoveryNotReady(o.Image)
		if o.Promotion, err = r.promotion(m); err != nil {
			return nil, err
		}
	}
	if o.VMI != nil && o.VMI.Status.NodeName != "" && r.Listers.Nodes != nil {
		o.NodeNotReady, o.NodeNotReadySince = nodeNotReady(r.Listers.Nodes, o.VMI.Status.NodeName)
	}
	return o, nil
}

// madeOf is the class m is made from: the class as it is (its status, so
// the storage hold-back of the class as it is applies), with the spec the
// apiserver recorded when m was created, so that editing a class changes
// only machines made afterwards (rule 10). A class deleted since takes
// nothing from the machines made of it either: they are made, and run,
// from their snapshot alone (a class with no status: no hold-back). A
// machine recorded before snapshots were is made from the class as it is,
// and has none once it is deleted.
func madeOf(m *v1alpha1.MacOSMachine, class *v1alpha1.MacOSMachineClass) *v1alpha1.MacOSMachineClass {
	if m.Status.ClassSnapshot == nil {
		return class
	}
	if class == nil {
		return &v1alpha1.MacOSMachineClass{ObjectMeta: metav1.ObjectMeta{Name: m.Spec.ClassName},
			Spec: *m.Status.ClassSnapshot.Spec.DeepCopy()}
	}
	made := class.DeepCopy()
	made.Spec = *m.Status.ClassSnapshot.Spec.DeepCopy()
	return made
}

func getOrNil[T any](obj *T, err error) (*T, error) {
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

// mine says whether obj is this machine's, not a leftover of an earlier
// machine of the same name still being torn down.
func mine(m *v1alpha1.MacOSMachine, obj metav1.Object) bool {
	return obj.GetLabels()[MachineUIDLabel] == string(m.UID)
}

func ownedExternal[T any](m *v1alpha1.MacOSMachine, l cache.GenericLister, name string) (*T, error) {
	obj, err := external.Get[T](l, m.Namespace, name)
	if err != nil || obj == nil {
		return nil, err
	}
	if mo, ok := any(obj).(metav1.Object); ok && !mine(m, mo) {
		return nil, nil
	}
	return obj, nil
}

// act creates what is missing, in dependency order.
func (r *Reconciler) act(ctx context.Context, m *v1alpha1.MacOSMachine, o *Observed, requeue *time.Duration) error {
	if m.Status.IdentityRef != nil && o.Identity == nil {
		// Allocated from an identity the cache has not shown yet (one
		// just added to the pool); identities are not watched per machine.
		*requeue = minPositive(*requeue, time.Second)
	}
	if o.Class != nil && o.Image == nil {
		// Images are not watched per machine either.
		*requeue = minPositive(*requeue, 10*time.Second)
	}
	if m.Status.IdentityRef == nil || o.Identity == nil || o.Class == nil {
		return nil
	}
	if why := r.identityInDoubt(o.Identity); why != "" {
		// A VM may run with these values for a machine the restored
		// ledger does not know: start nothing with them until the
		// ledger guard has compared (and a person resolved) it.
		r.Recorder.Eventf(m, corev1.EventTypeWarning, "IdentityInDoubt", "nothing is started with MacOSIdentity %s: %s", o.Identity.Name, why)
		*requeue = minPositive(*requeue, 15*time.Second)
		return nil
	}
	if o.ReleaseUnsupported != "" {
		// Nothing is made for a machine its class's model cannot boot.
		// The class snapshot never changes; the image may: look again.
		*requeue = minPositive(*requeue, 30*time.Second)
		return nil
	}
	if Installing(m) {
		// The image's events reach its install sessions (manager); this
		// is the safety net for one missed.
		*requeue = minPositive(*requeue, installPoll)
		if err := r.runStrategy(ctx, m, o); err != nil {
			return err
		}
	}
	if o.Secret == nil && !o.TokenLost {
		if ok, err := r.mayMake(ctx, m, o, requeue); !ok {
			return err
		}
		s, err := r.ensureSecret(ctx, m)
		if err != nil {
			return err
		}
		o.Secret = s
	}
	identityReady, err := r.ensureIdentitySecret(ctx, m, o, requeue)
	if err != nil {
		return err
	}
	if o.PVC == nil && !o.BootdiskLost {
		if ok, err := r.mayMake(ctx, m, o, requeue); !ok {
			return err
		}
		pvc, err := r.Kube.CoreV1().PersistentVolumeClaims(m.Namespace).Create(ctx, BootdiskPVC(m, o.Class), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Made by an earlier pass the cache has not shown yet.
			pvc, err = r.Kube.CoreV1().PersistentVolumeClaims(m.Namespace).Get(ctx, NamesFor(m).BootdiskPVC, metav1.GetOptions{})
			if err == nil {
				if err := foreign(m, pvc, "PersistentVolumeClaim"); err != nil {
					return err
				}
			}
		}
		if err != nil {
			return fmt.Errorf("creating bootdisk PersistentVolumeClaim: %w", err)
		}
		o.PVC = pvc
	}
	if err := r.bootdisk(ctx, m, o, identityReady, requeue); err != nil {
		return err
	}
	if o.DV == nil && !o.SystemDiskLost && o.Image != nil && o.StorageHeldBack == "" && o.StorageProbe {
		// The hold-back is over and nobody probes the storage yet: this
		// machine does, if its claim on it lands first.
		if err := r.claimProbe(ctx, o.Class, m); err != nil {
			o.StorageHeldBack = fmt.Sprintf("new system disks of class %s wait for one machine to try the storage again (%v)", o.Class.Name, err)
			*requeue = minPositive(*requeue, time.Second)
		}
	}
	if Installing(m) && o.RecoveryDV == nil && o.Image != nil && o.RecoveryNotReady == "" {
		if err := r.createRecoveryDisk(ctx, m, o, requeue); err != nil {
			return err
		}
	}
	if o.DV == nil && !o.SystemDiskLost && o.Image != nil && o.StorageHeldBack == "" {
		dv, err := SystemDisk(m, o.Class, o.Image)
		if Installing(m) {
			dv, err = InstallSystemDisk(m, o.Class), nil
		}
		if err != nil {
			return err
		}
		if ok, err := r.mayMake(ctx, m, o, requeue); !ok {
			return err
		}
		if err := external.Create(ctx, r.Dynamic, external.DataVolumes, dv); apierrors.IsAlreadyExists(err) {
			if err := r.alreadyMine(ctx, m, external.DataVolumes, "DataVolume", dv.Name); err != nil {
				return err
			}
			*requeue = minPositive(*requeue, time.Second) // the cache is behind
		} else if err != nil {
			return fmt.Errorf("creating system disk DataVolume: %w", err)
		} else {
			// Derived as it will be seen (no status yet), so this pass
			// writes what the next one would, not a status of its own.
			o.DV = dv
			if Installing(m) {
				r.Recorder.Eventf(m, corev1.EventTypeNormal, "CreatingSystemDisk", "creating blank system disk DataVolume %s for the install session of MacOSImage %s", dv.Name, o.Image.Name)
			} else {
				r.Recorder.Eventf(m, corev1.EventTypeNormal, "CloningSystemDisk", "cloning MacOSImage %s into DataVolume %s", o.Image.Name, dv.Name)
			}
		}
	}
	bootdiskDone := false
	if o.Job != nil {
		typ, _ := JobFinished(o.Job)
		bootdiskDone = typ == batchv1.JobComplete
	}
	recoveryDone := !Installing(m) || (o.RecoveryDV != nil && o.RecoveryDV.Status.Phase == cdiv1.Succeeded)
	if o.VM == nil && bootdiskDone && o.DV != nil && o.DV.Status.Phase == cdiv1.Succeeded && recoveryDone {
		// Without the OSK Secret the launcher pod would wait on its volume
		// with nothing on the machine saying why: say it here instead.
		if _, err := r.Kube.CoreV1().Secrets(m.Namespace).Get(ctx, r.Settings.OSKSecretName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			o.OSKSecretMissing = fmt.Sprintf("Secret %s/%s with Apple's SMC key (key %q) does not exist; the VirtualMachine starts once it does (see artifacts/kubevirt/README.md)",
				m.Namespace, r.Settings.OSKSecretName, annotations.OSKSecretKey)
			*requeue = minPositive(*requeue, 15*time.Second)
			return nil
		} else if err != nil {
			return fmt.Errorf("reading the OSK Secret: %w", err)
		}
		settings, ok, err := r.settingsFor(ctx, m, o, requeue)
		if !ok {
			return err
		}
		// An install session being promoted is made stopped.
		vm, err := VirtualMachine(m, o.Class, o.Identity, settings, o.Promotion == nil)
		if err != nil {
			return err
		}
		if ok, err := r.mayMake(ctx, m, o, requeue); !ok {
			return err
		}
		if err := external.Create(ctx, r.Dynamic, external.VirtualMachines, vm); apierrors.IsAlreadyExists(err) {
			if err := r.alreadyMine(ctx, m, external.VirtualMachines, "VirtualMachine", vm.Name); err != nil {
				return err
			}
			*requeue = minPositive(*requeue, time.Second) // the cache is behind
		} else if err != nil {
			return fmt.Errorf("creating VirtualMachine: %w", err)
		} else if Installing(m) {
			r.Recorder.Eventf(m, corev1.EventTypeNormal, "Starting", "bootdisk, recovery disk and blank system disk ready; started VirtualMachine %s: open its console with virtctl vnc %s -n %s", vm.Name, vm.Name, m.Namespace)
		} else {
			r.Recorder.Eventf(m, corev1.EventTypeNormal, "Starting", "bootdisk and system disk ready; started VirtualMachine %s", vm.Name)
		}
	}
	return nil
}

// alreadyMine reads the object a create found already there: nil when it
// is the machine's (made by an earlier pass the cache has not shown yet:
// look again in a second) or gone since, and foreign's error otherwise —
// retried with the queue's backoff, not every second, and without another
// Event.
func (r *Reconciler) alreadyMine(ctx context.Context, m *v1alpha1.MacOSMachine, gvr schema.GroupVersionResource, kind, name string) error {
	u, err := r.Dynamic.Resource(gvr).Namespace(m.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // gone since: the next pass makes it
	}
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	return foreign(m, u, kind)
}

// foreign is nil when obj, found under one of m's names, is m's, and
// otherwise the error that says whose it may be: a predecessor's of the
// same name still being torn down, or one whose machine-uid label was
// removed or changed by hand. Nothing of m's is made over it.
func foreign(m *v1alpha1.MacOSMachine, obj metav1.Object, kind string) error {
	if mine(m, obj) {
		return nil
	}
	return fmt.Errorf("%s %s is not this machine's: it belongs to another machine of this name, or its label %s was changed (%q, not %q); waiting for it to go",
		kind, obj.GetName(), MachineUIDLabel, obj.GetLabels()[MachineUIDLabel], m.UID)
}

// ensureSecret creates the machine's token Secret, or reads the one a
// previous reconcile created: the token never changes once written,
// because the bootdisk carries it.
func (r *Reconciler) ensureSecret(ctx context.Context, m *v1alpha1.MacOSMachine) (*corev1.Secret, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	token := []byte(hex.EncodeToString(raw))
	s, err := r.Kube.CoreV1().Secrets(m.Namespace).Create(ctx, TokenSecret(m, token), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		s, err = r.Kube.CoreV1().Secrets(m.Namespace).Get(ctx, NamesFor(m).TokenSecret, metav1.GetOptions{})
		if err == nil && s.Labels[MachineUIDLabel] != string(m.UID) {
			return nil, fmt.Errorf("Secret %s belongs to another machine of this name; waiting for its teardown", s.Name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("agent token Secret: %w", err)
	}
	return s, nil
}

// ensureIdentitySecret makes sure the machine's identity Secret exists and
// holds the values of the identity it holds, creating it when missing
// (first time, after a crash, or deleted by someone): it is derived from
// the identity alone, so every pass makes the same one. It says whether
// the Secret is there for the bootdisk Job to mount; one holding other
// values (never made by this controller for this identity) is deleted and
// made again on a later pass.
func (r *Reconciler) ensureIdentitySecret(ctx context.Context, m *v1alpha1.MacOSMachine, o *Observed, requeue *time.Duration) (bool, error) {
	want := IdentitySecret(m, o.Identity)
	secrets := r.Kube.CoreV1().Secrets(m.Namespace)
	s, err := getOrNil(r.Listers.Secrets.Secrets(m.Namespace).Get(want.Name))
	if err != nil {
		return false, err
	}
	if s == nil {
		if ok, err := r.mayMake(ctx, m, o, requeue); !ok {
			return false, err
		}
		created, err := secrets.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Made by an earlier pass the cache has not shown yet.
			created, err = secrets.Get(ctx, want.Name, metav1.GetOptions{})
		}
		if err != nil {
			return false, fmt.Errorf("identity Secret: %w", err)
		}
		s = created
	}
	if err := foreign(m, s, "Secret"); err != nil {
		return false, err
	}
	if !apiequality.Semantic.DeepEqual(s.Data, want.Data) {
		// Immutable: replaced, never updated. The bootdisk waits for it.
		if err := ignoreGone(secrets.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})); err != nil {
			return false, fmt.Errorf("replacing identity Secret %s: %w", s.Name, err)
		}
		*requeue = minPositive(*requeue, time.Second)
		return false, nil
	}
	return true, nil
}

// bootdisk runs the builder Job, and retries a failed one with backoff
// while the machine keeps its identity. The failure count lives on the
// PVC, so a restart neither forgets nor resets it. The Job is created only
// once the identity Secret it mounts is there (identityReady).
func (r *Reconciler) bootdisk(ctx context.Context, m *v1alpha1.MacOSMachine, o *Observed, identityReady bool, requeue *time.Duration) error {
	if o.PVC == nil {
		return nil
	}
	failures, _ := strconv.Atoi(o.PVC.Annotations[BootdiskFailuresAnnotation])
	if o.Job == nil && (!identityReady || o.VM != nil) {
		// With the VirtualMachine there, the bootdisk was rendered (the VM
		// is made only after its Job succeeded) and the VM boots from it: a
		// Job deleted since (by hand, or a cleanup of finished Jobs) is
		// never run again, or it would rewrite the disk under the guest.
		return nil
	}
	if o.Job == nil {
		settings, ok, err := r.settingsFor(ctx, m, o, requeue)
		if !ok {
			return err
		}
		job, err := BootdiskJob(m, o.Identity, o.Class, settings)
		if err != nil {
			return err
		}
		if ok, err := r.mayMake(ctx, m, o, requeue); !ok {
			return err
		}
		created, err := r.Kube.BatchV1().Jobs(m.Namespace).Create(ctx, job, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			live, err := r.Kube.BatchV1().Jobs(m.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
			if err == nil {
				if err := foreign(m, live, "Job"); err != nil {
					return err
				}
			}
			*requeue = minPositive(*requeue, time.Second) // the cache is behind
			return nil
		}
		if err != nil {
			return fmt.Errorf("creating bootdisk Job: %w", err)
		}
		o.Job = created
		if failures > 0 {
			r.Recorder.Eventf(m, corev1.EventTypeNormal, "BootdiskRetry", "retrying the bootdisk (attempt %d) with Job %s", failures+1, job.Name)
		}
		return nil
	}
	typ, c := JobFinished(o.Job)
	if typ != batchv1.JobFailed {
		return nil
	}
	exit, err := r.builderExit(ctx, o.Job)
	if err != nil {
		return err
	}
	o.BootdiskExit = exit
	if exit != nil && exit.Code == bootdisk.ExitInvalidInput {
		// The same input fails again: no retry; Derive fails the machine,
		// which gives its identity back.
		return nil
	}
	backoff := bootdiskBackoffBase << min(failures, 10)
	if backoff > bootdiskBackoffMax {
		backoff = bootdiskBackoffMax
	}
	retryAt := c.LastTransitionTime.Add(backoff)
	if wait := retryAt.Sub(r.now()); wait > 0 {
		o.BootdiskRetry = fmt.Sprintf("retry %d in %s (the identity is kept)", failures+1, wait.Round(time.Second))
		*requeue = minPositive(*requeue, wait)
		return nil
	}
	// Count the failure before deleting the Job: a crash in between
	// counts it twice at worst, never forgets it.
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations":     map[string]string{BootdiskFailuresAnnotation: strconv.Itoa(failures + 1)},
		"resourceVersion": o.PVC.ResourceVersion,
	}})
	if _, err := r.Kube.CoreV1().PersistentVolumeClaims(m.Namespace).Patch(ctx, o.PVC.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("recording the bootdisk failure: %w", err)
	}
	r.Recorder.Eventf(m, corev1.EventTypeWarning, "BootdiskJobFailed", "Job %s failed (%s: %s)%s; retrying", o.Job.Name, c.Reason, c.Message, exit.said())
	if err := r.Kube.BatchV1().Jobs(m.Namespace).Delete(ctx, o.Job.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		Preconditions:     &metav1.Preconditions{UID: &o.Job.UID},
	}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting failed bootdisk Job: %w", err)
	}
	o.Job = nil
	o.BootdiskRetry = fmt.Sprintf("retry %d starting", failures+1)
	*requeue = minPositive(*requeue, time.Second)
	return nil
}

// settingsFor is r.Settings with the images and pull secrets to give an
// object made now. ok is false when none is to be made this pass: err
// then says why, unless the images cannot be known until the
// configuration is fixed (containerimages.UnavailableError): then the
// machine says so (o.ImagesUnavailable, which Derive turns into a
// condition, and an Event) and looks again shortly, for nothing watches
// the PodTemplate. It never makes the object from other images than the
// ones asked for.
func (r *Reconciler) settingsFor(ctx context.Context, m *v1alpha1.MacOSMachine, o *Observed, requeue *time.Duration) (Settings, bool, error) {
	s := r.Settings
	if r.Images == nil {
		return s, true, nil
	}
	images, err := r.Images.Images(ctx)
	if containerimages.IsUnavailable(err) {
		o.ImagesUnavailable = err.Error() + "; machines wait until it is fixed"
		r.Recorder.Eventf(m, corev1.EventTypeWarning, ReasonImagesUnavailable, "%s", o.ImagesUnavailable)
		*requeue = minPositive(*requeue, imagesRetry)
		return s, false, nil
	}
	if err != nil {
		return s, false, err
	}
	s.BootdiskImage, s.HookSidecarImage, s.ImagePullSecrets = images.Bootdisk, images.HookSidecar, images.PullSecrets
	return s, true, nil
}

// builderExit reads how the bootdisk builder of a failed Job ended — its
// exit status and the one-line reason it wrote as its termination message,
// which the Job controller does not copy into the Job — from the Job's
// most recent failed pod; nil when no pod says (already collected).
func (r *Reconciler) builderExit(ctx context.Context, job *batchv1.Job) (*BuilderExit, error) {
	pods, err := r.Kube.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: batchv1.ControllerUidLabel + "=" + string(job.UID)})
	if err != nil {
		return nil, fmt.Errorf("reading the bootdisk builder's pods: %w", err)
	}
	var last *BuilderExit
	var lastAt time.Time
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			t := cs.State.Terminated
			if cs.Name != bootdisk.ContainerName || t == nil || t.ExitCode == 0 {
				continue
			}
			if last == nil || t.FinishedAt.After(lastAt) {
				last, lastAt = &BuilderExit{Code: t.ExitCode, Message: strings.TrimSpace(t.Message)}, t.FinishedAt.Time
			}
		}
	}
	return last, nil
}

// writeStatus writes the derived status when it says something new, and
// returns the machine as it now is: the write's answer, or m when nothing
// was written. A later write of the same pass conditioned on the machine's
// resourceVersion must use it, or it conflicts with this one.
//
// A status that differs only in the agent's times is written when the
// refresh is due (agentRefresh), or at once when the agent stopped moving
// on (agentUnmoved: two answers in a row with one observedAt) in a machine
// that has been Ready, and the stored status does not hold the observedAt
// it repeats: stored, it stops lastProgressTime, and the machine is found
// hung agentUnresponsiveTimeout later. (Only a machine that has been Ready
// can be found hung; while one starts, its agent is asked every 2 to 15
// seconds, often twice within one of the agent's own polls.)
func (r *Reconciler) writeStatus(ctx context.Context, m *v1alpha1.MacOSMachine, st v1alpha1.MacOSMachineStatus, agentUnmoved bool) (*v1alpha1.MacOSMachine, error) {
	switch statusNews(&m.Status, &st) {
	case nothingNew:
		return m, nil
	case agentTimesOnly:
		if !(agentUnmoved && WasReady(m) && observedMoved(m.Status.Agent, st.Agent)) && !r.refresh.due(m, r.now()) {
			return m, nil
		}
	}
	old := m.Status.Phase
	updated := m.DeepCopy()
	updated.Status = st
	written, err := r.Client.DockeriosV1alpha1().MacOSMachines(m.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("writing status: %w", err)
	}
	r.own.remember(m.ResourceVersion, written)
	if old != st.Phase {
		r.Log.Info("machine phase", "namespace", m.Namespace, "machine", m.Name, "from", old, "to", st.Phase)
		if r.Metrics != nil {
			r.Metrics.phaseChanged(m, &st, r.now())
		}
		if st.Phase == v1alpha1.MachineReady {
			r.Recorder.Eventf(m, corev1.EventTypeNormal, "Ready", "the guest agent reports Ready")
		}
	}
	if hung := (&v1alpha1.MacOSMachine{Status: st}); Hung(hung) && !Hung(m) {
		// The phase stays Ready: without an Event, the owner of a claimed
		// machine (which nothing replaces) learns it hangs only from its
		// conditions.
		r.Recorder.Eventf(m, corev1.EventTypeWarning, ReasonAgentUnresponsive, "%s",
			meta.FindStatusCondition(st.Conditions, v1alpha1.MachineConditionReady).Message)
	}
	return written, nil
}

// statusNewsKind is what a derived status says beyond the stored one.
type statusNewsKind int

const (
	nothingNew statusNewsKind = iota
	// agentTimesOnly: only the agent's lastSeenTime, observedTime and
	// lastProgressTime, and its free disk space, which moves with every
	// file the guest writes (a guest short of space says so at once
	// through its stage and message: the agent's disk floor check). They
	// change at every poll; written each time, every Ready machine would
	// be a write at every poll.
	agentTimesOnly
	somethingNew
)

// statusNews is what the derived status new says beyond the stored old.
func statusNews(old, new *v1alpha1.MacOSMachineStatus) statusNewsKind {
	if apiequality.Semantic.DeepEqual(old, new) {
		return nothingNew
	}
	if old.Agent == nil || new.Agent == nil || old.Agent.LastSeenTime == nil || new.Agent.LastSeenTime == nil {
		return somethingNew
	}
	a := old.DeepCopy()
	a.Agent.LastSeenTime, a.Agent.ObservedTime, a.Agent.LastProgressTime = new.Agent.LastSeenTime, new.Agent.ObservedTime, new.Agent.LastProgressTime
	if (a.Agent.DiskFreeBytes == nil) == (new.Agent.DiskFreeBytes == nil) {
		a.Agent.DiskFreeBytes = new.Agent.DiskFreeBytes
	}
	if !apiequality.Semantic.DeepEqual(a, new) {
		return somethingNew
	}
	return agentTimesOnly
}

// observedMoved says whether the new report's observedTime is another
// than the stored one (in whole seconds, as stored).
func observedMoved(old, new *v1alpha1.AgentReport) bool {
	if old == nil || new == nil || old.ObservedTime == nil || new.ObservedTime == nil {
		return (old == nil || old.ObservedTime == nil) != (new == nil || new.ObservedTime == nil)
	}
	return old.ObservedTime.Unix() != new.ObservedTime.Unix()
}

func (r *Reconciler) holdBack() time.Duration {
	if r.StorageHoldBack > 0 {
		return r.StorageHoldBack
	}
	return DefaultStorageHoldBack
}

// maxHoldBack bounds the doubling wait after clones fail in a row.
const maxHoldBack = time.Hour

// heldBack says why m, which has no system disk yet, must wait before
// cloning into its class's StorageClass ("" when it need not), and whether
// it may become the machine that tries the storage again (the probe):
// while the class's hold-back runs, every new machine waits; once it is
// over, one machine clones and the others wait for its outcome.
func (r *Reconciler) heldBack(class *v1alpha1.MacOSMachineClass, m *v1alpha1.MacOSMachine) (string, bool) {
	h := class.Status.StorageHoldBack
	if h == nil {
		return "", false
	}
	if now := r.now(); now.Before(h.Until.Time) {
		return fmt.Sprintf("new system disks of class %s are held back until %s after %d failed clone(s) into StorageClass %s",
			class.Name, h.Until.UTC().Format(time.RFC3339), h.Failures, storageClassOf(class)), false
	}
	me := m.Namespace + "/" + m.Name
	switch {
	case h.Probe == me:
		return "", false
	case h.Probe != "" && r.probeAlive(h.Probe):
		return fmt.Sprintf("new system disks of class %s wait for machine %s, which is trying StorageClass %s again", class.Name, h.Probe, storageClassOf(class)), false
	}
	return "", true
}

// probeAlive says whether the probe machine still exists and may still
// clone: a probe deleted or failed otherwise must not hold the others back.
func (r *Reconciler) probeAlive(probe string) bool {
	ns, name, ok := strings.Cut(probe, "/")
	if !ok || r.Listers.Machines == nil {
		return false
	}
	p, err := r.Listers.Machines.MacOSMachines(ns).Get(name)
	return err == nil && p.DeletionTimestamp == nil && p.Status.Phase != v1alpha1.MachineFailed
}

// claimProbe records m as the class's probe; only one write of the class's
// status lands (its resourceVersion), so only one machine probes.
func (r *Reconciler) claimProbe(ctx context.Context, class *v1alpha1.MacOSMachineClass, m *v1alpha1.MacOSMachine) error {
	c := class.DeepCopy()
	c.Status.StorageHoldBack.Probe = m.Namespace + "/" + m.Name
	if _, err := r.Client.DockeriosV1alpha1().MacOSMachineClasses().UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		return err
	}
	r.Recorder.Eventf(class, corev1.EventTypeNormal, "StorageProbe", "machine %s/%s tries StorageClass %s again after %d failed clone(s); the class's other new machines wait for its outcome",
		m.Namespace, m.Name, storageClassOf(class), class.Status.StorageHoldBack.Failures)
	return nil
}

// holdBackStorage marks every class cloning into the failed machine's
// StorageClass: StorageAvailable=False, restarting the hold-back clock.
func (r *Reconciler) holdBackStorage(ctx context.Context, class *v1alpha1.MacOSMachineClass, m *v1alpha1.MacOSMachine, msg string) error {
	classes, err := r.Listers.Classes.List(everything)
	if err != nil {
		return err
	}
	sc := storageClassOf(class)
	for _, c := range classes {
		if storageClassOf(c) != sc {
			continue
		}
		c = c.DeepCopy()
		failures := int32(1)
		if h := c.Status.StorageHoldBack; h != nil {
			if r.now().Before(h.Until.Time) && h.Probe != m.Namespace+"/"+m.Name {
				// Another clone of the same round failing (one that started
				// before the hold-back): the round is already counted.
				continue
			}
			failures = h.Failures + 1
		}
		wait := min(r.holdBack()<<min(max(failures-1, 0), 16), maxHoldBack)
		c.Status.StorageHoldBack = &v1alpha1.StorageHoldBack{Failures: failures, Until: metav1.NewTime(r.now().Add(wait))}
		meta.RemoveStatusCondition(&c.Status.Conditions, ClassStorageAvailable)
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: ClassStorageAvailable, Status: metav1.ConditionFalse,
			Reason: ReasonCloneFailed, ObservedGeneration: c.Generation, LastTransitionTime: metav1.NewTime(r.now()),
			Message: fmt.Sprintf("cloning machine %s/%s into StorageClass %s failed (%s), %d time(s) in a row; new machines wait %s, then one tries again",
				m.Namespace, m.Name, sc, msg, failures, wait)})
		if _, err := r.Client.DockeriosV1alpha1().MacOSMachineClasses().UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("holding back class %s: %w", c.Name, err)
		}
		r.Recorder.Eventf(c, corev1.EventTypeWarning, "StorageHeldBack", "clone into StorageClass %s failed for machine %s/%s (%d in a row); holding new machines back for %s, then one tries", sc, m.Namespace, m.Name, failures, wait)
	}
	return nil
}

// storageRecovered clears the hold-back once a clone into the class's
// StorageClass succeeds.
func (r *Reconciler) storageRecovered(ctx context.Context, class *v1alpha1.MacOSMachineClass) error {
	c := meta.FindStatusCondition(class.Status.Conditions, ClassStorageAvailable)
	if c != nil && c.Status == metav1.ConditionTrue && class.Status.StorageHoldBack == nil {
		return nil
	}
	class = class.DeepCopy()
	class.Status.StorageHoldBack = nil
	meta.SetStatusCondition(&class.Status.Conditions, metav1.Condition{Type: ClassStorageAvailable, Status: metav1.ConditionTrue,
		Reason: ReasonStorageOK, ObservedGeneration: class.Generation, LastTransitionTime: metav1.NewTime(r.now()),
		Message: fmt.Sprintf("system disks clone into StorageClass %s", storageClassOf(class))})
	if _, err := r.Client.DockeriosV1alpha1().MacOSMachineClasses().UpdateStatus(ctx, class, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

func storageClassOf(c *v1alpha1.MacOSMachineClass) string {
	if sc := c.Spec.SystemDisk.StorageClassName; sc != nil {
		return *sc
	}
	return "(default)"
}

// nodeNotReady returns why a node is not Ready and since when, or "" when
// it is (or is not known: a node absent from the cache is not evidence of
// loss).
func nodeNotReady(l corelisters.NodeLister, name string) (string, time.Time) {
	n, err := l.Get(name)
	if err != nil {
		return "", time.Time{}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return "", time.Time{}
			}
			return fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message), c.LastTransitionTime.Time
		}
	}
	return "", time.Time{}
}

// identityInDoubt says, from the cache, why nothing may be started with
// id now (see doubt). "" when nothing is known against it.
func (r *Reconciler) identityInDoubt(id *v1alpha1.MacOSIdentity) string {
	var pool *v1alpha1.MacOSIdentityPool
	if r.Listers.IdentityPools != nil {
		if p, err := r.Listers.IdentityPools.Get(id.Spec.PoolName); err == nil {
			pool = p
		}
	}
	return doubt(id, pool)
}

// doubt says why nothing may be started with id: a VM the ledger does not
// record as its holder runs with it, or its pool (nil: not known) is on
// hold after a restore (the ledger guard has not yet compared what runs
// with the ledger). "" when neither. The cached look (identityInDoubt)
// and the live one before making anything (readLedger) both ask it.
func doubt(id *v1alpha1.MacOSIdentity, pool *v1alpha1.MacOSIdentityPool) string {
	if c := meta.FindStatusCondition(id.Status.Conditions, v1alpha1.IdentityHeldOutsideLedger); c != nil && c.Status == metav1.ConditionTrue {
		return c.Message
	}
	if pool == nil {
		return ""
	}
	if c := meta.FindStatusCondition(pool.Status.Conditions, v1alpha1.IdentityPoolOnHold); c != nil && c.Status == metav1.ConditionTrue {
		return "its MacOSIdentityPool " + pool.Name + " is on hold: " + c.Message
	}
	return ""
}
