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

package tableconvertor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

var columns = []metav1.TableColumnDefinition{
	NameColumn,
	{Name: "Release", Type: "string"},
	AgeColumn,
}

// imageCells prints an image's name, release and age, the way a registry's
// cells function does.
func imageCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	img, ok := obj.(*dockerio.MacOSImage)
	if !ok {
		return nil, errors.New("not an image")
	}
	return []interface{}{img.Name, img.Spec.Release, Age(img.CreationTimestamp, now)}, nil
}

func image(name, release string, age time.Duration) dockerio.MacOSImage {
	return dockerio.MacOSImage{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "7", CreationTimestamp: metav1.NewTime(now.Add(-age))},
		Spec:       dockerio.MacOSImageSpec{Release: release},
	}
}

func newConvertor() *convertor {
	return NewWithClock(columns, imageCells, clocktesting.NewFakePassiveClock(now)).(*convertor)
}

func TestConvertToTable_OneRowPerListItemWithListMetadata(t *testing.T) {
	cases := map[string]struct {
		list     *dockerio.MacOSImageList
		wantRows [][]interface{}
	}{
		"empty list has no rows": {
			list: &dockerio.MacOSImageList{ListMeta: metav1.ListMeta{ResourceVersion: "100"}},
		},
		"one item, one row": {
			list: &dockerio.MacOSImageList{
				ListMeta: metav1.ListMeta{ResourceVersion: "100", Continue: "next-page", RemainingItemCount: ptr.To[int64](3)},
				Items:    []dockerio.MacOSImage{image("sonoma", "14.6", 5*time.Minute)},
			},
			wantRows: [][]interface{}{{"sonoma", "14.6", "5m"}},
		},
		"three items, three rows in list order": {
			list: &dockerio.MacOSImageList{
				ListMeta: metav1.ListMeta{ResourceVersion: "100", Continue: "next-page"},
				Items: []dockerio.MacOSImage{
					image("sonoma", "14.6", 5*time.Minute),
					image("ventura", "13.6", 3*time.Hour),
					image("sequoia", "15.0", 49*time.Hour),
				},
			},
			wantRows: [][]interface{}{{"sonoma", "14.6", "5m"}, {"ventura", "13.6", "3h"}, {"sequoia", "15.0", "2d1h"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			table, err := newConvertor().ConvertToTable(context.Background(), tc.list, nil)
			require.NoError(t, err)
			require.Len(t, table.Rows, len(tc.wantRows))
			for i, want := range tc.wantRows {
				assert.Equal(t, want, table.Rows[i].Cells, "row %d", i)
				assert.Same(t, &tc.list.Items[i], table.Rows[i].Object.Object, "row %d carries its item", i)
			}
			assert.Equal(t, tc.list.ResourceVersion, table.ResourceVersion)
			assert.Equal(t, tc.list.Continue, table.Continue)
			assert.Equal(t, tc.list.RemainingItemCount, table.RemainingItemCount)
			assert.Equal(t, columns, table.ColumnDefinitions)
		})
	}
}

func TestConvertToTable_SingleObjectIsOneRowWithItsResourceVersion(t *testing.T) {
	img := image("sonoma", "14.6", 90*time.Second)
	img.ResourceVersion = "42"
	table, err := newConvertor().ConvertToTable(context.Background(), &img, nil)
	require.NoError(t, err)
	require.Len(t, table.Rows, 1)
	assert.Equal(t, []interface{}{"sonoma", "14.6", "90s"}, table.Rows[0].Cells)
	assert.Same(t, &img, table.Rows[0].Object.Object)
	assert.Equal(t, "42", table.ResourceVersion)
	assert.Empty(t, table.Continue)
}

func TestConvertToTable_NoHeadersOmitsColumnDefinitions(t *testing.T) {
	cases := map[string]struct {
		options     runtime.Object
		wantHeaders bool
	}{
		"no options print headers":              {options: nil, wantHeaders: true},
		"NoHeaders false prints headers":        {options: &metav1.TableOptions{NoHeaders: false}, wantHeaders: true},
		"NoHeaders true omits headers":          {options: &metav1.TableOptions{NoHeaders: true}, wantHeaders: false},
		"options of another type print headers": {options: &metav1.GetOptions{}, wantHeaders: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			img := image("sonoma", "14.6", time.Minute)
			table, err := newConvertor().ConvertToTable(context.Background(), &img, tc.options)
			require.NoError(t, err)
			if tc.wantHeaders {
				assert.Equal(t, columns, table.ColumnDefinitions)
			} else {
				assert.Empty(t, table.ColumnDefinitions)
			}
			require.Len(t, table.Rows, 1, "rows are printed either way")
		})
	}
}

func TestConvertToTable_CellsErrorsAreReturned(t *testing.T) {
	oneCell := func(obj runtime.Object, _ time.Time) ([]interface{}, error) { return []interface{}{"only"}, nil }
	failing := func(runtime.Object, time.Time) ([]interface{}, error) { return nil, errors.New("cannot print") }
	list := &dockerio.MacOSImageList{Items: []dockerio.MacOSImage{image("sonoma", "14.6", time.Minute)}}
	single := image("sonoma", "14.6", time.Minute)
	cases := map[string]struct {
		cells   CellsFunc
		object  runtime.Object
		wantErr string
	}{
		"too few cells for one object":  {cells: oneCell, object: &single, wantErr: "row has 1 cells for 3 columns"},
		"too few cells for a list item": {cells: oneCell, object: list, wantErr: "row has 1 cells for 3 columns"},
		"cells error for one object":    {cells: failing, object: &single, wantErr: "cannot print"},
		"cells error for a list item":   {cells: failing, object: list, wantErr: "cannot print"},
		"wrong object type is an error": {cells: imageCells, object: &dockerio.MacOSMachine{}, wantErr: "not an image"},
		"too many cells is also an error": {
			cells:  func(runtime.Object, time.Time) ([]interface{}, error) { return []interface{}{"a", "b", "c", "d"}, nil },
			object: &single, wantErr: "row has 4 cells for 3 columns",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			table, err := NewWithClock(columns, tc.cells, clocktesting.NewFakePassiveClock(now)).ConvertToTable(context.Background(), tc.object, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Nil(t, table)
		})
	}
}

func TestConvertToTable_AgeUsesInjectedClock(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(now)
	var seen time.Time
	cells := func(obj runtime.Object, at time.Time) ([]interface{}, error) {
		seen = at
		return imageCells(obj, at)
	}
	tc := NewWithClock(columns, cells, clk)
	img := image("sonoma", "14.6", 10*time.Minute)

	table, err := tc.ConvertToTable(context.Background(), &img, nil)
	require.NoError(t, err)
	assert.Equal(t, now, seen, "cells must be given the clock's time")
	assert.Equal(t, "10m", table.Rows[0].Cells[2])

	clk.SetTime(now.Add(3 * 24 * time.Hour))
	table, err = tc.ConvertToTable(context.Background(), &img, nil)
	require.NoError(t, err)
	assert.Equal(t, "3d", table.Rows[0].Cells[2], "age must follow the clock, not the wall")
}

func TestAge_PrintsLikeKubectl(t *testing.T) {
	cases := map[string]struct {
		created metav1.Time
		want    string
	}{
		"unset creation time is unknown": {created: metav1.Time{}, want: "<unknown>"},
		"seconds":                        {created: metav1.NewTime(now.Add(-45 * time.Second)), want: "45s"},
		"minutes":                        {created: metav1.NewTime(now.Add(-5 * time.Minute)), want: "5m"},
		"hours":                          {created: metav1.NewTime(now.Add(-3 * time.Hour)), want: "3h"},
		"days":                           {created: metav1.NewTime(now.Add(-72 * time.Hour)), want: "3d"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, Age(tc.created, now))
		})
	}
}

func TestConditionStatus_UnknownWhenAbsent(t *testing.T) {
	conditions := []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue},
		{Type: "BootdiskReady", Status: metav1.ConditionFalse},
	}
	cases := map[string]struct {
		conditions []metav1.Condition
		typ        string
		want       string
	}{
		"true condition":       {conditions: conditions, typ: "Ready", want: "True"},
		"false condition":      {conditions: conditions, typ: "BootdiskReady", want: "False"},
		"absent condition":     {conditions: conditions, typ: "GuestReady", want: "Unknown"},
		"no conditions at all": {conditions: nil, typ: "Ready", want: "Unknown"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, ConditionStatus(tc.conditions, tc.typ))
		})
	}
}

func TestOrNone(t *testing.T) {
	assert.Equal(t, "<none>", OrNone(""))
	assert.Equal(t, "mac-1", OrNone("mac-1"))
}
