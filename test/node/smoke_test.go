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

package node

import (
	"strings"
	"testing"
	"time"

	"github.com/dockerios/dockerios/test/framework"
)

func TestSmokePod(t *testing.T) {
	c := StartCluster(t)
	framework.Eventually(t, time.Minute, func() string {
		return c.Kubectl.Run("", "get", "serviceaccount", "default").Stderr
	})
	c.Kubectl.MustRun(t, `apiVersion: v1
kind: Pod
metadata: {name: smoke, namespace: default}
spec:
  containers:
  - name: pause
    image: `+pauseImage+`
    imagePullPolicy: Never
`, "apply", "-f", "-")
	framework.Eventually(t, 2*time.Minute, func() string {
		r := c.Kubectl.Run("", "get", "pod", "smoke", "-o", "jsonpath={.status.phase} {.status.podIP}")
		if !strings.HasPrefix(r.Stdout, "Running") {
			return "pod not running: " + r.Stdout + r.Stderr + c.exitedReport()
		}
		return ""
	})
}
