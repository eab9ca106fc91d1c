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

// Package checks runs the image-defined readiness checks. The agent does
// not know what a check means; it only knows the four kinds of probe and
// that none of them may hold up the API: each runs under its own timeout,
// and callers read results, never run checks inline.
package checks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/config"
	"github.com/dockerios/dockerios/agent/host"
)

// maxMessage bounds the message of one result, so a chatty command cannot
// grow the status body.
const maxMessage = 512

// Run runs c once and returns by c.Timeout at the latest.
func Run(ctx context.Context, c config.Check) api.CheckResult {
	res, _ := start(ctx, c, time.Now)
	return res
}

type outcome struct {
	ok  bool
	msg string
}

// start runs the probe for c in its own goroutine and returns its result,
// or a timeout failure once c.Timeout has passed. finished closes when the
// probe goroutine has returned: commands are killed at the deadline, but a
// stat on a hung filesystem cannot be, and the Runner must not pile up
// goroutines behind it.
func start(ctx context.Context, c config.Check, now func() time.Time) (res api.CheckResult, finished <-chan struct{}) {
	began := now()
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	done := make(chan outcome, 1)
	fin := make(chan struct{})
	go func() {
		defer close(fin)
		defer cancel()
		ok, msg := probe(ctx, c)
		done <- outcome{ok, msg}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		// The probe may have finished at the same instant; prefer its word.
		select {
		case o = <-done:
		default:
			o = outcome{false, timeoutMessage(c)}
		}
	}
	if len(o.msg) > maxMessage {
		o.msg = o.msg[:maxMessage-3] + "..."
	}
	end := now()
	return api.CheckResult{
		Name:           c.Name,
		Kind:           c.Kind,
		OK:             o.ok,
		Message:        o.msg,
		CheckedAt:      end,
		DurationMillis: end.Sub(began).Milliseconds(),
	}, fin
}

func timeoutMessage(c config.Check) string {
	if c.Kind == api.CheckCommand {
		return fmt.Sprintf("timed out after %s; process group killed", c.Timeout)
	}
	return fmt.Sprintf("timed out after %s", c.Timeout)
}

func probe(ctx context.Context, c config.Check) (bool, string) {
	switch c.Kind {
	case api.CheckPathExists:
		if _, err := os.Stat(c.Path); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return false, c.Path + " does not exist"
			}
			return false, err.Error()
		}
		return true, c.Path + " exists"
	case api.CheckCommand:
		return runCommand(ctx, c)
	case api.CheckDiskFree:
		d := MeasureDisk(c.Path, c.Floor)
		return DiskAboveFloor(d)
	case api.CheckTCPPort:
		var dialer net.Dialer
		conn, err := dialer.DialContext(ctx, "tcp", c.Address)
		if err != nil {
			if ctx.Err() != nil {
				return false, timeoutMessage(c)
			}
			return false, err.Error()
		}
		conn.Close()
		return true, c.Address + " accepts connections"
	default:
		return false, fmt.Sprintf("unknown kind %q", c.Kind)
	}
}

// MeasureDisk reads the volume at path and resolves floor against it.
func MeasureDisk(path string, floor config.Floor) api.Disk {
	d := api.Disk{Path: path}
	u, err := host.DiskUsage(path)
	if err != nil {
		d.Message = err.Error()
		return d
	}
	d.TotalBytes, d.FreeBytes, d.FloorBytes = u.TotalBytes, u.FreeBytes, floor.Resolve(u.TotalBytes)
	return d
}

// DiskAboveFloor judges a measurement; the message names the volume.
func DiskAboveFloor(d api.Disk) (bool, string) {
	if d.Message != "" {
		return false, d.Message
	}
	msg := fmt.Sprintf("%s: %s free of %s, floor %s", d.Path, FormatBytes(d.FreeBytes), FormatBytes(d.TotalBytes), FormatBytes(d.FloorBytes))
	if d.FreeBytes < d.FloorBytes {
		return false, msg
	}
	return true, msg
}

// FormatBytes renders n in binary units for messages.
func FormatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
