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

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	controllerimage "github.com/dockerios/dockerios/pkg/controller/image"
	"github.com/dockerios/dockerios/pkg/controller/machine"
)

// recoveryImage is image sonoma, made from Apple's recovery service, its
// recovery image fetched.
func recoveryImage() *v1alpha1.MacOSImage {
	img := &v1alpha1.MacOSImage{ObjectMeta: metav1.ObjectMeta{Name: "sonoma", ResourceVersion: "7"}}
	img.Spec.Release = "sonoma"
	img.Spec.Source.DataSource = &v1alpha1.NamespacedObjectReference{Namespace: "images", Name: "sonoma"}
	img.Spec.Source.Recovery = &v1alpha1.RecoverySource{Release: "sonoma"}
	img.Status.Conditions = []metav1.Condition{{Type: imageRecovery, Status: metav1.ConditionTrue, Reason: "Fetched", Message: "verified"}}
	return img
}

// session is an install session of image sonoma, its agent answering.
func session(name string) *v1alpha1.MacOSMachine {
	m := &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: v1alpha1.MacOSMachineSpec{ClassName: "standard", ImageName: "sonoma", Purpose: v1alpha1.MachinePurposeInstall}}
	m.Status.Agent = &v1alpha1.AgentReport{Stage: "Ready", OSVersion: "14.6.1"}
	return m
}

func TestImageInstall(t *testing.T) {
	plain := &v1alpha1.MacOSImage{ObjectMeta: metav1.ObjectMeta{Name: "ventura"}}
	plain.Spec.Release = "13.6"
	plain.Spec.Source.PVC = &v1alpha1.NamespacedObjectReference{Namespace: "images", Name: "ventura"}
	for _, tc := range []struct {
		name   string
		args   []string
		stdout []string
		err    string
		// made is the session made, "" none.
		made string
	}{
		{name: "a session of the image, named after it",
			args: []string{"sonoma", "--class", "standard"}, made: "sonoma-install-x7k2p",
			stdout: []string{
				"macosmachine.dockerios.io/sonoma-install-x7k2p created: an install session of MacOSImage sonoma (release sonoma), class standard\n",
				"kubectl get mm sonoma-install-x7k2p -n demo -w",
				"virtctl vnc sonoma-install-x7k2p -n demo",
				"docs/reference/agent.md",
				"kubectl dockerios image promote sonoma-install-x7k2p --image sonoma -n demo --wait",
			}},
		{name: "--name", args: []string{"sonoma", "--class", "standard", "--name", "golden-1"}, made: "golden-1",
			stdout: []string{"macosmachine.dockerios.io/golden-1 created", "virtctl vnc golden-1 -n demo"}},
		{name: "an image not made from the recovery service is refused", args: []string{"ventura", "--class", "standard"},
			err: "MacOSImage ventura has no spec.source.recovery: an install session boots the recovery image Apple's recovery service gives for the image's release"},
		{name: "an unknown image is refused", args: []string{"nope", "--class", "standard"},
			err: "MacOSImage nope not found"},
		{name: "--class is required", args: []string{"sonoma"}, err: "--class is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(recoveryImage(), plain)
			p := newPlugin(t, api)
			err := p.run(context.Background(), append([]string{"image", "install"}, tc.args...)...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(p.stdout.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, p.stdout)
				}
			}
			l, err := api.DockeriosV1alpha1().MacOSMachines(testNS).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.made == "" {
				if len(l.Items) != 0 {
					t.Errorf("a refused install made %d machines", len(l.Items))
				}
				return
			}
			if len(l.Items) != 1 || l.Items[0].Name != tc.made {
				t.Fatalf("machines %+v, want %s", l.Items, tc.made)
			}
			spec := l.Items[0].Spec
			if spec.Purpose != v1alpha1.MachinePurposeInstall || spec.ImageName != "sonoma" || spec.ClassName != "standard" || spec.PoolName != "" {
				t.Errorf("spec %+v", spec)
			}
		})
	}
}

// A machine name is a DNS label; an image name may hold dots.
func TestInstallPrefix(t *testing.T) {
	if got := installPrefix("sonoma.14-6"); got != "sonoma-14-6-install-" {
		t.Errorf("installPrefix: %q", got)
	}
}

// The plugin names the VM as the controller does, long names too.
func TestVMName_TheControllers(t *testing.T) {
	for _, name := range []string{"mac-1", strings.Repeat("a", 47), strings.Repeat("b", 48), "sonoma-14-6-with-a-long-name-install-x7k2p", strings.Repeat("c-", 31) + "d"} {
		m := &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if got, want := vmName(name), machine.NamesFor(m).VirtualMachine; got != want {
			t.Errorf("vmName(%q) = %q, the controller's %q", name, got, want)
		}
	}
}

func TestImagePromote_Refuses(t *testing.T) {
	workload := session("mac-1")
	workload.Spec.Purpose = ""
	otherImage := session("other-1")
	otherImage.Spec.ImageName = "ventura"
	busy := recoveryImage()
	busy.Spec.PromoteFrom = &v1alpha1.NamespacedObjectReference{Namespace: testNS, Name: "earlier"}
	busy.Status.Promotion = &v1alpha1.PromotionStatus{Machine: *busy.Spec.PromoteFrom, Phase: v1alpha1.PromotionCloning}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		args    []string
		err     string
	}{
		{"a workload machine", []runtime.Object{recoveryImage(), workload}, []string{"mac-1", "--image", "sonoma"},
			"MacOSMachine mac-1 is not an install session (spec.purpose Workload): only the disk of a session made with kubectl dockerios image install is promoted"},
		{"a session of another image", []runtime.Object{recoveryImage(), otherImage}, []string{"other-1", "--image", "sonoma"},
			"MacOSMachine other-1 is an install session of MacOSImage ventura, not of sonoma"},
		{"an unknown machine", []runtime.Object{recoveryImage()}, []string{"nope", "--image", "sonoma"}, "MacOSMachine nope not found in namespace demo"},
		{"an unknown image", []runtime.Object{session("s-1")}, []string{"s-1", "--image", "sonoma"}, "MacOSImage sonoma not found"},
		{"an image being promoted from another session", []runtime.Object{busy, session("s-1")}, []string{"s-1", "--image", "sonoma"},
			"MacOSImage sonoma is being promoted from MacOSMachine demo/earlier (phase Cloning); wait for it to end, or clear its spec.promoteFrom"},
		{"--image is required", []runtime.Object{session("s-1")}, []string{"s-1"}, "--image is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(tc.objects...)
			p := newPlugin(t, api)
			err := p.run(context.Background(), append([]string{"image", "promote"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			for _, a := range api.Actions() {
				if a.GetVerb() == "patch" {
					t.Errorf("a refused promote wrote %s", a.GetResource().Resource)
				}
			}
		})
	}
}

func TestImagePromote_SetsPromoteFrom(t *testing.T) {
	api := newFakeAPI(recoveryImage(), session("s-1"))
	var patch string
	api.PrependReactor("patch", "macosimages", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patch = string(a.(k8stesting.PatchAction).GetPatch())
		return false, nil, nil
	})
	p := newPlugin(t, api)
	if err := p.run(context.Background(), "image", "promote", "s-1", "--image", "sonoma"); err != nil {
		t.Fatal(err)
	}
	if want := `{"metadata":{"resourceVersion":"7"},"spec":{"promoteFrom":{"name":"s-1","namespace":"demo"}}}`; patch != want {
		t.Errorf("patch %s, want %s (conditioned on the image read)", patch, want)
	}
	img, err := api.DockeriosV1alpha1().MacOSImages().Get(context.Background(), "sonoma", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pf := img.Spec.PromoteFrom; pf == nil || *pf != (v1alpha1.NamespacedObjectReference{Namespace: testNS, Name: "s-1"}) {
		t.Errorf("promoteFrom %+v", pf)
	}
	if !strings.Contains(p.stdout.String(), "macosimage.dockerios.io/sonoma promoting from MacOSMachine demo/s-1") {
		t.Errorf("stdout:\n%s", p.stdout)
	}
	if p.stderr.String() != "" {
		t.Errorf("a session whose agent answered: no warning, got %q", p.stderr)
	}
}

func TestImagePromote_WarnsWhenTheAgentNeverAnswered(t *testing.T) {
	s := session("s-1")
	s.Status.Agent = nil
	p := newPlugin(t, newFakeAPI(recoveryImage(), s))
	if err := p.run(context.Background(), "image", "promote", "s-1", "--image", "sonoma"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.stderr.String(), "Warning: the agent of MacOSMachine s-1 has never answered") {
		t.Errorf("stderr: %q", p.stderr)
	}
}

// promotion is img with the controller's report of a promotion from s-1.
func promotion(img *v1alpha1.MacOSImage, phase v1alpha1.PromotionPhase, reason, msg string) *v1alpha1.MacOSImage {
	img = img.DeepCopy()
	img.Spec.PromoteFrom = &v1alpha1.NamespacedObjectReference{Namespace: testNS, Name: "s-1"}
	img.Status.Promotion = &v1alpha1.PromotionStatus{Machine: *img.Spec.PromoteFrom, Phase: phase}
	if phase == v1alpha1.PromotionSucceeded {
		img.Status.Promotion.VolumeName = "sonoma-golden-1"
		img.Status.MacOSVersion = "14.6.1"
	}
	meta.SetStatusCondition(&img.Status.Conditions, metav1.Condition{Type: imagePromoted, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
	return img
}

func TestImagePromote_WaitFollowsThePhases(t *testing.T) {
	for _, tc := range []struct {
		name   string
		last   *v1alpha1.MacOSImage
		stdout string
		err    string
		status int
	}{
		{name: "succeeded", last: promotion(recoveryImage(), v1alpha1.PromotionSucceeded, "Promoted", "done"),
			stdout: "MacOSImage sonoma (DataSource images/sonoma) now clones PersistentVolumeClaim images/sonoma-golden-1 (macOS 14.6.1): machines made from it from now on boot the promoted disk.\n"},
		{name: "failed", last: promotion(recoveryImage(), v1alpha1.PromotionFailed, "CloneFailed", "no space left on device"),
			err: "the promotion of MacOSImage sonoma from MacOSMachine demo/s-1 failed: CloneFailed: no space left on device", status: exitError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(recoveryImage(), session("s-1"))
			p := newPlugin(t, api)
			done := make(chan error, 1)
			go func() { done <- p.run(context.Background(), "image", "promote", "s-1", "--image", "sonoma", "--wait") }()
			api.awaitWatch(t, "macosimages")
			for _, img := range []*v1alpha1.MacOSImage{
				promotion(recoveryImage(), v1alpha1.PromotionStopping, "Stopping", "waiting for VirtualMachineInstance s-1 to stop"),
				promotion(recoveryImage(), v1alpha1.PromotionCloning, "Cloning", "DataVolume sonoma-golden-1 is cloning"),
				tc.last,
			} {
				if err := api.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource("macosimages"), img, ""); err != nil {
					t.Fatal(err)
				}
			}
			err := awaitPromote(t, done)
			var printed bytes.Buffer
			if got := exitStatus(&printed, err); got != tc.status {
				t.Errorf("status %d, want %d (%v)", got, tc.status, err)
			}
			if tc.err != "" && !strings.Contains(printed.String(), tc.err) {
				t.Errorf("error %q, want %q", printed.String(), tc.err)
			}
			wantProgress := "image sonoma: promotion Stopping (Stopping: waiting for VirtualMachineInstance s-1 to stop)\n" +
				"image sonoma: promotion Cloning (Cloning: DataVolume sonoma-golden-1 is cloning)\n"
			if !strings.HasPrefix(p.stderr.String(), wantProgress) {
				t.Errorf("progress:\n%s\nwant it to start with:\n%s", p.stderr, wantProgress)
			}
			if tc.stdout != "" && !strings.HasSuffix(p.stdout.String(), tc.stdout) {
				t.Errorf("stdout:\n%s\nwant it to end with:\n%s", p.stdout, tc.stdout)
			}
		})
	}
}

func TestImagePromote_WaitGivesUpAtTimeout(t *testing.T) {
	p := newPlugin(t, newFakeAPI(recoveryImage(), session("s-1")))
	err := p.run(context.Background(), "image", "promote", "s-1", "--image", "sonoma", "--wait", "--timeout", "200ms")
	var printed bytes.Buffer
	if got := exitStatus(&printed, err); got != exitTimeout {
		t.Errorf("status %d, want %d (%v)", got, exitTimeout, err)
	}
	if !strings.Contains(printed.String(), "timed out after 200ms waiting for MacOSImage sonoma's promotion from MacOSMachine demo/s-1") ||
		!strings.Contains(printed.String(), "the promotion goes on") {
		t.Errorf("error: %s", printed.String())
	}
}

func TestImageListAndGet(t *testing.T) {
	promoted := promotion(recoveryImage(), v1alpha1.PromotionSucceeded, "Promoted", "done")
	meta.SetStatusCondition(&promoted.Status.Conditions, metav1.Condition{Type: imageReady, Status: metav1.ConditionTrue, Reason: "SourceReady", Message: "ok"})
	p := newPlugin(t, newFakeAPI(promoted))
	if err := p.run(context.Background(), "image", "list"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"NAME", "RELEASE", "MACOS", "sonoma", "14.6.1", "DataSource images/sonoma, from recovery sonoma", "True", "Ready", "Succeeded (demo/s-1)"} {
		if !strings.Contains(p.stdout.String(), s) {
			t.Errorf("list lacks %q:\n%s", s, p.stdout)
		}
	}
	p = newPlugin(t, newFakeAPI(promoted))
	if err := p.run(context.Background(), "image", "get", "sonoma"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Image:", "sonoma", "macOS:", "14.6.1", "Promotion:", "from MacOSMachine demo/s-1: Succeeded", "Promoted:", "RecoveryReady:"} {
		if !strings.Contains(p.stdout.String(), s) {
			t.Errorf("get lacks %q:\n%s", s, p.stdout)
		}
	}
}

func TestImageCompletion(t *testing.T) {
	workload := session("mac-1")
	workload.Spec.Purpose = ""
	api := newFakeAPI(recoveryImage(), session("s-1"), session("s-2"), workload)
	got, _ := complete(t, newPlugin(t, api), "image", "promote", "")
	if strings.Join(got, " ") != "s-1 s-2" {
		t.Errorf("promote completes %v, want the install sessions", got)
	}
	got, _ = complete(t, newPlugin(t, api), "image", "promote", "s-1", "--image", "")
	if strings.Join(got, " ") != "sonoma" {
		t.Errorf("--image completes %v", got)
	}
	got, _ = complete(t, newPlugin(t, api), "image", "install", "")
	if strings.Join(got, " ") != "sonoma" {
		t.Errorf("install completes %v", got)
	}
}

// imagesAsTheAPIServer makes api answer a merge patch of an image as the
// apiserver does and the fake does not: a patch naming a resourceVersion
// other than the image's conflicts, every write moves the resourceVersion
// on, and one that changes the spec moves the generation on. It returns
// the patches made so far, in order.
func imagesAsTheAPIServer(t *testing.T, api *fakeAPI) func() []string {
	t.Helper()
	var (
		mu      sync.Mutex
		patches []string
	)
	gvr := v1alpha1.SchemeGroupVersion.WithResource("macosimages")
	api.PrependReactor("patch", "macosimages", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchAction)
		if pa.GetPatchType() != types.MergePatchType || pa.GetSubresource() != "" {
			return false, nil, nil
		}
		mu.Lock()
		patches = append(patches, string(pa.GetPatch()))
		mu.Unlock()
		obj, err := api.Tracker().Get(gvr, "", pa.GetName())
		if err != nil {
			return true, nil, err
		}
		old := obj.(*v1alpha1.MacOSImage)
		var pre struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(pa.GetPatch(), &pre); err != nil {
			return true, nil, err
		}
		if rv := pre.Metadata.ResourceVersion; rv != "" && rv != old.ResourceVersion {
			return true, nil, apierrors.NewConflict(v1alpha1.Resource("macosimages"), old.Name, errors.New("the object has been modified"))
		}
		oldJSON, err := json.Marshal(old)
		if err != nil {
			return true, nil, err
		}
		modified, err := jsonpatch.MergePatch(oldJSON, pa.GetPatch())
		if err != nil {
			return true, nil, err
		}
		img := &v1alpha1.MacOSImage{}
		if err := json.Unmarshal(modified, img); err != nil {
			return true, nil, err
		}
		img.ResourceVersion = nextRV(t, old.ResourceVersion)
		img.Generation = old.Generation
		if !equality.Semantic.DeepEqual(old.Spec, img.Spec) {
			img.Generation++
		}
		if err := api.Tracker().Update(gvr, img, ""); err != nil {
			return true, nil, err
		}
		return true, img.DeepCopy(), nil
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), patches...)
	}
}

func nextRV(t *testing.T, rv string) string {
	n, err := strconv.Atoi(rv)
	if err != nil {
		t.Errorf("resourceVersion %q", rv)
	}
	return strconv.Itoa(n + 1)
}

// controllerWrites is the image controller's pass: it reads the image and
// writes its status as change makes it.
func controllerWrites(t *testing.T, api *fakeAPI, change func(img *v1alpha1.MacOSImage)) {
	t.Helper()
	gvr := v1alpha1.SchemeGroupVersion.WithResource("macosimages")
	obj, err := api.Tracker().Get(gvr, "", "sonoma")
	if err != nil {
		t.Fatal(err)
	}
	img := obj.(*v1alpha1.MacOSImage).DeepCopy()
	change(img)
	img.ResourceVersion = nextRV(t, img.ResourceVersion)
	if err := api.Tracker().Update(gvr, img, ""); err != nil {
		t.Fatal(err)
	}
}

// promoting is a pass that took up the promotion from s-1 at the image's
// generation and found it in phase, cloning into volume ("" none).
func promoting(phase v1alpha1.PromotionPhase, reason, msg, volume string) func(img *v1alpha1.MacOSImage) {
	return func(img *v1alpha1.MacOSImage) {
		img.Status.ObservedGeneration = img.Generation
		img.Status.Promotion = &v1alpha1.PromotionStatus{Machine: v1alpha1.NamespacedObjectReference{Namespace: testNS, Name: "s-1"}, Phase: phase, VolumeName: volume}
		status := metav1.ConditionFalse
		if phase == v1alpha1.PromotionSucceeded {
			status = metav1.ConditionTrue
			img.Status.MacOSVersion = "14.6.1"
		}
		meta.SetStatusCondition(&img.Status.Conditions, metav1.Condition{Type: imagePromoted, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: img.Generation})
	}
}

// A pass of a controller that leaves an ended promotion as it was: only
// status.observedGeneration moves on.
func passLeavingThePromotion(img *v1alpha1.MacOSImage) {
	img.Status.ObservedGeneration = img.Generation
}

const (
	// s1UID is session s-1's; its golden volumes end in -5e551011.
	s1UID = "5e551011-aaaa-4bbb-8ccc-000000000001"
	// s1Volume is the golden volume of a promotion of s-1 into sonoma.
	s1Volume = "sonoma-5e551011"
	// earlierVolume is the golden volume of a promotion of an earlier
	// machine named s-1, since deleted.
	earlierVolume = "sonoma-0ld1d000"
)

// sessionS1 is install session s-1 as the apiserver holds it, its UID set.
func sessionS1() *v1alpha1.MacOSMachine {
	m := session("s-1")
	m.UID = s1UID
	return m
}

// endedImage is image sonoma at generation 4 whose status holds the end
// of an earlier promotion from a machine named s-1: its Promoted
// condition and status.observedGeneration at generation 4.
func endedImage(promoteFrom bool, phase v1alpha1.PromotionPhase, reason, msg, volume string) *v1alpha1.MacOSImage {
	img := recoveryImage()
	img.Generation = 4
	promoting(phase, reason, msg, volume)(img)
	if promoteFrom {
		img.Spec.PromoteFrom = &v1alpha1.NamespacedObjectReference{Namespace: testNS, Name: "s-1"}
	}
	return img
}

// promoteAndWait runs promote s-1 --wait against api, makes the
// controller's passes once the plugin watches, and returns promote's
// exit status and printed error.
func promoteAndWait(t *testing.T, api *fakeAPI, p *plugin, passes []func(*v1alpha1.MacOSImage)) (int, string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		done <- p.run(context.Background(), "image", "promote", "s-1", "--image", "sonoma", "--wait", "--timeout", "5s")
	}()
	api.awaitWatch(t, "macosimages")
	for _, pass := range passes {
		controllerWrites(t, api, pass)
	}
	var printed bytes.Buffer
	return exitStatus(&printed, awaitPromote(t, done)), printed.String()
}

// awaitPromote is what a promote --wait running in the background ended
// with.
func awaitPromote(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("promote --wait did not end")
		return nil
	}
}

// An earlier promotion's end, still in the status when promote patches
// the image, is not this promotion's: only a status the controller wrote
// at the generation the patch made is.
func TestImagePromote_WaitIgnoresAnEarlierPromotionsEnd(t *testing.T) {
	withdrawn := endedImage(false, v1alpha1.PromotionFailed, "Withdrawn", "spec.promoteFrom was cleared: the promotion of demo/s-1 stopped while Stopping", "")
	predecessor := endedImage(true, v1alpha1.PromotionSucceeded, "Promoted", "DataSource images/sonoma points at volume images/"+earlierVolume, earlierVolume)
	for _, tc := range []struct {
		name   string
		image  *v1alpha1.MacOSImage
		passes []func(*v1alpha1.MacOSImage)
		status int
		stdout string
		err    string
	}{
		{name: "a withdrawn promotion's Failed, then this one's Succeeded", image: withdrawn,
			passes: []func(*v1alpha1.MacOSImage){
				promoting(v1alpha1.PromotionStopping, "Stopping", "waiting for the guest of s-1", ""),
				promoting(v1alpha1.PromotionSucceeded, "Promoted", "done", s1Volume),
			},
			stdout: "now clones PersistentVolumeClaim images/" + s1Volume + " (macOS 14.6.1)"},
		{name: "a withdrawn promotion's Failed, then this one's Failed", image: withdrawn,
			passes: []func(*v1alpha1.MacOSImage){
				promoting(v1alpha1.PromotionCloning, "Cloning", "cloning", s1Volume),
				promoting(v1alpha1.PromotionFailed, "CloneFailed", "no space left on device", s1Volume),
			},
			status: exitError, err: "the promotion of MacOSImage sonoma from MacOSMachine demo/s-1 failed: CloneFailed: no space left on device"},
		{name: "a predecessor's Succeeded, a pass leaving it, then this one's Succeeded", image: predecessor,
			passes: []func(*v1alpha1.MacOSImage){
				passLeavingThePromotion,
				promoting(v1alpha1.PromotionCloning, "Cloning", "cloning", s1Volume),
				promoting(v1alpha1.PromotionSucceeded, "Promoted", "done", s1Volume),
			},
			stdout: "now clones PersistentVolumeClaim images/" + s1Volume + " (macOS 14.6.1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(tc.image.DeepCopy(), sessionS1())
			imagesAsTheAPIServer(t, api)
			p := newPlugin(t, api)
			status, printed := promoteAndWait(t, api, p, tc.passes)
			if status != tc.status {
				t.Errorf("status %d, want %d (%s)", status, tc.status, printed)
			}
			if tc.err != "" && !strings.Contains(printed, tc.err) {
				t.Errorf("error %q, want %q", printed, tc.err)
			}
			if tc.stdout != "" && !strings.Contains(p.stdout.String(), tc.stdout) {
				t.Errorf("stdout:\n%s\nwant %q", p.stdout, tc.stdout)
			}
			if s := p.stderr.String(); strings.Contains(s, "Withdrawn") || strings.Contains(s, earlierVolume) {
				t.Errorf("the earlier promotion's end was reported:\n%s", s)
			}
		})
	}
}

// A status whose golden volume is not one of this machine (its UID is in
// the volume's name) is a promotion of another machine of the same name.
func TestImagePromote_WaitIgnoresAnotherMachinesVolume(t *testing.T) {
	for _, tc := range []struct {
		name    string
		another func(*v1alpha1.MacOSImage)
	}{
		{"Succeeded", promoting(v1alpha1.PromotionSucceeded, "Promoted", "DataSource images/sonoma points at volume images/"+earlierVolume, earlierVolume)},
		{"Failed", promoting(v1alpha1.PromotionFailed, "CloneFailed", "cloning into "+earlierVolume+" failed", earlierVolume)},
		{"Cloning", promoting(v1alpha1.PromotionCloning, "Cloning", "cloning into "+earlierVolume, earlierVolume)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(recoveryImage(), sessionS1())
			imagesAsTheAPIServer(t, api)
			p := newPlugin(t, api)
			status, printed := promoteAndWait(t, api, p, []func(*v1alpha1.MacOSImage){
				tc.another,
				promoting(v1alpha1.PromotionCloning, "Cloning", "cloning", s1Volume),
				promoting(v1alpha1.PromotionSucceeded, "Promoted", "done", s1Volume),
			})
			if status != 0 {
				t.Errorf("status %d, want 0 (%s)", status, printed)
			}
			if want := "now clones PersistentVolumeClaim images/" + s1Volume; !strings.Contains(p.stdout.String(), want) {
				t.Errorf("stdout:\n%s\nwant %q", p.stdout, want)
			}
			if want := "image sonoma: promotion Cloning (Cloning: cloning)\nimage sonoma: promotion Succeeded\n"; p.stderr.String() != want {
				t.Errorf("progress:\n%s\nwant:\n%s", p.stderr, want)
			}
		})
	}
}

// Promoting again a machine spec.promoteFrom names already, its promotion
// ended, clears spec.promoteFrom and sets it again: the same value set
// once changes nothing, and the controller would never see the request.
func TestImagePromote_PromotingAgainClearsThenSets(t *testing.T) {
	const (
		clearPF = `{"metadata":{"resourceVersion":"7"},"spec":{"promoteFrom":null}}`
		set7    = `{"metadata":{"resourceVersion":"7"},"spec":{"promoteFrom":{"name":"s-1","namespace":"demo"}}}`
		set8    = `{"metadata":{"resourceVersion":"8"},"spec":{"promoteFrom":{"name":"s-1","namespace":"demo"}}}`
	)
	another := endedImage(false, v1alpha1.PromotionFailed, "CloneFailed", "no space", "")
	another.Spec.PromoteFrom = &v1alpha1.NamespacedObjectReference{Namespace: testNS, Name: "earlier"}
	another.Status.Promotion.Machine = *another.Spec.PromoteFrom
	for _, tc := range []struct {
		name    string
		image   *v1alpha1.MacOSImage
		patches []string
		// generation is the image's once promote is done.
		generation int64
	}{
		{"its promotion failed", endedImage(true, v1alpha1.PromotionFailed, "CloneFailed", "no space left on device", s1Volume),
			[]string{clearPF, set8}, 6},
		{"its promotion was refused", endedImage(true, v1alpha1.PromotionFailed, "AgentNotReporting", "the agent has not reported", ""),
			[]string{clearPF, set8}, 6},
		{"a predecessor of its name was promoted", endedImage(true, v1alpha1.PromotionSucceeded, "Promoted", "done", earlierVolume),
			[]string{clearPF, set8}, 6},
		{"its promotion is under way", endedImage(true, v1alpha1.PromotionCloning, "Cloning", "cloning", s1Volume),
			[]string{set7}, 4},
		{"its promotion is stopping its guest", endedImage(true, v1alpha1.PromotionStopping, "Stopping", "stopping", ""),
			[]string{set7}, 4},
		{"its promotion was withdrawn", endedImage(false, v1alpha1.PromotionFailed, "Withdrawn", "spec.promoteFrom was cleared", ""),
			[]string{set7}, 5},
		{"another machine's promotion ended", another, []string{set7}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(tc.image.DeepCopy(), sessionS1())
			patches := imagesAsTheAPIServer(t, api)
			p := newPlugin(t, api)
			if err := p.run(context.Background(), "image", "promote", "s-1", "--image", "sonoma"); err != nil {
				t.Fatal(err)
			}
			if got := patches(); strings.Join(got, "\n") != strings.Join(tc.patches, "\n") {
				t.Errorf("patches:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.patches, "\n"))
			}
			img, err := api.DockeriosV1alpha1().MacOSImages().Get(context.Background(), "sonoma", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pf := img.Spec.PromoteFrom; pf == nil || *pf != (v1alpha1.NamespacedObjectReference{Namespace: testNS, Name: "s-1"}) {
				t.Errorf("promoteFrom %+v", pf)
			}
			if img.Generation != tc.generation {
				t.Errorf("generation %d, want %d", img.Generation, tc.generation)
			}
		})
	}
}

// Clearing spec.promoteFrom, then failing to set it again, says so.
func TestImagePromote_PromotingAgainSaysWhenTheSetFails(t *testing.T) {
	api := newFakeAPI(endedImage(true, v1alpha1.PromotionFailed, "CloneFailed", "no space", ""), sessionS1())
	imagesAsTheAPIServer(t, api)
	// Someone writes the image between the two patches.
	api.PrependReactor("patch", "macosimages", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if strings.Contains(string(a.(k8stesting.PatchAction).GetPatch()), `"promoteFrom":{`) {
			controllerWrites(t, api, passLeavingThePromotion)
		}
		return false, nil, nil
	})
	p := newPlugin(t, api)
	err := p.run(context.Background(), "image", "promote", "s-1", "--image", "sonoma")
	if err == nil || !strings.Contains(err.Error(), "MacOSImage sonoma's spec.promoteFrom was cleared to promote MacOSMachine demo/s-1 again, but setting it failed (run promote again)") ||
		!apierrors.IsConflict(err) {
		t.Fatalf("error %v", err)
	}
}

// The plugin knows a golden volume of a machine as the controller names it.
func TestGoldenSuffix_TheControllers(t *testing.T) {
	img := &v1alpha1.MacOSImage{ObjectMeta: metav1.ObjectMeta{Name: "sonoma"}}
	for _, uid := range []types.UID{s1UID, "0123abcd", "ab-cd-ef-01-23-45", types.UID(strings.Repeat("f", 40))} {
		m := &v1alpha1.MacOSMachine{ObjectMeta: metav1.ObjectMeta{Name: "s-1", UID: uid}}
		if v := controllerimage.GoldenVolumeName(img, m); !strings.HasSuffix(v, goldenSuffix(uid)) || len(goldenSuffix(uid)) != 9 {
			t.Errorf("goldenSuffix(%q) = %q; the controller's volume %q", uid, goldenSuffix(uid), v)
		}
	}
	if goldenSuffix("") != "" {
		t.Errorf("no UID: %q", goldenSuffix(""))
	}
}
