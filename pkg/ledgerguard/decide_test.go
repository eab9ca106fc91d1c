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
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestDecide_Table is the whole policy, row by row: what etcd holds, what
// the marker records, and a person's answers decide whether the ledger is
// served, under which reason, and what ID etcd gets.
func TestDecide_Table(t *testing.T) {
	const (
		m = "11111111-marker"
		e = "22222222-etcd"
	)
	seen := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	marker := func(mod func(*Marker)) *Marker {
		mk := &Marker{LedgerID: m, LastRevision: 500, LastSeen: seen}
		if mod != nil {
			mod(mk)
		}
		return mk
	}
	restore := &RestoreRecord{ID: "r1", SnapshotRevision: 300, SnapshotTime: seen.Add(-time.Hour)}
	for _, tc := range []struct {
		name    string
		etcd    EtcdState
		marker  *Marker
		answers Answers
		serve   bool
		reason  string
		id      IDAction
	}{
		// No marker: nothing says the cluster ever had a ledger.
		{"fresh install: empty etcd, no marker", EtcdState{Revision: 1}, nil, Answers{}, true, ReasonFreshInstall, NewID},
		{"blank marker counts as none", EtcdState{Revision: 1}, &Marker{}, Answers{}, true, ReasonFreshInstall, NewID},
		{"install from before IDs: objects, no ID, no marker", EtcdState{HasObjects: true, Revision: 90}, nil, Answers{}, true, ReasonIdentified, NewID},
		{"marker lost, or a restore into a fresh install", EtcdState{LedgerID: e, HasObjects: true, Revision: 90}, nil, Answers{}, true, ReasonMarkerCreated, KeepID},

		// The marker agrees with etcd.
		{"same ledger", EtcdState{LedgerID: m, HasObjects: true, Revision: 600}, marker(nil), Answers{}, true, ReasonSameLedger, KeepID},
		{"same ledger, emptied by its users", EtcdState{LedgerID: m, Revision: 600}, marker(nil), Answers{}, true, ReasonSameLedger, KeepID},
		{"same ledger, older than last seen: restored", EtcdState{LedgerID: m, HasObjects: true, Revision: 400}, marker(nil), Answers{}, true, ReasonRestored, KeepID},
		{"same ledger, an unseen restore record", EtcdState{LedgerID: m, HasObjects: true, Revision: 1_000_000_400, Restore: restore}, marker(nil), Answers{}, true, ReasonRestored, KeepID},
		{"same ledger, the restore already seen", EtcdState{LedgerID: m, HasObjects: true, Revision: 1_000_000_400, Restore: restore},
			marker(func(mk *Marker) { mk.LastRestoreID = "r1" }), Answers{}, true, ReasonSameLedger, KeepID},
		{"objects without an ID under a marker: a snapshot from before IDs", EtcdState{HasObjects: true, Revision: 90}, marker(nil), Answers{}, true, ReasonIDFromMarker, MarkerID},

		// Empty etcd under a marker: the volume is lost.
		{"empty ledger refused", EtcdState{Revision: 1}, marker(nil), Answers{}, false, ReasonLedgerEmpty, KeepID},
		{"empty ledger with an ID of its own refused", EtcdState{LedgerID: e, Revision: 2}, marker(nil), Answers{}, false, ReasonLedgerEmpty, KeepID},
		{"empty ledger confirmed by flag", EtcdState{Revision: 1}, marker(nil), Answers{ConfirmEmpty: m}, true, ReasonConfirmedEmpty, NewID},
		{"empty ledger confirmed by annotation", EtcdState{Revision: 1}, marker(func(mk *Marker) { mk.ConfirmEmpty = m }), Answers{}, true, ReasonConfirmedEmpty, NewID},
		{"empty ledger with its new ID confirmed keeps it", EtcdState{LedgerID: e, Revision: 2}, marker(nil), Answers{ConfirmEmpty: m}, true, ReasonConfirmedEmpty, KeepID},
		{"a confirmation of another ledger's loss answers nothing", EtcdState{Revision: 1}, marker(func(mk *Marker) { mk.ConfirmEmpty = "33333333-old" }),
			Answers{ConfirmEmpty: "33333333-old"}, false, ReasonLedgerEmpty, KeepID},
		{"adopting does not confirm an empty ledger", EtcdState{LedgerID: e, Revision: 2}, marker(nil), Answers{Adopt: e}, false, ReasonLedgerEmpty, KeepID},

		// Another ledger under the marker.
		{"another ledger refused", EtcdState{LedgerID: e, HasObjects: true, Revision: 700}, marker(nil), Answers{}, false, ReasonLedgerMismatch, KeepID},
		{"another ledger adopted by flag", EtcdState{LedgerID: e, HasObjects: true, Revision: 700}, marker(nil), Answers{Adopt: e}, true, ReasonAdopted, KeepID},
		{"another ledger adopted by annotation", EtcdState{LedgerID: e, HasObjects: true, Revision: 700}, marker(func(mk *Marker) { mk.Adopt = e }), Answers{}, true, ReasonAdopted, KeepID},
		{"adopting a third ledger answers nothing", EtcdState{LedgerID: e, HasObjects: true, Revision: 700}, marker(nil), Answers{Adopt: "44444444-other"}, false, ReasonLedgerMismatch, KeepID},
		{"confirming emptiness does not adopt another ledger", EtcdState{LedgerID: e, HasObjects: true, Revision: 700}, marker(nil), Answers{ConfirmEmpty: m}, false, ReasonLedgerMismatch, KeepID},
		{"another ledger restored by a person since", EtcdState{LedgerID: e, HasObjects: true, Revision: 700, Restore: restore}, marker(nil), Answers{}, true, ReasonRestoreOfAnotherLedger, KeepID},
		{"another ledger whose restore the marker saw", EtcdState{LedgerID: e, HasObjects: true, Revision: 700, Restore: restore},
			marker(func(mk *Marker) { mk.LastRestoreID = "r1" }), Answers{}, false, ReasonLedgerMismatch, KeepID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.etcd, tc.marker, tc.answers, DefaultMarker)
			assert.Equal(t, tc.serve, d.Serve, d.Message)
			assert.Equal(t, tc.reason, d.Reason)
			assert.Equal(t, tc.id, d.ID)
			assert.NotEmpty(t, d.Message)
		})
	}
}

// A refusal's message names what was found and every way out, with the
// exact ledger ID to answer with, and fits in an Event (1 KiB).
func TestDecide_RefusalsSayWhatToDo(t *testing.T) {
	mk := &Marker{LedgerID: "0b0f4f0e-7c55-4d5e-9a57-9f1b8f6d7e21", LastRevision: 123456, LastSeen: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	empty := Decide(EtcdState{Revision: 1}, mk, Answers{}, DefaultMarker)
	for _, want := range []string{
		"empty", "ConfigMap dockerios-system/dockerios-ledger", mk.LedgerID, "revision 123456",
		"dockerios-apiserver ledger restore --snapshot FILE --data-dir DIR",
		"kubectl -n dockerios-system annotate configmap dockerios-ledger dockerios.io/confirm-empty-ledger=" + mk.LedgerID,
		"--confirm-empty-ledger=" + mk.LedgerID, "garbage collector",
	} {
		assert.Contains(t, empty.Message, want)
	}
	other := "5d7e0c1a-2b3c-4d5e-8f90-a1b2c3d4e5f6"
	mismatch := Decide(EtcdState{LedgerID: other, HasObjects: true, Revision: 9}, mk, Answers{}, DefaultMarker)
	for _, want := range []string{
		other, mk.LedgerID, "another ledger", "dockerios-apiserver ledger restore",
		"kubectl -n dockerios-system annotate configmap dockerios-ledger dockerios.io/adopt-ledger=" + other, "--adopt-ledger=" + other,
	} {
		assert.Contains(t, mismatch.Message, want)
	}
	for _, d := range []Decision{empty, mismatch} {
		assert.LessOrEqual(t, len(d.Message), 1024, "an Event's message")
		assert.False(t, strings.Contains(d.Message, "\n"))
	}
}
