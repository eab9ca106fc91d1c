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

package integration

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dockerios/dockerios/test/framework"
)

// klogText is klog's text header: "I1203 15:04:05.000000   1234 file.go:12] ".
var klogText = regexp.MustCompile(`(?m)^[IWEF]\d{4} [0-9:.]+ +\d+ [^ ]+:\d+\] `)

// The apiserver logs JSON lines by default, as the controller and the
// embedded etcd do, so one collector parses every DockerIOS pod;
// --logging-format=text gives klog's text to a person at a terminal.
func TestLogging_JSONByDefaultTextOnRequest(t *testing.T) {
	t.Run("json", func(t *testing.T) {
		s := framework.StartLocalServer(t, t.TempDir())
		s.Stop(t)
		var msgs []string
		for _, line := range strings.Split(strings.TrimSpace(s.Output()), "\n") {
			if !strings.HasPrefix(line, "{") {
				// --local tells the person who started it how to reach it.
				assert.NotRegexp(t, klogText, line, "a klog text line")
				continue
			}
			var e struct {
				Msg string  `json:"msg"`
				TS  float64 `json:"ts"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil || e.Msg == "" || e.TS == 0 {
				t.Errorf("not a JSON log line with ts and msg (%v): %s", err, line)
				continue
			}
			msgs = append(msgs, e.Msg)
		}
		assert.Contains(t, msgs, "Starting dockerios-apiserver")
	})
	t.Run("text", func(t *testing.T) {
		s := framework.StartLocalServer(t, t.TempDir(), "--logging-format=text")
		s.Stop(t)
		assert.Regexp(t, regexp.MustCompile(`(?m)^I\d{4} [0-9:.]+ +\d+ server\.go:\d+\] "Starting dockerios-apiserver"`), s.Output())
		assert.Regexp(t, klogText, s.Output())
	})
}
