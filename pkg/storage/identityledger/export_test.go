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

import "context"

// RememberedClass is what the class view remembers of class (nil if
// nothing).
func (l *Ledger) RememberedClass(class string) any {
	if b, ok := l.classView.get(class); ok {
		return b
	}
	return nil
}

// Remember makes the class view remember b (from RememberedClass) for
// class again, as a view whose watch has not yet delivered the class's
// latest write would still remember it.
func (l *Ledger) Remember(class string, b any) {
	l.classView.mu.Lock()
	defer l.classView.mu.Unlock()
	l.classView.bindings[class] = b.(*binding)
}

// FreeViewCounts is what the free view counts of pool, and the revision
// it has reached; ok is false until it has loaded.
func (l *Ledger) FreeViewCounts(pool string) (PoolCounts, int64, bool) {
	return l.free.poolCounts(pool)
}

// PretendFreeView makes the free view say pool has counts c as of rev, as
// a view whose watch lags behind etcd would.
func (l *Ledger) PretendFreeView(pool string, c PoolCounts, rev int64) {
	l.free.mu.Lock()
	defer l.free.mu.Unlock()
	l.free.ready = true
	if l.free.counts == nil {
		l.free.counts = map[string]*indexCounts{}
	}
	l.free.counts[pool] = &indexCounts{members: c.Total, free: c.Free, pending: c.Pending}
	l.free.rev = rev
}

// UpdatePoolStatus is one write of pool's status counts, as RunPoolStatus
// makes it.
func (l *Ledger) UpdatePoolStatus(ctx context.Context, pool string) error {
	return l.updatePoolStatus(ctx, pool)
}

// StoragePrefix is the storage prefix the ledger's keys live under, as
// RaiseRestoreHolds is given it by a restore.
func (l *Ledger) StoragePrefix() string { return l.identities.StoragePrefix() }
