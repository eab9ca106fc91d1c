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

package codec_test

import (
	"bytes"
	"math/rand"
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
	"k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	dockeriofuzzer "github.com/dockerios/dockerios/pkg/apis/dockerio/fuzzer"
	"github.com/dockerios/dockerios/pkg/scheme"
	"github.com/dockerios/dockerios/pkg/storage/codec"
)

var mediaTypes = []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf}

// Whatever --storage-media-type an apiserver writes with, one with the
// other reads it and gets what the writer itself would: a rolling upgrade,
// a rollback and a change of the flag meet both in one etcd.
func TestFor_EachReadsWhatTheOtherWrote(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, dockeriofuzzer.Funcs), rand.NewSource(seed), scheme.Codecs).
		NilChance(0.2).NumElements(0, 3)
	codecs := map[string]runtime.Codec{}
	for _, mt := range mediaTypes {
		c, _, err := codec.For(mt)
		require.NoError(t, err)
		codecs[mt] = c
	}
	for _, empty := range []runtime.Object{
		&dockerio.MacOSMachine{}, &dockerio.MacOSMachineClaim{}, &dockerio.MacOSIdentity{}, &dockerio.MacOSIdentityPool{},
		&dockerio.MacOSMachineClass{}, &dockerio.MacOSMachinePool{}, &dockerio.MacOSImage{},
	} {
		for range 50 {
			obj := empty.DeepCopyObject()
			f.Fill(obj)
			for writer, w := range codecs {
				data, err := runtime.Encode(w, obj)
				require.NoError(t, err)
				own := empty.DeepCopyObject()
				_, _, err = w.Decode(data, nil, own)
				require.NoError(t, err)
				for reader, r := range codecs {
					got := empty.DeepCopyObject()
					_, _, err := r.Decode(data, nil, got)
					require.NoError(t, err, "%T written in %s, read by %s", obj, writer, reader)
					require.True(t, apiequality.Semantic.DeepEqual(own, got), "%T written in %s, read by %s:\n%s", obj, writer, reader, cmpDiff(own, got))
				}
			}
		}
	}
}

// Each media type writes what it says, as v1alpha1.
func TestFor_WritesTheMediaTypeAsked(t *testing.T) {
	m := readyMachine()
	for mt, prefix := range map[string]string{
		runtime.ContentTypeJSON: `{"kind":"MacOSMachine","apiVersion":"dockerios.io/v1alpha1",`,
		// The protobuf magic number, then the envelope's type meta.
		runtime.ContentTypeProtobuf: "k8s\x00\n%\n\x15dockerios.io/v1alpha1\x12\x0cMacOSMachine",
	} {
		c, _, err := codec.For(mt)
		require.NoError(t, err)
		data, err := runtime.Encode(c, m)
		require.NoError(t, err)
		assert.True(t, bytes.HasPrefix(data, []byte(prefix)), "%s: %q", mt, data)
	}
}

func TestFor_RefusesAMediaTypeItCannotWrite(t *testing.T) {
	_, _, err := codec.For("application/cbor")
	assert.ErrorContains(t, err, "unable to find serializer")
}

// BenchmarkStoredMachine compares the media types on what the watch cache
// and the binding's transaction do with a Ready machine: encode it for
// etcd, decode it from an event.
func BenchmarkStoredMachine(b *testing.B) {
	m := readyMachine()
	for _, mt := range mediaTypes {
		c, _, err := codec.For(mt)
		require.NoError(b, err)
		data, err := runtime.Encode(c, m)
		require.NoError(b, err)
		b.Run(mt+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := runtime.Encode(c, m); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(data)), "bytes")
		})
		b.Run(mt+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := c.Decode(data, nil, &dockerio.MacOSMachine{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// readyMachine is a machine as a fleet's are once Ready: its class's
// snapshot, every condition, its addresses and its agent's report.
func readyMachine() *dockerio.MacOSMachine {
	now := metav1.NewTime(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	memory := resource.MustParse("16Gi")
	fields := func(raw string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(raw)} }
	m := &dockerio.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{
			Name: "warm-a-x7k2p", Namespace: "builds", UID: "0b7c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d", Generation: 1, CreationTimestamp: now,
			Labels:          map[string]string{"dockerios.io/pool": "warm-a", "xcode": "16"},
			Finalizers:      []string{"dockerios.io/teardown"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "dockerios.io/v1alpha1", Kind: "MacOSMachinePool", Name: "warm-a", UID: "1b7c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d", Controller: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "dockerios-controller", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "dockerios.io/v1alpha1", Time: &now, FieldsType: "FieldsV1",
					FieldsV1: fields(`{"f:metadata":{"f:finalizers":{".":{},"v:\"dockerios.io/teardown\"":{}},"f:labels":{".":{},"f:dockerios.io/pool":{},"f:xcode":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"1b7c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d\"}":{}}},"f:spec":{".":{},"f:className":{},"f:poolName":{}}}`)},
				{Manager: "dockerios-controller", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "dockerios.io/v1alpha1", Time: &now, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: fields(`{"f:status":{".":{},"f:addresses":{},"f:agent":{".":{},"f:lastSeenTime":{},"f:stage":{},"f:version":{}},"f:classSnapshot":{".":{},"f:generation":{},"f:spec":{}},"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:identityRef":{},"f:nodeName":{},"f:phase":{},"f:virtualMachineName":{}}}`)},
			},
		},
		Spec: dockerio.MacOSMachineSpec{ClassName: "sonoma-m", PoolName: "warm-a", Purpose: dockerio.MachinePurposeWorkload},
		Status: dockerio.MacOSMachineStatus{
			ObservedGeneration: 1, Phase: dockerio.MachineReady, VirtualMachineName: "warm-a-x7k2p", NodeName: "node-3",
			IdentityRef: &dockerio.LocalObjectReference{Name: "imacpro-000123"},
			ClassSnapshot: &dockerio.ClassSnapshot{Generation: 2, Spec: dockerio.MacOSMachineClassSpec{
				Memory: &memory, ImageName: "sonoma-14-6", IdentityPoolName: "imacpro", SMBIOSModel: "iMacPro1,1",
				SystemDisk: dockerio.SystemDiskSpec{Size: resource.MustParse("128Gi"), Bus: dockerio.DiskBusSATA},
			}},
			Addresses: []dockerio.MachineAddress{{Type: dockerio.MachineAddressPod, Address: "10.244.3.17"}, {Type: dockerio.MachineAddressAgent, Address: "10.244.3.17:7443"}},
			Agent: &dockerio.AgentReport{Stage: dockerio.AgentStageReady, LastSeenTime: &now, Version: "v0.9.0", OSVersion: "14.6.1",
				DiskTotalBytes: ptr.To[int64](128 << 30), DiskFreeBytes: ptr.To[int64](50 << 30), ObservedTime: &now, LastProgressTime: &now},
		},
	}
	for _, c := range []string{"IdentityAllocated", "BootdiskReady", "SystemDiskReady", "VirtualMachineRunning", "AgentReachable", "GuestReady", "Ready"} {
		m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: "AsExpected",
			Message: "the step " + c + " is done", LastTransitionTime: now, ObservedGeneration: 1})
	}
	return m
}

func cmpDiff(a, b runtime.Object) string {
	return "as the writer reads it:\n" + dump.Pretty(a) + "\nas the other reads it:\n" + dump.Pretty(b)
}
