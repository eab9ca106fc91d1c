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

// Command fake-gitlab serves the fake GitLab of internal/gitlab/gitlabtest
// (the runner endpoints of GitLab's REST API, in memory) for the local
// stack, where no GitLab runs. It is a development tool, not a GitLab.
//
//	curl -H 'PRIVATE-TOKEN: <token>' http://127.0.0.1:8929/api/v4/runners/all
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dockerios/dockerios/examples/gitlab-runner/internal/gitlab/gitlabtest"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8929", "address to serve on")
	token := flag.String("token", "", "the access token to accept (PRIVATE-TOKEN); required")
	flag.Parse()
	if *token == "" {
		log.Fatal("--token is required")
	}
	fake := gitlabtest.NewServer(*token)
	srv := &http.Server{
		Addr: *listen,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
			fake.ServeHTTP(rec, r)
			log.Printf("%s %s -> %d", r.Method, r.URL.RequestURI(), rec.status)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Printf("fake GitLab serving on http://%s", *listen)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Print(err)
		os.Exit(1)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
