// Copyright The DockerIOS Authors.
// SPDX-License-Identifier: GPL-3.0-or-later
//
// This file is part of the DockerIOS bootdisk builder, which is free
// software: you can redistribute it and/or modify it under the terms of the
// GNU General Public License as published by the Free Software Foundation,
// either version 3 of the License, or (at your option) any later version.
// See bootdisk/LICENSE.

// Package recoverytest is test support for `bootdisk recovery`: a fake of
// Apple's recovery service that the real fetch-macOS-v2.py talks to through
// http_proxy, and a writer of UDIF disk images. Only tests import it (a test
// of cmd/bootdisk checks the command does not).
package recoverytest

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

//go:embed testdata/sitecustomize.py
var sitecustomize []byte

// Mode is a way the fake misbehaves.
type Mode int

const (
	// Normal answers as the service does.
	Normal Mode = iota
	// CorruptImage serves a BaseSystem.dmg with one byte changed from the
	// one its (correctly signed) chunklist describes.
	CorruptImage
	// BadSignature serves a chunklist whose signature does not verify.
	BadSignature
	// MissingKey answers RecoveryImage without the chunklist's CU line.
	MissingKey
	// NoSession sets no session cookie.
	NoSession
	// Refuse answers every RecoveryImage request 403.
	Refuse
	// ExpiredToken answers the assets 403 whatever their AssetToken.
	ExpiredToken
)

// Request is a RecoveryImage request the fake received: the fields of the
// script's body.
type Request struct {
	Board, MLB, OS, CID, K, FG string
}

// Service is the fake. Set its fields before Start.
type Service struct {
	// DMG is the image every known board gets.
	DMG []byte
	// ChunkSize is the chunklist's chunk size (default 1 MiB; Apple's
	// are 10 MiB).
	ChunkSize int
	// Boards maps the board-ids the fake knows to the product it answers
	// (AP); others get 403.
	Boards map[string]string
	Mode   Mode
	// Throttle pauses between 64 KiB pieces of the image.
	Throttle time.Duration

	key *rsa.PrivateKey
	srv *httptest.Server

	mu        sync.Mutex
	sessions  map[string]bool
	tokens    map[string]string // asset path → its current token
	requests  []Request
	assetGets []string // "200 path" or "403 path"
	chunklist []byte
	servedDMG []byte
}

var (
	keyOnce sync.Once
	testKey *rsa.PrivateKey
)

// Key is the test RSA-2048 key the fake signs chunklists with (generated
// once per test binary).
func Key() *rsa.PrivateKey {
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		testKey = k
	})
	return testKey
}

// Chunklist builds a chunklist of img in Apple's format (the one
// fetch-macOS-v2.py's verify_chunklist reads): header '<4sIBBBxQQQ', then
// '<I32s' per chunk, then the RSA-2048 PKCS#1 v1.5 SHA-256 signature of
// header and chunks, stored little-endian (signature method 1).
func Chunklist(img []byte, chunkSize int, key *rsa.PrivateKey) []byte {
	n := (len(img) + chunkSize - 1) / chunkSize
	var b bytes.Buffer
	b.WriteString("CNKL")
	binary.Write(&b, binary.LittleEndian, uint32(0x24))
	b.Write([]byte{1, 1, 1, 0})
	binary.Write(&b, binary.LittleEndian, uint64(n))
	binary.Write(&b, binary.LittleEndian, uint64(0x24))
	binary.Write(&b, binary.LittleEndian, uint64(0x24+0x24*n))
	for off := 0; off < len(img); off += chunkSize {
		c := img[off:min(off+chunkSize, len(img))]
		binary.Write(&b, binary.LittleEndian, uint32(len(c)))
		h := sha256.Sum256(c)
		b.Write(h[:])
	}
	digest := sha256.Sum256(b.Bytes())
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, digest[:])
	if err != nil {
		panic(err)
	}
	slices.Reverse(sig)
	b.Write(sig)
	return b.Bytes()
}

// Start serves the fake as an HTTP proxy and returns the environment the
// script needs to reach it unchanged: this process's environment without
// proxy settings, plus http_proxy (urllib sends every request, in absolute
// form, to the fake), PYTHONPATH with the test's sitecustomize.py, and the
// key swap it reads (Apple's modulus as script states it, the test key's).
func (s *Service) Start(t testing.TB, script string) []string {
	t.Helper()
	if s.ChunkSize == 0 {
		s.ChunkSize = 1 << 20
	}
	s.key = Key()
	s.sessions = map[string]bool{}
	s.tokens = map[string]string{}
	s.chunklist = Chunklist(s.DMG, s.ChunkSize, s.key)
	if s.Mode == BadSignature {
		s.chunklist[len(s.chunklist)-100] ^= 0x01
	}
	s.servedDMG = s.DMG
	if s.Mode == CorruptImage {
		s.servedDMG = bytes.Clone(s.DMG)
		s.servedDMG[len(s.DMG)/2] ^= 0x80
	}
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)

	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Apple_EFI_ROM_public_key_1 = 0x([0-9A-Fa-f]+)$`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("%s: no Apple_EFI_ROM_public_key_1", script)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sitecustomize.py"), sitecustomize, 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToLower(k) {
		case "http_proxy", "https_proxy", "all_proxy", "no_proxy", "pythonpath":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "http_proxy="+s.srv.URL, "no_proxy=", "PYTHONPATH="+dir,
		"DOCKERIOS_TEST_RECOVERY_KEY_SWAP="+string(m[1])+":"+s.key.N.Text(16))
}

// Requests returns the RecoveryImage requests received so far.
func (s *Service) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// AssetGets returns the asset requests so far, as "STATUS PATH".
func (s *Service) AssetGets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.assetGets)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))
}

func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A proxy gets absolute-form requests; anything else did not come
	// through http_proxy.
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		http.Error(w, "the fake recovery service is reached as an HTTP proxy", http.StatusBadRequest)
		return
	}
	switch {
	case r.URL.Host == "osrecovery.apple.com" && r.URL.Path == "/" && r.Method == http.MethodGet:
		if s.Mode != NoSession {
			sess := randomHex(32)
			s.mu.Lock()
			s.sessions[sess] = true
			s.mu.Unlock()
			http.SetCookie(w, &http.Cookie{Name: "session", Value: sess, Path: "/", Domain: "apple.com", HttpOnly: true})
		}
		w.WriteHeader(http.StatusOK)
	case r.URL.Host == "osrecovery.apple.com" && r.URL.Path == "/InstallationPayload/RecoveryImage" && r.Method == http.MethodPost:
		s.recoveryImage(w, r)
	case r.URL.Host == "oscdn.apple.com" && r.Method == http.MethodGet:
		s.asset(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *Service) recoveryImage(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie("session")
	s.mu.Lock()
	known := err == nil && s.sessions[c.Value]
	s.mu.Unlock()
	if !known {
		http.Error(w, "no session", http.StatusForbidden)
		return
	}
	body, _ := io.ReadAll(r.Body)
	f := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			f[k] = v
		}
	}
	req := Request{Board: f["bid"], MLB: f["sn"], OS: f["os"], CID: f["cid"], K: f["k"], FG: f["fg"]}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	product, ok := s.Boards[req.Board]
	if s.Mode == Refuse || !ok {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	base := "/content/downloads/" + product + "/" + strings.ToLower(randomHex(8)) + "/RecoveryImage/BaseSystem"
	token := func(path string) string {
		sum := sha1.Sum([]byte(path + randomHex(8)))
		t := fmt.Sprintf("expires=%d~access=%s~md5=%s", time.Now().Add(time.Hour).Unix(), path, hex.EncodeToString(sum[:16]))
		s.mu.Lock()
		s.tokens[path] = t
		s.mu.Unlock()
		return t
	}
	ah := sha1.Sum(s.DMG)
	ch := sha1.Sum(s.chunklist)
	lines := []string{
		"AP: " + product,
		"AU: http://oscdn.apple.com" + base + ".dmg",
		"AH: " + strings.ToUpper(hex.EncodeToString(ah[:])),
		"AT: " + token(base+".dmg"),
	}
	if s.Mode != MissingKey {
		lines = append(lines, "CU: http://oscdn.apple.com"+base+".chunklist")
	}
	lines = append(lines,
		"CH: "+strings.ToUpper(hex.EncodeToString(ch[:])),
		"CT: "+token(base+".chunklist"))
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, strings.Join(lines, "\n")+"\n")
}

func (s *Service) asset(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	want, ok := s.tokens[r.URL.Path]
	allowed := ok && r.Header.Get("Cookie") == "AssetToken="+want && s.Mode != ExpiredToken
	status := "200 "
	if !allowed {
		status = "403 "
	}
	s.assetGets = append(s.assetGets, status+r.URL.Path)
	s.mu.Unlock()
	if !allowed {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	body := s.chunklist
	if strings.HasSuffix(r.URL.Path, ".dmg") {
		body = s.servedDMG
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	for off := 0; off < len(body); off += 64 << 10 {
		if _, err := w.Write(body[off:min(off+64<<10, len(body))]); err != nil {
			return
		}
		if s.Throttle > 0 && strings.HasSuffix(r.URL.Path, ".dmg") {
			w.(http.Flusher).Flush()
			time.Sleep(s.Throttle)
		}
	}
}
