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

package annotations

import "testing"

func TestHookSidecarsValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   HookSidecar
		want string
	}{
		{"adds the default --osk-file the launcher webhook looks for",
			HookSidecar{Image: "registry.example/dockerios/sidecar-hook:v1", ImagePullPolicy: "IfNotPresent"},
			`[{"image":"registry.example/dockerios/sidecar-hook:v1","imagePullPolicy":"IfNotPresent","args":["--osk-file=/var/run/dockerios/osk/osk"]}]`},
		{"keeps an --osk-file given as two arguments",
			HookSidecar{Image: "img", Args: []string{"--osk-file", "/osk/key"}},
			`[{"image":"img","args":["--osk-file","/osk/key"]}]`},
		{"keeps a single-dash -osk-file=",
			HookSidecar{Image: "img", Args: []string{"-osk-file=/k/osk"}},
			`[{"image":"img","args":["-osk-file=/k/osk"]}]`},
		{"appends after other arguments",
			HookSidecar{Image: "img", Args: []string{"--socket-dir=/s"}},
			`[{"image":"img","args":["--socket-dir=/s","--osk-file=/var/run/dockerios/osk/osk"]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := HookSidecarsValue(tc.in)
			if err != nil || got != tc.want {
				t.Errorf("got  %s, %v\nwant %s", got, err, tc.want)
			}
		})
	}
	if _, err := HookSidecarsValue(HookSidecar{}); err == nil {
		t.Error("no error without image")
	}
}
