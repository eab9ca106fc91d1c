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

// Package token reads the per-machine token the agent authenticates with.
// On a golden image the bootdisk puts it in an NVRAM variable, so the disk
// image itself holds no secret and every clone gets its own; tests use a
// file.
package token

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/dockerios/dockerios/agent/config"
)

const (
	MinLen = 32
	MaxLen = 256
)

// ErrUnsupported means the token source does not exist on this platform.
var ErrUnsupported = errors.New("NVRAM tokens are only available on macOS")

// Read returns the token named by src, validated.
func Read(ctx context.Context, src config.Token) ([]byte, error) {
	var (
		raw []byte
		err error
	)
	if src.File != "" {
		raw, err = readFile(src.File)
	} else {
		var out []byte
		out, err = readNVRAM(ctx, src.NVRAMVariable)
		if err == nil {
			raw, err = ParseNVRAMOutput(out)
		}
		if err != nil {
			err = fmt.Errorf("NVRAM variable %s: %w", src.NVRAMVariable, err)
		}
	}
	if err != nil {
		return nil, err
	}
	return validate(bytes.TrimSpace(raw))
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxLen+64))
}

func validate(t []byte) ([]byte, error) {
	if len(t) < MinLen || len(t) > MaxLen {
		return nil, fmt.Errorf("token must be %d to %d characters, got %d", MinLen, MaxLen, len(t))
	}
	for _, c := range t {
		if c <= ' ' || c > '~' {
			return nil, errors.New("token must be printable ASCII without whitespace")
		}
	}
	return t, nil
}

// ParseNVRAMOutput extracts the value from `nvram <guid>:<name>` output,
// which is "<name>\t<value>\n" with bytes outside printable ASCII written
// as %xx.
func ParseNVRAMOutput(out []byte) ([]byte, error) {
	line, _, _ := bytes.Cut(out, []byte("\n"))
	_, value, ok := bytes.Cut(line, []byte("\t"))
	if !ok {
		return nil, errors.New("unexpected nvram output")
	}
	v, err := url.PathUnescape(strings.TrimRight(string(value), "\r"))
	if err != nil {
		return nil, fmt.Errorf("nvram value: %w", err)
	}
	// OpenCore string values may be stored NUL-terminated.
	return []byte(strings.TrimRight(v, "\x00")), nil
}
