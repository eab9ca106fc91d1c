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

package framework

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ControllerBinEnv points tests at a prebuilt dockerios-controller.
const ControllerBinEnv = "DOCKERIOS_CONTROLLER_BIN"

var controllerBin = &binary{env: ControllerBinEnv, name: "dockerios-controller", pkg: "./cmd/controller"}

// ControllerServiceName is the controller's Service (its webhook).
const ControllerServiceName = "dockerios-controller"

// Controller is a running dockerios-controller with its virt-launcher pod
// webhook registered in kube-apiserver from artifacts/deploy.
type Controller struct {
	// HealthURL serves /healthz, /readyz and /metrics.
	HealthURL string
	args      []string
	*process
	cp *ControlPlane
}

// StartController registers the controller's webhook (artifacts/deploy's
// Service, as an ExternalName to localhost, and its
// MutatingWebhookConfiguration with the test serving CA) and starts the
// controller. It stops when the test ends.
func (cp *ControlPlane) StartController(t TB, extraArgs ...string) *Controller {
	t.Helper()
	return cp.startController(t, false, "", extraArgs)
}

// StartControllerSelfCert is StartController as a plain install of
// artifacts/deploy runs the webhook: its MutatingWebhookConfiguration
// has no caBundle, and the controller, started with extraArgs
// (its --webhook-cert-secret and --webhook-configuration) instead of a
// certificate directory, must make its serving certificate and fill the
// caBundle itself. manifests (the RBAC those flags need) are applied
// first.
func (cp *ControlPlane) StartControllerSelfCert(t TB, manifests string, extraArgs ...string) *Controller {
	t.Helper()
	return cp.startController(t, true, manifests, extraArgs)
}

func (cp *ControlPlane) startController(t TB, selfCert bool, manifests string, extraArgs []string) *Controller {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	k := NewKubectl(t, cp.AdminKubeconfig)
	k.MustRun(t, "", "apply", "-f", filepath.Join(root, "artifacts", "deploy", "09-controller.yaml"))
	// The Deployment itself is not for this cluster (no kubelet); the
	// process below plays it, with the ServiceAccount's token.
	k.MustRun(t, "", "-n", SystemNamespace, "delete", "deployment", "dockerios-controller", "--ignore-not-found")
	webhookPort, healthPort := FreePort(t), FreePort(t)
	k.MustRun(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %s, namespace: %s}
spec:
  type: ExternalName
  externalName: localhost
  ports: [{name: webhook, port: %d}]
`, ControllerServiceName, SystemNamespace, webhookPort), "apply", "-f", "-")
	config, err := os.ReadFile(filepath.Join(root, "artifacts", "deploy", "10-launcher-webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := string(config)
	if !selfCert {
		manifest = withField(t, manifest, "    service:", "    caBundle: "+base64.StdEncoding.EncodeToString(cp.servingCA.CertPEM()))
	}
	manifest = strings.Replace(manifest, "      port: 443", fmt.Sprintf("      port: %d", webhookPort), 1)
	k.MustRun(t, manifest, "apply", "-f", "-")
	args := []string{
		fmt.Sprintf("--health-bind-address=127.0.0.1:%d", healthPort),
		fmt.Sprintf("--webhook-bind-address=127.0.0.1:%d", webhookPort),
		"--kubeconfig=" + cp.serviceAccountKubeconfig(t, "dockerios-controller"),
		"--leader-election-namespace=" + SystemNamespace,
		"--bootdisk-image=registry.test/dockerios-bootdisk:test",
		"--hook-sidecar-image=registry.test/dockerios-sidecar-hook:test",
		"--vm-termination-grace-period=5s",
		"--log-level=debug",
	}
	if selfCert {
		k.MustRun(t, manifests, "apply", "-f", "-")
	} else {
		args = append(args, "--webhook-cert-dir="+cp.controllerCertDir(t))
	}
	c := &Controller{cp: cp, HealthURL: fmt.Sprintf("http://127.0.0.1:%d", healthPort), args: append(args, extraArgs...)}
	c.Start(t)
	return c
}

// controllerCertDir writes the webhook's serving certificate from the
// test serving CA, as a mounted kubernetes.io/tls Secret has it.
func (cp *ControlPlane) controllerCertDir(t TB) string {
	t.Helper()
	// kube-apiserver checks the webhook's certificate against the
	// Service's DNS name, whatever address it dials.
	certDir := filepath.Join(cp.Dir, "controller-webhook-tls")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cert, key, err := cp.servingCA.IssueServing("dockerios-controller",
		[]string{ControllerServiceName + "." + SystemNamespace + ".svc", "localhost", "127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certDir
}

// Start starts the controller (again) and waits until it is ready.
func (c *Controller) Start(t TB) {
	t.Helper()
	c.process = c.cp.start(t, "dockerios-controller", controllerBin.get(t), c.args...)
	c.waitHTTP(t, c.HealthURL+"/readyz", nil, time.Minute)
}

// Output is what the controller logged.
func (c *Controller) Output() string { return c.output.String() }

// Kill kills the controller with SIGKILL.
func (c *Controller) Kill(t TB) { c.signal(t, syscall.SIGKILL) }
