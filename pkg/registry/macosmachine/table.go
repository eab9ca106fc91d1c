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

package macosmachine

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/tableconvertor"
)

// TableConvertor prints machines for `kubectl get`: what a person checks
// first (phase, identity, claim, readiness), with placement and agent
// details under -o wide.
var TableConvertor rest.TableConvertor = tableconvertor.New([]metav1.TableColumnDefinition{
	tableconvertor.NameColumn,
	{Name: "Class", Type: "string", Description: "The MacOSMachineClass giving the machine its shape."},
	{Name: "Phase", Type: "string", Description: "Where the machine is in its life."},
	{Name: "Identity", Type: "string", Description: "The MacOSIdentity the machine holds."},
	{Name: "Claim", Type: "string", Description: "The MacOSMachineClaim the machine is bound to."},
	{Name: "Ready", Type: "string", Description: "Status of the Ready condition."},
	tableconvertor.AgeColumn,
	{Name: "Pool", Type: "string", Priority: 1, Description: "The MacOSMachinePool the machine belongs to."},
	{Name: "Node", Type: "string", Priority: 1, Description: "The node the virtual machine runs on."},
	{Name: "Address", Type: "string", Priority: 1, Description: "The machine's pod network address."},
	{Name: "Agent", Type: "string", Priority: 1, Description: "The stage the guest agent last reported."},
}, cells)

func cells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	m, ok := obj.(*dockerio.MacOSMachine)
	if !ok {
		return nil, fmt.Errorf("not a MacOSMachine: %T", obj)
	}
	identity, claim := "", ""
	if m.Status.IdentityRef != nil {
		identity = m.Status.IdentityRef.Name
	}
	if m.Status.ClaimRef != nil {
		claim = m.Status.ClaimRef.Name
	}
	var addresses []string
	for _, a := range m.Status.Addresses {
		if a.Type == dockerio.MachineAddressPod {
			addresses = append(addresses, a.Address)
		}
	}
	agent := ""
	if m.Status.Agent != nil {
		agent = string(m.Status.Agent.Stage)
	}
	phase := string(m.Status.Phase)
	if m.DeletionTimestamp != nil && m.Status.Phase != dockerio.MachineFailed {
		phase = string(dockerio.MachineTerminating)
	}
	return []interface{}{
		m.Name,
		m.Spec.ClassName,
		phase,
		tableconvertor.OrNone(identity),
		tableconvertor.OrNone(claim),
		tableconvertor.ConditionStatus(m.Status.Conditions, dockerio.MachineConditionReady),
		tableconvertor.Age(m.CreationTimestamp, now),
		tableconvertor.OrNone(m.Spec.PoolName),
		tableconvertor.OrNone(m.Status.NodeName),
		tableconvertor.OrNone(strings.Join(addresses, ",")),
		tableconvertor.OrNone(agent),
	}, nil
}
