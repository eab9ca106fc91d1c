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
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

const (
	// BaseStatic names the base layer of every Go image (see the command's
	// comment).
	BaseStatic = "static"
	// NonRootUser is distroless's nonroot user, which the manifests'
	// runAsUser and fsGroup name.
	NonRootUser = "65532:65532"
	nonRootID   = 65532
)

// Copy is one file or tree put into the image: Dst in the image, Src on disk.
type Copy struct {
	Dst, Src string
}

// Spec is everything an image is made of; equal Specs over equal files give
// equal digests.
type Spec struct {
	Ref        string
	Created    time.Time
	Base       string
	Files      []Copy
	Trees      []Copy
	Entrypoint string
	User       string
	WorkingDir string
	Labels     map[string]string
	Env        []string
}

// Build makes the image: the base layer, then one layer with Files and
// Trees, then the config. Two layers rather than one so that every Go image
// shares the base layer's blob.
func Build(s Spec) (v1.Image, error) {
	var base []entry
	var err error
	if s.Base == BaseStatic {
		base, err = staticBase()
	} else {
		base, err = readRootfs(s.Base)
	}
	if err != nil {
		return nil, fmt.Errorf("base: %w", err)
	}
	app, err := appEntries(s.Files, s.Trees)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for i, entries := range [][]entry{base, app} {
		data, err := writeTar(entries, s.Created)
		if err != nil {
			return nil, err
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		comment := "base"
		if i == 1 {
			comment = "application"
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     layer,
			History:   v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "hack/imagebuild", Comment: comment},
			MediaType: types.OCILayer,
		})
		if err != nil {
			return nil, err
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture = "amd64"
	cfg.OS = "linux"
	cfg.Created = v1.Time{Time: s.Created}
	env := []string{"PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if s.Base == BaseStatic {
		// Go's crypto/x509 reads this on Linux; set it anyway so a user
		// running another runtime finds the same bundle.
		env = append(env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt")
	}
	cfg.Config = v1.Config{
		Entrypoint: []string{s.Entrypoint},
		User:       s.User,
		WorkingDir: s.WorkingDir,
		Env:        append(env, s.Env...),
		Labels:     s.Labels,
	}
	return mutate.ConfigFile(img, cfg)
}

// entry is one tar entry; data is nil for directories and links.
type entry struct {
	hdr  tar.Header
	data []byte
}

func dir(name string, mode int64, uid int) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid}}
}

func file(name string, mode int64, data []byte) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data: data}
}

// staticBase is distroless/static's content that a static Go binary uses:
// who 65532 is, a CA bundle, a writable /tmp.
func staticBase() ([]entry, error) {
	var pemBundle bytes.Buffer
	n := 0
	for root := range bundle.Roots() {
		// A root with a constraint (a distrust-after date) cannot be
		// expressed in a PEM bundle; leaving it out is what a plain bundle
		// file can honestly say.
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&pemBundle, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("the CA bundle is empty")
	}
	return []entry{
		dir("etc", 0o755, 0),
		file("etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")),
		file("etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n")),
		file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")),
		dir("etc/ssl", 0o755, 0),
		dir("etc/ssl/certs", 0o755, 0),
		file("etc/ssl/certs/ca-certificates.crt", 0o644, pemBundle.Bytes()),
		dir("home", 0o755, 0),
		dir("home/nonroot", 0o700, nonRootID),
		dir("root", 0o700, 0),
		entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}},
	}, nil
}

// appEntries reads Files and Trees from disk. Every file is root's, 0755 if
// its owner may execute it and 0644 otherwise; the parents of each are
// added as 0755 directories.
func appEntries(files, trees []Copy) ([]entry, error) {
	byName := map[string]entry{}
	addParents := func(name string) {
		for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := byName[d+"/"]; !ok {
				byName[d+"/"] = dir(d, 0o755, 0)
			}
		}
	}
	addFile := func(dst, src string) error {
		name := strings.TrimPrefix(path.Clean("/"+dst), "/")
		if name == "" {
			return fmt.Errorf("%q is not a file path", dst)
		}
		if _, dup := byName[name]; dup {
			return fmt.Errorf("%s is given twice", dst)
		}
		st, err := os.Stat(src)
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", src)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if st.Mode().Perm()&0o100 != 0 {
			mode = 0o755
		}
		byName[name] = file(name, mode, data)
		addParents(name)
		return nil
	}
	for _, f := range files {
		if err := addFile(f.Dst, f.Src); err != nil {
			return nil, fmt.Errorf("--file %s=%s: %w", f.Dst, f.Src, err)
		}
	}
	for _, t := range trees {
		err := filepath.WalkDir(t.Src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(t.Src, p)
			if err != nil {
				return err
			}
			dst := path.Join(t.Dst, filepath.ToSlash(rel))
			switch {
			case d.IsDir():
				name := strings.TrimPrefix(path.Clean("/"+dst), "/")
				if name != "" {
					byName[name+"/"] = dir(name, 0o755, 0)
					addParents(name)
				}
				return nil
			case d.Type().IsRegular():
				return addFile(dst, p)
			default:
				return fmt.Errorf("%s: only files and directories are copied", p)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("--tree %s=%s: %w", t.Dst, t.Src, err)
		}
	}
	out := make([]entry, 0, len(byName))
	for _, e := range byName {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].hdr.Name < out[j].hdr.Name })
	return out, nil
}

// readRootfs reads an uncompressed root filesystem tar in its own order
// (a hard link must follow its target).
func readRootfs(file string) ([]entry, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []entry
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		name := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		if name == "" {
			continue // the root itself: the runtime owns it
		}
		e := entry{hdr: *hdr}
		e.hdr.Name = name
		if hdr.Typeflag == tar.TypeDir {
			e.hdr.Name += "/"
		}
		if hdr.Typeflag == tar.TypeReg {
			if e.data, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", file, name, err)
			}
		}
		out = append(out, e)
	}
}

// writeTar writes entries with only what an image needs of each header and
// every time clamped to created, so that when a file was built, unpacked or
// touched never changes a digest.
func writeTar(entries []entry, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mtime := e.hdr.ModTime
		if mtime.IsZero() || mtime.After(created) {
			mtime = created
		}
		hdr := tar.Header{
			Typeflag: e.hdr.Typeflag,
			Name:     e.hdr.Name,
			Linkname: e.hdr.Linkname,
			Size:     e.hdr.Size,
			Mode:     e.hdr.Mode,
			Uid:      e.hdr.Uid,
			Gid:      e.hdr.Gid,
			ModTime:  mtime.Truncate(time.Second),
			Devmajor: e.hdr.Devmajor,
			Devminor: e.hdr.Devminor,
			Format:   tar.FormatPAX,
		}
		// File capabilities and other extended attributes a package set
		// stay; times and owner names do not.
		for k, v := range e.hdr.PAXRecords {
			if strings.HasPrefix(k, "SCHILY.xattr.") {
				if hdr.PAXRecords == nil {
					hdr.PAXRecords = map[string]string{}
				}
				hdr.PAXRecords[k] = v
			}
		}
		if hdr.Typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(&hdr); err != nil {
			return nil, fmt.Errorf("%s: %w", e.hdr.Name, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, fmt.Errorf("%s: %w", e.hdr.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLayout replaces layoutDir with an OCI layout holding img under ref.
func WriteLayout(layoutDir, ref string, img v1.Image) (v1.Hash, error) {
	if err := os.RemoveAll(layoutDir); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
		// containerd's import names the image by this one.
		"io.containerd.image.name": ref,
	})); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// WriteArchive tars a layout directory (sorted, fixed owner and times), the
// form `ctr images import` reads.
func WriteArchive(out, layoutDir string, created time.Time) error {
	var entries []entry
	err := filepath.WalkDir(layoutDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == layoutDir {
			return err
		}
		rel, err := filepath.Rel(layoutDir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if d.IsDir() {
			entries = append(entries, dir(name, 0o755, 0))
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		entries = append(entries, file(name, 0o644, data))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].hdr.Name < entries[j].hdr.Name })
	data, err := writeTar(entries, created)
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
