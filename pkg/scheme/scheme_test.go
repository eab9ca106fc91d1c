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

package scheme

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestSerializer_OffersJSONAndYAMLButNotProtobuf(t *testing.T) {
	var offered []string
	for _, info := range Serializer.SupportedMediaTypes() {
		offered = append(offered, info.MediaType)
	}
	assert.Contains(t, offered, runtime.ContentTypeJSON)
	assert.Contains(t, offered, runtime.ContentTypeYAML)
	assert.NotContains(t, offered, runtime.ContentTypeProtobuf)

	// Codecs itself does offer protobuf: Serializer is what keeps it out.
	_, ok := runtime.SerializerInfoForMediaType(Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	assert.True(t, ok)
}
