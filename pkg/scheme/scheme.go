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

// Package scheme holds the one runtime.Scheme and CodecFactory the DockerIOS
// apiserver serves from. Registries type their strategies with it, the
// storage layer decodes what it reads from etcd with it, and the server
// builds its API group from it, so all agree on every kind. It sits below
// all of them (it imports only the API types), so none of them imports the
// server that wires them (test/layers).
package scheme

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/install"
)

var (
	// Scheme knows the dockerios.io kinds, internal and versioned, and the
	// few foreign kinds the server speaks.
	Scheme = runtime.NewScheme()
	// Codecs encodes and decodes Scheme's kinds.
	Codecs = serializer.NewCodecFactory(Scheme)
	// Serializer is Codecs without protobuf, for what the server answers
	// outside the group's resources (discovery, errors) and for refusals:
	// the server speaks JSON and YAML, and protobuf only for objects'
	// metadata. The group's resources are served with Codecs itself behind
	// a filter that keeps protobuf for metadata (pkg/apiserver,
	// mediatypes.go, says why); storage encodes our kinds in protobuf when
	// --storage-media-type asks (pkg/storage/codec).
	Serializer runtime.NegotiatedSerializer = newWithoutProtobuf(Codecs)
)

// withoutProtobuf is a CodecFactory that does not offer protobuf. The
// list is filtered once: every request negotiates against it.
type withoutProtobuf struct {
	serializer.CodecFactory
	infos []runtime.SerializerInfo
}

func newWithoutProtobuf(codecs serializer.CodecFactory) withoutProtobuf {
	w := withoutProtobuf{CodecFactory: codecs}
	for _, info := range codecs.SupportedMediaTypes() {
		if info.MediaType != runtime.ContentTypeProtobuf {
			w.infos = append(w.infos, info)
		}
	}
	return w
}

func (w withoutProtobuf) SupportedMediaTypes() []runtime.SerializerInfo { return w.infos }

func init() {
	install.Install(Scheme)

	// The generic server answers list and delete options in meta/v1 and
	// reports discovery and errors as unversioned meta kinds.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	Scheme.AddUnversionedTypes(schema.GroupVersion{Group: "", Version: "v1"},
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)

	// The scale subresource speaks autoscaling/v1 Scale. The server converts
	// request bodies to the kind's internal version before the registry sees
	// them; registering the versioned type as its own internal form makes
	// that conversion a copy, so we need no internal autoscaling package.
	Scheme.AddKnownTypes(autoscalingv1.SchemeGroupVersion, &autoscalingv1.Scale{})
	Scheme.AddKnownTypes(schema.GroupVersion{Group: autoscalingv1.GroupName, Version: runtime.APIVersionInternal}, &autoscalingv1.Scale{})
}
