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

package ledgerguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// CheckName is the readiness check's name: /readyz/dockerios-ledger says
// why the ledger is not served.
const CheckName = "dockerios-ledger"

// Group is the API group the guard blocks.
const Group = "dockerios.io"

// Config is what a Guard needs.
type Config struct {
	// Etcd reaches the ledger; StoragePrefix is the apiserver's ("/registry/").
	Etcd          *clientv3.Client
	StoragePrefix string
	// Kube reaches kube-apiserver for the marker and Events. Nil (the
	// standalone --local server) or an empty Marker keeps no marker: the
	// ledger gets its ID and is served.
	Kube   kubernetes.Interface
	Marker types.NamespacedName
	// Answers are a person's, given as flags.
	Answers Answers
	// APIServices are told of a refusal, as an Event, besides the marker.
	APIServices []string

	// Now and NewID default to the clock and random UUIDs.
	Now   func() time.Time
	NewID func() string
	// RecheckInterval is how often a refused ledger is looked at again
	// (5s by default); MarkerInterval how often a served one is, and its
	// revision recorded in the marker (30s by default).
	RecheckInterval, MarkerInterval time.Duration
}

type phase int

const (
	checking phase = iota
	serving
	refused
)

type state struct {
	phase    phase
	reason   string
	message  string
	ledgerID string
}

// Guard decides whether the ledger is served, and blocks dockerios.io
// until it is.
type Guard struct {
	cfg      Config
	store    *markerStore
	state    atomic.Pointer[state]
	recorder record.EventRecorder

	mu        sync.Mutex
	lastEvent map[string]time.Time
	lastLog   time.Time
	touched   int64
}

// New returns a guard that refuses dockerios.io until Run has looked at
// the ledger.
func New(cfg Config) *Guard {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = func() string { return uuid.NewString() }
	}
	if cfg.RecheckInterval <= 0 {
		cfg.RecheckInterval = 5 * time.Second
	}
	if cfg.MarkerInterval <= 0 {
		cfg.MarkerInterval = 30 * time.Second
	}
	g := &Guard{cfg: cfg, lastEvent: map[string]time.Time{}}
	if cfg.Kube != nil && cfg.Marker.Name != "" {
		g.store = &markerStore{client: cfg.Kube, name: cfg.Marker}
	}
	g.state.Store(&state{phase: checking, message: "the identity ledger has not been checked yet (see /readyz/" + CheckName + ")"})
	return g
}

// RegisterMetrics adds the guard's metric to the apiserver's registry.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(metricRefused)
		for _, r := range []string{ReasonLedgerEmpty, ReasonLedgerMismatch, reasonUnchecked} {
			metricRefused.WithLabelValues(r).Set(0)
		}
	})
}

var (
	registerOnce  sync.Once
	metricRefused = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "dockerios",
		Subsystem:      "ledger",
		Name:           "refused",
		Help:           "1 while the apiserver refuses to serve dockerios.io, by reason: LedgerEmpty (etcd is empty but the marker records a ledger), LedgerMismatch (etcd holds another ledger), Unchecked (the ledger or its marker cannot be read); 0 otherwise.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
)

const reasonUnchecked = "Unchecked"

// Serving says whether dockerios.io is served.
func (g *Guard) Serving() bool { return g.state.Load().phase == serving }

// LedgerID is the ledger served ("" until one is).
func (g *Guard) LedgerID() string { return g.state.Load().ledgerID }

// WaitServing blocks until the ledger is served or ctx is done.
func (g *Guard) WaitServing(ctx context.Context) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for !g.Serving() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// IsGroupPath says whether path is dockerios.io's (discovery included).
func IsGroupPath(path string) bool {
	return path == "/apis/"+Group || strings.HasPrefix(path, "/apis/"+Group+"/")
}

// Filter answers every dockerios.io request 503 with the guard's message
// while the ledger is not served, discovery included, so that
// kube-apiserver's aggregator marks the APIService unavailable and every
// client (the garbage collector, the controller, kubectl) sees an error
// rather than "not found". It goes after authentication and
// authorization: only those allowed to ask are told why.
func (g *Guard) Filter(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsGroupPath(r.URL.Path) {
			if s := g.state.Load(); s.phase != serving {
				writeUnavailable(w, s.message)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

func writeUnavailable(w http.ResponseWriter, message string) {
	status := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   metav1.StatusReasonServiceUnavailable,
		Code:     http.StatusServiceUnavailable,
	}
	body, _ := json.Marshal(status)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "10")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}

// ReadyzCheck fails, with the guard's message, while the ledger is not
// served.
func (g *Guard) ReadyzCheck() healthz.HealthChecker {
	return healthz.NamedCheck(CheckName, func(*http.Request) error {
		if s := g.state.Load(); s.phase != serving {
			return errors.New(s.message)
		}
		return nil
	})
}

// Run looks at the ledger until ctx is done: until it is served, every
// RecheckInterval; then every MarkerInterval, recording its revision in
// the marker and looking again should etcd's ledger change under it.
func (g *Guard) Run(ctx context.Context) {
	if g.cfg.Kube != nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: g.cfg.Kube.CoreV1().Events("")})
		defer b.Shutdown()
		g.recorder = b.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "dockerios-apiserver"})
	}
	for {
		wait := g.cfg.RecheckInterval
		if g.Serving() {
			g.check(ctx)
		} else {
			g.Evaluate(ctx)
		}
		if g.Serving() {
			wait = g.cfg.MarkerInterval
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// check is the served ledger's periodic look: the marker gets the
// revision; a ledger that changed under the server (an external etcd
// wiped or replaced) is decided again.
func (g *Guard) check(ctx context.Context) {
	cur := g.state.Load()
	es, err := ReadEtcd(ctx, g.cfg.Etcd, g.cfg.StoragePrefix)
	if err != nil {
		klog.V(2).InfoS("Identity ledger check failed; trying again later", "err", err)
		return
	}
	if es.LedgerID != cur.ledgerID {
		klog.InfoS("The identity ledger in etcd changed under the apiserver; deciding again whether to serve it", "ledgerID", es.LedgerID, "served", cur.ledgerID)
		g.Evaluate(ctx)
		return
	}
	if g.store == nil || es.Revision == g.touched {
		return
	}
	if err := g.store.touch(ctx, cur.ledgerID, es, g.cfg.Now()); err != nil {
		klog.V(2).InfoS("Recording the ledger's revision in its marker failed; trying again later", "marker", g.cfg.Marker, "err", err)
		return
	}
	g.touched = es.Revision
}

// Evaluate looks at etcd and the marker once, writes what a decision to
// serve needs written (the ledger ID, the marker), and serves or refuses.
func (g *Guard) Evaluate(ctx context.Context) Decision {
	d, id, err := g.evaluate(ctx)
	if err != nil {
		g.set(&state{phase: refused, reason: reasonUnchecked,
			message: "the identity ledger cannot be checked against its marker, so dockerios.io is not served yet: " + err.Error()})
		return Decision{Reason: reasonUnchecked, Message: err.Error()}
	}
	if d.Serve {
		g.set(&state{phase: serving, reason: d.Reason, message: d.Message, ledgerID: id})
	} else {
		g.set(&state{phase: refused, reason: d.Reason, message: d.Message})
	}
	return d
}

func (g *Guard) evaluate(ctx context.Context) (Decision, string, error) {
	for range 5 {
		// The marker first: it is written after the ledger ID, so a
		// replica starting beside another never sees the other's marker
		// with an etcd read from before the other's ID.
		var m *Marker
		var err error
		if g.store != nil {
			if m, err = g.store.read(ctx); err != nil {
				return Decision{}, "", err
			}
		}
		es, err := ReadEtcd(ctx, g.cfg.Etcd, g.cfg.StoragePrefix)
		if err != nil {
			return Decision{}, "", err
		}
		d := Decide(es, m, g.cfg.Answers, g.cfg.Marker)
		if !d.Serve {
			return d, "", nil
		}
		id := es.LedgerID
		if d.ID != KeepID {
			if d.ID == NewID {
				id = g.cfg.NewID()
			} else {
				id = m.LedgerID
			}
			ok, err := WriteLedgerID(ctx, g.cfg.Etcd, g.cfg.StoragePrefix, id)
			if err != nil {
				return Decision{}, "", err
			}
			if !ok {
				continue // another replica wrote one: look again
			}
		}
		if g.store == nil || !needsMarkerWrite(d, m, id, es) {
			return d, id, nil
		}
		r := markerRecord{ledgerID: id, etcd: es, now: g.cfg.Now()}
		if m != nil {
			r.previous, r.restoreID = m.LedgerID, m.LastRestoreID
		}
		if es.Restore != nil {
			r.restoreID = es.Restore.ID
		}
		if err := g.store.write(ctx, m, r); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
				continue // another replica wrote it: look again
			}
			return Decision{}, "", err
		}
		g.touched = es.Revision
		return d, id, nil
	}
	return Decision{}, "", fmt.Errorf("the ledger ID or its marker, ConfigMap %s, kept changing while being read", g.cfg.Marker)
}

func needsMarkerWrite(d Decision, m *Marker, id string, es EtcdState) bool {
	if m == nil || m.LedgerID != id || m.ConfirmEmpty != "" || m.Adopt != "" || d.Reason == ReasonRestored {
		return true
	}
	return es.Restore != nil && es.Restore.ID != m.LastRestoreID
}

// set changes the state, and says so in the log, the metric and, for a
// refusal, Events (at most one per message every ten minutes; the log
// line repeats every five).
func (g *Guard) set(s *state) {
	prev := g.state.Swap(s)
	for _, r := range []string{ReasonLedgerEmpty, ReasonLedgerMismatch, reasonUnchecked} {
		v := 0.0
		if s.phase == refused && s.reason == r {
			v = 1
		}
		metricRefused.WithLabelValues(r).Set(v)
	}
	changed := prev.phase != s.phase || prev.message != s.message
	now := g.cfg.Now()
	if s.phase == serving {
		if changed {
			if s.reason == ReasonSameLedger {
				klog.InfoS("Serving the identity ledger", "ledgerID", s.ledgerID)
			} else {
				klog.InfoS("Serving the identity ledger: "+s.message, "ledgerID", s.ledgerID, "reason", s.reason)
			}
			if s.reason != ReasonSameLedger && s.reason != ReasonFreshInstall && s.reason != ReasonMarkerCreated {
				g.event(corev1.EventTypeNormal, s.reason, s.message)
			}
		}
		return
	}
	g.mu.Lock()
	logNow := changed || now.Sub(g.lastLog) >= 5*time.Minute
	if logNow {
		g.lastLog = now
	}
	g.mu.Unlock()
	if logNow {
		klog.ErrorS(nil, "Not serving dockerios.io: "+s.message, "reason", s.reason, "marker", g.cfg.Marker)
	}
	if s.reason != reasonUnchecked {
		g.event(corev1.EventTypeWarning, s.reason, s.message)
	}
}

func (g *Guard) event(eventType, reason, message string) {
	if g.recorder == nil || g.store == nil {
		return
	}
	g.mu.Lock()
	key := reason + "\x00" + message
	if t, ok := g.lastEvent[key]; ok && g.cfg.Now().Sub(t) < 10*time.Minute {
		g.mu.Unlock()
		return
	}
	g.lastEvent[key] = g.cfg.Now()
	g.mu.Unlock()
	for _, t := range g.eventTargets() {
		g.recorder.Event(t, eventType, reason, message)
	}
}

// eventTargets are the objects a ledger Event is recorded on: the marker
// and the APIServices, each with its UID when it can be read, since
// kubectl describe finds an object's Events by its UID. One that cannot
// be read still gets the Event, found by kind and name.
func (g *Guard) eventTargets() []*corev1.ObjectReference {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	marker := &corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: g.cfg.Marker.Namespace, Name: g.cfg.Marker.Name}
	if cm, err := g.cfg.Kube.CoreV1().ConfigMaps(marker.Namespace).Get(ctx, marker.Name, metav1.GetOptions{}); err == nil {
		marker.UID = cm.UID
	}
	targets := []*corev1.ObjectReference{marker}
	for _, name := range g.cfg.APIServices {
		targets = append(targets, &corev1.ObjectReference{Kind: "APIService", APIVersion: "apiregistration.k8s.io/v1", Name: name,
			UID: apiServiceUID(ctx, g.cfg.Kube, name)})
	}
	return targets
}

// apiServiceUID reads an APIService's UID through the core client's REST
// client (the aggregator's typed client is not a dependency for one
// field), or "" when it cannot.
func apiServiceUID(ctx context.Context, kube kubernetes.Interface, name string) types.UID {
	rc := kube.Discovery().RESTClient()
	if rc == nil {
		return "" // a fake clientset's
	}
	raw, err := rc.Get().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices", name).DoRaw(ctx)
	if err != nil {
		return ""
	}
	var obj metav1.PartialObjectMetadata
	if err := json.Unmarshal(raw, &obj); err != nil {
		return ""
	}
	return obj.UID
}
