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

// Package domaincheck holds the checks the hook's tests make on rewritten
// domains: what the hook promised is there, and nothing else changed.
package domaincheck

import (
	"fmt"
	"reflect"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// Parse unmarshals a domain XML with libvirtxml.
func Parse(doc []byte) (*libvirtxml.Domain, error) {
	var d libvirtxml.Domain
	if err := d.Unmarshal(string(doc)); err != nil {
		return nil, err
	}
	return &d, nil
}

// Disk returns the disk with the given alias, or nil.
func Disk(d *libvirtxml.Domain, alias string) *libvirtxml.DomainDisk {
	if d.Devices == nil {
		return nil
	}
	for i := range d.Devices.Disks {
		if a := d.Devices.Disks[i].Alias; a != nil && a.Name == alias {
			return &d.Devices.Disks[i]
		}
	}
	return nil
}

// Args returns the qemu:commandline arguments.
func Args(d *libvirtxml.Domain) []string {
	if d.QEMUCommandline == nil {
		return nil
	}
	var out []string
	for _, a := range d.QEMUCommandline.Args {
		out = append(out, a.Value)
	}
	return out
}

// CountPair counts the adjacent argument pairs (opt, val) for which match
// returns true.
func CountPair(args []string, opt string, match func(string) bool) int {
	n := 0
	for i := 0; i+1 < len(args); i++ {
		if args[i] == opt && match(args[i+1]) {
			n++
			i++
		}
	}
	return n
}

// EqualOutside reports, as an error, any difference between before and
// after outside the parts the hook may touch: the qemu:commandline
// arguments (environment entries must be equal) and, of the disk aliased
// systemAlias (empty for none), its target, address, model, serial and the
// virtio-only driver attributes.
func EqualOutside(before, after *libvirtxml.Domain, systemAlias string) error {
	b, a := clean(before, systemAlias), clean(after, systemAlias)
	if reflect.DeepEqual(b, a) {
		return nil
	}
	bs, _ := b.Marshal()
	as, _ := a.Marshal()
	return fmt.Errorf("domains differ outside the hook's changes:\n%s", lineDiff(bs, as))
}

func clean(d *libvirtxml.Domain, systemAlias string) *libvirtxml.Domain {
	var c libvirtxml.Domain
	s, err := d.Marshal()
	if err != nil {
		panic(err)
	}
	if err := c.Unmarshal(s); err != nil {
		panic(err)
	}
	if c.QEMUCommandline != nil {
		c.QEMUCommandline.Args = nil
		if len(c.QEMUCommandline.Envs) == 0 {
			c.QEMUCommandline = nil
		}
	}
	if systemAlias != "" {
		if disk := Disk(&c, systemAlias); disk != nil {
			disk.Target, disk.Address, disk.Model, disk.Serial = nil, nil, "", ""
			if disk.Driver != nil {
				disk.Driver.IOThread, disk.Driver.IOThreads, disk.Driver.Queues, disk.Driver.QueueSize = nil, nil, nil, nil
			}
		}
	}
	return &c
}

func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, x, y))
		}
		if len(out) > 10 {
			break
		}
	}
	return strings.Join(out, "\n")
}
