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
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/tableconvertor"
)

// TableConvertor prints identities for `kubectl get`: pool, serial and the
// machine holding it, with the network values under -o wide.
var TableConvertor rest.TableConvertor = tableconvertor.New([]metav1.TableColumnDefinition{
	tableconvertor.NameColumn,
	{Name: "Pool", Type: "string", Description: "The MacOSIdentityPool the identity belongs to."},
	{Name: "Model", Type: "string", Description: "The SMBIOS model."},
	{Name: "Serial", Type: "string", Description: "The system serial number."},
	{Name: "Machine", Type: "string", Description: "The MacOSMachine (namespace/name) holding the identity."},
	tableconvertor.AgeColumn,
	{Name: "MAC", Type: "string", Priority: 1, Description: "The MAC address."},
	{Name: "System UUID", Type: "string", Priority: 1, Description: "The SMBIOS system UUID."},
}, cells)

func cells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	id, ok := obj.(*dockerio.MacOSIdentity)
	if !ok {
		return nil, fmt.Errorf("not a MacOSIdentity: %T", obj)
	}
	machine := ""
	if a := id.Status.Allocation; a != nil {
		machine = a.MachineNamespace + "/" + a.MachineName
	}
	return []interface{}{
		id.Name,
		id.Spec.PoolName,
		id.Spec.Model,
		id.Spec.SerialNumber,
		tableconvertor.OrNone(machine),
		tableconvertor.Age(id.CreationTimestamp, now),
		id.Spec.MACAddress,
		id.Spec.SystemUUID,
	}, nil
}
