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

package bootdisk

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

func objects() (*v1alpha1.MacOSMachine, *v1alpha1.MacOSIdentity, *v1alpha1.MacOSMachineClass) {
	machine := &v1alpha1.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "ci-1", Namespace: "builds", UID: "0c8a4a53-5d5e-4a8e-9d5c-6c1f7e0b3a11"},
		Spec:       v1alpha1.MacOSMachineSpec{ClassName: "imacpro"},
		Status:     v1alpha1.MacOSMachineStatus{IdentityRef: &v1alpha1.LocalObjectReference{Name: "id-c02ck029hx87"}},
	}
	id := &v1alpha1.MacOSIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: "id-c02ck029hx87"},
		Spec: v1alpha1.MacOSIdentitySpec{
			PoolName: "imacpro", Model: "iMacPro1,1", SerialNumber: "C02CK029HX87", BoardSerialNumber: "C02015700QXJG36CB",
			SystemUUID: "4B408A88-4062-4532-9AA1-3D8A3549327F", MACAddress: "34:31:8F:D3:88:E4", ROM: "34318FD388E4",
		},
		Status: v1alpha1.MacOSIdentityStatus{Allocation: &v1alpha1.IdentityAllocation{
			MachineNamespace: "builds", MachineName: "ci-1", MachineUID: "0c8a4a53-5d5e-4a8e-9d5c-6c1f7e0b3a11",
		}},
	}
	class := &v1alpha1.MacOSMachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: "imacpro"},
		Spec:       v1alpha1.MacOSMachineClassSpec{SMBIOSModel: "iMacPro1,1", Display: v1alpha1.DisplaySpec{Width: 2560, Height: 1440}},
	}
	return machine, id, class
}

func options() JobOptions {
	return JobOptions{Image: "registry.example/dockerios/bootdisk@sha256:0123", OutputPVCName: "ci-1-bootdisk", TokenSecretName: "ci-1-agent-token",
		IdentitySecretName: "ci-1-identity"}
}

func TestJob(t *testing.T) {
	machine, id, class := objects()
	job, err := Job(machine, id, class, options())
	if err != nil {
		t.Fatal(err)
	}
	if job.Namespace != "builds" || job.Name != JobName(machine, id, class) || !strings.HasPrefix(job.Name, "ci-1-bootdisk-") {
		t.Errorf("job %s/%s", job.Namespace, job.Name)
	}
	if len(job.OwnerReferences) != 1 {
		t.Fatalf("owner references %v", job.OwnerReferences)
	}
	o := job.OwnerReferences[0]
	if o.APIVersion != "dockerios.io/v1alpha1" || o.Kind != "MacOSMachine" || o.Name != "ci-1" || o.UID != machine.UID || !ptr.Deref(o.Controller, false) || !ptr.Deref(o.BlockOwnerDeletion, false) {
		t.Errorf("owner reference %+v", o)
	}
	if *job.Spec.BackoffLimit != DefaultBackoffLimit || *job.Spec.ActiveDeadlineSeconds != DefaultActiveDeadlineSeconds {
		t.Errorf("backoffLimit %d, activeDeadlineSeconds %d", *job.Spec.BackoffLimit, *job.Spec.ActiveDeadlineSeconds)
	}
	rules := job.Spec.PodFailurePolicy.Rules
	if rules[0].Action != batchv1.PodFailurePolicyActionFailJob || !slices.Equal(rules[0].OnExitCodes.Values, []int32{2, 3}) {
		t.Errorf("pod failure policy %+v", rules)
	}
	pod := job.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever || !*pod.SecurityContext.RunAsNonRoot || *pod.SecurityContext.RunAsUser == 0 || ptr.Deref(pod.AutomountServiceAccountToken, true) {
		t.Errorf("pod spec %+v", pod)
	}
	c := pod.Containers[0]
	if c.Image != options().Image || *c.SecurityContext.AllowPrivilegeEscalation || !*c.SecurityContext.ReadOnlyRootFilesystem || c.SecurityContext.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container %+v", c)
	}
	wantArgs := []string{"render", "--model=iMacPro1,1", "--identity-dir=/identity",
		"--width=2560", "--height=1440", "--format=raw", "--output-dir=/output", "--scratch-dir=/scratch"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args\n got %q\nwant %q", c.Args, wantArgs)
	}
	env := c.Env[0]
	if env.Name != TokenEnv || env.Value != "" || env.ValueFrom.SecretKeyRef.Name != "ci-1-agent-token" || env.ValueFrom.SecretKeyRef.Key != "token" {
		t.Errorf("token env %+v", env)
	}
	for _, a := range c.Args {
		if strings.Contains(a, "token") {
			t.Errorf("argument %q mentions the token: tokens only travel in the environment", a)
		}
	}
	if pod.Volumes[0].PersistentVolumeClaim.ClaimName != "ci-1-bootdisk" || c.VolumeMounts[0].MountPath != "/output" {
		t.Errorf("output volume %+v %+v", pod.Volumes[0], c.VolumeMounts[0])
	}
	if v, m := pod.Volumes[2], c.VolumeMounts[2]; v.Secret == nil || v.Secret.SecretName != "ci-1-identity" || ptr.Deref(v.Secret.Optional, false) ||
		*v.Secret.DefaultMode != 0o440 || m.Name != v.Name || m.MountPath != IdentityMountPath || !m.ReadOnly {
		t.Errorf("identity volume %+v mounted %+v", v, m)
	}
	if c.TerminationMessagePath != "/dev/termination-log" {
		t.Errorf("termination message path %q", c.TerminationMessagePath)
	}
}

func TestJobOptionsAndDefaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.MacOSMachine, *v1alpha1.MacOSIdentity, *v1alpha1.MacOSMachineClass, *JobOptions)
		check  func(*testing.T, *batchv1.Job)
	}{
		{"class defaults: iMacPro1,1 at 1920x1080", func(_ *v1alpha1.MacOSMachine, _ *v1alpha1.MacOSIdentity, c *v1alpha1.MacOSMachineClass, _ *JobOptions) {
			c.Spec.SMBIOSModel, c.Spec.Display = "", v1alpha1.DisplaySpec{}
		}, func(t *testing.T, j *batchv1.Job) {
			args := j.Spec.Template.Spec.Containers[0].Args
			if !slices.Contains(args, "--width=1920") || !slices.Contains(args, "--height=1080") {
				t.Errorf("args %q", args)
			}
		}},
		{"qcow2, own limits and secret key", func(_ *v1alpha1.MacOSMachine, _ *v1alpha1.MacOSIdentity, _ *v1alpha1.MacOSMachineClass, o *JobOptions) {
			o.Format, o.BackoffLimit, o.ActiveDeadlineSeconds, o.TokenSecretKey = "qcow2", ptr.To(int32(5)), ptr.To(int64(60)), "agent-token"
		}, func(t *testing.T, j *batchv1.Job) {
			c := j.Spec.Template.Spec.Containers[0]
			if !slices.Contains(c.Args, "--format=qcow2") || *j.Spec.BackoffLimit != 5 || *j.Spec.ActiveDeadlineSeconds != 60 || c.Env[0].ValueFrom.SecretKeyRef.Key != "agent-token" {
				t.Errorf("job %+v", j.Spec)
			}
		}},
		{"long machine name", func(m *v1alpha1.MacOSMachine, i *v1alpha1.MacOSIdentity, _ *v1alpha1.MacOSMachineClass, _ *JobOptions) {
			m.Name = strings.Repeat("a", 120) + "-b"
			i.Status.Allocation.MachineName = m.Name
		}, func(t *testing.T, j *batchv1.Job) {
			if errs := validation.IsDNS1123Label(j.Name); len(errs) > 0 {
				t.Errorf("name %q: %v", j.Name, errs)
			}
			for _, labels := range []map[string]string{j.Labels, j.Spec.Template.Labels} {
				for k, v := range labels {
					if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
						t.Errorf("label %s=%q: %v", k, v, errs)
					}
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, i, c := objects()
			o := options()
			tc.mutate(m, i, c, &o)
			j, err := Job(m, i, c, o)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, j)
		})
	}
}

func TestJobRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.MacOSMachine, *v1alpha1.MacOSIdentity, *v1alpha1.MacOSMachineClass, *JobOptions)
		want   string
	}{
		{"no image", func(_ *v1alpha1.MacOSMachine, _ *v1alpha1.MacOSIdentity, _ *v1alpha1.MacOSMachineClass, o *JobOptions) {
			o.Image = ""
		}, "builder image"},
		{"no PVC", func(_ *v1alpha1.MacOSMachine, _ *v1alpha1.MacOSIdentity, _ *v1alpha1.MacOSMachineClass, o *JobOptions) {
			o.OutputPVCName = ""
		}, "PersistentVolumeClaim"},
		{"no secret", func(_ *v1alpha1.MacOSMachine, _ *v1alpha1.MacOSIdentity, _ *v1alpha1.MacOSMachineClass, o *JobOptions) {
			o.TokenSecretName = ""
		}, "token Secret"},
		{"no identity secret", func(_ *v1alpha1.MacOSMachine, _ *v1alpha1.MacOSIdentity, _ *v1alpha1.MacOSMachineClass, o *JobOptions) {
			o.IdentitySecretName = ""
		}, "identity Secret"},
		{"bad format", func(_ *v1alpha1.MacOSMachine, _ *v1alpha1.MacOSIdentity, _ *v1alpha1.MacOSMachineClass, o *JobOptions) {
			o.Format = "vmdk"
		}, "format"},
		{"other class", func(m *v1alpha1.MacOSMachine, _ *v1alpha1.MacOSIdentity, _ *v1alpha1.MacOSMachineClass, _ *JobOptions) {
			m.Spec.ClassName = "other"
		}, "not the machine's class"},
		{"identity not held", func(m *v1alpha1.MacOSMachine, _ *v1alpha1.MacOSIdentity, _ *v1alpha1.MacOSMachineClass, _ *JobOptions) {
			m.Status.IdentityRef = nil
		}, "not the one the machine holds"},
		{"identity allocated elsewhere", func(_ *v1alpha1.MacOSMachine, i *v1alpha1.MacOSIdentity, _ *v1alpha1.MacOSMachineClass, _ *JobOptions) {
			i.Status.Allocation.MachineUID = "other"
		}, "allocated to"},
		{"model mismatch", func(_ *v1alpha1.MacOSMachine, _ *v1alpha1.MacOSIdentity, c *v1alpha1.MacOSMachineClass, _ *JobOptions) {
			c.Spec.SMBIOSModel = "MacPro7,1"
		}, "SMBIOS model"},
		{"empty ROM", func(_ *v1alpha1.MacOSMachine, i *v1alpha1.MacOSIdentity, _ *v1alpha1.MacOSMachineClass, _ *JobOptions) {
			i.Spec.ROM = ""
		}, "rom is empty"},
		{"machine without uid", func(m *v1alpha1.MacOSMachine, _ *v1alpha1.MacOSIdentity, _ *v1alpha1.MacOSMachineClass, _ *JobOptions) {
			m.UID = ""
		}, "uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, i, c := objects()
			o := options()
			tc.mutate(m, i, c, &o)
			if _, err := Job(m, i, c, o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := Job(nil, nil, nil, options()); err == nil {
		t.Error("nil objects accepted")
	}
}

func TestJobNameDeterministic(t *testing.T) {
	m, i, c := objects()
	a := JobName(m, i, c)
	if a != JobName(m, i, c) {
		t.Fatal("JobName is not deterministic")
	}
	c.Spec.Display.Width = 1280
	if JobName(m, i, c) == a {
		t.Error("a different display gives the same Job name")
	}
	m2, i2, c2 := objects()
	i2.Spec.SerialNumber = "C02FX08QHX87"
	if JobName(m2, i2, c2) == a {
		t.Error("a different identity gives the same Job name")
	}
}

// The Job and its pod are readable by everyone Kubernetes' view role
// admits to the namespace: no identity value may appear anywhere in them,
// in any spelling. The builder gets them from the identity Secret.
func TestJobShowsNoIdentityValue(t *testing.T) {
	m, id, c := objects()
	job, err := Job(m, id, c, options())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	seen := strings.ToLower(string(b))
	s := id.Spec
	for _, v := range []string{s.SerialNumber, s.BoardSerialNumber, s.SystemUUID, strings.ReplaceAll(s.SystemUUID, "-", ""),
		s.MACAddress, strings.ReplaceAll(s.MACAddress, ":", ""), strings.ReplaceAll(s.MACAddress, ":", "-"), s.ROM} {
		if strings.Contains(seen, strings.ToLower(v)) {
			t.Errorf("the Job shows the identity value %s", v)
		}
	}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.Value != "" && e.Name != "TMPDIR" {
			t.Errorf("plain environment variable %s: values travel in Secrets", e.Name)
		}
	}
}

func TestIdentitySecretData(t *testing.T) {
	_, id, _ := objects()
	got := IdentitySecretData(id)
	want := map[string]string{"serialNumber": "C02CK029HX87", "boardSerialNumber": "C02015700QXJG36CB",
		"systemUUID": "4B408A88-4062-4532-9AA1-3D8A3549327F", "macAddress": "34:31:8F:D3:88:E4", "rom": "34318FD388E4"}
	if len(got) != len(want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("key %s = %q, want %q", k, got[k], v)
		}
		if errs := validation.IsConfigMapKey(k); len(errs) > 0 {
			t.Errorf("key %s: %v", k, errs)
		}
	}
}
