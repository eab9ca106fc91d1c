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

package binding

import (
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// TestMachineView_PicksWhatAFullScanWould drives the view with random watch
// events — machines becoming Ready (again, with a later readySince), not
// Ready, bound, deleted, relabelled — and random picks with and
// without selectors, some left in flight, and checks every answer against
// a scan of every machine the events left bindable: the one Ready longest,
// then by name, that no pick in flight holds and the selector admits. The
// ordered index must never disagree with it, however machines move in it.
func TestMachineView_PicksWhatAFullScanWould(t *testing.T) {
	for seed := range int64(20) {
		t.Run(strconv.FormatInt(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			var b Binder
			v := &b.view
			v.reset(nil)
			rev := int64(1)
			// state is each machine's last event, as the view was told it.
			state := map[string]*dockerio.MacOSMachine{}
			inFlight := map[string]*bindable{}
			picked := 0 // picks that found a machine: the test must exercise them
			pools := []string{"warm", "cold"}
			selectors := []labels.Selector{nil, labels.Everything(), labels.SelectorFromSet(labels.Set{"xcode": "16"}), labels.SelectorFromSet(labels.Set{"xcode": "15"})}

			expect := func(pool string, sel labels.Selector) (want *dockerio.MacOSMachine, order []string) {
				var all []*dockerio.MacOSMachine
				for _, m := range state {
					if m.Spec.PoolName == pool && isBindable(m) {
						all = append(all, m)
					}
				}
				slices.SortFunc(all, func(a, b *dockerio.MacOSMachine) int {
					if c := readySince(a).Compare(readySince(b)); c != 0 {
						return c
					}
					if a.Name < b.Name {
						return -1
					}
					return 1
				})
				for _, m := range all {
					order = append(order, m.Name)
					if want == nil && inFlight[m.Name] == nil && (sel == nil || sel.Matches(labels.Set(m.Labels))) {
						want = m
					}
				}
				return want, order
			}

			for step := range 3000 {
				name := fmt.Sprintf("mac-%02d", rng.Intn(40))
				switch op := rng.Intn(10); {
				case op < 5: // a watch event for name
					rev++
					m := &dockerio.MacOSMachine{
						ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, ResourceVersion: strconv.FormatInt(rev, 10),
							Labels: map[string]string{"xcode": []string{"15", "16"}[rng.Intn(2)]}},
					}
					m.Spec.PoolName = pools[rng.Intn(2)]
					if old := state[name]; old != nil {
						m.Spec.PoolName = old.Spec.PoolName // spec is immutable
					}
					// Few distinct times, so that ties fall to the name.
					since := metav1.NewTime(time.Unix(1e9+int64(rng.Intn(8)), 0))
					if rng.Intn(4) > 0 {
						m.Status.Phase = dockerio.MachineReady
						m.Status.Conditions = []metav1.Condition{{Type: v1alpha1.MachineConditionReady, Status: metav1.ConditionTrue, LastTransitionTime: since}}
					}
					if rng.Intn(6) == 0 {
						m.Status.ClaimRef = &dockerio.ClaimReference{Name: "c"}
					}
					deleted := rng.Intn(8) == 0
					v.mu.Lock()
					v.apply(m, deleted)
					v.mu.Unlock()
					if deleted {
						delete(state, name)
					} else {
						state[name] = m
					}
				case op < 8: // a create picks
					pool, sel := pools[rng.Intn(2)], selectors[rng.Intn(len(selectors))]
					want, _ := expect(pool, sel)
					got, ok := v.pick("ci", pool, sel)
					require.True(t, ok)
					if want == nil {
						require.Nil(t, got, "step %d: pool %s, selector %v: picked %v, a scan finds nothing", step, pool, sel, got)
						continue
					}
					require.NotNil(t, got, "step %d: pool %s, selector %v: picked nothing, a scan finds %s", step, pool, sel, want.Name)
					require.Equal(t, want.Name, got.machine.Name, "step %d: pool %s, selector %v", step, pool, sel)
					require.Equal(t, want.ResourceVersion, got.machine.ResourceVersion, "step %d: %s as the watch last showed it", step, want.Name)
					picked++
					if rng.Intn(2) == 0 {
						inFlight[got.machine.Name] = got // still binding
					} else {
						v.done(got, 0)
					}
				default: // a pick in flight ends, without news of the machine
					for n, c := range inFlight {
						v.done(c, 0)
						delete(inFlight, n)
						break
					}
				}
				if step%50 == 0 {
					for _, pool := range pools {
						_, order := expect(pool, nil)
						names, known := b.BindableMachines("ci", pool)
						require.True(t, known)
						require.Equal(t, order, names, "step %d: pool %s in the order claims take them", step, pool)
					}
				}
			}
			require.Greater(t, picked, 300, "picks that found a machine")
		})
	}
}
