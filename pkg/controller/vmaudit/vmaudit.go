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

// Package vmaudit compares what the cluster runs with the identity
// ledger. The ledger is the apiserver's, in its etcd; the VMs are
// KubeVirt's, in kube-apiserver's. They agree by construction — a VM is made
// only for a machine that holds its identity, and an identity is given back
// only once the machine's objects are gone — until the ledger is restored
// from a snapshot older than the fleet. Then an identity the ledger thinks
// free (or held by another machine) may be the one a running VM boots with.
//
// The guard finds every such identity — a VirtualMachine or
// VirtualMachineInstance the controller made whose firmware serial is the
// identity's while the ledger does not record that VM's machine as the
// holder, or an identity Secret of a machine the ledger does not know — and
// reports it through the identity's HeldOutsideLedger condition, which
// takes it out of allocation in the same write. It never deletes the VM:
// which of the two is right is a person's call. Once a sweep has reported
// everything it found, it lifts the hold a restore puts every pool on.
package vmaudit

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/client-go/tools/record"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/bootdisk"
	"github.com/dockerios/dockerios/pkg/controller/external"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	dlisters "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

// Labels the controller puts on what it makes (package machine's; repeated
// here so this package does not import the machine reconciler).
const (
	machineUIDLabel = bootdisk.MachineUIDLabel
	managedByLabel  = "app.kubernetes.io/managed-by"
	managedByValue  = "dockerios-controller"
	// identitySecretSuffix ends the name of a machine's identity Secret.
	identitySecretSuffix = "-identity"
)

// Event reasons.
const (
	EventHeldOutsideLedger = "IdentityHeldOutsideLedger"
	EventHolderGone        = "IdentityHolderGone"
	EventOrphanedVM        = "RunsWithIdentityLedgerDoesNotRecord"
	EventUnknownIdentity   = "RunsWithIdentityNotInLedger"
	EventPoolHoldLifted    = "PoolHoldLifted"
)

// Guard sweeps the cluster against the ledger.
type Guard struct {
	Client     versioned.Interface
	Identities dlisters.MacOSIdentityLister
	Machines   dlisters.MacOSMachineLister
	Pools      dlisters.MacOSIdentityPoolLister
	VMs, VMIs  cache.GenericLister
	Secrets    corelisters.SecretLister
	Recorder   record.EventRecorder
	Log        *slog.Logger
	// Leading says whether this replica may write now.
	Leading func() bool

	// liftHold lifts a pool's hold (DELETE macosidentitypools/NAME/hold
	// when nil); tests replace it, fake clientsets having no REST client.
	liftHold func(ctx context.Context, pool string) error
}

// user is an object that runs with (or carries) an identity's values.
type user struct {
	kind, namespace, name, machineUID string
	obj                               runtime.Object
}

func (u user) String() string {
	return fmt.Sprintf("%s %s/%s (machine uid %s)", u.kind, u.namespace, u.name, u.machineUID)
}

// Run sweeps every interval until ctx ends.
func (g *Guard) Run(ctx context.Context, interval time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if g.Leading != nil && !g.Leading() {
			return
		}
		if err := g.Sweep(ctx); err != nil && ctx.Err() == nil {
			g.Log.Error("Comparing running VMs with the identity ledger failed; retrying", "err", err)
		}
	}, interval)
}

// Sweep compares once, reports what it finds and lifts pools' holds if it
// could report everything.
func (g *Guard) Sweep(ctx context.Context) error {
	identities, machines, err := g.ledger(ctx)
	if err != nil {
		return err
	}
	bySerial := make(map[string]*v1alpha1.MacOSIdentity, len(identities))
	for _, id := range identities {
		bySerial[id.Spec.SerialNumber] = id
	}
	knownMachine := map[string]bool{}
	for _, m := range machines {
		knownMachine[string(m.UID)] = true
	}

	users := map[string][]user{} // by identity name
	note := func(u user, serial string, strict bool) {
		id := bySerial[serial]
		if id == nil {
			if serial != "" && u.kind != "Secret" {
				g.Recorder.Eventf(u.obj, corev1.EventTypeWarning, EventUnknownIdentity,
					"runs with serial number %s, which no MacOSIdentity of the ledger has; DockerIOS does not delete it", serial)
			}
			return
		}
		if a := id.Status.Allocation; a != nil && a.MachineUID == u.machineUID {
			return
		}
		if !strict && knownMachine[u.machineUID] {
			// An identity Secret of a machine the ledger knows: the
			// machine's teardown removes it.
			return
		}
		users[id.Name] = append(users[id.Name], u)
	}
	sel := labels.SelectorFromSet(labels.Set{managedByLabel: managedByValue})
	vms, err := g.VMs.List(sel)
	if err != nil {
		return err
	}
	for _, obj := range vms {
		vm, err := external.FromUnstructured[kubevirtv1.VirtualMachine](asUnstructured(obj))
		if err != nil || vm.Spec.Template == nil || vm.Spec.Template.Spec.Domain.Firmware == nil {
			continue
		}
		note(user{kind: "VirtualMachine", namespace: vm.Namespace, name: vm.Name, machineUID: vm.Labels[machineUIDLabel], obj: obj},
			vm.Spec.Template.Spec.Domain.Firmware.Serial, true)
	}
	vmis, err := g.VMIs.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, obj := range vmis {
		vmi, err := external.FromUnstructured[kubevirtv1.VirtualMachineInstance](asUnstructured(obj))
		if err != nil || vmi.Spec.Domain.Firmware == nil || vmi.Labels[machineUIDLabel] == "" {
			continue
		}
		note(user{kind: "VirtualMachineInstance", namespace: vmi.Namespace, name: vmi.Name, machineUID: vmi.Labels[machineUIDLabel], obj: obj},
			vmi.Spec.Domain.Firmware.Serial, true)
	}
	secrets, err := g.Secrets.List(sel)
	if err != nil {
		return err
	}
	for _, s := range secrets {
		if !strings.HasSuffix(s.Name, identitySecretSuffix) {
			continue
		}
		note(user{kind: "Secret", namespace: s.Namespace, name: s.Name, machineUID: s.Labels[machineUIDLabel], obj: s},
			string(s.Data[bootdisk.IdentityKeySerialNumber]), false)
	}

	complete := true
	for _, id := range identities {
		us := users[id.Name]
		if err := g.report(ctx, id, us); err != nil {
			complete = false
			g.Log.Error("Reporting an identity in use outside the ledger", "identity", id.Name, "err", err)
		}
	}
	if !complete {
		return fmt.Errorf("not every identity in use outside the ledger could be reported; pools stay on hold")
	}
	return g.liftHolds(ctx)
}

// ledger is the ledger's identities and machines the sweep compares with:
// the informers' while no pool is on hold, and the apiserver's own (a
// consistent list, past the cache) while one is. A sweep that lifts a
// restore's hold must compare with the restored ledger, and the cache can
// show the ledger from before the restore for tens of seconds (each
// informer relists on its own, after the watch's backoff while the
// apiserver restarted): a VM whose machine the cache still shows would pass
// as recorded, and its identity be given out again once the hold is lifted.
func (g *Guard) ledger(ctx context.Context) ([]*v1alpha1.MacOSIdentity, []*v1alpha1.MacOSMachine, error) {
	pools, err := g.Pools.List(labels.Everything())
	if err != nil {
		return nil, nil, err
	}
	onHold := slices.ContainsFunc(pools, func(p *v1alpha1.MacOSIdentityPool) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.IdentityPoolOnHold)
	})
	if !onHold {
		identities, err := g.Identities.List(labels.Everything())
		if err != nil {
			return nil, nil, err
		}
		machines, err := g.Machines.List(labels.Everything())
		return identities, machines, err
	}
	var identities []*v1alpha1.MacOSIdentity
	err = pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return g.Client.DockeriosV1alpha1().MacOSIdentities().List(ctx, opts)
	}).EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		identities = append(identities, obj.(*v1alpha1.MacOSIdentity))
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the ledger's identities: %w", err)
	}
	var machines []*v1alpha1.MacOSMachine
	err = pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return g.Client.DockeriosV1alpha1().MacOSMachines(metav1.NamespaceAll).List(ctx, opts)
	}).EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		machines = append(machines, obj.(*v1alpha1.MacOSMachine))
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the ledger's machines: %w", err)
	}
	return identities, machines, nil
}

func asUnstructured(obj runtime.Object) *unstructured.Unstructured {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return &unstructured.Unstructured{Object: map[string]any{}}
	}
	return u
}

// report writes id's HeldOutsideLedger condition for its users (none:
// False if it was True).
func (g *Guard) report(ctx context.Context, id *v1alpha1.MacOSIdentity, us []user) error {
	current := meta.FindStatusCondition(id.Status.Conditions, v1alpha1.IdentityHeldOutsideLedger)
	var want metav1.Condition
	recorded := "the ledger records it as free"
	if a := id.Status.Allocation; a != nil {
		recorded = fmt.Sprintf("the ledger records MacOSMachine %s/%s (uid %s) as its holder", a.MachineNamespace, a.MachineName, a.MachineUID)
	}
	switch {
	case len(us) > 0:
		sort.Slice(us, func(i, j int) bool { return us[i].String() < us[j].String() })
		names := make([]string, len(us))
		for i, u := range us {
			names[i] = u.String()
		}
		want = metav1.Condition{Type: v1alpha1.IdentityHeldOutsideLedger, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonInUseByUnrecordedVM,
			Message: fmt.Sprintf("%s carries this identity's serial number, but %s (a restore of an older snapshot?); it is given to no machine until that is gone. DockerIOS does not delete it: delete it once you know which machine is right",
				strings.Join(names, ", "), recorded)}
	case current != nil && current.Status == metav1.ConditionTrue:
		want = metav1.Condition{Type: v1alpha1.IdentityHeldOutsideLedger, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonHolderGone,
			Message: "no VM, VMI or identity Secret outside the ledger carries this identity any more"}
	default:
		return nil
	}
	if current != nil && current.Status == want.Status && current.Reason == want.Reason && current.Message == want.Message {
		return nil
	}
	updated := id.DeepCopy()
	meta.SetStatusCondition(&updated.Status.Conditions, want)
	_, err := g.Client.DockeriosV1alpha1().MacOSIdentities().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	if want.Status == metav1.ConditionTrue {
		g.Recorder.Eventf(id, corev1.EventTypeWarning, EventHeldOutsideLedger, "%s", want.Message)
		for _, u := range us {
			g.Recorder.Eventf(u.obj, corev1.EventTypeWarning, EventOrphanedVM,
				"carries MacOSIdentity %s, but %s; the identity is withheld from new machines and this object is left alone for a person to resolve",
				id.Name, recorded)
		}
		g.Log.Warn("Identity in use outside the ledger", "identity", id.Name, "users", len(us))
	} else {
		g.Recorder.Eventf(id, corev1.EventTypeNormal, EventHolderGone, "%s", want.Message)
		g.Log.Info("Identity no longer in use outside the ledger", "identity", id.Name)
	}
	return nil
}

// liftHolds lifts the hold of every pool on hold.
func (g *Guard) liftHolds(ctx context.Context) error {
	pools, err := g.Pools.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, p := range pools {
		if !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.IdentityPoolOnHold) {
			continue
		}
		lift := g.liftHold
		if lift == nil {
			lift = func(ctx context.Context, pool string) error {
				return g.Client.DockeriosV1alpha1().RESTClient().Delete().Resource("macosidentitypools").Name(pool).SubResource("hold").Do(ctx).Error()
			}
		}
		err := lift(ctx, p.Name)
		if apierrors.IsNotFound(err) {
			continue // lifted already; the status follows
		}
		if err != nil {
			return fmt.Errorf("lifting the hold of MacOSIdentityPool %s: %w", p.Name, err)
		}
		g.Recorder.Eventf(p, corev1.EventTypeNormal, EventPoolHoldLifted,
			"every VM the controller runs was compared with the ledger and identities in use outside it withheld; the pool gives out identities again")
		g.Log.Info("Lifted a restored pool's hold", "pool", p.Name)
	}
	return nil
}
