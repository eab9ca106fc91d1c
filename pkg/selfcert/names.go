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

package selfcert

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ServiceDNSNames are the names a serving certificate for the Service
// namespace/name must carry: <name>.<namespace>.svc is the TLS server name
// kube-apiserver checks when it calls an APIService's or a webhook's
// Service; the .cluster.local form is what clients in pods resolve with
// the default cluster domain.
func ServiceDNSNames(service types.NamespacedName) []string {
	svc := service.Name + "." + service.Namespace + ".svc"
	return []string{svc, svc + ".cluster.local"}
}

// ParseNamespacedName reads a flag's NAMESPACE/NAME, checking both parts
// are names Kubernetes accepts, so that a typo fails at start with the
// flag's name rather than as a 404 later.
func ParseNamespacedName(s string) (types.NamespacedName, error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("%q is not NAMESPACE/NAME", s)
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("name %q: %s", name, strings.Join(errs, "; "))
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, nil
}

// Validity is Config's CAValidity, ServingValidity and Overlap, as flags.
type Validity struct {
	CA, Serving, Overlap time.Duration
}

// AddHiddenFlags adds PREFIX{ca-validity,validity,overlap} to fs, hidden:
// the defaults are what a cluster wants; tests shorten them to watch a
// rotation happen.
func (v *Validity) AddHiddenFlags(fs *pflag.FlagSet, prefix string) {
	fs.DurationVar(&v.CA, prefix+"ca-validity", v.CA, "Validity of a new CA (default "+DefaultCAValidity.String()+").")
	fs.DurationVar(&v.Serving, prefix+"validity", v.Serving, "Validity of a new serving certificate (default "+DefaultServingValidity.String()+").")
	fs.DurationVar(&v.Overlap, prefix+"overlap", v.Overlap, "How long a new CA is trusted beside the old one before serving certificates move to it (default "+DefaultOverlap.String()+").")
	for _, name := range []string{"ca-validity", "validity", "overlap"} {
		_ = fs.MarkHidden(prefix + name)
	}
}
