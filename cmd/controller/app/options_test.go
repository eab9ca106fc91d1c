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

package app

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOptions_Parse(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // "" means valid
	}{
		{"defaults", nil, ""},
		{"webhook off needs no certificates", []string{"--webhook-bind-address=", "--webhook-cert-dir="}, ""},
		{"webhook without certificates", []string{"--webhook-cert-dir="}, "--webhook-cert-dir: required while --webhook-bind-address is set"},
		{"no health address", []string{"--health-bind-address="}, "--health-bind-address: required"},
		{"unknown log level", []string{"--log-level=loud"}, `--log-level: unknown level "loud"`},
		{"unknown log format", []string{"--log-format=xml"}, `--log-format: "xml" is neither json nor text`},
		{"every problem at once", []string{"--health-bind-address=", "--log-level=loud"}, "--health-bind-address: required (the kubelet probes it)\n--log-level"},
		{"stray argument", []string{"serve"}, `unexpected arguments ["serve"]`},
		{"one agent prober", []string{"--agent-probe-workers=1"}, "--agent-probe-workers: must be at least 2"},
		{"a Secret the controller keeps replaces the default directory", []string{"--webhook-cert-secret=dockerios-system/dockerios-controller-webhook-tls", "--webhook-configuration=dockerios-launcher-pods"}, ""},
		{"a Secret and a directory both asked for", []string{"--webhook-cert-secret=dockerios-system/webhook-tls", "--webhook-cert-dir=/tls"}, "--webhook-cert-dir and --webhook-cert-secret are mutually exclusive"},
		{"a Secret without its namespace", []string{"--webhook-cert-secret=webhook-tls"}, `--webhook-cert-secret: "webhook-tls" is not NAMESPACE/NAME`},
		{"a Service without its namespace", []string{"--webhook-cert-secret=ns/webhook-tls", "--webhook-service=dockerios-controller"}, `--webhook-service: "dockerios-controller" is not NAMESPACE/NAME`},
		{"injecting a CA the controller does not keep", []string{"--webhook-configuration=dockerios-launcher-pods"}, "--webhook-configuration: needs --webhook-cert-secret"},
		{"a Secret for a webhook that is off", []string{"--webhook-bind-address=", "--webhook-cert-secret=ns/webhook-tls"}, "--webhook-cert-secret: needs --webhook-bind-address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := NewOptions().Parse(tc.args)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			if assert.Error(t, err) {
				assert.Contains(t, err.Error(), tc.want)
			}
		})
	}
}

// The controller logs one JSON object per line by default, like the
// apiserver and the embedded etcd; --log-format=text is slog's key=value.
func TestOptions_Logger(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, `{"time":"T","level":"WARN","msg":"lease lost","holder":"b"}` + "\n"},
		{[]string{"--log-format=text"}, `time=T level=WARN msg="lease lost" holder=b` + "\n"},
		{[]string{"--log-level=error"}, ""},
	} {
		o := NewOptions()
		if !assert.NoError(t, o.Parse(tc.args)) {
			continue
		}
		var buf bytes.Buffer
		log := o.Logger(&buf)
		log.Debug("not shown at info")
		log.Warn("lease lost", "holder", "b")
		got := regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)`).ReplaceAllString(buf.String(), "T")
		assert.Equal(t, tc.want, got, "%v", tc.args)
	}
}
