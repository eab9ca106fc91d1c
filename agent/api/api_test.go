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

package api

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Known-answer vectors pin the wire definitions, computed independently
// (Python's hmac module), so that a non-Go implementation can check itself
// against the same numbers.
func TestMACs_KnownAnswers(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	assert.Equal(t, "b1012eebf26a591c821a6cb0374c3d9f60260848ffebc2654b29f3e39993783d",
		EncodeMAC(RequestMAC(key, "GET", StatusPath, "1767323045", "nonce-0123456789abcdef")))
	assert.Equal(t, "51da330bb212b77b23964891737c5ee4e5b703ed6a3af787b41cb63953385109",
		EncodeMAC(ResponseMAC(key, "nonce-0123456789abcdef", []byte(`{"stage":"Ready"}`))))
}

func TestVerifyMAC(t *testing.T) {
	mac := ResponseMAC([]byte("k"), "n", []byte("b"))
	wire := EncodeMAC(mac)
	assert.True(t, VerifyMAC(wire, mac))
	assert.True(t, VerifyMAC(strings.ToUpper(wire), mac))
	assert.False(t, VerifyMAC("", mac))
	assert.False(t, VerifyMAC(wire[:62], mac))
	assert.False(t, VerifyMAC(wire+"00", mac))
	assert.False(t, VerifyMAC(strings.Repeat("g", 64), mac))
	assert.False(t, VerifyMAC(EncodeMAC(ResponseMAC([]byte("k"), "n", []byte("c"))), mac))
}

func TestValidNonce(t *testing.T) {
	for n, want := range map[string]bool{
		"nonce-0123456789":                 true,
		strings.Repeat("A", MaxNonceLen):   true,
		strings.Repeat("A", MaxNonceLen+1): false,
		"short":                            false,
		"nonce-0123456789\n":               false,
		"nonce 0123456789ab":               false,
		"nonce+0123456789ab":               false,
		"nonce/0123456789ab":               false,
		"nonce=0123456789ab":               false,
	} {
		assert.Equal(t, want, ValidNonce(n), "%q", n)
	}
}
