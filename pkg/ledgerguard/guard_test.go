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

package ledgerguard

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dockerios/dockerios/pkg/embeddedetcd"
)

const prefix = "/registry/"

func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	e, err := embeddedetcd.Start(filepath.Join(t.TempDir(), "etcd"), io.Discard)
	require.NoError(t, err)
	t.Cleanup(e.Stop)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.ClientURL}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func newGuard(etcd *clientv3.Client, kube kubernetes.Interface, answers Answers) *Guard {
	return New(Config{Etcd: etcd, StoragePrefix: prefix, Kube: kube, Marker: DefaultMarker, Answers: answers,
		RecheckInterval: 20 * time.Millisecond, MarkerInterval: 20 * time.Millisecond})
}

func marker(t *testing.T, kube kubernetes.Interface) *corev1.ConfigMap {
	t.Helper()
	cm, err := kube.CoreV1().ConfigMaps(DefaultMarker.Namespace).Get(context.Background(), DefaultMarker.Name, metav1.GetOptions{})
	require.NoError(t, err)
	return cm
}

func ledgerID(t *testing.T, etcd *clientv3.Client) string {
	t.Helper()
	id, err := ReadLedgerID(context.Background(), etcd, prefix)
	require.NoError(t, err)
	return id
}

func putObject(t *testing.T, etcd *clientv3.Client, name string) {
	t.Helper()
	_, err := etcd.Put(context.Background(), prefix+"dockerios.io/macosmachines/default/"+name, "{}")
	require.NoError(t, err)
}

// serve asks the guard's filter for path and returns the status and body.
func serve(g *Guard, path string) (int, string) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "served") })
	rec := httptest.NewRecorder()
	g.Filter(inner).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// A first start on empty etcd writes a new ledger ID into etcd and the
// marker; the next start on the same ledger serves it as it is.
func TestGuard_FreshInstallRecordsTheLedgerAndServesItAgain(t *testing.T) {
	ctx := context.Background()
	etcd, kube := startEtcd(t), fake.NewClientset()
	g := newGuard(etcd, kube, Answers{})
	assert.False(t, g.Serving(), "nothing is served before the ledger is looked at")
	code, _ := serve(g, "/apis/dockerios.io/v1alpha1")
	assert.Equal(t, http.StatusServiceUnavailable, code)

	d := g.Evaluate(ctx)
	require.True(t, d.Serve, d.Message)
	assert.Equal(t, ReasonFreshInstall, d.Reason)
	id := ledgerID(t, etcd)
	require.NotEmpty(t, id)
	assert.Equal(t, id, g.LedgerID())
	cm := marker(t, kube)
	assert.Equal(t, id, cm.Data[DataLedgerID])
	assert.NotEmpty(t, cm.Data[DataLastRevision])
	code, body := serve(g, "/apis/dockerios.io/v1alpha1/namespaces/default/macosmachines")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "served", body)
	assert.NoError(t, g.ReadyzCheck().Check(nil))

	putObject(t, etcd, "mac-1")
	again := newGuard(etcd, kube, Answers{})
	d = again.Evaluate(ctx)
	require.True(t, d.Serve, d.Message)
	assert.Equal(t, ReasonSameLedger, d.Reason)
	assert.Equal(t, id, ledgerID(t, etcd), "the ID is never rewritten")
}

// The volume is lost: an empty etcd under a marker is refused, every
// dockerios.io request (discovery included) answers 503 with the reason,
// the readiness check fails with it, nothing is written into etcd, and
// other paths are served. A confirmation naming another ledger answers
// nothing; one naming the lost ledger starts a new one.
func TestGuard_EmptyLedgerUnderAMarkerIsRefusedUntilConfirmed(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	first := startEtcd(t)
	require.True(t, newGuard(first, kube, Answers{}).Evaluate(ctx).Serve)
	lost := ledgerID(t, first)

	empty := startEtcd(t)
	g := newGuard(empty, kube, Answers{ConfirmEmpty: "not-the-lost-ledger"})
	d := g.Evaluate(ctx)
	require.False(t, d.Serve)
	assert.Equal(t, ReasonLedgerEmpty, d.Reason)
	assert.False(t, g.Serving())
	for _, path := range []string{"/apis/dockerios.io", "/apis/dockerios.io/v1alpha1", "/apis/dockerios.io/v1alpha1/namespaces/default/macosmachines/mac-1"} {
		code, body := serve(g, path)
		assert.Equal(t, http.StatusServiceUnavailable, code, path)
		var status metav1.Status
		require.NoError(t, json.Unmarshal([]byte(body), &status), body)
		assert.Equal(t, metav1.StatusReasonServiceUnavailable, status.Reason)
		assert.Contains(t, status.Message, lost)
		assert.Contains(t, status.Message, "dockerios-apiserver ledger restore")
	}
	for _, path := range []string{"/healthz", "/apis", "/apis/dockerios.iox/v1", "/api/v1/namespaces"} {
		code, _ := serve(g, path)
		assert.Equal(t, http.StatusOK, code, path)
	}
	err := g.ReadyzCheck().Check(nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "confirm-empty-ledger="+lost)
	assert.Empty(t, ledgerID(t, empty), "a refused ledger gets no ID")
	assert.Equal(t, lost, marker(t, kube).Data[DataLedgerID], "the marker is left as it was")

	// An annotation naming the lost ledger is a person's confirmation.
	cm := marker(t, kube)
	cm.Annotations = map[string]string{ConfirmEmptyAnnotation: lost}
	_, err = kube.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	d = g.Evaluate(ctx)
	require.True(t, d.Serve, d.Message)
	assert.Equal(t, ReasonConfirmedEmpty, d.Reason)
	fresh := ledgerID(t, empty)
	assert.NotEmpty(t, fresh)
	assert.NotEqual(t, lost, fresh)
	cm = marker(t, kube)
	assert.Equal(t, fresh, cm.Data[DataLedgerID])
	assert.Equal(t, lost, cm.Data[DataPrevious])
	assert.NotContains(t, cm.Annotations, ConfirmEmptyAnnotation, "an answer is used once")
}

// etcd holding another ledger than the marker records is refused; the
// flag naming that ledger adopts it. A restore record the marker has not
// seen is a person's restore and is served.
func TestGuard_AnotherLedgerIsRefusedUnlessAdoptedOrRestored(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	ours := startEtcd(t)
	require.True(t, newGuard(ours, kube, Answers{}).Evaluate(ctx).Serve)
	oursID := ledgerID(t, ours)
	putObject(t, ours, "our-mac")

	theirs := startEtcd(t)
	_, err := theirs.Put(ctx, LedgerIDKey(prefix), "their-ledger")
	require.NoError(t, err)
	putObject(t, theirs, "their-mac")
	d := newGuard(theirs, kube, Answers{}).Evaluate(ctx)
	require.False(t, d.Serve)
	assert.Equal(t, ReasonLedgerMismatch, d.Reason)
	assert.Contains(t, d.Message, "their-ledger")
	assert.Contains(t, d.Message, oursID)

	d = newGuard(theirs, kube, Answers{Adopt: "their-ledger"}).Evaluate(ctx)
	require.True(t, d.Serve, d.Message)
	assert.Equal(t, ReasonAdopted, d.Reason)
	assert.Equal(t, "their-ledger", marker(t, kube).Data[DataLedgerID])

	// Back on ours, now foreign to the marker, restored by a person.
	d = newGuard(ours, kube, Answers{}).Evaluate(ctx)
	require.False(t, d.Serve)
	require.NoError(t, WriteRestoreRecord(ctx, ours, prefix, RestoreRecord{ID: "restore-1", SnapshotRevision: 5, RestoredAt: time.Now()}))
	d = newGuard(ours, kube, Answers{}).Evaluate(ctx)
	require.True(t, d.Serve, d.Message)
	assert.Equal(t, ReasonRestoreOfAnotherLedger, d.Reason)
	cm := marker(t, kube)
	assert.Equal(t, oursID, cm.Data[DataLedgerID])
	assert.Equal(t, "restore-1", cm.Data[DataLastRestoreID])
	// Acted on once: the same record does not explain a later mismatch.
	d = newGuard(theirs, kube, Answers{}).Evaluate(ctx)
	assert.False(t, d.Serve)
	d = newGuard(ours, kube, Answers{}).Evaluate(ctx)
	assert.Equal(t, ReasonSameLedger, d.Reason)
}

// Replicas starting together on a fresh install agree on one ledger ID.
func TestGuard_ReplicasStartingTogetherAgreeOnOneLedger(t *testing.T) {
	ctx := context.Background()
	etcd, kube := startEtcd(t), fake.NewClientset()
	var wg sync.WaitGroup
	ids := make([]string, 6)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := newGuard(etcd, kube, Answers{})
			if d := g.Evaluate(ctx); d.Serve {
				ids[i] = g.LedgerID()
			}
		}()
	}
	wg.Wait()
	want := ledgerID(t, etcd)
	for i, id := range ids {
		assert.Equal(t, want, id, "replica %d", i)
	}
	assert.Equal(t, want, marker(t, kube).Data[DataLedgerID])
}

// While it serves, the guard records the ledger's revision in the marker,
// and stops serving when the ledger is wiped under it (an external etcd
// emptied while the apiserver runs).
func TestGuard_RunRecordsRevisionsAndNoticesALedgerWipedUnderIt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	etcd, kube := startEtcd(t), fake.NewClientset()
	g := newGuard(etcd, kube, Answers{})
	done := make(chan struct{})
	go func() { g.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	require.NoError(t, g.WaitServing(ctx))

	putObject(t, etcd, "mac-1")
	resp, err := etcd.Get(ctx, "x")
	require.NoError(t, err)
	rev := resp.Header.Revision
	require.Eventually(t, func() bool {
		cm := marker(t, kube)
		var last int64
		_ = json.Unmarshal([]byte(cm.Data[DataLastRevision]), &last)
		return last >= rev
	}, 10*time.Second, 20*time.Millisecond, "the marker records the revision")

	_, err = etcd.Delete(ctx, prefix+"dockerios.io/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !g.Serving() }, 10*time.Second, 20*time.Millisecond)
	code, body := serve(g, "/apis/dockerios.io/v1alpha1/macosidentities")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "is empty")
}

// Without kube-apiserver (the standalone --local server) there is no
// marker: the ledger gets its ID and is served.
func TestGuard_WithoutAMarkerTheLedgerIsServed(t *testing.T) {
	etcd := startEtcd(t)
	g := New(Config{Etcd: etcd, StoragePrefix: prefix})
	d := g.Evaluate(context.Background())
	require.True(t, d.Serve, d.Message)
	assert.NotEmpty(t, ledgerID(t, etcd))
}
