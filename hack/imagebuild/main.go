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

// Command imagebuild assembles one OCI image from files on disk, without a
// container engine and without pulling anything: hack/images.sh runs it once
// per image. The same inputs always give the same digest: every tar entry has
// a fixed owner and a time no later than --created, entries are sorted, and
// gzip carries no timestamp.
//
//	imagebuild --ref REF --layout DIR [--archive FILE] --created RFC3339 \
//	  --base static|ROOTFS.tar --file DST=SRC ... --tree DST=SRCDIR ... \
//	  --entrypoint PATH --user UID:GID --label K=V ... --env K=V ...
//
// --base static is the base of every Go image: a CA bundle (NSS's roots, as
// pinned by golang.org/x/crypto/x509roots/fallback in go.sum, so the bundle
// is the same on every machine), /etc/passwd and /etc/group with the
// non-root user 65532, /tmp and the user's home. --base FILE takes an
// uncompressed root filesystem tar (the bootdisk builder's Debian userland
// from mmdebstrap) and normalises it the same way.
//
// It prints REF@DIGEST. The layout holds exactly one image, annotated with
// its reference under both the OCI name and containerd's, so `ctr images
// import` of --archive names it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var (
		spec    Spec
		created string
		files   listFlag
		trees   listFlag
		labels  listFlag
		envs    listFlag
		archive string
		layout  string
	)
	flag.StringVar(&spec.Ref, "ref", "", "image reference, e.g. ghcr.io/dockerios/dockerios-apiserver:v0.2.0")
	flag.StringVar(&layout, "layout", "", "OCI image layout directory to write (replaced)")
	flag.StringVar(&archive, "archive", "", "also write the layout as a tar, for ctr images import")
	flag.StringVar(&created, "created", "", "image creation time (RFC 3339), normally the commit's time; also the newest time of any file")
	flag.StringVar(&spec.Base, "base", BaseStatic, "\"static\" or an uncompressed root filesystem tar")
	flag.Var(&files, "file", "DST=SRC: a file of the image and where to read it (repeatable)")
	flag.Var(&trees, "tree", "DST=SRCDIR: a directory tree of the image and where to read it (repeatable)")
	flag.StringVar(&spec.Entrypoint, "entrypoint", "", "the image's entrypoint")
	flag.StringVar(&spec.User, "user", NonRootUser, "the user the image runs as")
	flag.StringVar(&spec.WorkingDir, "workdir", "/", "working directory")
	flag.Var(&labels, "label", "K=V: an image label (repeatable)")
	flag.Var(&envs, "env", "K=V: an environment variable (repeatable)")
	flag.Parse()

	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "imagebuild: "+format+"\n", args...)
		os.Exit(2)
	}
	if flag.NArg() != 0 {
		fail("unexpected arguments %q", flag.Args())
	}
	if spec.Ref == "" || layout == "" || spec.Entrypoint == "" {
		fail("--ref, --layout and --entrypoint are required")
	}
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		fail("--created: %v", err)
	}
	spec.Created = t.UTC()
	for _, f := range files {
		dst, src, ok := strings.Cut(f, "=")
		if !ok || dst == "" || src == "" {
			fail("--file %q: want DST=SRC", f)
		}
		spec.Files = append(spec.Files, Copy{Dst: dst, Src: src})
	}
	for _, f := range trees {
		dst, src, ok := strings.Cut(f, "=")
		if !ok || dst == "" || src == "" {
			fail("--tree %q: want DST=SRCDIR", f)
		}
		spec.Trees = append(spec.Trees, Copy{Dst: dst, Src: src})
	}
	spec.Labels = map[string]string{}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			fail("--label %q: want K=V", l)
		}
		spec.Labels[k] = v
	}
	for _, e := range envs {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			fail("--env %q: want K=V", e)
		}
		spec.Env = append(spec.Env, e)
	}

	img, err := Build(spec)
	if err != nil {
		fail("%s: %v", spec.Ref, err)
	}
	digest, err := WriteLayout(layout, spec.Ref, img)
	if err != nil {
		fail("%s: %v", spec.Ref, err)
	}
	if archive != "" {
		if err := WriteArchive(archive, layout, spec.Created); err != nil {
			fail("%s: %v", spec.Ref, err)
		}
	}
	fmt.Printf("%s@%s\n", spec.Ref, digest)
}
