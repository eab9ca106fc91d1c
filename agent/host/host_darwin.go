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
	"encoding/binary"
	"errors"
	"syscall"
	"time"
)

// bootTime decodes kern.boottime, a struct timeval. Both darwin targets
// (amd64, arm64) are little-endian with a 64-bit tv_sec first.
func bootTime() (time.Time, error) {
	v, err := syscall.Sysctl("kern.boottime")
	if err != nil {
		return time.Time{}, err
	}
	if len(v) < 12 {
		return time.Time{}, errors.New("kern.boottime: short value")
	}
	b := []byte(v)
	sec := int64(binary.LittleEndian.Uint64(b[0:8]))
	usec := int64(binary.LittleEndian.Uint32(b[8:12]))
	return time.Unix(sec, usec*1000), nil
}
