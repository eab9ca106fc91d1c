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

package harness

import (
	"testing"

	"github.com/dockerios/dockerios/test/framework"
)

// AgentBinEnv points tests at a prebuilt dockerios-agent; hack/test.sh sets
// it so the suite builds the agent once.
const AgentBinEnv = framework.AgentBinEnv

// AgentBinary returns the real guest agent to run in every simulated guest:
// $DOCKERIOS_AGENT_BIN when set, otherwise one built from this checkout
// (once per test process). The harness runs the very binary that ships in
// the golden images, so what the controller talks to is the real thing.
func AgentBinary(t testing.TB) string {
	t.Helper()
	return framework.AgentBinary(t)
}
