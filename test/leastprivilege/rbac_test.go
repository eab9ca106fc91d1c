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
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/dockerios/dockerios/test/framework"
)

// need is one verb on one resource the controller's code calls, and where.
type need struct {
	group, resource string // resource may be resource/subresource
	verbs           []string
	clusterScoped   bool
	usedBy          string
}

// controllerNeeds is what cmd/controller and pkg/controller call with the
// ClusterRole dockerios-controller, found by reading every client call and
// informer. Informers list and watch; "get" is a live read.
var controllerNeeds = []need{
	{"dockerios.io", "macosmachines", []string{"list", "watch"}, false, "manager: machines informer; vmaudit.Guard: live list while a pool is on hold"},
	{"dockerios.io", "macosmachines", []string{"get"}, false, "kubectl patch with this role (test/aggregated) reads first; list discloses as much"},
	{"dockerios.io", "macosmachines", []string{"create", "delete"}, false, "pool.Reconciler: scale up and down, class claims"},
	{"dockerios.io", "macosmachines", []string{"patch"}, false, "machine.removeFinalizer"},
	{"dockerios.io", "macosmachines", []string{"bind"}, false, "checked by the apiserver on pool.Reconciler's bind"},
	{"dockerios.io", "macosmachines/status", []string{"update"}, false, "machine.Reconciler: UpdateStatus"},
	{"dockerios.io", "macosmachines/finalizers", []string{"update"}, false, "the apiserver on removing the teardown finalizer"},
	{"dockerios.io", "macosmachinepools", []string{"list", "watch"}, false, "manager: pools informer"},
	{"dockerios.io", "macosmachinepools/status", []string{"patch"}, false, "pool.Reconciler: status"},
	{"dockerios.io", "macosmachineclaims", []string{"list", "watch"}, false, "manager: claims informer"},
	{"dockerios.io", "macosmachineclaims", []string{"get"}, false, "pool.Reconciler: live read before a bind"},
	{"dockerios.io", "macosmachineclaims/bind", []string{"create"}, false, "pool.Reconciler: Bind"},
	{"dockerios.io", "macosmachineclasses", []string{"list", "watch"}, true, "manager: classes informer"},
	{"dockerios.io", "macosmachineclasses/status", []string{"update"}, true, "machine.Reconciler: storage probe and class status"},
	{"dockerios.io", "macosimages", []string{"list", "watch"}, true, "manager: images informer"},
	{"dockerios.io", "macosimages", []string{"get"}, true, "image.Reconciler: live read before acting on its status"},
	{"dockerios.io", "macosimages/status", []string{"patch"}, true, "image.Reconciler"},
	{"dockerios.io", "macosimages/finalizers", []string{"update"}, true, "the apiserver on a recovery Job's blockOwnerDeletion owner reference"},
	{"dockerios.io", "macosidentities", []string{"list", "watch"}, true, "manager: identities informer; vmaudit.Guard: live list while a pool is on hold"},
	{"dockerios.io", "macosidentities", []string{"get"}, true, "machine.Reconciler.mayMake: the ledger read live before anything is made"},
	{"dockerios.io", "macosidentities/status", []string{"update"}, true, "vmaudit.Guard: HeldOutsideLedger"},
	{"dockerios.io", "macosidentitypools", []string{"list", "watch"}, true, "manager: metrics of identity pools"},
	{"dockerios.io", "macosidentitypools", []string{"get"}, true, "machine.Reconciler.mayMake: a restore's hold read live"},
	{"dockerios.io", "macosidentitypools", []string{"use"}, true, "checked by the apiserver on every machine the controller creates"},
	{"dockerios.io", "macosidentitypools/hold", []string{"delete"}, true, "vmaudit.Guard: lifts a restored pool's hold"},
	{"", "secrets", []string{"list", "watch"}, false, "manager: informer of Secrets labelled dockerios.io/machine-uid"},
	{"", "secrets", []string{"create", "get", "delete"}, false, "machine: token and identity Secrets, OSK Secret check, teardown"},
	{"", "persistentvolumeclaims", []string{"list", "watch"}, false, "manager: informer of labelled PVCs"},
	{"", "persistentvolumeclaims", []string{"create", "get", "delete", "patch"}, false, "machine: bootdisk PVC and its failure count; image: source PVC"},
	{"batch", "jobs", []string{"list", "watch"}, false, "manager: informer of labelled Jobs"},
	{"batch", "jobs", []string{"create", "get", "delete"}, false, "machine: bootdisk Job; image: recovery Jobs"},
	{"kubevirt.io", "virtualmachines", []string{"list", "watch"}, false, "manager: informer of labelled VMs"},
	{"kubevirt.io", "virtualmachines", []string{"create", "get", "delete", "patch"}, false, "machine: VM, stop at teardown"},
	{"kubevirt.io", "virtualmachineinstances", []string{"list", "watch", "delete"}, false, "manager: informer; teardown of a lost VMI"},
	{"cdi.kubevirt.io", "datavolumes", []string{"list", "watch"}, false, "manager: informer of labelled DataVolumes"},
	{"cdi.kubevirt.io", "datavolumes", []string{"create", "get", "delete", "patch"}, false, "machine: system disk, preserved at teardown"},
	{"cdi.kubevirt.io", "datavolumes/source", []string{"create"}, false, "CDI's clone authorization"},
	{"cdi.kubevirt.io", "datasources", []string{"get"}, false, "image.Reconciler: source readiness"},
	{"cdi.kubevirt.io", "datasources", []string{"create", "update"}, false, "image.Reconciler: a promotion points the DataSource at the golden volume"},
	{"", "nodes", []string{"list", "watch"}, true, "manager: node readiness"},
	{"", "pods", []string{"list"}, false, "machine.builderExit; image: a recovery Job's outcome"},
	{"", "pods/log", []string{"get"}, false, "image: a running recovery fetch's progress"},
	{"", "events", []string{"create", "patch"}, false, "client-go's event recorder"},
}

func key(group, resource, verb string) string { return group + "/" + resource + ":" + verb }

// The ClusterRole grants, verb by verb, exactly what the code calls: a
// verb added without a use, or a use whose verb is taken away, fails.
func TestControllerClusterRole_GrantsExactlyWhatTheCodeCalls(t *testing.T) {
	// setup
	var role rbacv1.ClusterRole
	find(t, readDocs(t, "artifacts/deploy/09-controller.yaml"), "ClusterRole", "dockerios-controller").decode(t, &role)
	want := map[string]bool{}
	for _, n := range controllerNeeds {
		for _, v := range n.verbs {
			want[key(n.group, n.resource, v)] = true
		}
	}

	// execute
	granted := map[string]bool{}
	for _, r := range role.Rules {
		assert.Empty(t, r.ResourceNames, "rule %v", r)
		assert.Empty(t, r.NonResourceURLs, "rule %v", r)
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					assert.NotEqual(t, "*", v, "a wildcard verb on %s", res)
					assert.NotEqual(t, "*", res, "a wildcard resource")
					granted[key(g, res, v)] = true
				}
			}
		}
	}

	// assert
	assert.Equal(t, sorted(want), sorted(granted), "the controller's ClusterRole against what its code calls")
}

func sorted(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

const machineNamespace = "macs"

// refused is what the controller's ServiceAccount must not do: writes it
// has no use for, reads it never makes, and what RBAC verbs were taken
// away.
var refused = []authorizationv1.ResourceAttributes{
	{Namespace: machineNamespace, Resource: "secrets", Verb: "update"},
	{Namespace: machineNamespace, Resource: "secrets", Verb: "patch"},
	{Namespace: machineNamespace, Resource: "secrets", Verb: "deletecollection"},
	{Namespace: machineNamespace, Resource: "configmaps", Verb: "get"},
	{Namespace: machineNamespace, Resource: "pods", Verb: "get"},
	{Namespace: machineNamespace, Resource: "pods", Verb: "create"},
	{Namespace: machineNamespace, Resource: "pods", Verb: "delete"},
	{Namespace: machineNamespace, Resource: "pods", Subresource: "exec", Verb: "create"},
	{Namespace: machineNamespace, Resource: "serviceaccounts", Subresource: "token", Verb: "create"},
	{Namespace: machineNamespace, Resource: "persistentvolumeclaims", Verb: "update"},
	{Namespace: machineNamespace, Group: "batch", Resource: "jobs", Verb: "update"},
	{Namespace: machineNamespace, Group: "batch", Resource: "jobs", Verb: "patch"},
	{Namespace: machineNamespace, Group: "kubevirt.io", Resource: "virtualmachines", Verb: "update"},
	{Namespace: machineNamespace, Group: "kubevirt.io", Resource: "virtualmachineinstances", Verb: "create"},
	{Namespace: machineNamespace, Group: "cdi.kubevirt.io", Resource: "datasources", Verb: "list"},
	{Namespace: machineNamespace, Group: "cdi.kubevirt.io", Resource: "datasources", Verb: "delete"},
	{Namespace: machineNamespace, Group: "cdi.kubevirt.io", Resource: "datasources", Verb: "patch"},
	{Namespace: machineNamespace, Resource: "pods", Subresource: "log", Verb: "list"},
	{Namespace: machineNamespace, Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Verb: "create"},
	{Resource: "nodes", Verb: "get"},
	{Resource: "nodes", Verb: "update"},
	{Resource: "nodes", Verb: "delete"},
	{Resource: "namespaces", Verb: "delete"},
	// The DockerIOS API: spec writes are the users', the ledger the
	// apiserver's.
	{Namespace: machineNamespace, Group: "dockerios.io", Resource: "macosmachines", Verb: "update"},
	{Namespace: machineNamespace, Group: "dockerios.io", Resource: "macosmachines", Verb: "deletecollection"},
	{Namespace: machineNamespace, Group: "dockerios.io", Resource: "macosmachinepools", Verb: "update"},
	{Namespace: machineNamespace, Group: "dockerios.io", Resource: "macosmachinepools", Verb: "claim"},
	{Namespace: machineNamespace, Group: "dockerios.io", Resource: "macosmachinepools", Subresource: "finalizers", Verb: "update"},
	{Namespace: machineNamespace, Group: "dockerios.io", Resource: "macosmachineclaims", Verb: "create"},
	{Namespace: machineNamespace, Group: "dockerios.io", Resource: "macosmachineclaims", Verb: "delete"},
	{Namespace: machineNamespace, Group: "dockerios.io", Resource: "macosmachineclaims", Subresource: "status", Verb: "update"},
	{Group: "dockerios.io", Resource: "macosidentities", Verb: "create"},
	{Group: "dockerios.io", Resource: "macosidentities", Verb: "update"},
	{Group: "dockerios.io", Resource: "macosidentities", Verb: "delete"},
	{Group: "dockerios.io", Resource: "macosidentitypools", Subresource: "status", Verb: "update"},
	{Group: "dockerios.io", Resource: "macosidentitypools", Verb: "delete"},
	{Group: "dockerios.io", Resource: "macosmachineclasses", Verb: "update"},
	{Group: "dockerios.io", Resource: "macosimages", Verb: "delete"},
	// Its namespaced Roles name their objects: no other lease, no other
	// PodTemplate, nowhere else.
	{Namespace: framework.SystemNamespace, Group: "coordination.k8s.io", Resource: "leases", Verb: "delete", Name: "dockerios-controller"},
	{Namespace: "kube-system", Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Name: "kube-controller-manager"},
	{Namespace: framework.SystemNamespace, Resource: "podtemplates", Verb: "get", Name: "other"},
	{Namespace: framework.SystemNamespace, Resource: "podtemplates", Verb: "update", Name: "dockerios-images"},
	{Namespace: machineNamespace, Resource: "podtemplates", Verb: "get", Name: "dockerios-images"},
}

// namespacedAllowed is what the controller's Roles in dockerios-system
// grant: leader election, and the images PodTemplate.
var namespacedAllowed = []authorizationv1.ResourceAttributes{
	{Namespace: framework.SystemNamespace, Group: "coordination.k8s.io", Resource: "leases", Verb: "get", Name: "dockerios-controller"},
	{Namespace: framework.SystemNamespace, Group: "coordination.k8s.io", Resource: "leases", Verb: "create"},
	{Namespace: framework.SystemNamespace, Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Name: "dockerios-controller"},
	{Namespace: framework.SystemNamespace, Resource: "podtemplates", Verb: "get", Name: "dockerios-images"},
}

// Against a real kube-apiserver with the shipped RBAC, the controller's
// ServiceAccount (its own token, as its pods have it) may do what its code
// calls and is refused the rest; and the network policies are valid API
// objects.
func TestAgainstKubeAPIServer(t *testing.T) {
	cp := framework.StartKubeAPIServer(t)
	k := framework.NewKubectl(t, cp.AdminKubeconfig)
	deploy := filepath.Join(moduleRoot(t), "artifacts", "deploy")
	k.MustRun(t, "", "apply", "-f", filepath.Join(moduleRoot(t), "artifacts", "ledger", "00-namespace.yaml"))
	for _, f := range []string{"09-controller.yaml", "11-images.yaml"} {
		k.MustRun(t, "", "apply", "-f", filepath.Join(deploy, f))
	}
	k.MustRun(t, "", "create", "namespace", machineNamespace)
	sa, err := kubernetes.NewForConfig(framework.RESTConfig(t, cp.ServiceAccountKubeconfig(t, "dockerios-controller")))
	require.NoError(t, err)

	t.Run("ControllerMayDoWhatItsCodeCalls", func(t *testing.T) {
		for _, n := range controllerNeeds {
			for _, v := range n.verbs {
				res, sub, _ := strings.Cut(n.resource, "/")
				a := authorizationv1.ResourceAttributes{Group: n.group, Resource: res, Subresource: sub, Verb: v}
				if !n.clusterScoped {
					a.Namespace = machineNamespace
				}
				assert.True(t, may(t, sa, a), "%s (%s)", describe(a), n.usedBy)
			}
		}
		for _, a := range namespacedAllowed {
			assert.True(t, may(t, sa, a), describe(a))
		}
	})
	t.Run("ControllerIsRefusedTheRest", func(t *testing.T) {
		for _, a := range refused {
			assert.False(t, may(t, sa, a), describe(a))
		}
	})
	t.Run("ControllerSecretsAreWrittenOnlyAsItWritesThem", func(t *testing.T) {
		// The answers above are the authorizer's; these are requests
		// with the ServiceAccount's token.
		ctx := context.Background()
		s, err := sa.CoreV1().Secrets(machineNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "mac-agent", Labels: map[string]string{"dockerios.io/machine-uid": "uid-1"}},
			Data:       map[string][]byte{"token": []byte("t")}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = sa.CoreV1().Secrets(machineNamespace).Patch(ctx, s.Name, types.MergePatchType, []byte(`{"data":{"token":"eA=="}}`), metav1.PatchOptions{})
		assert.True(t, apierrors.IsForbidden(err), "patch of a Secret: %v", err)
		_, err = sa.CoreV1().ConfigMaps(machineNamespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		assert.True(t, apierrors.IsForbidden(err), "get of a ConfigMap: %v", err)
		_, err = sa.CoreV1().Pods(machineNamespace).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "create of a Pod: %v", err)
		assert.NoError(t, sa.CoreV1().Secrets(machineNamespace).Delete(ctx, s.Name, metav1.DeleteOptions{}))
	})
	t.Run("NetworkPoliciesAreValid", func(t *testing.T) {
		testPoliciesValid(t, k)
	})
}

func describe(a authorizationv1.ResourceAttributes) string {
	r := a.Resource
	if a.Group != "" {
		r += "." + a.Group
	}
	if a.Subresource != "" {
		r += "/" + a.Subresource
	}
	if a.Name != "" {
		r += " " + a.Name
	}
	if a.Namespace != "" {
		r += " in " + a.Namespace
	}
	return a.Verb + " " + r
}

// may asks kube-apiserver, as the ServiceAccount itself, whether it may.
func may(t testing.TB, c kubernetes.Interface, a authorizationv1.ResourceAttributes) bool {
	t.Helper()
	r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(),
		&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.Allowed
}

// testPoliciesValid: kube-apiserver accepts the policies of
// dockerios-system as shipped (a server-side dry run, its validation and
// defaulting), and the agent network's MultiNetworkPolicy's spec as the
// NetworkPolicy spec it mirrors; a policy with an invalid port is refused,
// so the dry run does check.
func testPoliciesValid(t *testing.T, k *framework.Kubectl) {
	out := k.MustRun(t, "", "apply", "--dry-run=server", "-f", filepath.Join(moduleRoot(t), "artifacts", "deploy", "13-networkpolicies.yaml"))
	for _, d := range readDocs(t, "artifacts/deploy/13-networkpolicies.yaml") {
		assert.Contains(t, out, fmt.Sprintf("networkpolicy.networking.k8s.io/%s created (server dry run)", d.name))
	}

	for _, d := range ofKind(readDocs(t, "artifacts/network/agent-networkpolicy.yaml"), "MultiNetworkPolicy") {
		mnp := multiNetworkPolicy(t, d)
		asNP := map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
			"metadata": map[string]any{"name": mnp.Name, "namespace": machineNamespace}, "spec": mnp.Spec}
		manifest, err := yaml.Marshal(asNP)
		require.NoError(t, err)
		out := k.MustRun(t, string(manifest), "apply", "--dry-run=server", "-f", "-")
		assert.Contains(t, out, "created (server dry run)")

		broken := strings.Replace(string(manifest), "port: 8443", "port: not_a_port_name", 1)
		require.NotEqual(t, string(manifest), broken)
		r := k.Run(broken, "apply", "--dry-run=server", "-f", "-")
		assert.Error(t, r.Err, "an invalid port is refused")
		assert.Contains(t, r.Stderr, "Invalid value")
	}
	assert.True(t, slices.ContainsFunc(readDocs(t, "artifacts/network/agent-networkpolicy.yaml"), func(d doc) bool { return d.kind == "MultiNetworkPolicy" }))
}
