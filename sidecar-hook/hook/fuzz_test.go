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

package hook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzOnDefineDomain feeds arbitrary domain XML and VMI JSON to the hook. It
// must never panic, never put the key in an error, and whatever it returns
// must come back byte for byte when passed through again (idempotence).
func FuzzOnDefineDomain(f *testing.F) {
	for _, d := range []string{"domain-virtio-system.xml", "domain-sata-system.xml"} {
		for _, v := range []string{"vmi-nvme.json", "vmi-plain.json", "vmi-virtio.json", "vmi-sata-to-nvme-default.json", "vmi-unknown-disk.json", "vmi-bad-bus.json"} {
			f.Add(readFixture(f, d), readFixture(f, v))
		}
	}
	f.Add([]byte(minimalDomain), []byte(`{"metadata":{"annotations":{"hook.dockerios.io/system-disk":"system","hook.dockerios.io/system-disk-bus":"sata","hook.dockerios.io/cpu":"Penryn"}}}`))
	f.Add([]byte(domainWithArgs), []byte(`{"metadata":{"annotations":{"hook.dockerios.io/apple-smc":"true","hook.dockerios.io/cpu":"Haswell"}}}`))
	f.Add([]byte(`<domain><devices><disk><alias name="ua-a"/></disk></devices></domain>`), []byte(`{"metadata":{"annotations":{"hook.dockerios.io/system-disk":"a"}}}`))

	dir := f.TempDir()
	oskFile := filepath.Join(dir, "osk")
	if err := os.WriteFile(oskFile, []byte(testOSK), 0o600); err != nil {
		f.Fatal(err)
	}
	h := Hook{OSKFile: oskFile}
	f.Fuzz(func(t *testing.T, domainXML, vmiJSON []byte) {
		out, _, err := h.OnDefineDomain(domainXML, vmiJSON)
		if err != nil {
			if strings.Contains(err.Error(), testOSK) {
				t.Fatalf("error contains the OSK: %v", err)
			}
			return
		}
		again, _, err := h.OnDefineDomain(out, vmiJSON)
		if err != nil {
			t.Fatalf("second pass failed: %v\nfirst output:\n%s", err, out)
		}
		if string(again) != string(out) {
			t.Fatalf("second pass changed the domain:\n%s\n---\n%s", out, again)
		}
	})
}
