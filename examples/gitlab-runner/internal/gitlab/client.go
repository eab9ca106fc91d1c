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

// Package gitlab is the little of GitLab's REST API (v4) the controller
// needs to manage runners with an access token: create one (the "new
// runner registration workflow", POST /user/runners, which answers with
// the runner's authentication token), find, pause and delete them, and
// ask whether one runs jobs. A team would as well use GitLab's Go client
// (gitlab.com/gitlab-org/api/client-go); a dozen calls do not need it.
package gitlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxBody bounds what is read of one answer.
const maxBody = 4 << 20

// Client calls one GitLab instance with one access token.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// New returns a client of the GitLab at baseURL (https://gitlab.example.com)
// using token (sent as PRIVATE-TOKEN). A nil httpClient uses one with a
// 30 s timeout.
func New(baseURL, token string, httpClient *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("gitlab: url %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("gitlab: url %q is not an http(s) URL", baseURL)
	}
	if token == "" {
		return nil, errors.New("gitlab: empty access token")
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: u, token: token, http: httpClient}, nil
}

// Error is an answer other than 2xx.
type Error struct {
	StatusCode int
	Method     string
	Path       string
	Message    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("gitlab: %s %s: %d %s: %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// IsNotFound says whether err is GitLab's 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}

// CreateRunnerOptions are POST /user/runners's parameters.
type CreateRunnerOptions struct {
	RunnerType     string   `json:"runner_type"`
	GroupID        *int64   `json:"group_id,omitempty"`
	ProjectID      *int64   `json:"project_id,omitempty"`
	Description    string   `json:"description,omitempty"`
	Paused         bool     `json:"paused,omitempty"`
	TagList        []string `json:"tag_list,omitempty"`
	RunUntagged    bool     `json:"run_untagged"`
	MaximumTimeout *int64   `json:"maximum_timeout,omitempty"`
}

// CreatedRunner is POST /user/runners's answer. Token is the runner's
// authentication token (glrt-…): GitLab shows it this once.
type CreatedRunner struct {
	ID             int64      `json:"id"`
	Token          string     `json:"token"`
	TokenExpiresAt *time.Time `json:"token_expires_at"`
}

// Runner is a runner as GitLab lists it.
type Runner struct {
	ID          int64    `json:"id"`
	Description string   `json:"description"`
	Paused      bool     `json:"paused"`
	RunnerType  string   `json:"runner_type"`
	Online      bool     `json:"online"`
	Status      string   `json:"status"`
	TagList     []string `json:"tag_list,omitempty"`
}

// CreateRunner makes a runner and returns its id and authentication token.
func (c *Client) CreateRunner(ctx context.Context, o CreateRunnerOptions) (*CreatedRunner, error) {
	var out CreatedRunner
	if err := c.do(ctx, http.MethodPost, "/user/runners", nil, o, &out); err != nil {
		return nil, err
	}
	if out.ID == 0 || out.Token == "" {
		return nil, fmt.Errorf("gitlab: POST /user/runners answered without an id or token")
	}
	return &out, nil
}

// GetRunner returns runner id.
func (c *Client) GetRunner(ctx context.Context, id int64) (*Runner, error) {
	var out Runner
	if err := c.do(ctx, http.MethodGet, "/runners/"+strconv.FormatInt(id, 10), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteRunner deletes runner id and says whether it did. A runner already
// gone is not an error: it answers false.
func (c *Client) DeleteRunner(ctx context.Context, id int64) (deleted bool, err error) {
	err = c.do(ctx, http.MethodDelete, "/runners/"+strconv.FormatInt(id, 10), nil, nil, nil)
	if IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// SetPaused pauses (or resumes) runner id: a paused runner takes no new
// jobs and finishes those it runs.
func (c *Client) SetPaused(ctx context.Context, id int64, paused bool) error {
	return c.do(ctx, http.MethodPut, "/runners/"+strconv.FormatInt(id, 10), nil, map[string]bool{"paused": paused}, nil)
}

// RunningJobs returns how many jobs runner id runs now (at most 100 are
// counted: any is enough to wait).
func (c *Client) RunningJobs(ctx context.Context, id int64) (int, error) {
	var jobs []json.RawMessage
	q := url.Values{"status": {"running"}, "per_page": {"100"}}
	if err := c.do(ctx, http.MethodGet, "/runners/"+strconv.FormatInt(id, 10)+"/jobs", q, nil, &jobs); err != nil {
		return 0, err
	}
	return len(jobs), nil
}

// ListOptions filter ListRunners.
type ListOptions struct {
	// All lists every runner of the instance (GET /runners/all, for an
	// administrator's token); otherwise the runners the token's user may
	// manage (GET /runners).
	All bool
	// Type is instance_type, group_type or project_type.
	Type string
	// Tags: runners with all of them.
	Tags []string
}

// ListRunners returns every runner matching o, following GitLab's pages.
func (c *Client) ListRunners(ctx context.Context, o ListOptions) ([]Runner, error) {
	path := "/runners"
	if o.All {
		path = "/runners/all"
	}
	q := url.Values{"per_page": {"100"}}
	if o.Type != "" {
		q.Set("type", o.Type)
	}
	if len(o.Tags) > 0 {
		q.Set("tag_list", strings.Join(o.Tags, ","))
	}
	var all []Runner
	for page := "1"; page != ""; {
		q.Set("page", page)
		var runners []Runner
		next, err := c.doPaged(ctx, path, q, &runners)
		if err != nil {
			return nil, err
		}
		all = append(all, runners...)
		page = next
	}
	return all, nil
}

func (c *Client) doPaged(ctx context.Context, path string, q url.Values, out any) (next string, err error) {
	resp, err := c.send(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if err := c.decode(resp, http.MethodGet, path, out); err != nil {
		return "", err
	}
	return resp.Header.Get("X-Next-Page"), nil
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	resp, err := c.send(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return c.decode(resp, method, path, out)
}

func (c *Client) send(ctx context.Context, method, path string, q url.Values, body any) (*http.Response, error) {
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v4" + path
	u.RawQuery = q.Encode()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("PRIVATE-TOKEN", c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The URL holds no secret; the token is in a header, never in an error.
		return nil, fmt.Errorf("gitlab: %s %s: %w", method, path, err)
	}
	return resp, nil
}

func (c *Client) decode(resp *http.Response, method, path string, out any) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("gitlab: %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &Error{StatusCode: resp.StatusCode, Method: method, Path: path, Message: errorMessage(data)}
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("gitlab: %s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// errorMessage extracts GitLab's {"message": …} or {"error": …}, whose
// message may be a string or an object of field errors.
func errorMessage(data []byte) string {
	var e struct {
		Message json.RawMessage `json:"message"`
		Error   string          `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil {
		var s string
		switch {
		case len(e.Message) > 0 && json.Unmarshal(e.Message, &s) == nil:
			return s
		case len(e.Message) > 0:
			return string(e.Message)
		case e.Error != "":
			return e.Error
		}
	}
	if len(data) > 200 {
		data = data[:200]
	}
	return strings.TrimSpace(string(data))
}
