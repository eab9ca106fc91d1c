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
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	protobuf         = "application/vnd.kubernetes.protobuf"
	metadataProtobuf = protobuf + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	metadataJSON     = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	// What client-go's metadata client sends for a list.
	metadataClientList = protobuf + ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)

func TestProtobufOnlyForMetadata(t *testing.T) {
	const claims = "/apis/dockerios.io/v1alpha1/namespaces/ci/macosmachineclaims"
	for _, tc := range []struct {
		name, method, path, accept, contentType string
		// wantAccept is the Accept the group's handlers see; wantCode is
		// the refusal when they see nothing.
		wantAccept string
		wantCode   int
	}{
		{name: "JSON is untouched", path: claims, accept: "application/json", wantAccept: "application/json"},
		{name: "no Accept is untouched", path: claims, accept: "", wantAccept: ""},
		{name: "the metadata client's list keeps protobuf", path: claims, accept: metadataClientList, wantAccept: metadataClientList},
		{name: "metadata in protobuf, v1beta1", path: claims,
			accept:     protobuf + ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1",
			wantAccept: protobuf + ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1"},
		{name: "a protobuf-first client gets JSON", path: claims, accept: protobuf + ", application/json", wantAccept: "application/json"},
		{name: "a table is never protobuf", path: claims,
			accept:     protobuf + ";as=Table;g=meta.k8s.io;v=v1,application/json;as=Table;g=meta.k8s.io;v=v1",
			wantAccept: "application/json;as=Table;g=meta.k8s.io;v=v1"},
		{name: "metadata of another group is not metadata", path: claims,
			accept:     protobuf + ";as=PartialObjectMetadata;g=dockerios.io;v=v1,application/json",
			wantAccept: "application/json"},
		{name: "q and several header lines", path: claims,
			accept:     protobuf + ";q=0.9, " + metadataProtobuf + "\x00application/yaml;q=0.5",
			wantAccept: metadataProtobuf + ",application/yaml;q=0.5"},
		{name: "protobuf alone is not acceptable", path: claims, accept: protobuf, wantCode: http.StatusNotAcceptable},
		{name: "a protobuf body is refused", method: http.MethodPost, path: claims, contentType: protobuf, accept: "application/json", wantCode: http.StatusUnsupportedMediaType},
		{name: "a protobuf body to a subresource is refused", method: http.MethodPut, path: claims + "/c/status", contentType: protobuf, wantCode: http.StatusUnsupportedMediaType},
		{name: "DeleteOptions may be protobuf", method: http.MethodDelete, path: claims + "/c", contentType: protobuf, accept: metadataJSON, wantAccept: metadataJSON},
		{name: "group discovery", path: "/apis/dockerios.io", accept: protobuf + ",application/json", wantAccept: "application/json"},
		{name: "outside the group nothing changes", path: "/apis/dockerios.iox/v1", accept: protobuf, wantAccept: protobuf},
		{name: "outside the group a body is not judged", method: http.MethodPost, path: "/metrics", contentType: protobuf, accept: protobuf, wantAccept: protobuf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen *http.Request
			h := protobufOnlyForMetadata(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r }))
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			req := httptest.NewRequest(method, tc.path, nil)
			for _, line := range strings.Split(tc.accept, "\x00") {
				if line != "" {
					req.Header.Add("Accept", line)
				}
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			if tc.wantCode != 0 {
				assert.Nil(t, seen, "a refused request reaches no handler")
				require.Equal(t, tc.wantCode, rec.Code)
				assert.Equal(t, "application/json", rec.Header().Get("Content-Type"), "a refusal is a Status in JSON")
				var status metav1.Status
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &status), rec.Body.String())
				assert.Equal(t, int32(tc.wantCode), status.Code)
				assert.Contains(t, status.Message, "application/json")
				if tc.wantCode == http.StatusNotAcceptable {
					assert.Contains(t, status.Message, "as=PartialObjectMetadata", "a 406 says metadata may be protobuf")
				}
				return
			}
			require.NotNil(t, seen, "the request reaches the group's handlers")
			assert.Equal(t, tc.wantAccept, strings.Join(seen.Header.Values("Accept"), ","))
		})
	}
}
