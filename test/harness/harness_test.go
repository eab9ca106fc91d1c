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

package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/client"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/bootdisk"
	"github.com/dockerios/dockerios/test/framework"
)

// testEnv is one control plane with the upstream CRDs and a running
// harness, and a namespace for the test's objects.
type testEnv struct {
	h    *Harness
	kube kubernetes.Interface
	dyn  dynamic.Interface // strict field validation for KubeVirt and CDI objects
	lax  dynamic.Interface // kube-apiserver's default field validation
	ns   string
}

func TestHarness(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cfg := framework.RESTConfig(t, cp.AdminKubeconfig)
	ctx := t.Context()
	if err := InstallCRDs(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// Installing twice is fine (the controller's tests may do it per test).
	if err := InstallCRDs(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	h, err := Start(ctx, Config{
		RESTConfig: cfg, AgentBinary: AgentBinary(t), WorkDir: t.TempDir(),
		RestartDelay: time.Second, NodeUnresponsiveAfter: 3 * time.Second,
		// Not 22: the test must not need root.
		SSH:         SSHConfig{Port: framework.FreePort(t), User: "runner", Password: "image-password"},
		DataSources: true,
		Logf:        t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	e := &testEnv{h: h, kube: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(StrictFieldValidation(cfg)),
		lax: dynamic.NewForConfigOrDie(cfg), ns: "harness-test"}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("UpstreamSchemas", e.testUpstreamSchemas)
	t.Run("BootdiskJob", e.testBootdiskJob)
	t.Run("DataVolume", e.testDataVolume)
	t.Run("VirtualMachine", e.testVirtualMachine)
	t.Run("PodNetworkOnly", e.testPodNetworkOnly)
	t.Run("SSH", e.testSSH)
	t.Run("RecoveryJob", e.testRecoveryJob)
	t.Run("DataSourceAndBlankAndCrossNamespaceClone", e.testDataSource)

	s := h.Stats()
	t.Logf("stats: %+v", s)
	if s.JobsSucceeded < 1 || s.JobsFailed < 2 || s.DataVolumesSucceeded < 1 || s.DataVolumesFailed < 1 || s.VMIsCreated < 4 || s.AgentsStarted < 4 {
		t.Errorf("stats do not add up: %+v", s)
	}
	h.Stop()
	if s := h.Stats(); s.AgentsRunning != 0 {
		t.Errorf("%d agents still running after Stop", s.AgentsRunning)
	}
}

// testIdentity is the identity the test's bootdisk Jobs render.
var testIdentity = v1alpha1.MacOSIdentitySpec{
	Model: v1alpha1.DefaultSMBIOSModel, SerialNumber: "C02TM2ZBHX87", BoardSerialNumber: "C02717306J9JG361M",
	SystemUUID: "5A1C5F4E-8B2E-4C43-9D2A-3E1B6C7D8E9F", MACAddress: "00:16:CB:00:11:22", ROM: "0016CB001122"}

// bootdiskJob is the builder Job pkg/bootdisk makes for a machine of UID
// uid, with the Secrets it uses, as the controller makes them first.
func (e *testEnv) bootdiskJob(t *testing.T, uid string) *batchv1.Job {
	t.Helper()
	e.jobSecrets(t, uid, testIdentity)
	return e.bootdiskJobAlone(t, uid)
}

// jobSecrets makes the token and identity Secrets of a machine's Job
// (again: they may exist from an earlier Job of the machine).
func (e *testEnv) jobSecrets(t *testing.T, uid string, spec v1alpha1.MacOSIdentitySpec) {
	t.Helper()
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "mac-" + uid + "-agent"}, Data: map[string][]byte{tokenSecretKey: []byte(strings.Repeat("t", 64))}},
		{ObjectMeta: metav1.ObjectMeta{Name: "mac-" + uid + "-identity"}, Data: bootdisk.IdentitySecretData(&v1alpha1.MacOSIdentity{Spec: spec})},
	} {
		if _, err := e.kube.CoreV1().Secrets(e.ns).Create(t.Context(), s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// bootdiskJobAlone makes only the Job.
func (e *testEnv) bootdiskJobAlone(t *testing.T, uid string) *batchv1.Job {
	t.Helper()
	m := &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: "mac-" + uid, Namespace: e.ns, UID: types.UID(uid)},
		Spec: v1alpha1.MacOSMachineSpec{ClassName: "standard"}}
	m.Status.IdentityRef = &v1alpha1.LocalObjectReference{Name: "id-" + uid}
	id := &v1alpha1.MacOSIdentity{ObjectMeta: metav1.ObjectMeta{Name: "id-" + uid}, Spec: testIdentity}
	class := &v1alpha1.MacOSMachineClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}}
	job, err := bootdisk.Job(m, id, class, bootdisk.JobOptions{Image: "example.com/bootdisk@sha256:" + strings.Repeat("0", 64),
		OutputPVCName: "mac-" + uid + "-bootdisk", TokenSecretName: "mac-" + uid + "-agent", IdentitySecretName: "mac-" + uid + "-identity"})
	if err != nil {
		t.Fatal(err)
	}
	job.OwnerReferences = nil // no MacOSMachine exists here; the garbage collector would delete the Job
	created, err := e.kube.BatchV1().Jobs(e.ns).Create(t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func (e *testEnv) waitJob(t *testing.T, name string, want batchv1.JobConditionType) *batchv1.Job {
	t.Helper()
	var job *batchv1.Job
	framework.Eventually(t, 20*time.Second, func() string {
		var err error
		if job, err = e.kube.BatchV1().Jobs(e.ns).Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			return err.Error()
		}
		if !hasJobCondition(job, want) {
			return fmt.Sprintf("Job %s not %s: %+v", name, want, job.Status)
		}
		return ""
	})
	return job
}

func (e *testEnv) jobPods(t *testing.T, job *batchv1.Job) []corev1.Pod {
	t.Helper()
	pods, err := e.kube.CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/controller-uid=" + string(job.UID)})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func (e *testEnv) testBootdiskJob(t *testing.T) {
	t.Run("Complete", func(t *testing.T) {
		job := e.waitJob(t, e.bootdiskJob(t, "uid-ok").Name, batchv1.JobComplete)
		if !hasJobCondition(job, batchv1.JobSuccessCriteriaMet) || job.Status.Succeeded != 1 || job.Status.CompletionTime == nil ||
			job.Status.StartTime == nil || job.Status.Active != 0 {
			t.Errorf("Complete Job status: %+v", job.Status)
		}
		pods := e.jobPods(t, job)
		if len(pods) != 1 || pods[0].Status.Phase != corev1.PodSucceeded {
			t.Errorf("pods of a complete Job: %+v", pods)
		}
	})
	t.Run("BackoffLimitExceeded", func(t *testing.T) {
		e.h.FailBootdiskJobs("uid-fail", 1)
		job := e.waitJob(t, e.bootdiskJob(t, "uid-fail").Name, batchv1.JobFailed)
		if !hasJobCondition(job, batchv1.JobFailureTarget) || job.Status.Failed != bootdisk.DefaultBackoffLimit+1 || job.Status.CompletionTime != nil {
			t.Errorf("failed Job status: %+v", job.Status)
		}
		for _, c := range job.Status.Conditions {
			if c.Type == batchv1.JobFailed && (c.Reason != batchv1.JobReasonBackoffLimitExceeded || c.Message != "Job has reached the specified backoff limit") {
				t.Errorf("Failed condition: %+v", c)
			}
		}
		pods := e.jobPods(t, job)
		if len(pods) != int(bootdisk.DefaultBackoffLimit)+1 {
			t.Fatalf("%d pods, want one per attempt", len(pods))
		}
		for _, p := range pods {
			term := p.Status.ContainerStatuses[0].State.Terminated
			if p.Status.Phase != corev1.PodFailed || term == nil || term.ExitCode != 1 || term.Message != DefaultJobFailure.Message {
				t.Errorf("pod %s: %s %+v", p.Name, p.Status.Phase, term)
			}
		}
		// Only the next n Jobs of the machine fail.
		if err := e.kube.BatchV1().Jobs(e.ns).Delete(t.Context(), job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 10*time.Second, func() string {
			if _, err := e.kube.BatchV1().Jobs(e.ns).Get(t.Context(), job.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return "the failed Job is not gone yet"
			}
			return ""
		})
		e.waitJob(t, e.bootdiskJob(t, "uid-fail").Name, batchv1.JobComplete)
	})
	t.Run("WaitsForItsSecrets", func(t *testing.T) {
		// As the kubelet: no pod runs before the Secrets it mounts and
		// reads exist.
		job := e.bootdiskJobAlone(t, "uid-late")
		time.Sleep(2 * time.Second)
		got, err := e.kube.BatchV1().Jobs(e.ns).Get(t.Context(), job.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.StartTime != nil || len(e.jobPods(t, got)) != 0 {
			t.Fatalf("the Job started without its Secrets: %+v", got.Status)
		}
		e.jobSecrets(t, "uid-late", testIdentity)
		e.waitJob(t, job.Name, batchv1.JobComplete)
	})
	t.Run("InvalidIdentityInTheSecret", func(t *testing.T) {
		// As the builder: the identity comes from the mounted Secret; a bad
		// one fails at once (exit 2), naming the field, never the value.
		bad := testIdentity
		bad.ROM = ""
		bad.SerialNumber = "C02TM2ZBHX8"
		e.jobSecrets(t, "uid-badidentity", bad)
		job := e.waitJob(t, e.bootdiskJobAlone(t, "uid-badidentity").Name, batchv1.JobFailed)
		pods := e.jobPods(t, job)
		if job.Status.Failed != 1 || len(pods) != 1 {
			t.Fatalf("failed %d, %d pods; want 1 each", job.Status.Failed, len(pods))
		}
		term := pods[0].Status.ContainerStatuses[0].State.Terminated
		if want := "bootdisk: invalid identity: serialNumber, rom missing or not valid"; term == nil || term.ExitCode != 2 || term.Message != want {
			t.Errorf("terminated %+v, want exit 2 and %q", term, want)
		}
	})
	t.Run("PodFailurePolicy", func(t *testing.T) {
		e.h.FailBootdiskJobsWith("uid-badinput", 1, JobFailure{ExitCode: bootdisk.ExitInvalidInput, Message: "bootdisk: invalid input: rom is not 6 bytes"})
		job := e.waitJob(t, e.bootdiskJob(t, "uid-badinput").Name, batchv1.JobFailed)
		pods := e.jobPods(t, job)
		if job.Status.Failed != 1 || len(pods) != 1 {
			t.Fatalf("failed %d, %d pods; want 1 each (FailJob needs no retry)", job.Status.Failed, len(pods))
		}
		want := fmt.Sprintf("Container bootdisk for pod %s/%s failed with exit code 2 matching FailJob rule at index 0", e.ns, pods[0].Name)
		for _, c := range job.Status.Conditions {
			if c.Type == batchv1.JobFailed && (c.Reason != batchv1.JobReasonPodFailurePolicy || c.Message != want) {
				t.Errorf("Failed condition: %+v, want message %q", c, want)
			}
		}
	})
}

func (e *testEnv) dataVolume(t *testing.T, name, class string) {
	t.Helper()
	dv := &cdiv1.DataVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{machineUIDLabel: "uid-" + name}},
		Spec: cdiv1.DataVolumeSpec{
			SourceRef: &cdiv1.DataVolumeSourceRef{Kind: cdiv1.DataVolumeDataSource, Namespace: ptr.To("images"), Name: "sonoma"},
			Storage: &cdiv1.StorageSpec{StorageClassName: ptr.To(class),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("80Gi")}}},
		},
	}
	e.create(t, DataVolumeGVR, dv)
}

// create makes a typed KubeVirt or CDI object through the dynamic client.
func (e *testEnv) create(t *testing.T, gvr schema.GroupVersionResource, obj any) *unstructured.Unstructured {
	t.Helper()
	m, err := toMap(obj)
	if err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	delete(m["metadata"].(map[string]any), "creationTimestamp")
	u, err := e.dyn.Resource(gvr).Namespace(e.ns).Create(t.Context(), &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func (e *testEnv) getDataVolume(t *testing.T, name string) *cdiv1.DataVolume {
	t.Helper()
	u, err := e.dyn.Resource(DataVolumeGVR).Namespace(e.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dv, err := fromUnstructured[cdiv1.DataVolume](u)
	if err != nil {
		t.Fatal(err)
	}
	return dv
}

func (e *testEnv) waitDataVolume(t *testing.T, name string, want cdiv1.DataVolumePhase) *cdiv1.DataVolume {
	t.Helper()
	var dv *cdiv1.DataVolume
	framework.Eventually(t, 20*time.Second, func() string {
		if dv = e.getDataVolume(t, name); dv.Status.Phase != want {
			return fmt.Sprintf("DataVolume %s is %q, want %s", name, dv.Status.Phase, want)
		}
		return ""
	})
	return dv
}

// watchDataVolumePhases watches DataVolume name from now on and returns a
// function that waits (up to 20 s) until the watch has seen phase until,
// and returns every phase seen, in order, without repeats.
func (e *testEnv) watchDataVolumePhases(t *testing.T, name string) func(until cdiv1.DataVolumePhase) []cdiv1.DataVolumePhase {
	t.Helper()
	w, err := e.dyn.Resource(DataVolumeGVR).Namespace(e.ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return func(until cdiv1.DataVolumePhase) []cdiv1.DataVolumePhase {
		var seen []cdiv1.DataVolumePhase
		timeout := time.After(20 * time.Second)
		for !slices.Contains(seen, until) {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("the watch of DataVolume %s ended; phases seen %v", name, seen)
				}
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				dv, err := fromUnstructured[cdiv1.DataVolume](u)
				if err != nil {
					t.Fatal(err)
				}
				if p := dv.Status.Phase; p != "" && (len(seen) == 0 || seen[len(seen)-1] != p) {
					seen = append(seen, p)
				}
			case <-timeout:
				t.Fatalf("after 20s: DataVolume %s went through %v, never %s", name, seen, until)
			}
		}
		return seen
	}
}

func dvCondition(dv *cdiv1.DataVolume, typ cdiv1.DataVolumeConditionType) cdiv1.DataVolumeCondition {
	for _, c := range dv.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return cdiv1.DataVolumeCondition{}
}

func (e *testEnv) testDataVolume(t *testing.T) {
	t.Run("Succeeded", func(t *testing.T) {
		// Watched from before its creation: CloneInProgress may last less
		// than a poll on a busy machine, and the test is that it happens.
		phases := e.watchDataVolumePhases(t, "system-ok")
		e.dataVolume(t, "system-ok", "fast")
		dv := e.waitDataVolume(t, "system-ok", cdiv1.Succeeded)
		if got := phases(cdiv1.Succeeded); !slices.Contains(got, cdiv1.CloneInProgress) || slices.Index(got, cdiv1.CloneInProgress) > slices.Index(got, cdiv1.Succeeded) {
			t.Errorf("phases %v: want CloneInProgress before Succeeded", got)
		}
		if dv.Status.Progress != "100.0%" || dvCondition(dv, cdiv1.DataVolumeReady).Status != corev1.ConditionTrue ||
			dvCondition(dv, cdiv1.DataVolumeBound).Status != corev1.ConditionTrue || dv.Status.ClaimName != "system-ok" {
			t.Errorf("succeeded DataVolume status: %+v", dv.Status)
		}
	})
	t.Run("Failed", func(t *testing.T) {
		e.h.FailClones("full", true)
		e.dataVolume(t, "system-full", "full")
		dv := e.waitDataVolume(t, "system-full", cdiv1.Failed)
		if c := dvCondition(dv, cdiv1.DataVolumeRunning); c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "no space left on device") ||
			!strings.Contains(c.Message, "full") {
			t.Errorf("Running condition of a failed clone: %+v", c)
		}
		// Other classes are not affected; lifting the fault lets new
		// clones through.
		e.dataVolume(t, "system-other", "fast")
		e.waitDataVolume(t, "system-other", cdiv1.Succeeded)
		e.h.FailClones("full", false)
		e.dataVolume(t, "system-full-2", "full")
		e.waitDataVolume(t, "system-full-2", cdiv1.Succeeded)
		if dv := e.getDataVolume(t, "system-full"); dv.Status.Phase != cdiv1.Failed {
			t.Errorf("a failed DataVolume changed: %+v", dv.Status)
		}
	})
}

// machine is a VM as the controller makes it, reduced to what the harness
// reads: the machine-uid label on the template, the pod network and
// (optionally) the agent network.
func (e *testEnv) machine(t *testing.T, name, uid string, agentNet bool) (token []byte) {
	t.Helper()
	token = []byte(fmt.Sprintf("%064x", time.Now().UnixNano()))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-agent", Namespace: e.ns, Labels: map[string]string{machineUIDLabel: uid}},
		Data: map[string][]byte{tokenSecretKey: token}}
	if _, err := e.kube.CoreV1().Secrets(e.ns).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ifaces := []kubevirtv1.Interface{{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}}
	nets := []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}}
	if agentNet {
		ifaces = append(ifaces, kubevirtv1.Interface{Name: "agent", MacAddress: "00:16:cb:00:11:22",
			InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}})
		nets = append(nets, kubevirtv1.Network{Name: "agent", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "agent-net"}}})
	}
	vm := &kubevirtv1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.GroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{machineUIDLabel: uid}},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{machineUIDLabel: uid}, Annotations: map[string]string{"example.com/a": "b"}},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain:   kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Interfaces: ifaces}},
					Networks: nets,
				},
			},
		},
	}
	e.create(t, VirtualMachineGVR, vm)
	return token
}

func (e *testEnv) getVMI(t *testing.T, name string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	u, err := e.dyn.Resource(VirtualMachineInstanceGVR).Namespace(e.ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	vmi, err := fromUnstructured[kubevirtv1.VirtualMachineInstance](u)
	if err != nil {
		t.Fatal(err)
	}
	return vmi
}

// waitRunning waits for a Running VMI of name other than the one of UID
// not, and returns it with its agent's address.
func (e *testEnv) waitRunning(t *testing.T, name string, not types.UID) (*kubevirtv1.VirtualMachineInstance, string) {
	t.Helper()
	var vmi *kubevirtv1.VirtualMachineInstance
	framework.Eventually(t, 20*time.Second, func() string {
		vmi = e.getVMI(t, name)
		if vmi == nil || vmi.UID == not || vmi.Status.Phase != kubevirtv1.Running {
			return fmt.Sprintf("no new Running VMI %s: %+v", name, vmi)
		}
		return ""
	})
	var addr string
	framework.Eventually(t, 10*time.Second, func() string {
		var ok bool
		if addr, ok = e.h.AgentOf(e.ns, name); !ok {
			return "no agent for " + name
		}
		return ""
	})
	return vmi, addr
}

// waitStage polls the agent with the token until it reports stage.
func waitStage(t *testing.T, addr string, token []byte, stage api.Stage) *api.Status {
	t.Helper()
	c, err := client.New(addr, token, client.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var st *api.Status
	framework.Eventually(t, 15*time.Second, func() string {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		s, err := c.Status(ctx)
		if err != nil {
			return err.Error()
		}
		if st = s; s.Stage != stage {
			return fmt.Sprintf("agent at %s is %s (%+v), want %s", addr, s.Stage, s.Reasons, stage)
		}
		return ""
	})
	return st
}

func agentError(t *testing.T, addr string, token []byte) error {
	t.Helper()
	c, err := client.New(addr, token, client.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(t.Context())
	return err
}

func ifaceIP(vmi *kubevirtv1.VirtualMachineInstance, name string) string {
	for _, i := range vmi.Status.Interfaces {
		if i.Name == name {
			return i.IP
		}
	}
	return ""
}

func (e *testEnv) setRunStrategy(t *testing.T, name string, s kubevirtv1.VirtualMachineRunStrategy) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"runStrategy":%q}}`, s)
	if _, err := e.dyn.Resource(VirtualMachineGVR).Namespace(e.ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *testEnv) waitVMIGone(t *testing.T, name string, uid types.UID) {
	t.Helper()
	framework.Eventually(t, 20*time.Second, func() string {
		if vmi := e.getVMI(t, name); vmi != nil && vmi.UID == uid {
			return fmt.Sprintf("VMI %s still there (%s)", name, vmi.Status.Phase)
		}
		return ""
	})
}

func (e *testEnv) testVirtualMachine(t *testing.T) {
	const name, uid = "mac-1", "uid-mac-1"
	token := e.machine(t, name, uid, true)
	vmi, addr := e.waitRunning(t, name, "")

	// What virt-controller and virt-handler would have written.
	if ref := metav1.GetControllerOf(vmi); ref == nil || ref.Kind != "VirtualMachine" || ref.Name != name || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("VMI controller reference: %+v", vmi.OwnerReferences)
	}
	if vmi.Labels[machineUIDLabel] != uid || vmi.Annotations["example.com/a"] != "b" {
		t.Errorf("VMI metadata not from the template: %v %v", vmi.Labels, vmi.Annotations)
	}
	if !slices.Contains(e.h.Nodes(), vmi.Status.NodeName) {
		t.Errorf("VMI on node %q, not one of %v", vmi.Status.NodeName, e.h.Nodes())
	}
	var phases []kubevirtv1.VirtualMachineInstancePhase
	for _, p := range vmi.Status.PhaseTransitionTimestamps {
		phases = append(phases, p.Phase)
	}
	if !slices.Equal(phases, []kubevirtv1.VirtualMachineInstancePhase{kubevirtv1.Pending, kubevirtv1.Scheduling, kubevirtv1.Scheduled, kubevirtv1.Running}) {
		t.Errorf("phase transitions %v", phases)
	}
	agentIP, podIP := ifaceIP(vmi, "agent"), ifaceIP(vmi, "default")
	if agentIP == "" || podIP == "" || agentIP == podIP {
		t.Errorf("interfaces %+v: want distinct addresses for default and agent", vmi.Status.Interfaces)
	}
	if want := fmt.Sprintf("%s:%d", agentIP, v1alpha1.DefaultAgentPort); addr != want {
		t.Errorf("agent at %s, want %s (the agent network)", addr, want)
	}

	// The real agent, with the Secret's token, boots to Ready.
	st := waitStage(t, addr, token, api.StageReady)
	var stages []api.Stage
	for _, tr := range st.Transitions {
		stages = append(stages, tr.Stage)
	}
	if len(stages) == 0 || stages[0] != api.StageBooted {
		t.Errorf("agent transitions %v, want from Booted", stages)
	}
	if err := agentError(t, addr, []byte(strings.Repeat("f", 64))); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("wrong token: %v, want ErrUnauthenticated", err)
	}
	framework.Eventually(t, 10*time.Second, func() string {
		u, err := e.dyn.Resource(VirtualMachineGVR).Namespace(e.ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		ps, _, _ := unstructured.NestedString(u.Object, "status", "printableStatus")
		ready, _, _ := unstructured.NestedBool(u.Object, "status", "ready")
		if ps != "Running" || !ready {
			return fmt.Sprintf("VM status %v", u.Object["status"])
		}
		return ""
	})

	t.Run("DegradeGuest", func(t *testing.T) {
		if err := e.h.DegradeGuest(e.ns, name); err != nil {
			t.Fatal(err)
		}
		st := waitStage(t, addr, token, api.StageDegraded)
		if len(st.Reasons) == 0 || st.Reasons[0].Type != api.ReasonCheckFailed {
			t.Errorf("Degraded reasons %+v", st.Reasons)
		}
		if err := e.h.RepairGuest(e.ns, name); err != nil {
			t.Fatal(err)
		}
		waitStage(t, addr, token, api.StageReady)
	})

	t.Run("PartitionAgents", func(t *testing.T) {
		e.h.PartitionAgents(true)
		if err := agentError(t, addr, token); !errors.Is(err, client.ErrUnreachable) {
			t.Errorf("partitioned agent: %v, want ErrUnreachable", err)
		}
		if v := e.getVMI(t, name); v.Status.Phase != kubevirtv1.Running || v.UID != vmi.UID {
			t.Errorf("VMI during the partition: %s", v.Status.Phase)
		}
		e.h.PartitionAgents(false)
		waitStage(t, addr, token, api.StageReady)
	})

	t.Run("Halted", func(t *testing.T) {
		e.setRunStrategy(t, name, kubevirtv1.RunStrategyHalted)
		e.waitVMIGone(t, name, vmi.UID)
		if _, ok := e.h.AgentOf(e.ns, name); ok {
			t.Error("the agent of a halted VM still runs")
		}
		if err := agentError(t, addr, token); !errors.Is(err, client.ErrUnreachable) {
			t.Errorf("halted VM's agent: %v, want ErrUnreachable", err)
		}
		e.setRunStrategy(t, name, kubevirtv1.RunStrategyAlways)
		vmi, addr = e.waitRunning(t, name, vmi.UID)
		waitStage(t, addr, token, api.StageReady)
	})

	t.Run("CrashGuest", func(t *testing.T) {
		if err := e.h.CrashGuest(e.ns, name); err != nil {
			t.Fatal(err)
		}
		if v := e.getVMI(t, name); v.Status.Phase != kubevirtv1.Failed || vmiReady(&v.Status) != corev1.ConditionFalse {
			t.Errorf("crashed VMI: %s %+v", v.Status.Phase, v.Status.Conditions)
		}
		if err := agentError(t, addr, token); !errors.Is(err, client.ErrUnreachable) {
			t.Errorf("crashed guest's agent: %v, want ErrUnreachable", err)
		}
		// runStrategy Always: KubeVirt replaces the failed VMI.
		vmi, addr = e.waitRunning(t, name, vmi.UID)
		waitStage(t, addr, token, api.StageReady)
	})

	t.Run("LoseNode", func(t *testing.T) {
		node := vmi.Status.NodeName
		if err := e.h.LoseNode(node); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 2*time.Second, func() string {
			v := e.getVMI(t, name)
			if v.Status.Phase != kubevirtv1.Running || vmiReady(&v.Status) != corev1.ConditionFalse {
				return fmt.Sprintf("VMI on the lost node: %s, Ready %s", v.Status.Phase, vmiReady(&v.Status))
			}
			return ""
		})
		if err := agentError(t, addr, token); !errors.Is(err, client.ErrUnreachable) {
			t.Errorf("agent on a lost node: %v, want ErrUnreachable", err)
		}
		n, err := e.kube.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionUnknown {
				t.Errorf("lost node's Ready: %+v", c)
			}
		}
		framework.Eventually(t, 10*time.Second, func() string {
			v := e.getVMI(t, name)
			if v.UID == vmi.UID && (v.Status.Phase != kubevirtv1.Failed || v.Status.Reason != nodeUnresponsiveReason) {
				return fmt.Sprintf("VMI on the lost node: %s %q", v.Status.Phase, v.Status.Reason)
			}
			return ""
		})
		// KubeVirt deletes the failed VMI to restart the VM, but its
		// launcher pod cannot be confirmed gone from an unreachable node:
		// the VMI stays, and no replacement starts, while the Node exists.
		framework.Eventually(t, 15*time.Second, func() string {
			if v := e.getVMI(t, name); v.UID != vmi.UID || v.DeletionTimestamp == nil {
				return fmt.Sprintf("the failed VMI is not being deleted (uid %s, deletionTimestamp %v)", v.UID, v.DeletionTimestamp)
			}
			return ""
		})
		time.Sleep(2 * time.Second)
		if v := e.getVMI(t, name); v.UID != vmi.UID || !slices.Contains(v.Finalizers, kubevirtv1.VirtualMachineInstanceFinalizer) {
			t.Fatalf("the VMI on the lost node went before its Node did: uid %s, finalizers %v", v.UID, v.Finalizers)
		}
		// Deleting the Node (a person who knows the host is off) lets it go.
		if err := e.kube.CoreV1().Nodes().Delete(t.Context(), node, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		vmi, addr = e.waitRunning(t, name, vmi.UID)
		if vmi.Status.NodeName == node {
			t.Errorf("replacement VMI scheduled on the lost node %s", node)
		}
		waitStage(t, addr, token, api.StageReady)
		if err := e.h.RestoreNode(node); err != nil {
			t.Fatal(err)
		}
		if _, err := e.kube.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{}); err != nil {
			t.Errorf("the restored node: %v", err)
		}
	})

	t.Run("DeleteVM", func(t *testing.T) {
		if err := e.dyn.Resource(VirtualMachineGVR).Namespace(e.ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitVMIGone(t, name, vmi.UID)
		framework.Eventually(t, 10*time.Second, func() string {
			if _, ok := e.h.AgentOf(e.ns, name); ok {
				return "the agent of a deleted VM still runs"
			}
			return ""
		})
	})
}

// testPodNetworkOnly: without an agent network the agent is on the pod
// network's address.
func (e *testEnv) testPodNetworkOnly(t *testing.T) {
	const name = "mac-2"
	token := e.machine(t, name, "uid-mac-2", false)
	vmi, addr := e.waitRunning(t, name, "")
	if want := fmt.Sprintf("%s:%d", ifaceIP(vmi, "default"), v1alpha1.DefaultAgentPort); addr != want {
		t.Errorf("agent at %s, want %s", addr, want)
	}
	waitStage(t, addr, token, api.StageReady)
}

// testSSH: a guest serves SSH on each of its addresses with the image's
// account and host key, records what it is asked to run, and stops
// serving when its VMI goes.
func (e *testEnv) testSSH(t *testing.T) {
	const name = "mac-ssh"
	e.machine(t, name, "uid-mac-ssh", true)
	vmi, _ := e.waitRunning(t, name, "")
	dial := func(ip, password string) (*ssh.Client, error) {
		return ssh.Dial("tcp", net.JoinHostPort(ip, strconv.Itoa(e.h.cfg.SSH.Port)), &ssh.ClientConfig{
			User: "runner", Auth: []ssh.AuthMethod{ssh.Password(password)},
			HostKeyCallback: ssh.FixedHostKey(e.h.SSHHostKey()), Timeout: 2 * time.Second})
	}
	var ips []string
	for _, network := range []string{"default", "agent"} {
		ip := ifaceIP(vmi, network)
		ips = append(ips, ip)
		var c *ssh.Client
		framework.Eventually(t, 10*time.Second, func() string {
			var err error
			if c, err = dial(ip, "image-password"); err != nil {
				return fmt.Sprintf("ssh to %s (%s): %v", ip, network, err)
			}
			return ""
		})
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		s.Stdin = strings.NewReader("input for " + network)
		if err := s.Run("sw_vers -productVersion # on " + network); err != nil {
			t.Errorf("on %s: %v", network, err)
		}
		c.Close()
	}
	if _, err := dial(ips[0], "wrong"); err == nil {
		t.Error("a wrong password was accepted")
	}
	got := e.h.SSHCommands(e.ns, name)
	if len(got) != 2 {
		t.Fatalf("recorded %+v, want the two commands", got)
	}
	for i, network := range []string{"default", "agent"} {
		c := got[i]
		if c.Guest != e.ns+"/"+name || c.Command != "sw_vers -productVersion # on "+network ||
			string(c.Stdin) != "input for "+network || !strings.HasPrefix(c.Address, ips[i]+":") {
			t.Errorf("command %d: %+v", i, c)
		}
	}
	if other := e.h.SSHCommands(e.ns, "mac-1"); len(other) != 0 {
		t.Errorf("another guest's record holds %+v", other)
	}

	if err := e.dyn.Resource(VirtualMachineGVR).Namespace(e.ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitVMIGone(t, name, vmi.UID)
	framework.Eventually(t, 10*time.Second, func() string {
		if c, err := dial(ips[0], "image-password"); err == nil {
			c.Close()
			return "the guest of a deleted VM still serves SSH"
		}
		return ""
	})
	if n := len(e.h.SSHCommands(e.ns, name)); n != 2 {
		t.Errorf("the record of a gone guest holds %d commands, want 2", n)
	}
}
