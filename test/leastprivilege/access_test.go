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
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dockerios/dockerios/test/framework"
)

const accessDoc = "docs/operators/access.md"

// accessExamples reads the page's example roles (every yaml block) and
// the bindings it tells the reader to make (every "kubectl create
// clusterrolebinding|rolebinding" line of its sh blocks), so that the test
// grants exactly what a reader following the page would.
func accessExamples(t testing.TB, src string) (yamls []string, bindings [][]string) {
	t.Helper()
	fence := regexp.MustCompile("(?ms)^```(yaml|sh)\n(.*?)^```")
	for _, m := range fence.FindAllStringSubmatch(src, -1) {
		if m[1] == "yaml" {
			yamls = append(yamls, m[2])
			continue
		}
		for _, line := range strings.Split(m[2], "\n") {
			f := strings.Fields(line)
			if len(f) > 3 && f[0] == "kubectl" && f[1] == "create" && (f[2] == "clusterrolebinding" || f[2] == "rolebinding") {
				bindings = append(bindings, f[1:])
			}
		}
	}
	require.NotEmpty(t, yamls, "%s has no yaml blocks", accessDoc)
	require.NotEmpty(t, bindings, "%s binds nobody", accessDoc)
	return yamls, bindings
}

type grant struct {
	user string
	authorizationv1.ResourceAttributes
	allowed bool
	why     string
}

func dio(verb, resource, namespace, name string) authorizationv1.ResourceAttributes {
	res, sub, _ := strings.Cut(resource, "/")
	return authorizationv1.ResourceAttributes{Group: "dockerios.io", Verb: verb, Resource: res, Subresource: sub, Namespace: namespace, Name: name}
}

func core(group, verb, resource, namespace, name string) authorizationv1.ResourceAttributes {
	res, sub, _ := strings.Cut(resource, "/")
	return authorizationv1.ResourceAttributes{Group: group, Verb: verb, Resource: res, Subresource: sub, Namespace: namespace, Name: name}
}

// What access.md says each person may and may not do, person by person.
var accessGrants = []grant{
	// Alice: dockerios-claimer in builds, claim-ci, use-imacpro.
	{"alice", dio("create", "macosmachineclaims", "builds", ""), true, "dockerios-claimer creates claims"},
	{"alice", dio("claim", "macosmachinepools", "builds", "ci"), true, "claim-ci and dockerios-claimer"},
	{"alice", dio("get", "macosmachines", "builds", "mac-a"), true, "reads the machine she is given"},
	{"alice", dio("use", "macosidentitypools", "", "imacpro"), true, "use-imacpro"},
	{"alice", dio("use", "macosidentitypools", "", "other"), false, "use-imacpro names imacpro only"},
	{"alice", dio("claim", "macosmachinepools", "other-team", "ci"), false, "bound in builds only"},
	{"alice", dio("create", "macosmachines", "builds", ""), false, "a claimer makes no machines"},
	{"alice", dio("bind", "macosmachines", "builds", "mac-a"), false, "a claimer binds nothing"},
	{"alice", dio("get", "macosidentities", "", "id-1"), false, "identity values are not for claimers"},
	// Dave: claim-from-ci only.
	{"dave", dio("create", "macosmachineclaims", "builds", ""), true, "claim-from-ci creates claims"},
	{"dave", dio("delete", "macosmachineclaims", "builds", "job-1"), true, "and releases them"},
	{"dave", dio("claim", "macosmachinepools", "builds", "ci"), true, "claim-from-ci names ci"},
	{"dave", dio("claim", "macosmachinepools", "builds", "other"), false, "claim-from-ci names ci only"},
	{"dave", dio("watch", "macosmachines", "builds", ""), true, "reads the machines"},
	{"dave", dio("use", "macosidentitypools", "", "imacpro"), false, "a pool claim needs no use"},
	// Bob: dockerios-image-maker, install-sessions in images-work.
	{"bob", dio("create", "macosimages", "", ""), true, "makes images"},
	{"bob", dio("patch", "macosimages", "", "sonoma"), true, "promote patches spec.promoteFrom"},
	{"bob", dio("watch", "macosimages", "", "sonoma"), true, "promote --wait follows the status"},
	{"bob", dio("update", "macosimages/status", "", "sonoma"), false, "status is the controller's"},
	{"bob", dio("get", "macosmachineclasses", "", "standard"), true, "reads classes"},
	{"bob", dio("use", "macosidentitypools", "", "imacpro"), true, "an install session draws an identity"},
	{"bob", dio("use", "macosidentitypools", "", "other"), false, "only the pool named"},
	{"bob", dio("create", "macosmachines", "images-work", ""), true, "starts install sessions"},
	{"bob", dio("create", "macosmachines", "builds", ""), false, "in his namespace only"},
	{"bob", core("subresources.kubevirt.io", "get", "virtualmachineinstances/vnc", "images-work", "sonoma-install-x"), true, "virtctl vnc"},
	{"bob", dio("create", "macosidentities", "", ""), false, "identities are the operator's"},
	// Carol: dockerios-admin and dockerios-operator cluster-wide,
	// dockerios-ledger-operator in dockerios-system.
	{"carol", dio("create", "macosidentities", "", ""), true, "dockerios-admin: identities"},
	{"carol", dio("update", "macosmachineclasses", "", "standard"), true, "dockerios-admin: classes"},
	{"carol", dio("delete", "macosmachines", "builds", "mac-a"), true, "dockerios-admin: every machine"},
	{"carol", dio("update", "macosmachines/status", "builds", "mac-a"), false, "status is the controller's"},
	{"carol", dio("update", "macosmachines/finalizers", "builds", "mac-a"), false, "the finalizer is the controller's"},
	{"carol", dio("delete", "macosidentitypools/hold", "", "imacpro"), true, "lifts a restore's hold"},
	{"carol", core("apiregistration.k8s.io", "watch", "apiservices", "", "v1alpha1.dockerios.io"), true, "kubectl wait apiservice"},
	{"carol", core("", "list", "events", "", ""), true, "kubectl get events -A"},
	{"carol", core("", "create", "pods/exec", framework.SystemNamespace, "dockerios-apiserver-x"), true, "ledger backup, list, cp"},
	{"carol", core("", "create", "pods/exec", "builds", "p"), false, "exec in dockerios-system only"},
	{"carol", core("", "get", "pods/log", framework.SystemNamespace, "dockerios-ledger-restore-x"), true, "the restore Job's log"},
	{"carol", core("apps", "patch", "deployments/scale", framework.SystemNamespace, "dockerios-apiserver"), true, "kubectl scale"},
	{"carol", core("apps", "update", "statefulsets/scale", framework.SystemNamespace, "dockerios-etcd"), true, "kubectl scale"},
	{"carol", core("batch", "create", "jobs", framework.SystemNamespace, ""), true, "the restore Job"},
	{"carol", core("", "patch", "configmaps", framework.SystemNamespace, "dockerios-ledger"), true, "annotate the marker"},
	{"carol", core("", "patch", "configmaps", framework.SystemNamespace, "other"), false, "the marker only"},
	{"carol", core("", "get", "secrets", framework.SystemNamespace, "dockerios-etcd-client"), false, "no Secrets"},
}

// TestAccessDoc_ExampleRolesGrantWhatThePageSays applies the example
// roles of docs/operators/access.md and the shipped roles to a real
// kube-apiserver, makes the page's bindings, and asks kube-apiserver
// whether each person may do what the page says, and may not do what it
// withholds.
func TestAccessDoc_ExampleRolesGrantWhatThePageSays(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), accessDoc))
	require.NoError(t, err)
	yamls, bindings := accessExamples(t, string(src))

	cp := framework.StartKubeAPIServer(t)
	k := framework.NewKubectl(t, cp.AdminKubeconfig)
	k.MustRun(t, "", "apply", "-f", filepath.Join(moduleRoot(t), "artifacts", "ledger", "00-namespace.yaml"))
	k.MustRun(t, "", "apply", "-f", filepath.Join(moduleRoot(t), "artifacts", "deploy", "05-roles.yaml"))
	for _, ns := range []string{"builds", "images-work", "other-team"} {
		k.MustRun(t, "", "create", "namespace", ns)
	}
	for _, y := range yamls {
		k.MustRun(t, y, "apply", "-f", "-")
	}
	for _, b := range bindings {
		k.MustRun(t, "", b...)
	}

	admin, err := kubernetes.NewForConfig(framework.RESTConfig(t, cp.AdminKubeconfig))
	require.NoError(t, err)
	for _, g := range accessGrants {
		a := g.ResourceAttributes
		r, err := admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(),
			&authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: g.user, ResourceAttributes: &a}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		if g.allowed {
			assert.True(t, r.Status.Allowed, "%s may %s (%s), as %s says", g.user, describe(a), g.why, accessDoc)
		} else {
			assert.False(t, r.Status.Allowed, "%s may not %s (%s), as %s says", g.user, describe(a), g.why, accessDoc)
		}
	}
}
