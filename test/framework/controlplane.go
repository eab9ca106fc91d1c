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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dockerios/dockerios/pkg/localpki"
)

// Environment variables naming the control-plane binaries; hack/test.sh
// points them at hack/build-control-plane.sh's builds in bin/.
const (
	EtcdBinEnv                  = "DOCKERIOS_ETCD_BIN"
	KubeAPIServerBinEnv         = "DOCKERIOS_KUBE_APISERVER_BIN"
	KubeControllerManagerBinEnv = "DOCKERIOS_KUBE_CONTROLLER_MANAGER_BIN"
)

// The namespace and Service the APIService routes dockerios.io to.
const (
	SystemNamespace = "dockerios-system"
	ServiceName     = "dockerios-apiserver"
)

// ControlPlane is a real control plane on loopback: etcd, kube-apiserver
// with RBAC and the aggregation layer, kube-controller-manager, and the
// DockerIOS apiserver registered through an APIService, with DockerIOS's
// RBAC applied from artifacts/deploy. kube-controller-manager runs only the controllers the tests rely on: the
// namespace controller (deleting a namespace deletes our objects in it),
// the garbage collector, and ClusterRole aggregation (dockerios-view/edit/
// admin reach the built-in view/edit/admin).
type ControlPlane struct {
	Dir string
	// EtcdURL is the etcd both apiservers store in.
	EtcdURL string
	// KubeAPIServerURL is where kubectl talks to.
	KubeAPIServerURL string
	// DockerIOSURL reaches the DockerIOS apiserver directly, bypassing
	// kube-apiserver (as an attacker on the network would).
	DockerIOSURL string
	// AdminKubeconfig is a kubeconfig of a cluster admin (system:masters).
	AdminKubeconfig string

	clientCA, frontProxyCA, servingCA *localpki.CA
	processes                         []*process
	dockerIOS                         *process
	dockerIOSArgs                     []string
	// selfCert leaves the DockerIOS serving certificate and the
	// APIService's caBundle to the DockerIOS apiserver.
	selfCert bool
}

// binaryFromEnv returns the control-plane binary env names, failing the
// test with how to build it if it is missing.
func binaryFromEnv(t TB, env, name string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(root, "bin", name)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s not found at %s: run hack/build-control-plane.sh (or set %s)", name, path, env)
	}
	return path
}

// StartControlPlane starts the whole control plane and waits until
// kubectl sees dockerios.io through kube-apiserver. Everything stops when
// the test ends.
func StartControlPlane(t TB) *ControlPlane {
	t.Helper()
	cp := StartKubeAPIServer(t)
	cp.startKubeControllerManager(t)
	cp.registerDockerIOS(t)
	cp.startDockerIOS(t)
	cp.waitAPIServiceAvailable(t, 2*time.Minute)
	return cp
}

// StartControlPlaneSelfCert is StartControlPlane as a plain install of
// artifacts/deploy runs it: the APIService has no caBundle, and
// the DockerIOS apiserver, started with extraArgs (its --cert-secret and
// --apiservice), must make its serving certificate and fill the caBundle
// itself before dockerios.io is served. manifests (the RBAC those flags
// need) are applied first.
func StartControlPlaneSelfCert(t TB, manifests string, extraArgs ...string) *ControlPlane {
	t.Helper()
	cp := StartKubeAPIServer(t)
	cp.selfCert = true
	cp.registerDockerIOS(t)
	NewKubectl(t, cp.AdminKubeconfig).MustRun(t, manifests, "apply", "-f", "-")
	cp.dockerIOSArgs = append(cp.dockerIOSArgs, extraArgs...)
	cp.startDockerIOS(t)
	cp.waitAPIServiceAvailable(t, 2*time.Minute)
	return cp
}

// StartKubeAPIServer starts etcd and kube-apiserver alone, with RBAC and
// the aggregation layer, for tests of what needs only kube-apiserver.
// Everything stops when the test ends.
func StartKubeAPIServer(t TB) *ControlPlane {
	t.Helper()
	cp := &ControlPlane{Dir: t.TempDir()}
	t.Cleanup(func() { cp.stopAll(t) })
	now := time.Now()
	var err error
	if cp.clientCA, err = localpki.NewCA("test-client-ca", now); err != nil {
		t.Fatal(err)
	}
	if cp.frontProxyCA, err = localpki.NewCA("test-front-proxy-ca", now); err != nil {
		t.Fatal(err)
	}
	if cp.servingCA, err = localpki.NewCA("test-serving-ca", now); err != nil {
		t.Fatal(err)
	}

	cp.startEtcd(t)
	cp.startKubeAPIServer(t)
	cp.AdminKubeconfig = cp.UserKubeconfig(t, "admin", "system:masters")
	return cp
}

func (cp *ControlPlane) write(t TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(cp.Dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (cp *ControlPlane) issueServing(t TB, ca *localpki.CA, name string, hosts []string) (certFile, keyFile string) {
	t.Helper()
	cert, key, err := ca.IssueServing(name, hosts, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cp.write(t, name+".crt", cert), cp.write(t, name+".key", key)
}

func (cp *ControlPlane) issueClient(t TB, ca *localpki.CA, name string, groups ...string) (certFile, keyFile string) {
	t.Helper()
	cert, key, err := ca.IssueClient(name, groups, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cp.write(t, "client-"+name+".crt", cert), cp.write(t, "client-"+name+".key", key)
}

func (cp *ControlPlane) startEtcd(t TB) {
	t.Helper()
	client, peer := FreePort(t), FreePort(t)
	cp.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", client)
	p := cp.start(t, "etcd", binaryFromEnv(t, EtcdBinEnv, "etcd"),
		"--name=test", "--data-dir="+filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls="+cp.EtcdURL, "--advertise-client-urls="+cp.EtcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", peer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", peer),
		fmt.Sprintf("--initial-cluster=test=http://127.0.0.1:%d", peer),
		"--log-level=warn")
	p.waitHTTP(t, cp.EtcdURL+"/health", nil, time.Minute)
}

func (cp *ControlPlane) startKubeAPIServer(t TB) {
	t.Helper()
	port := FreePort(t)
	cp.KubeAPIServerURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	servingCert, servingKey := cp.issueServing(t, cp.clientCA, "kube-apiserver", []string{"127.0.0.1", "localhost", "kubernetes.default.svc"})
	proxyCert, proxyKey := cp.issueClient(t, cp.frontProxyCA, "front-proxy-client")
	saKey := cp.serviceAccountKey(t)
	p := cp.start(t, "kube-apiserver", binaryFromEnv(t, KubeAPIServerBinEnv, "kube-apiserver"),
		"--etcd-servers="+cp.EtcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--endpoint-reconciler-type=none",
		"--tls-cert-file="+servingCert, "--tls-private-key-file="+servingKey,
		"--client-ca-file="+cp.write(t, "client-ca.crt", cp.clientCA.CertPEM()),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saKey, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/24",
		"--requestheader-client-ca-file="+cp.write(t, "front-proxy-ca.crt", cp.frontProxyCA.CertPEM()),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-uid-headers=X-Remote-Uid",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+proxyCert, "--proxy-client-key-file="+proxyKey,
		"--disable-admission-plugins=ServiceAccount",
		// As OpenShift does by default: setting blockOwnerDeletion needs
		// update on the owner's finalizers, which the controller's RBAC
		// must grant.
		"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
		"--v=1")
	p.waitHTTP(t, cp.KubeAPIServerURL+"/readyz", cp.adminTLS(t), 2*time.Minute)
}

func (cp *ControlPlane) startKubeControllerManager(t TB) {
	t.Helper()
	cp.start(t, "kube-controller-manager", binaryFromEnv(t, KubeControllerManagerBinEnv, "kube-controller-manager"),
		"--kubeconfig="+cp.UserKubeconfig(t, "system:kube-controller-manager", "system:masters"),
		"--controllers=namespace,garbagecollector,clusterrole-aggregation,persistentvolumeclaim-protection-controller",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", FreePort(t)),
		"--v=1")
}

// registerDockerIOS applies DockerIOS's RBAC from artifacts/deploy, a
// Service of type ExternalName pointing at localhost (the aggregator dials
// ExternalName services directly) and the APIService with the serving CA.
func (cp *ControlPlane) registerDockerIOS(t TB) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	k := NewKubectl(t, cp.AdminKubeconfig)
	deploy := filepath.Join(root, "artifacts", "deploy")
	// The namespace is the ledger's (artifacts/ledger): an uninstall of
	// artifacts/deploy leaves it.
	k.MustRun(t, "", "apply", "-f", filepath.Join(root, "artifacts", "ledger", "00-namespace.yaml"))
	for _, f := range []string{"01-serviceaccount.yaml", "02-auth-delegator.yaml", "03-auth-reader.yaml", "04-apiserver-rbac.yaml", "05-roles.yaml"} {
		k.MustRun(t, "", "apply", "-f", filepath.Join(deploy, f))
	}
	port := FreePort(t)
	cp.DockerIOSURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	k.MustRun(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: %s
spec:
  type: ExternalName
  externalName: localhost
  ports:
  - name: https
    port: %d
`, ServiceName, SystemNamespace, port), "apply", "-f", "-")
	apiservice, err := os.ReadFile(filepath.Join(deploy, "08-apiservice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := string(apiservice)
	if !cp.selfCert {
		// The shipped APIService has no caBundle (the apiserver writes
		// its own); this control plane hands the apiserver a certificate
		// of the test's CA instead, and the APIService that CA.
		manifest = withField(t, manifest, "  groupPriorityMinimum:", "  caBundle: "+base64.StdEncoding.EncodeToString(cp.servingCA.CertPEM()))
	}
	manifest = strings.Replace(manifest, "    port: 443", fmt.Sprintf("    port: %d", port), 1)
	k.MustRun(t, manifest, "apply", "-f", "-")

	// The apiserver's own kubeconfig: its service account's token, as it
	// has in a pod, for delegated authentication and authorization.
	path := cp.serviceAccountKubeconfig(t, "dockerios-apiserver")
	cp.dockerIOSArgs = withStorageMediaType(
		"--etcd-servers="+cp.EtcdURL,
		"--data-dir="+filepath.Join(cp.Dir, "dockerios"),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--authentication-kubeconfig="+path, "--authorization-kubeconfig="+path, "--kubeconfig="+path,
	)
	if !cp.selfCert {
		servingCert, servingKey := cp.issueServing(t, cp.servingCA, "dockerios-apiserver",
			[]string{ServiceName + "." + SystemNamespace + ".svc", "localhost", "127.0.0.1"})
		cp.dockerIOSArgs = append(cp.dockerIOSArgs, "--tls-cert-file="+servingCert, "--tls-private-key-file="+servingKey)
	}
}

// serviceAccountKubeconfig writes a kubeconfig authenticating as the
// ServiceAccount name of the DockerIOS namespace, with a token as a pod
// would have, and returns its path.
func (cp *ControlPlane) serviceAccountKubeconfig(t TB, name string) string {
	t.Helper()
	k := NewKubectl(t, cp.AdminKubeconfig)
	token := strings.TrimSpace(k.MustRun(t, "", "create", "token", name, "-n", SystemNamespace, "--duration=24h"))
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kube"] = &clientcmdapi.Cluster{Server: cp.KubeAPIServerURL, CertificateAuthorityData: cp.clientCA.CertPEM()}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kube"] = &clientcmdapi.Context{Cluster: "kube", AuthInfo: name}
	cfg.CurrentContext = "kube"
	path := filepath.Join(cp.Dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// ServiceAccountKubeconfig writes a kubeconfig authenticating as the
// ServiceAccount name of the DockerIOS namespace, as a pod of it would,
// and returns its path. The ServiceAccount must exist.
func (cp *ControlPlane) ServiceAccountKubeconfig(t TB, name string) string {
	t.Helper()
	return cp.serviceAccountKubeconfig(t, name)
}

// DockerIOSOutput is what the DockerIOS apiserver has logged.
func (cp *ControlPlane) DockerIOSOutput() string { return cp.dockerIOS.output.String() }

// startDockerIOS starts (or restarts) the DockerIOS apiserver.
func (cp *ControlPlane) startDockerIOS(t TB) {
	t.Helper()
	cp.dockerIOS = cp.start(t, "dockerios-apiserver", APIServerBinary(t), cp.dockerIOSArgs...)
}

// KillDockerIOS kills the DockerIOS apiserver (SIGKILL); RestartDockerIOS
// starts it again on the same port and etcd.
func (cp *ControlPlane) KillDockerIOS(t TB) { cp.dockerIOS.signal(t, syscall.SIGKILL) }

// RestartDockerIOS starts the DockerIOS apiserver again and waits until
// kube-apiserver routes to it.
func (cp *ControlPlane) RestartDockerIOS(t TB) {
	t.Helper()
	cp.startDockerIOS(t)
	cp.waitAPIServiceAvailable(t, time.Minute)
}

func (cp *ControlPlane) waitAPIServiceAvailable(t TB, timeout time.Duration) {
	t.Helper()
	k := NewKubectl(t, cp.AdminKubeconfig)
	deadline := time.Now().Add(timeout)
	var last Result
	for time.Now().Before(deadline) {
		last = k.Run("", "get", "--raw", "/apis/dockerios.io/v1alpha1")
		if last.Err == nil && strings.Contains(last.Stdout, "macosmachines") {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	apiservice := k.Run("", "get", "apiservice", "v1alpha1.dockerios.io", "-o", "yaml")
	output := "(started by the test)"
	if cp.dockerIOS != nil {
		output = cp.dockerIOS.output.String()
	}
	t.Fatalf("dockerios.io not served through kube-apiserver after %s: %s %s\nAPIService:\n%s\ndockerios-apiserver output:\n%s",
		timeout, last.Stderr, last.Err, apiservice.Stdout, output)
}

// UserKubeconfig writes a kubeconfig for user in groups, authenticated by a
// client certificate kube-apiserver trusts, and returns its path.
func (cp *ControlPlane) UserKubeconfig(t TB, user string, groups ...string) string {
	t.Helper()
	cert, key, err := cp.clientCA.IssueClient(user, groups, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kube"] = &clientcmdapi.Cluster{Server: cp.KubeAPIServerURL, CertificateAuthorityData: cp.clientCA.CertPEM()}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["kube"] = &clientcmdapi.Context{Cluster: "kube", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "kube"
	path := filepath.Join(cp.Dir, strings.ReplaceAll(user, ":", "_")+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// RESTConfig returns a client config of kubeconfig, unthrottled.
func RESTConfig(t TB, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	return cfg
}

// PIDs returns the process ID of each running component by name (etcd,
// kube-apiserver, kube-controller-manager, dockerios-apiserver), for
// benchmarks that account CPU time per component.
func (cp *ControlPlane) PIDs() map[string]int {
	pids := map[string]int{}
	for _, p := range cp.processes {
		select {
		case <-p.exited:
		default:
			pids[p.name] = p.cmd.Process.Pid
		}
	}
	return pids
}

// DockerIOSServingCA is the CA of the DockerIOS apiserver's serving
// certificate, for tests that call it directly (not under
// StartControlPlaneSelfCert, where the APIService's caBundle has it).
func (cp *ControlPlane) DockerIOSServingCA() []byte { return cp.servingCA.CertPEM() }

// FrontProxyClient returns a client certificate signed by the front-proxy
// CA (as kube-apiserver's aggregator presents), for tests that must prove
// only it may assert a user in headers.
func (cp *ControlPlane) FrontProxyClient(t TB, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	cert, key, err := cp.frontProxyCA.IssueClient(name, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func (cp *ControlPlane) adminTLS(t TB) *rest.Config {
	t.Helper()
	cert, key, err := cp.clientCA.IssueClient("admin", []string{"system:masters"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: cp.KubeAPIServerURL, TLSClientConfig: rest.TLSClientConfig{CAData: cp.clientCA.CertPEM(), CertData: cert, KeyData: key}}
}

// serviceAccountKey writes an ECDSA key kube-apiserver signs and verifies
// service-account tokens with.
func (cp *ControlPlane) serviceAccountKey(t TB) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return cp.write(t, "sa.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

func (cp *ControlPlane) start(t TB, name, bin string, args ...string) *process {
	t.Helper()
	p := startProcess(t, name, bin, args...)
	cp.processes = append(cp.processes, p)
	return p
}

// waitHTTP waits until url answers 200, with cfg's credentials (nil for
// plain HTTP).
func (p *process) waitHTTP(t TB, url string, cfg *rest.Config, timeout time.Duration) {
	t.Helper()
	client := http.DefaultClient
	if cfg != nil {
		var err error
		if client, err = rest.HTTPClientFor(cfg); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			t.Fatalf("%s exited while starting:\n%s", p.name, p.output.String())
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s not ready at %s after %s (last: %s):\n%s", p.name, url, timeout, last, p.output.String())
}

func (cp *ControlPlane) stopAll(t TB) {
	for i := len(cp.processes) - 1; i >= 0; i-- {
		p := cp.processes[i]
		start := time.Now()
		p.signal(t, syscall.SIGTERM)
		if took := time.Since(start); took > 5*time.Second {
			t.Logf("%s took %s to stop", p.name, took.Round(time.Millisecond))
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", p.name, tail(p.output.String(), 60))
		}
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// withField puts line before the first line starting with anchor, and fails
// the test if there is none: the manifest it edits has changed shape.
func withField(t TB, manifest, anchor, line string) string {
	t.Helper()
	i := strings.Index(manifest, "\n"+anchor)
	if i < 0 {
		t.Fatalf("no %q line in the manifest to put %q before", anchor, line)
	}
	return manifest[:i+1] + line + "\n" + manifest[i+1:]
}
