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
	"mime"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/scheme"
)

// groupPath is where the dockerios.io group is served.
const groupPath = "/apis/" + dockerio.GroupName

// protobufOnlyForMetadata lets the group offer protobuf for the one thing
// it can encode in it: an object's metadata (PartialObjectMetadata and its
// list, meta.k8s.io kinds that have a protobuf form). That is what
// kube-controller-manager's garbage collector and namespace controller ask
// for, protobuf first, on every list and watch of our kinds. A list or a
// get transformed into metadata is negotiated against the meta kinds'
// codecs and was protobuf already; a watch's stream is negotiated against
// the group's serializer, and answered in JSON every claim and machine
// written cost our server a JSON encoding and the garbage collector a JSON
// decoding of its metadata.
//
// Our kinds themselves are not served in protobuf. They have a protobuf
// encoding (v1alpha1/generated.pb.go), but only storage uses it, and only
// when --storage-media-type asks: a release that serves it waits, as
// storage's default does, until no replica a rolling upgrade can meet
// lacks it, so that every replica answers a client alike. (Before that
// encoding, offering protobuf got a client preferring it a 500, and a
// namespace holding our objects stayed Terminating for ever:
// kubernetes/kubernetes#86666.) The generic handlers negotiate against
// everything the group's serializer offers; CRDs narrow it with the
// request scope's StandardSerializers, which the generic API installer
// does not expose, and this filter does the same from outside: protobuf clauses of Accept that
// do not ask for metadata are taken out (a client that accepts nothing
// else gets a 406, as before), and a body sent in protobuf is refused with
// a 415 (the delete handlers decode DeleteOptions with their own codecs,
// so a DELETE is left alone).
func protobufOnlyForMetadata(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !inGroup(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodDelete && isProtobuf(r.Header.Get("Content-Type")) {
			refuse(w, r, negotiation.NewUnsupportedMediaTypeError(jsonOrYAML))
			return
		}
		accept := r.Header.Values("Accept")
		if len(accept) == 0 || !strings.Contains(strings.Join(accept, ","), "protobuf") {
			h.ServeHTTP(w, r)
			return
		}
		kept, ok := withoutObjectProtobuf(accept)
		if !ok {
			refuse(w, r, negotiation.NewNotAcceptableError(servable))
			return
		}
		r = r.Clone(r.Context())
		r.Header.Set("Accept", kept)
		h.ServeHTTP(w, r)
	})
}

var (
	// jsonOrYAML is what our kinds are served and accepted in.
	jsonOrYAML = []string{runtime.ContentTypeJSON, runtime.ContentTypeYAML}
	// servable is what a response of the group can be in.
	servable = []string{runtime.ContentTypeJSON, runtime.ContentTypeYAML,
		runtime.ContentTypeProtobuf + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"}
)

func inGroup(path string) bool {
	return path == groupPath || strings.HasPrefix(path, groupPath+"/")
}

func isProtobuf(contentType string) bool {
	if !strings.Contains(contentType, "protobuf") {
		return false // every JSON, YAML and patch body, without parsing
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && mediaType == runtime.ContentTypeProtobuf
}

// withoutObjectProtobuf returns the Accept header's clauses less those
// asking for protobuf other than as an object's metadata, and false when
// none is left. A clause it cannot parse is kept, for negotiation to judge.
func withoutObjectProtobuf(header []string) (string, bool) {
	var kept []string
	for _, value := range header {
		for _, clause := range strings.Split(value, ",") {
			clause = strings.TrimSpace(clause)
			if clause == "" {
				continue
			}
			mediaType, params, err := mime.ParseMediaType(clause)
			if err == nil && mediaType == runtime.ContentTypeProtobuf && !asMetadata(params) {
				continue
			}
			kept = append(kept, clause)
		}
	}
	return strings.Join(kept, ","), len(kept) > 0
}

// asMetadata reports whether a media type's parameters ask for the object
// transformed into PartialObjectMetadata or PartialObjectMetadataList.
func asMetadata(params map[string]string) bool {
	switch params["as"] {
	case "PartialObjectMetadata", "PartialObjectMetadataList":
	default:
		return false
	}
	if params["g"] != metav1.GroupName {
		return false
	}
	return params["v"] == metav1.SchemeGroupVersion.Version || params["v"] == metav1beta1.SchemeGroupVersion.Version
}

func refuse(w http.ResponseWriter, r *http.Request, err error) {
	responsewriters.ErrorNegotiated(err, scheme.Serializer, metav1.SchemeGroupVersion, w, r)
}
