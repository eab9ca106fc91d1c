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

package macosmachinepool

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/tableconvertor"
)

// TableConvertor prints machine pools for `kubectl get`, in the manner of
// Deployments: desired, current and ready warm machines, and bound ones.
var TableConvertor rest.TableConvertor = tableconvertor.New([]metav1.TableColumnDefinition{
	tableconvertor.NameColumn,
	{Name: "Class", Type: "string", Description: "The MacOSMachineClass of the pool's machines."},
	{Name: "Desired", Type: "integer", Description: "Ready, unbound machines the pool keeps."},
	{Name: "Current", Type: "integer", Description: "Unbound machines of the pool."},
	{Name: "Ready", Type: "integer", Description: "Unbound machines that are Ready."},
	{Name: "Bound", Type: "integer", Description: "Machines bound to claims."},
	tableconvertor.AgeColumn,
	{Name: "Max", Type: "string", Priority: 1, Description: "Cap on the pool's machines, bound and unbound."},
	{Name: "Selector", Type: "string", Priority: 1, Description: "Label selector of the pool's machines."},
}, cells)

func cells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	p, ok := obj.(*dockerio.MacOSMachinePool)
	if !ok {
		return nil, fmt.Errorf("not a MacOSMachinePool: %T", obj)
	}
	var desired int64
	if p.Spec.Replicas != nil {
		desired = int64(*p.Spec.Replicas)
	}
	maxMachines := "<none>"
	if p.Spec.MaxMachines != nil {
		maxMachines = fmt.Sprint(*p.Spec.MaxMachines)
	}
	return []interface{}{
		p.Name,
		p.Spec.ClassName,
		desired,
		int64(p.Status.Replicas),
		int64(p.Status.ReadyReplicas),
		int64(p.Status.BoundMachines),
		tableconvertor.Age(p.CreationTimestamp, now),
		maxMachines,
		tableconvertor.OrNone(p.Status.Selector),
	}, nil
}
