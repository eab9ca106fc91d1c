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

// Package ledgerguard keeps an apiserver from serving an identity ledger
// that is not this cluster's: an empty one (its volume lost, or not
// mounted) or another one (another cluster's etcd, another volume).
//
// Served, an empty ledger answers "not found" for every machine, and the
// garbage collector then deletes every VirtualMachine, DataVolume, Secret
// and PVC the controller made, through their owner references. So the
// apiserver keeps a record of the ledger outside its own etcd: a
// ConfigMap in its namespace (the marker) holding the ledger's ID, a
// random UUID the apiserver writes into etcd at first start (at
// <prefix>dockerios.io/ledger-id, outside every resource's prefix), and
// the last etcd revision it saw. At start, and while it runs, the guard
// compares the two (Decide) and, until they agree or a person has
// confirmed what to do, answers every dockerios.io request 503 with the
// reason (never 404), fails the dockerios-ledger readiness check with the
// same message, and records it as a Warning Event on the marker and the
// APIServices.
//
// It owns the two etcd keys it and a restore write (the ledger ID and the
// restore record, see pkg/ledgerbackup) and the marker ConfigMap; it
// never changes a resource's object.
package ledgerguard
