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

package leastprivilege

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dockerios/dockerios/pkg/ledgerguard"
	"github.com/dockerios/dockerios/test/framework"
)

// The apiserver's ServiceAccount, under the shipped RBAC
// (artifacts/deploy/04-apiserver-rbac.yaml), may read and update the
// ledger's marker and create it in its namespace, and nothing more of
// ConfigMaps: no other ConfigMap, no other namespace, no delete.
func TestApiserverMayWriteOnlyTheLedgerMarker(t *testing.T) {
	cp := framework.StartKubeAPIServer(t)
	k := framework.NewKubectl(t, cp.AdminKubeconfig)
	k.MustRun(t, "", "apply", "-k", filepath.Join(moduleRoot(t), "artifacts", "ledger"))
	for _, f := range []string{"01-serviceaccount.yaml", "04-apiserver-rbac.yaml"} {
		k.MustRun(t, "", "apply", "-f", filepath.Join(moduleRoot(t), "artifacts", "deploy", f))
	}
	sa, err := kubernetes.NewForConfig(framework.RESTConfig(t, cp.ServiceAccountKubeconfig(t, "dockerios-apiserver")))
	require.NoError(t, err)
	marker := ledgerguard.DefaultMarker
	cm := func(verb, namespace, name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: verb, Namespace: namespace, Name: name}
	}
	for _, a := range []authorizationv1.ResourceAttributes{
		cm("get", marker.Namespace, marker.Name),
		cm("update", marker.Namespace, marker.Name),
		cm("create", marker.Namespace, ""),
	} {
		assert.True(t, may(t, sa, a), describe(a))
	}
	for _, a := range []authorizationv1.ResourceAttributes{
		cm("get", marker.Namespace, "kube-root-ca.crt"),
		cm("update", marker.Namespace, "dockerios-other"),
		cm("delete", marker.Namespace, marker.Name),
		cm("patch", marker.Namespace, marker.Name),
		cm("list", marker.Namespace, ""),
		cm("get", "default", marker.Name),
		cm("create", "default", ""),
	} {
		assert.False(t, may(t, sa, a), describe(a))
	}
}
