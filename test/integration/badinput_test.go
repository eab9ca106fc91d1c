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

package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	applyv1alpha1 "github.com/dockerios/dockerios/pkg/generated/applyconfiguration/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/scheme"
	"github.com/dockerios/dockerios/test/framework"
)

// createClassAndPool creates the example identity pool and class
// "standard", which a machine must name to be created.
func createClassAndPool(t *testing.T, s *framework.LocalServer) {
	t.Helper()
	k := framework.NewKubectl(t, s.Kubeconfig)
	examples := examplesDir(t)
	k.MustRun(t, "", "create", "-f", filepath.Join(examples, "00-identitypool.yaml"), "-f", filepath.Join(examples, "03-class.yaml"))
}

func restConfig(t testing.TB, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	// Tests are the only client: no client-side throttling.
	cfg.QPS, cfg.Burst = 1000, 1000
	return cfg
}

// TestBadInput_AnswersWith4xxAndTheFieldPath sends what clients get wrong
// and checks the status code and message of each answer. None may be a 500.
func TestBadInput_AnswersWith4xxAndTheFieldPath(t *testing.T) {
	s := framework.StartLocalServer(t, t.TempDir())
	createClassAndPool(t, s)
	cfg := restConfig(t, s.Kubeconfig)
	client, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	machines := cfg.Host + "/apis/dockerios.io/v1alpha1/namespaces/default/macosmachines"
	classes := cfg.Host + "/apis/dockerios.io/v1alpha1/macosmachineclasses"

	send := func(method, url, contentType, body string) (int, string) {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", contentType)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		require.NoError(t, err)
		// Error answers are a metav1.Status: its message and the field of
		// each cause are what a person (and kubectl) sees.
		var status metav1.Status
		if json.Unmarshal(data, &status) == nil && status.Kind == "Status" {
			text := status.Message
			if status.Details != nil {
				for _, c := range status.Details.Causes {
					text += "\n" + c.Field + ": " + c.Message
				}
			}
			return resp.StatusCode, text
		}
		return resp.StatusCode, string(data)
	}
	const jsonType = "application/json"
	const machine = `{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachine","metadata":{"name":"mac-1"},"spec":{"className":"standard"}}`

	code, _ := send(http.MethodPost, machines, jsonType, machine)
	require.Equal(t, http.StatusCreated, code)

	cases := []struct {
		name        string
		method, url string
		contentType string
		body        string
		wantCode    int
		wantText    []string
	}{
		{"undecodable body", http.MethodPost, machines, jsonType, `{"kind": `, http.StatusBadRequest, []string{"MacOSMachine"}},
		{"wrong type for a field", http.MethodPost, machines, jsonType, `{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachine","metadata":{"name":"x"},"spec":{"className":5}}`, http.StatusBadRequest, []string{"className"}},
		{"unknown field under strict validation", http.MethodPost, machines + "?fieldValidation=Strict", jsonType, `{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachine","metadata":{"name":"x"},"spec":{"className":"standard","colour":"red"}}`, http.StatusBadRequest, []string{`unknown field "spec.colour"`}},
		{"missing required field", http.MethodPost, machines, jsonType, `{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachine","metadata":{"name":"x"},"spec":{}}`, http.StatusUnprocessableEntity, []string{"spec.className", "Required value"}},
		{"name that is not a DNS label", http.MethodPost, machines, jsonType, `{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachine","metadata":{"name":"Mac_1"},"spec":{"className":"standard"}}`, http.StatusUnprocessableEntity, []string{"metadata.name"}},
		{"invalid label", http.MethodPost, machines, jsonType, `{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachine","metadata":{"name":"x","labels":{"a b":"c"}},"spec":{"className":"standard"}}`, http.StatusUnprocessableEntity, []string{"metadata.labels"}},
		{"invalid quantity", http.MethodPost, classes, jsonType, `{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachineClass","metadata":{"name":"x"},"spec":{"memory":"lots","systemDisk":{"size":"1Gi"},"imageName":"i","identityPoolName":"p"}}`, http.StatusBadRequest, []string{"quantities must match"}},
		{"negative quantity", http.MethodPost, classes, jsonType, `{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachineClass","metadata":{"name":"x"},"spec":{"memory":"-1Gi","systemDisk":{"size":"1Gi"},"imageName":"i","identityPoolName":"p"}}`, http.StatusUnprocessableEntity, []string{"spec.memory", "greater than zero"}},
		{"already exists", http.MethodPost, machines, jsonType, machine, http.StatusConflict, []string{`"mac-1" already exists`}},
		{"stale resourceVersion", http.MethodPut, machines + "/mac-1", jsonType, `{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachine","metadata":{"name":"mac-1","resourceVersion":"1"},"spec":{"className":"standard"}}`, http.StatusConflict, []string{"the object has been modified"}},
		{"immutable spec", http.MethodPatch, machines + "/mac-1", "application/merge-patch+json", `{"spec":{"className":"gpu"}}`, http.StatusUnprocessableEntity, []string{"spec", "immutable"}},
		{"name in body differs from URL", http.MethodPut, machines + "/mac-1", jsonType, `{"apiVersion":"dockerios.io/v1alpha1","kind":"MacOSMachine","metadata":{"name":"other"},"spec":{"className":"standard"}}`, http.StatusBadRequest, []string{"does not match"}},
		{"unsupported media type", http.MethodPost, machines, "text/plain", machine, http.StatusUnsupportedMediaType, nil},
		{"malformed patch", http.MethodPatch, machines + "/mac-1", "application/json-patch+json", `[{"op":"explode"}]`, http.StatusUnprocessableEntity, nil},
		{"missing object", http.MethodGet, machines + "/nope", jsonType, "", http.StatusNotFound, []string{`"nope" not found`}},
		{"unsupported field selector", http.MethodGet, machines + "?fieldSelector=spec.colour%3Dred", jsonType, "", http.StatusBadRequest, []string{"field label not supported"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := send(tc.method, tc.url, tc.contentType, tc.body)
			assert.Equal(t, tc.wantCode, code, body)
			for _, text := range tc.wantText {
				assert.Contains(t, body, text)
			}
		})
	}
	assert.NotContains(t, s.Output(), "panic", "the server must not panic on input")
}

func TestAuth_LocalModeRefusesAnonymousUsers(t *testing.T) {
	s := framework.StartLocalServer(t, t.TempDir())
	cfg := restConfig(t, s.Kubeconfig)
	anonymous := rest.AnonymousClientConfig(cfg)
	client, err := versioned.NewForConfig(anonymous)
	require.NoError(t, err)
	_, err = client.DockeriosV1alpha1().MacOSMachines("default").List(context.Background(), metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	assert.Contains(t, err.Error(), `"system:anonymous"`)
}

// TestClientset_GeneratedClientAndApplyConfigurationsWork proves the
// committed generated code matches what the server serves.
func TestClientset_GeneratedClientAndApplyConfigurationsWork(t *testing.T) {
	s := framework.StartLocalServer(t, t.TempDir())
	createClassAndPool(t, s)
	client, err := versioned.NewForConfig(restConfig(t, s.Kubeconfig))
	require.NoError(t, err)
	ctx := context.Background()
	pools := client.DockeriosV1alpha1().MacOSMachinePools("default")

	apply := applyv1alpha1.MacOSMachinePool("warm", "default").
		WithSpec(applyv1alpha1.MacOSMachinePoolSpec().WithClassName("standard").WithReplicas(3))
	created, err := pools.Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "test", Force: true})
	require.NoError(t, err)
	assert.Equal(t, int32(3), ptr.Deref(created.Spec.Replicas, 0))

	scale, err := pools.GetScale(ctx, "warm", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "dockerios.io/pool=warm", scale.Status.Selector)
	scale.Spec.Replicas = 5
	_, err = pools.UpdateScale(ctx, "warm", scale, metav1.UpdateOptions{})
	require.NoError(t, err)

	got, err := pools.Get(ctx, "warm", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(5), ptr.Deref(got.Spec.Replicas, 0))

	// The scale write moved ownership of spec.replicas to its manager, so the
	// original applier re-applying 3 without force now conflicts.
	_, err = pools.Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "test"})
	require.True(t, apierrors.IsConflict(err), "got %v", err)

	_, err = pools.Patch(ctx, "warm", types.MergePatchType, []byte(`{"spec":{"className":"gpu"}}`), metav1.PatchOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status)
	require.NotEmpty(t, status.Status().Details.Causes)
	assert.Equal(t, "spec.className", status.Status().Details.Causes[0].Field)

	_, err = client.DockeriosV1alpha1().MacOSMachines("default").Create(ctx, &v1alpha1.MacOSMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "typed"},
		Spec:       v1alpha1.MacOSMachineSpec{ClassName: "standard"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// The namespace controller and the garbage collector list, watch and
// delete our objects with client-go's metadata client, which asks for
// protobuf first. Our kinds have no protobuf form: the server must answer
// such clients in JSON, or namespaces holding our objects never finish
// deleting; an object's metadata, which has one, is answered in protobuf.
func TestProtobufFirstClients_AreAnsweredInJSON(t *testing.T) {
	s := framework.StartLocalServer(t, t.TempDir())
	createClassAndPool(t, s)
	ctx := context.Background()
	client, err := versioned.NewForConfig(restConfig(t, s.Kubeconfig))
	require.NoError(t, err)
	for _, name := range []string{"a", "b"} {
		_, err := client.DockeriosV1alpha1().MacOSMachinePools("default").Create(ctx, &v1alpha1.MacOSMachinePool{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1alpha1.MacOSMachinePoolSpec{ClassName: "standard"},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	cfg := restConfig(t, s.Kubeconfig)
	meta, err := metadata.NewForConfig(cfg)
	require.NoError(t, err)
	pools := meta.Resource(v1alpha1.SchemeGroupVersion.WithResource("macosmachinepools")).Namespace("default")
	list, err := pools.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, list.Items, 2)
	require.NoError(t, pools.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	left, err := client.DockeriosV1alpha1().MacOSMachinePools("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, left.Items)

	// A plain request preferring protobuf gets JSON, not a 500.
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.GroupVersion = &v1alpha1.SchemeGroupVersion
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	require.NoError(t, err)
	const poolsPath = "/apis/dockerios.io/v1alpha1/namespaces/default/macosmachinepools"
	var contentType string
	err = rc.Get().AbsPath(poolsPath).Do(ctx).ContentType(&contentType).Error()
	require.NoError(t, err)
	assert.Equal(t, "application/json", contentType)

	// The metadata client's own Accept headers: metadata in protobuf, for
	// a list, a get and a watch.
	_, err = client.DockeriosV1alpha1().MacOSMachinePools("default").Create(ctx, &v1alpha1.MacOSMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"team": "ci"}},
		Spec:       v1alpha1.MacOSMachinePoolSpec{ClassName: "standard"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	httpClient, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	const (
		asMeta     = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
		asMetaList = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
	)
	send := func(method, path, accept, contentType string, body io.Reader) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(cfg.Host, "/")+path, body)
		require.NoError(t, err)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := httpClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for _, tc := range []struct{ path, accept, want string }{
		{poolsPath, asMetaList, "application/vnd.kubernetes.protobuf"},
		{poolsPath + "/c", asMeta, "application/vnd.kubernetes.protobuf"},
		{poolsPath + "?watch=true&labelSelector=team%3Dci", asMeta, "application/vnd.kubernetes.protobuf;stream=watch"},
		{poolsPath + "/c", "application/json", "application/json"},
	} {
		resp := send(http.MethodGet, tc.path, tc.accept, "", nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode, tc.path)
		assert.Equal(t, tc.want, resp.Header.Get("Content-Type"), "%s with Accept %s", tc.path, tc.accept)
	}
	got, err := meta.Resource(v1alpha1.SchemeGroupVersion.WithResource("macosmachinepools")).Namespace("default").Get(ctx, "c", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "ci", got.Labels["team"], "the metadata client reads the protobuf answer")
	w, err := pools.Watch(ctx, metav1.ListOptions{LabelSelector: "team=ci"})
	require.NoError(t, err)
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		m, ok := ev.Object.(*metav1.PartialObjectMetadata)
		require.True(t, ok, "a watch event holds metadata: %#v", ev.Object)
		assert.Equal(t, "c", m.Name)
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("no watch event")
	}

	// Our kinds in protobuf: not acceptable, and not accepted as a body.
	resp := send(http.MethodGet, poolsPath, "application/vnd.kubernetes.protobuf", "", nil)
	assert.Equal(t, http.StatusNotAcceptable, resp.StatusCode)
	resp = send(http.MethodPost, poolsPath, "application/json", "application/vnd.kubernetes.protobuf", strings.NewReader("k8s\x00"))
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	body, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(body), "application/json", "the refusal says what is accepted")
}
