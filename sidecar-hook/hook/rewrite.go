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

package hook

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"libvirt.org/go/libvirtxml"

	"github.com/dockerios/dockerios/sidecar-hook/annotations"
)

// QEMU arguments the hook owns. Each is a pair: the option, then its value.
const (
	argDevice = "-device"
	argSMBIOS = "-smbios"
	argCPU    = "-cpu"

	appleSMCDevicePrefix = "isa-applesmc"
	smbiosType2          = "type=2"
)

// kubevirtAliasPrefix starts the libvirt alias KubeVirt gives every device
// the VMI names ("ua-" for user alias): disk "rootdisk" is "ua-rootdisk".
const kubevirtAliasPrefix = "ua-"

// Rewrite applies s to a libvirt domain XML. It is idempotent: rewriting
// its own output returns that output byte for byte. When s changes nothing
// in the domain (including when the domain already has every change), the
// input is returned exactly as given. osk is only used when s.AppleSMC.
//
// Only these parts of the domain change:
//   - <qemu:commandline>: with s.AppleSMC, the pairs "-device isa-applesmc,…"
//     and "-smbios type=2" are removed wherever they are and
//     "-device isa-applesmc,osk=<osk>" "-smbios type=2" appended; with
//     s.CPU, every "-cpu …" pair is removed and "-cpu <s.CPU>" appended
//     after them. Other arguments and environment entries keep their order.
//   - the system disk (alias "ua-<s.SystemDisk>"), only when its bus is not
//     s.SystemDiskBus: <target bus> is set, <target dev> renamed to the first
//     free name of the bus's scheme (nvme0nN, sdX, vdX), <address> dropped
//     (libvirt assigns one on the new bus); leaving virtio also drops what
//     only virtio-blk has (the model attribute, driver iothread(s), queues,
//     queue_size). On nvme a disk without <serial> gets one derived from its
//     alias, since libvirt requires a serial for NVMe.
//
// Everything else is left as libvirtxml reads it; the output is libvirtxml's
// serialisation, so element order and whitespace may differ from the input,
// and elements libvirtxml does not model are dropped (libvirt ignores them
// too).
func Rewrite(domainXML []byte, s Settings, osk string) (out []byte, err error) {
	// libvirtxml's custom unmarshallers are not written for hostile input; a
	// panic must become an error, never a dead sidecar.
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, errorf(codes.InvalidArgument, "cannot parse the domain XML: libvirtxml failed on it (%v)", r)
		}
	}()
	if s.IsZero() {
		return domainXML, nil
	}
	var before, dom libvirtxml.Domain
	if err := before.Unmarshal(string(domainXML)); err != nil {
		return nil, errorf(codes.InvalidArgument, "cannot parse the domain XML: %v", err)
	}
	if err := dom.Unmarshal(string(domainXML)); err != nil {
		return nil, errorf(codes.InvalidArgument, "cannot parse the domain XML: %v", err)
	}
	if s.SystemDisk != "" {
		if err := moveSystemDisk(&dom, s.SystemDisk, s.SystemDiskBus); err != nil {
			return nil, err
		}
	}
	if s.AppleSMC || s.CPU != "" {
		setQEMUArgs(&dom, s, osk)
	}
	if reflect.DeepEqual(before, dom) {
		return domainXML, nil
	}
	doc, err := dom.Marshal()
	if err != nil {
		return nil, errorf(codes.Internal, "cannot serialise the rewritten domain XML: %v", err)
	}
	return fixpoint(doc)
}

// fixpoint returns doc as libvirtxml serialises what it parses from doc,
// once that no longer changes. Its serialisation is not always a fixpoint
// of its parsing: an element it models only in part (a channel of a
// source type it does not know) comes out in a form that parses to
// something else (the type dropped, then defaulted to pty). Without this,
// rewriting the hook's own output could change it again.
func fixpoint(doc string) ([]byte, error) {
	for range 3 {
		var dom libvirtxml.Domain
		if err := dom.Unmarshal(doc); err != nil {
			return nil, errorf(codes.InvalidArgument, "cannot parse the rewritten domain XML: %v", err)
		}
		next, err := dom.Marshal()
		if err != nil {
			return nil, errorf(codes.Internal, "cannot serialise the rewritten domain XML: %v", err)
		}
		if next == doc {
			return []byte(doc), nil
		}
		doc = next
	}
	return nil, errorf(codes.InvalidArgument, "cannot rewrite the domain XML: libvirtxml reads it differently each time it writes it")
}

// setQEMUArgs puts the hook's arguments at the end of <qemu:commandline>.
func setQEMUArgs(dom *libvirtxml.Domain, s Settings, osk string) {
	var args []libvirtxml.DomainQEMUCommandlineArg
	var envs []libvirtxml.DomainQEMUCommandlineEnv
	if dom.QEMUCommandline != nil {
		args, envs = dom.QEMUCommandline.Args, dom.QEMUCommandline.Envs
	}
	owned := func(opt, val string) bool {
		switch {
		case s.AppleSMC && opt == argDevice && isAppleSMCDevice(val):
			return true
		case s.AppleSMC && opt == argSMBIOS && val == smbiosType2:
			return true
		case s.CPU != "" && opt == argCPU:
			return true
		}
		return false
	}
	kept := make([]libvirtxml.DomainQEMUCommandlineArg, 0, len(args)+6)
	for i := 0; i < len(args); i++ {
		if i+1 < len(args) && owned(args[i].Value, args[i+1].Value) {
			i++
			continue
		}
		kept = append(kept, args[i])
	}
	add := func(opt, val string) {
		kept = append(kept, libvirtxml.DomainQEMUCommandlineArg{Value: opt}, libvirtxml.DomainQEMUCommandlineArg{Value: val})
	}
	if s.AppleSMC {
		add(argDevice, appleSMCDevicePrefix+",osk="+osk)
		add(argSMBIOS, smbiosType2)
	}
	if s.CPU != "" {
		add(argCPU, s.CPU)
	}
	dom.QEMUCommandline = &libvirtxml.DomainQEMUCommandline{Args: kept, Envs: envs}
}

func isAppleSMCDevice(v string) bool {
	return v == appleSMCDevicePrefix || strings.HasPrefix(v, appleSMCDevicePrefix+",")
}

// moveSystemDisk puts the disk KubeVirt aliased "ua-<name>" on bus.
func moveSystemDisk(dom *libvirtxml.Domain, name, bus string) error {
	alias := kubevirtAliasPrefix + name
	var disks []libvirtxml.DomainDisk
	if dom.Devices != nil {
		disks = dom.Devices.Disks
	}
	idx := -1
	for i := range disks {
		if disks[i].Alias != nil && disks[i].Alias.Name == alias {
			if idx >= 0 {
				return errorf(codes.InvalidArgument, "the domain has more than one disk with alias %q; annotation %s must name exactly one", alias, annotations.SystemDisk)
			}
			idx = i
		}
	}
	if idx < 0 {
		var have []string
		for _, d := range disks {
			if d.Alias != nil && strings.HasPrefix(d.Alias.Name, kubevirtAliasPrefix) {
				have = append(have, strings.TrimPrefix(d.Alias.Name, kubevirtAliasPrefix))
			}
		}
		sort.Strings(have)
		list := "none"
		if len(have) > 0 {
			list = strings.Join(have, ", ")
		}
		return errorf(codes.InvalidArgument, "annotation %s names disk %q, but the domain has no disk with alias %q (the VMI's disks in the domain: %s)",
			annotations.SystemDisk, name, alias, list)
	}
	d := &disks[idx]
	if d.Device != "" && d.Device != "disk" {
		return errorf(codes.InvalidArgument, "annotation %s names disk %q, which is a %s, not a disk", annotations.SystemDisk, name, d.Device)
	}
	if d.Target == nil {
		d.Target = &libvirtxml.DomainDiskTarget{}
	}
	if d.Target.Bus != bus {
		d.Target.Bus = bus
		if !devMatchesBus(d.Target.Dev, bus) {
			d.Target.Dev = freeDevName(disks, idx, bus)
		}
		d.Address = nil
		if bus != annotations.BusVirtio {
			d.Model = ""
			if d.Driver != nil {
				d.Driver.IOThread = nil
				d.Driver.IOThreads = nil
				d.Driver.Queues = nil
				d.Driver.QueueSize = nil
			}
		}
	}
	if bus == annotations.BusNVMe && d.Serial == "" {
		d.Serial = nvmeSerial(alias)
	}
	return nil
}

// devPrefix is the <target dev> naming scheme of each bus.
func devPrefix(bus string) string {
	switch bus {
	case annotations.BusNVMe:
		return "nvme0n"
	case annotations.BusSATA:
		return "sd"
	default:
		return "vd"
	}
}

func devMatchesBus(dev, bus string) bool {
	p := devPrefix(bus)
	if !strings.HasPrefix(dev, p) || len(dev) == len(p) {
		return false
	}
	rest := dev[len(p):]
	if bus == annotations.BusNVMe {
		n, err := strconv.Atoi(rest)
		return err == nil && n >= 1 && strconv.Itoa(n) == rest
	}
	for _, c := range rest {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// freeDevName is the first name of bus's scheme no other disk uses.
func freeDevName(disks []libvirtxml.DomainDisk, self int, bus string) string {
	used := map[string]bool{}
	for i, d := range disks {
		if i != self && d.Target != nil {
			used[d.Target.Dev] = true
		}
	}
	for n := 0; ; n++ {
		var name string
		if bus == annotations.BusNVMe {
			name = devPrefix(bus) + strconv.Itoa(n+1)
		} else {
			name = devPrefix(bus) + letters(n)
		}
		if !used[name] {
			return name
		}
	}
}

// letters names disk n the way libvirt does: a…z, aa…az, ba…
func letters(n int) string {
	s := ""
	for n++; n > 0; n = (n - 1) / 26 {
		s = string(rune('a'+(n-1)%26)) + s
	}
	return s
}

// nvmeSerial derives a stable serial (NVMe allows 20 characters) from the
// disk's alias, so the guest sees the same disk on every boot.
func nvmeSerial(alias string) string {
	sum := sha256.Sum256([]byte(alias))
	return fmt.Sprintf("DIOS%s", strings.ToUpper(hex.EncodeToString(sum[:8])))
}
