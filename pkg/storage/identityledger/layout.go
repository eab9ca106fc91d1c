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

package identityledger

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// The index keys live under <storage prefix>dockerios.io/identity-index/,
// beside the resources' own prefixes (…/dockerios.io/macosidentities/ and
// so on), so no watch and no watch cache ever sees them:
//
//	values/<field>/<value>                  → identity name; one key per unique value
//	pools/<pool>/members/<identity>         → ""; every identity of the pool
//	pools/<pool>/free/<bucket>/<identity>   → ""; identities no machine holds
//	pools/<pool>/pending/<ns>/<machine>     → machine uid; machines waiting for an identity
//	machines/<ns>/<machine>/waiting-in      → pool; where that machine's pending key is
//
// Free keys are spread over 4096 buckets (three hex digits of a hash of the
// identity name) so that concurrent allocations look in random buckets and
// rarely reach for the same identity, and so that one bucket stays small
// however large the pool (etcd counts every key of a range it reads). Pending keys are served oldest first by their etcd
// create revision, which is the revision the machine was created at.
type layout struct {
	root string
}

func newLayout(storagePrefix string) layout {
	return layout{root: storagePrefix + "dockerios.io/identity-index/"}
}

// Unique identity fields, by their JSON path; the index key of each holds
// the name of the one identity with that value.
var uniqueFields = []string{"serialNumber", "boardSerialNumber", "systemUUID", "macAddress", "rom"}

func (l layout) value(field, v string) string { return l.root + "values/" + field + "/" + v }

func (l layout) valuesPrefix() string { return l.root + "values/" }

func (l layout) poolsPrefix() string { return l.root + "pools/" }

func (l layout) membersPrefix(pool string) string { return l.root + "pools/" + pool + "/members/" }

func (l layout) member(pool, identity string) string { return l.membersPrefix(pool) + identity }

func (l layout) freePrefix(pool string) string { return l.root + "pools/" + pool + "/free/" }

func (l layout) free(pool, identity string) string {
	return l.freePrefix(pool) + bucket(identity) + "/" + identity
}

func (l layout) pendingPrefix(pool string) string { return l.root + "pools/" + pool + "/pending/" }

func (l layout) pending(pool, namespace, machine string) string {
	return l.pendingPrefix(pool) + namespace + "/" + machine
}

func (l layout) waitingPrefix() string { return l.root + "machines/" }

func (l layout) waiting(namespace, machine string) string {
	return l.waitingPrefix() + namespace + "/" + machine + "/waiting-in"
}

// bucketDigits is the number of hex digits of a free-list bucket.
const bucketDigits = 3

// bucket spreads identities over 16^bucketDigits free-list buckets.
func bucket(identity string) string {
	h := fnv.New32a()
	h.Write([]byte(identity))
	return fmt.Sprintf("%03x", h.Sum32()&0xfff)
}

// parsePoolKey splits a key under pools/ into pool, kind (members, free,
// pending) and the rest.
func (l layout) parsePoolKey(key string) (pool, kind, rest string, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(key, l.poolsPrefix()), "/", 3)
	if !strings.HasPrefix(key, l.poolsPrefix()) || len(parts) != 3 {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}
