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

// Package e2e runs the example as a workload layer on a real DockerIOS:
// a real kube-apiserver with the DockerIOS apiserver behind it, the
// DockerIOS controller, the test harness playing KubeVirt, CDI and the
// macOS guests (each with the real agent, and an sshd that records what it
// is asked to run), the example's manifests applied with the real kubectl,
// its controller as a built binary running as its ServiceAccount, and a
// fake GitLab.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dockeriov1alpha1 "github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/test/framework"
	"github.com/dockerios/dockerios/test/harness"

	"github.com/dockerios/dockerios/examples/gitlab-runner/api/v1alpha1"
	"github.com/dockerios/dockerios/examples/gitlab-runner/internal/gitlab/gitlabtest"
)

// What deploy/ holds (04-secrets.yaml, 05-gitlabrunner.yaml), which the
// played guests and the fake GitLab must accept.
const (
	namespace    = "demo"
	pool         = "warm"
	runnerName   = "ios-builds"
	sshUser      = "runner"
	sshPassword  = "local-stack-dummy-password"
	gitlabToken  = "glpat-local-stack-dummy-token"
	sampleGitLab = "http://127.0.0.1:8929"
	// ControllerBinEnv points the test at a prebuilt controller.
	ControllerBinEnv = "GITLAB_RUNNER_CONTROLLER_BIN"
)

type env struct {
	example string // examples/gitlab-runner
	cp      *framework.ControlPlane
	admin   *framework.Kubectl
	h       *harness.Harness
	gitlab  *gitlabtest.Server
	url     string // the fake GitLab's
	sshPort int
	dockios versioned.Interface
	kube    kubernetes.Interface
	c       client.Client // GitLabRunners, claims, machines
	ctrl    *process
}

// start brings everything up but the example.
func start(t *testing.T) *env {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	e := &env{example: filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))}
	// test/framework finds artifacts/ and bin/ from the Go module of the
	// working directory: DockerIOS's, not this example's.
	t.Chdir(filepath.Join(e.example, "..", ".."))

	e.cp = framework.StartControlPlane(t)
	e.admin = framework.NewKubectl(t, e.cp.AdminKubeconfig)
	cfg := framework.RESTConfig(t, e.cp.AdminKubeconfig)
	ctx := context.Background()
	if err := harness.InstallCRDs(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	e.cp.StartController(t, "--agent-timeout=2s")
	// The GitLabRunner CRD is there before the user applies deploy/, as on
	// the local stack (which installs it to run the example's controller):
	// kubectl maps every object of an apply before it creates any, so a CR
	// in the same apply as its new CRD is refused.
	crd := filepath.Join(e.example, "deploy", "01-crd.yaml")
	e.admin.MustRun(t, "", "apply", "-f", crd)
	e.admin.MustRun(t, "", "wait", "--for=condition=Established", "-f", crd, "--timeout=60s")

	// The golden image's sshd, on its usual port when the test may bind
	// it (as the local stack does), else on a free one.
	e.sshPort = harness.DefaultSSHPort
	if os.Geteuid() != 0 {
		e.sshPort = framework.FreePort(t)
	}
	var err error
	e.h, err = harness.Start(ctx, harness.Config{
		RESTConfig: cfg, AgentBinary: harness.AgentBinary(t), WorkDir: t.TempDir(),
		SSH:  harness.SSHConfig{Port: e.sshPort, User: sshUser, Password: sshPassword},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.h.Stop)

	e.gitlab = gitlabtest.NewServer(gitlabToken)
	srv := httptest.NewServer(e.gitlab)
	t.Cleanup(srv.Close)
	e.url = srv.URL

	if e.dockios, err = versioned.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if e.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, dockeriov1alpha1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	if e.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	e.fleet(t, cfg)
	return e
}

// fleet makes what the local stack's demo has: an identity pool, an image
// whose DataSource is Ready, a class, and in namespace demo a warm pool.
func (e *env) fleet(t *testing.T, cfg *rest.Config) {
	t.Helper()
	ctx := context.Background()
	api := e.dockios.DockeriosV1alpha1()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(api.MacOSIdentityPools().Create(ctx, &dockeriov1alpha1.MacOSIdentityPool{ObjectMeta: metav1.ObjectMeta{Name: "demo"},
		Spec: dockeriov1alpha1.MacOSIdentityPoolSpec{Model: "iMacPro1,1"}}, metav1.CreateOptions{}))
	gen := identity.NewGenerator(17, "iMacPro1,1")
	for i := range 16 {
		v := gen.Next()
		must(api.MacOSIdentities().Create(ctx, &dockeriov1alpha1.MacOSIdentity{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("demo-%d", i)},
			Spec: dockeriov1alpha1.MacOSIdentitySpec{PoolName: "demo", Model: v.Model, SerialNumber: v.SerialNumber,
				BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM}}, metav1.CreateOptions{}))
	}
	for _, ns := range []string{"dockerios-images", namespace} {
		must(e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	}
	dyn, err := dynamic.NewForConfig(harness.StrictFieldValidation(cfg))
	if err != nil {
		t.Fatal(err)
	}
	must(dyn.Resource(harness.DataSourceGVR).Namespace("dockerios-images").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
		"metadata": map[string]any{"name": "sonoma", "namespace": "dockerios-images"},
		"spec":     map[string]any{"source": map[string]any{"pvc": map[string]any{"namespace": "dockerios-images", "name": "sonoma"}}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}},
	}}, metav1.CreateOptions{}))
	must(api.MacOSImages().Create(ctx, &dockeriov1alpha1.MacOSImage{ObjectMeta: metav1.ObjectMeta{Name: "demo"},
		Spec: dockeriov1alpha1.MacOSImageSpec{Release: "14.6", Source: dockeriov1alpha1.ImageSource{
			DataSource: &dockeriov1alpha1.NamespacedObjectReference{Namespace: "dockerios-images", Name: "sonoma"}}}}, metav1.CreateOptions{}))
	must(api.MacOSMachineClasses().Create(ctx, &dockeriov1alpha1.MacOSMachineClass{ObjectMeta: metav1.ObjectMeta{Name: "demo"},
		Spec: dockeriov1alpha1.MacOSMachineClassSpec{ImageName: "demo", IdentityPoolName: "demo",
			SystemDisk: dockeriov1alpha1.SystemDiskSpec{Size: resource.MustParse("64Gi"), StorageClassName: ptr.To("demo")}}}, metav1.CreateOptions{}))
	must(e.kube.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dockerios-osk"},
		StringData: map[string]string{"osk": strings.Repeat("dummy-osk-", 6) + "test"}}, metav1.CreateOptions{}))
	must(api.MacOSMachinePools(namespace).Create(ctx, &dockeriov1alpha1.MacOSMachinePool{ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: dockeriov1alpha1.MacOSMachinePoolSpec{ClassName: "demo", Replicas: ptr.To[int32](2), MaxMachines: ptr.To[int32](10)}}, metav1.CreateOptions{}))
}

// applyDeploy applies deploy/ as a user does (kubectl apply -f on the
// directory), pointed at the test's fake GitLab (and sshd port).
func (e *env) applyDeploy(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(e.example, "deploy", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("deploy/: %v %v", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(data), sampleGitLab, e.url)
		if e.sshPort != harness.DefaultSSHPort {
			s = strings.Replace(s, "    credentialsSecretRef: {name: macos-ssh}\n",
				fmt.Sprintf("    credentialsSecretRef: {name: macos-ssh}\n    port: %d\n", e.sshPort), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.admin.MustRun(t, "", "apply", "-f", dir)
	// The Deployment is for a cluster with a kubelet; the process below
	// plays it.
	e.admin.MustRun(t, "", "-n", "gitlab-runner-system", "delete", "deployment", "gitlab-runner-controller")
}

// process is the example's controller, running as its ServiceAccount.
type process struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
}

// controllerBinary is $GITLAB_RUNNER_CONTROLLER_BIN, or the example's
// controller built into the test's directory.
func (e *env) controllerBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(ControllerBinEnv); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "gitlab-runner-controller")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gitlab-runner-controller")
	build.Dir = e.example
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the controller: %v\n%s", err, out)
	}
	return bin
}

// startController starts the example's controller with the token of the
// ServiceAccount deploy/ makes: RBAC is what a cluster would give it.
func (e *env) startController(t *testing.T, bin string) *process {
	t.Helper()
	token := strings.TrimSpace(e.admin.MustRun(t, "", "-n", "gitlab-runner-system", "create", "token", "gitlab-runner-controller", "--duration=2h"))
	kc, err := clientcmd.LoadFromFile(e.cp.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range kc.AuthInfos {
		a.ClientCertificateData, a.ClientKeyData, a.Token = nil, nil, token
	}
	kubeconfig := filepath.Join(t.TempDir(), "gitlab-runner-controller.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	health := framework.FreePort(t)
	p := &process{out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, "--kubeconfig="+kubeconfig, "--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(health), "--zap-devel")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			t.Error("the controller did not stop within 30s of SIGINT")
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("controller output (tail):\n%s", tail(p.out.String(), 150))
		}
	})
	framework.Eventually(t, 30*time.Second, func() string {
		select {
		case <-p.exited:
			t.Fatalf("the controller exited:\n%s", p.out.String())
		default:
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp.Status
		}
		return ""
	})
	return p
}

func (e *env) runner(t *testing.T) *v1alpha1.GitLabRunner {
	t.Helper()
	var gr v1alpha1.GitLabRunner
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: runnerName}, &gr); err != nil {
		t.Fatal(err)
	}
	return &gr
}

func (e *env) claim(t *testing.T, name string) *dockeriov1alpha1.MacOSMachineClaim {
	t.Helper()
	c, err := e.dockios.DockeriosV1alpha1().MacOSMachineClaims(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *env) machine(t *testing.T, name string) *dockeriov1alpha1.MacOSMachine {
	t.Helper()
	m, err := e.dockios.DockeriosV1alpha1().MacOSMachines(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
