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

package machine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/bootdisk"
)

// testIdentity is the identity testMachine holds, allocated to it.
func testIdentity() *v1alpha1.MacOSIdentity {
	id := &v1alpha1.MacOSIdentity{ObjectMeta: metav1.ObjectMeta{Name: "id-0"}, Spec: v1alpha1.MacOSIdentitySpec{
		PoolName: "standard", Model: v1alpha1.DefaultSMBIOSModel, SerialNumber: "C02CK029HX87", BoardSerialNumber: "C02015700QXJG36CB",
		SystemUUID: "4B408A88-4062-4532-9AA1-3D8A3549327F", MACAddress: "34:31:8F:D3:88:E4", ROM: "34318FD388E4"}}
	id.Status.Allocation = &v1alpha1.IdentityAllocation{MachineNamespace: "ci", MachineName: "mac-0", MachineUID: "uid-1"}
	return id
}

// identityForms are the spellings of testIdentity's values someone might
// recognise.
func identityForms() []string {
	s := testIdentity().Spec
	return []string{s.SerialNumber, s.BoardSerialNumber, s.SystemUUID, strings.ReplaceAll(s.SystemUUID, "-", ""),
		s.MACAddress, strings.ReplaceAll(s.MACAddress, ":", ""), strings.ReplaceAll(s.MACAddress, ":", "-"), s.ROM}
}

func TestNamesFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Names
	}{
		{"mac-0", Names{Base: "mac-0", TokenSecret: "mac-0-agent", IdentitySecret: "mac-0-identity", BootdiskPVC: "mac-0-bootdisk",
			SystemDisk: "mac-0-system-uid1", RecoveryDisk: "mac-0-recovery", VirtualMachine: "mac-0"}},
		{strings.Repeat("a", 200), Names{}},
	} {
		t.Run(tc.name[:min(len(tc.name), 10)], func(t *testing.T) {
			m := testMachine()
			m.Name = tc.name
			n := NamesFor(m)
			if tc.want.Base != "" {
				assert.Equal(t, tc.want, n)
			}
			for _, name := range []string{n.Base, n.TokenSecret, n.IdentitySecret, n.BootdiskPVC, n.SystemDisk, n.RecoveryDisk, n.VirtualMachine} {
				assert.Empty(t, validation.IsDNS1123Label(name), "name %q", name)
			}
		})
	}
}

func TestIdentitySecret(t *testing.T) {
	m, id := testMachine(), testIdentity()
	s := IdentitySecret(m, id)
	assert.Equal(t, "mac-0-identity", s.Name)
	assert.Equal(t, "ci", s.Namespace)
	assert.Equal(t, "uid-1", s.Labels[MachineUIDLabel], "labelled like every object of the machine")
	assert.True(t, ptr.Deref(s.Immutable, false))
	assert.Equal(t, corev1.SecretTypeOpaque, s.Type)
	assert.Empty(t, s.OwnerReferences, "no owner reference: the garbage collector must not delete it when a restored ledger lacks the machine")
	assert.Equal(t, bootdisk.IdentitySecretData(id), s.Data)
	assert.Equal(t, s, IdentitySecret(m, id), "derived from the identity alone: the same every time")
	// The name and metadata say nothing of the values.
	meta, err := json.Marshal(s.ObjectMeta)
	require.NoError(t, err)
	for _, v := range identityForms() {
		assert.NotContains(t, strings.ToLower(string(meta)), strings.ToLower(v))
	}
}

func TestBootdiskJobMountsTheIdentitySecret(t *testing.T) {
	m, id, class := testMachine(), testIdentity(), testClass()
	job, err := BootdiskJob(m, id, class, Settings{BootdiskImage: "example.com/bootdisk:1"})
	require.NoError(t, err)
	var secretVolumes []string
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secretVolumes = append(secretVolumes, v.Secret.SecretName)
		}
	}
	assert.Equal(t, []string{NamesFor(m).IdentitySecret}, secretVolumes)
	assert.Equal(t, NamesFor(m).TokenSecret, job.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.SecretKeyRef.Name)
	assert.Equal(t, "uid-1", job.Labels[MachineUIDLabel])
	b, err := json.Marshal(job)
	require.NoError(t, err)
	for _, v := range identityForms() {
		assert.NotContains(t, strings.ToLower(string(b)), strings.ToLower(v), "the Job is readable by the view role")
	}
}
