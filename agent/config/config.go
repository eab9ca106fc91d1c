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

// Package config reads the agent's config file, a YAML document baked into
// the golden image. Parsing is strict (unknown fields are errors) so a typo
// surfaces as a Degraded machine instead of a silently ignored check, and
// every validation error names the offending field, e.g.
// "checks[2].timeout: must be positive".
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/dockerios/dockerios/agent/api"
)

// Defaults. The README documents them; keep both in sync.
const (
	DefaultListen        = ":8443"
	DefaultNVRAMVariable = "4D1FDA02-38C7-4A6A-9CC6-4BCCA8B30102:dockerios-agent-token"
	DefaultPollInterval  = 5 * time.Second
	DefaultConsoleDevice = "/dev/console"
	DefaultDiskPath      = "/"
	DefaultDiskFloor     = "5%"
	DefaultCheckTimeout  = 10 * time.Second

	MinPollInterval = 100 * time.Millisecond
	MaxCheckTimeout = 10 * time.Minute
	MaxChecks       = 64
	// MaxFileBytes bounds the config file; anything larger is not a
	// hand-written config.
	MaxFileBytes = 1 << 20
)

// Config is a parsed, validated config with defaults applied.
type Config struct {
	Listen       string
	TLS          TLS
	Token        Token
	PollInterval time.Duration
	Session      Session
	Disk         Disk
	Checks       []Check
	// OSVersionCommand prints the operating system's version, run once
	// at start; nil runs the platform's (sw_vers -productVersion on
	// macOS; none elsewhere, and the version is reported empty).
	OSVersionCommand []string
}

// TLS names a certificate and key in PEM files. Both empty means the agent
// generates a self-signed certificate in memory at start.
type TLS struct {
	CertFile string
	KeyFile  string
}

// Token says where the per-machine token comes from: exactly one of File
// and NVRAMVariable ("<GUID>:<name>") is set.
type Token struct {
	File          string
	NVRAMVariable string
}

// Session configures the console session probe: the session is up when
// ConsoleDevice is owned by a user other than root.
type Session struct {
	ConsoleDevice string
}

// Disk is the volume whose headroom the agent reports and guards.
type Disk struct {
	Path  string
	Floor Floor
}

// Check is one image-defined readiness check. Which fields apply depends on
// Kind; the others are rejected at parse time.
type Check struct {
	Name    string
	Kind    api.CheckKind
	Path    string
	Command []string
	Timeout time.Duration
	Address string
	Floor   Floor
}

// Floor is a minimum of free bytes, absolute or as a percentage of the
// volume's size.
type Floor struct {
	Bytes   uint64
	Percent float64 // > 0 means the floor is relative and Bytes is unused
}

// Resolve returns the floor in bytes for a volume of total bytes.
func (f Floor) Resolve(total uint64) uint64 {
	if f.Percent > 0 {
		return uint64(float64(total) * f.Percent / 100)
	}
	return f.Bytes
}

func (f Floor) String() string {
	if f.Percent > 0 {
		return strconv.FormatFloat(f.Percent, 'f', -1, 64) + "%"
	}
	return strconv.FormatUint(f.Bytes, 10)
}

// Load reads and parses the file at path.
func Load(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// LoadBootstrap is Bootstrap on the file at path; an unreadable file yields
// the defaults.
func LoadBootstrap(path string) *Config {
	data, err := readFile(path)
	if err != nil {
		return Bootstrap(nil)
	}
	return Bootstrap(data)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxFileBytes)
	}
	return data, nil
}

// Parse decodes and validates a config document. All validation errors are
// reported together.
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("config larger than %d bytes", MaxFileBytes)
	}
	var f fileConfig
	if len(bytes.TrimSpace(data)) > 0 {
		if err := yaml.UnmarshalStrict(data, &f); err != nil {
			return nil, err
		}
	}
	return f.validate()
}

// Bootstrap extracts what the agent needs to be reachable, to authenticate
// and to keep reporting (listen, tls, token, pollInterval) from a config
// that failed Parse, so a broken config still yields a machine that reports
// Degraded instead of one that is silent. Each of those fields that is
// missing or invalid gets its default; everything else is defaults, with
// no checks.
func Bootstrap(data []byte) *Config {
	cfg, _ := fileConfig{}.validate()
	// Decode each field alone, so one bad field does not cost the others.
	var f fileConfig
	_ = yaml.Unmarshal(data, &struct {
		Listen *string `json:"listen"`
	}{&f.Listen})
	_ = yaml.Unmarshal(data, &struct {
		TLS *fileTLS `json:"tls"`
	}{&f.TLS})
	_ = yaml.Unmarshal(data, &struct {
		Token *fileToken `json:"token"`
	}{&f.Token})
	_ = yaml.Unmarshal(data, &struct {
		PollInterval *scalar `json:"pollInterval"`
	}{&f.PollInterval})
	if c, err := (fileConfig{Listen: f.Listen}).validate(); err == nil {
		cfg.Listen = c.Listen
	}
	if c, err := (fileConfig{TLS: f.TLS}).validate(); err == nil {
		cfg.TLS = c.TLS
	}
	if c, err := (fileConfig{Token: f.Token}).validate(); err == nil {
		cfg.Token = c.Token
	}
	if c, err := (fileConfig{PollInterval: f.PollInterval}).validate(); err == nil {
		cfg.PollInterval = c.PollInterval
	}
	return cfg
}

// scalar accepts a YAML string or number so that "floor: 1073741824" and
// "timeout: 10" reach validation, which then explains what is expected
// with the field's path instead of a JSON type error.
type scalar string

func (s *scalar) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = scalar(v)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New("must be a string or a number")
	}
	*s = scalar(n)
	return nil
}

type fileConfig struct {
	Listen       string      `json:"listen"`
	TLS          fileTLS     `json:"tls"`
	Token        fileToken   `json:"token"`
	PollInterval scalar      `json:"pollInterval"`
	Session      fileSession `json:"session"`
	Disk         fileDisk    `json:"disk"`
	Checks       []fileCheck `json:"checks"`
	// OSVersionCommand overrides the platform's command printing the OS
	// version (agent/README.md).
	OSVersionCommand []string `json:"osVersionCommand"`
}

type fileTLS struct {
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
}

type fileToken struct {
	File          string `json:"file"`
	NVRAMVariable string `json:"nvramVariable"`
}

type fileSession struct {
	ConsoleDevice string `json:"consoleDevice"`
}

type fileDisk struct {
	Path  string `json:"path"`
	Floor scalar `json:"floor"`
}

type fileCheck struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind"`
	Path    string   `json:"path"`
	Command []string `json:"command"`
	Timeout scalar   `json:"timeout"`
	Address string   `json:"address"`
	Floor   scalar   `json:"floor"`
}

type fieldErrors []error

func (e *fieldErrors) add(field, format string, args ...any) {
	*e = append(*e, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

func (f fileConfig) validate() (*Config, error) {
	var errs fieldErrors
	cfg := &Config{
		Listen:       DefaultListen,
		PollInterval: DefaultPollInterval,
		Session:      Session{ConsoleDevice: DefaultConsoleDevice},
		Disk:         Disk{Path: DefaultDiskPath},
	}
	cfg.Disk.Floor, _ = parseFloor(DefaultDiskFloor)

	if f.Listen != "" {
		if msg := validListen(f.Listen); msg != "" {
			errs.add("listen", "%s", msg)
		}
		cfg.Listen = f.Listen
	}
	cfg.TLS, _ = f.TLS.validate(&errs)
	cfg.Token = f.Token.validate(&errs)
	if f.PollInterval != "" {
		d, err := time.ParseDuration(string(f.PollInterval))
		switch {
		case err != nil:
			errs.add("pollInterval", "must be a duration such as \"5s\"")
		case d < MinPollInterval:
			errs.add("pollInterval", "must be at least %s", MinPollInterval)
		default:
			cfg.PollInterval = d
		}
	}
	if f.OSVersionCommand != nil {
		if len(f.OSVersionCommand) == 0 || !filepath.IsAbs(f.OSVersionCommand[0]) {
			errs.add("osVersionCommand", "must be an argv list whose first element is an absolute path, such as [/usr/bin/sw_vers, -productVersion]")
		}
		cfg.OSVersionCommand = f.OSVersionCommand
	}
	if p := f.Session.ConsoleDevice; p != "" {
		if !filepath.IsAbs(p) {
			errs.add("session.consoleDevice", "must be an absolute path")
		}
		cfg.Session.ConsoleDevice = p
	}
	if p := f.Disk.Path; p != "" {
		if !filepath.IsAbs(p) {
			errs.add("disk.path", "must be an absolute path")
		}
		cfg.Disk.Path = p
	}
	if f.Disk.Floor != "" {
		fl, err := parseFloor(string(f.Disk.Floor))
		if err != nil {
			errs.add("disk.floor", "%v", err)
		}
		cfg.Disk.Floor = fl
	}

	if len(f.Checks) > MaxChecks {
		errs.add("checks", "at most %d checks", MaxChecks)
	}
	seen := map[string]int{}
	for i, fc := range f.Checks {
		field := fmt.Sprintf("checks[%d]", i)
		c := fc.validate(field, &errs)
		if c.Name != "" {
			if j, dup := seen[c.Name]; dup {
				errs.add(field+".name", "duplicates checks[%d].name %q", j, c.Name)
			}
			seen[c.Name] = i
		}
		cfg.Checks = append(cfg.Checks, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

func (f fileTLS) validate(errs *fieldErrors) (TLS, bool) {
	if (f.CertFile == "") != (f.KeyFile == "") {
		errs.add("tls", "set both certFile and keyFile, or neither")
		return TLS{}, false
	}
	if f.CertFile != "" && !filepath.IsAbs(f.CertFile) {
		errs.add("tls.certFile", "must be an absolute path")
	}
	if f.KeyFile != "" && !filepath.IsAbs(f.KeyFile) {
		errs.add("tls.keyFile", "must be an absolute path")
	}
	return TLS(f), f.CertFile != ""
}

func (f fileToken) validate(errs *fieldErrors) Token {
	switch {
	case f.File != "" && f.NVRAMVariable != "":
		errs.add("token", "set only one of file and nvramVariable")
	case f.File != "":
		if !filepath.IsAbs(f.File) {
			errs.add("token.file", "must be an absolute path")
		}
	case f.NVRAMVariable != "":
		guid, name, ok := strings.Cut(f.NVRAMVariable, ":")
		if !ok || !validGUID(guid) || name == "" || strings.ContainsAny(name, " \t\n:") {
			errs.add("token.nvramVariable", "must be \"<GUID>:<name>\"")
		}
	default:
		f.NVRAMVariable = DefaultNVRAMVariable
	}
	return Token(f)
}

func (f fileCheck) validate(field string, errs *fieldErrors) Check {
	c := Check{Name: f.Name, Kind: api.CheckKind(f.Kind), Path: f.Path, Command: f.Command, Address: f.Address, Timeout: DefaultCheckTimeout}
	if !validName(f.Name) {
		errs.add(field+".name", "must be 1-63 characters of A-Z a-z 0-9 . _ -")
	}
	if f.Timeout != "" {
		d, err := time.ParseDuration(string(f.Timeout))
		switch {
		case err != nil:
			errs.add(field+".timeout", "must be a duration such as \"10s\"")
		case d <= 0:
			errs.add(field+".timeout", "must be positive")
		case d > MaxCheckTimeout:
			errs.add(field+".timeout", "must be at most %s", MaxCheckTimeout)
		default:
			c.Timeout = d
		}
	}
	// used lists the kind-specific fields that are set, so a field that
	// belongs to another kind is caught as a likely mistake.
	used := map[string]bool{"path": f.Path != "", "command": f.Command != nil, "address": f.Address != "", "floor": f.Floor != ""}
	want := map[string]bool{}
	switch c.Kind {
	case api.CheckPathExists:
		want["path"] = true
		if !filepath.IsAbs(f.Path) {
			errs.add(field+".path", "must be an absolute path")
		}
	case api.CheckCommand:
		want["command"] = true
		if len(f.Command) == 0 || f.Command[0] == "" {
			errs.add(field+".command", "must be a non-empty argv list")
		}
	case api.CheckDiskFree:
		want["path"], want["floor"] = true, true
		if !filepath.IsAbs(f.Path) {
			errs.add(field+".path", "must be an absolute path")
		}
		if f.Floor == "" {
			errs.add(field+".floor", "required")
		} else if fl, err := parseFloor(string(f.Floor)); err != nil {
			errs.add(field+".floor", "%v", err)
		} else {
			c.Floor = fl
		}
	case api.CheckTCPPort:
		want["address"] = true
		if msg := validAddress(f.Address); msg != "" {
			errs.add(field+".address", "%s", msg)
		}
	case "":
		errs.add(field+".kind", "required")
		return c
	default:
		errs.add(field+".kind", "unknown kind %q (want pathExists, command, diskFree or tcpPort)", f.Kind)
		return c
	}
	for _, k := range []string{"path", "command", "address", "floor"} {
		if used[k] && !want[k] {
			errs.add(field+"."+k, "not used by kind %s", c.Kind)
		}
	}
	return c
}

// parseFloor accepts a percentage ("5%", 0 < p <= 100), a plain byte count,
// or a quantity with a binary (Ki, Mi, Gi, Ti) or decimal (K, M, G, T)
// suffix.
func parseFloor(s string) (Floor, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0 && v <= 100) {
			return Floor{}, fmt.Errorf("invalid percentage %q (want 0 < p <= 100)", s)
		}
		return Floor{Percent: v}, nil
	}
	mult := uint64(1)
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > (1<<63)/mult {
		return Floor{}, fmt.Errorf("invalid quantity (want e.g. \"10Gi\", \"500M\", \"1073741824\" or \"5%%\")")
	}
	return Floor{Bytes: n * mult}, nil
}

func validListen(l string) string {
	_, port, err := net.SplitHostPort(l)
	if err != nil {
		return "must be host:port (host may be empty)"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return "invalid port"
	}
	return ""
}

func validAddress(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return "must be host:port"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "invalid port"
	}
	return ""
}

func validName(n string) bool {
	if len(n) == 0 || len(n) > 63 {
		return false
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validGUID(g string) bool {
	if len(g) != 36 {
		return false
	}
	for i, c := range g {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}
