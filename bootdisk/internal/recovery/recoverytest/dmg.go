// Copyright The DockerIOS Authors.
// SPDX-License-Identifier: GPL-3.0-or-later
//
// This file is part of the DockerIOS bootdisk builder, which is free
// software: you can redistribute it and/or modify it under the terms of the
// GNU General Public License as published by the Free Software Foundation,
// either version 3 of the License, or (at your option) any later version.
// See bootdisk/LICENSE.

package recoverytest

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"unicode/utf16"
)

const sector = 512

// DiskContent returns size bytes (a multiple of 512, at least 128 KiB) that
// look like a small BaseSystem disk: a protective MBR, a GPT (header,
// entries and their backup, with correct CRCs) with one Apple HFS+
// partition named "BaseSystem" from sector 40, an HFS+ volume header ("H+",
// version 4) at its byte 1024, and then, 128 KiB at a time, runs of text
// (compressible), pseudo-random bytes (incompressible) and zeros, so that a
// UDIF of it has zlib, raw and zero-fill chunks. seed varies the bytes.
func DiskContent(size int, seed uint64) []byte {
	if size%sector != 0 || size < 256*sector {
		panic(fmt.Sprintf("DiskContent: size %d", size))
	}
	d := make([]byte, size)
	sectors := uint64(size / sector)
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	// The partition's payload.
	const part = 40
	lastUsable := sectors - 34
	for off, i := part*sector, 0; off < int(lastUsable)*sector; off, i = off+128<<10, i+1 {
		end := min(off+128<<10, int(lastUsable)*sector)
		switch i % 3 {
		case 0:
			var b bytes.Buffer
			for n := 0; b.Len() < end-off; n++ {
				fmt.Fprintf(&b, "DockerIOS fake BaseSystem, seed %d, run %d, line %d\n", seed, i, n)
			}
			copy(d[off:end], b.Bytes())
		case 1:
			for j := off; j < end; j++ {
				d[j] = byte(r.Uint32())
			}
		}
	}
	// HFS+ volume header at byte 1024 of the partition.
	vh := d[part*sector+1024:]
	copy(vh, "H+")
	binary.BigEndian.PutUint16(vh[2:], 4)
	copy(vh[8:], "10.0")
	binary.BigEndian.PutUint32(vh[40:], 4096)
	binary.BigEndian.PutUint32(vh[44:], uint32((lastUsable-part)*sector/4096))

	// Protective MBR.
	mbr := d[446:]
	mbr[4] = 0xEE
	binary.LittleEndian.PutUint32(mbr[8:], 1)
	binary.LittleEndian.PutUint32(mbr[12:], uint32(min(sectors-1, 0xffffffff)))
	d[510], d[511] = 0x55, 0xAA

	// GPT entries: one Apple HFS+ partition.
	entries := make([]byte, 128*128)
	copy(entries, guid(0x48465300, 0x0000, 0x11AA, [8]byte{0xAA, 0x11, 0x00, 0x30, 0x65, 0x43, 0xEC, 0xAC}))
	copy(entries[16:], guid(r.Uint32(), uint16(r.Uint32()), uint16(r.Uint32()), [8]byte{1, 2, 3, 4, 5, 6, 7, byte(seed)}))
	binary.LittleEndian.PutUint64(entries[32:], part)
	binary.LittleEndian.PutUint64(entries[40:], lastUsable-1)
	for i, c := range utf16.Encode([]rune("BaseSystem")) {
		binary.LittleEndian.PutUint16(entries[56+2*i:], c)
	}
	diskGUID := guid(r.Uint32(), uint16(r.Uint32()), uint16(r.Uint32()), [8]byte{8, 7, 6, 5, 4, 3, 2, byte(seed)})
	header := func(my, alt, entriesLBA uint64) []byte {
		h := make([]byte, 92)
		copy(h, "EFI PART")
		binary.LittleEndian.PutUint32(h[8:], 0x00010000)
		binary.LittleEndian.PutUint32(h[12:], 92)
		binary.LittleEndian.PutUint64(h[24:], my)
		binary.LittleEndian.PutUint64(h[32:], alt)
		binary.LittleEndian.PutUint64(h[40:], 34)
		binary.LittleEndian.PutUint64(h[48:], lastUsable-1)
		copy(h[56:], diskGUID)
		binary.LittleEndian.PutUint64(h[72:], entriesLBA)
		binary.LittleEndian.PutUint32(h[80:], 128)
		binary.LittleEndian.PutUint32(h[84:], 128)
		binary.LittleEndian.PutUint32(h[88:], crc32.ChecksumIEEE(entries))
		binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h))
		return h
	}
	copy(d[1*sector:], header(1, sectors-1, 2))
	copy(d[2*sector:], entries)
	copy(d[(sectors-33)*sector:], entries)
	copy(d[(sectors-1)*sector:], header(sectors-1, 1, sectors-33))
	return d
}

// guid encodes a GUID in the mixed-endian form GPT uses.
func guid(a uint32, b, c uint16, rest [8]byte) []byte {
	g := make([]byte, 16)
	binary.LittleEndian.PutUint32(g, a)
	binary.LittleEndian.PutUint16(g[4:], b)
	binary.LittleEndian.PutUint16(g[6:], c)
	copy(g[8:], rest[:])
	return g
}

// UDIF block types (Apple's BLKXChunkEntry types; qemu's block/dmg.c).
const (
	udze = 0x00000000 // zero fill
	udrw = 0x00000001 // raw
	udig = 0x00000002 // ignore (reads as zeros)
	udzo = 0x80000005 // zlib
	udcm = 0x7ffffffe // comment
	udle = 0xffffffff // last entry
)

// ChunkTypes counts the chunk types of the last UDIF built, for tests that
// want to know every kind was exercised.
type ChunkTypes struct {
	Zlib, Raw, Zero, Ignore int
	// ZlibOffsets are the zlib chunks' offsets in the file.
	ZlibOffsets []int
}

// UDIF returns content (a multiple of 512 bytes) as a UDIF disk image, the
// format of Apple's BaseSystem.dmg: a data fork of chunks, an XML property
// list whose resource-fork → blkx entries each hold a "mish" block table
// (base64 in <data>), and the 512-byte "koly" trailer pointing at both. The
// table has three blkx entries (sectors 0-39, the partition, the last 33
// sectors), chunks of at most 256 sectors: zlib-compressed (0x80000005)
// where that saves space, raw (1) where it does not, zero-fill (0) or
// ignore (2) where the sectors are zero; a comment entry (0x7ffffffe) and
// the terminator (0xffffffff).
func UDIF(content []byte) ([]byte, ChunkTypes) {
	if len(content)%sector != 0 || len(content) < 80*sector {
		panic(fmt.Sprintf("UDIF: %d bytes", len(content)))
	}
	sectors := uint64(len(content) / sector)
	var fork bytes.Buffer
	var types ChunkTypes
	type span struct {
		name       string
		start, end uint64
	}
	spans := []span{
		{"Protective Master Boot Record (MBR : 0) and GPT (Primary GPT Header : 1, Primary GPT Table : 2)", 0, 40},
		{"disk image (Apple_HFS : 3)", 40, sectors - 33},
		{"GPT (Backup GPT Table and Header)", sectors - 33, sectors},
	}
	var blkx []string
	zeroCount := 0
	for id, s := range spans {
		var entries bytes.Buffer
		entry := func(typ uint32, first, count, off, length uint64) {
			e := make([]byte, 40)
			binary.BigEndian.PutUint32(e, typ)
			binary.BigEndian.PutUint64(e[8:], first-s.start)
			binary.BigEndian.PutUint64(e[16:], count)
			binary.BigEndian.PutUint64(e[24:], off)
			binary.BigEndian.PutUint64(e[32:], length)
			entries.Write(e)
		}
		n := 0
		if id == 1 {
			entry(udcm, s.start, 0, uint64(fork.Len()), 0)
			n++
		}
		for first := s.start; first < s.end; first += 256 {
			count := min(256, s.end-first)
			raw := content[first*sector : (first+count)*sector]
			off := uint64(fork.Len())
			switch {
			case bytes.Count(raw, []byte{0}) == len(raw):
				typ := uint32(udze)
				if zeroCount%2 == 1 {
					typ = udig
					types.Ignore++
				} else {
					types.Zero++
				}
				zeroCount++
				entry(typ, first, count, off, 0)
			default:
				var z bytes.Buffer
				zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
				zw.Write(raw)
				zw.Close()
				if z.Len() < len(raw)*9/10 {
					fork.Write(z.Bytes())
					entry(udzo, first, count, off, uint64(z.Len()))
					types.Zlib++
					types.ZlibOffsets = append(types.ZlibOffsets, int(off))
				} else {
					fork.Write(raw)
					entry(udrw, first, count, off, uint64(len(raw)))
					types.Raw++
				}
			}
			n++
		}
		entry(udle, s.end, 0, uint64(fork.Len()), 0)
		n++
		mish := make([]byte, 204)
		copy(mish, "mish")
		binary.BigEndian.PutUint32(mish[4:], 1)
		binary.BigEndian.PutUint64(mish[8:], s.start)
		binary.BigEndian.PutUint64(mish[16:], s.end-s.start)
		binary.BigEndian.PutUint32(mish[32:], 0x208)
		binary.BigEndian.PutUint32(mish[36:], uint32(id))
		binary.BigEndian.PutUint32(mish[64:], 2) // CRC32 of the blkx's sectors
		binary.BigEndian.PutUint32(mish[68:], 32)
		binary.BigEndian.PutUint32(mish[72:], crc32.ChecksumIEEE(content[s.start*sector:s.end*sector]))
		binary.BigEndian.PutUint32(mish[200:], uint32(n))
		mish = append(mish, entries.Bytes()...)
		blkx = append(blkx, fmt.Sprintf(`			<dict>
				<key>Attributes</key>
				<string>0x0050</string>
				<key>CFName</key>
				<string>%[1]s</string>
				<key>Data</key>
				<data>%[2]s</data>
				<key>ID</key>
				<string>%[3]d</string>
				<key>Name</key>
				<string>%[1]s</string>
			</dict>
`, s.name, base64.StdEncoding.EncodeToString(mish), id-1))
	}
	xml := `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>resource-fork</key>
	<dict>
		<key>blkx</key>
		<array>
` + fmt.Sprint(joined(blkx)) + `		</array>
	</dict>
</dict>
</plist>
`
	dataLen := uint64(fork.Len())
	out := fork.Bytes()
	xmlOff := uint64(len(out))
	out = append(out, xml...)
	koly := make([]byte, 512)
	copy(koly, "koly")
	binary.BigEndian.PutUint32(koly[4:], 4)
	binary.BigEndian.PutUint32(koly[8:], 512)
	binary.BigEndian.PutUint32(koly[12:], 1)
	binary.BigEndian.PutUint64(koly[24:], 0)       // DataForkOffset
	binary.BigEndian.PutUint64(koly[32:], dataLen) // DataForkLength
	binary.BigEndian.PutUint32(koly[56:], 1)       // SegmentNumber
	binary.BigEndian.PutUint32(koly[60:], 1)       // SegmentCount
	copy(koly[64:], "DockerIOS-fake-s")
	binary.BigEndian.PutUint32(koly[80:], 2) // data fork CRC32
	binary.BigEndian.PutUint32(koly[84:], 32)
	binary.BigEndian.PutUint32(koly[88:], crc32.ChecksumIEEE(out[:dataLen]))
	binary.BigEndian.PutUint64(koly[216:], xmlOff)
	binary.BigEndian.PutUint64(koly[224:], uint64(len(xml)))
	binary.BigEndian.PutUint32(koly[488:], 1) // ImageVariant
	binary.BigEndian.PutUint64(koly[492:], sectors)
	return append(out, koly...), types
}

func joined(s []string) string {
	var b bytes.Buffer
	for _, x := range s {
		b.WriteString(x)
	}
	return b.String()
}
