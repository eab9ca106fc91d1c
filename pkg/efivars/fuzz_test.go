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

package efivars

import "testing"

// FuzzParse feeds arbitrary bytes to both entry points: a VARS file comes
// from a guest that may have written anything into its flash, so the
// parser must fail cleanly, never panic or read outside the input.
func FuzzParse(f *testing.F) {
	store := encodeStore(f, true, 256, []testVar{
		{state: VarAdded, attrs: nvBSRT, vendor: ocGUID, name: "dockerios-agent-token", data: []byte("token")},
		{state: VarAdded & VarDeleted, attrs: nvBSRT, vendor: appleGUID, name: "MLB", data: []byte("x")},
	})
	f.Add(encodeFV(store, 0))
	f.Add(encodeFV(encodeStore(f, false, 128, []testVar{{state: VarAdded, attrs: 7, vendor: ocGUID, name: "a", data: []byte{1}}}), 16))
	f.Add(store)
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(s *Store) {
			if s.Offset < 0 || s.Offset+s.Size > len(b) {
				t.Fatalf("store at %d of %d bytes outside %d bytes", s.Offset, s.Size, len(b))
			}
			for _, v := range s.Variables {
				if v.Offset < s.Offset || v.Offset >= s.Offset+s.Size || len(v.Data) > s.Size {
					t.Fatalf("variable %+v outside its store %d+%d", v, s.Offset, s.Size)
				}
			}
			_ = s.Live()
		}
		if s, err := ParseFirmwareVolume(b); err == nil {
			check(s)
		}
		for _, s := range FindStores(b) {
			check(s)
		}
	})
}
