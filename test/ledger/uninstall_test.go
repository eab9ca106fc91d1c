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

package ledger

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/dockerios/dockerios/pkg/ledgerguard"
	"github.com/dockerios/dockerios/test/framework"
	"github.com/dockerios/dockerios/test/harness"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}

// kustomize renders dir (under the module root) with the real kubectl.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	r := framework.NewKubectl(t, "").Run("", "kustomize", filepath.Join(moduleRoot(t), dir))
	require.NoError(t, r.Err, r.Stderr)
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader([]byte(r.Stdout))))
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			return objs
		}
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(doc, &u.Object))
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func kinds(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// claimNames are the PVCs the apiserver's Deployment mounts.
func claimNames(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var names []string
	for _, o := range kinds(objs, "Deployment") {
		if o.GetName() != "dockerios-apiserver" {
			continue
		}
		var d appsv1.Deployment
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d))
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				names = append(names, v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
	slices.Sort(names)
	return names
}

// The ledger's storage is not DockerIOS's to delete: `kubectl delete -k
// artifacts/` (and the release's dockerios.yaml, artifacts/deploy) holds
// neither the namespace nor a volume, which artifacts/ledger holds: the
// volumes the apiserver mounts, in the namespace it runs in. Against a
// real kube-apiserver, uninstalling leaves the namespace, the volumes
// (the same objects) and the marker; installing again mounts them; only
// deleting artifacts/ledger deletes the namespace.
func TestUninstallKeepsTheLedger(t *testing.T) {
	app := kustomize(t, "artifacts")
	release := kustomize(t, "artifacts/deploy")
	ledger := kustomize(t, "artifacts/ledger")
	for name, objs := range map[string][]*unstructured.Unstructured{"artifacts/": app, "artifacts/deploy (the release)": release} {
		assert.Empty(t, kinds(objs, "Namespace"), "%s holds no Namespace: deleting it would delete the ledger's volumes", name)
		assert.Empty(t, kinds(objs, "PersistentVolumeClaim"), "%s holds no volume of the ledger", name)
	}
	require.Len(t, kinds(ledger, "Namespace"), 1)
	assert.Equal(t, framework.SystemNamespace, kinds(ledger, "Namespace")[0].GetName())
	var ledgerClaims []string
	for _, pvc := range kinds(ledger, "PersistentVolumeClaim") {
		assert.Equal(t, framework.SystemNamespace, pvc.GetNamespace())
		ledgerClaims = append(ledgerClaims, pvc.GetName())
	}
	slices.Sort(ledgerClaims)
	assert.Equal(t, []string{"dockerios-apiserver-backups", "dockerios-apiserver-data"}, claimNames(t, app), "the apiserver mounts the data and the backups")
	assert.Equal(t, claimNames(t, app), ledgerClaims, "every volume the apiserver mounts is the ledger's")
	assert.Len(t, ledger, 3, "the namespace and the two volumes, nothing else")

	cp := framework.StartKubeAPIServer(t)
	cfg := framework.RESTConfig(t, cp.AdminKubeconfig)
	require.NoError(t, harness.InstallCRDs(context.Background(), cfg)) // artifacts/network's kinds
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	k := framework.NewKubectl(t, cp.AdminKubeconfig)
	root := moduleRoot(t)
	k.MustRun(t, "", "apply", "-k", filepath.Join(root, "artifacts", "ledger"))
	k.MustRun(t, "", "apply", "-k", filepath.Join(root, "artifacts"))
	ctx := context.Background()
	uids := map[string]string{}
	for _, name := range ledgerClaims {
		pvc, err := kube.CoreV1().PersistentVolumeClaims(framework.SystemNamespace).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		uids[name] = string(pvc.UID)
	}
	// What the apiserver writes at its first start.
	_, err = kube.CoreV1().ConfigMaps(framework.SystemNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ledgerguard.DefaultMarker.Name},
		Data:       map[string]string{ledgerguard.DataLedgerID: "ledger-under-test"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	k.MustRun(t, "", "delete", "-k", filepath.Join(root, "artifacts"), "--wait", "--timeout=2m")
	ns, err := kube.CoreV1().Namespaces().Get(ctx, framework.SystemNamespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, ns.DeletionTimestamp, "the ledger's namespace is not being deleted")
	for name, uid := range uids {
		pvc, err := kube.CoreV1().PersistentVolumeClaims(framework.SystemNamespace).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "%s survives the uninstall", name)
		assert.Equal(t, uid, string(pvc.UID), "%s is the same volume", name)
		assert.Nil(t, pvc.DeletionTimestamp, name)
	}
	cm, err := kube.CoreV1().ConfigMaps(framework.SystemNamespace).Get(ctx, ledgerguard.DefaultMarker.Name, metav1.GetOptions{})
	require.NoError(t, err, "the marker survives the uninstall")
	assert.Equal(t, "ledger-under-test", cm.Data[ledgerguard.DataLedgerID])
	_, err = kube.AppsV1().Deployments(framework.SystemNamespace).Get(ctx, "dockerios-apiserver", metav1.GetOptions{})
	assert.True(t, err != nil && strings.Contains(err.Error(), "not found"), "DockerIOS itself is gone: %v", err)
	assert.True(t, k.Run("", "get", "apiservice", "v1alpha1.dockerios.io").Err != nil, "the APIService is gone")

	// Coming back: the same volumes are mounted again.
	k.MustRun(t, "", "apply", "-k", filepath.Join(root, "artifacts", "ledger"))
	k.MustRun(t, "", "apply", "-k", filepath.Join(root, "artifacts"))
	for name, uid := range uids {
		pvc, err := kube.CoreV1().PersistentVolumeClaims(framework.SystemNamespace).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, uid, string(pvc.UID), "%s is the volume from before", name)
	}

	// Deleting the ledger is a step of its own.
	k.MustRun(t, "", "delete", "-k", filepath.Join(root, "artifacts"), "--wait", "--timeout=2m")
	k.MustRun(t, "", "delete", "-k", filepath.Join(root, "artifacts", "ledger"), "--wait=false")
	ns, err = kube.CoreV1().Namespaces().Get(ctx, framework.SystemNamespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotNil(t, ns.DeletionTimestamp, "deleting artifacts/ledger deletes the namespace, and everything in it")
}
