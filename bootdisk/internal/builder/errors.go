// Copyright The DockerIOS Authors.
// SPDX-License-Identifier: GPL-3.0-or-later
//
// This file is part of the DockerIOS bootdisk builder, which is free
// software: you can redistribute it and/or modify it under the terms of the
// GNU General Public License as published by the Free Software Foundation,
// either version 3 of the License, or (at your option) any later version.
// See bootdisk/LICENSE.

// Package builder renders per-machine OpenCore boot disks and generates
// identity rows. It is the GPL-3.0 side of DockerIOS: the Apache-2.0 module
// never imports it.
package builder

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// Exit codes of the bootdisk command; README.md documents them as the Job
// contract.
const (
	// ExitOK: the artifact is published (or was already, identically).
	ExitOK = 0
	// ExitFailure: anything else (a tool failed, an internal error); a retry
	// may succeed.
	ExitFailure = 1
	// ExitInvalidInput: bad arguments, identity values, token, template or
	// EFI tree. The same input fails again: do not retry.
	ExitInvalidInput = 2
	// ExitOutputVolume: the output volume is missing, read-only, full or
	// failing. Retrying on the same volume fails again.
	ExitOutputVolume = 3
)

// Error carries an exit code and a one-line reason.
type Error struct {
	Code   int
	Reason string
	Err    error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

func (e *Error) Unwrap() error { return e.Err }

// Invalid returns an ExitInvalidInput error.
func Invalid(format string, args ...any) error {
	return &Error{Code: ExitInvalidInput, Reason: fmt.Sprintf(format, args...)}
}

// OutputErr wraps an error met writing the output volume. Errors that say
// the volume is read-only, full or over quota get ExitOutputVolume; others
// on the volume too, since nothing but the volume is involved.
func OutputErr(what string, err error) error {
	if err == nil {
		return nil
	}
	reason := "output volume: " + what
	switch {
	case errors.Is(err, syscall.EROFS):
		reason += ": read-only file system"
	case errors.Is(err, syscall.ENOSPC):
		reason += ": no space left on device"
	case errors.Is(err, syscall.EDQUOT):
		reason += ": disk quota exceeded"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		reason += ": permission denied"
	default:
		return &Error{Code: ExitOutputVolume, Reason: reason, Err: err}
	}
	return &Error{Code: ExitOutputVolume, Reason: reason}
}

// ExitCode returns the exit code for err.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ExitFailure
}

// OneLine returns err as a single line of at most 1 KiB, fit for a
// Kubernetes termination message (which is capped at 4 KiB).
func OneLine(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 1024 {
		s = s[:1021] + "..."
	}
	return s
}
