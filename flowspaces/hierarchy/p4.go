//go:build !nogrpc

package hierarchy

// A switch in a hierarchy file (kind p4):
//
//	- name: tor
//	  kind: p4
//	  p4runtime: 127.0.0.1:9559  # its P4Runtime server
//	  device_id: 1               # the device it must answer as
//	  uplink: 1                  # the port cabled to the parent's NIC (an xdp flowspace's
//	                             # interface), or cpu: the CPU port, the parent userspace
//	  cpu_port: 255              # its CPU port (default 255)
//	  interfaces:                # front-panel ports, named as hierarchy interfaces
//	    - {name: swp1, port: 2}
//	  resources:                 # per stage; omitted fields are Tofino-1's (p4gen.Tofino1)
//	    stages: 12
//	    sram_blocks: 80
//	    ...

import (
	"net"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/p4"
	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/lang"
)

// built refuses the flowspaces this build leaves out: none.
func (p *parser) built(*yaml.Node) error { return nil }

// p4Flowspace builds a switch below parent, and returns the barrier above
// it: the one the file gives, or else the switch's own.
func (p *parser) p4Flowspace(parent flowspaces.Flowspace, s *spec, barrier string) (flowspaces.Flowspace, string, error) {
	sw, err := p.p4(parent, s)
	if err != nil {
		return nil, barrier, err
	}
	if _, given := s.fields["barrier"]; !given {
		o := sw.Options()
		barrier = o.Barrier()
	}
	return sw, barrier, nil
}

// describeSwitch describes fs if it is a switch: its P4Runtime end, its
// ports and resources, its front-panel ports as its interfaces.
func describeSwitch(fs flowspaces.Flowspace) (*Switch, []Interface, bool) {
	sw, ok := fs.(*p4.Flowspace)
	if !ok {
		return nil, nil, false
	}
	o := sw.Options()
	d := &Switch{P4Runtime: o.Address, DeviceID: o.DeviceID, Uplink: "cpu", CPUPort: int(o.CPUPort),
		Ports: map[string]int{}, Resources: o.Profile}
	if !o.UplinkCPU {
		d.Uplink = strconv.Itoa(int(o.Uplink))
	}
	ifaces := []Interface{}
	for _, name := range sw.Interfaces() {
		d.Ports[name] = int(o.Ports[name])
		ifaces = append(ifaces, Interface{Name: name})
	}
	return d, ifaces, true
}

// p4 builds a switch below parent.
func (p *parser) p4(parent flowspaces.Flowspace, s *spec) (*p4.Flowspace, error) {
	if err := p.checkName(s.line, "p4 flowspace "+s.label(), s.name); err != nil {
		return nil, err
	}
	if err := p.define(s.line, s.name); err != nil {
		return nil, err
	}
	if e, ok := s.fields["children"]; ok && !isNull(e.val) {
		return nil, p.errorf(e.key.Line, "switch %s cannot have children: packets enter at its ports, and nothing lies beneath it", s.name)
	}
	opts := p4.Options{Name: s.name}
	addr, line, err := p.str(s, "p4runtime")
	if err != nil {
		return nil, err
	}
	if addr == "" {
		return nil, p.errorf(s.line, "switch %s needs p4runtime: the host:port of its P4Runtime server", s.name)
	}
	if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" {
		return nil, p.errorf(line, "p4runtime of switch %s must be host:port (127.0.0.1:9559), not %q", s.name, addr)
	}
	opts.Address = addr
	dev, line, err := p.str(s, "device_id")
	if err != nil {
		return nil, err
	}
	if dev == "" {
		return nil, p.errorf(s.line, "switch %s needs device_id: the P4Runtime device it is", s.name)
	}
	if opts.DeviceID, err = strconv.ParseUint(dev, 10, 64); err != nil {
		return nil, p.errorf(line, "device_id of switch %s must be a whole number from 0 to 2^64-1, not %q", s.name, dev)
	}
	cpu := uint64(p4.DefaultCPUPort)
	if v, line, err := p.str(s, "cpu_port"); err != nil {
		return nil, err
	} else if v != "" {
		if cpu, err = portNumber(v); err != nil {
			return nil, p.errorf(line, "cpu_port of switch %s must be a port number from 1 to 510, not %q", s.name, v)
		}
	}
	opts.CPUPort = uint16(cpu)
	up, line, err := p.str(s, "uplink")
	if err != nil {
		return nil, err
	}
	switch {
	case up == "":
		return nil, p.errorf(s.line, "switch %s needs an uplink: the port cabled to its parent's NIC, or cpu (the CPU port)", s.name)
	case up == "cpu":
		if parent.Kind() != flowspaces.KindUser {
			return nil, p.errorf(line, "switch %s sends up through its CPU port, to the controller in userspace: it hangs beneath the root, not beneath %s flowspace %s", s.name, parent.Kind(), parent.Name())
		}
		opts.UplinkCPU = true
	default:
		n, err := portNumber(up)
		if err != nil {
			return nil, p.errorf(line, "uplink of switch %s must be a port number from 1 to 510, or cpu, not %q", s.name, up)
		}
		if uint16(n) == opts.CPUPort {
			return nil, p.errorf(line, "uplink of switch %s is port %d, its CPU port: write uplink: cpu", s.name, n)
		}
		nic, ok := parent.(interface{ Interface() string })
		if !ok || parent.Kind() != flowspaces.KindXDP || nic.Interface() == "" {
			return nil, p.errorf(line, "switch %s's uplink, port %d, is a network link to its parent's NIC: it hangs beneath an xdp flowspace (the NIC), not beneath %s flowspace %s; or write uplink: cpu",
				s.name, n, parent.Kind(), parent.Name())
		}
		opts.Uplink, opts.UplinkIface = uint16(n), nic.Interface()
	}
	if opts.Ports, err = p.ports(s, opts); err != nil {
		return nil, err
	}
	if opts.Profile, err = p.resources(s); err != nil {
		return nil, err
	}
	fs, err := p4.New(opts)
	if err != nil {
		return nil, p.errorf(s.line, "%v", err)
	}
	return fs, nil
}

// portNumber reads a switch port: 1 to 510 (9 bits, 511 is the drop
// port, 0 none).
func portNumber(v string) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 16)
	if err != nil || n < 1 || n > p4gen.DropPort-1 {
		return 0, strconv.ErrRange
	}
	return n, nil
}

// ports reads a switch's front-panel ports: interfaces named for the
// hierarchy, each with its port number.
func (p *parser) ports(s *spec, opts p4.Options) (map[string]uint16, error) {
	out := map[string]uint16{}
	e, ok := s.fields["interfaces"]
	if !ok || isNull(e.val) {
		return nil, p.errorf(s.line, "switch %s needs interfaces: its front-panel ports, e.g. [{name: swp1, port: 2}]", s.name)
	}
	if e.val.Kind != yaml.SequenceNode {
		return nil, p.errorf(e.key.Line, "interfaces of switch %s must be a list of {name, port} mappings, not %s", s.name, describe(e.val))
	}
	used := map[uint64]string{}
	for _, n := range e.val.Content {
		n = deref(n)
		if n.Kind != yaml.MappingNode {
			return nil, p.errorf(n.Line, "an interface of switch %s must be a {name, port} mapping (a front-panel port), not %s", s.name, describe(n))
		}
		var name string
		var port *yaml.Node
		line := n.Line
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := deref(n.Content[i]), deref(n.Content[i+1])
			switch k.Value {
			case "name":
				if v.Kind != yaml.ScalarNode || isNull(v) {
					return nil, p.errorf(k.Line, "the name of an interface of switch %s must be a word, not %s", s.name, describe(v))
				}
				name, line = v.Value, v.Line
			case "port":
				port = v
			default:
				if sug, ok := lang.Suggest(k.Value, []string{"name", "port"}); ok {
					return nil, p.errorf(k.Line, "unknown field %q in an interface of switch %s (did you mean %q?)", k.Value, s.name, sug)
				}
				return nil, p.errorf(k.Line, "unknown field %q in an interface of switch %s (the fields are name and port)", k.Value, s.name)
			}
		}
		if name == "" {
			return nil, p.errorf(n.Line, "an interface of switch %s needs a name", s.name)
		}
		if err := p.checkName(line, "an interface of switch "+s.name, name); err != nil {
			return nil, err
		}
		if port == nil {
			return nil, p.errorf(line, "interface %s of switch %s needs a port: the switch port it is", name, s.name)
		}
		num, err := portNumber(port.Value)
		if err != nil || port.Kind != yaml.ScalarNode {
			return nil, p.errorf(port.Line, "the port of interface %s of switch %s must be a port number from 1 to 510, not %s", name, s.name, describe(port))
		}
		switch {
		case !opts.UplinkCPU && uint16(num) == opts.Uplink:
			return nil, p.errorf(port.Line, "interface %s of switch %s is port %d, its uplink", name, s.name, num)
		case uint16(num) == opts.CPUPort:
			return nil, p.errorf(port.Line, "interface %s of switch %s is port %d, its CPU port", name, s.name, num)
		case used[num] != "":
			return nil, p.errorf(port.Line, "interfaces %s and %s of switch %s are both port %d", used[num], name, s.name, num)
		}
		used[num] = name
		if err := p.enter(line, s.name, name); err != nil {
			return nil, err
		}
		out[name] = uint16(num)
	}
	return out, nil
}

// resources reads a switch's resource profile: Tofino-1's, with the
// fields given replaced; a value out of reason is refused naming the
// field, at its line.
func (p *parser) resources(s *spec) (p4gen.Profile, error) {
	prof := p4gen.Tofino1()
	e, ok := s.fields["resources"]
	if !ok || isNull(e.val) {
		return prof, nil
	}
	if e.val.Kind != yaml.MappingNode {
		return prof, p.errorf(e.key.Line, "resources of switch %s must be a mapping of resource: number (stages: 12), not %s", s.name, describe(e.val))
	}
	// The fields by their YAML names, as p4gen.Profile declares them.
	v := reflect.ValueOf(&prof).Elem()
	byName := map[string]reflect.Value{}
	var names []string
	for i := range v.NumField() {
		tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		byName[tag] = v.Field(i)
		names = append(names, tag)
	}
	lines := map[string]int{}
	for i := 0; i+1 < len(e.val.Content); i += 2 {
		k, val := deref(e.val.Content[i]), deref(e.val.Content[i+1])
		f, ok := byName[k.Value]
		if !ok {
			if sug, ok := lang.Suggest(k.Value, names); ok {
				return prof, p.errorf(k.Line, "unknown resource %q of switch %s (did you mean %q?)", k.Value, s.name, sug)
			}
			return prof, p.errorf(k.Line, "unknown resource %q of switch %s (the resources are %s)", k.Value, s.name, strings.Join(names, ", "))
		}
		if _, dup := lines[k.Value]; dup {
			return prof, p.errorf(k.Line, "resource %s of switch %s is given twice", k.Value, s.name)
		}
		lines[k.Value] = k.Line
		switch f.Kind() {
		case reflect.Int:
			n, err := strconv.ParseInt(val.Value, 10, 32)
			if val.Kind != yaml.ScalarNode || err != nil {
				return prof, p.errorf(val.Line, "resource %s of switch %s must be a whole number, not %s", k.Value, s.name, describe(val))
			}
			f.SetInt(n)
		case reflect.Slice:
			if val.Kind != yaml.SequenceNode {
				return prof, p.errorf(val.Line, "resource %s of switch %s must be a list of widths in bits, e.g. [1, 8, 16, 32], not %s", k.Value, s.name, describe(val))
			}
			var ws []int
			for _, w := range val.Content {
				n, err := strconv.Atoi(deref(w).Value)
				if err != nil {
					return prof, p.errorf(w.Line, "a width of resource %s of switch %s must be a number of bits, not %s", k.Value, s.name, describe(deref(w)))
				}
				ws = append(ws, n)
			}
			f.Set(reflect.ValueOf(ws))
		}
	}
	if err := prof.Validate(); err != nil {
		// "resource stages: 0 is out of range (1 to 64)": at the line of
		// the field it names.
		line := e.key.Line
		for name, l := range lines {
			if strings.HasPrefix(err.Error(), "resource "+name+":") {
				line = l
			}
		}
		return prof, p.errorf(line, "switch %s: %v", s.name, err)
	}
	return prof, nil
}
