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

// Package gitlabtest is a fake GitLab: the runner endpoints of its REST
// API (v4) as GitLab documents them, in memory, for the example's tests
// and for the local stack (cmd/fake-gitlab). It checks the access token
// and the parameters GitLab checks, and records every runner made and
// deleted so tests can assert on them.
//
//	POST   /api/v4/user/runners           create; answers {id, token, token_expires_at}
//	GET    /api/v4/runners/all            every runner (an administrator's call)
//	GET    /api/v4/runners                the runners the token's user manages
//	GET    /api/v4/runners/:id            one runner, with its tags
//	PUT    /api/v4/runners/:id            pause or resume (paused), edit description and tags
//	DELETE /api/v4/runners/:id            delete
//	GET    /api/v4/runners/:id/jobs       the runner's jobs (status=running)
//
// Lists take per_page (default 20, at most 100) and page, and answer with
// GitLab's X-Page, X-Per-Page, X-Total and X-Next-Page headers.
package gitlabtest

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Runner is a runner the fake holds, or held.
type Runner struct {
	ID             int64
	Token          string
	RunnerType     string
	GroupID        int64
	ProjectID      int64
	Description    string
	TagList        []string
	RunUntagged    bool
	Paused         bool
	MaximumTimeout int64
	CreatedAt      time.Time
	// DeletedAt is set on runners that were deleted.
	DeletedAt time.Time
	// PausedBeforeDelete says whether the runner was paused when it was
	// deleted (drained), rather than deleted while taking jobs.
	PausedBeforeDelete bool
}

// Server is a fake GitLab. Its methods are safe for concurrent use.
type Server struct {
	token string

	mu      sync.Mutex
	nextID  int64
	runners map[int64]*Runner
	deleted []Runner
	running map[int64]int // runner id → jobs it runs
	fail    int           // every API call answers this status when set
	calls   []string      // "METHOD path" of every API call
}

// NewServer returns a fake GitLab accepting accessToken.
func NewServer(accessToken string) *Server {
	return &Server{token: accessToken, nextID: 1000, runners: map[int64]*Runner{}, running: map[int64]int{}}
}

// Runners returns the runners that exist, by id.
func (s *Server) Runners() []Runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Runner, 0, len(s.runners))
	for _, r := range s.runners {
		c := *r
		c.TagList = slices.Clone(r.TagList)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Runner returns runner id, if it exists.
func (s *Server) Runner(id int64) (Runner, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runners[id]
	if !ok {
		return Runner{}, false
	}
	return *r, true
}

// Deleted returns the runners deleted so far, in the order they were.
func (s *Server) Deleted() []Runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deleted)
}

// SetRunningJobs says runner id runs n jobs now (a paused runner keeps
// running what it took).
func (s *Server) SetRunningJobs(id int64, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running[id] = n
}

// FailRequests makes every API call answer status (GitLab down or
// failing, 502 say); 0 answers again.
func (s *Server) FailRequests(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = status
}

// Calls returns "METHOD /api/v4/…" for every API call so far.
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// DeleteRunner deletes runner id as a person would in GitLab's UI.
func (s *Server) DeleteRunner(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteLocked(id)
}

func (s *Server) deleteLocked(id int64) bool {
	r, ok := s.runners[id]
	if !ok {
		return false
	}
	delete(s.runners, id)
	delete(s.running, id)
	gone := *r
	gone.DeletedAt = time.Now()
	gone.PausedBeforeDelete = r.Paused
	s.deleted = append(s.deleted, gone)
	return true
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path, ok := strings.CutPrefix(r.URL.Path, "/api/v4")
	if !ok {
		writeError(w, http.StatusNotFound, "404 Not Found")
		return
	}
	s.mu.Lock()
	s.calls = append(s.calls, r.Method+" "+r.URL.Path)
	fail := s.fail
	s.mu.Unlock()
	if fail != 0 {
		writeError(w, fail, http.StatusText(fail))
		return
	}
	if got := r.Header.Get("PRIVATE-TOKEN"); subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
		writeError(w, http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case r.Method == http.MethodPost && path == "/user/runners":
		s.create(w, r)
	case r.Method == http.MethodGet && (path == "/runners" || path == "/runners/all"):
		s.list(w, r)
	case len(parts) >= 2 && parts[0] == "runners":
		id, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil {
			writeError(w, http.StatusNotFound, "404 Not found")
			return
		}
		switch {
		case len(parts) == 2 && r.Method == http.MethodGet:
			s.get(w, id)
		case len(parts) == 2 && r.Method == http.MethodPut:
			s.update(w, r, id)
		case len(parts) == 2 && r.Method == http.MethodDelete:
			s.delete(w, id)
		case len(parts) == 3 && parts[2] == "jobs" && r.Method == http.MethodGet:
			s.jobs(w, r, id)
		default:
			writeError(w, http.StatusMethodNotAllowed, "405 Method Not Allowed")
		}
	default:
		writeError(w, http.StatusNotFound, "404 Not Found")
	}
}

// params reads a request's parameters as GitLab does: a JSON body, or a
// form (query string and form body).
func params(r *http.Request) (map[string]any, error) {
	out := map[string]any{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return nil, err
		}
		if len(data) > 0 {
			if err := json.Unmarshal(data, &out); err != nil {
				return nil, fmt.Errorf("the body is not JSON: %w", err)
			}
		}
		return out, nil
	}
	if err := r.ParseForm(); err != nil {
		return nil, err
	}
	for k, v := range r.Form {
		k = strings.TrimSuffix(k, "[]")
		if len(v) == 1 {
			out[k] = v[0]
		} else {
			out[k] = v
		}
	}
	return out, nil
}

func paramString(p map[string]any, k string) string {
	switch v := p[k].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatInt(int64(v), 10)
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

func paramInt(p map[string]any, k string) (int64, bool, error) {
	s := paramString(p, k)
	if s == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("%s is invalid", k)
	}
	return n, true, nil
}

func paramBool(p map[string]any, k string) bool {
	b, _ := strconv.ParseBool(paramString(p, k))
	return b
}

// paramList reads a list given as an array or a comma-separated string.
func paramList(p map[string]any, k string) []string {
	var raw []string
	switch v := p[k].(type) {
	case string:
		raw = strings.Split(v, ",")
	case []string:
		raw = v
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				raw = append(raw, s)
			}
		}
	}
	var out []string
	for _, s := range raw {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	p, err := params(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	run := &Runner{RunnerType: paramString(p, "runner_type"), Description: paramString(p, "description"),
		TagList: paramList(p, "tag_list"), RunUntagged: paramBool(p, "run_untagged"), Paused: paramBool(p, "paused"),
		CreatedAt: time.Now()}
	var bad []string
	if run.GroupID, _, err = paramInt(p, "group_id"); err != nil {
		bad = append(bad, err.Error())
	}
	if run.ProjectID, _, err = paramInt(p, "project_id"); err != nil {
		bad = append(bad, err.Error())
	}
	if run.MaximumTimeout, _, err = paramInt(p, "maximum_timeout"); err != nil {
		bad = append(bad, err.Error())
	}
	switch run.RunnerType {
	case "instance_type":
	case "group_type":
		if run.GroupID == 0 {
			bad = append(bad, "group_id is missing")
		}
	case "project_type":
		if run.ProjectID == 0 {
			bad = append(bad, "project_id is missing")
		}
	case "":
		bad = append(bad, "runner_type is missing")
	default:
		bad = append(bad, "runner_type does not have a valid value")
	}
	if len(run.TagList) == 0 && !run.RunUntagged {
		// GitLab: a runner without tags must be allowed untagged jobs.
		bad = append(bad, "tags list can not be empty when runner is not allowed to pick untagged jobs")
	}
	if len(bad) > 0 {
		writeError(w, http.StatusBadRequest, strings.Join(bad, ", "))
		return
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	s.mu.Lock()
	s.nextID++
	run.ID = s.nextID
	run.Token = "glrt-" + hex.EncodeToString(b[:])
	s.runners[run.ID] = run
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"id": run.ID, "token": run.Token, "token_expires_at": nil})
}

// listed is a runner as GitLab's lists show it.
func listed(r *Runner, withTags bool) map[string]any {
	m := map[string]any{
		"id": r.ID, "description": r.Description, "ip_address": nil, "active": !r.Paused, "paused": r.Paused,
		"is_shared": r.RunnerType == "instance_type", "runner_type": r.RunnerType, "name": nil,
		// Played guests run no gitlab-runner: nothing ever contacts the fake.
		"online": false, "status": "never_contacted",
	}
	if withTags {
		m["tag_list"] = r.TagList
		m["run_untagged"] = r.RunUntagged
		m["maximum_timeout"] = r.MaximumTimeout
	}
	return m
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	typ, tags := q.Get("type"), paramList(map[string]any{"t": q.Get("tag_list")}, "t")
	var paused *bool
	if v := q.Get("paused"); v != "" {
		b, _ := strconv.ParseBool(v)
		paused = &b
	}
	s.mu.Lock()
	var match []*Runner
	for _, run := range s.runners {
		if typ != "" && run.RunnerType != typ || paused != nil && run.Paused != *paused {
			continue
		}
		ok := true
		for _, t := range tags {
			ok = ok && slices.Contains(run.TagList, t)
		}
		if ok {
			c := *run
			match = append(match, &c)
		}
	}
	s.mu.Unlock()
	sort.Slice(match, func(i, j int) bool { return match[i].ID < match[j].ID })
	page, per := pageOf(q)
	from, to := min((page-1)*per, len(match)), min(page*per, len(match))
	out := []map[string]any{}
	for _, run := range match[from:to] {
		out = append(out, listed(run, false))
	}
	h := w.Header()
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(per))
	h.Set("X-Total", strconv.Itoa(len(match)))
	if to < len(match) {
		h.Set("X-Next-Page", strconv.Itoa(page+1))
	} else {
		h.Set("X-Next-Page", "")
	}
	writeJSON(w, http.StatusOK, out)
}

func pageOf(q url.Values) (page, per int) {
	page, per = 1, 20
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 0 {
		page = n
	}
	if n, err := strconv.Atoi(q.Get("per_page")); err == nil && n > 0 {
		per = min(n, 100)
	}
	return page, per
}

func (s *Server) get(w http.ResponseWriter, id int64) {
	s.mu.Lock()
	run, ok := s.runners[id]
	var m map[string]any
	if ok {
		m = listed(run, true)
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "404 Not found")
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, id int64) {
	p, err := params(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.mu.Lock()
	run, ok := s.runners[id]
	var m map[string]any
	if ok {
		if _, set := p["paused"]; set {
			run.Paused = paramBool(p, "paused")
		}
		if _, set := p["active"]; set { // the deprecated inverse of paused
			run.Paused = !paramBool(p, "active")
		}
		if _, set := p["description"]; set {
			run.Description = paramString(p, "description")
		}
		if _, set := p["tag_list"]; set {
			run.TagList = paramList(p, "tag_list")
		}
		m = listed(run, true)
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "404 Not found")
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) delete(w http.ResponseWriter, id int64) {
	s.mu.Lock()
	ok := s.deleteLocked(id)
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "404 Not found")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request, id int64) {
	s.mu.Lock()
	_, ok := s.runners[id]
	n := s.running[id]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "404 Not found")
		return
	}
	out := []map[string]any{}
	if st := r.URL.Query().Get("status"); st == "" || st == "running" {
		for i := range n {
			out = append(out, map[string]any{"id": id*1000 + int64(i), "status": "running"})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg})
}
