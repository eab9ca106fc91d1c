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

package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/dockerios/dockerios/agent/api"
	"github.com/dockerios/dockerios/agent/client"
)

// insecureHTTP is a plain HTTPS client for poking at the agent the way a
// hostile caller would.
func insecureHTTP() *http.Client {
	return &http.Client{
		Timeout:   20 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
}

func httpRequest(url string, header map[string]string) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return req, nil
}

func signedHeaders(token string) map[string]string {
	nonce, err := client.NewNonce()
	if err != nil {
		panic(err)
	}
	ts := fmt.Sprint(time.Now().Unix())
	return map[string]string{
		api.HeaderNonce:     nonce,
		api.HeaderTimestamp: ts,
		api.HeaderSignature: api.EncodeMAC(api.RequestMAC([]byte(token), http.MethodGet, api.StatusPath, ts, nonce)),
	}
}

func readAll(resp *http.Response) []byte {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return b
}

type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }
