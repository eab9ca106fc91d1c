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

package controller

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockerios/dockerios/examples/gitlab-runner/api/v1alpha1"
)

// aspect is one thing a replica needs, and why it does not have it.
type aspect struct {
	ok              bool
	reason, message string
}

// replicaView is what a pass learned of one wanted replica.
type replicaView struct {
	name                         string
	machine, provision, register aspect
}

func (v replicaView) ready() bool { return v.machine.ok && v.provision.ok && v.register.ok }

// maxMessage bounds a condition's message.
const maxMessage = 1024

// status builds the GitLabRunner's status from the replicas' entries and
// what the pass learned of the wanted ones.
func (p *pass) status(entries []v1alpha1.RunnerStatus, desired int) v1alpha1.GitLabRunnerStatus {
	sort.SliceStable(entries, func(i, j int) bool {
		a, _ := ordinalOf(p.gr.Name, entries[i].Name)
		b, _ := ordinalOf(p.gr.Name, entries[j].Name)
		return a < b
	})
	st := v1alpha1.GitLabRunnerStatus{
		ObservedGeneration: p.gr.Generation,
		Selector:           RunnerLabel + "=" + p.gr.Name,
		Runners:            entries,
		Conditions:         append([]metav1.Condition(nil), p.gr.Status.Conditions...),
	}
	for _, e := range entries {
		if e.ClaimUID != "" {
			st.Replicas++
		}
	}
	for _, v := range p.views {
		if v.ready() {
			st.ReadyReplicas++
		}
	}
	for _, c := range summarize(p.views, desired) {
		c.ObservedGeneration = p.gr.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
	return st
}

// summarize derives the conditions from the wanted replicas: each is True
// when it holds for all of them, and otherwise says which replica it
// fails for first and why. A pure function of what was observed.
func summarize(views []replicaView, desired int) []metav1.Condition {
	if desired == 0 {
		var out []metav1.Condition
		for _, t := range []string{v1alpha1.ConditionMachinesReady, v1alpha1.ConditionProvisioned, v1alpha1.ConditionRegistered, v1alpha1.ConditionReady} {
			out = append(out, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonScaledToZero, Message: "no replicas are wanted"})
		}
		return out
	}
	one := func(typ, okReason, okMessage string, get func(replicaView) aspect) metav1.Condition {
		var bad []replicaView
		for _, v := range views {
			if !get(v).ok {
				bad = append(bad, v)
			}
		}
		if len(bad) == 0 {
			return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: okReason, Message: okMessage}
		}
		first := get(bad[0])
		msg := fmt.Sprintf("%d of %d replicas not yet; %s: %s", len(bad), desired, bad[0].name, first.message)
		return metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: first.reason, Message: truncate(msg)}
	}
	machines := one(v1alpha1.ConditionMachinesReady, v1alpha1.ConditionMachinesReady, "every replica holds a Ready machine",
		func(v replicaView) aspect { return v.machine })
	provisioned := one(v1alpha1.ConditionProvisioned, v1alpha1.ReasonProvisioned, "the steps ran on every replica's machine",
		func(v replicaView) aspect {
			if !v.machine.ok && !v.provision.ok {
				return aspect{reason: v1alpha1.ReasonWaiting, message: "waiting for its machine"}
			}
			return v.provision
		})
	registeredC := one(v1alpha1.ConditionRegistered, v1alpha1.ReasonRegistered, "every replica's runner is registered with GitLab",
		func(v replicaView) aspect {
			switch {
			case v.register.ok:
				return v.register
			case !v.machine.ok && !v.provision.ok:
				return aspect{reason: v1alpha1.ReasonWaiting, message: "waiting for its machine"}
			case !v.provision.ok:
				return aspect{reason: v1alpha1.ReasonWaitingForSteps, message: "waiting for provisioning"}
			}
			return v.register
		})

	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAllReady,
		Message: fmt.Sprintf("%d runners registered on Ready machines", desired)}
	n := 0
	var first *replicaView
	for i := range views {
		if views[i].ready() {
			n++
		} else if first == nil {
			first = &views[i]
		}
	}
	if first != nil || n < desired {
		ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonReplicasNotReady
		ready.Message = fmt.Sprintf("%d of %d replicas ready", n, desired)
		if first != nil {
			for _, a := range []aspect{first.machine, first.provision, first.register} {
				if !a.ok {
					ready.Message += fmt.Sprintf("; %s: %s", first.name, a.message)
					break
				}
			}
		}
		ready.Message = truncate(ready.Message)
	}
	return []metav1.Condition{machines, provisioned, registeredC, ready}
}

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}
