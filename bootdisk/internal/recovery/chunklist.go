// Copyright The DockerIOS Authors.
// SPDX-License-Identifier: GPL-3.0-or-later
//
// This file is part of the DockerIOS bootdisk builder, which is free
// software: you can redistribute it and/or modify it under the terms of the
// GNU General Public License as published by the Free Software Foundation,
// either version 3 of the License, or (at your option) any later version.
// See bootdisk/LICENSE.

package recovery

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// The chunklist Apple's recovery service returns beside each image (the
// format fetch-macOS-v2.py's verify_chunklist reads): a 0x24-byte header
// '<4sIBBBxQQQ' (magic "CNKL", header size, file version 1, chunk method 1,
// signature method, chunk count, chunk offset 0x24, signature offset), then
// per chunk '<I32s' (size, sha256), then the signature.
const (
	chunklistHeaderSize = 0x24
	chunkEntrySize      = 0x24
	// maxChunks bounds what a chunklist may claim (a BaseSystem.dmg of
	// under 1 GiB has ~100 chunks of 10 MiB).
	maxChunks = 1 << 20
)

// Chunk is one entry of a chunklist.
type Chunk struct {
	Size   uint32
	SHA256 [32]byte
}

// Chunklist is a parsed chunklist. Its signature is not checked here:
// fetch-macOS-v2.py checks it against Apple's key before bootdisk reads it.
type Chunklist struct {
	SignatureMethod uint8
	Chunks          []Chunk
}

// Total is the image size the chunklist describes.
func (c *Chunklist) Total() int64 {
	var n int64
	for _, ch := range c.Chunks {
		n += int64(ch.Size)
	}
	return n
}

// ParseChunklist parses and checks a chunklist's structure.
func ParseChunklist(b []byte) (*Chunklist, error) {
	if len(b) < chunklistHeaderSize {
		return nil, fmt.Errorf("chunklist: %d bytes, shorter than its header", len(b))
	}
	var h struct {
		Magic           [4]byte
		HeaderSize      uint32
		FileVersion     uint8
		ChunkMethod     uint8
		SignatureMethod uint8
		_               uint8
		ChunkCount      uint64
		ChunkOffset     uint64
		SignatureOffset uint64
	}
	if err := binary.Read(bytes.NewReader(b[:chunklistHeaderSize]), binary.LittleEndian, &h); err != nil {
		return nil, fmt.Errorf("chunklist: %v", err)
	}
	switch {
	case string(h.Magic[:]) != "CNKL":
		return nil, fmt.Errorf("chunklist: magic %q, want CNKL", h.Magic[:])
	case h.HeaderSize != chunklistHeaderSize:
		return nil, fmt.Errorf("chunklist: header size %d", h.HeaderSize)
	case h.FileVersion != 1 || h.ChunkMethod != 1:
		return nil, fmt.Errorf("chunklist: file version %d, chunk method %d; want 1, 1", h.FileVersion, h.ChunkMethod)
	case h.SignatureMethod != 1 && h.SignatureMethod != 2:
		return nil, fmt.Errorf("chunklist: signature method %d", h.SignatureMethod)
	case h.ChunkCount == 0 || h.ChunkCount > maxChunks:
		return nil, fmt.Errorf("chunklist: %d chunks", h.ChunkCount)
	case h.ChunkOffset != chunklistHeaderSize:
		return nil, fmt.Errorf("chunklist: chunk offset %#x", h.ChunkOffset)
	case h.SignatureOffset != h.ChunkOffset+chunkEntrySize*h.ChunkCount:
		return nil, fmt.Errorf("chunklist: signature offset %#x does not follow %d chunks", h.SignatureOffset, h.ChunkCount)
	case uint64(len(b)) < h.SignatureOffset:
		return nil, fmt.Errorf("chunklist: %d bytes, shorter than its %d chunks", len(b), h.ChunkCount)
	}
	c := &Chunklist{SignatureMethod: h.SignatureMethod, Chunks: make([]Chunk, h.ChunkCount)}
	for i := range c.Chunks {
		e := b[chunklistHeaderSize+i*chunkEntrySize:]
		c.Chunks[i].Size = binary.LittleEndian.Uint32(e)
		copy(c.Chunks[i].SHA256[:], e[4:36])
		if c.Chunks[i].Size == 0 {
			return nil, fmt.Errorf("chunklist: chunk %d has size 0", i+1)
		}
	}
	return c, nil
}

// ErrMismatch marks an image that does not match its chunklist.
var ErrMismatch = errors.New("image does not match its chunklist")

// VerifyImage checks the file at path against the chunklist, chunk by
// chunk (each chunk's size and sha256) and as a whole (its length is the
// chunks' sum, nothing follows), and returns the sha256 of the whole file.
// A mismatch wraps ErrMismatch.
func VerifyImage(path string, c *Chunklist) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	whole := sha256.New()
	var size int64
	buf := make([]byte, 0, 16<<20)
	for i, ch := range c.Chunks {
		if cap(buf) < int(ch.Size) {
			buf = make([]byte, 0, ch.Size)
		}
		b := buf[:ch.Size]
		n, err := io.ReadFull(f, b)
		size += int64(n)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return "", size, fmt.Errorf("%w: chunk %d: %d bytes, the chunklist says %d (the image is %d bytes short)",
				ErrMismatch, i+1, n, ch.Size, c.Total()-size)
		}
		if err != nil {
			return "", size, err
		}
		if sha256.Sum256(b) != ch.SHA256 {
			return "", size, fmt.Errorf("%w: chunk %d: sha256 differs", ErrMismatch, i+1)
		}
		whole.Write(b)
	}
	if n, _ := io.Copy(io.Discard, f); n > 0 {
		return "", size + n, fmt.Errorf("%w: %d bytes follow the last chunk", ErrMismatch, n)
	}
	return hex.EncodeToString(whole.Sum(nil)), size, nil
}
