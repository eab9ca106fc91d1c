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
	"context"
	"crypto/aes"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/value"
	aestransformer "k8s.io/apiserver/pkg/storage/value/encrypt/aes"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	imagestorage "github.com/dockerios/dockerios/pkg/registry/macosimage/storage"
	"github.com/dockerios/dockerios/pkg/registry/registrytest"
	"github.com/dockerios/dockerios/pkg/storage/txn"
)

// encryptedGetter stores everything encrypted with AES-GCM behind a prefix,
// as an EncryptionConfiguration with an aesgcm provider does.
func encryptedGetter(t *testing.T) *registrytest.RESTOptionsGetter {
	t.Helper()
	block, err := aes.NewCipher([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	gcm, err := aestransformer.NewGCMTransformer(block)
	require.NoError(t, err)
	getter := registrytest.NewRESTOptionsGetter(t)
	getter.Transformer = value.NewPrefixTransformers(nil, value.PrefixTransformer{Prefix: []byte("k8s:enc:aesgcm:v1:key1:"), Transformer: gcm})
	return getter
}

func imageResource(t *testing.T, getter *registrytest.RESTOptionsGetter) *txn.Resource {
	r, err := txn.NewResource(getter, dockerio.Resource("macosimages"), false, func() runtime.Object { return &dockerio.MacOSImage{} })
	require.NoError(t, err)
	return r
}

func TestPutObject_ReadsBackThroughTheGenericStoreWithEncryptionAtRest(t *testing.T) {
	getter := encryptedGetter(t)
	images, err := imagestorage.NewStorage(getter)
	require.NoError(t, err)
	r := imageResource(t, getter)
	client := getter.Server.V3Client.Client
	ctx := context.Background()

	img := registrytest.Image("sonoma")
	img.UID = "uid-1"
	img.CreationTimestamp = metav1.Now()
	img.Generation = 1
	key := r.Key("", "sonoma")
	var tx txn.Txn
	written, err := tx.IfAbsent(key).PutObject(ctx, r, key, img)
	require.NoError(t, err)
	res, err := txn.Commit(ctx, client, &tx)
	require.NoError(t, err)
	require.True(t, res.Succeeded)

	returned, err := written.Object(res.Revision)
	require.NoError(t, err)
	assert.Equal(t, strconv.FormatInt(res.Revision, 10), returned.(*dockerio.MacOSImage).ResourceVersion)

	got, err := images.Image.Get(genericregistrytest.NewClusterScopeContext(images.Image.Store), "sonoma", &metav1.GetOptions{})
	require.NoError(t, err)
	gotImg := got.(*dockerio.MacOSImage)
	assert.Equal(t, img.Spec, gotImg.Spec)
	assert.Equal(t, strconv.FormatInt(res.Revision, 10), gotImg.ResourceVersion, "the written object's resourceVersion is the transaction's revision")

	raw, err := client.Get(ctx, key)
	require.NoError(t, err)
	require.Len(t, raw.Kvs, 1)
	assert.True(t, strings.HasPrefix(string(raw.Kvs[0].Value), "k8s:enc:aesgcm:v1:key1:"), "stored encrypted")
	assert.NotContains(t, string(raw.Kvs[0].Value), "sonoma-14-6", "no plaintext at rest")
}

func TestGet_ReadsWhatTheGenericStoreWrote(t *testing.T) {
	getter := encryptedGetter(t)
	images, err := imagestorage.NewStorage(getter)
	require.NoError(t, err)
	ctx := genericregistrytest.NewClusterScopeContext(images.Image.Store)
	created, err := images.Image.Create(ctx, registrytest.Image("sequoia"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)

	r := imageResource(t, getter)
	obj, rev, err := r.Get(context.Background(), getter.Server.V3Client.Client, r.Key("", "sequoia"))
	require.NoError(t, err)
	assert.Equal(t, created.(*dockerio.MacOSImage).ResourceVersion, strconv.FormatInt(rev, 10))
	assert.Equal(t, created.(*dockerio.MacOSImage).Spec, obj.(*dockerio.MacOSImage).Spec)
	assert.Equal(t, created.(*dockerio.MacOSImage).UID, obj.(*dockerio.MacOSImage).UID)
}

func TestDecode_RefusesAValueMovedToAnotherKey(t *testing.T) {
	getter := encryptedGetter(t)
	r := imageResource(t, getter)
	ctx := context.Background()
	data, err := r.Encode(ctx, r.Key("", "a"), registrytest.Image("a"))
	require.NoError(t, err)
	_, err = r.Decode(ctx, r.Key("", "b"), data, 5)
	require.Error(t, err, "the key is authenticated data: a copied value must not decrypt")
	obj, err := r.Decode(ctx, r.Key("", "a"), data, 5)
	require.NoError(t, err)
	assert.Equal(t, "5", obj.(*dockerio.MacOSImage).ResourceVersion)
}

func TestEtcdKey_MatchesTheGenericStoresKeys(t *testing.T) {
	getter := registrytest.NewRESTOptionsGetter(t)
	images, err := imagestorage.NewStorage(getter)
	require.NoError(t, err)
	r := imageResource(t, getter)
	storeKey, err := images.Image.KeyFunc(genericregistrytest.NewClusterScopeContext(images.Image.Store), "sonoma")
	require.NoError(t, err)
	etcdKey, err := r.EtcdKey(storeKey)
	require.NoError(t, err)
	assert.Equal(t, "/registry/dockerios.io/macosimages/sonoma", etcdKey)
	assert.Equal(t, etcdKey, r.Key("", "sonoma"))

	_, err = r.EtcdKey("/dockerios.io/macosmachines/default/x")
	assert.Error(t, err, "a key of another resource is refused")
}

func TestCommit_ConditionsDecideAllOrNothing(t *testing.T) {
	getter := registrytest.NewRESTOptionsGetter(t)
	client := getter.Server.V3Client.Client
	ctx := context.Background()

	var first txn.Txn
	first.IfAbsent("/idx/a").IfNothingUnder("/idx/free/").Put("/idx/a", "1").Put("/idx/b", "2")
	res, err := txn.Commit(ctx, client, &first)
	require.NoError(t, err)
	require.True(t, res.Succeeded)

	// /idx/a now exists: nothing of the second transaction may be written,
	// and the failure says what holds the key.
	var second txn.Txn
	second.IfAbsent("/idx/a").Put("/idx/c", "3").ReadOnFailure("/idx/a")
	res, err = txn.Commit(ctx, client, &second)
	require.NoError(t, err)
	assert.False(t, res.Succeeded)
	assert.Equal(t, "1", string(res.Found["/idx/a"].Value))
	got, err := client.Get(ctx, "/idx/c")
	require.NoError(t, err)
	assert.Empty(t, got.Kvs, "a failed transaction writes nothing")

	// IfUnchanged holds only at the exact revision.
	var stale txn.Txn
	stale.IfUnchanged("/idx/b", res.Revision-1).Delete("/idx/b")
	res, err = txn.Commit(ctx, client, &stale)
	require.NoError(t, err)
	assert.False(t, res.Succeeded)

	// IfNothingUnder fails as soon as one key exists below the prefix.
	var freeTaken txn.Txn
	freeTaken.Put("/idx/free/x", "")
	_, err = txn.Commit(ctx, client, &freeTaken)
	require.NoError(t, err)
	var needsEmpty txn.Txn
	needsEmpty.IfNothingUnder("/idx/free/").Put("/idx/d", "4")
	res, err = txn.Commit(ctx, client, &needsEmpty)
	require.NoError(t, err)
	assert.False(t, res.Succeeded)
}

func TestCommit_RefusesMoreOperationsThanEtcdAllows(t *testing.T) {
	getter := registrytest.NewRESTOptionsGetter(t)
	var big txn.Txn
	for i := 0; i <= txn.MaxOps; i++ {
		big.Put("/idx/"+strconv.Itoa(i), "")
	}
	_, err := txn.Commit(context.Background(), getter.Server.V3Client.Client, &big)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "over etcd's limit")
}

func TestResource_GetOfMissingKeyIsNotFound(t *testing.T) {
	getter := registrytest.NewRESTOptionsGetter(t)
	r := imageResource(t, getter)
	_, _, err := r.Get(context.Background(), getter.Server.V3Client.Client, r.Key("", "nope"))
	assert.True(t, storage.IsNotFound(err), "got %v", err)
}
