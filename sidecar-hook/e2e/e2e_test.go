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

// Package e2e drives the real sidecar binary the way virt-launcher does:
// over its unix socket, Info first, then the Callbacks of the version it
// picked.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/dockerios/dockerios/sidecar-hook/annotations"
	"github.com/dockerios/dockerios/sidecar-hook/api/info"
	"github.com/dockerios/dockerios/sidecar-hook/api/v1alpha2"
	"github.com/dockerios/dockerios/sidecar-hook/api/v1alpha3"
	"github.com/dockerios/dockerios/sidecar-hook/internal/domaincheck"
)

// testOSK is a dummy key of the real key's shape. It is not Apple's key.
var testOSK = "DOCKERIOS-E2E-OSK-not-the-real-key-" + strings.Repeat("y", 64-35)

var hookBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dockerios-sidecar-hook-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hookBin = filepath.Join(dir, "dockerios-sidecar-hook")
	build := exec.Command("go", "build", "-o", hookBin, "github.com/dockerios/dockerios/sidecar-hook/cmd/dockerios-sidecar-hook")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the hook:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer collects the sidecar's log output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type sidecar struct {
	cmd    *exec.Cmd
	socket string
	log    *syncBuffer
	done   chan error
}

// start runs the binary with its socket in a fresh directory, as KubeVirt
// gives each sidecar its own, and waits for the socket.
func start(t *testing.T, oskFile string) *sidecar {
	t.Helper()
	dir := t.TempDir()
	// Unix socket paths are short; t.TempDir() can be long.
	sockDir, err := os.MkdirTemp("", "dh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	if oskFile == "" {
		oskFile = filepath.Join(dir, "osk")
		if err := os.WriteFile(oskFile, []byte(testOSK+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := &sidecar{socket: filepath.Join(sockDir, annotations.SocketName), log: &syncBuffer{}, done: make(chan error, 1)}
	s.cmd = exec.Command(hookBin, "--socket-dir", sockDir, "--osk-file", oskFile)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		if strings.Contains(s.log.String(), testOSK) {
			t.Errorf("the sidecar logged the OSK:\n%s", s.log.String())
		}
	})
	// The socket's file appears at bind, a moment before listen: only a
	// connection that is accepted says the sidecar serves (a loaded machine
	// made a call in that moment fail with "connection refused").
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("unix", s.socket); err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("socket %s never appeared; log:\n%s", s.socket, s.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *sidecar) dial(t *testing.T) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+s.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// onDefineDomain calls the given version's Callbacks.OnDefineDomain.
func onDefineDomain(t *testing.T, conn *grpc.ClientConn, version string, dom, vmi []byte) ([]byte, error) {
	switch version {
	case "v1alpha2":
		r, err := v1alpha2.NewCallbacksClient(conn).OnDefineDomain(ctx(t), &v1alpha2.OnDefineDomainParams{DomainXML: dom, Vmi: vmi})
		return r.GetDomainXML(), err
	case "v1alpha3":
		r, err := v1alpha3.NewCallbacksClient(conn).OnDefineDomain(ctx(t), &v1alpha3.OnDefineDomainParams{DomainXML: dom, Vmi: vmi})
		return r.GetDomainXML(), err
	}
	t.Fatalf("unknown version %s", version)
	return nil, nil
}

func TestInfo(t *testing.T) {
	s := start(t, "")
	res, err := info.NewInfoClient(s.dial(t)).Info(ctx(t), &info.InfoParams{})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetName() != "dockerios" {
		t.Errorf("name = %q", res.GetName())
	}
	var points []string
	for _, p := range res.GetHookPoints() {
		points = append(points, p.GetName())
	}
	if strings.Join(points, ",") != "OnDefineDomain,Shutdown" {
		t.Errorf("hook points = %v", points)
	}
	if strings.Join(res.GetVersions(), ",") != "v1alpha3,v1alpha2" {
		t.Errorf("versions = %v", res.GetVersions())
	}
	if fi, err := os.Stat(s.socket); err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("socket mode = %v, %v; want 0777 so virt-launcher's user can connect", fi.Mode().Perm(), err)
	}
}

func TestOnDefineDomain(t *testing.T) {
	cases := []struct {
		version, domain, vmi string
		wantBus, wantDev     string
		wantCPU              string
	}{
		{"v1alpha3", "domain-virtio-system.xml", "vmi-nvme.json", "nvme", "nvme0n1", "Haswell-noTSX,vendor=GenuineIntel,+invtsc,kvm=on,+avx2,+fma,+bmi2,+movbe"},
		{"v1alpha2", "domain-virtio-system.xml", "vmi-nvme.json", "nvme", "nvme0n1", "Haswell-noTSX,vendor=GenuineIntel,+invtsc,kvm=on,+avx2,+fma,+bmi2,+movbe"},
		{"v1alpha3", "domain-sata-system.xml", "vmi-sata-to-nvme-default.json", "nvme", "nvme0n1", ""},
		{"v1alpha2", "domain-sata-system.xml", "vmi-virtio.json", "virtio", "vda", ""},
	}
	s := start(t, "")
	conn := s.dial(t)
	for _, tc := range cases {
		t.Run(tc.version+"/"+tc.domain+"/"+tc.vmi, func(t *testing.T) {
			in := fixture(t, tc.domain)
			out, err := onDefineDomain(t, conn, tc.version, in, fixture(t, tc.vmi))
			if err != nil {
				t.Fatal(err)
			}
			before, err := domaincheck.Parse(in)
			if err != nil {
				t.Fatal(err)
			}
			after, err := domaincheck.Parse(out)
			if err != nil {
				t.Fatalf("returned XML does not parse: %v", err)
			}
			args := domaincheck.Args(after)
			if n := domaincheck.CountPair(args, "-device", func(v string) bool { return v == "isa-applesmc,osk="+testOSK }); n != 1 {
				t.Errorf("isa-applesmc device with the OSK present %d times; args %d long", n, len(args))
			}
			if n := domaincheck.CountPair(args, "-device", func(v string) bool { return strings.HasPrefix(v, "isa-applesmc") }); n != 1 {
				t.Errorf("isa-applesmc devices: %d", n)
			}
			if n := domaincheck.CountPair(args, "-smbios", func(v string) bool { return v == "type=2" }); n != 1 {
				t.Errorf("-smbios type=2 present %d times", n)
			}
			wantCPU := 0
			if tc.wantCPU != "" {
				wantCPU = 1
			}
			if n := domaincheck.CountPair(args, "-cpu", func(v string) bool { return v == tc.wantCPU }); n != wantCPU {
				t.Errorf("-cpu %s present %d times, want %d", tc.wantCPU, n, wantCPU)
			}
			disk := domaincheck.Disk(after, "ua-system")
			if disk == nil || disk.Target == nil || disk.Target.Bus != tc.wantBus || disk.Target.Dev != tc.wantDev {
				t.Fatalf("system disk target = %+v, want %s/%s", disk, tc.wantBus, tc.wantDev)
			}
			if tc.wantBus == "nvme" && disk.Serial == "" {
				t.Error("nvme system disk without serial")
			}
			if boot := domaincheck.Disk(after, "ua-bootdisk"); boot == nil || boot.Target.Bus != "sata" || boot.Boot == nil || boot.Boot.Order != 1 {
				t.Errorf("boot disk changed: %+v", boot)
			}
			if err := domaincheck.EqualOutside(before, after, "ua-system"); err != nil {
				t.Error(err)
			}

			again, err := onDefineDomain(t, conn, tc.version, out, fixture(t, tc.vmi))
			if err != nil {
				t.Fatalf("second pass: %v", err)
			}
			if !bytes.Equal(again, out) {
				t.Errorf("second pass is not byte-identical")
			}
		})
	}
}

func TestPassThrough(t *testing.T) {
	s := start(t, filepath.Join(t.TempDir(), "no-osk-needed"))
	conn := s.dial(t)
	in := fixture(t, "domain-virtio-system.xml")
	for _, v := range []string{"v1alpha2", "v1alpha3"} {
		out, err := onDefineDomain(t, conn, v, in, fixture(t, "vmi-plain.json"))
		if err != nil || !bytes.Equal(out, in) {
			t.Errorf("%s: VMI without DockerIOS annotations: err %v, identical %v", v, err, bytes.Equal(out, in))
		}
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing-osk")
	bad := filepath.Join(dir, "bad-osk")
	if err := os.WriteFile(bad, []byte("too-short"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, osk, version, vmi string
		code                    codes.Code
		want                    string
	}{
		{"missing osk", missing, "v1alpha3", "vmi-nvme.json", codes.FailedPrecondition,
			"dockerios sidecar hook: cannot read the Apple SMC key (OSK) from " + missing + ": open " + missing +
				": no such file or directory; mount it there (see artifacts/kubevirt/README.md) or point --osk-file at it"},
		{"invalid osk", bad, "v1alpha2", "vmi-nvme.json", codes.FailedPrecondition,
			"dockerios sidecar hook: the Apple SMC key (OSK) in " + bad + " is invalid: it is 9 bytes long; the key is exactly 64 printable ASCII characters"},
		{"unknown disk", "", "v1alpha3", "vmi-unknown-disk.json", codes.InvalidArgument,
			`dockerios sidecar hook: annotation hook.dockerios.io/system-disk names disk "macintosh-hd", but the domain has no disk with alias "ua-macintosh-hd" (the VMI's disks in the domain: bootdisk, system)`},
		{"unknown bus", "", "v1alpha2", "vmi-bad-bus.json", codes.InvalidArgument,
			`dockerios sidecar hook: annotation hook.dockerios.io/system-disk-bus is "scsi", an unknown bus; supported buses: nvme, sata, virtio`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, tc.osk)
			_, err := onDefineDomain(t, s.dial(t), tc.version, fixture(t, "domain-virtio-system.xml"), fixture(t, tc.vmi))
			st, _ := status.FromError(err)
			if st.Code() != tc.code || st.Message() != tc.want {
				t.Errorf("got %v %q\nwant %v %q", st.Code(), st.Message(), tc.code, tc.want)
			}
		})
	}
}

func TestShutdownStopsTheSidecar(t *testing.T) {
	s := start(t, "")
	if _, err := v1alpha3.NewCallbacksClient(s.dial(t)).Shutdown(ctx(t), &v1alpha3.ShutdownParams{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("sidecar exited with %v; log:\n%s", err, s.log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("sidecar still running 20s after Shutdown")
	}
	if _, err := os.Stat(s.socket); !os.IsNotExist(err) {
		t.Errorf("socket left behind after exit: %v", err)
	}
}
