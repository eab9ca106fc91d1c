// Copyright The DockerIOS Authors.
// SPDX-License-Identifier: GPL-3.0-or-later

package builder

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/dockerios/dockerios/pkg/identity"
	"howett.net/plist"
)

// A synthetic OpenCore 1.0-shaped config (not an upstream file): the key
// paths of OSX-KVM's OpenCore/config.plist with dummy identity values.
const openCoreConfig = "../../cmd/bootdisk/testdata/opencore-config.plist"

func readConfig(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(openCoreConfig)
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if _, err := plist.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	return root
}

func encode(t *testing.T, root map[string]any) []byte {
	t.Helper()
	b, err := plist.MarshalIndent(root, plist.XMLFormat, "\t")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var root map[string]any
	format, err := plist.Unmarshal(b, &root)
	if err != nil || format != plist.XMLFormat {
		t.Fatalf("not an XML plist (format %d): %v\n%s", format, err, b)
	}
	return root
}

// at returns the dictionary at path, failing the test if there is none.
func at(t *testing.T, root map[string]any, path ...string) map[string]any {
	t.Helper()
	cur := root
	for i, k := range path {
		next, ok := cur[k].(map[string]any)
		if !ok {
			t.Fatalf("%s is not a dictionary", strings.Join(path[:i+1], " → "))
		}
		cur = next
	}
	return cur
}

func TestDeriveTemplate(t *testing.T) {
	in := readConfig(t)
	out, err := DeriveTemplate(encode(t, in))
	if err != nil {
		t.Fatal(err)
	}
	got := decode(t, out)

	// The placeholders, as <string>s, in the keys OpenCore reads.
	for _, tc := range []struct {
		path []string
		want string
	}{
		{[]string{"PlatformInfo", "Generic", "SystemProductName"}, "{{DEVICE_MODEL}}"},
		{[]string{"PlatformInfo", "Generic", "SystemSerialNumber"}, "{{SERIAL}}"},
		{[]string{"PlatformInfo", "Generic", "MLB"}, "{{BOARD_SERIAL}}"},
		{[]string{"PlatformInfo", "Generic", "SystemUUID"}, "{{UUID}}"},
		{[]string{"PlatformInfo", "Generic", "ROM"}, "{{ROM}}"},
		{[]string{"UEFI", "Output", "Resolution"}, "{{WIDTH}}x{{HEIGHT}}@32"},
	} {
		key := tc.path[len(tc.path)-1]
		if v, ok := at(t, got, tc.path[:len(tc.path)-1]...)[key].(string); !ok || v != tc.want {
			t.Errorf("%s = %#v, want <string>%s</string>", strings.Join(tc.path, " → "), at(t, got, tc.path[:len(tc.path)-1]...)[key], tc.want)
		}
	}
	if !bytes.Contains(out, []byte("<key>ROM</key>\n\t\t\t\t<string>{{ROM}}</string>")) {
		t.Errorf("ROM is not <string>{{ROM}}</string>:\n%s", out)
	}

	// The OpenCore 1.0.5 keys the config lacks, with OpenCore's defaults.
	for _, tc := range []struct {
		path []string
		want any
	}{
		{[]string{"Booter", "Quirks", "ClearTaskSwitchBit"}, false},
		{[]string{"UEFI", "Unload"}, []any{}},
		{[]string{"PlatformInfo", "Generic", "MaxBIOSVersion"}, false},
		// Unattended boot: no picker.
		{[]string{"Misc", "Boot", "ShowPicker"}, false},
	} {
		parent, key := at(t, got, tc.path[:len(tc.path)-1]...), tc.path[len(tc.path)-1]
		v, ok := parent[key]
		if !ok || !reflect.DeepEqual(v, tc.want) {
			t.Errorf("%s = %#v (present %v), want %#v", strings.Join(tc.path, " → "), v, ok, tc.want)
		}
	}

	// Everything else is unchanged: arrays (in order), data, integers
	// (signed ones too), nested dictionaries.
	for _, p := range [][]string{
		{"PlatformInfo", "Generic", "SystemProductName"}, {"PlatformInfo", "Generic", "SystemSerialNumber"},
		{"PlatformInfo", "Generic", "MLB"}, {"PlatformInfo", "Generic", "SystemUUID"}, {"PlatformInfo", "Generic", "ROM"},
		{"UEFI", "Output", "Resolution"},
		{"Booter", "Quirks", "ClearTaskSwitchBit"}, {"UEFI", "Unload"}, {"PlatformInfo", "Generic", "MaxBIOSVersion"},
		{"Misc", "Boot", "ShowPicker"},
	} {
		delete(at(t, in, p[:len(p)-1]...), p[len(p)-1])
		delete(at(t, got, p[:len(p)-1]...), p[len(p)-1])
	}
	if !reflect.DeepEqual(in, got) {
		t.Errorf("keys other than the placeholders and the added defaults changed:\nin:  %#v\nout: %#v", in, got)
	}
	// Spot checks that the comparison saw the values that matter.
	if d := at(t, got, "UEFI")["Drivers"].([]any); len(d) != 3 || d[0].(map[string]any)["LoadEarly"] != true || d[2].(map[string]any)["Path"] != "ResetNvramEntry.efi" {
		t.Errorf("UEFI → Drivers = %#v", d)
	}
	if v := at(t, got, "NVRAM", "Add", "7C436110-AB2A-4BBB-A880-FE41995C9F82")["csr-active-config"]; !reflect.DeepEqual(v, []byte{0x26, 0x0f}) {
		t.Errorf("csr-active-config = %#v, want <data>Jg8=</data>", v)
	}
	if v := at(t, got, "Kernel", "Quirks")["SetApfsTrimTimeout"]; v != int64(-1) {
		t.Errorf("Kernel → Quirks → SetApfsTrimTimeout = %#v, want -1", v)
	}

	// Deterministic: the same config gives the same bytes.
	again, err := DeriveTemplate(encode(t, readConfig(t)))
	if err != nil || !bytes.Equal(again, out) {
		t.Errorf("a second derivation differs (%v)", err)
	}
	// The file as written (comments, key order, <array/>) gives them too.
	raw, err := os.ReadFile(openCoreConfig)
	if err != nil {
		t.Fatal(err)
	}
	if fromFile, err := DeriveTemplate(raw); err != nil || !bytes.Equal(fromFile, out) {
		t.Errorf("deriving from the file differs from deriving from its re-encoding (%v)", err)
	}
}

// The derived template is one Render takes: every placeholder outside
// comments, each value lands in its key with its type.
func TestDeriveTemplateRenders(t *testing.T) {
	raw, err := os.ReadFile(openCoreConfig)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := DeriveTemplate(raw)
	if err != nil {
		t.Fatal(err)
	}
	in := RenderInput{
		Identity: identity.Values{
			Model: "iMacPro1,1", SerialNumber: "C02CK029HX87", BoardSerialNumber: "C02015700QXJG36CB",
			SystemUUID: "4B408A88-4062-4532-9AA1-3D8A3549327F", MACAddress: "34:31:8F:D3:88:E4", ROM: "34318FD388E4",
		},
		Display: Display{Width: 2560, Height: 1440},
		Token:   strings.Repeat("ab", 32),
	}
	out, err := Render(tpl, in)
	if err != nil {
		t.Fatal(err)
	}
	cfg := decode(t, out)
	gen := at(t, cfg, "PlatformInfo", "Generic")
	for key, want := range map[string]any{
		"SystemProductName": "iMacPro1,1", "SystemSerialNumber": "C02CK029HX87", "MLB": "C02015700QXJG36CB",
		"SystemUUID": "4B408A88-4062-4532-9AA1-3D8A3549327F", "ROM": []byte{0x34, 0x31, 0x8F, 0xD3, 0x88, 0xE4},
		"MaxBIOSVersion": false,
	} {
		if !reflect.DeepEqual(gen[key], want) {
			t.Errorf("PlatformInfo → Generic → %s = %#v, want %#v", key, gen[key], want)
		}
	}
	if v := at(t, cfg, "UEFI", "Output")["Resolution"]; v != "2560x1440@32" {
		t.Errorf("Resolution = %#v", v)
	}
}

func TestDeriveTemplateKeepsPresentKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		path []string
		set  any
	}{
		{"ClearTaskSwitchBit true", []string{"Booter", "Quirks", "ClearTaskSwitchBit"}, true},
		{"Unload lists a driver", []string{"UEFI", "Unload"}, []any{"AudioDxe"}},
		{"MaxBIOSVersion true", []string{"PlatformInfo", "Generic", "MaxBIOSVersion"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := readConfig(t)
			at(t, in, tc.path[:len(tc.path)-1]...)[tc.path[len(tc.path)-1]] = tc.set
			out, err := DeriveTemplate(encode(t, in))
			if err != nil {
				t.Fatal(err)
			}
			if got := at(t, decode(t, out), tc.path[:len(tc.path)-1]...)[tc.path[len(tc.path)-1]]; !reflect.DeepEqual(got, tc.set) {
				t.Errorf("%s = %#v, want it kept as %#v", strings.Join(tc.path, " → "), got, tc.set)
			}
		})
	}
}

func TestDeriveTemplateROMAsData(t *testing.T) {
	in := readConfig(t)
	at(t, in, "PlatformInfo", "Generic")["ROM"] = []byte{0, 0, 0, 0, 0, 0xff}
	out, err := DeriveTemplate(encode(t, in))
	if err != nil {
		t.Fatal(err)
	}
	if got := at(t, decode(t, out), "PlatformInfo", "Generic")["ROM"]; got != "{{ROM}}" {
		t.Errorf("ROM = %#v, want <string>{{ROM}}</string>", got)
	}
}

func TestDeriveTemplateBadInput(t *testing.T) {
	edit := func(f func(root map[string]any)) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			root := readConfig(t)
			f(root)
			return encode(t, root)
		}
	}
	dict := func(root map[string]any, path ...string) map[string]any {
		for _, k := range path {
			root = root[k].(map[string]any)
		}
		return root
	}
	raw := func(s string) func(*testing.T) []byte { return func(*testing.T) []byte { return []byte(s) } }
	for _, tc := range []struct {
		name     string
		config   func(t *testing.T) []byte
		contains string
	}{
		{"no MLB", edit(func(r map[string]any) { delete(dict(r, "PlatformInfo", "Generic"), "MLB") }),
			"PlatformInfo → Generic → MLB is missing"},
		{"ShowPicker a string", edit(func(r map[string]any) { dict(r, "Misc", "Boot")["ShowPicker"] = "no" }),
			"Misc → Boot → ShowPicker is a string, want a boolean"},
		{"no SystemProductName", edit(func(r map[string]any) { delete(dict(r, "PlatformInfo", "Generic"), "SystemProductName") }),
			"PlatformInfo → Generic → SystemProductName is missing"},
		{"SystemSerialNumber an integer", edit(func(r map[string]any) { dict(r, "PlatformInfo", "Generic")["SystemSerialNumber"] = uint64(1) }),
			"PlatformInfo → Generic → SystemSerialNumber is an integer, want a string"},
		{"SystemUUID data", edit(func(r map[string]any) { dict(r, "PlatformInfo", "Generic")["SystemUUID"] = []byte{1} }),
			"PlatformInfo → Generic → SystemUUID is data, want a string"},
		{"ROM a boolean", edit(func(r map[string]any) { dict(r, "PlatformInfo", "Generic")["ROM"] = true }),
			"PlatformInfo → Generic → ROM is a boolean, want a string or data"},
		{"no ROM", edit(func(r map[string]any) { delete(dict(r, "PlatformInfo", "Generic"), "ROM") }),
			"PlatformInfo → Generic → ROM is missing"},
		{"Resolution not a string", edit(func(r map[string]any) { dict(r, "UEFI", "Output")["Resolution"] = map[string]any{} }),
			"UEFI → Output → Resolution is a dictionary, want a string"},
		{"no Resolution", edit(func(r map[string]any) { delete(dict(r, "UEFI", "Output"), "Resolution") }),
			"UEFI → Output → Resolution is missing"},
		{"no UEFI → Output", edit(func(r map[string]any) { delete(dict(r, "UEFI"), "Output") }),
			"UEFI → Output is missing"},
		{"Generic an array", edit(func(r map[string]any) { dict(r, "PlatformInfo")["Generic"] = []any{} }),
			"PlatformInfo → Generic is an array, want a dictionary"},
		{"no PlatformInfo", edit(func(r map[string]any) { delete(r, "PlatformInfo") }),
			"PlatformInfo is missing"},
		{"no Booter → Quirks", edit(func(r map[string]any) { delete(dict(r, "Booter"), "Quirks") }),
			"Booter → Quirks is missing"},
		{"a {{ elsewhere", edit(func(r map[string]any) {
			dict(r, "Kernel")["Add"].([]any)[1].(map[string]any)["Comment"] = "{{MODE}}"
		}), "Kernel → Add[1] → Comment already contains {{"},
		{"already a template", func(t *testing.T) []byte {
			b, err := DeriveTemplate(encode(t, readConfig(t)))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}, "already contains {{"},
		{"not a plist", raw("hello"), "not an XML property list"},
		{"truncated", func(t *testing.T) []byte {
			b, _ := os.ReadFile(openCoreConfig)
			return b[:len(b)/2]
		}, "not an XML property list"},
		{"root an array", raw(`<?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><array/></plist>`), "with a dictionary at its root"},
		{"binary plist", func(t *testing.T) []byte {
			b, err := plist.Marshal(readConfig(t), plist.BinaryFormat)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}, "Binary property list, want XML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := DeriveTemplate(tc.config(t))
			if err == nil {
				t.Fatalf("no error; output:\n%s", out)
			}
			if ExitCode(err) != ExitInvalidInput || !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("error %q (exit %d), want exit %d containing %q", err, ExitCode(err), ExitInvalidInput, tc.contains)
			}
		})
	}
}
