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
	"bytes"
	"encoding/json"
	"reflect"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	timeType      = reflect.TypeFor[metav1.Time]()
	microTimeType = reflect.TypeFor[metav1.MicroTime]()
	marshaler     = reflect.TypeFor[json.Marshaler]()
	unmarshaler   = reflect.TypeFor[json.Unmarshaler]()
	null          = []byte("null")
)

// throughWire sets every value under v (addressable: a versioned object)
// that has a JSON form of its own — timestamps, quantities, durations,
// managed fields — to what encoding and decoding it gives: its MarshalJSON
// output, compacted and escaped as the encoder writes it (wireForm), given
// to UnmarshalJSON on a zero value, as the JSON decoder does. That is
// where a round trip through storage changes an object: a Time keeps
// whole seconds, a MicroTime microseconds, a quantity comes back in the
// format its text parses to, a fieldsV1 with <, > and & escaped; and a
// pointer to a value whose form is null comes back nil. Everything else
// (strings, numbers, lists and maps of them) comes back as it went; an
// empty list or map may come back nil, which the API treats alike. (A
// string that is not valid UTF-8 would come back with U+FFFD in place of
// its bad bytes; none reaches a write here: every string comes from a
// decoded request or object, where the decoder has already replaced
// them, or from our code.)
//
// Time and MicroTime, in every object, take a shorter path with the same
// result (TestThroughWire_TimesAsJSON).
func throughWire(v reflect.Value) {
	w := wireOf(v.Type())
	switch w.kind {
	case noWireForm:
	case timeForm:
		if tm := v.Addr().Interface().(*metav1.Time); !tm.Time.IsZero() {
			tm.Time = time.Unix(tm.Unix(), 0)
		}
	case microTimeForm:
		if tm := v.Addr().Interface().(*metav1.MicroTime); !tm.Time.IsZero() {
			tm.Time = time.Unix(tm.Unix(), int64(tm.Nanosecond()/1000*1000))
		}
	case ownForm:
		data, err := wireForm(v)
		if err != nil {
			return
		}
		v.Set(reflect.Zero(v.Type()))
		_ = v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(data)
	case pointerTo:
		if v.IsNil() {
			return
		}
		if k := wireOf(v.Type().Elem()).kind; k == timeForm || k == microTimeForm || k == ownForm {
			// A value whose form is null decodes as a nil pointer.
			if data, err := wireForm(v.Elem()); err == nil && bytes.Equal(data, null) {
				v.Set(reflect.Zero(v.Type()))
				return
			}
		}
		throughWire(v.Elem())
	case walk:
		switch v.Kind() {
		case reflect.Struct:
			for _, i := range w.fields {
				throughWire(v.Field(i))
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				throughWire(v.Index(i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				e := reflect.New(v.Type().Elem()).Elem()
				e.Set(it.Value())
				throughWire(e)
				v.SetMapIndex(it.Key(), e)
			}
		}
	}
}

// wireKind is how throughWire treats values of a type.
type wireKind int

const (
	noWireForm    wireKind = iota // nothing under it has a form of its own
	timeForm                      // metav1.Time
	microTimeForm                 // metav1.MicroTime
	ownForm                       // encodes and decodes itself
	pointerTo                     // a pointer to a value with a form of its own, or holding one
	walk                          // a struct, list or map holding such values
)

// wireInfo is what throughWire needs to know of a type.
type wireInfo struct {
	kind wireKind
	// fields are the exported fields of a struct to walk.
	fields []int
}

// wireInfos caches wireInfo by type.
var wireInfos sync.Map

func wireOf(t reflect.Type) *wireInfo {
	if w, ok := wireInfos.Load(t); ok {
		return w.(*wireInfo)
	}
	w := newWireInfo(t, map[reflect.Type]bool{})
	wireInfos.Store(t, w)
	return w
}

// hasWireForm says whether a value of type t can hold a value with a JSON
// form of its own.
func hasWireForm(t reflect.Type) bool { return wireOf(t).kind != noWireForm }

func newWireInfo(t reflect.Type, seen map[reflect.Type]bool) *wireInfo {
	switch {
	case t == timeType:
		return &wireInfo{kind: timeForm}
	case t == microTimeType:
		return &wireInfo{kind: microTimeForm}
	case ownWireForm(t):
		return &wireInfo{kind: ownForm}
	case seen[t]:
		// A recursive type (none of ours is): walked, in case it holds
		// one; wireOf of its own type says, when it is reached.
		return &wireInfo{kind: walk}
	}
	seen[t] = true
	defer delete(seen, t)
	switch t.Kind() {
	case reflect.Pointer:
		if newWireInfo(t.Elem(), seen).kind != noWireForm {
			return &wireInfo{kind: pointerTo}
		}
	case reflect.Slice, reflect.Array, reflect.Map:
		if newWireInfo(t.Elem(), seen).kind != noWireForm {
			return &wireInfo{kind: walk}
		}
	case reflect.Struct:
		w := &wireInfo{kind: walk}
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && newWireInfo(f.Type, seen).kind != noWireForm {
				w.fields = append(w.fields, i)
			}
		}
		if len(w.fields) > 0 {
			return w
		}
	}
	return &wireInfo{kind: noWireForm}
}

// ownWireForm says whether values of t encode and decode themselves.
func ownWireForm(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface {
		return false
	}
	p := reflect.PointerTo(t)
	return p.Implements(unmarshaler) && (t.Implements(marshaler) || p.Implements(marshaler))
}

// wireForm is v's JSON form as the encoder writes it: its MarshalJSON
// output compacted with <, >, &, U+2028 and U+2029 escaped, as the
// storage codec's json.Encoder (which escapes HTML) does. json.Compact
// does not escape: a fieldsV1 holding those characters raw would be
// answered raw, and decoding gives them escaped.
func wireForm(v reflect.Value) ([]byte, error) {
	return json.Marshal(v.Addr().Interface())
}
