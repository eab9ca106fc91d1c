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

// Package customverbs checks DockerIOS's own RBAC verbs where the write that
// needs them happens, as Kubernetes checks `escalate` and `bind` on roles:
// through the server's authorizer (a SubjectAccessReview to kube-apiserver
// when delegated), with a Forbidden answer that says which verb on which
// object was missing.
//
//   - claim on macosmachinepools/<name>: create a claim against that pool;
//   - bind on macosmachines/<name>: bind a claim to that machine;
//   - use on macosidentitypools/<name>: create a machine (directly, or
//     through a pool or a class claim) that draws identities from that pool.
package customverbs

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/dockerios/dockerios/pkg/apis/dockerio"
	"github.com/dockerios/dockerios/pkg/apis/dockerio/v1alpha1"
)

// The custom verbs.
const (
	Claim = "claim"
	Bind  = "bind"
	Use   = "use"
)

// ClassPools says which MacOSIdentityPool a class draws identities from,
// answering for an object (of kind, named name) that names the class; a
// class that does not exist is that object's 422.
type ClassPools interface {
	IdentityPoolOf(ctx context.Context, kind schema.GroupKind, name, className string) (string, error)
}

// Target is the object a verb is checked on.
type Target struct {
	Resource    string // e.g. macosmachinepools
	Subresource string // e.g. finalizers; usually empty
	Namespace   string // empty for cluster-scoped resources
	Name        string
}

func (t Target) String() string {
	s := t.Resource + "/" + t.Name
	if t.Subresource != "" {
		s = t.Resource + "/" + t.Subresource + " of " + t.Name
	}
	if t.Namespace == "" {
		return s
	}
	return s + " in namespace " + t.Namespace
}

// Require returns nil if the user of ctx may verb target, and otherwise a
// Forbidden error about the object being written (forResource/forName)
// that names the verb and target, and why it is needed.
func Require(ctx context.Context, a authorizer.Authorizer, verb string, target Target, forResource schema.GroupResource, forName, why string) error {
	if a == nil {
		return apierrors.NewInternalError(errors.New("no authorizer to check custom verbs with"))
	}
	requester, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		// As the server's authentication would call a request without
		// credentials; the authorizer decides what it may do.
		requester = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
	}
	decision, reason, err := a.Authorize(ctx, authorizer.AttributesRecord{
		User:            requester,
		Verb:            verb,
		Namespace:       target.Namespace,
		APIGroup:        dockerio.GroupName,
		APIVersion:      v1alpha1.SchemeGroupVersion.Version,
		Resource:        target.Resource,
		Subresource:     target.Subresource,
		Name:            target.Name,
		ResourceRequest: true,
	})
	if decision == authorizer.DecisionAllow {
		return nil
	}
	msg := fmt.Sprintf("user %q cannot %s %s (%s)", requester.GetName(), verb, target, why)
	if reason != "" {
		msg += ": " + reason
	}
	if err != nil {
		msg += ": " + err.Error()
	}
	return apierrors.NewForbidden(forResource, forName, errors.New(msg))
}
