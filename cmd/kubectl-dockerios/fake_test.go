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

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	clientset "github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned/fake"
)

const testNS = "demo"

// fakeAPI is a fake clientset that does what the apiserver does and the
// fake does not (name from generateName, a UID), and says when a watch
// is in place, so that a test changes an object only once the plugin can
// see the change.
type fakeAPI struct {
	*fake.Clientset
	watches chan string
}

func newFakeAPI(objects ...runtime.Object) *fakeAPI {
	f := &fakeAPI{Clientset: newClient(objects...), watches: make(chan string, 100)}
	f.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		m, err := meta.Accessor(a.(k8stesting.CreateAction).GetObject())
		if err != nil {
			return false, nil, nil
		}
		if m.GetName() == "" && m.GetGenerateName() != "" {
			m.SetName(m.GetGenerateName() + "x7k2p")
		}
		if m.GetUID() == "" {
			m.SetUID(types.UID("uid-" + m.GetName()))
		}
		return false, nil, nil
	})
	// The watch is registered with the tracker before it is announced:
	// the default reactor would register it only after ours returned.
	f.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := f.Tracker().Watch(a.GetResource(), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		f.watches <- a.GetResource().Resource
		return true, w, nil
	})
	return f
}

// awaitWatch waits until the plugin watches resource.
func (f *fakeAPI) awaitWatch(t *testing.T, resource string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case r := <-f.watches:
			if r == resource {
				return
			}
		case <-timeout:
			t.Fatalf("the plugin did not watch %s", resource)
		}
	}
}

// update writes obj as the apiserver or the controller would.
func (f *fakeAPI) update(t *testing.T, obj runtime.Object) {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	gvr := v1alpha1.SchemeGroupVersion.WithResource(resourceOf(obj))
	if err := f.Tracker().Update(gvr, obj, m.GetNamespace()); err != nil {
		t.Fatal(err)
	}
}

func resourceOf(obj runtime.Object) string {
	switch obj.(type) {
	case *v1alpha1.MacOSMachineClaim:
		return "macosmachineclaims"
	case *v1alpha1.MacOSMachine:
		return "macosmachines"
	case *v1alpha1.MacOSMachinePool:
		return "macosmachinepools"
	}
	panic("unknown kind")
}

// syncBuffer is a buffer a test may read while the plugin writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// awaitLine waits until the buffer holds a line containing s.
func (b *syncBuffer) awaitLine(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(b.String(), s) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no line with %q:\n%s", s, b.String())
}

// plugin is the plugin's root command against client, in testNS.
type plugin struct {
	stdout, stderr *syncBuffer
	client         clientset.Interface
	// metadata holds the cluster's other objects: namespaces.
	metadata *metadatafake.FakeMetadataClient
}

func newPlugin(t *testing.T, client clientset.Interface) *plugin {
	t.Helper()
	// No kubeconfig of the machine running the tests may leak in.
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var namespaces []runtime.Object
	for _, ns := range []string{testNS, "default", "other"} {
		namespaces = append(namespaces, &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	return &plugin{stdout: &syncBuffer{}, stderr: &syncBuffer{}, client: client,
		metadata: metadatafake.NewSimpleMetadataClient(scheme, namespaces...)}
}

// run runs the plugin with args, as main does but for the exit.
func (p *plugin) run(ctx context.Context, args ...string) error {
	o := &options{config: genericclioptions.NewConfigFlags(false)}
	ns := testNS
	o.config.Namespace = &ns
	o.newClient = func() (clientset.Interface, error) { return p.client, nil }
	o.newMetadataClient = func() (metadata.Interface, error) { return p.metadata, nil }
	cmd := newCommand(o)
	cmd.SetOut(p.stdout)
	cmd.SetErr(p.stderr)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

// Objects as the apiserver holds them.

func machinePool(name string) *v1alpha1.MacOSMachinePool {
	return &v1alpha1.MacOSMachinePool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS}, Spec: v1alpha1.MacOSMachinePoolSpec{ClassName: "standard"}}
}

func pendingClaim(name, pool string) *v1alpha1.MacOSMachineClaim {
	return &v1alpha1.MacOSMachineClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("uid-" + name)},
		Spec: v1alpha1.MacOSMachineClaimSpec{PoolName: pool}, Status: v1alpha1.MacOSMachineClaimStatus{Phase: v1alpha1.ClaimPending}}
}

func bound(c *v1alpha1.MacOSMachineClaim, machine string) *v1alpha1.MacOSMachineClaim {
	c = c.DeepCopy()
	c.Status.Phase, c.Status.MachineName = v1alpha1.ClaimBound, machine
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: claimBound, Status: metav1.ConditionTrue, Reason: "Bound"})
	return c
}

// readyMachine is a pool's machine as the controller reports it once its
// guest agent says Ready.
func readyMachine(name, pool string) *v1alpha1.MacOSMachine {
	m := &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("uid-" + name)},
		Spec: v1alpha1.MacOSMachineSpec{ClassName: "standard", PoolName: pool}}
	m.Status = v1alpha1.MacOSMachineStatus{
		Phase:              v1alpha1.MachineReady,
		IdentityRef:        &v1alpha1.LocalObjectReference{Name: "imacpro-0123456789abcdef"},
		VirtualMachineName: name,
		NodeName:           "node-2",
		Addresses: []v1alpha1.MachineAddress{{Type: v1alpha1.MachineAddressPod, Address: "10.244.1.17"},
			{Type: v1alpha1.MachineAddressAgent, Address: "192.168.100.5"}},
	}
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionTrue,
		Reason: "MachineReady", Message: "the guest agent reports Ready"})
	return m
}

// notReady is m with phase and a Ready condition False for reason.
func notReady(m *v1alpha1.MacOSMachine, phase v1alpha1.MacOSMachinePhase, reason, message string) *v1alpha1.MacOSMachine {
	m = m.DeepCopy()
	m.Status.Phase = phase
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionFalse,
		Reason: reason, Message: message})
	return m
}
