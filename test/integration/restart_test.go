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
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/dockerios/dockerios/test/framework"
)

// Each case writes objects, stops the server one way, starts a new one on the
// same data directory, and expects every object back unchanged.
func TestRestart_ObjectsSurviveWithTheEmbeddedEtcd(t *testing.T) {
	for name, stop := range map[string]func(*framework.LocalServer, framework.TB){
		"clean shutdown (SIGTERM)": (*framework.LocalServer).Stop,
		"crash (SIGKILL)":          (*framework.LocalServer).Kill,
	} {
		t.Run(name, func(t *testing.T) {
			dataDir := t.TempDir()
			first := framework.StartLocalServer(t, dataDir)
			k := framework.NewKubectl(t, first.Kubeconfig)
			k.MustRun(t, "", "create", "-f", examplesDir(t))
			k.MustRun(t, "", "patch", "mm", "mac-1", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Provisioning"}}`)
			// The pool's status counts are written a moment after the
			// writes they count; let them settle, or the restarted server
			// would write them and change the pool's resourceVersion.
			framework.Eventually(t, 30*time.Second, func() string {
				got := k.MustRun(t, "", "get", "mipool", "imacpro", "-o", `jsonpath={.status.total}/{.status.allocated}/{.status.conditions[?(@.type=="Exhausted")].status}`)
				if got != "1/1/True" {
					return "pool status total/allocated/Exhausted is " + got + ", not 1/1/True"
				}
				return ""
			})
			const query = "get mm,mmclass,mid,mipool,mimg,mmpool,mmclaim -A -o custom-columns=KIND:.kind,NAME:.metadata.name,UID:.metadata.uid,RV:.metadata.resourceVersion,PHASE:.status.phase"
			before := k.MustRun(t, "", strings.Fields(query)...)
			stop(first, t)

			second := framework.StartLocalServer(t, dataDir)
			k = framework.NewKubectl(t, second.Kubeconfig)
			after := k.MustRun(t, "", strings.Fields(query)...)
			assert.Equal(t, before, after)
			assert.Contains(t, after, "Provisioning", "status written before the stop is kept")

			// The same kubeconfig credentials keep working: the CA was reused.
			assert.Contains(t, k.MustRun(t, "", "get", "mm", "mac-1", "-o", "name"), "mac-1")
		})
	}
}

// Watches stay open on a server for as long as clients like (kube-apiserver's
// aggregator and every informer keep one). SIGTERM must still end the server
// well within a pod's default termination grace period (30s), or every
// rolling update would end in SIGKILL; and the watching client must see its
// watch end, to re-watch elsewhere.
func TestShutdown_SIGTERMWithOpenWatchesEndsWithinAPodsGracePeriod(t *testing.T) {
	s := framework.StartLocalServer(t, t.TempDir())
	k := framework.NewKubectl(t, s.Kubeconfig)
	k.MustRun(t, "", "create", "-f", examplesDir(t))
	watches := []<-chan string{
		k.Stream(t, "get", "mm", "-A", "-w"),
		k.Stream(t, "get", "mmclass", "-w"),
	}
	for _, w := range watches {
		select {
		case <-w: // the initial list: the watch is established
		case <-time.After(30 * time.Second):
			t.Fatal("kubectl get -w printed nothing")
		}
	}

	start := time.Now()
	s.Stop(t)
	took := time.Since(start)
	assert.Less(t, took, 25*time.Second, "SIGTERM with open watches took %s", took)
	for _, w := range watches {
		select {
		case _, open := <-w:
			for open {
				_, open = <-w
			}
		case <-time.After(10 * time.Second):
			t.Error("a watch stayed open after the server stopped")
		}
	}
}
