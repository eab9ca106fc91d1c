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

package aggregated

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dockerios/dockerios/test/framework"
)

// kube-controller-manager's garbage collector follows our kinds through
// kube-apiserver with its metadata client — lists and watches in
// protobuf, answered as PartialObjectMetadata — both ways: a Kubernetes
// object owned by one of ours goes when its owner goes, and one of ours
// owned by a Kubernetes object goes when its owner goes.
func (e *env) testGarbageCollectorFollowsOurKinds(t *testing.T) {
	ns := e.namespace(t, "collected")
	gone := func(kind, name string) func() string {
		return func() string {
			r := e.admin.Run("", "get", kind, name, "-n", ns, "-o", "name")
			if r.Err != nil && strings.Contains(r.Stderr, "NotFound") {
				return ""
			}
			return fmt.Sprintf("%s %s still there: %s%s", kind, name, r.Stdout, r.Stderr)
		}
	}

	e.pool(t, ns, "owner")
	uid := e.admin.MustRun(t, "", "get", "mmpool", "owner", "-n", ns, "-o", "jsonpath={.metadata.uid}")
	e.admin.MustRun(t, fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: dependent
  namespace: %s
  ownerReferences:
  - {apiVersion: dockerios.io/v1alpha1, kind: MacOSMachinePool, name: owner, uid: %s}
`, ns, uid), "create", "-f", "-")
	// Long enough for the collector to have seen the dependent: its owner
	// is then gone from a graph it learns of through its watch of pools.
	time.Sleep(2 * time.Second)
	e.admin.MustRun(t, "", "delete", "mmpool", "owner", "-n", ns)
	framework.Eventually(t, time.Minute, gone("configmap", "dependent"))

	e.admin.MustRun(t, "", "create", "configmap", "parent", "-n", ns)
	uid = e.admin.MustRun(t, "", "get", "configmap", "parent", "-n", ns, "-o", "jsonpath={.metadata.uid}")
	e.admin.MustRun(t, fmt.Sprintf(`apiVersion: dockerios.io/v1alpha1
kind: MacOSMachinePool
metadata:
  name: child
  namespace: %s
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: parent, uid: %s}
spec: {className: %s, replicas: 0, maxMachines: 1}
`, ns, uid, className), "create", "-f", "-")
	time.Sleep(2 * time.Second)
	e.admin.MustRun(t, "", "delete", "configmap", "parent", "-n", ns)
	framework.Eventually(t, time.Minute, gone("mmpool", "child"))
}
