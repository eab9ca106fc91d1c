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

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=glr,categories=gitlab
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.machine.poolName`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.machine.className`,priority=1
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// GitLabRunner keeps spec.replicas GitLab runners registered, each on a
// macOS machine of its own that it holds with a MacOSMachineClaim: it
// claims the machine, waits for it to be Ready, runs the provisioning
// steps in the guest over SSH, registers the runner with GitLab, and
// deregisters it and releases the machine when the replica goes (scale
// down, delete) or the machine is lost (then it claims another). Its name
// is a label value on its claims, so at most 63 characters.
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters: it labels the runner's claims"
type GitLabRunner struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what runners are wanted.
	Spec GitLabRunnerSpec `json:"spec"`
	// status is what the controller observed of them.
	// +optional
	Status GitLabRunnerStatus `json:"status,omitempty"`
}

// GitLabRunnerSpec is what runners are wanted.
type GitLabRunnerSpec struct {
	// replicas is how many runners to keep registered, each on a machine
	// of its own. Removing a replica drains, deregisters and releases the
	// highest-numbered ones first.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// machine says which Macs to claim. A change reaches the replicas
	// made afterwards (added, or replacing a lost machine): a claim, once
	// made, is never changed.
	Machine MachineSpec `json:"machine"`

	// ssh says how to log in to a machine's guest.
	SSH SSHSpec `json:"ssh"`

	// provision are the commands run, in order, in the guest over SSH
	// before the runner is registered, on every machine a replica gets.
	// Each must be idempotent: a controller restart, or a step failing
	// and being retried, runs them again from the first on that machine.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Provision []ProvisionStep `json:"provision,omitempty"`

	// gitlab is the GitLab instance the runners register with.
	GitLab GitLabSpec `json:"gitlab"`

	// drainTimeout is how long a runner that is being removed (scale
	// down, delete) is paused in GitLab so the jobs it runs can finish,
	// before it is deleted and its machine released. A lost machine is
	// not drained: its jobs are gone with it. Zero removes at once.
	// +kubebuilder:default="10m"
	// +optional
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`

	// machineUnreadyTimeout is how long a bound machine may stay not
	// Ready (a hung or degraded guest, which DockerIOS leaves to the
	// claim's holder) before its runner is deregistered and the machine
	// released and replaced. Zero never replaces an unready machine.
	// +kubebuilder:default="5m"
	// +optional
	MachineUnreadyTimeout *metav1.Duration `json:"machineUnreadyTimeout,omitempty"`
}

// MachineSpec says which Macs to claim: exactly one of poolName and
// className.
// +kubebuilder:validation:XValidation:rule="has(self.poolName) != has(self.className)",message="exactly one of poolName and className must be set"
type MachineSpec struct {
	// poolName claims warm machines of this MacOSMachinePool, in the
	// GitLabRunner's namespace (the controller needs verb claim on it).
	// +kubebuilder:validation:MinLength=1
	// +optional
	PoolName string `json:"poolName,omitempty"`
	// className claims a machine made for each replica from this
	// MacOSMachineClass (the controller needs verb use on the class's
	// identity pool). Slower than a warm pool: the machine is made when
	// claimed.
	// +kubebuilder:validation:MinLength=1
	// +optional
	ClassName string `json:"className,omitempty"`
	// selector narrows the machines that may answer by their labels.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// SSHSpec says how to log in to a machine's guest. The account and its
// credentials are the golden image's: DockerIOS neither knows nor
// provides them.
type SSHSpec struct {
	// credentialsSecretRef names a Secret in the GitLabRunner's namespace
	// holding the image's login: key username (unless user is set), and
	// password or ssh-privatekey (PEM or OpenSSH format); optionally
	// known_hosts (OpenSSH known_hosts lines; a golden image's clones
	// share its host keys, so one "* ssh-ed25519 AAAA…" line fits every
	// machine on port 22, "[*]:2222 …" on another port) to check the
	// machine's host key against.
	CredentialsSecretRef corev1.LocalObjectReference `json:"credentialsSecretRef"`
	// user to log in as; overrides the Secret's username.
	// +optional
	User string `json:"user,omitempty"`
	// port the guest's sshd listens on.
	// +kubebuilder:default=22
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
	// insecureIgnoreHostKey accepts any host key when the Secret has no
	// known_hosts. For a local stack whose played guests make a host key
	// at start; never for a real fleet.
	// +optional
	InsecureIgnoreHostKey bool `json:"insecureIgnoreHostKey,omitempty"`
}

// ProvisionStep is one command run in the guest.
type ProvisionStep struct {
	// name of the step, as status and events quote it.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// command is run by the login shell of the image's user, with no
	// input. A non-zero exit status fails the step: the controller
	// reports it and runs the steps again, from the first, after a
	// backoff.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16384
	Command string `json:"command"`
	// timeout bounds the step.
	// +kubebuilder:default="10m"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// RunnerType is the scope of a GitLab runner.
// +kubebuilder:validation:Enum=instance_type;group_type;project_type
type RunnerType string

// Runner types, as GitLab's API names them.
const (
	InstanceType RunnerType = "instance_type"
	GroupType    RunnerType = "group_type"
	ProjectType  RunnerType = "project_type"
)

// GitLabSpec is the GitLab instance the runners register with, through
// its REST API (POST /api/v4/user/runners, then gitlab-runner register
// with the runner's authentication token in the guest).
// +kubebuilder:validation:XValidation:rule="self.runnerType != 'group_type' || has(self.groupID)",message="a group_type runner needs groupID"
// +kubebuilder:validation:XValidation:rule="self.runnerType != 'project_type' || has(self.projectID)",message="a project_type runner needs projectID"
// +kubebuilder:validation:XValidation:rule="(has(self.tags) && size(self.tags) > 0) || (has(self.runUntagged) && self.runUntagged)",message="a runner without tags must have runUntagged (GitLab refuses it otherwise)"
type GitLabSpec struct {
	// url of GitLab, as the controller and the runners reach it. It cannot
	// change: the runners recorded in status are that GitLab's, and are
	// paused and deleted by their IDs there; another GitLab's runners of
	// the same IDs are not these. To move to another GitLab, create
	// another GitLabRunner.
	// +kubebuilder:validation:Pattern=`^https?://`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="url cannot change: the runners recorded in status are that GitLab's, deleted by their IDs there; create another GitLabRunner for another GitLab"
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`
	// tokenSecretRef selects the key of a Secret, in the GitLabRunner's
	// namespace, holding a GitLab access token (personal, group or
	// project) with the create_runner and manage_runner scopes; the
	// controller creates, pauses and deletes the runners with it. It
	// never reaches a guest: each guest gets only its own runner's
	// authentication token.
	TokenSecretRef corev1.SecretKeySelector `json:"tokenSecretRef"`
	// runnerType is the runners' scope.
	// +kubebuilder:default=instance_type
	// +optional
	RunnerType RunnerType `json:"runnerType,omitempty"`
	// groupID is the group of group_type runners.
	// +optional
	GroupID *int64 `json:"groupID,omitempty"`
	// projectID is the project of project_type runners.
	// +optional
	ProjectID *int64 `json:"projectID,omitempty"`
	// tags of the runners: jobs with these tags run on them.
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Tags []string `json:"tags,omitempty"`
	// runUntagged lets the runners take jobs without tags too.
	// +optional
	RunUntagged bool `json:"runUntagged,omitempty"`
	// executor of gitlab-runner in the guest.
	// +kubebuilder:default=shell
	// +kubebuilder:validation:MinLength=1
	// +optional
	Executor string `json:"executor,omitempty"`
	// maximumTimeout, in seconds, caps the jobs the runners take.
	// +kubebuilder:validation:Minimum=600
	// +optional
	MaximumTimeout *int64 `json:"maximumTimeout,omitempty"`
}

// RunnerPhase is where one replica is.
// +kubebuilder:validation:Enum=Pending;Provisioning;Registering;Ready;NotReady;Draining;Deregistering;Replacing
type RunnerPhase string

// Phases of a replica.
const (
	// RunnerPending: its claim waits for a machine.
	RunnerPending RunnerPhase = "Pending"
	// RunnerProvisioning: the steps run in the guest.
	RunnerProvisioning RunnerPhase = "Provisioning"
	// RunnerRegistering: the runner is made in GitLab and registered in
	// the guest.
	RunnerRegistering RunnerPhase = "Registering"
	// RunnerReady: registered, on a Ready machine.
	RunnerReady RunnerPhase = "Ready"
	// RunnerNotReady: registered, but the machine is not Ready.
	RunnerNotReady RunnerPhase = "NotReady"
	// RunnerDraining: paused in GitLab until its jobs finish or the
	// drain times out, then deregistered.
	RunnerDraining RunnerPhase = "Draining"
	// RunnerDeregistering: deleted in GitLab; its claim is released.
	RunnerDeregistering RunnerPhase = "Deregistering"
	// RunnerReplacing: its machine was lost (or stayed unready too long);
	// the runner is deregistered and another machine claimed.
	RunnerReplacing RunnerPhase = "Replacing"
)

// Condition types of a GitLabRunner, each True when it holds for every
// replica wanted.
const (
	// ConditionMachinesReady: every replica holds a Bound claim whose
	// machine is Ready.
	ConditionMachinesReady = "MachinesReady"
	// ConditionProvisioned: the steps ran on every replica's machine.
	ConditionProvisioned = "Provisioned"
	// ConditionRegistered: every replica's runner is registered with
	// GitLab.
	ConditionRegistered = "Registered"
	// ConditionReady: all of the above.
	ConditionReady = "Ready"
)

// Condition reasons.
const (
	ReasonAllReady         = "AllReplicasReady"
	ReasonClaimPending     = "ClaimPending"
	ReasonClaimRefused     = "ClaimRefused"
	ReasonMachineNotReady  = "MachineNotReady"
	ReasonMachineLost      = "MachineLost"
	ReasonWaiting          = "WaitingForMachines"
	ReasonWaitingForSteps  = "WaitingForProvisioning"
	ReasonProvisioning     = "Provisioning"
	ReasonStepFailed       = "StepFailed"
	ReasonSSHFailed        = "SSHFailed"
	ReasonCredentials      = "CredentialsInvalid"
	ReasonProvisioned      = "Provisioned"
	ReasonRegistering      = "Registering"
	ReasonRegisterFailed   = "RegisterFailed"
	ReasonGitLabError      = "GitLabError"
	ReasonRegistered       = "Registered"
	ReasonReplicasNotReady = "ReplicasNotReady"
	ReasonScaledToZero     = "ScaledToZero"
)

// GitLabRunnerStatus is what the controller observed. Every field can be
// derived again from the claims, the machines and GitLab: it is a record
// for people and a cache for the controller, never its only memory.
type GitLabRunnerStatus struct {
	// observedGeneration is the generation the controller last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// replicas is the number of replicas holding a claim.
	// +optional
	Replicas int32 `json:"replicas"`
	// readyReplicas is the number of replicas registered on a Ready
	// machine.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// selector selects the replicas' claims (the scale subresource's).
	// +optional
	Selector string `json:"selector,omitempty"`
	// runners, one per replica, by name.
	// +listType=map
	// +listMapKey=name
	// +optional
	Runners []RunnerStatus `json:"runners,omitempty"`
	// conditions: MachinesReady, Provisioned, Registered, Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RunnerStatus is one replica: its claim, machine and GitLab runner.
type RunnerStatus struct {
	// name of the replica, and of its MacOSMachineClaim:
	// <gitlabrunner>-<ordinal>.
	Name string `json:"name"`
	// claimUID is the uid of the claim; a replaced claim has another.
	// +optional
	ClaimUID types.UID `json:"claimUID,omitempty"`
	// phase of the replica.
	// +optional
	Phase RunnerPhase `json:"phase,omitempty"`
	// machineName is the MacOSMachine bound to the claim.
	// +optional
	MachineName string `json:"machineName,omitempty"`
	// address the guest was reached at over SSH (the machine's
	// PodNetwork address).
	// +optional
	Address string `json:"address,omitempty"`
	// provisionedTime is when the steps last completed on this machine.
	// +optional
	ProvisionedTime *metav1.Time `json:"provisionedTime,omitempty"`
	// runnerID is the runner's id in GitLab.
	// +optional
	RunnerID int64 `json:"runnerID,omitempty"`
	// registeredTime is when the runner was registered in the guest.
	// +optional
	RegisteredTime *metav1.Time `json:"registeredTime,omitempty"`
	// drainStartTime is when the runner was paused to drain.
	// +optional
	DrainStartTime *metav1.Time `json:"drainStartTime,omitempty"`
	// message says what the replica waits for, or what failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// +kubebuilder:object:root=true

// GitLabRunnerList is a list of GitLabRunners.
type GitLabRunnerList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GitLabRunner `json:"items"`
}

func init() {
	SchemeBuilder.Register(&GitLabRunner{}, &GitLabRunnerList{})
}
