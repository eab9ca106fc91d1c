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
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	dfake "github.com/dockerios/dockerios/pkg/generated/clientset/versioned/fake"
)

// secretsEnv is a reconciler over a fake clientset holding inAPI, whose
// Secret cache holds cached (which may lag behind the API, as an informer's
// does).
type secretsEnv struct {
	r       *Reconciler
	kube    *fake.Clientset
	secrets cache.Indexer
}

func newSecretsEnv(t *testing.T, inAPI []runtime.Object, cached ...*corev1.Secret) *secretsEnv {
	t.Helper()
	kube := fake.NewClientset(inAPI...)
	secrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range cached {
		require.NoError(t, secrets.Add(s))
	}
	jobs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	return &secretsEnv{kube: kube, secrets: secrets, r: &Reconciler{
		Kube:     kube,
		Client:   dfake.NewClientset(testIdentity(), &v1alpha1.MacOSIdentityPool{ObjectMeta: metav1.ObjectMeta{Name: "standard"}}),
		Listers:  Listers{Secrets: corelisters.NewSecretLister(secrets), Jobs: batchlisters.NewJobLister(jobs)},
		Recorder: record.NewFakeRecorder(100),
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:      func() time.Time { return t0 },
	}}
}

// verbs lists the fake clientset's actions on Secrets as "verb name".
func (e *secretsEnv) verbs() []string {
	var out []string
	for _, a := range e.kube.Actions() {
		if a.GetResource().Resource != "secrets" {
			continue
		}
		s := a.GetVerb()
		switch a := a.(type) {
		case k8stesting.CreateAction:
			s += " " + a.GetObject().(*corev1.Secret).Name
		case k8stesting.GetAction:
			s += " " + a.GetName()
		case k8stesting.DeleteAction:
			s += " " + a.GetName()
		}
		out = append(out, s)
	}
	return out
}

func otherData(s *corev1.Secret) *corev1.Secret {
	s = s.DeepCopy()
	s.Data["serialNumber"] = []byte("C02FX08QHX87")
	return s
}

func otherMachines(s *corev1.Secret) *corev1.Secret {
	s = s.DeepCopy()
	s.Labels[MachineUIDLabel] = "uid-of-a-predecessor"
	return s
}

func TestEnsureIdentitySecret(t *testing.T) {
	want := IdentitySecret(testMachine(), testIdentity())
	for _, tc := range []struct {
		name      string
		inAPI     []runtime.Object
		cached    []*corev1.Secret
		ready     bool
		err       string
		verbs     []string
		requeue   bool
		wantInAPI *corev1.Secret // nil: none
	}{
		{name: "missing: made from the identity", ready: true,
			verbs: []string{"create mac-0-identity"}, wantInAPI: want},
		{name: "there and cached: nothing to do", inAPI: []runtime.Object{want}, cached: []*corev1.Secret{want}, ready: true,
			wantInAPI: want},
		{name: "made by an earlier pass the cache has not shown yet", inAPI: []runtime.Object{want}, ready: true,
			verbs: []string{"create mac-0-identity", "get mac-0-identity"}, wantInAPI: want},
		{name: "a predecessor's of the same name: wait for its teardown", inAPI: []runtime.Object{otherMachines(want)},
			cached: []*corev1.Secret{otherMachines(want)}, err: "belongs to another machine", wantInAPI: otherMachines(want)},
		{name: "other values: replaced, and the Job waits", inAPI: []runtime.Object{otherData(want)}, cached: []*corev1.Secret{otherData(want)},
			verbs: []string{"delete mac-0-identity"}, requeue: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSecretsEnv(t, tc.inAPI, tc.cached...)
			e.kube.ClearActions()
			var requeue time.Duration
			ready, err := e.r.ensureIdentitySecret(context.Background(), testMachine(), &Observed{Identity: testIdentity()}, &requeue)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
			} else {
				assert.NoError(t, err)
			}
			assert.Equal(t, tc.ready, ready)
			assert.Equal(t, tc.verbs, e.verbs())
			assert.Equal(t, tc.requeue, requeue > 0, "requeue %s", requeue)
			got, err := e.kube.CoreV1().Secrets("ci").Get(context.Background(), "mac-0-identity", metav1.GetOptions{})
			if tc.wantInAPI == nil {
				assert.True(t, apierrors.IsNotFound(err), "the Secret is still there: %v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantInAPI.Data, got.Data)
			assert.Equal(t, tc.wantInAPI.Labels, got.Labels)
			assert.Equal(t, tc.wantInAPI.OwnerReferences, got.OwnerReferences)
			assert.Equal(t, tc.wantInAPI.Immutable, got.Immutable)
		})
	}
}

// The Job is never made before the identity Secret it mounts.
func TestBootdiskWaitsForTheIdentitySecret(t *testing.T) {
	for _, ready := range []bool{false, true} {
		e := newSecretsEnv(t, nil)
		e.r.Settings.BootdiskImage = "example.com/bootdisk:1"
		o := &Observed{Class: testClass(), Identity: testIdentity(), PVC: &corev1.PersistentVolumeClaim{}}
		var requeue time.Duration
		require.NoError(t, e.r.bootdisk(context.Background(), testMachine(), o, ready, &requeue))
		jobs, err := e.kube.BatchV1().Jobs("ci").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		if !ready {
			assert.Empty(t, jobs.Items, "a Job without its identity Secret")
			continue
		}
		require.Len(t, jobs.Items, 1)
		assert.Equal(t, "mac-0-identity", jobs.Items[0].Spec.Template.Spec.Volumes[2].Secret.SecretName)
	}
}

// Teardown deletes the machine's identity Secret with its other objects,
// and never a predecessor's of the same name.
func TestTeardownDeletesTheIdentitySecret(t *testing.T) {
	mineS := IdentitySecret(testMachine(), testIdentity())
	for _, tc := range []struct {
		name    string
		secret  *corev1.Secret
		waiting string
		deleted bool
	}{
		{"the machine's", mineS, "[Secret mac-0-identity]", true},
		{"a predecessor's", otherMachines(mineS), "", false},
		{"gone", nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var inAPI []runtime.Object
			var cached []*corev1.Secret
			if tc.secret != nil {
				inAPI, cached = []runtime.Object{tc.secret}, []*corev1.Secret{tc.secret}
			}
			e := newSecretsEnv(t, inAPI, cached...)
			waiting, err := e.r.removeOwned(context.Background(), testMachine(), &Observed{})
			require.NoError(t, err)
			assert.Equal(t, tc.waiting, waiting)
			_, err = e.kube.CoreV1().Secrets("ci").Get(context.Background(), "mac-0-identity", metav1.GetOptions{})
			assert.Equal(t, tc.deleted || tc.secret == nil, apierrors.IsNotFound(err), "get after teardown: %v", err)
		})
	}
}
