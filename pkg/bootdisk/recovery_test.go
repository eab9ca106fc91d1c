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
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

func recoveryImage(name string, boardID string) *v1alpha1.MacOSImage {
	return &v1alpha1.MacOSImage{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "7d0c4e52-6a55-4f7e-a3e1-0f6f4a3c9b21"},
		Spec: v1alpha1.MacOSImageSpec{
			Release: "sonoma",
			Source: v1alpha1.ImageSource{
				DataSource: &v1alpha1.NamespacedObjectReference{Namespace: "golden", Name: "sonoma"},
				Recovery:   &v1alpha1.RecoverySource{Release: "sonoma", BoardID: boardID},
			},
		},
	}
}

func recoveryOptions() RecoveryJobOptions {
	return RecoveryJobOptions{Image: "registry.example/dockerios/bootdisk@sha256:0123", OutputPVCName: "sonoma-recovery",
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}}, Attempt: 3}
}

func TestRecoveryJob(t *testing.T) {
	img := recoveryImage("sonoma", "")
	job, err := RecoveryJob(img, "golden", recoveryOptions())
	if err != nil {
		t.Fatal(err)
	}
	if job.Name != "sonoma-recovery-3" || job.Name != RecoveryJobName(img, 3) || job.Namespace != "golden" {
		t.Errorf("job %s/%s", job.Namespace, job.Name)
	}
	wantLabels := map[string]string{
		"app.kubernetes.io/name": "dockerios", "app.kubernetes.io/component": "recovery",
		"app.kubernetes.io/managed-by": "dockerios-controller", "dockerios.io/image": "sonoma",
	}
	if !equalMaps(job.Labels, wantLabels) || !equalMaps(job.Spec.Template.Labels, wantLabels) {
		t.Errorf("labels %v, pod labels %v", job.Labels, job.Spec.Template.Labels)
	}
	if o := job.OwnerReferences; len(o) != 1 || o[0].Kind != "MacOSImage" || o[0].APIVersion != "dockerios.io/v1alpha1" ||
		o[0].Name != "sonoma" || o[0].UID != img.UID || !ptr.Deref(o[0].Controller, false) {
		t.Errorf("owner references %+v", o)
	}
	s := job.Spec
	if ptr.Deref(s.BackoffLimit, -1) != 0 || s.TTLSecondsAfterFinished != nil || ptr.Deref(s.ActiveDeadlineSeconds, 0) != DefaultRecoveryActiveDeadlineSeconds {
		t.Errorf("backoffLimit %v, ttl %v, deadline %v", s.BackoffLimit, s.TTLSecondsAfterFinished, s.ActiveDeadlineSeconds)
	}
	p := s.Template.Spec
	if p.RestartPolicy != corev1.RestartPolicyNever || ptr.Deref(p.AutomountServiceAccountToken, true) ||
		!slices.Equal(p.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "pull"}}) {
		t.Errorf("pod spec %+v", p)
	}
	sc := p.SecurityContext
	if !ptr.Deref(sc.RunAsNonRoot, false) || ptr.Deref(sc.RunAsUser, 0) != 65532 || ptr.Deref(sc.FSGroup, 0) != 65532 {
		t.Errorf("pod security context %+v", sc)
	}
	if len(p.Containers) != 1 {
		t.Fatalf("containers %v", p.Containers)
	}
	c := p.Containers[0]
	wantArgs := []string{"recovery", "--release", "sonoma", "--output-dir", "/output", "--scratch-dir", "/scratch"}
	if c.Name != "recovery" || c.Image != recoveryOptions().Image || !slices.Equal(c.Args, wantArgs) || len(c.Command) != 0 {
		t.Errorf("container %s %s %v %v", c.Name, c.Image, c.Command, c.Args)
	}
	if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("termination message policy %q", c.TerminationMessagePolicy)
	}
	if c.SecurityContext == nil || !ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false) ||
		ptr.Deref(c.SecurityContext.AllowPrivilegeEscalation, true) || !slices.Equal(c.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context %+v", c.SecurityContext)
	}
	if len(c.Env) != 1 || c.Env[0] != (corev1.EnvVar{Name: "TMPDIR", Value: "/scratch"}) {
		t.Errorf("env %v", c.Env)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if !equalMaps(mounts, map[string]string{"output": "/output", "scratch": "/scratch"}) {
		t.Errorf("mounts %v", c.VolumeMounts)
	}
	if len(p.Volumes) != 2 {
		t.Fatalf("volumes %+v", p.Volumes)
	}
	for _, v := range p.Volumes {
		switch v.Name {
		case "output":
			if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "sonoma-recovery" || v.PersistentVolumeClaim.ReadOnly {
				t.Errorf("output volume %+v", v)
			}
		case "scratch":
			if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != "16Gi" {
				t.Errorf("scratch volume %+v", v)
			}
		default:
			t.Errorf("volume %+v", v)
		}
	}

	// A board-id override reaches the command line.
	job, err = RecoveryJob(recoveryImage("sonoma", "Mac-7BA5B2D9E42DDD94"), "golden", recoveryOptions())
	if err != nil {
		t.Fatal(err)
	}
	wantArgs = []string{"recovery", "--release", "sonoma", "--board-id", "Mac-7BA5B2D9E42DDD94", "--output-dir", "/output", "--scratch-dir", "/scratch"}
	if got := job.Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, wantArgs) {
		t.Errorf("args %v, want %v", got, wantArgs)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestRecoveryJobName(t *testing.T) {
	long := strings.Repeat("a", 100) + "." + strings.Repeat("b", 152) // 253: the longest name
	names := map[string]bool{}
	for _, name := range []string{"sonoma", "sonoma.14", "sonoma-14", "Sonoma", long, long[:200], strings.Repeat("x", 63)} {
		img := recoveryImage(name, "")
		for _, attempt := range []int32{0, 1, 2147483647} {
			n := RecoveryJobName(img, attempt)
			if errs := validation.IsDNS1123Label(n); len(errs) != 0 {
				t.Errorf("%q attempt %d: %q: %v", name, attempt, n, errs)
			}
			if RecoveryJobName(img, attempt) != n {
				t.Errorf("%q: not deterministic", name)
			}
			if names[n] {
				t.Errorf("%q attempt %d: %q given twice", name, attempt, n)
			}
			names[n] = true
			if !strings.HasSuffix(n, "-recovery-"+map[int32]string{0: "0", 1: "1", 2147483647: "2147483647"}[attempt]) {
				t.Errorf("%q: no attempt in %q", name, n)
			}
			job, err := RecoveryJob(img, "golden", RecoveryJobOptions{Image: "i", OutputPVCName: "p", Attempt: attempt})
			if err != nil {
				t.Fatal(err)
			}
			if errs := validation.IsValidLabelValue(job.Labels[ImageLabel]); len(errs) != 0 {
				t.Errorf("%q: image label %q: %v", name, job.Labels[ImageLabel], errs)
			}
		}
	}
	if n := RecoveryJobName(recoveryImage("sonoma.14", ""), 1); !strings.HasPrefix(n, "sonoma-14-") || n == "sonoma-14-recovery-1" {
		t.Errorf("dotted name: %q", n)
	}
	if n := RecoveryJobName(recoveryImage(long, ""), 1); !strings.HasPrefix(n, "aaaa") {
		t.Errorf("long name: %q", n)
	}
}

func TestRecoveryJobRejects(t *testing.T) {
	noRecovery := recoveryImage("sonoma", "")
	noRecovery.Spec.Source.Recovery = nil
	noRelease := recoveryImage("sonoma", "")
	noRelease.Spec.Source.Recovery.Release = ""
	noUID := recoveryImage("sonoma", "")
	noUID.UID = ""
	opts := func(f func(*RecoveryJobOptions)) RecoveryJobOptions { o := recoveryOptions(); f(&o); return o }
	for name, c := range map[string]struct {
		img  *v1alpha1.MacOSImage
		ns   string
		opts RecoveryJobOptions
		want string
	}{
		"nil image":        {nil, "golden", recoveryOptions(), "image is required"},
		"no recovery":      {noRecovery, "golden", recoveryOptions(), "no spec.source.recovery.release"},
		"no release":       {noRelease, "golden", recoveryOptions(), "no spec.source.recovery.release"},
		"no uid":           {noUID, "golden", recoveryOptions(), "needs a name and a uid"},
		"no namespace":     {recoveryImage("sonoma", ""), "", recoveryOptions(), "namespace is empty"},
		"no image":         {recoveryImage("sonoma", ""), "golden", opts(func(o *RecoveryJobOptions) { o.Image = "" }), "builder image is empty"},
		"no PVC":           {recoveryImage("sonoma", ""), "golden", opts(func(o *RecoveryJobOptions) { o.OutputPVCName = "" }), "PersistentVolumeClaim is empty"},
		"negative attempt": {recoveryImage("sonoma", ""), "golden", opts(func(o *RecoveryJobOptions) { o.Attempt = -1 }), "attempt -1 is negative"},
	} {
		job, err := RecoveryJob(c.img, c.ns, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) || job != nil {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// recoveryGolden holds result lines the real `bootdisk recovery` printed in
// its tests (bootdisk/cmd/bootdisk/recovery_test.go writes and checks it):
// data, not code, so the licence boundary stands.
const recoveryGolden = "../../bootdisk/cmd/bootdisk/testdata/recovery-results.txt"

func TestParseRecoveryResultOfTheBuilder(t *testing.T) {
	b, err := os.ReadFile(recoveryGolden)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]RecoveryResult{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, line, _ := strings.Cut(l, "\t")
		r, err := ParseRecoveryResult(line)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got[name] = r
	}
	c := got["converted"]
	if c.Reason != RecoveryConverted || c.Release != "ventura" || c.BoardID != "Mac-4B682C642B45593E" || c.Product != "041-88800" ||
		len(c.ImageSHA256) != 64 || c.RawBytes != 6<<20 || c.Message == "" {
		t.Errorf("converted: %+v", c)
	}
	if r := got["service-refused"]; r.Reason != RecoveryServiceRefused || !strings.Contains(r.Message, "HTTP Error 403") || r.ImageSHA256 != "" {
		t.Errorf("service-refused: %+v", r)
	}
	if r := got["checksum-mismatch"]; r.Reason != RecoveryChecksumMismatch || !strings.Contains(r.Message, "Image verification failed") {
		t.Errorf("checksum-mismatch: %+v", r)
	}
	if r := got["invalid"]; r.Reason != RecoveryFailed || !strings.Contains(r.Message, "unknown release") {
		t.Errorf("invalid: %+v", r)
	}
}

func TestParseRecoveryResult(t *testing.T) {
	ok := `{"reason":"Converted","release":"sonoma","boardID":"Mac-827FAC58A8FDFA22","product":"041-00014","imageSHA256":"` +
		strings.Repeat("ab", 32) + `","rawBytes":2097152,"message":"done"}`
	// FallbackToLogsOnError: the log's tail, whose last line is the result.
	r, err := ParseRecoveryResult("fetch-macOS-v2.py: Image verification complete!\nprogress 5 5\n" + ok + "\n")
	if err != nil || r.Reason != RecoveryConverted || r.RawBytes != 2097152 || r.Product != "041-00014" {
		t.Errorf("%+v %v", r, err)
	}
	for name, msg := range map[string]string{
		"empty":                  "",
		"not JSON":               "bootdisk: something",
		"unknown reason":         `{"reason":"Done","message":"x"}`,
		"no reason":              `{"message":"x"}`,
		"converted without sha":  `{"reason":"Converted","rawBytes":5,"message":"x"}`,
		"converted without size": `{"reason":"Converted","imageSHA256":"` + strings.Repeat("ab", 32) + `","message":"x"}`,
		"result not last":        ok + "\nprogress 1 2\n",
	} {
		if r, err := ParseRecoveryResult(msg); err == nil {
			t.Errorf("%s: parsed %+v", name, r)
		}
	}
}

func TestParseRecoveryProgress(t *testing.T) {
	for name, c := range map[string]struct {
		tail        string
		done, total int64
		ok          bool
	}{
		"last line":            {"progress 1 10\nfetch-macOS-v2.py: x\nprogress 7 10\n", 7, 10, true},
		"lines after it":       {"progress 7 10\nfetch-macOS-v2.py: Download complete!\n", 7, 10, true},
		"unterminated ignored": {"progress 7 100\nprogress 9 10", 7, 100, true}, // "progress 9 10" may be "progress 9 100" half written
		"cut first line":       {"ress 9 10\n", 0, 0, false},
		"none":                 {"fetch-macOS-v2.py: Downloading 041-1...\n", 0, 0, false},
		"empty":                {"", 0, 0, false},
		"CRLF":                 {"progress 3 4\r\n", 3, 4, true},
		"done beyond total":    {"progress 2 4\nprogress 5 4\n", 2, 4, true},
		"overflow":             {"progress 99999999999999999999 1\n", 0, 0, false},
		"prefixed":             {"x progress 1 2\n", 0, 0, false},
	} {
		d, tot, ok := ParseRecoveryProgress([]byte(c.tail))
		if d != c.done || tot != c.total || ok != c.ok {
			t.Errorf("%s: %d %d %v, want %d %d %v", name, d, tot, ok, c.done, c.total, c.ok)
		}
	}
}
