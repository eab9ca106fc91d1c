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

package bootdisk

import (
	"os"
	"testing"

	"github.com/dockerios/dockerios/pkg/identity"
)

// testdata/generated-identities.csv is what the bootdisk builder's
// generate command writes (with a stand-in macserial and a fixed seed; the
// builder's own test fails when its output no longer matches this file).
// Every row must be one that `kubectl dockerios identities import` accepts.
func TestGeneratedRowsPassIdentityValidation(t *testing.T) {
	f, err := os.Open("testdata/generated-identities.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, rowErrs, err := identity.ParseRows(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rowErrs {
		t.Errorf("generated row rejected: %v", e)
	}
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5", len(rows))
	}
	for _, r := range rows {
		if err := r.Values.Validate(); err != nil {
			t.Errorf("line %d: %v", r.Line, err)
		}
		if r.Width != 1920 || r.Height != 1080 || r.KernelArgs != "" || r.Model != "iMacPro1,1" {
			t.Errorf("line %d: %+v", r.Line, r)
		}
	}
}
