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

package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// newEventRecorder returns the recorder of the server's Events. Behind
// kube-apiserver (coreAPI set), Events are written there, where `kubectl
// describe` finds them; they are always logged too, so the standalone
// server, which has no core API, still tells what happened.
func newEventRecorder(coreAPI *rest.Config) (record.EventRecorder, func(), error) {
	broadcaster := record.NewBroadcaster()
	broadcaster.StartStructuredLogging(2)
	if coreAPI != nil {
		client, err := kubernetes.NewForConfig(coreAPI)
		if err != nil {
			return nil, nil, err
		}
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	}
	recorder := broadcaster.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "dockerios-apiserver"})
	return recorder, broadcaster.Shutdown, nil
}
