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

package app

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/pflag"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// ShutdownOptions are the generic apiserver's graceful termination, set
// by the flags of the same names as kube-apiserver's.
type ShutdownOptions struct {
	// Delay: from SIGTERM, /readyz fails at once while every request is
	// still served, for this long, so that whatever routes to the
	// replica (Endpoints, kube-proxy, kube-apiserver's aggregator) stops
	// sending it new ones first. Zero by default: a single replica has
	// nowhere else to send them; artifacts/ha, three replicas behind one
	// Service, sets it.
	Delay time.Duration
	// SendRetryAfter: once Delay is over, a request still arriving is
	// answered 429 with Retry-After and Connection: close, so its client
	// retries on a new connection, while the server keeps listening until
	// the requests in flight are done; otherwise it stops listening at
	// once.
	SendRetryAfter bool
	// WatchTerminationGracePeriod, when positive, is how long watches
	// may take to end after the requests in flight are done.
	WatchTerminationGracePeriod time.Duration
}

// AddFlags adds the shutdown flags to fs.
func (s *ShutdownOptions) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&s.Delay, "shutdown-delay-duration", s.Delay, "Time to delay the termination when told to stop (SIGTERM): meanwhile /readyz fails, requests are served, and every HTTP/1.1 answer closes its connection, so that load balancers, Endpoints and kube-apiserver's aggregator move to other replicas first. Set it (with a longer terminationGracePeriodSeconds) whenever more than one replica serves; 0 stops at once.")
	fs.BoolVar(&s.SendRetryAfter, "shutdown-send-retry-after", s.SendRetryAfter, "After --shutdown-delay-duration, keep listening until the requests in flight are done and answer new ones 429 with Retry-After and Connection: close, so their clients retry on a new connection; if false, stop listening at once.")
	fs.DurationVar(&s.WatchTerminationGracePeriod, "shutdown-watch-termination-grace-period", s.WatchTerminationGracePeriod, "If positive, how long the server waits for active watches to end during graceful termination.")
}

// Validate checks the shutdown flags.
func (s *ShutdownOptions) Validate() []error {
	var errs []error
	if s.Delay < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-delay-duration must not be negative, not %s", s.Delay))
	}
	if s.WatchTerminationGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-watch-termination-grace-period must not be negative, not %s", s.WatchTerminationGracePeriod))
	}
	return errs
}

// ApplyTo sets the shutdown options in cfg, and has every HTTP/1.1
// answer close its connection once stopping is closed (SIGTERM).
func (s *ShutdownOptions) ApplyTo(cfg *genericapiserver.Config, stopping <-chan struct{}) {
	cfg.ShutdownDelayDuration = s.Delay
	cfg.ShutdownSendRetryAfter = s.SendRetryAfter
	cfg.ShutdownWatchTerminationGracePeriod = s.WatchTerminationGracePeriod
	build := cfg.BuildHandlerChainFunc
	cfg.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return closeConnectionsWhenStopping(build(h, c), stopping)
	}
}

// closeConnectionsWhenStopping answers every HTTP/1.x request with
// Connection: close once stopping is closed. Over HTTP/1.1 a client
// learns from the answer itself that its connection ends, before it can
// send another request on it: through --shutdown-delay-duration,
// kube-apiserver's aggregator retires its keep-alive connections to this
// replica one answer at a time and opens new ones, which the Service
// routes to the ready replicas, and none is in use when the server
// finally closes what is left. (Closing a connection between requests
// instead races a request the client is sending on it, and the aggregator
// cannot send a proxied request body again: the client gets 503. HTTP/2's
// GOAWAY races the same way, hence --disable-http2-serving in
// artifacts/ha.)
func closeConnectionsWhenStopping(h http.Handler, stopping <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 {
			select {
			case <-stopping:
				w.Header().Set("Connection", "close")
			default:
			}
		}
		h.ServeHTTP(w, r)
	})
}
