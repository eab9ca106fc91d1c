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

package macosidentity

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

func quarantined() []metav1.Condition {
	return []metav1.Condition{{Type: v1alpha1.IdentityQuarantined, Status: metav1.ConditionTrue, Reason: "DuplicateValue",
		Message: "spec.serialNumber is shared with MacOSIdentity id-2", LastTransitionTime: metav1.Unix(1, 0)}}
}

// The quarantine keeps a duplicate identity from ever being allocated; a
// status write that could lift it (or set it) would bypass the ledger's repair.
func TestStatusUpdate_CannotSetOrClearConditions(t *testing.T) {
	cases := map[string]struct {
		stored, written []metav1.Condition
	}{
		"cannot lift a quarantine": {stored: quarantined(), written: nil},
		"cannot quarantine":        {stored: nil, written: quarantined()},
		"cannot mark a quarantine resolved": {stored: quarantined(), written: func() []metav1.Condition {
			c := quarantined()
			c[0].Status, c[0].Reason = metav1.ConditionFalse, "Resolved"
			return c
		}()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := &dockerio.MacOSIdentity{ObjectMeta: metav1.ObjectMeta{Name: "id-1"}, Status: dockerio.MacOSIdentityStatus{Conditions: tc.stored}}
			obj := old.DeepCopy()
			obj.Status.Conditions = tc.written
			StatusStrategy.PrepareForUpdate(context.Background(), obj, old)
			assert.Equal(t, tc.stored, obj.Status.Conditions)

			// The main resource never writes status at all.
			obj = old.DeepCopy()
			obj.Status.Conditions = tc.written
			Strategy.PrepareForUpdate(context.Background(), obj, old)
			assert.Equal(t, tc.stored, obj.Status.Conditions)
		})
	}
}

// Server-side apply to /status must not take ownership of what the ledger
// writes: the reset fields say so to the field manager.
func TestStatusStrategy_ResetsLedgerOwnedFields(t *testing.T) {
	set := StatusStrategy.GetResetFields()["dockerios.io/v1alpha1"]
	for _, p := range [][]interface{}{{"status", "allocation"}, {"spec"}} {
		assert.True(t, set.Has(fieldpath.MakePathOrDie(p...)), "%v must be reset", p)
	}
	// The conditions are not reset as a whole: HeldOutsideLedger is
	// written through the status subresource (PrepareForUpdate keeps the
	// others as they were).
	assert.False(t, set.Has(fieldpath.MakePathOrDie("status", "conditions")))
}

// A status write sets HeldOutsideLedger and nothing else: the allocation
// and the ledger repair's Quarantined stay as they were.
func TestStatusStrategy_TakesOnlyHeldOutsideLedger(t *testing.T) {
	old := &dockerio.MacOSIdentity{Status: dockerio.MacOSIdentityStatus{
		Allocation: &dockerio.IdentityAllocation{MachineNamespace: "ci", MachineName: "m", MachineUID: "u"},
		Conditions: []metav1.Condition{{Type: "Quarantined", Status: metav1.ConditionTrue, Reason: "DuplicateValue"}}}}
	for _, tc := range []struct {
		name string
		new  []metav1.Condition
		want map[string]metav1.ConditionStatus
	}{
		{"sets it", []metav1.Condition{{Type: "HeldOutsideLedger", Status: metav1.ConditionTrue, Reason: "InUseByUnrecordedVM"}},
			map[string]metav1.ConditionStatus{"Quarantined": metav1.ConditionTrue, "HeldOutsideLedger": metav1.ConditionTrue}},
		{"cannot lift a quarantine", []metav1.Condition{{Type: "Quarantined", Status: metav1.ConditionFalse, Reason: "Resolved"}},
			map[string]metav1.ConditionStatus{"Quarantined": metav1.ConditionTrue}},
		{"cannot drop a quarantine", nil, map[string]metav1.ConditionStatus{"Quarantined": metav1.ConditionTrue}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := &dockerio.MacOSIdentity{Status: dockerio.MacOSIdentityStatus{Conditions: tc.new}}
			StatusStrategy.PrepareForUpdate(context.Background(), id, old.DeepCopy())
			require.NotNil(t, id.Status.Allocation, "the allocation was kept")
			got := map[string]metav1.ConditionStatus{}
			for _, c := range id.Status.Conditions {
				got[c.Type] = c.Status
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
