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

package ha

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
	"github.com/dockerios/dockerios/pkg/generated/clientset/versioned"
	"github.com/dockerios/dockerios/pkg/identity"
	"github.com/dockerios/dockerios/test/framework"
)

// The fleet: one identity pool with fewer identities than the machines
// the burst keeps, so that machines wait for one and get it when another
// machine goes; a class; a machine pool claims are made against.
const (
	testNS       = "ha"
	identityPool = "imacpro"
	className    = "standard"
	machinePool  = "ci"
	model        = "iMacPro1,1"
	fleetSize    = 24
	// clientTimeout bounds every request the tests make: a write that
	// has no answer by then hangs, which fails the test.
	clientTimeout = 30 * time.Second
)

// TestHA runs artifacts/ha on this machine and takes it through what a
// cluster does to it: every etcd member and every apiserver replica
// SIGKILLed in turn under a burst of machine and claim writes, and a
// rolling restart of the replicas under a client loop.
func TestHA(t *testing.T) {
	start := time.Now()
	c := startCluster(t)
	t.Logf("artifacts/ha up on loopback in %s: etcd members %v, replicas %v",
		time.Since(start).Round(time.Millisecond), c.memberNames(), c.replicaNames())
	c.setUpFleet()

	t.Run("KillEachMemberAndReplicaDuringWrites", func(t *testing.T) { c.with(t).testKills() })
	t.Run("RollingRestartFailsNoRequest", func(t *testing.T) { c.with(t).testRollingRestart() })
	t.Logf("TestHA took %s", time.Since(start).Round(time.Second))
}

// with is the cluster as seen from test t (a subtest).
func (c *cluster) with(t *testing.T) *cluster {
	cc := *c
	cc.t = t
	return &cc
}

func (c *cluster) memberNames() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.name)
	}
	return out
}

func (c *cluster) replicaNames() []string {
	var out []string
	for _, r := range c.replicas {
		out = append(out, r.name)
	}
	return out
}

// answers counts the HTTP answers a client got, by status code, below
// client-go's retries: a 429 client-go retried shows here and not as a
// failed request.
type answers struct {
	mu    sync.Mutex
	codes map[int]int
}

func (a *answers) wrap(cfg *rest.Config) *rest.Config {
	a.codes = map[int]int{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil {
				a.mu.Lock()
				a.codes[resp.StatusCode]++
				a.mu.Unlock()
			}
			return resp, err
		})
	})
	return cfg
}

func (a *answers) get() map[int]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[int]int{}
	for k, v := range a.codes {
		out[k] = v
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// client is an admin's clientset through kube-apiserver, with every
// request bounded by clientTimeout and its answers counted.
func (c *cluster) client(a *answers) versioned.Interface {
	c.t.Helper()
	cfg := framework.RESTConfig(c.t, c.cp.AdminKubeconfig)
	cfg.Timeout = clientTimeout
	if a != nil {
		cfg = a.wrap(cfg)
	}
	cs, err := versioned.NewForConfig(cfg)
	require.NoError(c.t, err)
	return cs
}

// setUpFleet makes the identity pool and its identities, an image, a
// class, the test's namespace and its machine pool.
func (c *cluster) setUpFleet() {
	t := c.t
	k := framework.NewKubectl(t, c.cp.AdminKubeconfig)
	k.MustRun(t, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: dockerios.io/v1alpha1
kind: MacOSIdentityPool
metadata: {name: %[2]s}
spec: {model: "%[3]s"}
---
apiVersion: dockerios.io/v1alpha1
kind: MacOSImage
metadata: {name: sonoma}
spec:
  source: {dataSource: {namespace: dockerios-images, name: sonoma-14-6}}
  release: "14.6"
---
apiVersion: dockerios.io/v1alpha1
kind: MacOSMachineClass
metadata: {name: %[4]s}
spec: {imageName: sonoma, identityPoolName: %[2]s, systemDisk: {size: 128Gi}}
---
apiVersion: dockerios.io/v1alpha1
kind: MacOSMachinePool
metadata: {name: %[5]s, namespace: %[1]s}
spec: {className: %[4]s, replicas: 0, maxMachines: 1000}
`, testNS, identityPool, model, className, machinePool), "apply", "-f", "-")
	client := c.client(nil)
	gen := identity.NewGenerator(1, model)
	for i := range fleetSize {
		v := gen.Next()
		_, err := client.DockeriosV1alpha1().MacOSIdentities().Create(context.Background(), &v1alpha1.MacOSIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fleet-%d", i)},
			Spec: v1alpha1.MacOSIdentitySpec{PoolName: identityPool, Model: v.Model, SerialNumber: v.SerialNumber,
				BoardSerialNumber: v.BoardSerialNumber, SystemUUID: v.SystemUUID, MACAddress: v.MACAddress, ROM: v.ROM},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	c.checkLedger(context.Background(), "after setting up the fleet")
}

// counter counts outcomes by name, safe for concurrent use, and keeps
// the first few messages of each.
type counter struct {
	mu       sync.Mutex
	n        map[string]int
	messages map[string][]string
}

// addMessage counts k and keeps msg among k's first three messages.
func (c *counter) addMessage(k, msg string) {
	c.add(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.messages == nil {
		c.messages = map[string][]string{}
	}
	if len(c.messages[k]) < 3 {
		c.messages[k] = append(c.messages[k], msg)
	}
}

// describeMessages lists the messages kept, by key.
func (c *counter) describeMessages() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	for k := range c.messages {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		for _, m := range c.messages[k] {
			out = append(out, fmt.Sprintf("%s: %s", k, m))
		}
	}
	return strings.Join(out, "\n  ")
}

func (c *counter) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k]++
}

func (c *counter) get() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

func diff(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
