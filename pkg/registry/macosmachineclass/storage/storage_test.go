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

package storage

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
)

func newStorage(t *testing.T) ClassStorage {
	return newStorageWithImages(t, nil)
}

// newStorageWithImages serves the classes with these images existing.
func newStorageWithImages(t *testing.T, images map[string]*dockerio.MacOSImage) ClassStorage {
	t.Helper()
	opts, _ := registrytest.NewRESTOptions(t, "macosmachineclasses")
	s, err := NewStorage(opts, func(_ context.Context, name string) (*dockerio.MacOSImage, error) {
		if img, ok := images[name]; ok {
			return img, nil
		}
		return nil, apierrors.NewNotFound(dockerio.Resource("macosimages"), name)
	})
	require.NoError(t, err)
	t.Cleanup(s.Class.DestroyFunc)
	return s
}

// A class whose SMBIOS model cannot boot its image's release is refused
// at spec.imageName when the image exists; pointing a class at such an
// image later is refused too, while other edits of a class are not
// refused for its image having changed since.
func TestCreate_RefusesAnImageItsModelCannotBoot(t *testing.T) {
	tahoe := registrytest.Image("tahoe")
	tahoe.Spec.Release, tahoe.Spec.BoardID = "tahoe", ""
	sequoia := registrytest.Image("sequoia")
	sequoia.Spec.Release = "15.1"
	s := newStorageWithImages(t, map[string]*dockerio.MacOSImage{"tahoe": tahoe, "sequoia": sequoia})
	ctx := genericregistrytest.NewClusterScopeContext(s.Class.Store)

	c := registrytest.MachineClass("imacpro-tahoe") // iMacPro1,1: macOS 10.13.2 to 15.7.4
	c.Spec.ImageName = "tahoe"
	_, err := s.Class.Create(ctx, c, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	status := err.(apierrors.APIStatus).Status()
	require.Len(t, status.Details.Causes, 1)
	assert.Equal(t, "spec.imageName", status.Details.Causes[0].Field)
	assert.Contains(t, status.Details.Causes[0].Message, "iMacPro1,1 runs macOS 10.13.2 to 15.7.4")

	mp := registrytest.MachineClass("macpro-tahoe")
	mp.Spec.ImageName, mp.Spec.SMBIOSModel = "tahoe", "MacPro7,1"
	_, err = s.Class.Create(ctx, mp, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err, "a MacPro7,1 runs Tahoe")

	absent := registrytest.MachineClass("later")
	absent.Spec.ImageName = "not-yet"
	_, err = s.Class.Create(ctx, absent, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err, "an image that does not exist yet is not checked")

	ok := registrytest.MachineClass("imacpro")
	ok.Spec.ImageName = "sequoia"
	created, err := s.Class.Create(ctx, ok, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)

	repoint := created.(*dockerio.MacOSMachineClass).DeepCopy()
	repoint.Spec.ImageName = "tahoe"
	_, _, err = s.Class.Update(ctx, repoint.Name, rest.DefaultUpdatedObjectInfo(repoint), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "pointing an iMacPro1,1 class at Tahoe: got %v", err)

	// The image moves on to a release the model cannot run: an unrelated
	// edit of the class still goes through (the machines' condition says
	// what is wrong).
	sequoia.Spec.Release = "tahoe"
	edit := created.(*dockerio.MacOSMachineClass).DeepCopy()
	edit.Spec.Memory = ptr.To(resource.MustParse("16Gi"))
	_, _, err = s.Class.Update(ctx, edit.Name, rest.DefaultUpdatedObjectInfo(edit), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
}

func TestStorage_Create(t *testing.T) {
	s := newStorage(t)
	noImage := registrytest.MachineClass("x")
	noImage.Spec.ImageName = ""
	zeroMemory := registrytest.MachineClass("x")
	zeroMemory.Spec.Memory = ptr.To(resource.MustParse("0"))
	badBus := registrytest.MachineClass("x")
	badBus.Spec.SystemDisk.Bus = "ide"
	genericregistrytest.New(t, s.Class.Store).ClusterScope().TestCreate(registrytest.MachineClass("standard"), noImage, zeroMemory, badBus)
}

func TestStorage_UpdateKeepsIdentityPoolAndModelFixed(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Class.Store).ClusterScope().TestUpdate(registrytest.MachineClass("standard"),
		func(obj runtime.Object) runtime.Object {
			c := obj.(*dockerio.MacOSMachineClass)
			c.Spec.Memory = ptr.To(resource.MustParse("16Gi"))
			c.Spec.ImageName = "sequoia"
			return c
		},
		func(obj runtime.Object) runtime.Object {
			c := obj.(*dockerio.MacOSMachineClass)
			c.Spec.IdentityPoolName = "another"
			return c
		},
		func(obj runtime.Object) runtime.Object {
			c := obj.(*dockerio.MacOSMachineClass)
			c.Spec.SMBIOSModel = "MacPro7,1"
			return c
		},
	)
}

func TestStorage_Delete(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Class.Store).ClusterScope().ReturnDeletedObject().TestDelete(registrytest.MachineClass("standard"))
}

func TestStorage_Get(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Class.Store).ClusterScope().TestGet(registrytest.MachineClass("standard"))
}

func TestStorage_List(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Class.Store).ClusterScope().TestList(registrytest.MachineClass("standard"))
}

func TestStorage_WatchSelectsByLabelAndField(t *testing.T) {
	s := newStorage(t)
	genericregistrytest.New(t, s.Class.Store).ClusterScope().TestWatch(registrytest.MachineClass("standard"),
		[]labels.Set{{"tier": "standard"}},
		[]labels.Set{{"tier": "gpu"}},
		[]fields.Set{{"metadata.name": "standard"}, {"spec.identityPoolName": "imacpro"}, {"spec.imageName": "sonoma"}},
		[]fields.Set{{"metadata.name": "gpu"}, {"spec.identityPoolName": "macpro"}},
	)
}

func TestCreate_WarnsAboutTooLittleMemory(t *testing.T) {
	s := newStorage(t)
	c := registrytest.MachineClass("small")
	c.Spec.Memory = ptr.To(resource.MustParse("2Gi"))
	ctx := genericregistrytest.NewClusterScopeContext(s.Class.Store)
	recorder := &warningRecorder{}
	ctx = warning.WithWarningRecorder(ctx, recorder)
	_, err := s.Class.Create(ctx, c, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	require.Len(t, recorder.warnings, 1)
	assert.Contains(t, recorder.warnings[0], "spec.memory")
}

func TestStatus_WritesConditionsButNotSpec(t *testing.T) {
	s := newStorage(t)
	ctx := genericregistrytest.NewClusterScopeContext(s.Class.Store)
	created, err := s.Class.Create(ctx, registrytest.MachineClass("standard"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)

	update := created.(*dockerio.MacOSMachineClass).DeepCopy()
	update.Spec.ImageName = "sneaky"
	update.Status.Conditions = []metav1.Condition{{
		Type: "StorageAvailable", Status: metav1.ConditionFalse, Reason: "CloneFailed",
		Message: "cloning into fast-ssd failed", LastTransitionTime: metav1.Now(),
	}}
	got, _, err := s.Status.Update(ctx, update.Name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	c := got.(*dockerio.MacOSMachineClass)
	assert.Equal(t, "sonoma", c.Spec.ImageName)
	require.Len(t, c.Status.Conditions, 1)
	assert.Equal(t, "CloneFailed", c.Status.Conditions[0].Reason)

	// A condition without a reason is not something a person can act on.
	bad := c.DeepCopy()
	bad.Status.Conditions[0].Reason = ""
	_, _, err = s.Status.Update(ctx, bad.Name, rest.DefaultUpdatedObjectInfo(bad), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "got %v", err)
}

func TestTable_ShowsShape(t *testing.T) {
	s := newStorage(t)
	table, err := s.Class.ConvertToTable(context.Background(), registrytest.MachineClass("standard"), nil)
	require.NoError(t, err)
	require.Len(t, table.Rows, 1)
	assert.Equal(t, []interface{}{"standard", "sonoma", "imacpro", int64(4), "8Gi", "128Gi (nvme)"}, table.Rows[0].Cells[:6])
	assert.Equal(t, []string{"mmclass"}, s.Class.ShortNames())
}

type warningRecorder struct{ warnings []string }

func (r *warningRecorder) AddWarning(_, text string) { r.warnings = append(r.warnings, text) }
