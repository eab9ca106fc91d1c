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
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// server plays the list and watch calls of one kind: each call takes the
// next scripted answer, and records the options it was made with.
type server struct {
	mu      sync.Mutex
	lists   []func() (runtime.Object, error)
	watches []func() (watch.Interface, error)
	calls   []string
}

func (s *server) listWatch() listWatch {
	return listWatch{
		list: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.calls = append(s.calls, "list")
			if len(s.lists) == 0 {
				return nil, apierrors.NewForbidden(v1alpha1.Resource("macosmachineclaims"), "", errors.New("script ended"))
			}
			next := s.lists[0]
			s.lists = s.lists[1:]
			return next()
		},
		watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.calls = append(s.calls, "watch@"+o.ResourceVersion)
			if len(s.watches) == 0 {
				return nil, apierrors.NewForbidden(v1alpha1.Resource("macosmachineclaims"), "", errors.New("script ended"))
			}
			next := s.watches[0]
			s.watches = s.watches[1:]
			return next()
		},
	}
}

func (s *server) callLog() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.calls, " ")
}

func claimAt(name, rv, phase string) *v1alpha1.MacOSMachineClaim {
	return &v1alpha1.MacOSMachineClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, ResourceVersion: rv},
		Status: v1alpha1.MacOSMachineClaimStatus{Phase: v1alpha1.MacOSMachineClaimPhase(phase)}}
}

func listAt(rv string, items ...*v1alpha1.MacOSMachineClaim) func() (runtime.Object, error) {
	return func() (runtime.Object, error) {
		l := &v1alpha1.MacOSMachineClaimList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
		for _, c := range items {
			l.Items = append(l.Items, *c)
		}
		return l, nil
	}
}

// events is a watch that sends evs, then ends (closed) or stays open.
func events(end bool, evs ...watch.Event) func() (watch.Interface, error) {
	return func() (watch.Interface, error) {
		ch := make(chan watch.Event, len(evs))
		for _, e := range evs {
			ch <- e
		}
		if end {
			close(ch)
		}
		return watch.NewProxyWatcher(ch), nil
	}
}

func expired() watch.Event {
	status := apierrors.NewResourceExpired("too old resource version").ErrStatus
	return watch.Event{Type: watch.Error, Object: &status}
}

// describe says what a change was, as "name@rv phase", "-name" for a
// deletion, or "error: ...".
func describe(c change) string {
	if c.err != nil {
		return "error: " + c.err.Error()
	}
	cl := c.obj.(*v1alpha1.MacOSMachineClaim)
	if c.deleted {
		return "-" + cl.Name
	}
	return fmt.Sprintf("%s@%s %s", cl.Name, cl.ResourceVersion, cl.Status.Phase)
}

// collect follows s until n changes came, or the stream ended.
func collect(t *testing.T, s *server, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := make(chan change)
	go follow(ctx, s.listWatch(), out)
	var got []string
	for len(got) < n {
		select {
		case c := <-out:
			got = append(got, describe(c))
			if c.err != nil {
				return got
			}
		case <-ctx.Done():
			t.Fatalf("only %d changes: %v", len(got), got)
		}
	}
	return got
}

func TestFollow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		server  *server
		want    []string
		wantLog string
	}{
		{
			name: "lists, then watches from the list's resourceVersion",
			server: &server{
				lists:   []func() (runtime.Object, error){listAt("10", claimAt("a", "9", "Pending"))},
				watches: []func() (watch.Interface, error){events(false, watch.Event{Type: watch.Modified, Object: claimAt("a", "11", "Bound")})},
			},
			want:    []string{"a@9 Pending", "a@11 Bound"},
			wantLog: "list watch@10",
		},
		{
			name: "a watch the server ends is resumed from the last version seen, bookmarks included, without a list",
			server: &server{
				lists: []func() (runtime.Object, error){listAt("10", claimAt("a", "9", "Pending"))},
				watches: []func() (watch.Interface, error){
					events(true, watch.Event{Type: watch.Modified, Object: claimAt("a", "11", "Pending")},
						watch.Event{Type: watch.Bookmark, Object: claimAt("", "15", "")}),
					events(false, watch.Event{Type: watch.Modified, Object: claimAt("a", "16", "Bound")}),
				},
			},
			want:    []string{"a@9 Pending", "a@11 Pending", "a@16 Bound"},
			wantLog: "list watch@10 watch@15",
		},
		{
			name: "410 Gone lists again, and what went meanwhile is reported deleted",
			server: &server{
				lists: []func() (runtime.Object, error){
					listAt("10", claimAt("a", "9", "Pending"), claimAt("b", "8", "Pending")),
					listAt("30", claimAt("b", "25", "Bound")),
				},
				watches: []func() (watch.Interface, error){
					events(false, expired()),
					events(false, watch.Event{Type: watch.Deleted, Object: claimAt("b", "31", "Bound")}),
				},
			},
			want:    []string{"a@9 Pending", "b@8 Pending", "b@25 Bound", "-a", "-b"},
			wantLog: "list watch@10 list watch@30",
		},
		{
			name: "a watch refused as expired lists again",
			server: &server{
				lists: []func() (runtime.Object, error){listAt("10"), listAt("20", claimAt("a", "19", "Bound"))},
				watches: []func() (watch.Interface, error){
					func() (watch.Interface, error) { return nil, apierrors.NewResourceExpired("too old") },
					events(false),
				},
			},
			want:    []string{"a@19 Bound"},
			wantLog: "list watch@10 list watch@20",
		},
		{
			name: "a connection refused is retried",
			server: &server{
				lists: []func() (runtime.Object, error){
					func() (runtime.Object, error) { return nil, fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED) },
					listAt("10", claimAt("a", "9", "Pending")),
				},
				watches: []func() (watch.Interface, error){events(false)},
			},
			want:    []string{"a@9 Pending"},
			wantLog: "list list watch@10",
		},
		{
			name: "a refusal retrying cannot cure ends the stream with it",
			server: &server{
				lists: []func() (runtime.Object, error){listAt("10", claimAt("a", "9", "Pending"))},
				watches: []func() (watch.Interface, error){func() (watch.Interface, error) {
					return nil, apierrors.NewForbidden(v1alpha1.Resource("macosmachineclaims"), "", errors.New("no watch for you"))
				}},
			},
			want: []string{"a@9 Pending", `error: macosmachineclaims.dockerios.io is forbidden: no watch for you`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := collect(t, tc.server, len(tc.want))
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if tc.wantLog != "" {
				// The last watch may not have been made yet when the last
				// change arrives from the one before.
				deadline := time.Now().Add(5 * time.Second)
				for tc.server.callLog() != tc.wantLog && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				if log := tc.server.callLog(); log != tc.wantLog {
					t.Errorf("calls %q, want %q", log, tc.wantLog)
				}
			}
		})
	}
}
