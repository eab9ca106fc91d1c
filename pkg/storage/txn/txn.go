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

// Package txn writes several API objects and plain index keys in one etcd
// transaction — what Kubernetes' storage has no way to do
// (kubernetes/kubernetes#49658) — without forking how objects are stored.
//
// Objects are encoded exactly as the generic registry's etcd3 store encodes
// them: the same key, PrepareObjectForStorage, the resource's storage codec,
// then its storage transformer with the key as authenticated data. So the
// generic store (and its watch cache) reads what this package writes, and
// encryption at rest keeps working. Reads, lists and watches stay with the
// generic store; this package only writes, and reads what it must compare.
//
// It knows nothing of identities or machines: the rules are the caller's.
package txn

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"reflect"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/value"

	"github.com/dockerios/dockerios/pkg/scheme"
	"github.com/dockerios/dockerios/pkg/storage/door"
)

// MaxOps is etcd's default limit on the operations of one transaction
// (--max-txn-ops). A write here touches a handful of keys; reaching it is a bug.
const MaxOps = 128

// Resource encodes, decodes and locates the objects of one resource exactly
// as that resource's generic etcd3 store does.
type Resource struct {
	GroupResource schema.GroupResource
	namespaced    bool
	// storagePrefix is what the etcd3 store puts before every store key.
	storagePrefix string
	// keyPrefix is etcd's key prefix of the resource, ending in "/": the
	// storage prefix joined with the store's resource prefix.
	keyPrefix   string
	codec       runtime.Codec
	transformer value.Transformer
	versioner   storage.Versioner
	newFunc     func() runtime.Object
	// encodeVersioner picks the version the codec stores objects in (the
	// storage config's; the codec is built from scheme.Codecs, by the
	// apiserver as by the tests' REST options). Nil when the config does
	// not say, and then Written.Into decodes.
	encodeVersioner runtime.GroupVersioner
}

// NewResource returns the Resource of gr, from the same RESTOptions the
// generic store of gr is completed with.
func NewResource(optsGetter generic.RESTOptionsGetter, gr schema.GroupResource, namespaced bool, newFunc func() runtime.Object) (*Resource, error) {
	opts, err := optsGetter.GetRESTOptions(gr, newFunc())
	if err != nil {
		return nil, fmt.Errorf("storage options of %s: %w", gr, err)
	}
	cfg := opts.StorageConfig.Config
	transformer := cfg.Transformer
	if transformer == nil {
		transformer = identityTransformer{}
	}
	// The generic store uses "/" + ResourcePrefix as the key prefix and the
	// etcd3 store prepends path.Join("/", Prefix) + "/"; keys must be
	// byte-identical to theirs.
	storagePrefix := path.Join("/", cfg.Prefix)
	if !strings.HasSuffix(storagePrefix, "/") {
		storagePrefix += "/"
	}
	return &Resource{
		GroupResource:   gr,
		namespaced:      namespaced,
		storagePrefix:   storagePrefix,
		keyPrefix:       storagePrefix + strings.TrimPrefix(opts.ResourcePrefix, "/") + "/",
		codec:           cfg.Codec,
		transformer:     transformer,
		versioner:       storage.APIObjectVersioner{},
		newFunc:         newFunc,
		encodeVersioner: cfg.EncodeVersioner,
	}, nil
}

// Key returns the etcd key of the object namespace/name (namespace empty for
// cluster-scoped resources).
func (r *Resource) Key(namespace, name string) string {
	if r.namespaced {
		return r.keyPrefix + namespace + "/" + name
	}
	return r.keyPrefix + name
}

// StoreKey returns the key the resource's generic store uses for the object
// namespace/name (its KeyFunc's answer), which its storage.Interface takes.
func (r *Resource) StoreKey(namespace, name string) string {
	return "/" + strings.TrimPrefix(r.Key(namespace, name), r.storagePrefix)
}

// StoreRoot returns the key the resource's generic store lists and
// watches every object under (its KeyRootFunc's answer without a
// namespace), which its storage.Interface takes.
func (r *Resource) StoreRoot() string {
	return "/" + strings.TrimSuffix(strings.TrimPrefix(r.keyPrefix, r.storagePrefix), "/")
}

// KeyPrefix returns the etcd prefix under which every object of the
// resource lives; nothing else may be written under it.
func (r *Resource) KeyPrefix() string { return r.keyPrefix }

// StoragePrefix returns the prefix every key of the server's storage has
// ("/registry/"); keys of our own belong under it too, outside every
// resource's KeyPrefix.
func (r *Resource) StoragePrefix() string { return r.storagePrefix }

// EtcdKey turns a key the generic store passed to its storage.Interface
// (the store's KeyFunc result) into the etcd key the etcd3 store uses.
func (r *Resource) EtcdKey(storeKey string) (string, error) {
	full := r.storagePrefix + strings.TrimPrefix(storeKey, "/")
	if !strings.HasPrefix(full, r.keyPrefix) || len(full) == len(r.keyPrefix) {
		return "", fmt.Errorf("key %q is not a %s key", storeKey, r.GroupResource)
	}
	return full, nil
}

// Encode returns the bytes the etcd3 store would write for obj at key.
// obj is not modified.
func (r *Resource) Encode(ctx context.Context, key string, obj runtime.Object) ([]byte, error) {
	var t Txn
	if err := t.WriteObject(ctx, r, key, obj); err != nil {
		return nil, err
	}
	return []byte(t.ops[0].ValueBytes()), nil
}

// Decode turns stored bytes at key, written at revision rev, into an object
// whose resourceVersion is rev.
func (r *Resource) Decode(ctx context.Context, key string, stored []byte, rev int64) (runtime.Object, error) {
	data, _, err := r.transformer.TransformFromStorage(ctx, stored, authenticatedData(key))
	if err != nil {
		return nil, storage.NewInternalError(err)
	}
	obj := r.newFunc()
	if _, _, err := r.codec.Decode(data, nil, obj); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", key, err)
	}
	if err := r.versioner.UpdateObject(obj, uint64(rev)); err != nil {
		return nil, err
	}
	return obj, nil
}

// Copy copies in into out as storage would return it: a round trip
// through the resource's storage codec, resourceVersion included. It is
// how a dry run answers with the object it would have written.
func (r *Resource) Copy(in, out runtime.Object) error {
	data, err := runtime.Encode(r.codec, in)
	if err != nil {
		return err
	}
	_, _, err = r.codec.Decode(data, nil, out)
	return err
}

// Get reads the object at key and the revision it was last modified at. A
// missing object is storage's KeyNotFound error. opts may ask for a
// serializable read where a stale answer is caught by a later condition.
func (r *Resource) Get(ctx context.Context, client *clientv3.Client, key string, opts ...clientv3.OpOption) (runtime.Object, int64, error) {
	obj, revs, err := r.Read(ctx, client, key, opts...)
	return obj, revs.Mod, err
}

// Revisions are the revisions a key was created and last modified at.
type Revisions struct {
	Create, Mod int64
}

// Read is Get, with both revisions of the key.
func (r *Resource) Read(ctx context.Context, client *clientv3.Client, key string, opts ...clientv3.OpOption) (runtime.Object, Revisions, error) {
	resp, err := client.Get(ctx, key, opts...)
	if err != nil {
		return nil, Revisions{}, err
	}
	if len(resp.Kvs) == 0 {
		return nil, Revisions{}, storage.NewKeyNotFoundError(key, 0)
	}
	kv := resp.Kvs[0]
	obj, err := r.Decode(ctx, key, kv.Value, kv.ModRevision)
	return obj, Revisions{Create: kv.CreateRevision, Mod: kv.ModRevision}, err
}

// Txn collects the conditions and writes of one etcd transaction.
type Txn struct {
	conds  []clientv3.Cmp
	ops    []clientv3.Op
	onFail []clientv3.Op
}

// IfAbsent requires key not to exist.
func (t *Txn) IfAbsent(key string) *Txn {
	t.conds = append(t.conds, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
	return t
}

// IfUnchanged requires key to exist and to be last modified at revision rev.
func (t *Txn) IfUnchanged(key string, rev int64) *Txn {
	t.conds = append(t.conds, clientv3.Compare(clientv3.ModRevision(key), "=", rev))
	return t
}

// IfCreatedAt requires key to exist and to have been created at revision
// rev: the same object, however often it was updated since.
func (t *Txn) IfCreatedAt(key string, rev int64) *Txn {
	t.conds = append(t.conds, clientv3.Compare(clientv3.CreateRevision(key), "=", rev))
	return t
}

// IfNothingUnder requires that no key starts with prefix.
func (t *Txn) IfNothingUnder(prefix string) *Txn {
	t.conds = append(t.conds, clientv3.Compare(clientv3.CreateRevision(prefix), "=", 0).WithPrefix())
	return t
}

// IfNothingUnderChangedSince requires that no key under prefix was created
// or modified after revision rev: the set read at rev is the set now, but
// for keys deleted since. It is how a decision taken on a range read is
// made to hold at commit, without a counter key every writer must bump.
func (t *Txn) IfNothingUnderChangedSince(prefix string, rev int64) *Txn {
	t.conds = append(t.conds, clientv3.Compare(clientv3.ModRevision(prefix), "<", rev+1).WithPrefix())
	return t
}

// PutObject writes obj at key, encoded as its generic store would. Once
// committed, the returned Written turns into the stored object.
func (t *Txn) PutObject(ctx context.Context, r *Resource, key string, obj runtime.Object) (Written, error) {
	return t.putObject(ctx, r, key, obj, true)
}

// WriteObject writes obj at key as PutObject does, for a caller that wants
// no answer: it keeps no copy of obj to make one from.
func (t *Txn) WriteObject(ctx context.Context, r *Resource, key string, obj runtime.Object) error {
	_, err := t.putObject(ctx, r, key, obj, false)
	return err
}

func (t *Txn) putObject(ctx context.Context, r *Resource, key string, obj runtime.Object, answer bool) (Written, error) {
	// PrepareObjectForStorage clears what is never stored (the resource
	// version). It would change the caller's object, so what it clears is
	// put back after encoding, which costs less than copying the object.
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return Written{}, err
	}
	rv, selfLink := accessor.GetResourceVersion(), accessor.GetSelfLink()
	if err := r.versioner.PrepareObjectForStorage(obj); err != nil {
		return Written{}, fmt.Errorf("preparing %s for storage: %w", key, err)
	}
	data, err := runtime.Encode(r.codec, obj)
	var stored runtime.Object
	if err == nil && answer && r.encodeVersioner != nil && !bytes.HasPrefix(data, protobufPrefix) {
		stored = obj.DeepCopyObject()
	}
	accessor.SetResourceVersion(rv)
	accessor.SetSelfLink(selfLink)
	if err != nil {
		return Written{}, err
	}
	out, err := r.transformer.TransformToStorage(ctx, data, authenticatedData(key))
	if err != nil {
		return Written{}, storage.NewInternalError(err)
	}
	t.ops = append(t.ops, clientv3.OpPut(key, string(out)))
	return Written{resource: r, data: data, stored: stored}, nil
}

// protobufPrefix starts every object the protobuf serializer writes (its
// "k8s\x00" magic number).
var protobufPrefix = []byte("k8s\x00")

// Written is an object put by a transaction, before it is committed.
type Written struct {
	resource *Resource
	data     []byte
	// stored is a copy of the object as it was encoded, or nil.
	stored runtime.Object
}

// Into fills out with the written object at the transaction's revision, as
// the etcd3 store fills the object a write returns: what decoding the
// written bytes gives. A nil out (a caller that wants nothing back) is
// allowed, as it is by the etcd3 store.
//
// Protobuf bytes it decodes: that is cheap. JSON bytes it does not decode:
// a JSON decode of a machine costs more than the rest of its
// transaction's encoding together. It takes the
// object as it was encoded through what decoding does instead: conversion
// to the stored version, each value that has a JSON form of its own
// through that form (see throughWire), the version's defaults, conversion
// back. TestWrittenInto_IsWhatDecodingGives holds it to giving what
// decoding gives, for every kind.
func (w Written) Into(out runtime.Object, rev int64) error {
	if out == nil {
		return nil
	}
	if w.stored == nil {
		if _, _, err := w.resource.codec.Decode(w.data, nil, out); err != nil {
			return err
		}
	} else if err := w.resource.asDecoded(w.stored, out); err != nil {
		return err
	}
	return w.resource.versioner.UpdateObject(out, uint64(rev))
}

// asDecoded fills out with stored as decoding its encoding gives it.
func (r *Resource) asDecoded(stored, out runtime.Object) error {
	// ConvertToVersion works on a copy: out shares no memory with stored.
	versioned, err := scheme.Scheme.ConvertToVersion(stored, r.encodeVersioner)
	if err != nil {
		return err
	}
	throughWire(reflect.ValueOf(versioned).Elem())
	scheme.Scheme.Default(versioned)
	return scheme.Scheme.Convert(versioned, out, nil)
}

// Object returns the written object with the transaction's revision.
func (w Written) Object(rev int64) (runtime.Object, error) {
	out := w.resource.newFunc()
	return out, w.Into(out, rev)
}

// Put writes a plain key.
func (t *Txn) Put(key, val string) *Txn {
	t.ops = append(t.ops, clientv3.OpPut(key, val))
	return t
}

// Delete removes key (a no-op when absent).
func (t *Txn) Delete(key string) *Txn {
	t.ops = append(t.ops, clientv3.OpDelete(key))
	return t
}

// ReadOnFailure asks for key's current value when a condition fails, so
// the caller can say which one did, and why, without another round trip.
func (t *Txn) ReadOnFailure(key string) *Txn {
	t.onFail = append(t.onFail, clientv3.OpGet(key))
	return t
}

// ReadFirstUnderOnFailure asks for the first key under prefix when a
// condition fails, so the caller can tell whether an IfNothingUnder did.
func (t *Txn) ReadFirstUnderOnFailure(prefix string) *Txn {
	t.onFail = append(t.onFail, clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1)))
	return t
}

// ReadAllUnderOnFailure asks for every key under prefix (keys only) when a
// condition fails, oldest first by creation.
func (t *Txn) ReadAllUnderOnFailure(prefix string) *Txn {
	t.onFail = append(t.onFail, clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)))
	return t
}

// Result is the outcome of a committed transaction.
type Result struct {
	// Succeeded says every condition held and every write was made.
	Succeeded bool
	// Revision is the store revision after the transaction; the
	// resourceVersion of every object it wrote.
	Revision int64
	// Found holds, when the transaction failed, the keys asked for with
	// ReadOnFailure that exist, with their values and revisions.
	Found map[string]KeyValue
}

// KeyValue is one key read back from a failed transaction.
type KeyValue struct {
	Value          []byte
	ModRevision    int64
	CreateRevision int64
}

// Commit runs the transaction: all writes, or none.
//
// In a dry run (door.IsDryRun(ctx)) it evaluates the same conditions
// against etcd and writes nothing, so a dry run fails exactly where the
// real write would; its Revision is 0, which gives the objects it would
// have written no resourceVersion, as the generic store's dry runs do.
func Commit(ctx context.Context, client *clientv3.Client, t *Txn) (Result, error) {
	if n := len(t.ops) + len(t.conds); n > MaxOps {
		return Result{}, fmt.Errorf("transaction has %d operations, over etcd's limit of %d", n, MaxOps)
	}
	dryRun := door.IsDryRun(ctx)
	then := t.ops
	if dryRun {
		then = nil
	}
	resp, err := client.Txn(ctx).If(t.conds...).Then(then...).Else(t.onFail...).Commit()
	if err != nil {
		return Result{}, err
	}
	res := Result{Succeeded: resp.Succeeded, Revision: resp.Header.Revision}
	if dryRun {
		res.Revision = 0
	}
	if !resp.Succeeded {
		res.Found = map[string]KeyValue{}
		for _, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().GetKvs() {
				res.Found[string(kv.Key)] = KeyValue{Value: kv.Value, ModRevision: kv.ModRevision, CreateRevision: kv.CreateRevision}
			}
		}
	}
	return res, nil
}

// authenticatedData binds stored values to their key, as the etcd3 store
// does, so an encrypted value copied to another key fails to decrypt.
type authenticatedData string

func (d authenticatedData) AuthenticatedData() []byte { return []byte(d) }

// identityTransformer stores values as they are, as the etcd3 store does
// when no encryption is configured.
type identityTransformer struct{}

func (identityTransformer) TransformFromStorage(_ context.Context, data []byte, _ value.Context) ([]byte, bool, error) {
	return data, false, nil
}

func (identityTransformer) TransformToStorage(_ context.Context, data []byte, _ value.Context) ([]byte, error) {
	return data, nil
}
