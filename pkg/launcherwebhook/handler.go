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
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/sidecar-hook/annotations"
)

// Path is where the webhook is served; artifacts/deploy's
// MutatingWebhookConfiguration calls it.
const Path = "/mutate-virt-launcher-pods"

// maxReviewBytes bounds a request body: kube-apiserver sends one pod, and
// pods are far below etcd's 1.5 MiB object limit.
const maxReviewBytes = 3 << 20

var podResource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}

// Handler serves admission.k8s.io/v1 AdmissionReviews for pod creation.
type Handler struct {
	Log *slog.Logger
}

var _ http.Handler = Handler{}

func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an admission.k8s.io/v1 AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxReviewBytes {
		http.Error(w, fmt.Sprintf("AdmissionReview larger than %d bytes", maxReviewBytes), http.StatusRequestEntityTooLarge)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("want an admission.k8s.io/v1 AdmissionReview with a request (%v)", err), http.StatusBadRequest)
		return
	}
	review.Response = h.admit(review.Request)
	review.Response.UID = review.Request.UID
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&review); err != nil {
		h.log().Error("writing AdmissionReview response", "error", err)
	}
}

func (h Handler) admit(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Resource != podResource || req.SubResource != "" || req.Operation != admissionv1.Create {
		// The webhook configuration sends only pod creation; anything
		// else is a misconfiguration, which must not block the cluster.
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return deny(http.StatusBadRequest, metav1.StatusReasonBadRequest, "decoding the pod: "+err.Error())
	}
	ops, err := Mutate(&pod)
	name := pod.Name
	if name == "" {
		name = pod.GenerateName + "*"
	}
	if err != nil {
		h.log().Info("refused virt-launcher pod", "namespace", req.Namespace, "pod", name, "reason", err.Error())
		return deny(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			"DockerIOS cannot give this pod's hook sidecar its OSK Secret: "+err.Error())
	}
	if len(ops) == 0 {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return deny(http.StatusInternalServerError, metav1.StatusReasonInternalError, "encoding the patch: "+err.Error())
	}
	h.log().Info("mounted OSK Secret into the hook sidecar", "namespace", req.Namespace, "pod", name,
		"secret", pod.Labels[annotations.OSKSecretLabel])
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}

func deny(code int32, reason metav1.StatusReason, msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg,
	}}
}

func (h Handler) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}
