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

// Package codec builds the codec the apiserver stores dockerio.io objects
// with, so that the server, the tests that read what it wrote and the tools
// that seed etcd for it encode exactly alike.
package codec

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/scheme"
)

// DefaultMediaType is what objects are written in unless
// --storage-media-type says otherwise. It stays JSON for this release,
// though protobuf is cheaper (a Ready machine is about 40% smaller and
// decodes about eight times faster, and every claim bound at create writes a
// machine and a claim that the watch cache then decodes): releases before
// this one cannot read our kinds in protobuf, so an apiserver writing them
// would break both the replicas an HA rolling upgrade still runs and a
// rollback. Every release from this one reads both, so a later release can
// make protobuf the default, and an operator who will not roll back past
// this release can choose it now (docs/operators/upgrade.md).
const DefaultMediaType = runtime.ContentTypeJSON

// For returns the storage codec for mediaType and the versioner of what it
// writes: objects are written as v1alpha1 in mediaType and read in any
// media type the scheme knows (JSON, YAML, protobuf), so whatever an
// apiserver with another --storage-media-type wrote is read as it is, and
// rewritten in mediaType the next time it changes.
func For(mediaType string) (runtime.Codec, runtime.GroupVersioner, error) {
	return serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  mediaType,
		StorageSerializer: scheme.Codecs,
		StorageVersion:    v1alpha1.SchemeGroupVersion,
		MemoryVersion:     schema.GroupVersion{Group: dockerio.GroupName, Version: runtime.APIVersionInternal},
	})
}

// Config returns the default storage config under prefix with the codec
// of mediaType.
func Config(prefix, mediaType string) (*storagebackend.Config, error) {
	c, versioner, err := For(mediaType)
	if err != nil {
		return nil, err
	}
	cfg := storagebackend.NewDefaultConfig(prefix, c)
	cfg.EncodeVersioner = versioner
	return cfg, nil
}
