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

package txn

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// timestamps holds each kind of timestamp field throughWire handles.
type timestamps struct {
	Time      metav1.Time            `json:"time"`
	Ptr       *metav1.Time           `json:"ptr"`
	Micro     metav1.MicroTime       `json:"micro"`
	MicroPtr  *metav1.MicroTime      `json:"microPtr"`
	Slice     []metav1.Time          `json:"slice"`
	Map       map[string]metav1.Time `json:"map"`
	Unrelated string                 `json:"unrelated"`
}

// For timestamps, throughWire's shorter path gives, field for field and
// bit for bit, what a JSON round trip gives: for times before and after
// 1970, with and without a monotonic clock reading, in any zone, and zero.
func TestThroughWire_TimesAsJSON(t *testing.T) {
	zone := time.FixedZone("somewhere", -7*3600)
	random := func() time.Time {
		tm := time.Unix(rand.Int64N(1<<34)-1<<33, rand.Int64N(1e9))
		if rand.IntN(2) == 0 {
			tm = tm.In(zone)
		}
		return tm
	}
	for i := range 2000 {
		now := metav1.Now() // with a monotonic reading
		in := timestamps{
			Time: metav1.NewTime(random()), Ptr: &now, Micro: metav1.NewMicroTime(random()),
			MicroPtr: &metav1.MicroTime{Time: random()},
			Slice:    []metav1.Time{metav1.NewTime(random()), {}}, Map: map[string]metav1.Time{"a": metav1.NewTime(random())},
			Unrelated: "unchanged",
		}
		switch i % 3 {
		case 0:
			in.Ptr, in.MicroPtr = &metav1.Time{}, &metav1.MicroTime{}
		case 1:
			in.Time, in.Micro = metav1.Time{}, metav1.MicroTime{}
		}
		data, err := json.Marshal(in)
		require.NoError(t, err)
		var want timestamps
		require.NoError(t, json.Unmarshal(data, &want))

		got := in
		got.Slice = append([]metav1.Time(nil), in.Slice...)
		got.Map = map[string]metav1.Time{"a": in.Map["a"]}
		if in.Ptr != nil {
			p := *in.Ptr
			got.Ptr = &p
		}
		if in.MicroPtr != nil {
			p := *in.MicroPtr
			got.MicroPtr = &p
		}
		throughWire(reflect.ValueOf(&got).Elem())
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("through the wire:\n%#v\nthroughWire:\n%#v", want, got)
		}
	}
}

// Values with a JSON form of their own other than timestamps go through
// it: a quantity comes back in the format its text parses to, and so
// serializes as a decoded one does.
func TestThroughWire_Quantities(t *testing.T) {
	type spec struct {
		Size   resource.Quantity  `json:"size"`
		Memory *resource.Quantity `json:"memory"`
		Name   string             `json:"name"`
	}
	in := spec{Size: *resource.NewQuantity(937429236000, resource.BinarySI), Memory: resource.NewQuantity(0, resource.DecimalSI), Name: "unchanged"}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	var want spec
	require.NoError(t, json.Unmarshal(data, &want))
	wantJSON, err := json.Marshal(want)
	require.NoError(t, err)

	throughWire(reflect.ValueOf(&in).Elem())
	gotJSON, err := json.Marshal(in)
	require.NoError(t, err)
	assert.JSONEq(t, string(wantJSON), string(gotJSON))
	assert.Equal(t, string(wantJSON), string(gotJSON))
	assert.Equal(t, "937429236k", in.Size.String())
}

func TestHasWireForm(t *testing.T) {
	assert.True(t, hasWireForm(reflect.TypeFor[timestamps]()))
	assert.True(t, hasWireForm(reflect.TypeFor[[]map[string]*metav1.MicroTime]()))
	assert.True(t, hasWireForm(reflect.TypeFor[struct{ Q []resource.Quantity }]()))
	assert.False(t, hasWireForm(reflect.TypeFor[struct{ A, B string }]()))
}

// recursive is a type that holds itself.
type recursive struct {
	At   metav1.Time `json:"at"`
	Next *recursive  `json:"next"`
}

func TestThroughWire_RecursiveTypes(t *testing.T) {
	in := &recursive{At: metav1.NewTime(time.Unix(100, 5)), Next: &recursive{At: metav1.NewTime(time.Unix(200, 7))}}
	throughWire(reflect.ValueOf(in).Elem())
	assert.Equal(t, int64(200), in.Next.At.Unix())
	assert.Zero(t, in.Next.At.Nanosecond(), "the nested value went through the wire too")
}
