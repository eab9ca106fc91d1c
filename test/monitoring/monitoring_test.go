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

// Package monitoring tests artifacts/monitoring against what it scrapes
// (the Services, Deployments and RBAC of artifacts/) and against the
// Prometheus Operator's real CRD schemas in a real kube-apiserver. The
// alerting rules' and the dashboard's own tests need Prometheus's code
// and live in hack/prometheus.
package monitoring

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/dockerios/dockerios/test/framework"
	"github.com/dockerios/dockerios/test/harness"
)

const root = "../.."

// kustomize renders dir (relative to the repository) with kubectl's
// kustomize, as kubectl apply -k would, into YAML and objects.
func kustomize(t *testing.T, dir string) (string, []*unstructured.Unstructured) {
	t.Helper()
	k := framework.NewKubectl(t, "")
	cmd := exec.Command(k.Bin, "kustomize", filepath.Join(root, dir))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, errOut.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out.Bytes()), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	return out.String(), objs
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func named(t *testing.T, objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range ofKind(objs, kind) {
		if o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s/%s", kind, namespace, name)
	return nil
}

// The default install (artifacts/) carries no Prometheus Operator kind:
// it must apply on a cluster without those CRDs.
func TestMonitoring_NotInTheDefaultInstall(t *testing.T) {
	_, objs := kustomize(t, "artifacts")

	for _, o := range objs {
		if o.GroupVersionKind().Group == "monitoring.coreos.com" {
			t.Errorf("artifacts/ renders %s %s/%s: it would not apply without the Prometheus Operator's CRDs",
				o.GetKind(), o.GetNamespace(), o.GetName())
		}
	}
	if len(ofKind(objs, "Service")) == 0 {
		t.Fatal("artifacts/ renders no Service: the render is not what it was")
	}
}

// Each ServiceMonitor selects exactly one Service of the install, by its
// labels in the namespaces it names; the endpoint's port is one of that
// Service's ports, whose target is a port the selected pods' container
// declares (the controller's, the one --health-bind-address serves
// /metrics on). The apiserver's endpoint verifies the serving certificate
// for the name the APIService calls it by, with the CA of the Secret the
// apiserver keeps it in, and the ClusterRoleBinding grants a role that
// may get /metrics.
func TestMonitoring_ServiceMonitorsScrapeWhatTheInstallServes(t *testing.T) {
	_, install := kustomize(t, "artifacts")
	_, monitoring := kustomize(t, "artifacts/monitoring")
	monitors := ofKind(monitoring, "ServiceMonitor")
	if len(monitors) != 2 {
		t.Fatalf("artifacts/monitoring has %d ServiceMonitors, want the controller's and the apiserver's", len(monitors))
	}

	for _, sm := range monitors {
		t.Run(sm.GetName(), func(t *testing.T) {
			sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
			namespaces, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
			var services []*corev1.Service
			for _, o := range ofKind(install, "Service") {
				if slices.Contains(namespaces, o.GetNamespace()) && len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(o.GetLabels())) {
					services = append(services, toService(t, o))
				}
			}
			if len(services) != 1 {
				t.Fatalf("selects %d Services in %v (labels %v), want 1", len(services), namespaces, sel)
			}
			svc := services[0]
			endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			if len(endpoints) != 1 {
				t.Fatalf("%d endpoints, want 1", len(endpoints))
			}
			ep := endpoints[0].(map[string]any)
			var port *corev1.ServicePort
			for i := range svc.Spec.Ports {
				if svc.Spec.Ports[i].Name == ep["port"] {
					port = &svc.Spec.Ports[i]
				}
			}
			if port == nil {
				t.Fatalf("Service %s has no port %v", svc.Name, ep["port"])
			}
			container := targetContainerPort(t, install, svc, port.TargetPort)
			t.Logf("Service %s port %s reaches container port %d", svc.Name, port.Name, container)

			switch sm.GetName() {
			case "dockerios-controller":
				args := deploymentArgs(t, install, svc.Namespace, "dockerios-controller")
				if want := fmt.Sprintf("--health-bind-address=:%d", container); !slices.Contains(args, want) {
					t.Errorf("the controller serves /metrics per %v, not on %d", args, container)
				}
				if ep["scheme"] != "http" {
					t.Errorf("scheme %v, want http", ep["scheme"])
				}
			case "dockerios-apiserver":
				apiService := named(t, install, "APIService", "", "v1alpha1.dockerios.io")
				svcName, _, _ := unstructured.NestedString(apiService.Object, "spec", "service", "name")
				svcNS, _, _ := unstructured.NestedString(apiService.Object, "spec", "service", "namespace")
				if got, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName"); got != svcName+"."+svcNS+".svc" {
					t.Errorf("serverName %q, want the APIService's Service %s.%s.svc", got, svcName, svcNS)
				}
				secret, _, _ := unstructured.NestedString(ep, "tlsConfig", "ca", "secret", "name")
				key, _, _ := unstructured.NestedString(ep, "tlsConfig", "ca", "secret", "key")
				args := deploymentArgs(t, install, svc.Namespace, "dockerios-apiserver")
				if want := "--cert-secret=" + sm.GetNamespace() + "/" + secret; !slices.Contains(args, want) || key != "ca-bundle.crt" {
					t.Errorf("CA from Secret %s key %s; the apiserver keeps the CAs to trust in ca-bundle.crt of %v", secret, key, args)
				}
				if ep["scheme"] != "https" || ep["bearerTokenFile"] == nil {
					t.Errorf("scheme %v, bearerTokenFile %v: the apiserver wants https and a token", ep["scheme"], ep["bearerTokenFile"])
				}
				checkMetricsReader(t, install, monitoring)
			default:
				t.Errorf("unexpected ServiceMonitor %s", sm.GetName())
			}
		})
	}
}

func toService(t *testing.T, o *unstructured.Unstructured) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	if err := runtimeConvert(o, svc); err != nil {
		t.Fatal(err)
	}
	return svc
}

// targetContainerPort is the container port target resolves to in the
// Deployment svc selects.
func targetContainerPort(t *testing.T, install []*unstructured.Unstructured, svc *corev1.Service, target intstr.IntOrString) int32 {
	t.Helper()
	var found []int32
	for _, o := range ofKind(install, "Deployment") {
		if o.GetNamespace() != svc.Namespace {
			continue
		}
		podLabels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(podLabels)) {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			ports, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
			for _, p := range ports {
				pm := p.(map[string]any)
				num := number(pm["containerPort"])
				name, _, _ := unstructured.NestedString(pm, "name")
				if (target.Type == intstr.String && name == target.StrVal) || (target.Type == intstr.Int && int64(target.IntVal) == num) {
					found = append(found, int32(num))
				}
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("Service %s's targetPort %s names %d container ports of the pods it selects, want 1", svc.Name, target.String(), len(found))
	}
	return found[0]
}

// number is a YAML number as decoded into a map (JSON's float64).
func number(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return -1
}

func deploymentArgs(t *testing.T, install []*unstructured.Unstructured, namespace, name string) []string {
	t.Helper()
	d := named(t, install, "Deployment", namespace, name)
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	var args []string
	for _, c := range containers {
		a, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
		args = append(args, a...)
	}
	return args
}

// checkMetricsReader: the monitoring binding grants a ClusterRole of the
// install that may get /metrics, to a service account.
func checkMetricsReader(t *testing.T, install, monitoring []*unstructured.Unstructured) {
	t.Helper()
	bindings := ofKind(monitoring, "ClusterRoleBinding")
	if len(bindings) != 1 {
		t.Fatalf("artifacts/monitoring has %d ClusterRoleBindings, want 1", len(bindings))
	}
	role, _, _ := unstructured.NestedString(bindings[0].Object, "roleRef", "name")
	subjects, _, _ := unstructured.NestedSlice(bindings[0].Object, "subjects")
	if len(subjects) != 1 || subjects[0].(map[string]any)["kind"] != "ServiceAccount" {
		t.Errorf("the binding's subjects are %v, want one ServiceAccount (Prometheus's)", subjects)
	}
	cr := named(t, install, "ClusterRole", "", role)
	rules, _, _ := unstructured.NestedSlice(cr.Object, "rules")
	for _, r := range rules {
		urls, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "nonResourceURLs")
		verbs, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "verbs")
		if slices.Contains(urls, "/metrics") && slices.Contains(verbs, "get") {
			return
		}
	}
	t.Errorf("ClusterRole %s does not grant get on /metrics: %v", role, rules)
}

// kube-apiserver, with the Prometheus Operator's CRDs installed (generated
// from its API module, test/harness/crds/monitoring), accepts everything
// artifacts/monitoring renders in a strict server-side dry run, and
// refuses objects that break those schemas: the schemas are enforced, so
// the acceptance means something.
func TestMonitoring_DryRunAgainstThePrometheusOperatorSchemas(t *testing.T) {
	cp := framework.StartKubeAPIServer(t)
	cfg := framework.RESTConfig(t, cp.AdminKubeconfig)
	if err := harness.InstallMonitoringCRDs(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: framework.SystemNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k := framework.NewKubectl(t, cp.AdminKubeconfig)
	rendered, objs := kustomize(t, "artifacts/monitoring")
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "ConfigMap", "ClusterRoleBinding"} {
		if len(ofKind(objs, kind)) == 0 {
			t.Fatalf("artifacts/monitoring renders no %s", kind)
		}
	}

	// The metrics Services and ClusterRole of the install, then the
	// monitoring objects.
	deploy := k.MustRun(t, "", "apply", "--dry-run=server", "--validate=strict", "-f", filepath.Join(root, "artifacts", "deploy", "14-metrics.yaml"))
	out := k.MustRun(t, rendered, "apply", "--dry-run=server", "--validate=strict", "-f", "-")
	t.Logf("%s%s", deploy, out)
	for _, o := range objs {
		if !strings.Contains(out, strings.ToLower(o.GetKind())) || !strings.Contains(out, o.GetName()) {
			t.Errorf("kubectl did not report %s %s: %s", o.GetKind(), o.GetName(), out)
		}
	}

	for _, tc := range []struct {
		name, manifest, want string
	}{
		{"ServiceMonitor with an unknown endpoint field", `apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: typo, namespace: dockerios-system}
spec:
  selector: {matchLabels: {app: x}}
  endpoints: [{port: metrics, bearerTokenFiles: /var/run/secrets/kubernetes.io/serviceaccount/token}]
`, `unknown field "spec.endpoints[0].bearerTokenFiles"`},
		{"ServiceMonitor with a scheme the operator does not know", `apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: scheme, namespace: dockerios-system}
spec:
  selector: {matchLabels: {app: x}}
  endpoints: [{port: metrics, scheme: gopher}]
`, "spec.endpoints[0].scheme"},
		{"PrometheusRule whose rule has no expr", `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: noexpr, namespace: dockerios-system}
spec:
  groups: [{name: g, rules: [{alert: A, for: 5m}]}]
`, "spec.groups[0].rules[0].expr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.Run(tc.manifest, "apply", "--dry-run=server", "--validate=strict", "-f", "-")

			if r.Err == nil || !strings.Contains(r.Stderr, tc.want) {
				t.Errorf("kube-apiserver did not refuse it for %s: %v\n%s%s", tc.want, r.Err, r.Stdout, r.Stderr)
			}
		})
	}
}
