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
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

func TestRelease(t *testing.T) {
	lost := bound(pendingClaim("lost-1", "warm"), "warm-gone")
	lost.Status.Phase = v1alpha1.ClaimLost
	for _, tc := range []struct {
		name       string
		args       []string
		stdout     string
		errors     string // as main prints them
		remain     []string
		wantStatus int
	}{
		{
			name:   "a bound claim: its machine is torn down",
			args:   []string{"build-1"},
			stdout: "macosmachineclaim.dockerios.io/build-1 released: MacOSMachine warm-abc12 is torn down\n",
			remain: []string{"build-2", "lost-1"},
		},
		{
			name: "several, a waiting and a Lost one among them",
			args: []string{"build-2", "lost-1", "build-1"},
			stdout: "macosmachineclaim.dockerios.io/build-2 released: it was not bound to a machine\n" +
				"macosmachineclaim.dockerios.io/lost-1 released: it was Lost, its machine already gone\n" +
				"macosmachineclaim.dockerios.io/build-1 released: MacOSMachine warm-abc12 is torn down\n",
		},
		{
			name:       "a claim that does not exist is an error naming it; the others are released",
			args:       []string{"nope", "build-1", "nada"},
			stdout:     "macosmachineclaim.dockerios.io/build-1 released: MacOSMachine warm-abc12 is torn down\n",
			errors:     "error: MacOSMachineClaim nope not found in namespace demo\nerror: MacOSMachineClaim nada not found in namespace demo\n",
			remain:     []string{"build-2", "lost-1"},
			wantStatus: exitError,
		},
		{
			name:   "-o name",
			args:   []string{"build-1", "-o", "name"},
			stdout: "macosmachineclaim.dockerios.io/build-1\n",
			remain: []string{"build-2", "lost-1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(bound(pendingClaim("build-1", "warm"), "warm-abc12"), pendingClaim("build-2", "warm"), lost)
			p := newPlugin(t, api)
			err := p.run(context.Background(), append([]string{"release"}, tc.args...)...)
			var printed bytes.Buffer
			if status := exitStatus(&printed, err); status != tc.wantStatus {
				t.Errorf("status %d, want %d (%v)", status, tc.wantStatus, err)
			}
			if printed.String() != tc.errors {
				t.Errorf("errors:\n%s\nwant:\n%s", printed.String(), tc.errors)
			}
			if p.stdout.String() != tc.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", p.stdout, tc.stdout)
			}
			l, err := api.DockeriosV1alpha1().MacOSMachineClaims(testNS).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var remain []string
			for _, c := range l.Items {
				remain = append(remain, c.Name)
			}
			slices.Sort(remain)
			if !slices.Equal(remain, tc.remain) {
				t.Errorf("claims left %v, want %v", remain, tc.remain)
			}
		})
	}
}

// Release deletes the claim it read, by UID: a claim deleted and made again
// under the name by someone else meanwhile is theirs, and stays.
func TestRelease_DeletesTheClaimItRead(t *testing.T) {
	api := newFakeAPI(pendingClaim("build-1", "warm"))
	var preconditions *metav1.Preconditions
	api.PrependReactor("delete", "macosmachineclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		preconditions = a.(k8stesting.DeleteActionImpl).DeleteOptions.Preconditions
		return true, nil, apierrors.NewConflict(v1alpha1.Resource("macosmachineclaims"), "build-1", nil)
	})
	p := newPlugin(t, api)
	err := p.run(context.Background(), "release", "build-1")
	if preconditions == nil || preconditions.UID == nil || *preconditions.UID != "uid-build-1" {
		t.Errorf("deleted with preconditions %+v, want the UID read", preconditions)
	}
	if err == nil || p.stdout.String() != "" {
		t.Errorf("a refused delete: error %v, stdout %q", err, p.stdout)
	}
}

func TestRelease_RefusesOtherOutputs(t *testing.T) {
	api := newFakeAPI(pendingClaim("build-1", "warm"))
	p := newPlugin(t, api)
	if err := p.run(context.Background(), "release", "build-1", "-o", "json"); err == nil {
		t.Error("release -o json: no error")
	}
	if _, err := api.DockeriosV1alpha1().MacOSMachineClaims(testNS).Get(context.Background(), "build-1", metav1.GetOptions{}); err != nil {
		t.Errorf("a refused flag released the claim: %v", err)
	}
}
