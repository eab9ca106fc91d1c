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

// Package host reads the few facts about the operating system the agent
// reports: volume usage, who owns the console, and when the OS booted.
// Everything platform-specific lives here, behind build tags.
package host

import (
	"errors"
	"time"
)

// ErrUnsupported is returned on platforms the agent does not target.
var ErrUnsupported = errors.New("not supported on this platform")

// Usage is the size of a volume and what an unprivileged process can still
// allocate on it (the root reserve is not counted as free).
type Usage struct {
	TotalBytes uint64
	FreeBytes  uint64
}

// DiskUsage reports the volume holding path.
func DiskUsage(path string) (Usage, error) { return diskUsage(path) }

// ConsoleOwner returns the uid owning the console device at path. On macOS
// loginwindow chowns /dev/console to the user whose session is in the
// foreground and back to root at the login window.
func ConsoleOwner(path string) (uint32, error) { return consoleOwner(path) }

// BootTime is when the operating system booted.
func BootTime() (time.Time, error) { return bootTime() }
