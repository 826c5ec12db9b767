package p4net

// A network of switches that run elsewhere: ffpf p4 switch processes (or
// any P4Runtime switch) whose ports are their own, veth interfaces or
// capture files. The controller pushes each its role's program as for a
// switch in this process, but there is no shared clock and no trace to
// play: the first hop's process replays its capture once its pipeline
// runs (or traffic arrives on its interfaces), and the run is done when
// the switches have been quiet for a while: packets entered them, and
// then neither their port counters (which the programs of such switches
// count, Options.PortCounters) nor the copies received moved for
// RunOptions.Quiet. The copies are written with the wall clock's time.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ffpf-go/ffpf/flowspaces/p4/controller"
)

// PortCount is what a port of a switch that runs elsewhere counted.
type PortCount struct {
	Port uint16 `json:"port"`
	In   uint64 `json:"in"`
	Out  uint64 `json:"out"`
}

// RunElsewhere pushes the programs to switches that run elsewhere
// (Config.Elsewhere), waits until they are done (RunOptions.Quiet, or
// Stop) and reads what the functions measured. On an error, what the
// controllers installed is removed again; a switch that refuses its
// program leaves every switch without the path's pipeline.
func RunElsewhere(cfg *Config, progs []*Program, o RunOptions) (res *Result, err error) {
	if !cfg.Elsewhere() {
		return nil, fmt.Errorf("the network's switches run in this process: Start and Run run them")
	}
	o.defaults()
	for _, p := range progs {
		if p.PortIn == nil {
			return nil, fmt.Errorf("switch %s: its program counts no ports (Options.PortCounters)", p.Name)
		}
	}
	s, err := begin(cfg, progs, o, func(*control) error { return nil })
	if err != nil {
		return nil, err
	}
	defer s.end(&res, &err)
	var names []string
	for _, c := range s.cs {
		names = append(names, fmt.Sprintf("%s (%s, device %d)", c.name, c.addr, c.device))
	}
	o.Logf("%s run their programs; the run ends when their ports have been quiet for %v after packets crossed them, or on SIGINT",
		strings.Join(names, ", "), o.Quiet)
	if err := s.quiet(); err != nil {
		return nil, err
	}
	if err := s.readPorts(); err != nil {
		return nil, err
	}
	if err := s.drain(func(c *control) uint64 { return c.sent() }); err != nil {
		return nil, err
	}
	return s.results()
}

// quiet waits until packets have entered the switches and then their
// port counters and the copies received stood still for Quiet, or Stop.
func (s *session) quiet() error {
	tick := min(max(s.o.Quiet/5, 10*time.Millisecond), 250*time.Millisecond)
	var last []uint64
	start, changed := time.Now(), time.Now()
	moved, told := false, false
	for {
		for _, c := range s.cs {
			if err := c.client.Err(); err != nil {
				return fmt.Errorf("switch %s: %v", c.name, err)
			}
		}
		if err := s.readPorts(); err != nil {
			return err
		}
		var now []uint64
		for _, c := range s.cs {
			now = append(now, c.got.Load())
			for _, pc := range c.ports {
				now = append(now, uint64(pc.Port), pc.In, pc.Out)
				moved = moved || pc.In > 0
			}
		}
		if !slices.Equal(now, last) {
			last, changed = now, time.Now()
		}
		if moved && time.Since(changed) >= s.o.Quiet {
			return nil
		}
		if !moved && !told && time.Since(start) >= max(10*s.o.Quiet, 10*time.Second) {
			s.o.Logf("no packet has entered the switches in %v (a capture port of ffpf p4 switch replays once, for the first pipeline pushed)",
				time.Since(start).Round(time.Second))
			told = true
		}
		select {
		case <-s.o.Stop:
			return nil
		case <-time.After(tick):
		}
	}
}

// readPorts reads every switch's port counters.
func (s *session) readPorts() error {
	for _, c := range s.cs {
		p := c.prog
		in, err := c.client.ReadCounter(p.Printed.Name(p.PortIn))
		if err != nil {
			return fmt.Errorf("switch %s: %v", c.name, err)
		}
		out, err := c.client.ReadCounter(p.Printed.Name(p.PortOut))
		if err != nil {
			return fmt.Errorf("switch %s: %v", c.name, err)
		}
		c.ports = counts(in, out)
	}
	return nil
}

// counts is the ports that counted a packet, in order.
func counts(in, out []controller.Cell) []PortCount {
	var pcs []PortCount
	for i := 0; i < max(len(in), len(out)); i++ {
		var pc PortCount
		if i < len(in) {
			pc.In = in[i].Packets
		}
		if i < len(out) {
			pc.Out = out[i].Packets
		}
		if pc.In > 0 || pc.Out > 0 {
			pc.Port = uint16(i)
			pcs = append(pcs, pc)
		}
	}
	return pcs
}

// sent is the copies the switch sent its CPU port, as its counters said
// last.
func (c *control) sent() uint64 {
	for _, pc := range c.ports {
		if pc.Port == c.prog.CPUPort {
			return pc.Out
		}
	}
	return 0
}

// PortStats describes what the port counters of switches that run
// elsewhere counted, one line each, as Network.Stats does for a network
// in this process (the frames a switch dropped before its pipeline ran,
// or in a full queue, are its process's to say).
func (r *Result) PortStats() string {
	var b strings.Builder
	for _, s := range r.Switches {
		var ports []string
		for _, pc := range s.Ports {
			ports = append(ports, fmt.Sprintf("%d: %d in, %d out", pc.Port, pc.In, pc.Out))
		}
		fmt.Fprintf(&b, "%s: %d frames in, %d out, %d to the CPU", s.Name, s.Stats.In, s.Stats.Out, s.Stats.ToCPU)
		if len(ports) > 0 {
			fmt.Fprintf(&b, " (ports %s)", strings.Join(ports, "; "))
		}
		b.WriteString("\n")
	}
	return b.String()
}
