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

package macosmachineclaim

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/tableconvertor"
)

// TableConvertor prints claims for `kubectl get`: what was asked for, and
// which machine answers it.
var TableConvertor rest.TableConvertor = tableconvertor.New([]metav1.TableColumnDefinition{
	tableconvertor.NameColumn,
	{Name: "Pool", Type: "string", Description: "The MacOSMachinePool the claim asks of."},
	{Name: "Class", Type: "string", Description: "The MacOSMachineClass the claim asks for."},
	{Name: "Phase", Type: "string", Description: "Pending, Bound or Lost."},
	{Name: "Machine", Type: "string", Description: "The MacOSMachine bound to the claim."},
	tableconvertor.AgeColumn,
}, cells)

func cells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	c, ok := obj.(*dockerio.MacOSMachineClaim)
	if !ok {
		return nil, fmt.Errorf("not a MacOSMachineClaim: %T", obj)
	}
	return []interface{}{
		c.Name,
		tableconvertor.OrNone(c.Spec.PoolName),
		tableconvertor.OrNone(c.Spec.ClassName),
		string(c.Status.Phase),
		tableconvertor.OrNone(c.Status.MachineName),
		tableconvertor.Age(c.CreationTimestamp, now),
	}, nil
}
