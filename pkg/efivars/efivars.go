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

// Package efivars reads UEFI variables out of the variable stores of EDK II
// firmware such as OVMF: the non-volatile store in a VARS flash image (what
// QEMU's second pflash drive and KubeVirt's per-VM NVRAM file hold), and the
// stores the firmware keeps in RAM, found in a dump of guest memory.
//
// It is written from the published layouts (the UEFI PI specification's
// EFI_FIRMWARE_VOLUME_HEADER, and EDK II's VARIABLE_STORE_HEADER,
// VARIABLE_HEADER and AUTHENTICATED_VARIABLE_HEADER in
// MdeModulePkg/Include/Guid/VariableFormat.h); no firmware code is used.
// Everything is little-endian.
package efivars

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
)

// GUID is an EFI_GUID as it is stored: Data1, Data2 and Data3
// little-endian, Data4 as bytes.
type GUID [16]byte

// String returns the registry form in upper case, as OpenCore's config and
// macOS's nvram name vendor GUIDs: 4D1FDA02-38C7-4A6A-9CC6-4BCCA8B30102.
func (g GUID) String() string {
	return fmt.Sprintf("%08X-%04X-%04X-%X-%X",
		binary.LittleEndian.Uint32(g[0:4]), binary.LittleEndian.Uint16(g[4:6]),
		binary.LittleEndian.Uint16(g[6:8]), g[8:10], g[10:16])
}

// ParseGUID parses the registry form (either case).
func ParseGUID(s string) (GUID, error) {
	var g GUID
	parts := strings.Split(s, "-")
	if len(parts) != 5 || len(parts[0]) != 8 || len(parts[1]) != 4 || len(parts[2]) != 4 || len(parts[3]) != 4 || len(parts[4]) != 12 {
		return g, fmt.Errorf("efivars: %q is not a GUID (8-4-4-4-12 hex digits)", s)
	}
	b, err := hex.DecodeString(strings.Join(parts, ""))
	if err != nil {
		return g, fmt.Errorf("efivars: %q is not a GUID: %v", s, err)
	}
	binary.LittleEndian.PutUint32(g[0:4], binary.BigEndian.Uint32(b[0:4]))
	binary.LittleEndian.PutUint16(g[4:6], binary.BigEndian.Uint16(b[4:6]))
	binary.LittleEndian.PutUint16(g[6:8], binary.BigEndian.Uint16(b[6:8]))
	copy(g[8:], b[8:])
	return g, nil
}

// MustParseGUID is ParseGUID for constants; it panics on a malformed GUID.
func MustParseGUID(s string) GUID {
	g, err := ParseGUID(s)
	if err != nil {
		panic(err)
	}
	return g
}

var (
	// SystemNvDataFvGUID is the file system GUID of the firmware volume
	// that holds the variable store (gEfiSystemNvDataFvGuid).
	SystemNvDataFvGUID = MustParseGUID("FFF12B8D-7696-4C8B-A985-2747075B4F50")
	// AuthenticatedVariableGUID signs a store whose variables carry
	// authenticated headers (gEfiAuthenticatedVariableGuid); OVMF uses it.
	AuthenticatedVariableGUID = MustParseGUID("AAF32C78-947B-439A-A180-2E144EC37792")
	// VariableGUID signs a store with plain headers (gEfiVariableGuid).
	VariableGUID = MustParseGUID("DDCF3616-3275-4164-98B6-FE85707FFE7D")
)

// Attribute bits (UEFI specification, GetVariable).
const (
	NonVolatile                       uint32 = 0x01
	BootServiceAccess                 uint32 = 0x02
	RuntimeAccess                     uint32 = 0x04
	HardwareErrorRecord               uint32 = 0x08
	AuthenticatedWriteAccess          uint32 = 0x10
	TimeBasedAuthenticatedWriteAccess uint32 = 0x20
	AppendWrite                       uint32 = 0x40
)

// Variable states. Flash bits can only be cleared, so a variable moves from
// one state to the next by clearing bits: a live variable is VarAdded, and
// while it is being replaced it is VarAdded&VarInDeletedTransition until the
// new copy is VarAdded.
const (
	VarInDeletedTransition byte = 0xFE
	VarDeleted             byte = 0xFD
	VarHeaderValidOnly     byte = 0x7F
	VarAdded               byte = 0x3F
)

// Store header values (VARIABLE_STORE_FORMATTED, VARIABLE_STORE_HEALTHY).
const (
	storeFormatted byte = 0x5A
	storeHealthy   byte = 0xFE
)

const (
	fvHeaderSize        = 56 // EFI_FIRMWARE_VOLUME_HEADER up to its block map
	storeHeaderSize     = 28 // VARIABLE_STORE_HEADER
	plainHeaderSize     = 32 // VARIABLE_HEADER
	authHeaderSize      = 60 // AUTHENTICATED_VARIABLE_HEADER
	variableStartID     = 0x55AA
	headerAlignment     = 4
	fvSignature         = "_FVH"
	maxReasonableLength = 1 << 30
)

// Variable is one variable header found in a store, with its name and data.
type Variable struct {
	// Offset of the header in the bytes given to the parser.
	Offset     int
	State      byte
	Attributes uint32
	Vendor     GUID
	Name       string
	Data       []byte
	// Set in authenticated stores only.
	MonotonicCount uint64
	TimeStamp      [16]byte
	PubKeyIndex    uint32
}

// Key is "VENDOR-GUID:name", the form OpenCore's config and macOS's nvram
// use.
func (v Variable) Key() string { return v.Vendor.String() + ":" + v.Name }

// Store is a variable store: its header and every variable header in it,
// in store order, whatever their state.
type Store struct {
	// Offset of the store header in the bytes given to the parser.
	Offset        int
	Size          int
	Authenticated bool
	Variables     []Variable
}

// Live returns the variables the firmware would return, in store order:
// those in state VarAdded, and those caught mid-update
// (VarAdded&VarInDeletedTransition) that have no VarAdded copy.
func (s *Store) Live() []Variable {
	added := map[string]bool{}
	for _, v := range s.Variables {
		if v.State == VarAdded {
			added[v.Key()] = true
		}
	}
	var out []Variable
	for _, v := range s.Variables {
		if v.State == VarAdded || (v.State == VarAdded&VarInDeletedTransition && !added[v.Key()]) {
			out = append(out, v)
		}
	}
	return out
}

// Get returns the live variable vendor:name. A store never holds two live
// copies; if a damaged one does, the later (newer) copy is returned.
func (s *Store) Get(vendor GUID, name string) (Variable, bool) {
	var found Variable
	ok := false
	for _, v := range s.Live() {
		if v.Vendor == vendor && v.Name == name {
			found, ok = v, true
		}
	}
	return found, ok
}

// ParseFirmwareVolume parses a VARS flash image: the firmware volume header
// (its signature, file system GUID and checksum are checked) and the
// variable store that follows it.
func ParseFirmwareVolume(b []byte) (*Store, error) {
	if len(b) < fvHeaderSize {
		return nil, fmt.Errorf("efivars: %d bytes is too short for a firmware volume header", len(b))
	}
	if string(b[40:44]) != fvSignature {
		return nil, fmt.Errorf("efivars: no firmware volume signature %q at offset 40 (found %q)", fvSignature, b[40:44])
	}
	var fs GUID
	copy(fs[:], b[16:32])
	if fs != SystemNvDataFvGUID {
		return nil, fmt.Errorf("efivars: firmware volume file system %s is not the NV variable store's %s", fs, SystemNvDataFvGUID)
	}
	fvLength := binary.LittleEndian.Uint64(b[32:40])
	headerLength := int(binary.LittleEndian.Uint16(b[48:50]))
	if fvLength > uint64(len(b)) {
		return nil, fmt.Errorf("efivars: firmware volume claims %d bytes, only %d given", fvLength, len(b))
	}
	if headerLength < fvHeaderSize+8 || headerLength%2 != 0 || uint64(headerLength) > fvLength {
		return nil, fmt.Errorf("efivars: firmware volume header length %d is not plausible", headerLength)
	}
	var sum uint16
	for i := 0; i < headerLength; i += 2 {
		sum += binary.LittleEndian.Uint16(b[i:])
	}
	if sum != 0 {
		return nil, fmt.Errorf("efivars: firmware volume header checksum does not add up (sum %#04x)", sum)
	}
	return parseStore(b[:fvLength], headerLength)
}

// ParseStore parses the variable store whose header is at offset off of b.
func ParseStore(b []byte, off int) (*Store, error) {
	return parseStore(b, off)
}

// FindStores returns every well-formed variable store in b, a dump of
// memory starting at a 4-byte aligned address (guest physical address 0
// for a whole RAM image). EDK II keeps several in RAM: the volatile store,
// and caches of the non-volatile one. Candidates that do not parse are
// skipped.
func FindStores(b []byte) []*Store {
	var out []*Store
	for _, sig := range []GUID{AuthenticatedVariableGUID, VariableGUID} {
		for from := 0; ; {
			i := bytes.Index(b[from:], sig[:])
			if i < 0 {
				break
			}
			i += from
			from = i + 1
			if i%headerAlignment != 0 || i+storeHeaderSize > len(b) {
				continue
			}
			if b[i+20] != storeFormatted || b[i+21] != storeHealthy {
				continue
			}
			if s, err := parseStore(b, i); err == nil {
				out = append(out, s)
			}
		}
	}
	return out
}

func parseStore(b []byte, off int) (*Store, error) {
	if off < 0 || off+storeHeaderSize > len(b) {
		return nil, fmt.Errorf("efivars: no room for a variable store header at offset %d of %d bytes", off, len(b))
	}
	var sig GUID
	copy(sig[:], b[off:off+16])
	s := &Store{Offset: off}
	switch sig {
	case AuthenticatedVariableGUID:
		s.Authenticated = true
	case VariableGUID:
	default:
		return nil, fmt.Errorf("efivars: variable store signature %s at offset %d is neither %s nor %s", sig, off, AuthenticatedVariableGUID, VariableGUID)
	}
	size := binary.LittleEndian.Uint32(b[off+16:])
	if format, state := b[off+20], b[off+21]; format != storeFormatted || state != storeHealthy {
		return nil, fmt.Errorf("efivars: variable store at offset %d is not formatted and healthy (format %#02x, state %#02x)", off, format, state)
	}
	if size < storeHeaderSize || uint64(off)+uint64(size) > uint64(len(b)) {
		return nil, fmt.Errorf("efivars: variable store at offset %d claims %d bytes, %d are there", off, size, len(b)-off)
	}
	s.Size = int(size)
	end := off + s.Size
	hdr := plainHeaderSize
	if s.Authenticated {
		hdr = authHeaderSize
	}
	for p := align(off + storeHeaderSize); p+hdr <= end; {
		// Erased flash (0xFFFF) or unused RAM ends the list.
		if binary.LittleEndian.Uint16(b[p:]) != variableStartID {
			break
		}
		v := Variable{Offset: p, State: b[p+2], Attributes: binary.LittleEndian.Uint32(b[p+4:])}
		var nameSize, dataSize uint32
		if s.Authenticated {
			v.MonotonicCount = binary.LittleEndian.Uint64(b[p+8:])
			copy(v.TimeStamp[:], b[p+16:p+32])
			v.PubKeyIndex = binary.LittleEndian.Uint32(b[p+32:])
			nameSize = binary.LittleEndian.Uint32(b[p+36:])
			dataSize = binary.LittleEndian.Uint32(b[p+40:])
			copy(v.Vendor[:], b[p+44:p+60])
		} else {
			nameSize = binary.LittleEndian.Uint32(b[p+8:])
			dataSize = binary.LittleEndian.Uint32(b[p+12:])
			copy(v.Vendor[:], b[p+16:p+32])
		}
		next := uint64(p) + uint64(hdr) + uint64(nameSize) + uint64(dataSize)
		if nameSize > maxReasonableLength || dataSize > maxReasonableLength || next > uint64(end) {
			return nil, fmt.Errorf("efivars: variable at offset %d (name %d bytes, data %d bytes) runs past the store's end at %d", p, nameSize, dataSize, end)
		}
		nameAt := p + hdr
		dataAt := nameAt + int(nameSize)
		name, err := decodeName(b[nameAt:dataAt])
		// A header written just before a reset may have no name yet; only
		// a variable that claims to be valid must have one.
		if err != nil && v.State != VarHeaderValidOnly {
			return nil, fmt.Errorf("efivars: variable at offset %d: %v", p, err)
		}
		v.Name = name
		v.Data = bytes.Clone(b[dataAt : dataAt+int(dataSize)])
		s.Variables = append(s.Variables, v)
		p = align(int(next))
	}
	return s, nil
}

// decodeName decodes a NUL-terminated UTF-16LE name.
func decodeName(b []byte) (string, error) {
	if len(b) < 2 || len(b)%2 != 0 {
		return "", fmt.Errorf("name is %d bytes, not a NUL-terminated UTF-16 string", len(b))
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	n := len(u) - 1
	if u[n] != 0 {
		return "", errors.New("name is not NUL-terminated")
	}
	for i := 0; i < n; i++ {
		if u[i] == 0 {
			return "", errors.New("name has a NUL before its end")
		}
	}
	return string(utf16.Decode(u[:n])), nil
}

func align(p int) int { return (p + headerAlignment - 1) &^ (headerAlignment - 1) }
