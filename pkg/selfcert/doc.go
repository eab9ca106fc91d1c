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

// Package selfcert makes a component's TLS serving certificate itself, so
// that a plain install works with no cert-manager and no step by hand, the
// way KubeVirt's virt-operator and open-policy-agent/cert-controller do.
//
// It owns one Secret of type kubernetes.io/tls in the component's
// namespace, holding a CA (ca.crt, ca.key) and a serving certificate that
// CA issued (tls.crt, tls.key). The Secret is the one source of truth for
// every replica: each one creates it if it is absent and re-issues the
// serving certificate when it is due, and every write is conditional
// (Create fails with AlreadyExists, Update with a Conflict on a stale
// resourceVersion), so when replicas race the first write wins and the
// others read it back. All replicas therefore serve one certificate.
//
// The serving key pair is served from memory (GetCertificate, or as a
// dynamiccertificates.CertKeyContentProvider for k8s.io/apiserver) and
// follows the Secret without a restart. The CA is written into the
// caBundle of the registration objects that make kube-apiserver dial the
// component: an APIService, a MutatingWebhookConfiguration.
//
// What it must never do: write any Secret but the one it was given, or any
// field of a registration object but its caBundle; replace a Secret it
// cannot have made (one of another type, or one cert-manager manages);
// write when nothing would change.
//
// Rotation. The serving certificate is re-issued from the same CA at two
// thirds of its life. The CA is replaced at two thirds of its own, with an
// overlap: the new CA joins the old one in the Secret's ca-bundle.crt,
// which is what the caBundles get, while the serving certificate of the
// old CA is still served; once every target trusts the new CA and
// Config.Overlap has passed (kube-apiserver's informers lag), serving
// certificates move to the new CA. The old CA stays in the bundle until it
// expires. A Secret someone deletes while replicas run is rotated the same
// way from what they serve. Only a CA that is unusable anyway (unreadable,
// expired, from the future) is replaced outright, and clients that
// trusted it fail until the bundles follow.
package selfcert
