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
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// The marker ConfigMap's data keys.
const (
	DataLedgerID      = "ledgerID"
	DataLastRevision  = "lastRevision"
	DataLastSeen      = "lastSeen"
	DataEtcdClusterID = "etcdClusterID"
	DataLastRestoreID = "lastRestoreID"
	DataLastRestore   = "lastRestore"
	DataPrevious      = "previousLedgerID"
)

// DefaultMarker is the marker the shipped install uses.
var DefaultMarker = types.NamespacedName{Namespace: "dockerios-system", Name: "dockerios-ledger"}

// markerStore reads and writes the marker ConfigMap.
type markerStore struct {
	client kubernetes.Interface
	name   types.NamespacedName
}

// read returns the marker, or nil when the ConfigMap does not exist.
func (s markerStore) read(ctx context.Context) (*Marker, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.name.Namespace).Get(ctx, s.name.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the ledger's marker, ConfigMap %s: %w", s.name, err)
	}
	return markerFrom(cm), nil
}

func markerFrom(cm *corev1.ConfigMap) *Marker {
	m := &Marker{
		LedgerID:        cm.Data[DataLedgerID],
		LastRestoreID:   cm.Data[DataLastRestoreID],
		ConfirmEmpty:    cm.Annotations[ConfirmEmptyAnnotation],
		Adopt:           cm.Annotations[AdoptAnnotation],
		ResourceVersion: cm.ResourceVersion,
	}
	m.LastRevision, _ = strconv.ParseInt(cm.Data[DataLastRevision], 10, 64)
	m.LastSeen, _ = time.Parse(time.RFC3339, cm.Data[DataLastSeen])
	return m
}

// markerRecord is what the marker is written with.
type markerRecord struct {
	ledgerID  string
	etcd      EtcdState
	now       time.Time
	previous  string // the ledger this one replaced, if any
	restoreID string // the last restore served
}

// write creates the marker, or updates the one read (prev, with its
// resourceVersion: a conflict means another replica wrote it first).
// A person's answers are dropped from it: they were for the ledger it
// recorded before.
func (s markerStore) write(ctx context.Context, prev *Marker, r markerRecord) error {
	cms := s.client.CoreV1().ConfigMaps(s.name.Namespace)
	if prev == nil {
		_, err := cms.Create(ctx, r.configMap(s.name, nil), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating the ledger's marker, ConfigMap %s: %w", s.name, err)
		}
		return nil
	}
	cm, err := cms.Get(ctx, s.name.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the ledger's marker, ConfigMap %s: %w", s.name, err)
	}
	if cm.ResourceVersion != prev.ResourceVersion {
		return apierrors.NewConflict(corev1.Resource("configmaps"), s.name.Name, fmt.Errorf("changed since it was read"))
	}
	if _, err := cms.Update(ctx, r.configMap(s.name, cm), metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating the ledger's marker, ConfigMap %s: %w", s.name, err)
	}
	return nil
}

// touch records a newer revision in the marker, if it still records
// ledgerID: what the periodic update writes.
func (s markerStore) touch(ctx context.Context, ledgerID string, etcd EtcdState, now time.Time) error {
	cms := s.client.CoreV1().ConfigMaps(s.name.Namespace)
	cm, err := cms.Get(ctx, s.name.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cm.Data[DataLedgerID] != ledgerID {
		return fmt.Errorf("ConfigMap %s records ledger %q, not %s", s.name, cm.Data[DataLedgerID], ledgerID)
	}
	cm = cm.DeepCopy()
	cm.Data[DataLastRevision] = strconv.FormatInt(etcd.Revision, 10)
	cm.Data[DataLastSeen] = now.UTC().Format(time.RFC3339)
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

func (r markerRecord) configMap(name types.NamespacedName, existing *corev1.ConfigMap) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name}}
	if existing != nil {
		cm = existing.DeepCopy()
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels["app.kubernetes.io/part-of"] = "dockerios"
	cm.Labels["app.kubernetes.io/component"] = "ledger"
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations["dockerios.io/description"] = "The identity ledger this cluster's DockerIOS serves, written by dockerios-apiserver. " +
		"An apiserver that finds its etcd empty, or holding another ledger, refuses to serve dockerios.io while this says otherwise (docs/operators/backup-restore.md)."
	delete(cm.Annotations, ConfirmEmptyAnnotation)
	delete(cm.Annotations, AdoptAnnotation)
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	prevID := cm.Data[DataLedgerID]
	cm.Data[DataLedgerID] = r.ledgerID
	cm.Data[DataLastRevision] = strconv.FormatInt(r.etcd.Revision, 10)
	cm.Data[DataLastSeen] = r.now.UTC().Format(time.RFC3339)
	cm.Data[DataEtcdClusterID] = fmt.Sprintf("%x", r.etcd.ClusterID)
	if r.previous != "" && r.previous != r.ledgerID {
		cm.Data[DataPrevious] = r.previous
	} else if prevID != "" && prevID != r.ledgerID {
		cm.Data[DataPrevious] = prevID
	}
	if r.restoreID != "" {
		cm.Data[DataLastRestoreID] = r.restoreID
		if r.etcd.Restore != nil {
			if data, err := json.Marshal(r.etcd.Restore); err == nil {
				cm.Data[DataLastRestore] = string(data)
			}
		}
	}
	return cm
}
