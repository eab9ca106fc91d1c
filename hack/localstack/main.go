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

// Command localstack runs the whole DockerIOS stack on this machine, for
// development and for a first look, until it gets SIGINT or SIGTERM:
//
//   - etcd, kube-apiserver and kube-controller-manager (test/framework's
//     StartControlPlane, binaries from hack/build-control-plane.sh);
//   - the DockerIOS apiserver behind kube-apiserver through its APIService;
//   - the DockerIOS controller, with its launcher webhook and RBAC from
//     artifacts/deploy (test/framework's StartController);
//   - the test harness (test/harness) playing KubeVirt, CDI, the Job
//     controller and the macOS guests, each guest running the real
//     dockerios-agent binary;
//   - a demo: an identity pool of generated identities, an image, a class,
//     and in namespace demo a warm MacOSMachinePool and a claim against it;
//   - the workload-layer example (examples/gitlab-runner, example.go): its
//     CRD, its controller and a fake GitLab, with the played guests
//     serving SSH with the login its deploy/ Secret holds, so that
//     `kubectl apply -f examples/gitlab-runner/deploy/` registers runners.
//
// It then writes an admin kubeconfig to <state-dir>/admin.kubeconfig and
// what runs where to <state-dir>/endpoints.txt. On SIGINT or SIGTERM it
// stops everything in the reverse order it started it (guests and their
// agents, the controller, the apiservers, etcd) and removes this run's
// files; nothing survives a stop (etcd's data is in this run's directory).
//
// hack/local-up.sh builds and starts it in the background and
// hack/local-down.sh stops it. It is a development tool: it lives under
// hack/, drives test code (test/framework, test/harness) and is never
// linked into a product binary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/test/framework"
	"github.com/dockerios/dockerios/test/harness"
)

// The demo's objects.
const (
	demoModel        = "iMacPro1,1"
	demoName         = "demo" // identity pool, image, class, StorageClass and namespace
	demoPool         = "warm"
	demoClaim        = "build-1"
	demoIdentitySeed = 20261201
	// The image's source, a CDI DataSource.
	demoImageNamespace = "dockerios-images"
	demoDataSource     = "sonoma-14-6"
	// demoGuestOSVersion is what the played guests' agents report, as
	// sw_vers does in a guest of the demo image's release.
	demoGuestOSVersion = "14.6.1"
)

type options struct {
	stateDir                                          string
	identities                                        int
	replicas, maxMachines                             int
	jobDuration, cloneDuration, bootDelay, setupDelay time.Duration
	noDemo, noExample                                 bool
	sshPort                                           int
}

func main() {
	root, err := moduleRoot()
	if err != nil {
		log.Fatal(err)
	}
	var o options
	flag.StringVar(&o.stateDir, "state-dir", filepath.Join(root, ".dockerios"), "where the kubeconfig, endpoints.txt, controller.log and this run's files (run/) go")
	flag.IntVar(&o.identities, "identities", 8, "generated identities in the demo's identity pool")
	flag.IntVar(&o.replicas, "replicas", 2, "warm machines the demo pool keeps")
	flag.IntVar(&o.maxMachines, "max-machines", 6, "the demo pool's maxMachines")
	flag.BoolVar(&o.noDemo, "no-demo", false, "start the stack without the demo objects")
	flag.BoolVar(&o.noExample, "no-example", false, "start the stack without the GitLab runner example's controller and fake GitLab")
	flag.IntVar(&o.sshPort, "ssh-port", harness.DefaultSSHPort, "the port the played guests serve SSH on (below 1024 needs root)")
	// The harness compresses every step to well under a second for tests;
	// a person watching `kubectl get mm -w` should see each phase.
	flag.DurationVar(&o.jobDuration, "job-duration", 2*time.Second, "how long a (played) bootdisk Job runs")
	flag.DurationVar(&o.cloneDuration, "clone-duration", 4*time.Second, "how long a (played) CDI clone of the system disk takes")
	flag.DurationVar(&o.bootDelay, "boot-delay", 3*time.Second, "from a (played) VMI Running to its guest's agent starting")
	flag.DurationVar(&o.setupDelay, "setup-delay", 4*time.Second, "from the agent starting to the guest's setup being done")
	flag.Parse()
	if o.stateDir, err = filepath.Abs(o.stateDir); err != nil {
		log.Fatal(err)
	}

	logger := log.New(os.Stdout, "", log.LstdFlags|log.Lmicroseconds)
	runDir := filepath.Join(o.stateDir, "run")
	// A previous run stopped with SIGKILL leaves its files; hack/local-up.sh
	// never starts a second stack on the same state directory.
	if err := os.RemoveAll(runDir); err != nil {
		logger.Fatal(err)
	}
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		logger.Fatal(err)
	}
	t := &stackTB{log: logger, runDir: runDir}
	// Registered first, so it runs last: after every process has stopped.
	t.Cleanup(func() {
		for _, name := range []string{"admin.kubeconfig", "endpoints.txt"} {
			_ = os.Remove(filepath.Join(o.stateDir, name))
		}
		if err := os.RemoveAll(runDir); err != nil {
			t.Logf("removing %s: %v", runDir, err)
		}
	})
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("panic: %v\n%s", r, debug.Stack())
			t.exit(2)
		}
	}()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	run(ctx, t, root, o)
	<-ctx.Done()
	t.Logf("stopping (%v) ...", context.Cause(ctx))
	t.exit(0)
}

// run starts the stack and returns once it is up. A signal during start-up
// stops it after the step under way.
func run(ctx context.Context, t *stackTB, root string, o options) {
	start := time.Now()
	checkStop := func() {
		if ctx.Err() != nil {
			t.Logf("stopping during start-up (%v) ...", context.Cause(ctx))
			t.exit(0)
		}
	}
	// test/framework finds the DockerIOS binaries through these variables
	// and builds them into a temporary directory when they are unset;
	// bin/ has them when hack/local-up.sh built them.
	for env, name := range map[string]string{
		framework.APIServerBinEnv:  "dockerios-apiserver",
		framework.ControllerBinEnv: "dockerios-controller",
		harness.AgentBinEnv:        "dockerios-agent",
	} {
		if os.Getenv(env) == "" {
			if path := filepath.Join(root, "bin", name); isFile(path) {
				_ = os.Setenv(env, path)
			}
		}
	}
	agent := os.Getenv(harness.AgentBinEnv)
	if agent == "" || !isFile(agent) {
		t.Fatalf("the guest agent binary is missing: run hack/local-up.sh, or go build -o bin/dockerios-agent ./agent/cmd/dockerios-agent (or set %s)", harness.AgentBinEnv)
	}

	// The controller's log is copied to a file; the copier is stopped after
	// every process has (cleanups run last registered first, and
	// StartControlPlane's stops them all, the controller included).
	controllerLog := filepath.Join(o.stateDir, "controller.log")
	var copier *logCopier
	t.Cleanup(func() {
		if copier != nil {
			copier.stop()
		}
	})

	t.Logf("starting etcd, kube-apiserver, kube-controller-manager and the DockerIOS apiserver ...")
	cp := framework.StartControlPlane(t)
	t.Cleanup(func() {
		t.Logf("stopping the controller, the DockerIOS apiserver, kube-controller-manager, kube-apiserver and etcd ...")
	})
	t.Logf("control plane up after %s", since(start))
	checkStop()

	cfg := framework.RESTConfig(t, cp.AdminKubeconfig)
	if err := harness.InstallCRDs(context.Background(), cfg); err != nil {
		t.Fatalf("installing the KubeVirt and CDI CRDs: %v", err)
	}
	checkStop()

	t.Logf("starting the DockerIOS controller ...")
	ctrl := cp.StartController(t, "--agent-timeout=2s")
	c, err := newLogCopier(controllerLog, ctrl.Output)
	if err != nil {
		t.Fatal(err)
	}
	copier = c
	go copier.run()
	checkStop()

	t.Logf("starting the harness (KubeVirt, CDI, the Job controller and the guests, with %s) ...", agent)
	h, err := harness.Start(context.Background(), harness.Config{
		RESTConfig:    cfg,
		AgentBinary:   agent,
		WorkDir:       filepath.Join(t.TempDir(), "guests"),
		JobDuration:   o.jobDuration,
		CloneDuration: o.cloneDuration,
		BootDelay:     o.bootDelay,
		SetupDelay:    o.setupDelay,
		// The played golden image has Remote Login on, for workloads such
		// as the example; DockerIOS itself never logs in to a guest.
		SSH: harness.SSHConfig{Port: o.sshPort, User: exampleSSHUser, Password: exampleSSHPassword},
		// CDI's DataSources and a guest's macOS version are played too, so
		// that a golden image can be fetched, installed and promoted here
		// (docs/users/golden-images.md runs on this stack).
		DataSources:    true,
		GuestOSVersion: demoGuestOSVersion,
		Logf:           t.Logf,
	})
	if err != nil {
		t.Fatalf("starting the harness: %v", err)
	}
	t.Cleanup(func() {
		t.Logf("stopping the harness and its guests' agents ...")
		h.Stop()
	})
	checkStop()

	if !o.noDemo {
		t.Logf("creating the demo objects ...")
		if err := createDemo(context.Background(), cfg, o); err != nil {
			t.Fatalf("creating the demo objects: %v", err)
		}
		checkStop()
	}

	var ex *exampleStack
	if !o.noExample {
		t.Logf("starting the GitLab runner example's controller and a fake GitLab ...")
		// The machine layer does not need the example: a stack whose
		// example cannot start (port 8929 taken, say) runs without it.
		if ex, err = startExample(t, root, cp, o.stateDir); err != nil {
			t.Logf("WARNING: the GitLab runner example is not running: %v", err)
			ex = &exampleStack{err: err}
		}
		checkStop()
	}

	// The admin kubeconfig carries its certificates inline, so a copy stays
	// valid as long as this kube-apiserver runs. It is written last and by
	// rename: once it exists, everything above is in place.
	kubeconfig := filepath.Join(o.stateDir, "admin.kubeconfig")
	data, err := os.ReadFile(cp.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	endpoints := describe(cp, ctrl, h, ex, kubeconfig, controllerLog, o)
	if err := writeFileAtomic(filepath.Join(o.stateDir, "endpoints.txt"), []byte(endpoints), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(kubeconfig, data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("DockerIOS local stack up after %s\n%s", since(start), endpoints)
}

// describe says what runs where.
func describe(cp *framework.ControlPlane, ctrl *framework.Controller, h *harness.Harness, ex *exampleStack, kubeconfig, controllerLog string, o options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kubeconfig (cluster admin)    %s\n", kubeconfig)
	fmt.Fprintf(&b, "kube-apiserver                %s\n", cp.KubeAPIServerURL)
	fmt.Fprintf(&b, "DockerIOS apiserver (direct)  %s (behind kube-apiserver as APIService v1alpha1.dockerios.io)\n", cp.DockerIOSURL)
	fmt.Fprintf(&b, "etcd                          %s\n", cp.EtcdURL)
	fmt.Fprintf(&b, "controller health/metrics     %s/healthz, %s/metrics\n", ctrl.HealthURL, ctrl.HealthURL)
	fmt.Fprintf(&b, "controller log                %s\n", controllerLog)
	fmt.Fprintf(&b, "guests (agent logs, tokens)   %s\n", h.WorkDir())
	fmt.Fprintf(&b, "fake nodes                    %s\n", strings.Join(h.Nodes(), ", "))
	fmt.Fprintf(&b, "guests' SSH                   port %d, user %s, password %s (played: commands are recorded in the log, not run)\n", o.sshPort, exampleSSHUser, exampleSSHPassword)
	switch {
	case ex != nil && ex.err != nil:
		fmt.Fprintf(&b, "GitLab runner example         not running: %v\n", ex.err)
	case ex != nil:
		fmt.Fprintf(&b, "GitLab runner example         kubectl apply -f examples/gitlab-runner/deploy/ (the CRD is installed)\n")
		fmt.Fprintf(&b, "  its controller              %s/readyz, log %s\n", ex.healthURL, ex.controllerLog)
		fmt.Fprintf(&b, "  fake GitLab                 http://%s (PRIVATE-TOKEN %s), log %s\n", exampleGitLabAddr, exampleGitLabToken, ex.gitlabLog)
	}
	pids := cp.PIDs()
	if ex != nil {
		maps.Copy(pids, ex.pids)
	}
	names := make([]string, 0, len(pids))
	for n := range pids {
		names = append(names, n)
	}
	sort.Strings(names)
	var ps []string
	for _, n := range names {
		ps = append(ps, fmt.Sprintf("%s=%d", n, pids[n]))
	}
	fmt.Fprintf(&b, "processes                     localstack=%d %s\n", os.Getpid(), strings.Join(ps, " "))
	if !o.noDemo {
		fmt.Fprintf(&b, "demo                          MacOSIdentityPool/%s (%d identities), MacOSImage/%s, MacOSMachineClass/%s;\n", demoName, o.identities, demoName, demoName)
		fmt.Fprintf(&b, "                              in namespace %s: MacOSMachinePool/%s (replicas %d, maxMachines %d), MacOSMachineClaim/%s\n",
			demoName, demoPool, o.replicas, o.maxMachines, demoClaim)
	}
	return b.String()
}

// createDemo creates the demo's objects, leaving any that exist as they are.
func createDemo(ctx context.Context, cfg *rest.Config, o options) error {
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := client.DockeriosV1alpha1()
	var errs []error
	check := func(what string, err error) {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	_, err = api.MacOSIdentityPools().Create(ctx, &v1alpha1.MacOSIdentityPool{
		ObjectMeta: metav1.ObjectMeta{Name: demoName},
		Spec:       v1alpha1.MacOSIdentityPoolSpec{Model: demoModel},
	}, metav1.CreateOptions{})
	check("MacOSIdentityPool "+demoName, err)
	// Synthetic identities (pkg/identity's generator): well-formed, unique,
	// and never to be given to a real Mac.
	gen := identity.NewGenerator(demoIdentitySeed, demoModel)
	for i := range o.identities {
		v := gen.Next()
		name := fmt.Sprintf("%s-%d", demoName, i)
		_, err := api.MacOSIdentities().Create(ctx, &v1alpha1.MacOSIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.MacOSIdentitySpec{PoolName: demoName, Model: v.Model, SerialNumber: v.SerialNumber,
				BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
		}, metav1.CreateOptions{})
		check("MacOSIdentity "+name, err)
	}
	_, err = api.MacOSImages().Create(ctx, &v1alpha1.MacOSImage{
		ObjectMeta: metav1.ObjectMeta{Name: demoName},
		Spec: v1alpha1.MacOSImageSpec{Release: "14.6", BoardID: "Mac-7BA5B2D9E42DDD94", Source: v1alpha1.ImageSource{
			DataSource: &v1alpha1.NamespacedObjectReference{Namespace: demoImageNamespace, Name: demoDataSource}}},
	}, metav1.CreateOptions{})
	check("MacOSImage "+demoName, err)
	// The image's source, as CDI would hold it once the golden image was
	// imported: a DataSource, Ready, over its PVC. CDI's DataSource has no
	// status subresource, so its status is written with it; the harness,
	// playing CDI, finds the PVC and keeps it Ready.
	dyn, err := dynamic.NewForConfig(harness.StrictFieldValidation(cfg))
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoImageNamespace}}, metav1.CreateOptions{})
	check("Namespace "+demoImageNamespace, err)
	_, err = kube.CoreV1().PersistentVolumeClaims(demoImageNamespace).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: demoDataSource},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Gi")}}},
	}, metav1.CreateOptions{})
	check("PersistentVolumeClaim "+demoImageNamespace+"/"+demoDataSource, err)
	_, err = dyn.Resource(harness.DataSourceGVR).Namespace(demoImageNamespace).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
		"metadata": map[string]any{"name": demoDataSource, "namespace": demoImageNamespace},
		"spec":     map[string]any{"source": map[string]any{"pvc": map[string]any{"namespace": demoImageNamespace, "name": demoDataSource}}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready",
			"message": "played by the local stack: no golden image is imported here", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}},
	}}, metav1.CreateOptions{})
	check("DataSource "+demoImageNamespace+"/"+demoDataSource, err)
	_, err = api.MacOSMachineClasses().Create(ctx, &v1alpha1.MacOSMachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: demoName},
		Spec: v1alpha1.MacOSMachineClassSpec{
			ImageName:        demoName,
			IdentityPoolName: demoName,
			SystemDisk:       v1alpha1.SystemDiskSpec{Size: resource.MustParse("64Gi"), StorageClassName: ptr.To(demoName)},
		},
	}, metav1.CreateOptions{})
	check("MacOSMachineClass "+demoName, err)
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoName}}, metav1.CreateOptions{})
	check("Namespace "+demoName, err)
	// The Secret with Apple's SMC key that every namespace running macOS
	// VMs needs (artifacts/kubevirt/README.md) — here a dummy: nothing
	// boots macOS, and Apple's key is never part of DockerIOS. In the
	// demo namespace and in default, where artifacts/examples (docs/users/pools-and-classes.md) go.
	for _, ns := range []string{demoName, metav1.NamespaceDefault} {
		_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "dockerios-osk"},
			StringData: map[string]string{"osk": "dummy-osk-for-the-local-stack-only-not-apples-key-0123456789ab"},
		}, metav1.CreateOptions{})
		check("Secret "+ns+"/dockerios-osk", err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	_, err = api.MacOSMachinePools(demoName).Create(ctx, &v1alpha1.MacOSMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: demoPool},
		Spec: v1alpha1.MacOSMachinePoolSpec{ClassName: demoName,
			Replicas: ptr.To(int32(o.replicas)), MaxMachines: ptr.To(int32(o.maxMachines))},
	}, metav1.CreateOptions{})
	check("MacOSMachinePool "+demoName+"/"+demoPool, err)
	_, err = api.MacOSMachineClaims(demoName).Create(ctx, &v1alpha1.MacOSMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: demoClaim},
		Spec:       v1alpha1.MacOSMachineClaimSpec{PoolName: demoPool},
	}, metav1.CreateOptions{})
	check("MacOSMachineClaim "+demoName+"/"+demoClaim, err)
	return errors.Join(errs...)
}

// stackTB is the framework.TB of a program rather than a test: it logs,
// runs cleanups in reverse order when the program stops, and its Fatal
// stops the whole stack (running the cleanups) and exits 1. Its methods
// are called from the main goroutine only, as a test's are from the test's.
type stackTB struct {
	log    *log.Logger
	runDir string

	mu       sync.Mutex
	failed   bool
	cleanups []func()
	cleaning atomic.Bool
}

var _ framework.TB = (*stackTB)(nil)

// fatalInCleanup unwinds a cleanup that called Fatal, so the next one runs.
type fatalInCleanup struct{}

func (t *stackTB) Helper() {}

func (t *stackTB) Logf(format string, args ...any) { t.log.Printf(format, args...) }

func (t *stackTB) Errorf(format string, args ...any) {
	t.log.Printf("ERROR: "+format, args...)
	t.setFailed()
}

func (t *stackTB) Fatal(args ...any) { t.fatal(fmt.Sprint(args...)) }

func (t *stackTB) Fatalf(format string, args ...any) { t.fatal(fmt.Sprintf(format, args...)) }

func (t *stackTB) fatal(msg string) {
	t.log.Print("FATAL: " + msg)
	t.setFailed()
	if t.cleaning.Load() {
		panic(fatalInCleanup{})
	}
	t.exit(1)
}

func (t *stackTB) setFailed() {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
}

func (t *stackTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *stackTB) Cleanup(f func()) {
	t.mu.Lock()
	t.cleanups = append(t.cleanups, f)
	t.mu.Unlock()
}

// TempDir returns a new directory under this run's directory, which the
// last cleanup removes.
func (t *stackTB) TempDir() string {
	dir, err := os.MkdirTemp(t.runDir, "tmp")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// exit runs the cleanups, last registered first, and exits: with code, or
// 1 if something failed on the way.
func (t *stackTB) exit(code int) {
	t.cleaning.Store(true)
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		f := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		func() {
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(fatalInCleanup); !ok {
						t.Errorf("cleanup panicked: %v\n%s", r, debug.Stack())
					}
				}
			}()
			f()
		}()
	}
	if code == 0 && t.Failed() {
		code = 1
	}
	t.log.Printf("stopped (exit status %d)", code)
	os.Exit(code)
}

// logCopier appends what a process has logged (read through output, which
// returns everything so far) to a file, once a second and when stopped.
type logCopier struct {
	file    *os.File
	output  func() string
	written int
	closed  bool
	mu      sync.Mutex
	done    chan struct{}
	once    sync.Once
}

func newLogCopier(path string, output func() string) (*logCopier, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &logCopier{file: f, output: output, done: make(chan struct{})}, nil
}

func (c *logCopier) run() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
			c.flush()
		}
	}
}

func (c *logCopier) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if s := c.output(); len(s) > c.written {
		n, _ := c.file.WriteString(s[c.written:])
		c.written += n
	}
}

func (c *logCopier) stop() {
	c.once.Do(func() {
		close(c.done)
		c.flush()
		c.mu.Lock()
		c.closed = true
		_ = c.file.Close()
		c.mu.Unlock()
	})
}

func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

// moduleRoot is the DockerIOS checkout (test/framework finds artifacts/
// and bin/ the same way).
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root (is Go on PATH?): %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("run localstack inside the DockerIOS checkout")
	}
	return filepath.Dir(gomod), nil
}
