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

package host

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
	"unicode"
)

// osVersionTimeout bounds the command printing the OS version.
const osVersionTimeout = 10 * time.Second

// maxOSVersionLength bounds what is reported: a version, not a page.
const maxOSVersionLength = 64

// OSVersion runs argv — nil: the platform's command, DefaultOSVersionCommand
// (sw_vers -productVersion on macOS; none elsewhere, "" and no error) —
// and returns the first line it prints, trimmed, such as "14.6.1".
func OSVersion(ctx context.Context, argv []string) (string, error) {
	if argv == nil {
		argv = DefaultOSVersionCommand
	}
	if len(argv) == 0 {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, osVersionTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && len(exit.Stderr) > 0 {
			return "", fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(exit.Stderr)))
		}
		return "", fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	v, _, _ := strings.Cut(string(out), "\n")
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return "", fmt.Errorf("%s printed nothing", strings.Join(argv, " "))
	case len(v) > maxOSVersionLength:
		return "", fmt.Errorf("%s printed %d characters, not a version", strings.Join(argv, " "), len(v))
	case strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return "", fmt.Errorf("%s printed %q, not a version", strings.Join(argv, " "), v)
	}
	return v, nil
}
