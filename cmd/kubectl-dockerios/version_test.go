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
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/dockerios/dockerios/pkg/version"
)

// The plugin says its version without a cluster: alone for --version and
// version, in full for -o json and yaml.
func TestVersion_NeedsNoCluster(t *testing.T) {
	want := version.Get()
	for _, tc := range []struct {
		name    string
		args    []string
		check   func(t *testing.T, out []byte)
		wantErr string
	}{
		{name: "--version", args: []string{"--version"}, check: func(t *testing.T, out []byte) { assert.Equal(t, want.GitVersion+"\n", string(out)) }},
		{name: "version", args: []string{"version"}, check: func(t *testing.T, out []byte) { assert.Equal(t, want.GitVersion+"\n", string(out)) }},
		{name: "version -o json", args: []string{"version", "-o", "json"}, check: func(t *testing.T, out []byte) {
			var got version.Info
			require.NoError(t, json.Unmarshal(out, &got))
			assert.Equal(t, want, got)
		}},
		{name: "version -o yaml", args: []string{"version", "-o", "yaml"}, check: func(t *testing.T, out []byte) {
			var got version.Info
			require.NoError(t, yaml.UnmarshalStrict(out, &got))
			assert.Equal(t, want, got)
		}},
		{name: "version -o wide", args: []string{"version", "-o", "wide"}, wantErr: `--output must be json or yaml, not "wide"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A kubeconfig that reaches nothing: nothing may be asked.
			t.Setenv("KUBECONFIG", "/nonexistent")
			cmd := newCommand(newOptions())
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, out.Bytes())
		})
	}
}
