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

package txn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/dump"
	"sigs.k8s.io/randfill"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	dockeriofuzzer "github.com/dockerios/dockerios/pkg/apis/dockerio/fuzzer"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
	"github.com/dockerios/dockerios/pkg/scheme"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// Written.Into answers a write with the object a read of it would give —
// what decoding the written bytes gives — without decoding them: for every
// kind, with timestamps finer than the wire keeps, defaults left out and
// empty lists, the object is the decoded one, and so is what a client is
// sent.
func TestWrittenInto_IsWhatDecodingGives(t *testing.T) {
	for _, mediaType := range storedAs {
		t.Run(mediaType, func(t *testing.T) { intoIsWhatDecodingGives(t, mediaType) })
	}
}

// storedAs are the media types --storage-media-type offers that Into
// answers differently for: JSON without decoding, protobuf by decoding.
var storedAs = []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf}

func intoIsWhatDecodingGives(t *testing.T, mediaType string) {
	// No etcd is dialled: only the resources' encoding is used.
	getter := registrytest.RESTOptionsGetterFor("http://127.0.0.1:1").StoredAs(mediaType)
	kinds := map[string]runtime.Object{
		"macosmachines":       &dockerio.MacOSMachine{},
		"macosidentities":     &dockerio.MacOSIdentity{},
		"macosmachineclaims":  &dockerio.MacOSMachineClaim{},
		"macosidentitypools":  &dockerio.MacOSIdentityPool{},
		"macosmachineclasses": &dockerio.MacOSMachineClass{},
		"macosmachinepools":   &dockerio.MacOSMachinePool{},
		"macosimages":         &dockerio.MacOSImage{},
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, dockeriofuzzer.Funcs, finerTimes, managedFields), rand.NewSource(seed), scheme.Codecs).
		NilChance(0.2).NumElements(0, 3)
	for resource, empty := range kinds {
		r, err := txn.NewResource(getter, dockerio.Resource(resource), true, func() runtime.Object { return empty.DeepCopyObject() })
		require.NoError(t, err)
		for i := range 200 {
			obj := empty.DeepCopyObject()
			f.Fill(obj)
			if i%2 == 0 {
				// Defaults left out: decoding fills them in.
				withoutDefaults(obj)
			}
			ctx := context.Background()
			key := r.Key("ns", "name")
			stored, err := r.Encode(ctx, key, obj)
			require.NoError(t, err)
			decoded, err := r.Decode(ctx, key, stored, 42)
			require.NoError(t, err)

			var tx txn.Txn
			written, err := tx.PutObject(ctx, r, key, obj)
			require.NoError(t, err)
			into := empty.DeepCopyObject()
			require.NoError(t, written.Into(into, 42))

			if !apiequality.Semantic.DeepEqual(decoded, into) {
				t.Fatalf("%s: Into differs from decoding:\n%s", resource, diff(decoded, into))
			}
			assert.Equal(t, served(t, decoded), served(t, into), "%s: a client is sent the same", resource)
		}
	}
}

// The object Into fills is the object as it was written, whatever the
// caller does with its own object afterwards, and shares nothing with it.
func TestWrittenInto_SharesNothingWithTheCallersObject(t *testing.T) {
	for _, mediaType := range storedAs {
		t.Run(mediaType, func(t *testing.T) { writtenInto_SharesNothingWithTheCallersObject(t, mediaType) })
	}
}

func writtenInto_SharesNothingWithTheCallersObject(t *testing.T, mediaType string) {
	getter := registrytest.RESTOptionsGetterFor("http://127.0.0.1:1").StoredAs(mediaType)
	r, err := txn.NewResource(getter, dockerio.Resource("macosmachines"), true, func() runtime.Object { return &dockerio.MacOSMachine{} })
	require.NoError(t, err)
	m := registrytest.Machine("mac-1")
	m.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}}
	var tx txn.Txn
	written, err := tx.PutObject(context.Background(), r, r.Key("ns", "mac-1"), m)
	require.NoError(t, err)
	m.Status.Conditions[0].Reason = "ChangedAfterTheWrite"
	labels := m.Labels
	m.Labels = map[string]string{"changed": "after the write"}

	var out dockerio.MacOSMachine
	require.NoError(t, written.Into(&out, 7))
	assert.Equal(t, "Ready", out.Status.Conditions[0].Reason)
	assert.Equal(t, labels, out.Labels)
	assert.Equal(t, "7", out.ResourceVersion)
	out.Status.Conditions[0].Reason = "ChangedInTheAnswer"
	var again dockerio.MacOSMachine
	require.NoError(t, written.Into(&again, 7))
	assert.Equal(t, "Ready", again.Status.Conditions[0].Reason)
	assert.Equal(t, "ChangedAfterTheWrite", m.Status.Conditions[0].Reason)
}

// A timestamp set to zero is null in JSON: a pointer to one decodes as
// nil, and so does Into leave it. (Protobuf keeps the zero time, which
// clients are sent as null; IsWhatDecodingGives covers it.)
func TestWrittenInto_ZeroTimestampIsNil(t *testing.T) {
	getter := registrytest.RESTOptionsGetterFor("http://127.0.0.1:1").StoredAs(runtime.ContentTypeJSON)
	r, err := txn.NewResource(getter, dockerio.Resource("macosmachines"), true, func() runtime.Object { return &dockerio.MacOSMachine{} })
	require.NoError(t, err)
	m := registrytest.Machine("mac-1")
	m.DeletionTimestamp = &metav1.Time{}
	var tx txn.Txn
	written, err := tx.PutObject(context.Background(), r, r.Key("ns", "mac-1"), m)
	require.NoError(t, err)
	var out dockerio.MacOSMachine
	require.NoError(t, written.Into(&out, 7))
	assert.Nil(t, out.DeletionTimestamp)
}

// A managed fields entry's fieldsV1 is stored as the encoder writes it:
// its raw JSON, compacted, with <, >, &, U+2028 and U+2029 escaped. Raw
// JSON holding them unescaped (which the field manager never writes, but
// a value put in etcd by other means decodes to) is answered as decoding
// gives it.
func TestWrittenInto_ManagedFieldsAsTheEncoderWritesThem(t *testing.T) {
	for _, mediaType := range storedAs {
		t.Run(mediaType, func(t *testing.T) { writtenInto_ManagedFieldsAsTheEncoderWritesThem(t, mediaType) })
	}
}

func writtenInto_ManagedFieldsAsTheEncoderWritesThem(t *testing.T, mediaType string) {
	getter := registrytest.RESTOptionsGetterFor("http://127.0.0.1:1").StoredAs(mediaType)
	r, err := txn.NewResource(getter, dockerio.Resource("macosmachines"), true, func() runtime.Object { return &dockerio.MacOSMachine{} })
	require.NoError(t, err)
	for _, raw := range []string{
		`{"f:spec":{"f:vmLabels":{"f:a<b>&c":{}}}}`,
		"{\"f:status\":{\"f:conditions\":{\"k:{\\\"type\\\":\\\"Ready\u2028\u2029\\\"}\":{}}}}",
		`{"f:spec":{"f:vmLabels":{"f:a\u003cb":{}}}}`,
		`{ "f:metadata" : { "f:labels" : {} } }`,
	} {
		m := registrytest.Machine("mac-1")
		m.ManagedFields = []metav1.ManagedFieldsEntry{{
			Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)},
		}}
		ctx := context.Background()
		key := r.Key("default", "mac-1")
		stored, err := r.Encode(ctx, key, m)
		require.NoError(t, err)
		decoded, err := r.Decode(ctx, key, stored, 7)
		require.NoError(t, err)
		var tx txn.Txn
		written, err := tx.PutObject(ctx, r, key, m)
		require.NoError(t, err)
		into := &dockerio.MacOSMachine{}
		require.NoError(t, written.Into(into, 7))
		assert.Equal(t, string(decoded.(*dockerio.MacOSMachine).ManagedFields[0].FieldsV1.Raw), string(into.ManagedFields[0].FieldsV1.Raw), "fieldsV1 %s", raw)
		assert.True(t, apiequality.Semantic.DeepEqual(decoded, into), "fieldsV1 %s:\n%s", raw, diff(decoded, into))
		assert.Equal(t, served(t, decoded), served(t, into))
	}
}

// managedFields fills managed fields entries with fieldsV1 (which the
// meta fuzzer leaves nil): raw JSON objects whose keys hold any
// character, with <, > and & escaped (as the field manager writes them)
// or not, with blanks between tokens or not. (json.Encoder always escapes
// U+2028 and U+2029; the test above has them raw.)
func managedFields(runtimeserializer.CodecFactory) []any {
	return []any{
		func(e *metav1.ManagedFieldsEntry, c randfill.Continue) {
			c.FillNoCustom(e)
			if c.Intn(5) == 0 {
				e.FieldsV1 = nil
				return
			}
			var fill func(depth int) map[string]any
			fill = func(depth int) map[string]any {
				m := map[string]any{}
				for range c.Intn(3) {
					k := "f:" + c.String(0)
					switch c.Intn(4) {
					case 0:
						k += "<&>"
					case 1:
						k += "\u2028\u2029"
					}
					if depth < 3 {
						m[k] = fill(depth + 1)
					} else {
						m[k] = map[string]any{}
					}
				}
				return m
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(c.Bool())
			if c.Bool() {
				enc.SetIndent("", " ")
			}
			if err := enc.Encode(fill(0)); err != nil {
				panic(err)
			}
			e.FieldsV1 = &metav1.FieldsV1{Raw: bytes.TrimSpace(buf.Bytes())}
		},
	}
}

// finerTimes fills timestamps with nanoseconds, which the wire drops, or
// leaves them zero, which the wire writes as null; and quantities in every
// format, which the wire may change.
func finerTimes(runtimeserializer.CodecFactory) []any {
	return []any{
		func(t *metav1.Time, c randfill.Continue) {
			if c.Intn(8) == 0 {
				*t = metav1.Time{}
				return
			}
			t.Time = time.Unix(c.Int63n(1<<32), c.Int63n(1e9))
		},
		func(t *metav1.MicroTime, c randfill.Continue) {
			t.Time = time.Unix(c.Int63n(1<<32), c.Int63n(1e9))
		},
		func(q *resource.Quantity, c randfill.Continue) {
			formats := []resource.Format{resource.BinarySI, resource.DecimalSI, resource.DecimalExponent}
			f := formats[c.Intn(len(formats))]
			switch c.Intn(3) {
			case 0:
				*q = *resource.NewQuantity(c.Int63n(1<<40)+1, f)
			case 1:
				*q = *resource.NewMilliQuantity(c.Int63n(1<<40)+1, f)
			default:
				*q = *resource.NewScaledQuantity(c.Int63n(1<<20)+1, resource.Scale(c.Intn(19)-9))
				q.Format = f
			}
		},
	}
}

// withoutDefaults clears fields that decoding defaults.
func withoutDefaults(obj runtime.Object) {
	clear := func(s *dockerio.MacOSMachineClassSpec) {
		s.CPU.Cores, s.CPU.Model, s.Memory, s.StartTimeout = 0, "", nil, nil
	}
	switch o := obj.(type) {
	case *dockerio.MacOSMachine:
		if o.Status.ClassSnapshot != nil {
			clear(&o.Status.ClassSnapshot.Spec)
		}
	case *dockerio.MacOSMachineClass:
		clear(&o.Spec)
	case *dockerio.MacOSMachinePool:
		o.Spec.Replicas = nil
	}
}

// served is obj as a client is sent it: v1alpha1 JSON.
func served(t *testing.T, obj runtime.Object) string {
	t.Helper()
	data, err := runtime.Encode(scheme.Codecs.LegacyCodec(v1alpha1.SchemeGroupVersion), obj)
	require.NoError(t, err)
	return string(data)
}

func diff(a, b runtime.Object) string {
	if reflect.DeepEqual(a, b) {
		return ""
	}
	return "decoded:\n" + dump.Pretty(a) + "\ninto:\n" + dump.Pretty(b)
}

// WriteObject writes what PutObject writes (Encode is WriteObject; see
// TestWrittenInto_IsWhatDecodingGives) without keeping a copy of the object
// to answer with: the callers that want no answer, most of them, do not
// pay for one. (Stored as protobuf, PutObject keeps none either: Into
// decodes what was written.)
func TestWriteObject_KeepsNoCopyForAnAnswer(t *testing.T) {
	getter := registrytest.RESTOptionsGetterFor("http://127.0.0.1:1").StoredAs(runtime.ContentTypeJSON)
	r, err := txn.NewResource(getter, dockerio.Resource("macosmachines"), true, func() runtime.Object { return &dockerio.MacOSMachine{} })
	require.NoError(t, err)
	m := registrytest.Machine("mac-1")
	key := r.Key("ns", "mac-1")
	ctx := context.Background()
	put := testing.AllocsPerRun(50, func() {
		var tx txn.Txn
		_, _ = tx.PutObject(ctx, r, key, m)
	})
	write := testing.AllocsPerRun(50, func() {
		var tx txn.Txn
		_ = tx.WriteObject(ctx, r, key, m)
	})
	assert.Less(t, write, put, "allocations per write: WriteObject %.0f, PutObject %.0f", write, put)
}
