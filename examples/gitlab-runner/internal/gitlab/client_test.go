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

package gitlab_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/examples/gitlab-runner/internal/gitlab"
	"github.com/dockerios/dockerios/examples/gitlab-runner/internal/gitlab/gitlabtest"
)

const token = "glpat-test"

func start(t *testing.T) (*gitlabtest.Server, *gitlab.Client) {
	t.Helper()
	fake := gitlabtest.NewServer(token)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	c, err := gitlab.New(srv.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fake, c
}

func TestNew_RefusesWhatCannotBeGitLab(t *testing.T) {
	for _, tc := range []struct {
		url, token string
	}{
		{"gitlab.example.com", token},
		{"ftp://gitlab.example.com", token},
		{"https://", token},
		{"https://gitlab.example.com", ""},
	} {
		if _, err := gitlab.New(tc.url, tc.token, nil); err == nil {
			t.Errorf("New(%q, %q) accepted", tc.url, tc.token)
		}
	}
}

func TestCreateRunner(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     gitlab.CreateRunnerOptions
		wantCode int // 0: created
		wantMsg  string
	}{
		{"instance runner with tags", gitlab.CreateRunnerOptions{RunnerType: "instance_type", Description: "d", TagList: []string{"macos", "xcode"}}, 0, ""},
		{"untagged group runner", gitlab.CreateRunnerOptions{RunnerType: "group_type", GroupID: ptr.To[int64](7), RunUntagged: true}, 0, ""},
		{"group runner without a group", gitlab.CreateRunnerOptions{RunnerType: "group_type", TagList: []string{"macos"}}, http.StatusBadRequest, "group_id is missing"},
		{"project runner without a project", gitlab.CreateRunnerOptions{RunnerType: "project_type", TagList: []string{"macos"}}, http.StatusBadRequest, "project_id is missing"},
		{"no tags and no untagged jobs", gitlab.CreateRunnerOptions{RunnerType: "instance_type"}, http.StatusBadRequest, "tags list can not be empty"},
		{"unknown type", gitlab.CreateRunnerOptions{RunnerType: "shared", TagList: []string{"macos"}}, http.StatusBadRequest, "runner_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, c := start(t)
			got, err := c.CreateRunner(t.Context(), tc.opts)
			if tc.wantCode != 0 {
				var e *gitlab.Error
				if !errors.As(err, &e) || e.StatusCode != tc.wantCode || !strings.Contains(e.Message, tc.wantMsg) {
					t.Fatalf("err %v, want %d with %q", err, tc.wantCode, tc.wantMsg)
				}
				if n := len(fake.Runners()); n != 0 {
					t.Errorf("a refused create made %d runners", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r, ok := fake.Runner(got.ID)
			if !ok || r.Token != got.Token || !strings.HasPrefix(got.Token, "glrt-") {
				t.Fatalf("created %+v; GitLab holds %+v", got, r)
			}
			if r.RunnerType != tc.opts.RunnerType || r.Description != tc.opts.Description || !slices.Equal(r.TagList, tc.opts.TagList) || r.RunUntagged != tc.opts.RunUntagged {
				t.Errorf("GitLab holds %+v, asked %+v", r, tc.opts)
			}
		})
	}
}

func TestCalls_NeedTheAccessToken(t *testing.T) {
	fake, _ := start(t)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c, err := gitlab.New(srv.URL, "glpat-wrong", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateRunner(t.Context(), gitlab.CreateRunnerOptions{RunnerType: "instance_type", RunUntagged: true})
	var e *gitlab.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusUnauthorized {
		t.Fatalf("with a wrong token: %v, want 401", err)
	}
	if strings.Contains(err.Error(), "glpat-wrong") {
		t.Errorf("the error shows the token: %v", err)
	}
}

func TestListRunners_FollowsPagesAndFilters(t *testing.T) {
	fake, c := start(t)
	for i := range 130 {
		tags := []string{"macos"}
		if i%2 == 0 {
			tags = append(tags, "xcode")
		}
		if _, err := c.CreateRunner(t.Context(), gitlab.CreateRunnerOptions{RunnerType: "instance_type", Description: fmt.Sprint(i), TagList: tags}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateRunner(t.Context(), gitlab.CreateRunnerOptions{RunnerType: "group_type", GroupID: ptr.To[int64](1), TagList: []string{"macos"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts gitlab.ListOptions
		want int
	}{
		{gitlab.ListOptions{All: true}, 131},
		{gitlab.ListOptions{All: true, Type: "instance_type"}, 130},
		{gitlab.ListOptions{All: true, Type: "instance_type", Tags: []string{"macos", "xcode"}}, 65},
		{gitlab.ListOptions{Type: "group_type", Tags: []string{"macos"}}, 1},
		{gitlab.ListOptions{All: true, Tags: []string{"linux"}}, 0},
	} {
		got, err := c.ListRunners(t.Context(), tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[int64]bool{}
		for _, r := range got {
			ids[r.ID] = true
		}
		if len(got) != tc.want || len(ids) != tc.want {
			t.Errorf("%+v: %d runners (%d distinct), want %d", tc.opts, len(got), len(ids), tc.want)
		}
	}
	if pages := len(fake.Calls()) - 131; pages != 2+2+1+1+1 {
		t.Errorf("%d list calls, want 7 (100 a page)", pages)
	}
}

func TestPauseCountJobsAndDelete(t *testing.T) {
	fake, c := start(t)
	r, err := c.CreateRunner(t.Context(), gitlab.CreateRunnerOptions{RunnerType: "instance_type", TagList: []string{"macos"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetPaused(t.Context(), r.ID, true); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetRunner(t.Context(), r.ID)
	if err != nil || !got.Paused || !slices.Equal(got.TagList, []string{"macos"}) {
		t.Fatalf("after pausing: %+v, %v", got, err)
	}
	fake.SetRunningJobs(r.ID, 2)
	if n, err := c.RunningJobs(t.Context(), r.ID); err != nil || n != 2 {
		t.Fatalf("running jobs %d, %v; want 2", n, err)
	}
	if deleted, err := c.DeleteRunner(t.Context(), r.ID); err != nil || !deleted {
		t.Fatalf("deleting: %v, %v", deleted, err)
	}
	if d := fake.Deleted(); len(d) != 1 || d[0].ID != r.ID || !d[0].PausedBeforeDelete {
		t.Errorf("deleted %+v", d)
	}
	// Gone already: deleting again is done, reading is a 404.
	if deleted, err := c.DeleteRunner(t.Context(), r.ID); err != nil || deleted {
		t.Errorf("deleting a deleted runner: %v, %v; want nothing deleted and no error", deleted, err)
	}
	if _, err := c.GetRunner(t.Context(), r.ID); !gitlab.IsNotFound(err) {
		t.Errorf("reading a deleted runner: %v, want not found", err)
	}
	if _, err := c.RunningJobs(t.Context(), r.ID); !gitlab.IsNotFound(err) {
		t.Errorf("jobs of a deleted runner: %v, want not found", err)
	}
}

func TestGitLabDown(t *testing.T) {
	fake, c := start(t)
	fake.FailRequests(http.StatusBadGateway)
	_, err := c.ListRunners(t.Context(), gitlab.ListOptions{All: true})
	var e *gitlab.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusBadGateway {
		t.Fatalf("%v, want 502", err)
	}
	if _, err := c.DeleteRunner(t.Context(), 1); err == nil {
		t.Error("a delete GitLab failed was taken as done")
	}
}
