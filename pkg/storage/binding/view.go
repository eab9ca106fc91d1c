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

package binding

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// machineView is this apiserver's list of the machines a pool claim could
// be bound to at create — Ready, unbound, not released, not being deleted —
// per namespace and pool, kept by a watch on the machines' storage (the
// watch cache), so that a create finds its machine without asking etcd.
//
// It is only ever a hint: the create's transaction requires the machine
// unchanged since the revision the view holds, so a machine another
// replica bound meanwhile costs a retry, never a second binding. Until it
// has loaded, and while its watch is broken, claims are created Pending and
// the controller binds them.
type machineView struct {
	mu    sync.Mutex
	ready bool
	pools map[poolRef]*poolMachines
	// hidden holds, per namespace/name, a revision the view must not show
	// the machine at or below: one this replica just bound, or one a
	// transaction found changed (the watch has not caught up yet).
	hidden map[objectRef]int64
	// trying are the machines a create of this replica is binding now,
	// each with a channel closed when the attempt ends; other creates of
	// this replica take the next one, or wait, instead of racing.
	trying map[objectRef]chan struct{}
}

type poolRef struct{ namespace, pool string }

// poolMachines are the bindable machines of one pool, by name and in the
// order claims take them (Ready longest first), so that a create finds
// its machine in O(log n) however warm the pool: a scan of every machine
// under the view's lock made each create of a pool of thousands cost tens
// of microseconds, and every other create of this replica waited for it.
type poolMachines struct {
	byName map[string]*bindable
	order  *btree.BTreeG[*bindable]
}

func newPoolMachines() *poolMachines {
	return &poolMachines{byName: map[string]*bindable{}, order: btree.NewG(16, (*bindable).readyLonger)}
}

// put adds c, or replaces the machine of the same name.
func (p *poolMachines) put(c *bindable) {
	if old := p.byName[c.machine.Name]; old != nil {
		p.order.Delete(old)
	}
	p.byName[c.machine.Name] = c
	p.order.ReplaceOrInsert(c)
}

// remove takes the machine called name out, if it is there.
func (p *poolMachines) remove(name string) {
	if old := p.byName[name]; old != nil {
		p.order.Delete(old)
		delete(p.byName, name)
	}
}

func (p *poolMachines) len() int { return len(p.byName) }

// bindable is a machine the view could hand to a claim.
type bindable struct {
	machine    *dockerio.MacOSMachine // as the watch delivered it; never modified
	rev        int64
	readySince time.Time
}

// isBindable says whether m could be bound to a claim of its pool now (the
// machine's side of refusal). An install session never is (validation
// keeps it out of pools too; this holds even for one stored otherwise).
func isBindable(m *dockerio.MacOSMachine) bool {
	return m.Spec.PoolName != "" && m.Spec.Purpose != dockerio.MachinePurposeInstall && m.DeletionTimestamp == nil && m.Status.ClaimRef == nil && ready(m) &&
		!meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MachineReleased)
}

// readySince is when m last became Ready; bindings prefer the machine Ready
// longest.
func readySince(m *dockerio.MacOSMachine) time.Time {
	if c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.MachineConditionReady); c != nil {
		return c.LastTransitionTime.Time
	}
	return m.CreationTimestamp.Time
}

// readyLonger orders machines Ready longest first (then by name, so that
// every replica agrees).
func (c *bindable) readyLonger(o *bindable) bool {
	if !c.readySince.Equal(o.readySince) {
		return c.readySince.Before(o.readySince)
	}
	return c.machine.Name < o.machine.Name
}

// objectRef names a machine: a map key that costs no allocation, as pick
// looks up every candidate of a pool.
type objectRef struct{ namespace, name string }

func objectKey(namespace, name string) objectRef { return objectRef{namespace, name} }

// apply records one state of a machine seen by the watch.
func (v *machineView) apply(m *dockerio.MacOSMachine, deleted bool) {
	rev, err := strconv.ParseInt(m.ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	key := objectKey(m.Namespace, m.Name)
	if hiddenAt, ok := v.hidden[key]; ok {
		if rev <= hiddenAt {
			return
		}
		delete(v.hidden, key)
	}
	// A machine's pool never changes (spec is immutable), so removing it
	// from its own pool removes it from the view.
	ref := poolRef{m.Namespace, m.Spec.PoolName}
	if deleted || !isBindable(m) {
		if set := v.pools[ref]; set != nil {
			set.remove(m.Name)
			if set.len() == 0 {
				delete(v.pools, ref)
			}
		}
		return
	}
	set := v.pools[ref]
	if set == nil {
		set = newPoolMachines()
		v.pools[ref] = set
	}
	set.put(&bindable{machine: m, rev: rev, readySince: readySince(m)})
}

// pick returns the machine of namespace/pool Ready longest that matches
// selector and no create of this replica is binding, and marks it as being
// bound (release it with done). ok is false when the view cannot say.
func (v *machineView) pick(namespace, pool string, selector labels.Selector) (b *bindable, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.ready {
		return nil, false
	}
	set := v.pools[poolRef{namespace, pool}]
	if set == nil {
		return nil, true
	}
	// Ready longest first: the first this replica is not binding already
	// and the selector admits is the one.
	set.order.Ascend(func(c *bindable) bool {
		if v.trying[objectKey(namespace, c.machine.Name)] != nil || (selector != nil && !selector.Matches(labels.Set(c.machine.Labels))) {
			return true
		}
		b = c
		return false
	})
	if b != nil {
		v.trying[objectKey(namespace, b.machine.Name)] = make(chan struct{})
	}
	return b, true
}

// begin marks m as being bound by a create of this replica that found it
// in etcd rather than in the view. If another create of this replica is
// binding it already, begin returns a channel closed when that attempt
// ends, and ok false.
func (v *machineView) begin(m *dockerio.MacOSMachine) (busy <-chan struct{}, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.trying == nil {
		v.trying = map[objectRef]chan struct{}{}
	}
	key := objectKey(m.Namespace, m.Name)
	if ch := v.trying[key]; ch != nil {
		return ch, false
	}
	v.trying[key] = make(chan struct{})
	return nil, true
}

// done ends a create's attempt at b. With hideAt set — the revision of
// the write that bound the machine, or the revision the attempt found
// changed — the machine leaves the view until the watch shows it at a
// newer revision, so that no event older than what the attempt learnt
// shows it bindable again.
func (v *machineView) done(b *bindable, hideAt int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	m := b.machine
	key := objectKey(m.Namespace, m.Name)
	if ch := v.trying[key]; ch != nil {
		close(ch)
		delete(v.trying, key)
	}
	if hideAt == 0 {
		return
	}
	ref := poolRef{m.Namespace, m.Spec.PoolName}
	if set := v.pools[ref]; set != nil {
		if cur := set.byName[m.Name]; cur != nil && cur.rev <= hideAt {
			set.remove(m.Name)
			if set.len() == 0 {
				delete(v.pools, ref)
			}
		}
	}
	if v.hidden == nil {
		// Not loaded yet: what the watch delivers later is checked against it.
		v.hidden = map[objectRef]int64{}
	}
	if v.hidden[key] < hideAt {
		v.hidden[key] = hideAt
	}
}

func (v *machineView) reset(items []dockerio.MacOSMachine) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pools = map[poolRef]*poolMachines{}
	v.hidden = map[objectRef]int64{}
	if v.trying == nil {
		v.trying = map[objectRef]chan struct{}{}
	}
	for i := range items {
		v.apply(&items[i], false)
	}
	v.ready = true
}

func (v *machineView) stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ready = false
	v.pools = nil
}

// RunMachineView keeps this apiserver's view of bindable machines, read
// from machines (the machine registry's storage: its watch cache), until
// ctx ends. Without it, every claim is created Pending and bound by the
// controller; with it, a claim for a pool with a Ready machine is Bound in
// the transaction that creates it.
func (b *Binder) RunMachineView(ctx context.Context, machines storage.Interface) {
	for ctx.Err() == nil {
		if err := b.followMachines(ctx, machines); err != nil && ctx.Err() == nil {
			klog.InfoS("View of bindable machines restarts", "reason", err)
		}
		b.view.stop()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// followMachines lists the machines and follows them until the watch ends.
func (b *Binder) followMachines(ctx context.Context, machines storage.Interface) error {
	root := b.machines.StoreRoot()
	list := &dockerio.MacOSMachineList{}
	opts := storage.ListOptions{ResourceVersion: "0", Recursive: true, Predicate: storage.Everything}
	if err := machines.GetList(ctx, root, opts, list); err != nil {
		return err
	}
	b.view.reset(list.Items)
	opts.ResourceVersion = list.ResourceVersion
	w, err := machines.Watch(ctx, root, opts)
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the watch of machines closed")
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				obj := ev.Object
				if co, ok := obj.(runtime.CacheableObject); ok {
					// The watch cache shares one object among its
					// watchers; this is a copy of it.
					obj = co.GetObject()
				}
				m, ok := obj.(*dockerio.MacOSMachine)
				if !ok {
					continue
				}
				b.view.mu.Lock()
				b.view.apply(m, ev.Type == watch.Deleted)
				b.view.mu.Unlock()
			case watch.Error:
				return fmt.Errorf("the watch of machines failed: %v", ev.Object)
			}
		}
	}
}

// loaded says whether the view has loaded.
func (v *machineView) loaded() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ready
}

// all returns every machine the view holds bindable.
func (v *machineView) all() []*dockerio.MacOSMachine {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []*dockerio.MacOSMachine
	for _, set := range v.pools {
		for _, c := range set.byName {
			out = append(out, c.machine)
		}
	}
	return out
}

// BindableMachines lists the machines of namespace/pool this apiserver
// would bind a claim to at create now, Ready longest first; known is false
// while the view has not loaded.
func (b *Binder) BindableMachines(namespace, pool string) (names []string, known bool) {
	v := &b.view
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.ready {
		return nil, false
	}
	if set := v.pools[poolRef{namespace, pool}]; set != nil {
		set.order.Ascend(func(c *bindable) bool {
			names = append(names, c.machine.Name)
			return true
		})
	}
	return names, true
}
