package p4net

// The controller of a path: one P4Runtime client per switch, which pushes
// the switch's program, writes its routes and the clone session of its
// copies, changes routes when the trace reaches a change, writes each copy
// a switch sends (PacketIn) to the collectors its mask names, and, once
// the trace has played, reads every function's counters and registers
// into its Go half, as the switch flowspace does.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces/p4/controller"
	"github.com/ffpf-go/ffpf/flowspaces/p4/pisa"
	"github.com/ffpf-go/ffpf/flowspaces/p4/ports"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4info"
	"github.com/ffpf-go/ffpf/lang"
)

// Section is the request a role's switches run ("" : every switch), with
// the functions that work on a copy (mafia.Request's Copies).
type Section struct {
	Role   string
	Req    *lang.Request
	Copies []bool
}

// Programs builds each switch's program: the section of its role, or
// the one without a role; a switch that has none only forwards.
func Programs(cfg *Config, sections []Section, reg *functions.Registry) ([]*Program, error) {
	var out []*Program
	for _, sc := range cfg.Switches {
		var sec *Section
		for i := range sections {
			if sections[i].Role == "" || sections[i].Role == sc.Role {
				sec = &sections[i]
				break
			}
		}
		req, copies := &lang.Request{}, []bool(nil)
		if sec != nil {
			req, copies = sec.Req, sec.Copies
		}
		p, err := Build(req, copies, Options{Name: sc.Name, Role: sc.Role, ID: sc.ID, CPUPort: sc.CPUPort,
			Profile: sc.profile, Registry: reg, PortCounters: sc.Elsewhere()})
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Result is what a run measured: each switch's functions, their state
// as the controller read it at the end.
type Result struct {
	Switches []*SwitchResult `json:"switches"`
}

// SwitchResult is one switch's.
type SwitchResult struct {
	Name      string            `json:"switch"`
	Role      string            `json:"role,omitempty"`
	Functions []*FunctionResult `json:"functions"`
	Stats     pisa.DeviceStats  `json:"-"`
	// Ports are the port counters of a switch that runs elsewhere: the
	// packets each port took in and sent out (the CPU port's out: the
	// copies it sent); its Stats are their sums.
	Ports []PortCount `json:"ports,omitempty"`
	// Copies are the copies the controller received (PacketIn).
	Copies uint64 `json:"copies"`
}

// FunctionResult is one function's.
type FunctionResult struct {
	ID      string         `json:"id"`
	Label   string         `json:"label,omitempty"`
	In      uint64         `json:"in"`
	Out     uint64         `json:"out"`
	Summary map[string]any `json:"state,omitempty"`
	// Half is its Go half, its state read from the switch.
	Half functions.Function `json:"-"`
}

// Function returns the function labelled label (or of id label), nil
// when there is none.
func (r *SwitchResult) Function(label string) *FunctionResult {
	for _, f := range r.Functions {
		if f.Label == label || f.ID == label {
			return f
		}
	}
	return nil
}

// Switch returns the result of the switch named name.
func (r *Result) Switch(name string) *SwitchResult {
	for _, s := range r.Switches {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// JSON is the result as ffpf p4 net --json prints it.
func (r *Result) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

// control is the controller of one switch.
type control struct {
	name   string
	addr   string
	device uint64
	sw     *Switch // nil for a switch that runs elsewhere
	prog   *Program
	client *controller.Client
	sinks  []*sink // by collector bit
	routes map[uint16]bool
	got    atomic.Uint64
	// stamp is the time a copy is written with: the network's clock,
	// or the wall clock's for a switch that runs elsewhere.
	stamp func() time.Time
	// ports is what its port counters said last (elsewhere only).
	ports []PortCount
}

// sink is a collector's endpoint, shared by the switches that name it.
type sink struct {
	mu   sync.Mutex
	file *ports.FileOut
	conn net.Conn
	n    uint64
	err  error
}

func (s *sink) write(frame []byte, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	var err error
	if s.file != nil {
		err = s.file.Write(frame, t)
	} else {
		_, err = s.conn.Write(frame)
	}
	if err != nil && s.err == nil {
		s.err = err
	}
}

// RunOptions tune a run.
type RunOptions struct {
	// Timeout bounds each P4Runtime call and the wait for the last
	// copies (5 s when 0).
	Timeout time.Duration
	// Lag is how many copies a switch may have sent that the controller
	// has not received before the trace waits for it (512 when 0: half
	// of what the server holds for a slow client).
	Lag uint64
	// Quiet is when a network of switches that run elsewhere is done:
	// once packets have entered its switches, their port counters and
	// the copies received stood still this long (1 s when 0).
	Quiet time.Duration
	// Stop, closed, ends the wait for a network elsewhere at once (on
	// SIGINT): what the switches measured until then is read.
	Stop <-chan struct{}
	// Logf says what a run elsewhere waits for (nil: nothing).
	Logf func(format string, args ...any)
}

func (o *RunOptions) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Lag == 0 {
		o.Lag = 512
	}
	if o.Quiet <= 0 {
		o.Quiet = time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// session is the controllers of a network's switches and the endpoints
// of their collects.
type session struct {
	cfg    *Config
	cs     []*control
	byName map[string]*control
	sinks  map[string]*sink
	o      RunOptions
}

// open makes a controller per program, for the switch of that name
// (addr and device id from at), and opens the collectors.
func open(cfg *Config, progs []*Program, o RunOptions, at func(c *control) error) (*session, error) {
	s := &session{cfg: cfg, byName: map[string]*control{}, sinks: map[string]*sink{}, o: o}
	for _, p := range progs {
		sc := cfg.Switch(p.Name)
		if sc == nil {
			s.close()
			return nil, fmt.Errorf("no switch %s in the network", p.Name)
		}
		c := &control{name: p.Name, addr: sc.P4Runtime, device: sc.DeviceID, prog: p, routes: map[uint16]bool{},
			stamp: time.Now}
		if err := at(c); err != nil {
			s.close()
			return nil, err
		}
		for _, col := range p.Collectors {
			key := "file:" + cfg.path(col.File)
			if col.To != "" {
				key = "to:" + col.To
			}
			k := s.sinks[key]
			if k == nil {
				k = &sink{}
				var err error
				if col.To != "" {
					if k.conn, err = net.Dial("udp", col.To); err != nil {
						s.close()
						return nil, fmt.Errorf("collector %s: %v", col.To, err)
					}
				} else if k.file, err = ports.CreateFileOut(cfg.path(col.File)); err != nil {
					s.close()
					return nil, fmt.Errorf("collector %s: %v", col.File, err)
				}
				s.sinks[key] = k
			}
			c.sinks = append(c.sinks, k)
		}
		s.cs = append(s.cs, c)
		s.byName[c.name] = c
	}
	return s, nil
}

// begin opens a session and pushes the programs (closed again on an
// error).
func begin(cfg *Config, progs []*Program, o RunOptions, at func(c *control) error) (*session, error) {
	s, err := open(cfg, progs, o, at)
	if err != nil {
		return nil, err
	}
	if err := s.push(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// end closes the session at the end of a run, whose error the close's
// is when it has none.
func (s *session) end(res **Result, err *error) {
	if cerr := s.close(); cerr != nil && *err == nil {
		*res, *err = nil, cerr
	}
}

// close ends the controllers, which removes what they installed, and
// closes the collectors' files.
func (s *session) close() error {
	for _, c := range s.cs {
		if c.client != nil {
			c.client.Close()
		}
	}
	var first error
	for k, sk := range s.sinks {
		if sk.file != nil {
			if err := sk.file.Close(); err != nil && first == nil {
				first = fmt.Errorf("collector %s: %v", k, err)
			}
		}
		if sk.conn != nil {
			sk.conn.Close()
		}
	}
	return first
}

// push installs every switch's program, then runs them: each is saved
// (VERIFY_AND_SAVE) with its routes and clone session, in the file's
// order, and once all took theirs they are committed in the reverse
// order, the last hop first, so that no switch forwards into one that
// has no pipeline yet. A switch that refuses its program leaves none
// committed, and what the others took is removed again (close).
func (s *session) push() error {
	for _, c := range s.cs {
		if err := c.save(s.cfg, s.o); err != nil {
			return err
		}
	}
	for i := len(s.cs) - 1; i >= 0; i-- {
		c := s.cs[i]
		if err := c.client.Commit(); err != nil {
			return fmt.Errorf("switch %s: %v", c.name, err)
		}
	}
	return nil
}

// drain waits until every copy a switch sent (sent) reached the
// controller, and checks the collectors wrote them.
func (s *session) drain(sent func(c *control) uint64) error {
	deadline := time.Now().Add(s.o.Timeout)
	for _, c := range s.cs {
		for sent(c) > c.got.Load() {
			if time.Now().After(deadline) {
				return fmt.Errorf("switch %s sent %d copies; %d reached the controller within %v",
					c.name, sent(c), c.got.Load(), s.o.Timeout)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for k, sk := range s.sinks {
		if sk.err != nil {
			return fmt.Errorf("collector %s: %v", k, sk.err)
		}
	}
	return nil
}

// results reads every switch's functions.
func (s *session) results() (*Result, error) {
	res := &Result{}
	for _, c := range s.cs {
		r, err := c.read()
		if err != nil {
			return nil, err
		}
		res.Switches = append(res.Switches, r)
	}
	return res, nil
}

// Run pushes the programs to the network's switches, plays the trace
// through it and reads what the functions measured.
func Run(n *Network, progs []*Program, o RunOptions) (res *Result, err error) {
	o.defaults()
	s, err := begin(n.cfg, progs, o, func(c *control) error {
		c.sw = n.Switch(c.name)
		if c.sw == nil {
			return fmt.Errorf("no switch %s in the network", c.name)
		}
		c.addr = c.sw.Addr
		c.stamp = func() time.Time {
			n.mu.Lock()
			defer n.mu.Unlock()
			return n.Time(n.Now())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer s.end(&res, &err)
	var times []uint64
	for _, ch := range n.cfg.Changes {
		times = append(times, uint64(ch.at/time.Microsecond))
	}
	h := Hooks{Times: times,
		At: func(i int) error {
			ch := n.cfg.Changes[i]
			c := s.byName[ch.Switch]
			if c == nil {
				return nil
			}
			return c.setRoutes(ch.Routes)
		},
		Wait: func() error {
			for _, c := range s.cs {
				for c.sw.Dev.Stats().ToCPU > c.got.Load()+o.Lag {
					if err := c.client.Err(); err != nil {
						return fmt.Errorf("switch %s: %v", c.name, err)
					}
					time.Sleep(50 * time.Microsecond)
				}
			}
			return nil
		}}
	if err := n.Replay(h); err != nil {
		return nil, err
	}
	// The last copies.
	if err := s.drain(func(c *control) uint64 { return c.sw.Dev.Stats().ToCPU }); err != nil {
		return nil, err
	}
	return s.results()
}

// save connects to the switch and installs its program (saved, not yet
// run), routes and clone session.
func (c *control) save(cfg *Config, o RunOptions) error {
	p := c.prog
	cl, err := controller.Dial(controller.Options{Address: c.addr, DeviceID: c.device, Timeout: o.Timeout,
		OnPacket: c.packetIn})
	if err != nil {
		return fmt.Errorf("switch %s: %v", p.Name, err)
	}
	c.client = cl
	info := p4info.Of(p.Prog, p.Printed)
	config, err := p.DeviceConfig()
	if err != nil {
		return fmt.Errorf("switch %s: %v", p.Name, err)
	}
	if err := cl.SavePipeline(info, config); err != nil {
		return fmt.Errorf("switch %s: %v", p.Name, err)
	}
	if err := c.setRoutes(cfg.Routes[p.Name]); err != nil {
		return err
	}
	if len(p.Collectors) > 0 {
		if err := cl.Insert(controller.CloneSession(CloneSession, uint32(p.CPUPort))); err != nil {
			return fmt.Errorf("switch %s: %v", p.Name, err)
		}
	}
	return nil
}

// setRoutes writes routes into the switch's table.
func (c *control) setRoutes(routes map[uint16]uint16) error {
	p := c.prog
	for in, out := range routes {
		e, err := c.client.TableEntry(p.Printed.Name(p.Routes), p4gen.Entry{Match: []p4gen.Match{{Value: uint64(in)}},
			Action: p.SetPort, Args: []uint64{uint64(out)}}, p.Printed.Name(p.SetPort))
		if err != nil {
			return fmt.Errorf("switch %s: %v", p.Name, err)
		}
		if c.routes[in] {
			err = c.client.Modify(e)
		} else {
			err = c.client.Insert(e)
		}
		if err != nil {
			return fmt.Errorf("switch %s: route %d → %d: %v", p.Name, in, out, err)
		}
		c.routes[in] = true
	}
	return nil
}

// packetIn writes a copy to the collectors its mask names.
func (c *control) packetIn(pi controller.PacketIn) {
	mask := pi.Metadata["mask"]
	t := c.stamp()
	for i, s := range c.sinks {
		if mask&(1<<i) != 0 {
			s.write(pi.Payload, t)
		}
	}
	c.got.Add(1)
}

// read reads the functions' counters and registers into their Go halves.
func (c *control) read() (*SwitchResult, error) {
	p := c.prog
	r := &SwitchResult{Name: p.Name, Role: p.Role, Copies: c.got.Load()}
	if c.sw != nil {
		r.Stats = c.sw.Dev.Stats()
	} else {
		r.Ports = c.ports
		for _, pc := range c.ports {
			r.Stats.In += pc.In
			if pc.Port == p.CPUPort {
				r.Stats.ToCPU += pc.Out
			} else {
				r.Stats.Out += pc.Out
			}
		}
	}
	halves := map[string]functions.Function{}
	for _, n := range p.Nodes {
		if n.Collector != nil {
			continue
		}
		f := &FunctionResult{ID: n.ID, Label: n.Label}
		cells, err := c.client.ReadCounter(p.Printed.Name(n.Acct))
		if err != nil {
			return nil, fmt.Errorf("switch %s: %v", p.Name, err)
		}
		if len(cells) == 2 {
			f.Out, f.In = cells[1].Packets, cells[0].Packets+cells[1].Packets
		}
		ctx := n.Ctx
		ctx.StateOf = func(label string) (functions.Function, bool) {
			h, ok := halves[label]
			return h, ok
		}
		h, err := n.Class.New(&ctx)
		if err != nil {
			return nil, fmt.Errorf("switch %s: %s's Go half: %v", p.Name, n.ID, err)
		}
		if st, ok := h.(functions.Stateful); ok && st.MBuf() != nil {
			if err := c.fill(n, st.MBuf()); err != nil {
				return nil, err
			}
		}
		if s, ok := h.(functions.Summarizer); ok {
			f.Summary = s.Summary()
		}
		f.Half = h
		if n.Label != "" {
			halves[n.Label] = h
		}
		r.Functions = append(r.Functions, f)
	}
	return r, nil
}

// fill copies n's counters and registers into m.
func (c *control) fill(n *Node, m *buffers.MBuf) error {
	p := c.prog
	for _, ct := range p.Prog.Counters {
		if ct.Owner != n.ID || ct.FieldPackets == "" && ct.FieldBytes == "" {
			continue
		}
		cells, err := c.client.ReadCounter(p.Printed.Name(ct))
		if err != nil {
			return fmt.Errorf("switch %s: %v", p.Name, err)
		}
		for i, cell := range cells {
			put(m, ct.FieldPackets, ct.Base+i, cell.Packets)
			put(m, ct.FieldBytes, ct.Base+i, cell.Bytes)
		}
	}
	for _, rg := range p.Prog.Registers {
		if rg.Owner != n.ID || rg.Field == "" {
			continue
		}
		cells, err := c.client.ReadRegister(p.Printed.Name(rg))
		if err != nil {
			return fmt.Errorf("switch %s: %s's state is in register %s: %v", p.Name, n.ID, rg.Name, err)
		}
		for i, v := range cells {
			put(m, rg.Field, rg.Base+i, v)
		}
	}
	return nil
}

// put writes value i of the MBuf field named field ("" for none).
func put(m *buffers.MBuf, field string, i int, v uint64) {
	if field == "" {
		return
	}
	for _, f := range m.Fields() {
		if f.Name == field && i < max(f.Count, 1) {
			m.Put(f, i, v)
			return
		}
	}
}

// ErrNoTrace is returned by a network without a capture to replay.
var ErrNoTrace = errors.New("no port replays a capture (ports: {\"s1:1\": \"in:trace.pcap\"})")
