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
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Marker is the record of the ledger the apiserver keeps outside its etcd
// (a ConfigMap), as read.
type Marker struct {
	// LedgerID is the ledger this cluster's DockerIOS serves; empty in a
	// marker that records none yet.
	LedgerID string
	// LastRevision and LastSeen: the etcd revision an apiserver last saw
	// the ledger at, and when.
	LastRevision int64
	LastSeen     time.Time
	// LastRestoreID is the last restore (RestoreRecord.ID) an apiserver
	// served.
	LastRestoreID string
	// ConfirmEmpty and Adopt are a person's answers, as annotations:
	// ConfirmEmptyAnnotation and AdoptAnnotation.
	ConfirmEmpty, Adopt string

	// ResourceVersion is the ConfigMap's, for a conditional update.
	ResourceVersion string
}

// Answers a person gives the guard through flags; they work as the
// marker's annotations do.
type Answers struct {
	// ConfirmEmpty, set to the marker's ledger ID, accepts that ledger as
	// lost: an empty ledger is served, as a fresh install.
	ConfirmEmpty string
	// Adopt, set to the ledger ID etcd holds, accepts that ledger as this
	// cluster's.
	Adopt string
}

// Reasons of a Decision.
const (
	// Served:
	ReasonFreshInstall           = "FreshInstall"           // empty etcd, no marker: a new ledger
	ReasonIdentified             = "Identified"             // objects without an ID, no marker: an install from before the ID, given one
	ReasonMarkerCreated          = "MarkerCreated"          // a ledger, no marker (lost, or a restore into a fresh install)
	ReasonSameLedger             = "SameLedger"             // etcd and marker agree
	ReasonRestored               = "Restored"               // they agree, and the ledger is a restore or older than last seen
	ReasonIDFromMarker           = "IDFromMarker"           // objects without an ID under a marker: a snapshot from before the ID
	ReasonRestoreOfAnotherLedger = "RestoreOfAnotherLedger" // another ledger, restored by a person since the marker was written
	ReasonConfirmedEmpty         = "ConfirmedEmpty"         // empty, and a person confirmed a fresh start
	ReasonAdopted                = "Adopted"                // another ledger, and a person adopted it
	// Refused:
	ReasonLedgerEmpty    = "LedgerEmpty"
	ReasonLedgerMismatch = "LedgerMismatch"
)

// Marker annotations: a person's answer to a refusal, naming the ledger
// it answers for, so an answer left behind never answers the next loss.
const (
	ConfirmEmptyAnnotation = "dockerios.io/confirm-empty-ledger"
	AdoptAnnotation        = "dockerios.io/adopt-ledger"
)

// IDAction is what the guard writes into etcd's ledger ID before serving.
type IDAction int

const (
	// KeepID: etcd's ID stands.
	KeepID IDAction = iota
	// NewID: a new random ID (etcd holds none).
	NewID
	// MarkerID: the marker's ID (etcd's objects have none).
	MarkerID
)

// Decision is what the guard does with a ledger.
type Decision struct {
	Serve  bool
	Reason string
	// ID is what to write into etcd's ledger ID before serving.
	ID IDAction
	// Message says what was found and, when refused, exactly what to do.
	Message string
}

// Decide compares etcd's ledger with the marker (nil when there is none)
// and says whether to serve it. It is the whole policy; see the package
// documentation for why.
func Decide(etcd EtcdState, marker *Marker, answers Answers, markerName types.NamespacedName) Decision {
	if marker == nil || marker.LedgerID == "" {
		recorded := "recorded in ConfigMap " + markerName.String()
		if markerName.Name == "" {
			recorded = "no marker is kept"
		}
		switch {
		case etcd.LedgerID != "":
			return Decision{Serve: true, Reason: ReasonMarkerCreated,
				Message: fmt.Sprintf("ledger %s has no marker (a restore into a fresh install, or the ConfigMap was deleted): %s", etcd.LedgerID, recorded)}
		case etcd.HasObjects:
			return Decision{Serve: true, Reason: ReasonIdentified, ID: NewID,
				Message: "the ledger has no ID (written by an earlier version): it is given one; " + recorded}
		default:
			return Decision{Serve: true, Reason: ReasonFreshInstall, ID: NewID,
				Message: "empty etcd and no marker: a new ledger; " + recorded}
		}
	}
	m := marker.LedgerID
	confirmedEmpty := answers.ConfirmEmpty == m || marker.ConfirmEmpty == m
	switch {
	case etcd.LedgerID == m:
		if etcd.Restore != nil && etcd.Restore.ID != marker.LastRestoreID {
			return Decision{Serve: true, Reason: ReasonRestored, Message: fmt.Sprintf("ledger %s was restored from %s; its identity pools are on hold until what runs is compared with it",
				m, describeRestore(etcd.Restore))}
		}
		if etcd.Revision < marker.LastRevision {
			return Decision{Serve: true, Reason: ReasonRestored, Message: fmt.Sprintf("ledger %s is at etcd revision %d, older than the revision %d last seen at %s: it was restored from a snapshot",
				m, etcd.Revision, marker.LastRevision, marker.LastSeen.UTC().Format(time.RFC3339))}
		}
		return Decision{Serve: true, Reason: ReasonSameLedger, Message: "ledger " + m}
	case etcd.LedgerID == "" && etcd.HasObjects:
		return Decision{Serve: true, Reason: ReasonIDFromMarker, ID: MarkerID,
			Message: fmt.Sprintf("the ledger has objects but no ID (a snapshot from an earlier version): it takes the marker's, %s", m)}
	case !etcd.HasObjects:
		// Empty, with or without an ID of its own (one written by a
		// fresh start whose marker update did not happen yet).
		if confirmedEmpty {
			id := NewID
			if etcd.LedgerID != "" {
				id = KeepID
			}
			return Decision{Serve: true, Reason: ReasonConfirmedEmpty, ID: id,
				Message: fmt.Sprintf("ledger %s confirmed lost by a person: an empty ledger is served as a fresh install", m)}
		}
		return Decision{Reason: ReasonLedgerEmpty, Message: emptyMessage(marker, markerName)}
	default:
		// Another ledger, with objects.
		if etcd.Restore != nil && etcd.Restore.ID != marker.LastRestoreID {
			return Decision{Serve: true, Reason: ReasonRestoreOfAnotherLedger,
				Message: fmt.Sprintf("ledger %s, restored by a person from %s, replaces ledger %s; its identity pools are on hold until what runs is compared with it",
					etcd.LedgerID, describeRestore(etcd.Restore), m)}
		}
		if answers.Adopt == etcd.LedgerID || marker.Adopt == etcd.LedgerID {
			return Decision{Serve: true, Reason: ReasonAdopted,
				Message: fmt.Sprintf("ledger %s adopted by a person in place of ledger %s", etcd.LedgerID, m)}
		}
		return Decision{Reason: ReasonLedgerMismatch, Message: mismatchMessage(etcd, marker, markerName)}
	}
}

func describeRestore(r *RestoreRecord) string {
	s := fmt.Sprintf("a snapshot at etcd revision %d", r.SnapshotRevision)
	if !r.SnapshotTime.IsZero() {
		s += " taken " + r.SnapshotTime.UTC().Format(time.RFC3339)
	}
	if !r.RestoredAt.IsZero() {
		s += ", restored " + r.RestoredAt.UTC().Format(time.RFC3339)
	}
	return s
}

func lastSeen(m *Marker) string {
	if m.LastSeen.IsZero() {
		return fmt.Sprintf("etcd revision %d", m.LastRevision)
	}
	return fmt.Sprintf("etcd revision %d at %s", m.LastRevision, m.LastSeen.UTC().Format(time.RFC3339))
}

func emptyMessage(m *Marker, name types.NamespacedName) string {
	return fmt.Sprintf("The identity ledger in etcd is empty, but ConfigMap %s records that this cluster's DockerIOS keeps ledger %s (last seen at %s): "+
		"the apiserver's data is lost or not mounted. dockerios.io is not served: answering \"not found\" for every machine "+
		"would have the garbage collector delete what they own, and every client act on a fleet that seems gone. "+
		"To recover, stop the apiserver and restore the newest backup: dockerios-apiserver ledger restore --snapshot FILE --data-dir DIR "+
		"(docs/operators/backup-restore.md, \"Restore\"). To start again from an empty ledger instead, losing every identity allocation: "+
		"kubectl -n %s annotate configmap %s %s=%s (or the flag --confirm-empty-ledger=%s).",
		name, m.LedgerID, lastSeen(m), name.Namespace, name.Name, ConfirmEmptyAnnotation, m.LedgerID, m.LedgerID)
}

func mismatchMessage(e EtcdState, m *Marker, name types.NamespacedName) string {
	return fmt.Sprintf("etcd holds identity ledger %s, but ConfigMap %s records that this cluster's DockerIOS keeps ledger %s (last seen at %s): "+
		"the apiserver is pointed at another ledger (another cluster's etcd, or another volume). dockerios.io is not served. "+
		"Point the apiserver at this cluster's ledger, or stop it and restore this cluster's newest backup: "+
		"dockerios-apiserver ledger restore --snapshot FILE --data-dir DIR (docs/operators/backup-restore.md, \"Restore\"). "+
		"If ledger %s is the one to keep: kubectl -n %s annotate configmap %s %s=%s (or the flag --adopt-ledger=%s).",
		e.LedgerID, name, m.LedgerID, lastSeen(m), e.LedgerID, name.Namespace, name.Name, AdoptAnnotation, e.LedgerID, e.LedgerID)
}
