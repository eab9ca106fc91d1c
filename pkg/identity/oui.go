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

package identity

import (
	_ "embed"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// appleOUIsFile is the list of Apple's OUIs from the IEEE MA-L registry, one
// AA:BB:CC a line after a comment header naming its source. It is data, not
// code: hack/update-apple-ouis.sh regenerates it, and it is embedded so the
// apiserver never needs the network or a system file to validate a MAC.
//
//go:embed apple_ouis.txt
var appleOUIsFile string

var (
	ouiPattern = regexp.MustCompile(`^[0-9A-F]{2}:[0-9A-F]{2}:[0-9A-F]{2}$`)

	// appleOUIs is the embedded list, sorted; appleOUISet indexes it. Both
	// are read-only after package initialisation.
	appleOUIs, appleOUISource = mustParseOUIs(appleOUIsFile)
	appleOUISet               = func() map[string]bool {
		m := make(map[string]bool, len(appleOUIs))
		for _, o := range appleOUIs {
			m[o] = true
		}
		return m
	}()
)

// mustParseOUIs reads the embedded OUI list and the "# Source:" line of its
// header. A malformed list is a build mistake, not an input error, so it
// panics at start-up rather than let every MAC address fail later.
func mustParseOUIs(file string) (ouis []string, source string) {
	for i, line := range strings.Split(file, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "#"):
			if s, ok := strings.CutPrefix(line, "# Source:"); ok {
				source = strings.TrimSpace(s)
			}
		case !ouiPattern.MatchString(line):
			panic(fmt.Sprintf("identity: apple_ouis.txt line %d is %q, not an OUI such as 00:0A:27", i+1, line))
		default:
			ouis = append(ouis, line)
		}
	}
	if len(ouis) == 0 {
		panic("identity: apple_ouis.txt lists no OUIs")
	}
	slices.Sort(ouis)
	return slices.Compact(ouis), source
}

// AppleOUIs returns Apple's OUIs, sorted, as upper-case AA:BB:CC.
func AppleOUIs() []string { return slices.Clone(appleOUIs) }

// AppleOUISource names where the list of Apple's OUIs comes from (the IEEE
// MA-L registry and the ieee-data package version it was taken from).
func AppleOUISource() string { return appleOUISource }

// IsAppleOUI reports whether mac, a canonical MAC address (or just its first
// three octets), begins with an OUI the IEEE assigned to Apple.
func IsAppleOUI(mac string) bool {
	return len(mac) >= 8 && appleOUISet[mac[:8]]
}
