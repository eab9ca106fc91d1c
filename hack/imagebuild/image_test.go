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

package main

import (
	"archive/tar"
	"bufio"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

var created = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func writeFile(t *testing.T, path, content string, mode os.FileMode, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func spec(dir string) Spec {
	return Spec{
		Ref: "ghcr.io/dockerios/test:v1", Created: created, Base: BaseStatic,
		Files:      []Copy{{Dst: "/usr/local/bin/app", Src: filepath.Join(dir, "app")}},
		Trees:      []Copy{{Dst: "/opt/data", Src: filepath.Join(dir, "tree")}},
		Entrypoint: "/usr/local/bin/app", User: NonRootUser, WorkingDir: "/",
		Labels: map[string]string{"org.opencontainers.image.version": "v1"},
	}
}

// files reads a layer's tar: name → header.
func files(t *testing.T, r io.Reader) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		// mutate.Extract names directories without their slash.
		out[strings.TrimSuffix(h.Name, "/")] = h
	}
}

// The same inputs give the same digest whenever and however the files
// were made: their times, their owners and the build's clock do not count.
func TestBuild_SameInputsSameDigest(t *testing.T) {
	digests := map[string]bool{}
	for i, mtime := range []time.Time{time.Now(), time.Unix(0, 0), created.Add(-time.Hour)} {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "app"), "#!binary", 0o755, mtime)
		writeFile(t, filepath.Join(dir, "tree", "b.txt"), "b", 0o600, mtime)
		writeFile(t, filepath.Join(dir, "tree", "a", "c.txt"), "c", 0o644, mtime)
		img, err := Build(spec(dir))
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests[d.String()] = true
		if i == 0 {
			out := filepath.Join(t.TempDir(), "layout")
			got, err := WriteLayout(out, "ghcr.io/dockerios/test:v1", img)
			if err != nil || got != d {
				t.Fatalf("WriteLayout: %v, %v want %v", err, got, d)
			}
		}
	}
	if len(digests) != 1 {
		t.Fatalf("one spec gave %d digests: %v", len(digests), digests)
	}
}

// What a Go image is: the non-root user, a CA bundle Go can use, files
// owned by root with the modes their owner's execute bit says, times no
// later than created, the labels and the entrypoint.
func TestBuild_StaticImage(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "app"), "#!binary", 0o700, time.Now())
	writeFile(t, filepath.Join(dir, "tree", "b.txt"), "b", 0o600, time.Now())
	img, err := Build(spec(dir))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || cfg.Config.Entrypoint[0] != "/usr/local/bin/app" || cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("config: user %q entrypoint %q %s/%s", cfg.Config.User, cfg.Config.Entrypoint, cfg.OS, cfg.Architecture)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != "v1" || !cfg.Created.Equal(created) {
		t.Errorf("labels %v, created %v", cfg.Config.Labels, cfg.Created)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	all := files(t, strings.NewReader(string(data)))
	for name, want := range map[string]int64{"usr/local/bin/app": 0o755, "opt/data/b.txt": 0o644, "etc/passwd": 0o644, "tmp": 0o1777} {
		h, ok := all[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if h.Mode != want || h.Uid != 0 || h.ModTime.After(created) {
			t.Errorf("%s: mode %o uid %d mtime %v; want mode %o, root's, no later than %v", name, h.Mode, h.Uid, h.ModTime, want, created)
		}
	}
	if h := all["home/nonroot"]; h == nil || h.Uid != 65532 {
		t.Errorf("home/nonroot/ is not 65532's: %+v", h)
	}
	// The CA bundle parses and is not empty.
	tr := tar.NewReader(strings.NewReader(string(data)))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatal("no CA bundle")
		}
		if h.Name != "etc/ssl/certs/ca-certificates.crt" {
			continue
		}
		pemData, _ := io.ReadAll(tr)
		pool := x509.NewCertPool()
		n := 0
		for rest := pemData; ; {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			pool.AddCert(c)
			n++
		}
		if n < 50 {
			t.Fatalf("CA bundle has %d certificates", n)
		}
		break
	}
}

// A file named twice, or a path that is no file, is refused, naming it.
func TestBuild_BadInput(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "app"), "x", 0o755, created)
	s := spec(dir)
	s.Trees = nil
	s.Files = append(s.Files, Copy{Dst: "/usr/local/bin/app", Src: filepath.Join(dir, "app")})
	if _, err := Build(s); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a file given twice: %v", err)
	}
	s = spec(dir)
	s.Trees = nil
	s.Files = []Copy{{Dst: "/x", Src: dir}}
	if _, err := Build(s); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory as a file: %v", err)
	}
}

// hack/images.sh run twice — the Debian userland made again by
// mmdebstrap each time, the binaries from Go's content-addressed build
// cache (which gives what a clean build gives) — gives the same digests. It
// takes a few minutes, so hack/test.sh asks for it
// (DOCKERIOS_IMAGES_REPRODUCIBLE=1).
func TestImagesScriptIsReproducible(t *testing.T) {
	if os.Getenv("DOCKERIOS_IMAGES_REPRODUCIBLE") != "1" {
		t.Skip("set DOCKERIOS_IMAGES_REPRODUCIBLE=1 (hack/test.sh does) to build every image twice")
	}
	read := func(file string) map[string]string {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		out := map[string]string{}
		s := bufio.NewScanner(f)
		for s.Scan() {
			if name, ref, ok := strings.Cut(s.Text(), " "); ok {
				out[name] = ref
			}
		}
		return out
	}
	var runs []map[string]string
	for i := range 2 {
		out := t.TempDir()
		cmd := exec.Command("../images.sh")
		cmd.Env = append(os.Environ(), "OUTPUT="+out, "NO_CACHE=1")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, b)
		}
		runs = append(runs, read(filepath.Join(out, "images.txt")))
	}
	if len(runs[0]) != 6 {
		t.Fatalf("images.txt lists %d images, want 6: %v", len(runs[0]), runs[0])
	}
	for name, ref := range runs[0] {
		if !strings.Contains(ref, "@sha256:") {
			t.Errorf("%s: no digest in %q", name, ref)
		}
		if runs[1][name] != ref {
			t.Errorf("%s: %s, then %s", name, ref, runs[1][name])
		}
	}
}
