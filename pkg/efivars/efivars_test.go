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

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"
	"unicode/utf16"
)

// testVar is a variable to encode; the encoder below is written from the
// same published layouts as the parser, independently of it.
type testVar struct {
	state  byte
	attrs  uint32
	vendor string
	name   string
	data   []byte
	// raw, if set, replaces the encoded name (to test bad names).
	rawName []byte
}

func encodeStore(t testing.TB, auth bool, size int, vars []testVar) []byte {
	t.Helper()
	b := bytes.Repeat([]byte{0xFF}, size)
	sig := VariableGUID
	if auth {
		sig = AuthenticatedVariableGUID
	}
	copy(b, sig[:])
	binary.LittleEndian.PutUint32(b[16:], uint32(size))
	b[20], b[21] = 0x5A, 0xFE
	copy(b[22:28], make([]byte, 6))
	p := 28
	for _, v := range vars {
		name := v.rawName
		if name == nil {
			for _, u := range utf16.Encode([]rune(v.name + "\x00")) {
				name = binary.LittleEndian.AppendUint16(name, u)
			}
		}
		g := MustParseGUID(v.vendor)
		var h []byte
		h = binary.LittleEndian.AppendUint16(h, 0x55AA)
		h = append(h, v.state, 0)
		h = binary.LittleEndian.AppendUint32(h, v.attrs)
		if auth {
			h = binary.LittleEndian.AppendUint64(h, 7)
			h = append(h, make([]byte, 16)...)
			h = binary.LittleEndian.AppendUint32(h, 0)
		}
		h = binary.LittleEndian.AppendUint32(h, uint32(len(name)))
		h = binary.LittleEndian.AppendUint32(h, uint32(len(v.data)))
		h = append(h, g[:]...)
		h = append(append(h, name...), v.data...)
		if p+len(h) > size {
			t.Fatalf("store of %d bytes too small", size)
		}
		copy(b[p:], h)
		p = (p + len(h) + 3) &^ 3
	}
	return b
}

// encodeFV wraps a store in a firmware volume header with one block-map
// entry and a correct checksum, as OVMF's VARS images have.
func encodeFV(store []byte, trailer int) []byte {
	const headerLength = 72
	b := make([]byte, headerLength, headerLength+len(store)+trailer)
	copy(b[16:32], SystemNvDataFvGUID[:])
	total := headerLength + len(store) + trailer
	binary.LittleEndian.PutUint64(b[32:], uint64(total))
	copy(b[40:44], "_FVH")
	binary.LittleEndian.PutUint32(b[44:], 0x4FEFF)
	binary.LittleEndian.PutUint16(b[48:], headerLength)
	b[55] = 2
	binary.LittleEndian.PutUint32(b[56:], uint32(total/4096+1))
	binary.LittleEndian.PutUint32(b[60:], 4096)
	var sum uint16
	for i := 0; i < headerLength; i += 2 {
		sum += binary.LittleEndian.Uint16(b[i:])
	}
	binary.LittleEndian.PutUint16(b[50:], -sum)
	b = append(b, store...)
	return append(b, bytes.Repeat([]byte{0xFF}, trailer)...)
}

const (
	ocGUID    = "4D1FDA02-38C7-4A6A-9CC6-4BCCA8B30102"
	appleGUID = "4D1EDE05-38C7-4A6A-9CC6-4BCCA8B38C14"
	nvBSRT    = NonVolatile | BootServiceAccess | RuntimeAccess
)

func TestGUID(t *testing.T) {
	g, err := ParseGUID(strings.ToLower(ocGUID))
	if err != nil {
		t.Fatal(err)
	}
	// Data1..3 little-endian, Data4 as written.
	want := []byte{0x02, 0xDA, 0x1F, 0x4D, 0xC7, 0x38, 0x6A, 0x4A, 0x9C, 0xC6, 0x4B, 0xCC, 0xA8, 0xB3, 0x01, 0x02}
	if !bytes.Equal(g[:], want) {
		t.Errorf("bytes % X, want % X", g[:], want)
	}
	if g.String() != ocGUID {
		t.Errorf("String() = %s, want %s", g, ocGUID)
	}
	for _, bad := range []string{"", "4D1FDA02-38C7-4A6A-9CC6", "4D1FDA0238C74A6A9CC64BCCA8B30102", "4D1FDA0Z-38C7-4A6A-9CC6-4BCCA8B30102", "4D1FDA02-38C7-4A6A-9CC6-4BCCA8B3010"} {
		if _, err := ParseGUID(bad); err == nil {
			t.Errorf("ParseGUID(%q) accepted", bad)
		}
	}
}

func TestParseFirmwareVolume(t *testing.T) {
	for _, auth := range []bool{true, false} {
		name := "plain"
		if auth {
			name = "authenticated"
		}
		t.Run(name, func(t *testing.T) {
			store := encodeStore(t, auth, 4096, []testVar{
				{state: VarAdded & VarDeleted, attrs: nvBSRT, vendor: ocGUID, name: "old", data: []byte("gone")},
				{state: VarAdded, attrs: nvBSRT, vendor: ocGUID, name: "dockerios-agent-token", data: []byte("token-1")},
				// Caught mid-update with its new copy written: the old one
				// is not live.
				{state: VarAdded & VarInDeletedTransition, attrs: nvBSRT, vendor: appleGUID, name: "MLB", data: []byte("old-mlb")},
				{state: VarAdded, attrs: nvBSRT, vendor: appleGUID, name: "MLB", data: []byte("new-mlb")},
				// Caught mid-update before its new copy: still live.
				{state: VarAdded & VarInDeletedTransition, attrs: nvBSRT, vendor: appleGUID, name: "ROM", data: []byte{1, 2, 3, 4, 5, 6}},
				// A header written just before a reset, no name yet.
				{state: VarHeaderValidOnly, attrs: nvBSRT, vendor: appleGUID, rawName: []byte{0xFF, 0xFF}, data: []byte{0xFF}},
				{state: VarAdded, attrs: BootServiceAccess, vendor: appleGUID, name: "päth", data: nil},
			})
			s, err := ParseFirmwareVolume(encodeFV(store, 8192))
			if err != nil {
				t.Fatal(err)
			}
			if s.Authenticated != auth || s.Offset != 72 || s.Size != 4096 || len(s.Variables) != 7 {
				t.Fatalf("store %+v", s)
			}
			if v := s.Variables[1]; v.Offset%4 != 0 || (auth && v.MonotonicCount != 7) {
				t.Errorf("variable header %+v", v)
			}
			var live []string
			for _, v := range s.Live() {
				live = append(live, v.Key()+"="+string(v.Data))
			}
			want := []string{
				ocGUID + ":dockerios-agent-token=token-1",
				appleGUID + ":MLB=new-mlb",
				appleGUID + ":ROM=\x01\x02\x03\x04\x05\x06",
				appleGUID + ":päth=",
			}
			if strings.Join(live, "\n") != strings.Join(want, "\n") {
				t.Errorf("live variables:\n%s\nwant:\n%s", strings.Join(live, "\n"), strings.Join(want, "\n"))
			}
			if v, ok := s.Get(MustParseGUID(appleGUID), "MLB"); !ok || string(v.Data) != "new-mlb" || v.Attributes != nvBSRT {
				t.Errorf("Get MLB = %+v, %v", v, ok)
			}
			if _, ok := s.Get(MustParseGUID(ocGUID), "old"); ok {
				t.Error("a deleted variable is returned")
			}
			if _, ok := s.Get(MustParseGUID(appleGUID), "dockerios-agent-token"); ok {
				t.Error("a name is found under the wrong vendor")
			}
		})
	}
}

func TestParseFirmwareVolumeRejects(t *testing.T) {
	good := func() []byte {
		return encodeFV(encodeStore(t, true, 512, []testVar{{state: VarAdded, attrs: nvBSRT, vendor: ocGUID, name: "a", data: []byte("b")}}), 0)
	}
	if _, err := ParseFirmwareVolume(good()); err != nil {
		t.Fatalf("the good volume: %v", err)
	}
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		want   string
	}{
		{"short", func(b []byte) []byte { return b[:40] }, "too short"},
		{"signature", func(b []byte) []byte { b[40] = 'X'; return b }, "signature"},
		{"file system", func(b []byte) []byte { b[16] ^= 1; return b }, "file system"},
		{"checksum", func(b []byte) []byte { b[44] ^= 1; return b }, "checksum"},
		{"truncated volume", func(b []byte) []byte { return b[:len(b)-1] }, "only"},
		{"store signature", func(b []byte) []byte { b[72] ^= 1; return b }, "signature"},
		{"store not healthy", func(b []byte) []byte { b[72+21] = 0xFF; return b }, "healthy"},
		{"store too big", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[72+16:], 1<<20); return b }, "claims"},
		{"data past the end", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[100+40:], 1<<20); return b }, "past"},
		{"name not terminated", func(b []byte) []byte { b[100+60+2] = 'x'; return b }, "NUL-terminated"},
		{"odd name", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[100+36:], 3); return b }, "name is 3 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFirmwareVolume(tc.mutate(good()))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestFindStores(t *testing.T) {
	volatile := encodeStore(t, true, 1024, []testVar{
		{state: VarAdded, attrs: BootServiceAccess | RuntimeAccess, vendor: appleGUID, name: "HW_MLB", data: []byte("C02015700QXJG36CB")},
	})
	cache := encodeStore(t, false, 512, []testVar{
		{state: VarAdded, attrs: nvBSRT, vendor: ocGUID, name: "dockerios-agent-token", data: []byte("t")},
	})
	mem := bytes.Repeat([]byte{0xA5}, 64<<10)
	copy(mem[4096:], volatile)
	copy(mem[20000:], cache)
	// Not where a store can be: unaligned, then a signature whose header
	// is not formatted, then one that runs off the end of memory.
	copy(mem[30001:], volatile)
	copy(mem[40000:], AuthenticatedVariableGUID[:])
	copy(mem[len(mem)-40:], volatile[:28])
	stores := FindStores(mem)
	if len(stores) != 2 {
		t.Fatalf("found %d stores, want 2: %+v", len(stores), stores)
	}
	got := map[int]string{}
	for _, s := range stores {
		for _, v := range s.Live() {
			got[s.Offset] += v.Key() + "=" + string(v.Data)
		}
	}
	if got[4096] != appleGUID+":HW_MLB=C02015700QXJG36CB" || got[20000] != ocGUID+":dockerios-agent-token=t" {
		t.Errorf("stores found: %v", got)
	}
}

// TestDebianOVMF parses the VARS templates Debian's ovmf package ships
// (when installed): the Microsoft-keys template holds the secure-boot keys,
// and deleted and replaced copies of other variables.
func TestDebianOVMF(t *testing.T) {
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			t.Skipf("%s is not installed (Debian package ovmf)", p)
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	empty, err := ParseFirmwareVolume(read("/usr/share/OVMF/OVMF_VARS_4M.fd"))
	if err != nil {
		t.Fatal(err)
	}
	if !empty.Authenticated || len(empty.Variables) != 0 {
		t.Errorf("OVMF_VARS_4M.fd: authenticated %v with %d variables, want an empty authenticated store", empty.Authenticated, len(empty.Variables))
	}
	ms, err := ParseFirmwareVolume(read("/usr/share/OVMF/OVMF_VARS_4M.ms.fd"))
	if err != nil {
		t.Fatal(err)
	}
	global := MustParseGUID("8BE4DF61-93CA-11D2-AA0D-00E098032B8C")
	imageSecurity := MustParseGUID("D719B2CB-3D3A-4596-A3BC-DAD00E67656F")
	for _, k := range []struct {
		vendor GUID
		name   string
	}{{global, "PK"}, {global, "KEK"}, {imageSecurity, "db"}, {imageSecurity, "dbx"}} {
		v, ok := ms.Get(k.vendor, k.name)
		if !ok {
			t.Errorf("OVMF_VARS_4M.ms.fd has no %s:%s", k.vendor, k.name)
			continue
		}
		if v.Attributes != nvBSRT|TimeBasedAuthenticatedWriteAccess || len(v.Data) == 0 {
			t.Errorf("%s: attributes %#x, %d bytes", v.Key(), v.Attributes, len(v.Data))
		}
	}
	if _, ok := ms.Get(global, "BootOrder"); ok {
		t.Error("BootOrder, deleted in the template, is live")
	}
	n := 0
	for _, v := range ms.Variables {
		if v.Name == "CustomMode" {
			n++
		}
	}
	if v, ok := ms.Get(MustParseGUID("C076EC0C-7028-4399-A072-71EE5C448B9F"), "CustomMode"); n < 2 || !ok || !bytes.Equal(v.Data, []byte{0}) {
		t.Errorf("CustomMode: %d copies, live %v %v; want several copies, the live one 0", n, ok, v.Data)
	}
}
