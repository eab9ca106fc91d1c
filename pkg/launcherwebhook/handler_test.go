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

package launcherwebhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

func review(t *testing.T, op admissionv1.Operation, resource metav1.GroupVersionResource, pod *corev1.Pod) []byte {
	t.Helper()
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("req-1"), Operation: op, Resource: resource,
			Namespace: "macs", Object: runtime.RawExtension{Raw: raw}},
	})
	require.NoError(t, err)
	return b
}

func post(t *testing.T, body []byte) (*httptest.ResponseRecorder, *admissionv1.AdmissionReview) {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler{}.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		return rec, nil
	}
	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	require.NotNil(t, out.Response)
	assert.Equal(t, types.UID("req-1"), out.Response.UID, "response answers the request's UID")
	assert.Nil(t, out.Request, "the request is not echoed back")
	return rec, &out
}

func TestHandler(t *testing.T) {
	t.Run("patches a DockerIOS launcher pod", func(t *testing.T) {
		_, out := post(t, review(t, admissionv1.Create, podResource, launcherPod(nil)))
		require.True(t, out.Response.Allowed)
		require.NotNil(t, out.Response.PatchType)
		assert.Equal(t, admissionv1.PatchTypeJSONPatch, *out.Response.PatchType)
		var ops []PatchOp
		require.NoError(t, json.Unmarshal(out.Response.Patch, &ops))
		assert.Len(t, ops, 2)
	})
	t.Run("refuses with the reason", func(t *testing.T) {
		pod := launcherPod(func(p *corev1.Pod) { p.Spec.Containers = p.Spec.Containers[:1] })
		_, out := post(t, review(t, admissionv1.Create, podResource, pod))
		assert.False(t, out.Response.Allowed)
		assert.Equal(t, int32(http.StatusUnprocessableEntity), out.Response.Result.Code)
		assert.Contains(t, out.Response.Result.Message, "cannot give this pod's hook sidecar its OSK Secret: spec.containers: Required value")
	})
	t.Run("allows what it was not meant to see", func(t *testing.T) {
		pod := launcherPod(func(p *corev1.Pod) { p.Spec.Containers = p.Spec.Containers[:1] })
		for _, tc := range []struct {
			op  admissionv1.Operation
			gvr metav1.GroupVersionResource
		}{
			{admissionv1.Update, podResource},
			{admissionv1.Create, metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}},
		} {
			_, out := post(t, review(t, tc.op, tc.gvr, pod))
			assert.True(t, out.Response.Allowed, "%s %s", tc.op, tc.gvr)
			assert.Nil(t, out.Response.Patch)
		}
	})
	t.Run("bad requests", func(t *testing.T) {
		rec, _ := post(t, []byte(`{"kind":"AdmissionReview"}`))
		assert.Equal(t, http.StatusBadRequest, rec.Code)
		rec, _ = post(t, []byte(`not json`))
		assert.Equal(t, http.StatusBadRequest, rec.Code)
		rec, _ = post(t, []byte(`{"request":{"uid":"`+strings.Repeat("x", maxReviewBytes)+`"}}`))
		assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
		rec = httptest.NewRecorder()
		Handler{}.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Path, nil))
		assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	})
}
