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

package version

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// The apiserver hands DockerIOS's version to the Kubernetes libraries as
// theirs: the conversion must compile (same fields, same order, same
// types) and say the same in JSON (same tags).
func TestInfo_ConvertsToAPIMachinerysInfo(t *testing.T) {
	ours := Get()
	theirs := apimachineryversion.Info(ours)

	a, err := json.Marshal(ours)
	require.NoError(t, err)
	b, err := json.Marshal(theirs)
	require.NoError(t, err)
	assert.JSONEq(t, string(b), string(a))
	assert.Equal(t, theirs.String(), ours.String())
}

// An unstamped build ("go build" alone) says so in a version that is
// still semantic, so image tags and comparisons made from it work.
func TestGet_UnstampedBuildIsADevVersion(t *testing.T) {
	info := Get()
	assert.Equal(t, "v0.0.0-dev", info.GitVersion)
	assert.Equal(t, "v0.0.0-dev", String())
	assert.Equal(t, "0", info.Major)
	assert.Equal(t, "0", info.Minor)
	assert.NotEmpty(t, info.GoVersion)
	assert.NotEmpty(t, info.Platform)
	assert.Empty(t, info.EmulationMajor, "DockerIOS has no emulation version of its own")
}

func TestMajorMinor_ComeFromTheSemanticVersion(t *testing.T) {
	for _, tc := range []struct {
		version, major, minor string
	}{
		{"v0.2.0", "0", "2"},
		{"v1.12.3-14-gabcdef0-dirty", "1", "12"},
		{"v0.0.0-gabcdef0", "0", "0"},
		{"v0.0.0-dev", "0", "0"},
		// Stamped by hand with something else: no numbers rather than
		// wrong ones.
		{"e2e", "", ""},
		{"1.2.3", "", ""},
		{"v1.2", "", ""},
		{"vx.2.3", "", ""},
		{"", "", ""},
	} {
		t.Run(tc.version, func(t *testing.T) {
			major, minor := majorMinor(tc.version)
			assert.Equal(t, tc.major, major)
			assert.Equal(t, tc.minor, minor)
		})
	}
}
