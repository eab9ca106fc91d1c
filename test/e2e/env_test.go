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

// Package e2e drives DockerIOS end to end: a real kube-apiserver with the
// DockerIOS apiserver behind it, the real controller binary, and the test
// harness (test/harness) playing KubeVirt, CDI, the Job controller and the
// guests — each guest running the real agent binary with its machine's
// token on a loopback address. One control plane serves the package; each
// test works in namespaces of its own.
package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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

const (
	model = "iMacPro1,1"
	// storageHoldBack is the controller's --storage-hold-back here.
	storageHoldBack = 8 * time.Second
)

type env struct {
	cp     *framework.ControlPlane
	ctrl   *framework.Controller
	h      *harness.Harness
	admin  *framework.Kubectl
	cfg    *rest.Config
	client versioned.Interface
	kube   kubernetes.Interface

	mu        sync.Mutex
	nextIdent int
}

// start brings the environment up once per package.
func start(t testing.TB, opts ...func(*harness.Config)) *env {
	t.Helper()
	return startWith(t, nil, opts...)
}

// startWith is start with controllerArgs added to the controller's flags
// (a flag given again overrides the default here).
func startWith(t testing.TB, controllerArgs []string, opts ...func(*harness.Config)) *env {
	t.Helper()
	return startOn(t, framework.StartControlPlane(t), controllerArgs, opts...)
}

// startOn is startWith on a control plane the caller started.
func startOn(t testing.TB, cp *framework.ControlPlane, controllerArgs []string, opts ...func(*harness.Config)) *env {
	t.Helper()
	e := &env{}
	e.cp = cp
	e.admin = framework.NewKubectl(t, e.cp.AdminKubeconfig)
	e.cfg = framework.RESTConfig(t, e.cp.AdminKubeconfig)
	var err error
	e.client, err = versioned.NewForConfig(e.cfg)
	require.NoError(t, err)
	e.kube, err = kubernetes.NewForConfig(e.cfg)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, harness.InstallCRDs(ctx, e.cfg))
	e.ctrl = e.cp.StartController(t, append([]string{"--storage-hold-back=" + storageHoldBack.String(), "--agent-timeout=2s"}, controllerArgs...)...)
	// The README's examples live in the default namespace.
	e.oskSecret(t, metav1.NamespaceDefault)
	hc := harness.Config{RESTConfig: e.cfg, AgentBinary: harness.AgentBinary(t), WorkDir: t.TempDir()}
	for _, o := range opts {
		o(&hc)
	}
	e.h, err = harness.Start(ctx, hc)
	require.NoError(t, err)
	t.Cleanup(e.h.Stop)
	return e
}

// fleet makes an identity pool of n identities, an image and a class named
// name, with class options applied.
func (e *env) fleet(t testing.TB, name string, n int, class func(*v1alpha1.MacOSMachineClass)) {
	t.Helper()
	ctx := context.Background()
	_, err := e.client.DockeriosV1alpha1().MacOSIdentityPools().Create(ctx, &v1alpha1.MacOSIdentityPool{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MacOSIdentityPoolSpec{Model: model}}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.addIdentities(t, name, n)
	_, err = e.client.DockeriosV1alpha1().MacOSImages().Create(ctx, &v1alpha1.MacOSImage{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MacOSImageSpec{Release: "14.6", Source: v1alpha1.ImageSource{
			DataSource: &v1alpha1.NamespacedObjectReference{Namespace: "dockerios-images", Name: "sonoma-14-6"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	c := &v1alpha1.MacOSMachineClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MacOSMachineClassSpec{
		ImageName: name, IdentityPoolName: name, SystemDisk: v1alpha1.SystemDiskSpec{Size: mustQuantity("64Gi"), StorageClassName: ptr.To(name)},
		StartTimeout: &metav1.Duration{Duration: 2 * time.Minute},
	}}
	if class != nil {
		class(c)
	}
	_, err = e.client.DockeriosV1alpha1().MacOSMachineClasses().Create(ctx, c, metav1.CreateOptions{})
	require.NoError(t, err)
}

// addIdentities adds n identities to pool; values never repeat within the
// package (one generator, advanced under a lock).
func (e *env) addIdentities(t testing.TB, pool string, n int) {
	t.Helper()
	e.mu.Lock()
	from := e.nextIdent
	e.nextIdent += n
	e.mu.Unlock()
	gen := identity.NewGenerator(7, model)
	for i := 0; i < from; i++ {
		gen.Next()
	}
	for i := range n {
		v := gen.Next()
		_, err := e.client.DockeriosV1alpha1().MacOSIdentities().Create(context.Background(), &v1alpha1.MacOSIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", pool, i)},
			Spec: v1alpha1.MacOSIdentitySpec{PoolName: pool, Model: v.Model, SerialNumber: v.SerialNumber,
				BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// namespace creates a namespace for one test, with the OSK Secret every
// namespace running macOS VMs has (a dummy key: tests never see Apple's).
func (e *env) namespace(t testing.TB, name string) string {
	t.Helper()
	e.bareNamespace(t, name)
	e.oskSecret(t, name)
	return name
}

// bareNamespace creates a namespace without the OSK Secret.
func (e *env) bareNamespace(t testing.TB, name string) string {
	t.Helper()
	_, err := e.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return name
}

func (e *env) oskSecret(t testing.TB, ns string) {
	t.Helper()
	_, err := e.kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "dockerios-osk"},
		StringData: map[string]string{"osk": strings.Repeat("dummy-osk-", 6) + "test"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func (e *env) machines(t testing.TB, ns string) []v1alpha1.MacOSMachine {
	t.Helper()
	l, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

func (e *env) machine(t testing.TB, ns, name string) *v1alpha1.MacOSMachine {
	t.Helper()
	m, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return m
}

// createMachines creates n machines of class named by nameFormat (with
// their index), 16 clients at a time, as a fleet is asked for at once.
func (e *env) createMachines(t testing.TB, ns, class, nameFormat string, n int) {
	t.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				_, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Create(ctx, &v1alpha1.MacOSMachine{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf(nameFormat, i)}, Spec: v1alpha1.MacOSMachineSpec{ClassName: class}}, metav1.CreateOptions{})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// createClaim claims a machine of pool.
func (e *env) createClaim(t testing.TB, ns, name, pool string) {
	t.Helper()
	_, err := e.client.DockeriosV1alpha1().MacOSMachineClaims(ns).Create(context.Background(), &v1alpha1.MacOSMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MacOSMachineClaimSpec{PoolName: pool}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func (e *env) createMachine(t testing.TB, ns, name, class string) *v1alpha1.MacOSMachine {
	t.Helper()
	m, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Create(context.Background(), &v1alpha1.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MacOSMachineSpec{ClassName: class}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return m
}

// waitMachine waits until the machine satisfies ok, failing with its status.
func (e *env) waitMachine(t testing.TB, ns, name string, within time.Duration, what string, ok func(*v1alpha1.MacOSMachine) bool) *v1alpha1.MacOSMachine {
	t.Helper()
	var last *v1alpha1.MacOSMachine
	framework.Eventually(t, within, func() string {
		m, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		last = m
		if ok(m) {
			return ""
		}
		return fmt.Sprintf("machine %s/%s not %s: %s\ncontroller log tail:\n%s", ns, name, what, describe(m), tail(e.ctrl.Output(), 15))
	})
	return last
}

func phaseIs(p v1alpha1.MacOSMachinePhase) func(*v1alpha1.MacOSMachine) bool {
	return func(m *v1alpha1.MacOSMachine) bool { return m.Status.Phase == p }
}

func describe(m *v1alpha1.MacOSMachine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s", m.Status.Phase)
	for _, c := range m.Status.Conditions {
		fmt.Fprintf(&b, "\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func condition(m *v1alpha1.MacOSMachine, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(m.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ, Status: "absent"}
}

// events returns the reasons and messages of Events about obj.
func (e *env) events(t testing.TB, ns, kind, name string) []corev1.Event {
	t.Helper()
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.AsSelector().String()
	l, err := e.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: sel})
	require.NoError(t, err)
	return l.Items
}

func (e *env) waitEvent(t testing.TB, ns, kind, name, reason, contains string) corev1.Event {
	t.Helper()
	var found corev1.Event
	framework.Eventually(t, 60*time.Second, func() string {
		for _, ev := range e.events(t, ns, kind, name) {
			if ev.Reason == reason && strings.Contains(ev.Message, contains) {
				found = ev
				return ""
			}
		}
		return fmt.Sprintf("no Event %s %q on %s %s/%s", reason, contains, kind, ns, name)
	})
	return found
}

func (e *env) gone(t testing.TB, ns, name string, within time.Duration) {
	t.Helper()
	framework.Eventually(t, within, func() string {
		m, err := e.client.DockeriosV1alpha1().MacOSMachines(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("machine %s/%s still there: %s\ncontroller log tail:\n%s", ns, name, describe(m), tail(e.ctrl.Output(), 15))
	})
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// dynamic is a client whose writes of KubeVirt and CDI objects are
// validated strictly against their upstream schemas.
func (e *env) dynamic(t testing.TB) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(harness.StrictFieldValidation(e.cfg))
	require.NoError(t, err)
	return d
}

// createPool creates a MacOSMachinePool.
func (e *env) createPool(t testing.TB, ns, name string, spec v1alpha1.MacOSMachinePoolSpec) {
	t.Helper()
	_, err := e.client.DockeriosV1alpha1().MacOSMachinePools(ns).Create(context.Background(), &v1alpha1.MacOSMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err)
}
