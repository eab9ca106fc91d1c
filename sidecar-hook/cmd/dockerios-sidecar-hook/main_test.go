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

import "testing"

// A bare --version is ours; --version with a value is KubeVirt's hook
// protocol version, which a hookSidecars entry copied from KubeVirt's
// docs passes and the hook must keep serving through.
func TestVersionAsked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--version"}, true},
		{[]string{"-version"}, true},
		{[]string{"--osk-file=/osk", "--version"}, true},
		{[]string{"--version", "--osk-file=/osk"}, true},
		{[]string{"--version", "v1alpha2"}, false},
		{[]string{"--version=v1alpha3", "--osk-file=/osk"}, false},
		{[]string{"--version", "v1alpha2", "--socket-dir", "/sockets"}, false},
		{[]string{"--socket-dir", "/sockets"}, false},
		{[]string{"--", "--version"}, false},
		{nil, false},
	} {
		if got := versionAsked(tc.args); got != tc.want {
			t.Errorf("versionAsked(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
