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
	got, err := HookSidecarsValue(HookSidecar{Image: "registry.example/dockerios/sidecar-hook:v1", ImagePullPolicy: "IfNotPresent", OSKConfigMap: "dockerios-osk"})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"image":"registry.example/dockerios/sidecar-hook:v1","imagePullPolicy":"IfNotPresent","configMap":{"name":"dockerios-osk","key":"osk","hookPath":"/var/run/dockerios/osk/osk"}}]`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	got, err = HookSidecarsValue(HookSidecar{Image: "img", Args: []string{"--osk-file", "/osk"}})
	if err != nil || got != `[{"image":"img","args":["--osk-file","/osk"]}]` {
		t.Errorf("got %s, %v", got, err)
	}
	if _, err := HookSidecarsValue(HookSidecar{}); err == nil {
		t.Error("no error without image")
	}
}
