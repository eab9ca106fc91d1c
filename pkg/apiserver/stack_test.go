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

package apiserver

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"k8s.io/apiserver/pkg/authentication/authenticator"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/scheme"
)

// frameBytes is about what one call of descend takes of the stack.
const frameBytes = 256

// descend calls itself depth times, each call holding frameBytes of stack,
// as a request's handler chain does on its way to the handler.
//
//go:noinline
func descend(depth int, then func()) byte {
	var frame [frameBytes]byte
	if depth == 0 {
		then()
		return frame[depth]
	}
	frame[depth%frameBytes] = byte(depth)
	return descend(depth-1, then) + frame[depth%frameBytes]
}

// stackMovedDuring reports whether the calling goroutine's stack was
// copied elsewhere (grown) while f ran. Growing moves every frame: a
// variable's address, taken as a number before, no longer matches.
func stackMovedDuring(f func()) bool {
	var here byte
	before := uintptr(unsafe.Pointer(&here))
	f()
	return uintptr(unsafe.Pointer(&here)) != before
}

// inNewGoroutine runs f in a goroutine of its own, which starts with a
// new stack as a request's do, and returns what f returned.
func inNewGoroutine(f func() bool) bool {
	done := make(chan bool)
	go func() { done <- f() }()
	return <-done
}

// TestGrowStack_ARequestsStackIsNotCopiedOnItsWayDown: a call as deep as
// a create's (under requestStack) moves a new goroutine's stack, unless it
// grew first, as growStackFirst and the authenticator make it do.
func TestGrowStack_ARequestsStackIsNotCopiedOnItsWayDown(t *testing.T) {
	const depth = (requestStack - 4<<10) / frameBytes // leave room for the frames above
	deep := func() { descend(depth, func() {}) }
	tests := []struct {
		name string
		run  func() bool
		want bool
	}{{
		// Without it, the goroutine's stack grows on the way: the test
		// can see a move.
		name: "a new goroutine",
		run:  func() bool { return stackMovedDuring(deep) },
		want: true,
	}, {
		name: "a handler under growStackFirst",
		run: func() bool {
			var moved bool
			growStackFirst(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				moved = stackMovedDuring(deep)
			})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
			return moved
		},
	}, {
		name: "an authenticator under stackGrowingAuthenticator",
		run: func() bool {
			var moved bool
			_, _, _ = stackGrowingAuthenticator{authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
				moved = stackMovedDuring(deep)
				return nil, false, nil
			})}.AuthenticateRequest(httptest.NewRequest(http.MethodGet, "/", nil))
			return moved
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, inNewGoroutine(tt.run), "stack moved")
		})
	}
}

// BenchmarkServeWithStackGrownFirst measures what growing the stack first
// saves a request: a new goroutine goes 60 frames down, as the handler
// chain does, and decodes a claim there, as the create handler does.
//
//	go test ./pkg/apiserver -run '^$' -bench ServeWithStackGrownFirst
func BenchmarkServeWithStackGrownFirst(b *testing.B) {
	body := []byte(`{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachineClaim","metadata":{"name":"c","namespace":"ns","labels":{"team":"ios"}},"spec":{"poolName":"warm","selector":{"matchLabels":{"region":"eu"}}}}`)
	decoder := scheme.Codecs.UniversalDecoder(dockerio.SchemeGroupVersion)
	request := func() {
		descend(60, func() {
			var claim dockerio.MacOSMachineClaim
			if _, _, err := decoder.Decode(body, nil, &claim); err != nil {
				b.Fatal(err)
			}
		})
	}
	for _, bc := range []struct {
		name  string
		first func()
	}{{"bare", func() {}}, {"grownFirst", func() { growStack(0) }}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				done := make(chan struct{})
				go func() {
					bc.first()
					request()
					close(done)
				}()
				<-done
			}
		})
	}
}
