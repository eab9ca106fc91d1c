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

// Package embeddedetcd runs an etcd server inside the DockerIOS apiserver
// process, for development and single-node use when no --etcd-servers are
// given. Its data lives in a directory that survives restarts, so objects
// written by one run are there in the next.
//
// It listens on loopback only, without TLS: nothing outside the process is
// meant to reach it. Production installations point --etcd-servers at a
// real, replicated etcd instead.
package embeddedetcd

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// readyTimeout bounds how long a start may take; a member replaying a large
// write-ahead log needs a while, a healthy empty one well under a second.
const readyTimeout = 2 * time.Minute

// Server is a running embedded etcd.
type Server struct {
	etcd *embed.Etcd
	// ClientURL is the URL clients reach the server at.
	ClientURL string
}

// Start runs etcd with its data in dataDir (created with mode 0700 when
// missing) and returns once it serves clients. Warnings and errors are
// logged to logFile, which is created when missing.
func Start(dataDir, logFile string) (*Server, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating etcd data directory: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(logFile), 0o700); err != nil {
		return nil, fmt.Errorf("creating etcd log directory: %w", err)
	}
	ports, err := freeLoopbackPorts(2)
	if err != nil {
		return nil, err
	}
	clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
	peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}

	cfg := embed.NewConfig()
	cfg.Name = "dockerios"
	cfg.Dir = dataDir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	// A single member never talks to peers, but etcd insists on a peer URL.
	// It may differ from run to run: a restarting member is not re-bootstrapped.
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(fileLogger(logFile))

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd in %s: %w", dataDir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed while starting: %w", err)
	case <-time.After(readyTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s was not ready after %s; see %s", dataDir, readyTimeout, logFile)
	}
	return &Server{etcd: e, ClientURL: clientURL.String()}, nil
}

// Stop shuts etcd down cleanly, after in-flight writes are committed.
func (s *Server) Stop() { s.etcd.Close() }

// Err delivers a fatal error of the running server.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

func fileLogger(path string) *zap.Logger {
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(zapcore.WarnLevel)
	cfg.OutputPaths = []string{path}
	cfg.ErrorOutputPaths = []string{path}
	cfg.Sampling = nil
	lg, err := cfg.Build()
	if err != nil {
		return zap.NewNop()
	}
	return lg.Named("etcd")
}

func freeLoopbackPorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free loopback port for etcd: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
