package p4net

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Config is a network of switches: the file ffpf p4 net reads.
//
//	switches:
//	  - name: s1
//	    role: first_hop        # the section of a MAFIA program it runs
//	    rates: {2: 500000}     # port 2's queue drains 500,000 packets a second
//	  - name: s2
//	    role: intermediate
//	  - name: s3
//	    role: last_hop
//	links: ["s1:2 s2:1", "s2:2 s3:1"]
//	ports: {"s1:1": "in:trace.pcap", "s3:2": "out:out.pcap"}
//	routes: {s1: {1: 2}, s2: {1: 2}, s3: {1: 2}}
//	changes:
//	  - {at: 50ms, switch: s1, routes: {1: 3}}
//
// Or a network of switches that run elsewhere (ffpf p4 switch processes,
// bmv2), each named by its P4Runtime address and device id: ffpf p4 net
// starts no model for them and pushes, collects and reads as for its
// own. Their links and hosts' ports are their processes' (ffpf p4 switch
// --port), so the file has no links:, ports: or changes:, nor a
// switch's rates: or queue: (its --rate, --queue); it has routes:.
//
//	switches:
//	  - {name: s1, role: first_hop, p4runtime: 127.0.0.1:9561, device_id: 1}
//	  - {name: s2, role: intermediate, p4runtime: 127.0.0.1:9562, device_id: 2}
//	routes: {s1: {1: 2}, s2: {1: 2}}
type Config struct {
	// Program is the MAFIA program the switches run (relative to the
	// file's directory); ffpf p4 net --mafia gives one instead.
	Program  string         `yaml:"program"`
	Switches []SwitchConfig `yaml:"switches"`
	// Links cable two ports, "s1:2 s2:1", both ways.
	Links []string `yaml:"links"`
	// Ports are the hosts' ports: "in:FILE.pcap" replays a capture into
	// the port (its timestamps the network's clock), "out:FILE.pcap"
	// records what leaves it. A port neither linked nor here sends
	// nowhere (counted).
	Ports map[string]string `yaml:"ports"`
	// Routes are each switch's forwarding: the port a packet that
	// entered at a port leaves by. A packet without a route is dropped.
	Routes map[string]map[uint16]uint16 `yaml:"routes"`
	// Changes rewrite routes while the trace plays, at a time after its
	// first frame, as a controller moving flows (ez-Segway) does.
	Changes []Change `yaml:"changes"`

	file string
}

// SwitchConfig is one switch.
type SwitchConfig struct {
	Name string `yaml:"name"`
	// Role is the section of a MAFIA program the switch runs
	// (first_hop, intermediate, last_hop); a program without sections
	// runs on every switch.
	Role string `yaml:"role"`
	// P4Runtime is the address of a switch that runs elsewhere (an ffpf
	// p4 switch process): ffpf p4 net starts no model for it. When
	// empty, the switch is a model in this process, serving P4Runtime on
	// a loopback port the system picks.
	P4Runtime string `yaml:"p4runtime"`
	// DeviceID (default: its position from 1; the device id of a switch
	// that runs elsewhere, its --device-id) and ID, the switch.id its
	// programs read (default: its position from 1).
	DeviceID uint64 `yaml:"device_id"`
	ID       uint32 `yaml:"id"`
	CPUPort  uint16 `yaml:"cpu_port"` // 255 when 0 (elsewhere: its --cpu-port)
	// Rates are ports' egress rates in packets a second (a port not
	// here sends at once); Queue the packets a queue holds (64 when 0).
	Rates map[uint16]float64 `yaml:"rates"`
	Queue int                `yaml:"queue"`
	// Resources is the pipeline's profile, from Tofino-1's: the fields
	// given replace its.
	Resources map[string]any `yaml:"resources"`

	profile p4gen.Profile
}

// Elsewhere reports whether the switch runs elsewhere: the file names its
// P4Runtime address.
func (s *SwitchConfig) Elsewhere() bool { return s.P4Runtime != "" }

// Change is a change of routes at a time of the trace.
type Change struct {
	At     string            `yaml:"at"`
	Switch string            `yaml:"switch"`
	Routes map[uint16]uint16 `yaml:"routes"`

	at time.Duration
}

// Roles a switch may have, as MAFIA's sections name them.
var Roles = []string{"first_hop", "intermediate", "last_hop"}

// PortRef is a switch's port.
type PortRef struct {
	Switch string
	Port   uint16
}

func (p PortRef) String() string { return fmt.Sprintf("%s:%d", p.Switch, p.Port) }

// Load reads a network file.
func Load(path string) (*Config, error) {
	data, err := functions.ReadFile(path, "a network file")
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse reads a network from data; file names it in errors, and files
// the ports name are taken relative to its directory.
func Parse(data []byte, file string) (*Config, error) {
	c := &Config{file: file}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: no switches", file)
		}
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	c.file = file
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	return c, nil
}

// MaxSwitches bounds a network.
const MaxSwitches = 64

func (c *Config) check() error {
	if len(c.Switches) == 0 {
		return errors.New("no switches")
	}
	if len(c.Switches) > MaxSwitches {
		return fmt.Errorf("%d switches; a network has at most %d", len(c.Switches), MaxSwitches)
	}
	names := map[string]bool{}
	ids := map[uint32]string{}
	for i := range c.Switches {
		s := &c.Switches[i]
		if s.Name == "" || strings.ContainsAny(s.Name, ": \t") {
			return fmt.Errorf("switch %d: name %q is empty or has a colon or a space", i+1, s.Name)
		}
		if names[s.Name] {
			return fmt.Errorf("switch %s is named twice", s.Name)
		}
		names[s.Name] = true
		if s.Role != "" && !contains(Roles, s.Role) {
			return fmt.Errorf("switch %s: role %q is none of %s", s.Name, s.Role, strings.Join(Roles, ", "))
		}
		if s.DeviceID == 0 {
			s.DeviceID = uint64(i + 1)
		}
		if s.ID == 0 {
			s.ID = uint32(i + 1)
		}
		if o, ok := ids[s.ID]; ok {
			return fmt.Errorf("switches %s and %s have id %d", o, s.Name, s.ID)
		}
		ids[s.ID] = s.Name
		if s.CPUPort == 0 {
			s.CPUPort = 255
		}
		if s.CPUPort >= p4gen.DropPort {
			return fmt.Errorf("switch %s: CPU port %d is not a port (0 to 510)", s.Name, s.CPUPort)
		}
		if s.Queue < 0 || s.Queue > 1<<20 {
			return fmt.Errorf("switch %s: queue %d is out of range (1 to %d)", s.Name, s.Queue, 1<<20)
		}
		for p, r := range s.Rates {
			if p >= p4gen.DropPort || !(r > 0 && r <= 1e10) {
				return fmt.Errorf("switch %s: rate %v of port %d: a port 0 to 510, a rate above 0", s.Name, r, p)
			}
		}
		prof, err := profile(s.Resources)
		if err != nil {
			return fmt.Errorf("switch %s: resources: %v", s.Name, err)
		}
		s.profile = prof
	}
	if err := c.checkElsewhere(); err != nil {
		return err
	}
	used := map[PortRef]string{}
	use := func(p PortRef, what string) error {
		if o, ok := used[p]; ok {
			return fmt.Errorf("port %s is %s and %s", p, o, what)
		}
		s := c.Switch(p.Switch)
		if s != nil && p.Port == s.CPUPort {
			return fmt.Errorf("port %s is the switch's CPU port", p)
		}
		used[p] = what
		return nil
	}
	for _, l := range c.Links {
		a, b, err := c.link(l)
		if err != nil {
			return err
		}
		if err := use(a, "linked"); err != nil {
			return err
		}
		if err := use(b, "linked"); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(c.Ports) {
		p, err := c.port(k)
		if err != nil {
			return err
		}
		v := c.Ports[k]
		if !strings.HasPrefix(v, "in:") && !strings.HasPrefix(v, "out:") || len(v) <= 4 {
			return fmt.Errorf("port %s: %q is not in:FILE.pcap or out:FILE.pcap", k, v)
		}
		if err := use(p, "a host's ("+v+")"); err != nil {
			return err
		}
	}
	for name, rs := range c.Routes {
		if err := c.routes(name, rs); err != nil {
			return err
		}
	}
	for i := range c.Changes {
		ch := &c.Changes[i]
		d, err := time.ParseDuration(ch.At)
		if err != nil || d < 0 {
			return fmt.Errorf("change %d: at %q is not a duration after the trace's first frame (50ms)", i+1, ch.At)
		}
		ch.at = d
		if err := c.routes(ch.Switch, ch.Routes); err != nil {
			return fmt.Errorf("change %d: %v", i+1, err)
		}
	}
	sort.SliceStable(c.Changes, func(i, j int) bool { return c.Changes[i].at < c.Changes[j].at })
	return nil
}

// Elsewhere reports whether the network's switches run elsewhere (the
// file names their P4Runtime addresses): a network is all in this
// process or all elsewhere.
func (c *Config) Elsewhere() bool { return len(c.Switches) > 0 && c.Switches[0].Elsewhere() }

// checkElsewhere checks a network of switches that run elsewhere: what
// their processes decide (ports, links, rates, queues) is not the file's,
// nor changes at times of a trace the network does not play.
func (c *Config) checkElsewhere() error {
	first := &c.Switches[0]
	at := map[string]string{}
	for i := range c.Switches {
		s := &c.Switches[i]
		if s.Elsewhere() != first.Elsewhere() {
			in, out := first, s
			if s.Elsewhere() {
				in, out = s, first
			}
			return fmt.Errorf("switch %s runs elsewhere (p4runtime: %s) and %s in this process: a network's switches are all in this process or all elsewhere",
				in.Name, in.P4Runtime, out.Name)
		}
		if !s.Elsewhere() {
			continue
		}
		if _, port, err := net.SplitHostPort(s.P4Runtime); err != nil || port == "0" || port == "" {
			return fmt.Errorf("switch %s: p4runtime %q is not the HOST:PORT a switch serves P4Runtime on", s.Name, s.P4Runtime)
		}
		key := fmt.Sprintf("%s device %d", s.P4Runtime, s.DeviceID)
		if o, ok := at[key]; ok {
			return fmt.Errorf("switches %s and %s are both the switch at %s", o, s.Name, key)
		}
		at[key] = s.Name
		if len(s.Rates) > 0 || s.Queue != 0 {
			return fmt.Errorf("switch %s runs elsewhere (p4runtime: %s): its rates and queue are its process's (ffpf p4 switch --rate, --queue), not the file's",
				s.Name, s.P4Runtime)
		}
	}
	if !first.Elsewhere() {
		return nil
	}
	switch {
	case len(c.Links) > 0:
		return errors.New("links: the switches run elsewhere (p4runtime:): they are linked by their processes' ports (ffpf p4 switch --port N=IFACE), not by the file")
	case len(c.Ports) > 0:
		return errors.New("ports: the switches run elsewhere (p4runtime:): the hosts' ports are their processes' (ffpf p4 switch --port N=file:IN.pcap, N=out:OUT.pcap), not the file's")
	case len(c.Changes) > 0:
		return errors.New("changes: are made at times of the trace, which only a network in this process plays; the switches run elsewhere (p4runtime:)")
	}
	return nil
}

func (c *Config) routes(name string, rs map[uint16]uint16) error {
	s := c.Switch(name)
	if s == nil {
		return fmt.Errorf("routes of %q, which is no switch", name)
	}
	for in, out := range rs {
		if in >= p4gen.DropPort || out >= p4gen.DropPort {
			return fmt.Errorf("switch %s: route %d → %d: ports are 0 to 510", name, in, out)
		}
	}
	return nil
}

// Switch returns the switch named name, nil when there is none.
func (c *Config) Switch(name string) *SwitchConfig {
	for i := range c.Switches {
		if c.Switches[i].Name == name {
			return &c.Switches[i]
		}
	}
	return nil
}

func (c *Config) port(s string) (PortRef, error) {
	name, num, ok := strings.Cut(strings.TrimSpace(s), ":")
	n, err := strconv.ParseUint(num, 10, 16)
	if !ok || err != nil || n >= p4gen.DropPort {
		return PortRef{}, fmt.Errorf("%q is not SWITCH:PORT (a port 0 to 510)", s)
	}
	if c.Switch(name) == nil {
		return PortRef{}, fmt.Errorf("%q: %s is no switch", s, name)
	}
	return PortRef{name, uint16(n)}, nil
}

func (c *Config) link(l string) (PortRef, PortRef, error) {
	f := strings.Fields(l)
	if len(f) != 2 {
		return PortRef{}, PortRef{}, fmt.Errorf("link %q is not \"SWITCH:PORT SWITCH:PORT\"", l)
	}
	a, err := c.port(f[0])
	if err != nil {
		return PortRef{}, PortRef{}, fmt.Errorf("link %q: %v", l, err)
	}
	b, err := c.port(f[1])
	if err != nil {
		return PortRef{}, PortRef{}, fmt.Errorf("link %q: %v", l, err)
	}
	return a, b, nil
}

// ProgramPath is Program, relative to the working directory ("" when
// the file names none).
func (c *Config) ProgramPath() string {
	if c.Program == "" {
		return ""
	}
	return c.path(c.Program)
}

// path returns a file the network file names, relative to its directory.
func (c *Config) path(f string) string {
	if filepath.IsAbs(f) || c.file == "" {
		return f
	}
	return filepath.Join(filepath.Dir(c.file), f)
}

// profile is Tofino-1's with the fields m gives.
func profile(m map[string]any) (p4gen.Profile, error) {
	prof := p4gen.Tofino1()
	if len(m) == 0 {
		return prof, nil
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return prof, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&prof); err != nil {
		return prof, err
	}
	return prof, prof.Validate()
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
