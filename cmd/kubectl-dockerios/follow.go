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
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// change is one thing a followed stream saw: an object as it now is, an
// object gone, or the error that ended the stream.
type change struct {
	obj     runtime.Object
	deleted bool
	err     error
}

// listWatch lists and watches the objects of one kind that opts select.
type listWatch struct {
	list  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
	opts  metav1.ListOptions
}

// Backoff between attempts while the server does not answer: quick enough
// that a restarted apiserver is found again within seconds, slow enough
// not to hammer one that is down.
const (
	followBackoffStart = 500 * time.Millisecond
	followBackoffCap   = 15 * time.Second
)

// follow sends every object lw selects, then every change to them, until
// ctx is done. It lists, then watches from the list's resourceVersion, so
// that nothing that happens between the two is missed, and a change is
// never inferred from polling. A watch the server ends (watches last
// minutes) is resumed from the last resourceVersion seen, bookmarks
// included; when the server no longer has that version (410 Gone) it
// lists again, and reports the objects that went meanwhile as deleted. An
// error retrying cannot cure (Forbidden, NotFound, a bad selector) ends
// the stream with the error; any other is retried with backoff, since a
// wait of many minutes must survive an apiserver restart.
func follow(ctx context.Context, lw listWatch, out chan<- change) {
	send := func(c change) bool {
		select {
		case out <- c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	delay := followBackoffStart
	backoff := func() bool {
		t := time.NewTimer(delay)
		defer t.Stop()
		delay = min(2*delay, followBackoffCap)
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	// known is every object sent and not deleted since, by namespace/name.
	known := map[string]runtime.Object{}
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list, err := lw.list(ctx, lw.opts)
			if err != nil {
				if permanent(err) {
					send(change{err: err})
					return
				}
				if !backoff() {
					return
				}
				continue
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				send(change{err: err})
				return
			}
			listed := map[string]runtime.Object{}
			for _, obj := range items {
				listed[key(obj)] = obj
				if !send(change{obj: obj}) {
					return
				}
			}
			for k, obj := range known {
				if _, ok := listed[k]; !ok && !send(change{obj: obj, deleted: true}) {
					return
				}
			}
			known = listed
			lm, err := meta.ListAccessor(list)
			if err != nil {
				send(change{err: err})
				return
			}
			rv = lm.GetResourceVersion()
			delay = followBackoffStart
		}
		opts := lw.opts
		opts.ResourceVersion, opts.AllowWatchBookmarks = rv, true
		w, err := lw.watch(ctx, opts)
		switch {
		case err == nil:
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			rv = ""
			continue
		case permanent(err):
			send(change{err: err})
			return
		default:
			if !backoff() {
				return
			}
			continue
		}
		var saw bool
		rv, saw, err = drain(ctx, w, rv, known, send)
		if err != nil {
			send(change{err: err})
			return
		}
		// A watch that ended without a word, again and again, is a server
		// in trouble; do not spin on it.
		if !saw && !backoff() {
			return
		}
		if saw {
			delay = followBackoffStart
		}
	}
}

// drain forwards w's events until it ends, keeping known up to date. It
// returns the resourceVersion to resume from ("" to list again), whether
// any event came, and an error that ends the stream.
func drain(ctx context.Context, w watch.Interface, rv string, known map[string]runtime.Object, send func(change) bool) (string, bool, error) {
	defer w.Stop()
	saw := false
	for {
		var ev watch.Event
		var ok bool
		select {
		case ev, ok = <-w.ResultChan():
		case <-ctx.Done():
			return rv, saw, nil
		}
		if !ok {
			return rv, saw, nil
		}
		saw = true
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			k := key(ev.Object)
			if ev.Type == watch.Deleted {
				delete(known, k)
			} else {
				known[k] = ev.Object
			}
			if !send(change{obj: ev.Object, deleted: ev.Type == watch.Deleted}) {
				return rv, saw, nil
			}
			rv = resourceVersion(ev.Object, rv)
		case watch.Bookmark:
			rv = resourceVersion(ev.Object, rv)
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			switch {
			case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
				return "", saw, nil
			case permanent(err):
				return rv, saw, err
			}
			// Anything else (a timeout, a server shutting down): resume.
			return rv, saw, nil
		}
	}
}

// permanent is an error that asking again will not change.
func permanent(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		// Not an answer from the server: the connection. Try again.
		return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	}
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) ||
		apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) || apierrors.IsMethodNotSupported(err) ||
		apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err)
}

func key(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetNamespace() + "/" + m.GetName()
}

func resourceVersion(obj runtime.Object, otherwise string) string {
	if m, err := meta.Accessor(obj); err == nil && m.GetResourceVersion() != "" {
		return m.GetResourceVersion()
	}
	return otherwise
}
