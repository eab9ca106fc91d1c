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

package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dockerios/dockerios/agent/api"
)

const goodConfig = `
listen: 127.0.0.1:9000
token:
  file: /etc/dockerios/token
pollInterval: 2s
session:
  consoleDevice: /tmp/console
disk:
  path: /data
  floor: 10Gi
checks:
  - name: marker
    kind: pathExists
    path: /tmp/marker
  - name: cmd
    kind: command
    command: ["/usr/bin/test", "-f", "/tmp/x"]
    timeout: 3s
  - name: headroom
    kind: diskFree
    path: /
    floor: "5%"
  - name: ssh
    kind: tcpPort
    address: 127.0.0.1:22
`

func TestParse_GoodConfig(t *testing.T) {
	cfg, err := Parse([]byte(goodConfig))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9000", cfg.Listen)
	assert.Equal(t, Token{File: "/etc/dockerios/token"}, cfg.Token)
	assert.Equal(t, 2*time.Second, cfg.PollInterval)
	assert.Equal(t, "/tmp/console", cfg.Session.ConsoleDevice)
	assert.Equal(t, Disk{Path: "/data", Floor: Floor{Bytes: 10 << 30}}, cfg.Disk)
	require.Len(t, cfg.Checks, 4)
	assert.Equal(t, Check{Name: "marker", Kind: api.CheckPathExists, Path: "/tmp/marker", Timeout: DefaultCheckTimeout}, cfg.Checks[0])
	assert.Equal(t, []string{"/usr/bin/test", "-f", "/tmp/x"}, cfg.Checks[1].Command)
	assert.Equal(t, 3*time.Second, cfg.Checks[1].Timeout)
	assert.Equal(t, Floor{Percent: 5}, cfg.Checks[2].Floor)
	assert.Equal(t, "127.0.0.1:22", cfg.Checks[3].Address)
}

func TestParse_EmptyDocumentGetsDefaults(t *testing.T) {
	for _, doc := range []string{"", "\n  \n", "{}"} {
		cfg, err := Parse([]byte(doc))
		require.NoError(t, err, "%q", doc)
		assert.Equal(t, DefaultListen, cfg.Listen)
		assert.Equal(t, Token{NVRAMVariable: DefaultNVRAMVariable}, cfg.Token)
		assert.Equal(t, DefaultPollInterval, cfg.PollInterval)
		assert.Equal(t, DefaultConsoleDevice, cfg.Session.ConsoleDevice)
		assert.Equal(t, DefaultDiskPath, cfg.Disk.Path)
		assert.Equal(t, Floor{Percent: 5}, cfg.Disk.Floor)
		assert.Empty(t, cfg.Checks)
	}
}

func TestParse_RejectsWithFieldPath(t *testing.T) {
	check := func(fields string) string {
		return "checks:\n  - name: ok\n    kind: pathExists\n    path: /x\n  - " + strings.ReplaceAll(fields, "\n", "\n    ") + "\n"
	}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown top-level field", "listen: :1\nlisen: :2\n", `unknown field "lisen"`},
		{"unknown check field", check("name: a\nkind: pathExists\npath: /x\npaht: /y"), `unknown field "paht"`},
		{"yaml syntax", "checks: [\n", "yaml"},
		{"duplicate key", "listen: :1\nlisten: :2\n", "listen"},
		{"negative timeout", check("name: a\nkind: pathExists\npath: /x\ntimeout: -1s"), "checks[1].timeout: must be positive"},
		{"zero timeout", check("name: a\nkind: pathExists\npath: /x\ntimeout: 0s"), "checks[1].timeout: must be positive"},
		{"unitless timeout", check("name: a\nkind: pathExists\npath: /x\ntimeout: 10"), `checks[1].timeout: must be a duration such as "10s"`},
		{"huge timeout", check("name: a\nkind: pathExists\npath: /x\ntimeout: 1h"), "checks[1].timeout: must be at most 10m0s"},
		{"bad disk floor", "disk:\n  floor: 10GB\n", "disk.floor: invalid quantity"},
		{"negative floor", "disk:\n  floor: -5Gi\n", "disk.floor: invalid quantity"},
		{"percent over 100", "disk:\n  floor: 101%\n", "disk.floor: invalid percentage"},
		{"zero percent", "disk:\n  floor: 0%\n", "disk.floor: invalid percentage"},
		{"check floor missing", check("name: a\nkind: diskFree\npath: /"), "checks[1].floor: required"},
		{"duplicate check names", check("name: ok\nkind: pathExists\npath: /y"), `checks[1].name: duplicates checks[0].name "ok"`},
		{"bad check name", check("name: a b\nkind: pathExists\npath: /y"), "checks[1].name: must be"},
		{"missing kind", check("name: a\npath: /y"), "checks[1].kind: required"},
		{"unknown kind", check("name: a\nkind: httpGet\npath: /y"), `checks[1].kind: unknown kind "httpGet"`},
		{"relative path", check("name: a\nkind: pathExists\npath: y"), "checks[1].path: must be an absolute path"},
		{"empty command", check("name: a\nkind: command\ncommand: []"), "checks[1].command: must be a non-empty argv list"},
		{"field of another kind", check("name: a\nkind: command\ncommand: [true]\naddress: 127.0.0.1:1"), "checks[1].address: not used by kind command"},
		{"bad address", check("name: a\nkind: tcpPort\naddress: localhost"), "checks[1].address: must be host:port"},
		{"port zero", check("name: a\nkind: tcpPort\naddress: localhost:0"), "checks[1].address: invalid port"},
		{"both token sources", "token:\n  file: /t\n  nvramVariable: " + DefaultNVRAMVariable + "\n", "token: set only one"},
		{"bad nvram variable", "token:\n  nvramVariable: token\n", `token.nvramVariable: must be "<GUID>:<name>"`},
		{"relative token file", "token:\n  file: token\n", "token.file: must be an absolute path"},
		{"half tls", "tls:\n  certFile: /c\n", "tls: set both certFile and keyFile"},
		{"short poll interval", "pollInterval: 10ms\n", "pollInterval: must be at least 100ms"},
		{"bad listen", "listen: localhost\n", "listen: must be host:port"},
		{"wrong type", "checks: yes\n", "cannot unmarshal"},
		{"empty osVersionCommand", "osVersionCommand: []\n", "osVersionCommand: must be an argv list whose first element is an absolute path"},
		{"relative osVersionCommand", "osVersionCommand: [sw_vers]\n", "osVersionCommand: must be an argv list whose first element is an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.doc))
			require.Error(t, err)
			assert.Nil(t, cfg)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// osVersionCommand replaces the platform's command; unset, it is nil (the
// platform's: sw_vers on macOS).
func TestParse_OSVersionCommand(t *testing.T) {
	cfg, err := Parse([]byte("osVersionCommand: [/bin/echo, \"14.6.1\"]\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"/bin/echo", "14.6.1"}, cfg.OSVersionCommand)
	cfg, err = Parse(nil)
	require.NoError(t, err)
	assert.Nil(t, cfg.OSVersionCommand)
}

func TestParse_ReportsEveryError(t *testing.T) {
	_, err := Parse([]byte("pollInterval: 1ms\ndisk:\n  floor: lots\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pollInterval:")
	assert.Contains(t, err.Error(), "disk.floor:")
}

func TestParse_FloorForms(t *testing.T) {
	for in, want := range map[string]Floor{
		"1073741824": {Bytes: 1 << 30},
		"0":          {},
		`"10Gi"`:     {Bytes: 10 << 30},
		"512Mi":      {Bytes: 512 << 20},
		"4Ki":        {Bytes: 4096},
		"2Ti":        {Bytes: 2 << 40},
		"500M":       {Bytes: 500e6},
		"3G":         {Bytes: 3e9},
		"1K":         {Bytes: 1000},
		"5%":         {Percent: 5},
		"12.5%":      {Percent: 12.5},
		"100%":       {Percent: 100},
	} {
		cfg, err := Parse([]byte("disk:\n  floor: " + in + "\n"))
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, cfg.Disk.Floor, in)
		}
	}
}

func TestFloor_Resolve(t *testing.T) {
	assert.Equal(t, uint64(50), Floor{Percent: 5}.Resolve(1000))
	assert.Equal(t, uint64(7), Floor{Bytes: 7}.Resolve(1000))
	assert.Equal(t, "5%", Floor{Percent: 5}.String())
	assert.Equal(t, "7", Floor{Bytes: 7}.String())
}

func TestParse_RejectsOversizedDocument(t *testing.T) {
	_, err := Parse(make([]byte, MaxFileBytes+1))
	assert.ErrorContains(t, err, "larger than")
}

func TestBootstrap_KeepsReachabilityFromBrokenConfig(t *testing.T) {
	doc := "listen: 127.0.0.1:9999\ntoken:\n  file: /run/token\npollInterval: 1s\nchecks:\n  - name: x\n    kind: nope\n"
	_, err := Parse([]byte(doc))
	require.Error(t, err)
	cfg := Bootstrap([]byte(doc))
	assert.Equal(t, "127.0.0.1:9999", cfg.Listen)
	assert.Equal(t, Token{File: "/run/token"}, cfg.Token)
	assert.Equal(t, time.Second, cfg.PollInterval)
	assert.Empty(t, cfg.Checks)
}

func TestBootstrap_FallsBackFieldByField(t *testing.T) {
	cfg := Bootstrap([]byte("listen: [1]\ntoken:\n  file: /run/token\npollInterval: soon\n"))
	assert.Equal(t, DefaultListen, cfg.Listen)
	assert.Equal(t, DefaultPollInterval, cfg.PollInterval)
	assert.Equal(t, Token{File: "/run/token"}, cfg.Token)

	cfg = Bootstrap([]byte("listen: :1\ntoken:\n  file: relative\n"))
	assert.Equal(t, ":1", cfg.Listen)
	assert.Equal(t, Token{NVRAMVariable: DefaultNVRAMVariable}, cfg.Token)

	cfg = Bootstrap([]byte("{{{"))
	assert.Equal(t, DefaultListen, cfg.Listen)
}

func TestExampleConfig_IsValidAndCoversEveryKind(t *testing.T) {
	cfg, err := Load("../macos/agent.example.yaml")
	require.NoError(t, err)
	assert.Len(t, cfg.Checks, 10)
	kinds := map[api.CheckKind]bool{}
	for _, c := range cfg.Checks {
		kinds[c.Kind] = true
	}
	assert.Len(t, kinds, 4)
	assert.Equal(t, DefaultNVRAMVariable, cfg.Token.NVRAMVariable)
}

func TestLoad_MissingFile(t *testing.T) {
	_, err := Load(t.TempDir() + "/nope.yaml")
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(goodConfig))
	f.Add([]byte(""))
	f.Add([]byte("checks: [{name: a, kind: command, command: [x], timeout: 1s}]"))
	f.Add([]byte("disk: {floor: 99.9%}"))
	f.Add([]byte("disk: {floor: 18446744073709551615Ti}"))
	f.Add([]byte("pollInterval: 9223372036854775807ns"))
	f.Add([]byte("token: {nvramVariable: \"4D1FDA02-38C7-4A6A-9CC6-4BCCA8B30102:\"}"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte("checks:\n- {name: a, kind: tcpPort, address: \"[::1]:80\"}\n- {name: a, kind: tcpPort, address: \"[::1]:80\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			require.Nil(t, cfg)
			_ = Bootstrap(data)
			return
		}
		require.GreaterOrEqual(t, cfg.PollInterval, MinPollInterval)
		require.NotEmpty(t, cfg.Listen)
		require.True(t, (cfg.Token.File == "") != (cfg.Token.NVRAMVariable == ""))
		names := map[string]bool{}
		for _, c := range cfg.Checks {
			require.False(t, names[c.Name], "duplicate name %q accepted", c.Name)
			names[c.Name] = true
			require.Positive(t, c.Timeout)
			require.LessOrEqual(t, c.Timeout, MaxCheckTimeout)
			switch c.Kind {
			case api.CheckPathExists, api.CheckDiskFree:
				require.NotEmpty(t, c.Path)
			case api.CheckCommand:
				require.NotEmpty(t, c.Command)
			case api.CheckTCPPort:
				require.NotEmpty(t, c.Address)
			default:
				t.Fatalf("kind %q accepted", c.Kind)
			}
		}
	})
}
