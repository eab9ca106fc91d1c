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

package identityledger

import (
	"context"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/klog/v2"
)

// classView remembers which identity pool each class draws from, for as
// long as an etcd watch on the classes says the answer holds. A class's
// pool cannot change, but a class can be deleted and created again with
// another pool: any event on a class drops what was remembered of it, so
// the next write reads it again. Without a running watch nothing is
// remembered and every lookup reads etcd.
//
// Machine creates do not depend on it for safety: their transaction
// requires the class and pool to be the ones read. Pools and class claims,
// which are written by the generic store, depend on it to authorize the
// verb use against the class as it is.
type classView struct {
	mu       sync.Mutex
	watching bool
	// epoch counts watch starts; events counts the events seen per class
	// in this epoch. A lookup notes both before reading etcd and keeps its
	// answer only if neither moved, so an answer read before an event is
	// never kept after it.
	epoch    uint64
	events   map[string]uint64
	bindings map[string]*binding
}

// classToken is what a lookup notes before reading a class.
type classToken struct {
	ok            bool
	epoch, events uint64
}

func (v *classView) get(class string) (*binding, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	b, ok := v.bindings[class]
	return b, ok && v.watching
}

func (v *classView) token(class string) classToken {
	v.mu.Lock()
	defer v.mu.Unlock()
	return classToken{ok: v.watching, epoch: v.epoch, events: v.events[class]}
}

// put remembers b for class if nothing happened to the class since t.
func (v *classView) put(class string, b *binding, t classToken) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if t.ok && v.watching && t.epoch == v.epoch && t.events == v.events[class] {
		v.bindings[class] = b
	}
}

// forget drops an answer a transaction found stale.
func (v *classView) forget(class string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.bindings, class)
}

func (v *classView) changed(class string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.events[class]++
	delete(v.bindings, class)
}

func (v *classView) start() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.epoch++
	v.watching = true
	v.events = map[string]uint64{}
	v.bindings = map[string]*binding{}
}

func (v *classView) stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.watching = false
	v.bindings = nil
}

// RunClassView follows the classes until ctx ends, so that class lookups
// can be remembered between writes. Without it, each lookup reads etcd.
func (l *Ledger) RunClassView(ctx context.Context) {
	for ctx.Err() == nil {
		if err := l.watchClasses(ctx); err != nil && ctx.Err() == nil {
			klog.InfoS("Class view of the identity ledger restarts", "reason", err)
		}
		l.classView.stop()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (l *Ledger) watchClasses(ctx context.Context) error {
	prefix := l.classes.KeyPrefix()
	resp, err := l.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1))
	if err != nil {
		return err
	}
	// Nothing is remembered yet, so nothing before this revision matters.
	l.classView.start()
	w := l.client.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	for wr := range w {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			l.classView.changed(strings.TrimPrefix(string(ev.Kv.Key), prefix))
		}
	}
	return ctx.Err()
}
