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

// Package server serves the DockerIOS hook over KubeVirt's hook sidecar
// protocol: the Info service and the Callbacks service in versions
// v1alpha2 and v1alpha3, on a unix socket virt-launcher finds in the pod's
// shared hooks directory.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dockerios/dockerios/sidecar-hook/api/info"
	"github.com/dockerios/dockerios/sidecar-hook/api/v1alpha2"
	"github.com/dockerios/dockerios/sidecar-hook/api/v1alpha3"
	"github.com/dockerios/dockerios/sidecar-hook/hook"
)

// Name is the hook's name in Info.
const Name = "dockerios"

// Hook point names, as KubeVirt's pkg/hooks/info defines them.
const (
	OnDefineDomainHookPoint = "OnDefineDomain"
	ShutdownHookPoint       = "Shutdown"
)

// Versions are the Callbacks versions served, newest first; virt-launcher
// uses the newest it knows.
var Versions = []string{"v1alpha3", "v1alpha2"}

// Server is the gRPC server of one sidecar.
type Server struct {
	Hook hook.Hook
	Log  *slog.Logger

	grpc     *grpc.Server
	shutdown chan struct{}
	once     sync.Once
}

// New returns a server for h that logs to log.
func New(h hook.Hook, log *slog.Logger) *Server {
	s := &Server{Hook: h, Log: log, shutdown: make(chan struct{})}
	s.grpc = grpc.NewServer()
	info.RegisterInfoServer(s.grpc, infoServer{})
	v1alpha2.RegisterCallbacksServer(s.grpc, v1alpha2Server{s: s})
	v1alpha3.RegisterCallbacksServer(s.grpc, v1alpha3Server{s: s})
	return s
}

// Listen creates the unix socket at path, replacing a stale one left by a
// previous run of the container. The socket is made connectable by every
// user: virt-launcher's compute container may run as a different user than
// this one, and only containers of the VMI's own pod mount the directory.
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale socket: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o777); err != nil {
		l.Close()
		return nil, fmt.Errorf("making %s connectable: %w", path, err)
	}
	return l, nil
}

// Serve answers calls on l until Stop, a v1alpha3 Shutdown call, or an
// error. It returns nil after a Shutdown call or Stop.
func (s *Server) Serve(l net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- s.grpc.Serve(l) }()
	select {
	case <-s.shutdown:
		s.grpc.GracefulStop()
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, grpc.ErrServerStopped) {
			return nil
		}
		return err
	}
}

// Stop ends Serve after in-flight calls finish.
func (s *Server) Stop() { s.once.Do(func() { close(s.shutdown) }) }

type infoServer struct {
	info.UnimplementedInfoServer
}

func (infoServer) Info(context.Context, *info.InfoParams) (*info.InfoResult, error) {
	return &info.InfoResult{
		Name: Name,
		HookPoints: []*info.HookPoint{
			{Name: OnDefineDomainHookPoint, Priority: 0},
			{Name: ShutdownHookPoint, Priority: 0},
		},
		Versions: Versions,
	}, nil
}

// onDefineDomain is shared by both versions. Logs name the VMI and what was
// done, never the domain XML (it holds the key) nor the key.
func (s *Server) onDefineDomain(version string, domainXML, vmiJSON []byte) ([]byte, error) {
	out, res, err := s.Hook.OnDefineDomain(domainXML, vmiJSON)
	if err != nil {
		s.Log.Error("OnDefineDomain failed", "version", version, "vmi", res.VMI.String(), "error", err.Error())
		var he *hook.Error
		if errors.As(err, &he) {
			return nil, he
		}
		return nil, status.Error(codes.Internal, err.Error())
	}
	s.Log.Info("OnDefineDomain", "version", version, "vmi", res.VMI.String(), "result", res.Summary())
	return out, nil
}

type v1alpha2Server struct {
	v1alpha2.UnimplementedCallbacksServer
	s *Server
}

func (v v1alpha2Server) OnDefineDomain(_ context.Context, p *v1alpha2.OnDefineDomainParams) (*v1alpha2.OnDefineDomainResult, error) {
	out, err := v.s.onDefineDomain("v1alpha2", p.GetDomainXML(), p.GetVmi())
	if err != nil {
		return nil, err
	}
	return &v1alpha2.OnDefineDomainResult{DomainXML: out}, nil
}

// PreCloudInitIso is not a hook point this sidecar subscribes to; it hands
// the data back unchanged should it be called anyway.
func (v v1alpha2Server) PreCloudInitIso(_ context.Context, p *v1alpha2.PreCloudInitIsoParams) (*v1alpha2.PreCloudInitIsoResult, error) {
	return &v1alpha2.PreCloudInitIsoResult{CloudInitNoCloudSource: p.GetCloudInitNoCloudSource(), CloudInitData: p.GetCloudInitData()}, nil
}

type v1alpha3Server struct {
	v1alpha3.UnimplementedCallbacksServer
	s *Server
}

func (v v1alpha3Server) OnDefineDomain(_ context.Context, p *v1alpha3.OnDefineDomainParams) (*v1alpha3.OnDefineDomainResult, error) {
	out, err := v.s.onDefineDomain("v1alpha3", p.GetDomainXML(), p.GetVmi())
	if err != nil {
		return nil, err
	}
	return &v1alpha3.OnDefineDomainResult{DomainXML: out}, nil
}

func (v v1alpha3Server) PreCloudInitIso(_ context.Context, p *v1alpha3.PreCloudInitIsoParams) (*v1alpha3.PreCloudInitIsoResult, error) {
	return &v1alpha3.PreCloudInitIsoResult{CloudInitNoCloudSource: p.GetCloudInitNoCloudSource(), CloudInitData: p.GetCloudInitData()}, nil
}

// Shutdown is virt-launcher saying the VMI is gone: the sidecar exits so the
// pod can complete. The reply is sent before the server stops.
func (v v1alpha3Server) Shutdown(context.Context, *v1alpha3.ShutdownParams) (*v1alpha3.ShutdownResult, error) {
	v.s.Log.Info("Shutdown requested by virt-launcher; exiting")
	go v.s.Stop()
	return &v1alpha3.ShutdownResult{}, nil
}
