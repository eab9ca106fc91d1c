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

package install

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"

	dockeriofuzzer "github.com/dockerios/dockerios/pkg/apis/dockerio/fuzzer"
)

// TestRoundTripTypes proves every kind survives internal -> v1alpha1 -> wire
// (JSON, YAML, CBOR) -> internal unchanged, so nothing a client writes is
// silently dropped by conversion or defaulting.
func TestRoundTripTypes(t *testing.T) {
	roundtrip.RoundTripTestForAPIGroup(t, Install, dockeriofuzzer.Funcs)
}

// TestRoundTripProtobuf is the same through protobuf, which storage writes
// with --storage-media-type=application/vnd.kubernetes.protobuf: a field
// go-to-protobuf left out, or numbered twice, is lost or garbled here.
func TestRoundTripProtobuf(t *testing.T) {
	roundtrip.RoundTripProtobufTestForAPIGroup(t, Install, dockeriofuzzer.Funcs)
}
