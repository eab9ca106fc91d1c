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

// Command dockerios-agent is the DockerIOS guest agent: a launchd daemon in
// every golden image that reports, over authenticated HTTPS, how far the
// machine is from accepting work. See agent/README.md.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/dockerios/dockerios/agent/config"
	"github.com/dockerios/dockerios/agent/host"
	"github.com/dockerios/dockerios/agent/monitor"
	"github.com/dockerios/dockerios/agent/server"
	"github.com/dockerios/dockerios/agent/token"
	"github.com/dockerios/dockerios/pkg/version"
)

// Exit codes; launchd restarts the agent after any of them.
const (
	exitOK       = 0
	exitUsage    = 2
	exitNoToken  = 3
	exitNoListen = 4
	// exitConfigInvalid is used only by --check-config; a running agent
	// never exits for a bad config.
	exitConfigInvalid = 5
)

func defaultConfigPath() string {
	if runtime.GOOS == "darwin" {
		return "/Library/DockerIOS/agent.yaml"
	}
	return "/etc/dockerios/agent.yaml"
}

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("dockerios-agent", flag.ContinueOnError)
	configPath := fs.String("config", defaultConfigPath(), "path to the agent config file")
	showVersion := fs.Bool("version", false, "print the version and exit")
	checkConfig := fs.Bool("check-config", false, "validate the config file and exit (0 valid, 5 invalid)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *showVersion {
		fmt.Println(version.String())
		return exitOK
	}
	if *checkConfig {
		if _, err := config.Load(*configPath); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", *configPath, err)
			return exitConfigInvalid
		}
		return exitOK
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "--log-level:", err)
		return exitUsage
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	log.Info("starting", "version", version.String(), "config", *configPath)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// A broken config must not silence the machine: fall back to what is
	// needed to answer, and report Degraded with the error.
	cfg, cfgErr := config.Load(*configPath)
	if cfgErr != nil {
		log.Error("config invalid; reporting Degraded", "err", cfgErr)
		cfg = config.LoadBootstrap(*configPath)
	}

	tok, err := token.Read(ctx, cfg.Token)
	if err != nil {
		log.Error("no token; cannot authenticate anyone", "err", err)
		return exitNoToken
	}

	cert, err := certificate(cfg.TLS)
	if err != nil {
		log.Error("TLS certificate unusable; using a self-signed one", "err", err)
		cfgErr = errors.Join(cfgErr, fmt.Errorf("tls: %w", err))
		if cert, err = server.SelfSignedCertificate(time.Now()); err != nil {
			log.Error("generating certificate", "err", err)
			return exitNoListen
		}
	}

	// Read once: the OS does not change under a running agent (an update
	// reboots, and launchd starts the agent anew).
	osVersion, err := host.OSVersion(ctx, cfg.OSVersionCommand)
	if err != nil {
		log.Warn("OS version unavailable; reporting none", "err", err)
	}
	log.Info("operating system", "version", osVersion)

	mon := monitor.New(monitor.Options{Config: cfg, ConfigErr: cfgErr, Version: version.String(), OSVersion: osVersion, Logger: log})
	srv := server.NewServer(server.NewHandler(server.Options{Token: tok, Status: mon.Status, Logger: log}), cert, log)

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		log.Error("listen", "addr", cfg.Listen, "err", err)
		return exitNoListen
	}
	log.Info("serving", "addr", ln.Addr().String())

	monDone := make(chan struct{})
	go func() {
		defer close(monDone)
		mon.Run(ctx)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeTLS(server.LimitListener(ln, server.MaxConnections), "", "") }()

	code := exitOK
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-serveErr:
		log.Error("serve", "err", err)
		code = exitNoListen
		stop()
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("shutdown", "err", err)
	}
	<-monDone
	return code
}

func certificate(c config.TLS) (tls.Certificate, error) {
	if c.CertFile == "" {
		return server.SelfSignedCertificate(time.Now())
	}
	return tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
}
