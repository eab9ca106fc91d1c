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

package e2e

import (
	"encoding/xml"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// plistDict is the flat key/value view of a launchd plist's top dict.
func plistDict(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(strings.NewReader(string(data)))
	out := map[string]string{}
	var key string
	depth := 0
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		switch el := tok.(type) {
		case xml.StartElement:
			depth++
			if depth != 3 { // plist > dict > entries
				continue
			}
			switch el.Name.Local {
			case "key", "string", "integer":
				var s string
				if err := d.DecodeElement(&s, &el); err != nil {
					t.Fatal(err)
				}
				depth--
				if el.Name.Local == "key" {
					key = s
				} else {
					out[key] = s
				}
			case "true", "false":
				out[key] = el.Name.Local
			case "array":
				var arr struct {
					Items []string `xml:"string"`
				}
				if err := d.DecodeElement(&arr, &el); err != nil {
					t.Fatal(err)
				}
				depth--
				out[key] = strings.Join(arr.Items, " ")
			}
		case xml.EndElement:
			depth--
		}
	}
	return out
}

func TestPackaging_PlistIsAKeptAliveDaemonLoggingToAFile(t *testing.T) {
	p := plistDict(t, "../macos/io.dockerios.agent.plist")
	want := map[string]string{
		"Label":             "io.dockerios.agent",
		"ProgramArguments":  "/usr/local/libexec/dockerios-agent --config /Library/DockerIOS/agent.yaml",
		"RunAtLoad":         "true",
		"KeepAlive":         "true",
		"StandardOutPath":   "/Library/Logs/DockerIOS/agent.log",
		"StandardErrorPath": "/Library/Logs/DockerIOS/agent.log",
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s = %q, want %q", k, p[k], v)
		}
	}
	if _, ok := p["UserName"]; ok {
		t.Error("the agent must run as root to read NVRAM")
	}
}

func TestPackaging_InstallScriptMatchesThePlist(t *testing.T) {
	if out, err := exec.Command("sh", "-n", "../macos/install.sh").CombinedOutput(); err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	script, err := os.ReadFile("../macos/install.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"bin_dest=/usr/local/libexec/dockerios-agent",
		"config_dest=/Library/DockerIOS/agent.yaml",
		"plist_dest=/Library/LaunchDaemons/$label.plist",
		"-o root -g wheel -m 0644 \"$plist\"",
		"launchctl bootstrap system",
		"--check-config",
	} {
		if !strings.Contains(string(script), s) {
			t.Errorf("install.sh lacks %q", s)
		}
	}
}
