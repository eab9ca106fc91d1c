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

package macosmachineclass

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/tableconvertor"
)

// TableConvertor prints classes for `kubectl get`: the shape at a glance,
// with model, storage and timeout under -o wide.
var TableConvertor rest.TableConvertor = tableconvertor.New([]metav1.TableColumnDefinition{
	tableconvertor.NameColumn,
	{Name: "Image", Type: "string", Description: "The MacOSImage machines are cloned from."},
	{Name: "Identity Pool", Type: "string", Description: "The MacOSIdentityPool machines draw identities from."},
	{Name: "CPUs", Type: "integer", Description: "CPU cores per machine."},
	{Name: "Memory", Type: "string", Description: "Memory per machine."},
	{Name: "Disk", Type: "string", Description: "System disk size and bus."},
	tableconvertor.AgeColumn,
	{Name: "Model", Type: "string", Priority: 1, Description: "The SMBIOS model machines report."},
	{Name: "Storage Class", Type: "string", Priority: 1, Description: "The StorageClass system disks are cloned into."},
	{Name: "Start Timeout", Type: "string", Priority: 1, Description: "How long a machine may take to become Ready."},
}, cells)

func cells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	c, ok := obj.(*dockerio.MacOSMachineClass)
	if !ok {
		return nil, fmt.Errorf("not a MacOSMachineClass: %T", obj)
	}
	memory, storageClass, timeout := "", "", ""
	if c.Spec.Memory != nil {
		memory = c.Spec.Memory.String()
	}
	if c.Spec.SystemDisk.StorageClassName != nil {
		storageClass = *c.Spec.SystemDisk.StorageClassName
	}
	if c.Spec.StartTimeout != nil {
		timeout = c.Spec.StartTimeout.Duration.String()
	}
	return []interface{}{
		c.Name,
		c.Spec.ImageName,
		c.Spec.IdentityPoolName,
		int64(c.Spec.CPU.Cores),
		memory,
		fmt.Sprintf("%s (%s)", c.Spec.SystemDisk.Size.String(), c.Spec.SystemDisk.Bus),
		tableconvertor.Age(c.CreationTimestamp, now),
		c.Spec.SMBIOSModel,
		tableconvertor.OrNone(storageClass),
		timeout,
	}, nil
}
