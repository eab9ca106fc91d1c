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

// Package tableconvertor turns dockerios.io objects into the metav1.Table
// that `kubectl get` prints, from a list of columns and a function giving one
// object's cells. Each registry declares its own columns; this package only
// does the bookkeeping every table needs (lists, headers, list metadata).
package tableconvertor

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/clock"
)

// CellsFunc returns the cells of one object's row, one per column. now is
// the time ages are measured to.
type CellsFunc func(obj runtime.Object, now time.Time) ([]interface{}, error)

// New returns a TableConvertor printing columns, whose rows cells fills.
// The first column should be the object's name.
func New(columns []metav1.TableColumnDefinition, cells CellsFunc) rest.TableConvertor {
	return NewWithClock(columns, cells, clock.RealClock{})
}

// NewWithClock is New with the clock ages are measured by.
func NewWithClock(columns []metav1.TableColumnDefinition, cells CellsFunc, clk clock.PassiveClock) rest.TableConvertor {
	return &convertor{columns: columns, cells: cells, clock: clk}
}

type convertor struct {
	columns []metav1.TableColumnDefinition
	cells   CellsFunc
	clock   clock.PassiveClock
}

var _ rest.TableConvertor = &convertor{}

func (c *convertor) ConvertToTable(_ context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || !opts.NoHeaders {
		table.ColumnDefinitions = c.columns
	}
	now := c.clock.Now()
	addRow := func(obj runtime.Object) error {
		cells, err := c.cells(obj, now)
		if err != nil {
			return err
		}
		if len(cells) != len(c.columns) {
			return fmt.Errorf("%T row has %d cells for %d columns", obj, len(cells), len(c.columns))
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: obj}})
		return nil
	}
	if meta.IsListType(object) {
		if err := meta.EachListItem(object, addRow); err != nil {
			return nil, err
		}
		if list, err := meta.ListAccessor(object); err == nil {
			table.ResourceVersion = list.GetResourceVersion()
			table.Continue = list.GetContinue()
			table.RemainingItemCount = list.GetRemainingItemCount()
		}
		return table, nil
	}
	if err := addRow(object); err != nil {
		return nil, err
	}
	if m, err := meta.Accessor(object); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table, nil
}

// NameColumn is the first column of every table.
var NameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: "Name of the object."}

// AgeColumn is the column Age shows.
var AgeColumn = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: "Time since the object was created."}

// Age prints the time since t the way kubectl does ("5m", "3d"), or
// "<unknown>" when t is unset.
func Age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// ConditionStatus prints the status of the condition of type t, or
// "Unknown" when the object has no such condition yet.
func ConditionStatus(conditions []metav1.Condition, t string) string {
	if c := meta.FindStatusCondition(conditions, t); c != nil {
		return string(c.Status)
	}
	return string(metav1.ConditionUnknown)
}

// OrNone prints s, or "<none>" when s is empty, as kubectl prints absent values.
func OrNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
