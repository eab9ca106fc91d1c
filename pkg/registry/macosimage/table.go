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

package macosimage

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/tableconvertor"
)

// TableConvertor prints images for `kubectl get`: release, source and
// whether it can be cloned.
var TableConvertor rest.TableConvertor = tableconvertor.New([]metav1.TableColumnDefinition{
	tableconvertor.NameColumn,
	{Name: "Release", Type: "string", Description: "The macOS release in the image."},
	{Name: "Source", Type: "string", Description: "The CDI DataSource or PVC the image is cloned from."},
	{Name: "Ready", Type: "string", Description: "Status of the Ready condition."},
	tableconvertor.AgeColumn,
	{Name: "Board ID", Type: "string", Priority: 1, Description: "The Apple board-id the image was installed for."},
}, cells)

func cells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	img, ok := obj.(*dockerio.MacOSImage)
	if !ok {
		return nil, fmt.Errorf("not a MacOSImage: %T", obj)
	}
	return []interface{}{
		img.Name,
		img.Spec.Release,
		Source(img.Spec.Source),
		tableconvertor.ConditionStatus(img.Status.Conditions, "Ready"),
		tableconvertor.Age(img.CreationTimestamp, now),
		tableconvertor.OrNone(img.Spec.BoardID),
	}, nil
}

// Source prints an image source as kind/namespace/name.
func Source(src dockerio.ImageSource) string {
	switch {
	case src.DataSource != nil:
		return "DataSource/" + src.DataSource.Namespace + "/" + src.DataSource.Name
	case src.PVC != nil:
		return "PVC/" + src.PVC.Namespace + "/" + src.PVC.Name
	}
	return "<none>"
}
