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
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Once the server is told to stop, every HTTP/1.1 answer closes its
// connection; before, none does; HTTP/2 is left to the server's GOAWAY.
func TestCloseConnectionsWhenStopping(t *testing.T) {
	stopping := make(chan struct{})
	h := closeConnectionsWhenStopping(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}), stopping)
	answer := func(protoMajor int) string {
		r := httptest.NewRequest(http.MethodGet, "/apis/dockerios.io/v1alpha1", nil)
		r.ProtoMajor = protoMajor
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Header().Get("Connection")
	}
	assert.Empty(t, answer(1), "serving: connections are kept")
	close(stopping)
	assert.Equal(t, "close", answer(1), "stopping: every HTTP/1.1 answer closes its connection")
	assert.Empty(t, answer(2), "HTTP/2 ends its connections with GOAWAY")

	// Over a real connection: the client sees the answer and does not
	// send another request on it.
	srv := httptest.NewServer(closeConnectionsWhenStopping(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}), stopping))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if assert.NoError(t, err) {
		resp.Body.Close()
		assert.True(t, resp.Close, "the client knows the connection ends")
	}
}
