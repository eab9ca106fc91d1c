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
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/agent/client"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned/fake"
	dlisters "github.com/dockerios/dockerios/pkg/generated/listers/dockerio/v1alpha1"
)

// optimisticMachines makes the fake clientset answer writes of machines as
// the apiserver does: a write naming a resourceVersion other than the
// stored one is a 409, and every write moves the resourceVersion on.
type optimisticMachines struct {
	mu       sync.Mutex
	stored   *v1alpha1.MacOSMachine
	verbs    []string
	conflict int
}

func (s *optimisticMachines) react(a k8stesting.Action) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rv string
	next := s.stored.DeepCopy()
	switch a := a.(type) {
	case k8stesting.UpdateAction:
		m := a.GetObject().(*v1alpha1.MacOSMachine)
		rv, next.Status = m.ResourceVersion, m.Status
		s.verbs = append(s.verbs, "update "+a.GetSubresource())
	case k8stesting.PatchAction:
		var p struct {
			Metadata struct {
				ResourceVersion string   `json:"resourceVersion"`
				Finalizers      []string `json:"finalizers"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(a.GetPatch(), &p); err != nil {
			return true, nil, err
		}
		rv, next.Finalizers = p.Metadata.ResourceVersion, p.Metadata.Finalizers
		s.verbs = append(s.verbs, "patch finalizers")
	default:
		return false, nil, nil
	}
	if rv != "" && rv != s.stored.ResourceVersion {
		s.conflict++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "dockerios.io", Resource: "macosmachines"}, s.stored.Name,
			errObjectModified)
	}
	n, _ := strconv.Atoi(s.stored.ResourceVersion)
	next.ResourceVersion = strconv.Itoa(n + 1)
	s.stored = next
	return true, next.DeepCopy(), nil
}

var errObjectModified = errors.New("the object has been modified; please apply your changes to the latest version and try again")

// A deleted machine with nothing made for it yet (one that waited for an
// identity) is let go in one pass: its phase becomes Terminating and its
// finalizer goes, the removal conditioned on the resourceVersion that
// status write left — not on the one it replaced, which is a certain 409,
// an error in the log and a retry after a back-off for every such machine.
func TestTeardown_RemovesTheFinalizerAfterItsOwnStatusWrite(t *testing.T) {
	m := testMachine()
	m.Status.IdentityRef = nil
	m.Status.Phase = v1alpha1.MachinePending
	m.ResourceVersion = "7"
	m.Finalizers = []string{v1alpha1.MachineTeardownFinalizer}
	m.DeletionTimestamp = &metav1.Time{Time: t0}
	api := &optimisticMachines{stored: m.DeepCopy()}
	client := fake.NewClientset()
	client.PrependReactor("*", "macosmachines", api.react)

	index := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	classes := index()
	require.NoError(t, classes.Add(testClass()))
	r := &Reconciler{
		Kube:   kubefake.NewClientset(),
		Client: client,
		Listers: Listers{
			Classes: dlisters.NewMacOSMachineClassLister(classes), Images: dlisters.NewMacOSImageLister(index()),
			Identities: dlisters.NewMacOSIdentityLister(index()), Secrets: corelisters.NewSecretLister(index()),
			PVCs: corelisters.NewPersistentVolumeClaimLister(index()), Jobs: batchlisters.NewJobLister(index()),
			VMs: cache.NewGenericLister(index(), schema.GroupResource{}), VMIs: cache.NewGenericLister(index(), schema.GroupResource{}),
			DVs: cache.NewGenericLister(index(), schema.GroupResource{}),
		},
		Recorder: record.NewFakeRecorder(100),
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:      func() time.Time { return t0 },
	}

	res, err := r.teardown(context.Background(), m)
	require.NoError(t, err)
	assert.Zero(t, res.RequeueAfter)
	assert.Equal(t, []string{"update status", "patch finalizers"}, api.verbs)
	assert.Zero(t, api.conflict, "a write of the pass conflicted with the pass's own status write")
	assert.Empty(t, api.stored.Finalizers, "the machine is let go")
	assert.Equal(t, v1alpha1.MachineTerminating, api.stored.Status.Phase)
}

// A machine found hung says so once, with a Warning Event: its phase stays
// Ready, and a claimed one is not replaced, so without it the claim's owner
// would learn of the hang only from the machine's conditions.
func TestWriteStatus_AHungMachineGetsOneWarningEvent(t *testing.T) {
	o := Observed{Class: testClass(), Job: job(batchv1.JobComplete), DV: dv(cdiv1.Succeeded), VMI: vmi(kubevirtv1.Running, t0),
		VM: vm(t0, kubevirtv1.VirtualMachineStatusRunning), AgentAsked: true, AgentErr: client.ErrUnreachable}
	m := testMachine()
	wasReady(metav1.ConditionFalse, t0, t0)(m)
	m.Status.Phase = v1alpha1.MachineReady
	m.ResourceVersion = "7"
	api := &optimisticMachines{stored: m.DeepCopy()}
	fakeClient := fake.NewClientset()
	fakeClient.PrependReactor("*", "macosmachines", api.react)
	recorder := record.NewFakeRecorder(10)
	r := &Reconciler{Client: fakeClient, Recorder: recorder, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}

	var err error
	for _, now := range []time.Time{t0.Add(2 * time.Minute), t0.Add(4 * time.Minute), t0.Add(5 * time.Minute)} {
		m, err = r.writeStatus(context.Background(), m, Derive(m, &o, now).Status, false)
		require.NoError(t, err)
	}
	require.True(t, Hung(m))
	var events []string
	for len(recorder.Events) > 0 {
		events = append(events, <-recorder.Events)
	}
	require.Len(t, events, 1, "one Event, when the machine is found hung: %q", events)
	assert.Contains(t, events[0], "Warning AgentUnresponsive the guest agent has not answered")
	assert.Contains(t, events[0], "agentUnresponsiveTimeout 3m0s")
}
