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

package framework

import (
	"fmt"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
)

// LedgerViolations lists what breaks the identity ledger's first two
// invariants in objects read from etcd at one revision, for tests that
// check them after every step (test/integration's model, test/ha's kill
// rounds). machines are those of namespace, by name.
//
//	inv1: an identity is held by at most one machine, which exists and
//	      names it back; a machine's identity exists and names it.
//	inv2: no value (serial, board serial, UUID, MAC, ROM) is in two
//	      identities.
func LedgerViolations(namespace string, machines map[string]*dockerio.MacOSMachine, identities map[string]*dockerio.MacOSIdentity) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	holders := map[string][]string{}
	for _, m := range machines {
		ref := m.Status.IdentityRef
		if ref == nil {
			continue
		}
		holders[ref.Name] = append(holders[ref.Name], m.Name)
		id := identities[ref.Name]
		switch {
		case id == nil:
			add("inv1: machine %s holds identity %s, which does not exist", m.Name, ref.Name)
		case id.Status.Allocation == nil:
			add("inv1: machine %s holds identity %s, whose allocation is empty", m.Name, ref.Name)
		case id.Status.Allocation.MachineNamespace != m.Namespace || id.Status.Allocation.MachineName != m.Name ||
			id.Status.Allocation.MachineUID != string(m.UID):
			a := id.Status.Allocation
			add("inv1: machine %s (uid %s) holds identity %s, allocated to %s/%s (uid %s)", m.Name, m.UID, ref.Name, a.MachineNamespace, a.MachineName, a.MachineUID)
		}
	}
	for id, ms := range holders {
		if len(ms) > 1 {
			add("inv1: identity %s is held by %d machines: %v", id, len(ms), ms)
		}
	}
	for _, id := range identities {
		a := id.Status.Allocation
		if a == nil {
			continue
		}
		m := machines[a.MachineName]
		switch {
		case a.MachineNamespace != namespace || m == nil:
			add("inv1: identity %s is allocated to %s/%s, which does not exist", id.Name, a.MachineNamespace, a.MachineName)
		case string(m.UID) != a.MachineUID:
			add("inv1: identity %s is allocated to %s uid %s; the machine's uid is %s", id.Name, a.MachineName, a.MachineUID, m.UID)
		case m.Status.IdentityRef == nil || m.Status.IdentityRef.Name != id.Name:
			add("inv1: identity %s is allocated to %s, which holds %v", id.Name, a.MachineName, m.Status.IdentityRef)
		}
	}

	seen := map[string]string{}
	for _, id := range identities {
		for field, v := range map[string]string{"serialNumber": id.Spec.SerialNumber, "boardSerialNumber": id.Spec.BoardSerialNumber,
			"systemUUID": id.Spec.SystemUUID, "macAddress": id.Spec.MACAddress, "rom": id.Spec.ROM} {
			k := field + "=" + v
			if other, ok := seen[k]; ok {
				add("inv2: identities %s and %s share %s", other, id.Name, k)
			}
			seen[k] = id.Name
		}
	}
	return out
}
