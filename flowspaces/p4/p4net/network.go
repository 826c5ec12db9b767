package p4net

// The network: a PISA model per switch (pisa.Device) serving P4Runtime on
// its own address, the links between their ports, the hosts' ports
// (captures replayed in, frames recorded out), and one clock: the
// replay's. Frames move in time order: each step takes the earliest of
// the next frame of a capture, the next frame on a link, and the next
// departure from a switch's queues; a frame that leaves a port at t
// enters the linked port at t.

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/ffpf-go/ffpf/flowspaces/p4/pisa"
	"github.com/ffpf-go/ffpf/flowspaces/p4/ports"
	"github.com/ffpf-go/ffpf/flowspaces/p4/server"
)

// Network is the switches of a Config, running.
type Network struct {
	cfg      *Config
	Switches []*Switch
	by       map[string]*Switch
	links    map[PortRef]PortRef
	outs     map[PortRef]*ports.FileOut
	ins      []*inPort

	clock atomic.Uint64 // µs: the replay's

	mu       sync.Mutex
	pending  events
	seq      uint64
	unrouted map[PortRef]uint64
	outErr   error
	base     time.Time // the trace's first frame
}

// Switch is one switch of the network.
type Switch struct {
	Config SwitchConfig
	Dev    *pisa.Device
	Server *server.Server
	// Addr is the address it serves P4Runtime on.
	Addr string
	g    *grpc.Server
}

type inPort struct {
	at   PortRef
	file *ports.FileIn
	// the next frame
	frame []byte
	t     time.Time
	ok    bool
}

// event is a frame entering a port at a time.
type event struct {
	at    uint64
	seq   uint64
	to    PortRef
	frame []byte
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	return e[i].at < e[j].at || e[i].at == e[j].at && e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// Start starts the network's switches, each serving P4Runtime, and
// opens its hosts' ports; the trace waits for Replay.
func Start(cfg *Config, logf func(format string, args ...any)) (*Network, error) {
	if cfg.Elsewhere() {
		return nil, errors.New("the network's switches run elsewhere (p4runtime:): RunElsewhere controls them")
	}
	n := &Network{cfg: cfg, by: map[string]*Switch{}, links: map[PortRef]PortRef{}, outs: map[PortRef]*ports.FileOut{},
		unrouted: map[PortRef]uint64{}}
	ok := false
	defer func() {
		if !ok {
			n.Close()
		}
	}()
	for _, l := range cfg.Links {
		a, b, err := cfg.link(l)
		if err != nil {
			return nil, err
		}
		n.links[a], n.links[b] = b, a
	}
	for _, k := range sortedKeys(cfg.Ports) {
		p, _ := cfg.port(k)
		v := cfg.Ports[k]
		if f, found := strings.CutPrefix(v, "in:"); found {
			in, err := ports.OpenFileIn(cfg.path(f))
			if err != nil {
				return nil, fmt.Errorf("port %s: %v", p, err)
			}
			n.ins = append(n.ins, &inPort{at: p, file: in})
			continue
		}
		out, err := ports.CreateFileOut(cfg.path(strings.TrimPrefix(v, "out:")))
		if err != nil {
			return nil, fmt.Errorf("port %s: %v", p, err)
		}
		n.outs[p] = out
	}
	for _, sc := range cfg.Switches {
		s := &Switch{Config: sc, Dev: pisa.NewDevice(sc.CPUPort, sc.Rates, sc.Queue)}
		name := sc.Name
		s.Dev.OutAt = func(port uint16, frame []byte, at uint64) { n.leave(PortRef{name, port}, frame, at) }
		s.Server = server.New(s.Dev, server.Options{DeviceID: sc.DeviceID, Profile: sc.profile, Now: n.clock.Load})
		if logf != nil {
			s.Server.Log = func(format string, args ...any) { logf(name+": "+format, args...) }
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("switch %s cannot serve P4Runtime: %v", name, err)
		}
		s.g = grpc.NewServer()
		s.Server.Register(s.g)
		s.Addr = ln.Addr().String()
		go s.g.Serve(ln)
		n.Switches = append(n.Switches, s)
		n.by[name] = s
	}
	ok = true
	return n, nil
}

// Switch returns the switch named name.
func (n *Network) Switch(name string) *Switch { return n.by[name] }

// Now is the network's clock, in µs since one before the trace's first
// frame (a switch's time is never 0 at a packet: MAFIA's unset
// timestamp is 0).
func (n *Network) Now() uint64 { return n.clock.Load() }

// Time is the wall time of a time of the network's clock: the trace's.
// Call it under n.mu or after Replay.
func (n *Network) Time(at uint64) time.Time {
	return n.base.Add(time.Duration(at-1) * time.Microsecond)
}

// leave takes a frame leaving a switch's port at a time (under the
// switch's lock): onto the link, into a host's file, or nowhere.
func (n *Network) leave(p PortRef, frame []byte, at uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if to, ok := n.links[p]; ok {
		n.seq++
		heap.Push(&n.pending, event{at: at, seq: n.seq, to: to, frame: bytes.Clone(frame)})
		return
	}
	if out := n.outs[p]; out != nil {
		if err := out.Write(frame, n.Time(at)); err != nil && n.outErr == nil {
			n.outErr = fmt.Errorf("port %s: %v", p, err)
		}
		return
	}
	n.unrouted[p]++
}

// Hooks are what a replay calls: At before the first step at or after
// each time it asks for (the controller changing routes), Wait after
// each step (the controller keeping up with the copies).
type Hooks struct {
	// Times are the times (µs since the first frame) At is called at.
	Times []uint64
	At    func(i int) error
	Wait  func() error
}

// Replay plays the captures into their ports and moves every frame
// through the network until none is left.
func (n *Network) Replay(h Hooks) error {
	var base time.Time
	for _, in := range n.ins {
		if err := in.next(); err != nil {
			return err
		}
		if in.ok && (base.IsZero() || in.t.Before(base)) {
			base = in.t
		}
	}
	n.mu.Lock()
	n.base = base
	n.mu.Unlock()
	micros := func(t time.Time) uint64 { return uint64(t.Sub(base)/time.Microsecond) + 1 }
	hook := 0
	for {
		// The earliest step: a departure, a frame on a link, a capture's
		// next frame (in that order at one time).
		var best uint64
		kind := -1
		var dev *Switch
		for _, s := range n.Switches {
			if t, ok := s.Dev.Next(); ok && (kind < 0 || t < best) {
				best, kind, dev = t, 0, s
			}
		}
		n.mu.Lock()
		if len(n.pending) > 0 && (kind < 0 || n.pending[0].at < best) {
			best, kind = n.pending[0].at, 1
		}
		n.mu.Unlock()
		var in *inPort
		for _, p := range n.ins {
			if p.ok && (in == nil || p.t.Before(in.t)) {
				in = p
			}
		}
		if in != nil && (kind < 0 || micros(in.t) < best) {
			best, kind = micros(in.t), 2
		}
		if kind < 0 {
			return n.err()
		}
		for hook < len(h.Times) && h.Times[hook]+1 <= best {
			n.clock.Store(max(n.clock.Load(), h.Times[hook]+1))
			if err := h.At(hook); err != nil {
				return err
			}
			hook++
		}
		n.clock.Store(max(n.clock.Load(), best))
		switch kind {
		case 0:
			dev.Dev.Advance(best)
		case 1:
			n.mu.Lock()
			e := heap.Pop(&n.pending).(event)
			n.mu.Unlock()
			s := n.by[e.to.Switch]
			s.Dev.Receive(e.to.Port, e.frame, e.at)
		case 2:
			s := n.by[in.at.Switch]
			s.Dev.Receive(in.at.Port, in.frame, best)
			if err := in.next(); err != nil {
				return err
			}
		}
		if h.Wait != nil {
			if err := h.Wait(); err != nil {
				return err
			}
		}
	}
}

func (p *inPort) next() error {
	f, t, err := p.file.Next()
	if errors.Is(err, io.EOF) {
		p.ok = false
		return nil
	}
	if err != nil {
		return err
	}
	p.frame, p.t, p.ok = bytes.Clone(f), t, true
	return nil
}

func (n *Network) err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.outErr
}

// Unrouted lists the frames sent to ports neither linked nor a host's.
func (n *Network) Unrouted() map[PortRef]uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := map[PortRef]uint64{}
	for k, v := range n.unrouted {
		m[k] = v
	}
	return m
}

// Stats describes what each switch did, one line each.
func (n *Network) Stats() string {
	var b strings.Builder
	for _, s := range n.Switches {
		st := s.Dev.Stats()
		fmt.Fprintf(&b, "%s: %d frames in (%d before a pipeline), %d out, %d to the CPU, %d dropped by full queues\n",
			s.Config.Name, st.In, st.NoPipeline, st.Out, st.ToCPU, st.QueueDrops)
	}
	u := n.Unrouted()
	var lost []string
	for p, c := range u {
		lost = append(lost, fmt.Sprintf("%d to %s", c, p))
	}
	sort.Strings(lost)
	if len(lost) > 0 {
		fmt.Fprintf(&b, "sent nowhere: %s\n", strings.Join(lost, ", "))
	}
	return b.String()
}

// Close stops the switches and closes the hosts' ports.
func (n *Network) Close() error {
	var first error
	for _, s := range n.Switches {
		if s.g != nil {
			s.g.Stop()
		}
		s.Server.Close()
	}
	for _, in := range n.ins {
		in.file.Close()
	}
	for p, out := range n.outs {
		if err := out.Close(); err != nil && first == nil {
			first = fmt.Errorf("port %s: %v", p, err)
		}
	}
	n.outs = map[PortRef]*ports.FileOut{}
	return first
}
