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

package pool

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned/fake"
	dlisters "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

// A pool fills up to its replicas while it lives, and makes no machine
// once it is being deleted: with foreground propagation the garbage
// collector deletes its machines first, and a pool that replaced them
// would never go.
func TestReconcilePool_MakesMachinesOnlyWhileThePoolLives(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deleting bool
		creates  int
	}{
		{name: "living pool fills", creates: 2},
		{name: "pool being deleted makes none", deleting: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha1.MacOSMachinePool{
				ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: "ci", UID: "pool-uid", ResourceVersion: "1"},
				Spec:       v1alpha1.MacOSMachinePoolSpec{ClassName: "standard", Replicas: ptr.To[int32](2)},
			}
			if tc.deleting {
				p.DeletionTimestamp = ptr.To(metav1.Now())
				p.Finalizers = []string{metav1.FinalizerDeleteDependents}
			}
			// Not NewClientset: its field-managed tracker needs a typed schema
			// of our kinds that the fake does not carry.
			client := fake.NewSimpleClientset(p) //nolint:staticcheck // see above
			made := 0
			client.PrependReactor("create", "macosmachines", func(a k8stesting.Action) (bool, runtime.Object, error) {
				m := a.(k8stesting.CreateAction).GetObject().(*v1alpha1.MacOSMachine)
				made++
				m.Name = fmt.Sprintf("%s%d", m.GenerateName, made) // the fake does not generate names
				return false, nil, nil
			})
			pools := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			require.NoError(t, pools.Add(p))
			empty := func() cache.Indexer {
				return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			}
			r := &Reconciler{
				Client:   client,
				Pools:    dlisters.NewMacOSMachinePoolLister(pools),
				Machines: dlisters.NewMacOSMachineLister(empty()),
				Claims:   dlisters.NewMacOSMachineClaimLister(empty()),
				Recorder: record.NewFakeRecorder(100),
				Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
			}
			require.NoError(t, r.ReconcilePool(context.Background(), "ci", "warm"))
			creates := 0
			for _, a := range client.Actions() {
				if _, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "macosmachines" {
					creates++
				}
			}
			assert.Equal(t, tc.creates, creates, "machines created")
		})
	}
}
