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

package macosidentitypool

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/tableconvertor"
)

// TableConvertor prints identity pools for `kubectl get`: the model and how
// much of the pool is left.
var TableConvertor rest.TableConvertor = tableconvertor.New([]metav1.TableColumnDefinition{
	tableconvertor.NameColumn,
	{Name: "Model", Type: "string", Description: "The SMBIOS model of the pool's identities."},
	{Name: "Total", Type: "integer", Description: "Identities in the pool."},
	{Name: "Free", Type: "integer", Description: "Identities no machine holds."},
	{Name: "Allocated", Type: "integer", Description: "Identities held by a machine."},
	{Name: "Pending", Type: "integer", Description: "Machines waiting for an identity."},
	tableconvertor.AgeColumn,
}, cells)

func cells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	p, ok := obj.(*dockerio.MacOSIdentityPool)
	if !ok {
		return nil, fmt.Errorf("not a MacOSIdentityPool: %T", obj)
	}
	return []interface{}{
		p.Name,
		p.Spec.Model,
		int64(p.Status.Total),
		int64(p.Status.Free),
		int64(p.Status.Allocated),
		int64(p.Status.Pending),
		tableconvertor.Age(p.CreationTimestamp, now),
	}, nil
}
