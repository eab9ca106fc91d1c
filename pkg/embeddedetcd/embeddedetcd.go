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
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
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
	etcd     *embed.Etcd
	stopping *atomic.Bool
	// ClientURL is the URL clients reach the server at.
	ClientURL string
}

// Start runs etcd with its data in dataDir (created with mode 0700 when
// missing) and returns once it serves clients. Its warnings and errors are
// written to logOut as JSON lines (zap's production encoding, logger name
// "etcd"); what it says below warning is dropped: a healthy member's info
// lines (compactions, snapshots) would drown the server's own log.
func Start(dataDir string, logOut io.Writer) (*Server, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating etcd data directory: %w", err)
	}
	// The ledger is readable by its owner only, whoever made the
	// directory (etcd warns at every start otherwise).
	if err := os.Chmod(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("restricting etcd data directory: %w", err)
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
	stopping := new(atomic.Bool)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newLogger(logOut, stopping))

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
		return nil, fmt.Errorf("embedded etcd in %s was not ready after %s; its log says why", dataDir, readyTimeout)
	}
	return &Server{etcd: e, stopping: stopping, ClientURL: clientURL.String()}, nil
}

// Stop shuts etcd down cleanly, after in-flight writes are committed.
func (s *Server) Stop() {
	s.stopping.Store(true)
	s.etcd.Close()
}

// Err delivers a fatal error of the running server.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// newLogger writes etcd's warnings and errors to out, except those that
// say nothing about this member's health: a log that cries "error" at
// every clean stop teaches its reader to ignore it.
func newLogger(out io.Writer, stopping *atomic.Bool) *zap.Logger {
	sink := zapcore.Lock(zapcore.AddSync(out))
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	core := quietCore{Core: zapcore.NewCore(enc, sink, zapcore.WarnLevel), stopping: stopping}
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(sink)).Named("etcd")
}

// alwaysBenign are warnings about choices this server makes on purpose:
// clients reach the member on loopback only, over one port, with etcd's
// authentication off (the apiserver is its only client).
var alwaysBenign = map[string]bool{
	"Running http and grpc server on single port. This is not recommended for production.": true,
	"simple token is not cryptographically signed":                                         true,
}

// benignWhileStopping are what etcd's listeners say when Stop closes them.
var benignWhileStopping = map[string]bool{
	"setting up serving from embedded etcd failed.": true,
	"stopping insecure grpc server due to error":    true,
	"stopped insecure grpc server due to error":     true,
}

// quietCore drops the entries above and passes everything else on.
type quietCore struct {
	zapcore.Core
	stopping *atomic.Bool
}

func (c quietCore) With(fields []zapcore.Field) zapcore.Core {
	return quietCore{Core: c.Core.With(fields), stopping: c.stopping}
}

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if alwaysBenign[e.Message] || (c.stopping.Load() && benignWhileStopping[e.Message]) {
		return ce
	}
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
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
