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

package validation_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/validation"
	"github.com/dockerios/dockerios/pkg/scheme"
)

// FuzzDecodeAndValidate feeds arbitrary request bodies through the decoding
// (with defaulting and conversion) and validation every write goes through.
// Whatever the bytes, the server must answer with an error, never panic.
// Run longer with: go test -fuzz FuzzDecodeAndValidate ./pkg/apis/dockerio/validation
func FuzzDecodeAndValidate(f *testing.F) {
	examples, err := filepath.Glob(filepath.Join("..", "..", "..", "..", "artifacts", "examples", "*.yaml"))
	if err != nil || len(examples) == 0 {
		f.Fatalf("no seed examples found: %v", err)
	}
	for _, path := range examples {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachinePool","spec":{"replicas":-1,"maxMachines":-5}}`))
	f.Add([]byte(`{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSIdentity","spec":{"macAddress":"zz","rom":""}}`))

	decoder := scheme.Codecs.UniversalDecoder()
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, _, err := decoder.Decode(data, nil, nil)
		if err != nil {
			return
		}
		switch o := obj.(type) {
		case *dockerio.MacOSMachineClass:
			validation.ValidateMacOSMachineClass(o)
			validation.ValidateMacOSMachineClassUpdate(o, o)
			validation.ValidateMacOSMachineClassStatusUpdate(o, o)
			validation.WarningsForMacOSMachineClass(o)
		case *dockerio.MacOSImage:
			validation.ValidateMacOSImage(o)
			validation.ValidateMacOSImageUpdate(o, o)
			validation.ValidateMacOSImageStatusUpdate(o, o)
		case *dockerio.MacOSIdentityPool:
			validation.ValidateMacOSIdentityPool(o)
			validation.ValidateMacOSIdentityPoolUpdate(o, o)
			validation.ValidateMacOSIdentityPoolStatusUpdate(o, o)
		case *dockerio.MacOSIdentity:
			validation.ValidateMacOSIdentity(o)
			validation.ValidateMacOSIdentityUpdate(o, o)
			validation.ValidateMacOSIdentityStatusUpdate(o, o)
		case *dockerio.MacOSMachine:
			validation.ValidateMacOSMachine(o)
			validation.ValidateMacOSMachineUpdate(o, o)
			validation.ValidateMacOSMachineStatusUpdate(o, o)
		case *dockerio.MacOSMachinePool:
			validation.ValidateMacOSMachinePool(o)
			validation.ValidateMacOSMachinePoolUpdate(o, o)
			validation.ValidateMacOSMachinePoolStatusUpdate(o, o)
		case *dockerio.MacOSMachineClaim:
			validation.ValidateMacOSMachineClaim(o)
			validation.ValidateMacOSMachineClaimUpdate(o, o)
			validation.ValidateMacOSMachineClaimStatusUpdate(o, o)
		}
	})
}
