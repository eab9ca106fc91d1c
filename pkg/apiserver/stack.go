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

	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// A request is served by goroutines that each start with a small stack:
// the HTTP server's (one per request over HTTP/2, one per connection over
// HTTP/1.1, which keeps what it grew), and below the generic
// handler chain's timeout filter a goroutine of its own, which runs
// authentication, authorization, priority and fairness and the handler.
// The Go runtime starts a goroutine's stack at the average size it has
// seen (a few KiB here, where most goroutines are idle watchers) and,
// whenever a call needs more, doubles it and copies it, adjusting every
// frame on it. A create needs several doublings, the last ones deep in
// decoding the request, where each copy walks a hundred frames: in
// profiles of claims bound through kube-apiserver at 50 clients that was
// 6–10% of our server's CPU, and 3.3–3.6% once both goroutines grew
// first (docs/contributors/benchmarks.md).
//
// So both goroutines grow their stacks first, at their top, where a copy
// walks a handful of frames. A stack that grew stays grown until a garbage
// collection finds it mostly unused, which costs each request in flight a
// few tens of KiB at most. (The goroutine the generic handlers run a
// write's storage call in starts small too; it is left alone: it copies
// less, and the first of our code it runs is a registry's.)

// requestStack is how much further a request's goroutines grow their
// stacks: with 16 KiB the timeout filter's goroutine all but stopped
// copying its stack in a claim's create, and 32 KiB did no better.
const requestStack = 16 << 10

// growStack makes the calling goroutine's stack hold at least
// requestStack bytes more than it uses now. The index keeps the compiler
// from dropping the array it grows the stack for.
//
//go:noinline
func growStack(index int) byte {
	var room [requestStack]byte
	return room[index&(len(room)-1)]
}

// growStackFirst grows the stack of the goroutine the HTTP server runs a
// request in before the handler chain starts.
func growStackFirst(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		growStack(0)
		h.ServeHTTP(w, r)
	})
}

// stackGrowingAuthenticator grows the stack of the timeout filter's
// goroutine: the authenticator is the first of our code that goroutine
// runs, a few frames from its top.
type stackGrowingAuthenticator struct{ authenticator.Request }

func (a stackGrowingAuthenticator) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	growStack(0)
	return a.Request.AuthenticateRequest(r)
}
