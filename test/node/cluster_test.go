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

package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dockerios/dockerios/pkg/localpki"
	"github.com/dockerios/dockerios/test/framework"
)

const (
	// NodeName is the one node's name.
	NodeName  = "dockerios-node"
	cniBinDir = "/usr/lib/cni"
	// pauseImage is the sandbox image, built by the test (a static
	// binary that waits for a signal): nothing is pulled.
	pauseImage = "localhost/dockerios-node/pause:test"
)

// binaries are the control plane's and node's builds, by the environment
// variable that may point at each (else bin/NAME).
var binaries = map[string]string{
	framework.EtcdBinEnv:                  "etcd",
	framework.KubeAPIServerBinEnv:         "kube-apiserver",
	framework.KubeControllerManagerBinEnv: "kube-controller-manager",
	"DOCKERIOS_KUBE_SCHEDULER_BIN":        "kube-scheduler",
	"DOCKERIOS_KUBELET_BIN":               "kubelet",
}

func repoRoot() string {
	wd, _ := os.Getwd() // test/node
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

func binaryPath(env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	return filepath.Join(repoRoot(), "bin", name)
}

func binaryOf(name string) string {
	for env, n := range binaries {
		if n == name {
			return binaryPath(env, name)
		}
	}
	panic("unknown binary " + name)
}

// releaseDir holds hack/release.sh's output (DOCKERIOS_RELEASE_DIR, else
// _output/release); imagesDir hack/images.sh's (DOCKERIOS_IMAGES_DIR,
// else _output/images).
func releaseDir() string {
	if d := os.Getenv("DOCKERIOS_RELEASE_DIR"); d != "" {
		return d
	}
	return filepath.Join(repoRoot(), "_output", "release")
}

func imagesDir() string {
	if d := os.Getenv("DOCKERIOS_IMAGES_DIR"); d != "" {
		return d
	}
	return filepath.Join(repoRoot(), "_output", "images")
}

func releaseManifest() string { return filepath.Join(releaseDir(), "dockerios.yaml") }
func imagesList() string      { return filepath.Join(imagesDir(), "images.txt") }

// Cluster is the control plane and the node.
type Cluster struct {
	Dir             string
	AdminKubeconfig string
	Admin           *rest.Config
	Kubectl         *framework.Kubectl

	containerdSock string
	clientCA       *localpki.CA
	servingCA      *localpki.CA
	frontProxyCA   *localpki.CA
	cgroupRoot     string

	mu    sync.Mutex
	procs []*proc
}

type proc struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

// StartCluster starts everything and waits for the node to be Ready.
func StartCluster(t *testing.T) *Cluster {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	dir := os.Getenv(insideEnv)
	c := &Cluster{Dir: filepath.Join(dir, "cluster"), cgroupRoot: "/" + os.Getenv(cgroupEnv)}
	must(t, os.MkdirAll(c.Dir, 0o755))
	t.Cleanup(func() { c.stop(t) })
	now := time.Now()
	var err error
	for _, ca := range []struct {
		p    **localpki.CA
		name string
	}{{&c.clientCA, "node-test-client-ca"}, {&c.servingCA, "node-test-serving-ca"}, {&c.frontProxyCA, "node-test-front-proxy-ca"}} {
		*ca.p, err = localpki.NewCA(ca.name, now)
		must(t, err)
	}

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", framework.FreePort(t))
	c.start(t, "etcd", binaryOf("etcd"),
		"--name=node", "--data-dir="+c.path("etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", framework.FreePort(t)),
		"--log-level=warn")
	c.startKubeAPIServer(t, etcdURL)
	c.startControllers(t)
	c.startContainerd(t)
	c.startKubelet(t)
	framework.Eventually(t, 3*time.Minute, func() string {
		r := c.Kubectl.Run("", "get", "node", NodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if strings.TrimSpace(r.Stdout) != "True" {
			return fmt.Sprintf("node %s not Ready: %s %s%s", NodeName, r.Stdout, r.Stderr, c.exitedReport())
		}
		return ""
	})
	return c
}

func (c *Cluster) path(parts ...string) string {
	return filepath.Join(append([]string{c.Dir}, parts...)...)
}

func (c *Cluster) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := c.path(name)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, data, 0o600))
	return p
}

func (c *Cluster) clientCert(t *testing.T, name, user string, groups ...string) (string, string) {
	t.Helper()
	cert, key, err := c.clientCA.IssueClient(user, groups, time.Now())
	must(t, err)
	return c.write(t, "pki/"+name+".crt", cert), c.write(t, "pki/"+name+".key", key)
}

func (c *Cluster) servingCert(t *testing.T, name string, hosts []string) (string, string) {
	t.Helper()
	cert, key, err := c.servingCA.IssueServing(name, hosts, time.Now())
	must(t, err)
	return c.write(t, "pki/"+name+".crt", cert), c.write(t, "pki/"+name+".key", key)
}

// kubeconfig writes a kubeconfig for a client certificate of user.
func (c *Cluster) kubeconfig(t *testing.T, name, user string, groups ...string) string {
	t.Helper()
	certFile, keyFile := c.clientCert(t, name, user, groups...)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["node"] = &clientcmdapi.Cluster{Server: "https://" + NodeIP + ":443", CertificateAuthorityData: c.servingCA.CertPEM()}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}
	cfg.Contexts["node"] = &clientcmdapi.Context{Cluster: "node", AuthInfo: name}
	cfg.CurrentContext = "node"
	p := c.path("kubeconfig", name)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, clientcmd.WriteToFile(*cfg, p))
	return p
}

func (c *Cluster) startKubeAPIServer(t *testing.T, etcdURL string) {
	t.Helper()
	servingCert, servingKey := c.servingCert(t, "kube-apiserver", []string{
		KubernetesServiceIP, NodeIP, "127.0.0.1", "localhost",
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	proxyCert, proxyKey, err := c.frontProxyCA.IssueClient("front-proxy-client", nil, time.Now())
	must(t, err)
	kubeletClientCert, kubeletClientKey := c.clientCert(t, "kube-apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters")
	saKey := c.serviceAccountKey(t)
	c.start(t, "kube-apiserver", binaryOf("kube-apiserver"),
		"--etcd-servers="+etcdURL,
		// Every address of the node's namespace, on the kubernetes
		// Service's port: pods dial KubernetesServiceIP:443.
		"--bind-address=0.0.0.0", "--secure-port=443", "--advertise-address="+NodeIP,
		"--tls-cert-file="+servingCert, "--tls-private-key-file="+servingKey,
		"--client-ca-file="+c.write(t, "pki/client-ca.crt", c.clientCA.CertPEM()),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saKey, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range="+serviceCIDR,
		"--requestheader-client-ca-file="+c.write(t, "pki/front-proxy-ca.crt", c.frontProxyCA.CertPEM()),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-uid-headers=X-Remote-Uid",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+c.write(t, "pki/front-proxy-client.crt", proxyCert),
		"--proxy-client-key-file="+c.write(t, "pki/front-proxy-client.key", proxyKey),
		// No kube-proxy: the aggregator and the webhooks dial a Service's
		// endpoints (pod IPs on the node's bridge), not its ClusterIP.
		"--enable-aggregator-routing=true",
		"--kubelet-client-certificate="+kubeletClientCert, "--kubelet-client-key="+kubeletClientKey,
		"--kubelet-certificate-authority="+c.write(t, "pki/serving-ca.crt", c.servingCA.CertPEM()),
		"--kubelet-preferred-address-types=InternalIP",
		"--v=1")
	c.AdminKubeconfig = c.kubeconfig(t, "admin", "admin", "system:masters")
	c.Kubectl = framework.NewKubectl(t, c.AdminKubeconfig)
	c.Admin = framework.RESTConfig(t, c.AdminKubeconfig)
	c.waitHTTP(t, "kube-apiserver", "https://"+NodeIP+":443/readyz", c.Admin, time.Minute)
}

func (c *Cluster) startControllers(t *testing.T) {
	t.Helper()
	c.start(t, "kube-controller-manager", binaryOf("kube-controller-manager"),
		"--kubeconfig="+c.kubeconfig(t, "kube-controller-manager", "system:kube-controller-manager"),
		"--authentication-kubeconfig="+c.path("kubeconfig", "kube-controller-manager"),
		"--authorization-kubeconfig="+c.path("kubeconfig", "kube-controller-manager"),
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+c.path("pki", "sa.key"),
		// Pods trust kube-apiserver through the kube-root-ca.crt ConfigMap
		// this publishes in every namespace.
		"--root-ca-file="+c.path("pki", "serving-ca.crt"),
		"--leader-elect=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", framework.FreePort(t)),
		"--v=1")
	c.start(t, "kube-scheduler", binaryOf("kube-scheduler"),
		"--kubeconfig="+c.kubeconfig(t, "kube-scheduler", "system:kube-scheduler"),
		"--authentication-kubeconfig="+c.path("kubeconfig", "kube-scheduler"),
		"--authorization-kubeconfig="+c.path("kubeconfig", "kube-scheduler"),
		"--leader-elect=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", framework.FreePort(t)),
		"--v=1")
}

func (c *Cluster) startContainerd(t *testing.T) {
	t.Helper()
	root := c.path("containerd")
	c.containerdSock = filepath.Join(root, "containerd.sock")
	cniConf := c.path("cni", "net.d")
	must(t, os.MkdirAll(cniConf, 0o755))
	// No masquerade and no port maps: nothing of this network leaves the
	// namespace, so nothing needs iptables.
	c.write(t, "cni/net.d/10-node.conflist", []byte(fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "dockerios-node", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}}]}
`, podCIDR, c.path("cni", "ipam"))))
	// restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, and runc
	// fails every sandbox that lowers its oom_score_adj without it.
	// netns_mounts_under_state_dir keeps pods' network namespace files
	// out of the host's /var/run/netns. The opt plugin would write /opt.
	c.write(t, "containerd/config.toml", []byte(fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, filepath.Join(root, "root"), filepath.Join(root, "state"), c.containerdSock, pauseImage, cniBinDir, cniConf)))
	c.start(t, "containerd", "containerd", "--config", c.path("containerd", "config.toml"))
	framework.Eventually(t, 30*time.Second, func() string {
		if _, err := os.Stat(c.containerdSock); err != nil {
			return "containerd has no socket yet" + c.exitedReport()
		}
		return ""
	})
	c.importImage(t, c.pauseImageArchive(t))
}

// Ctr runs ctr against the node's containerd, in the CRI's namespace.
func (c *Cluster) Ctr(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ctr", append([]string{"--address", c.containerdSock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (c *Cluster) importImage(t *testing.T, archive string) {
	t.Helper()
	c.Ctr(t, "images", "import", "--snapshotter", "overlayfs", archive)
}

// pauseImageArchive builds the sandbox image: this package's pause
// program, static, made into an image by hack/imagebuild.
func (c *Cluster) pauseImageArchive(t *testing.T) string {
	t.Helper()
	bin := c.path("pause", "pause")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/pause")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building pause: %v\n%s", err, out)
	}
	archive := c.path("pause", "pause.tar")
	cmd := exec.Command(imagebuildBinary(t), "--ref", pauseImage, "--created", "2026-01-01T00:00:00Z",
		"--layout", c.path("pause", "layout"), "--archive", archive, "--file", "/pause="+bin, "--entrypoint", "/pause")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("imagebuild pause: %v\n%s", err, out)
	}
	return archive
}

// imagebuildBinary is hack/imagebuild, built by hack/images.sh.
func imagebuildBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(repoRoot(), "_output", "build", "bin", "imagebuild")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run hack/images.sh", p)
	}
	return p
}

func (c *Cluster) startKubelet(t *testing.T) {
	t.Helper()
	// kubelet's cgroupfs driver wants its root present in every v1
	// hierarchy; cpuset's must have CPUs and memory nodes before a child
	// can hold a process.
	hierarchies, err := cgroupHierarchies()
	must(t, err)
	for _, h := range hierarchies {
		d := filepath.Join(h, c.cgroupRoot)
		must(t, os.MkdirAll(d, 0o755))
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				must(t, os.WriteFile(filepath.Join(d, f), v, 0o644))
			}
		}
	}
	servingCert, servingKey := c.servingCert(t, "kubelet", []string{NodeIP, NodeName})
	healthz := framework.FreePort(t)
	config := c.write(t, "kubelet/config.yaml", []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %q
cgroupsPerQOS: true
failSwapOn: false
oomScoreAdj: 0
makeIPTablesUtilChains: false
protectKernelDefaults: false
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
address: %q
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
tlsCertFile: %q
tlsPrivateKeyFile: %q
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://%s
podLogsDir: %q
serializeImagePulls: false
maxPods: 50
`, c.cgroupRoot, NodeIP, healthz, servingCert, servingKey, c.path("pki", "client-ca.crt"), c.containerdSock, c.path("pod-logs"))))
	c.start(t, "kubelet", binaryOf("kubelet"),
		"--config="+config,
		"--kubeconfig="+c.kubeconfig(t, "kubelet", "system:node:"+NodeName, "system:nodes"),
		"--root-dir="+c.path("kubelet", "root"),
		"--hostname-override="+NodeName,
		"--node-ip="+NodeIP,
		"--v=1")
}

func (c *Cluster) serviceAccountKey(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	der, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	return c.write(t, "pki/sa.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

func (c *Cluster) start(t *testing.T, name, bin string, args ...string) {
	t.Helper()
	log := c.path("logs", name+".log")
	must(t, os.MkdirAll(filepath.Dir(log), 0o755))
	f, err := os.Create(log)
	must(t, err)
	p := &proc{name: name, cmd: exec.Command(bin, args...), log: log, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); f.Close(); close(p.exited) }()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
}

// exitedReport names the processes that have exited, with their logs'
// tails: why a wait is not going to end.
func (c *Cluster) exitedReport() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, p := range c.procs {
		select {
		case <-p.exited:
			fmt.Fprintf(&b, "\n%s exited (%v):\n%s", p.name, p.cmd.ProcessState, tailFile(p.log, 30))
		default:
		}
	}
	return b.String()
}

func (c *Cluster) waitHTTP(t *testing.T, name, url string, cfg *rest.Config, within time.Duration) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	must(t, err)
	framework.Eventually(t, within, func() string {
		resp, err := client.Get(url)
		if err != nil {
			return fmt.Sprintf("%s: %v%s", name, err, c.exitedReport())
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("%s: %s%s", name, resp.Status, c.exitedReport())
		}
		return ""
	})
}

// stop ends everything in reverse order; on failure it first prints what
// an administrator would look at.
func (c *Cluster) stop(t *testing.T) {
	if t.Failed() && c.Kubectl != nil {
		for _, args := range [][]string{
			{"get", "nodes,pods,jobs,pvc,pv,apiservices", "-A", "-o", "wide"},
			{"get", "events", "-A", "--sort-by=.lastTimestamp"},
			{"describe", "pods", "-n", "dockerios-system"},
		} {
			r := c.Kubectl.Run("", args...)
			t.Logf("kubectl %s:\n%s%s", strings.Join(args, " "), r.Stdout, r.Stderr)
		}
		c.logPodLogs(t, "dockerios-system", 40)
	}
	c.mu.Lock()
	procs := append([]*proc(nil), c.procs...)
	c.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", p.name, tailFile(p.log, 40))
		}
	}
	// Containers' processes are in this PID namespace and die with it;
	// killing them now frees the cgroups before the outer process removes
	// them.
	_ = exec.Command("pkill", "-KILL", "-f", "containerd-shim").Run()
}

// logPodLogs logs the last lines of every container log of namespace's
// pods that the kubelet still keeps, an exited container's included. They
// are read from the kubelet's podLogsDir: kubectl logs cannot reach this
// kubelet (its serving certificate names no IP).
func (c *Cluster) logPodLogs(t *testing.T, namespace string, lines int) {
	t.Helper()
	files, _ := filepath.Glob(c.path("pod-logs", namespace+"_*", "*", "*.log"))
	if len(files) == 0 {
		t.Logf("no container logs of namespace %s in %s", namespace, c.path("pod-logs"))
	}
	for _, f := range files {
		rel, _ := filepath.Rel(c.path("pod-logs"), f)
		t.Logf("container log %s:\n%s", rel, tailFile(f, lines))
	}
}

func tailFile(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	parts := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
