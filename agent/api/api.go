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

// Package api is THE contract between the DockerIOS guest agent and its
// callers. The agent's server and the controller's client both import it, so
// a change here is a protocol change: keep it backwards compatible (add
// fields, never rename or repurpose them) or bump the path version.
//
// # Authentication
//
// Caller and agent share a per-machine token (see the agent README for
// where it lives). The token itself never crosses the wire, so an impostor
// that inherits a machine's IP address learns nothing it could replay:
//
//   - the caller sends a fresh random nonce, the current Unix time and
//     RequestMAC(token, method, path, timestamp, nonce);
//   - the agent answers with ResponseMAC(token, nonce, body) over the exact
//     body bytes, which tells the caller that the machine holding this
//     token produced this body for this request.
//
// Any authentication failure is a 401 with an empty body and no signature.
package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// StatusPath is the only authenticated endpoint.
const StatusPath = "/v1/status"

// Header names. HTTP header names are case-insensitive; these are the
// canonical forms Go uses.
const (
	// HeaderNonce carries the caller's nonce: MinNonceLen..MaxNonceLen
	// characters of the base64url alphabet (A-Z a-z 0-9 - _).
	HeaderNonce = "X-Dockerios-Nonce"
	// HeaderTimestamp carries the caller's clock as decimal Unix seconds.
	HeaderTimestamp = "X-Dockerios-Timestamp"
	// HeaderSignature carries hex(RequestMAC(...)).
	HeaderSignature = "X-Dockerios-Signature"
	// HeaderResponseSignature carries hex(ResponseMAC(...)) on every 200.
	HeaderResponseSignature = "X-Dockerios-Response-Signature"
)

const (
	MinNonceLen = 16
	MaxNonceLen = 64
	// MaxClockSkew bounds how far the caller's timestamp may be from the
	// agent's clock; it is also how long the agent remembers nonces.
	MaxClockSkew = 5 * time.Minute
	// MaxStatusBytes bounds a status body; the client refuses larger ones.
	MaxStatusBytes = 1 << 20
)

// RequestMAC is HMAC-SHA256(token, method+"\n"+path+"\n"+timestamp+"\n"+nonce).
// For the status call that is "GET\n/v1/status\n<unix seconds>\n<nonce>".
func RequestMAC(token []byte, method, path, timestamp, nonce string) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte(method + "\n" + path + "\n" + timestamp + "\n" + nonce))
	return m.Sum(nil)
}

// ResponseMAC is HMAC-SHA256(token, nonce+"\n"+body).
func ResponseMAC(token []byte, nonce string, body []byte) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte(nonce + "\n"))
	m.Write(body)
	return m.Sum(nil)
}

// EncodeMAC is the wire form of a MAC: lowercase hex.
func EncodeMAC(mac []byte) string { return hex.EncodeToString(mac) }

// VerifyMAC compares a wire-form MAC against the expected one in constant
// time. Malformed input simply fails.
func VerifyMAC(wire string, want []byte) bool {
	if len(wire) != hex.EncodedLen(len(want)) {
		return false
	}
	got, err := hex.DecodeString(wire)
	if err != nil {
		return false
	}
	return hmac.Equal(got, want)
}

// ValidNonce reports whether n is an acceptable nonce. The alphabet
// excludes "\n", so a nonce cannot smuggle extra lines into either MAC.
func ValidNonce(n string) bool {
	if len(n) < MinNonceLen || len(n) > MaxNonceLen {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// Stage is where a machine is on its way to accepting work.
type Stage string

const (
	// StageBooted: the agent runs, the console user session is not up yet.
	StageBooted Stage = "Booted"
	// StageSessionStarted: the console session is up; not every readiness
	// check has reported since.
	StageSessionStarted Stage = "SessionStarted"
	// StageProvisioning: every check has reported, some still fail.
	StageProvisioning Stage = "Provisioning"
	// StageReady: session up, every check passes, disk above its floor.
	StageReady Stage = "Ready"
	// StageDegraded: something that should hold does not: the config is
	// invalid, the disk is below its floor or unreadable, or a check or the
	// session failed after the machine had been Ready. Degraded recovers to
	// Ready as soon as everything holds again.
	StageDegraded Stage = "Degraded"
)

// Reason types; Reason.Message carries the detail.
const (
	ReasonConfigInvalid     = "ConfigInvalid"
	ReasonDiskBelowFloor    = "DiskBelowFloor"
	ReasonDiskUnreadable    = "DiskUnreadable"
	ReasonSessionNotStarted = "SessionNotStarted"
	ReasonSessionLost       = "SessionLost"
	ReasonCheckPending      = "CheckPending"
	ReasonCheckFailed       = "CheckFailed"
)

// CheckKind names what a readiness check does.
type CheckKind string

const (
	CheckPathExists CheckKind = "pathExists"
	CheckCommand    CheckKind = "command"
	CheckDiskFree   CheckKind = "diskFree"
	CheckTCPPort    CheckKind = "tcpPort"
)

// Status is the body of GET /v1/status.
type Status struct {
	Stage Stage `json:"stage"`
	// Reasons explain every stage but Ready, most important first.
	Reasons []Reason      `json:"reasons,omitempty"`
	Session Session       `json:"session"`
	Disk    Disk          `json:"disk"`
	Checks  []CheckResult `json:"checks"`
	// Transitions are the most recent stage changes, oldest first, so a
	// caller polling slowly still sees the whole progression.
	Transitions []Transition `json:"transitions,omitempty"`
	// ObservedAt is when the agent computed this status; a stale value
	// means the agent's poll loop is stuck even though it still answers.
	ObservedAt     time.Time `json:"observedAt"`
	BootTime       time.Time `json:"bootTime,omitzero"`
	UptimeSeconds  int64     `json:"uptimeSeconds"`
	AgentStartedAt time.Time `json:"agentStartedAt"`
	AgentVersion   string    `json:"agentVersion"`
	// OSVersion is the version of the operating system the agent runs on,
	// as `sw_vers -productVersion` prints it on macOS (for example
	// "14.6.1"), read once at start; empty when unknown.
	OSVersion string `json:"osVersion,omitempty"`
}

// Reason says why a machine is not Ready.
type Reason struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Transition records the moment the stage changed.
type Transition struct {
	Stage Stage     `json:"stage"`
	At    time.Time `json:"at"`
}

// Session is the console user session as the agent sees it.
type Session struct {
	Up bool `json:"up"`
	// ConsoleUID is the owner of the console device; 0 (root) means the
	// login window, i.e. no user session.
	ConsoleUID int64  `json:"consoleUID"`
	Message    string `json:"message,omitempty"`
}

// Disk is the headroom of the system volume. FreeBytes is what an
// unprivileged process can still allocate.
type Disk struct {
	Path       string `json:"path"`
	TotalBytes uint64 `json:"totalBytes"`
	FreeBytes  uint64 `json:"freeBytes"`
	FloorBytes uint64 `json:"floorBytes"`
	// Message is set when the volume could not be read.
	Message string `json:"message,omitempty"`
}

// CheckResult is the latest outcome of one readiness check. A check that
// has not finished its first run has a zero CheckedAt and OK false.
type CheckResult struct {
	Name           string    `json:"name"`
	Kind           CheckKind `json:"kind"`
	OK             bool      `json:"ok"`
	Message        string    `json:"message"`
	CheckedAt      time.Time `json:"checkedAt,omitzero"`
	DurationMillis int64     `json:"durationMillis"`
}

// Pending reports whether the check has not reported yet.
func (r CheckResult) Pending() bool { return r.CheckedAt.IsZero() }
