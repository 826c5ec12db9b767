package p4

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// The test classes: a capture of an interface, a filter on the IP
// protocol, a packet counter (state in a P4 counter), a register of the
// largest packet length per source-port bucket (state in a register), and
// a sink that runs in Go only.

type goFunc struct {
	f    func(*buffers.Batch)
	mbuf *buffers.MBuf
}

func (g *goFunc) Process(b *buffers.Batch) {
	if g.f != nil {
		g.f(b)
	}
}

type statefulFunc struct{ *goFunc }

func (s statefulFunc) MBuf() *buffers.MBuf { return s.mbuf }

// lowering is a p4gen.Function from a func.
type lowering func(b *p4gen.Builder) error

func (l lowering) Lower(b *p4gen.Builder) error { return l(b) }

func testRegistry(t *testing.T) *functions.Registry {
	t.Helper()
	reg := functions.NewRegistry()
	p4 := []functions.Target{functions.TargetUser, functions.TargetP4}
	classes := []*functions.Class{
		{Name: "cap", Params: []functions.Param{{Name: "if", Type: functions.String, Required: true}},
			Interface: func(p functions.Params) string { return p.Str("if") },
			NewSource: func(*functions.Context) (functions.Source, error) { return nil, errors.New("no capture in tests") }},
		{Name: "proto", Params: []functions.Param{{Name: "n", Type: functions.Int, Required: true}},
			MinInputs: 1, MaxInputs: -1, Targets: p4,
			Code: func(t functions.Target, ctx *functions.Context) (any, error) {
				if t != functions.TargetP4 {
					return nil, functions.ErrNoCode
				}
				n := uint64(ctx.Params.Int("n"))
				return lowering(func(b *p4gen.Builder) error {
					proto, valid := p4gen.Hdr("ipv4.proto")
					b.Pass = p4gen.AllOf(valid, p4gen.B(p4gen.Eq, proto, p4gen.C(n, 8)))
					return nil
				}), nil
			},
			New: func(ctx *functions.Context) (functions.Function, error) { return &goFunc{}, nil }},
		{Name: "pcount", MinInputs: 1, MaxInputs: -1, Targets: p4,
			State: &functions.State{Fields: []functions.StateField{{Name: "packets", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum}}},
			Code: func(t functions.Target, ctx *functions.Context) (any, error) {
				if t != functions.TargetP4 {
					return nil, functions.ErrNoCode
				}
				return lowering(func(b *p4gen.Builder) error {
					c := b.Counter("c", 1, p4gen.Packets, "packets", "", 0)
					b.Add(p4gen.Count{Counter: c, Index: p4gen.C(0, 32)})
					return nil
				}), nil
			}},
		{Name: "maxlen", MinInputs: 1, MaxInputs: -1, Targets: p4,
			Params: []functions.Param{{Name: "cells", Type: functions.Int, Default: "16"}},
			State: &functions.State{Fields: []functions.StateField{{Name: "max", Type: buffers.U32, Merge: functions.MergeMax,
				LenOf: func(p functions.Params) int { return int(p.Int("cells")) }, LenDoc: "cells"}}},
			Code: func(t functions.Target, ctx *functions.Context) (any, error) {
				if t != functions.TargetP4 {
					return nil, functions.ErrNoCode
				}
				cells := int(ctx.Params.Int("cells"))
				return lowering(func(b *p4gen.Builder) error {
					idx := b.Meta("idx", 32)
					r := b.Register("max", 32, cells, "max", 0)
					n := p4gen.Std("packet_length")
					src, _ := p4gen.Hdr("eth.src")
					b.Add(p4gen.Hash{Dst: idx, Algo: p4gen.Identity, Data: []p4gen.Expr{src}, Max: uint64(cells)},
						p4gen.RMW{Reg: r, Index: idx, New: p4gen.Mux{Cond: p4gen.B(p4gen.Gt, n, p4gen.Old{Bits: 32}), Then: n, Else: p4gen.Old{Bits: 32}}})
					return nil
				}), nil
			}},
		// deep puts a chain of 13 dependent statements first in the
		// program, for every packet (as p4gen.StdLayers does).
		{Name: "deep", MinInputs: 1, MaxInputs: -1, Targets: p4,
			Code: func(t functions.Target, ctx *functions.Context) (any, error) {
				if t != functions.TargetP4 {
					return nil, functions.ErrNoCode
				}
				return lowering(func(b *p4gen.Builder) error {
					x := b.Meta("x", 32)
					chain := []p4gen.Stmt{p4gen.Assign{Dst: x, X: p4gen.Cast{Bits: 32, X: p4gen.Std("packet_length")}}}
					for range 12 {
						chain = append(chain, p4gen.If{Cond: p4gen.B(p4gen.Gt, x, p4gen.C(7, 32)),
							Then: []p4gen.Stmt{p4gen.Assign{Dst: x, X: p4gen.B(p4gen.Add, x, p4gen.C(1, 32))}}})
					}
					b.Prog.Ingress = append(chain, b.Prog.Ingress...)
					return nil
				}), nil
			},
			New: func(ctx *functions.Context) (functions.Function, error) { return &goFunc{}, nil }},
		{Name: "sink", MinInputs: 1, MaxInputs: -1,
			New: func(ctx *functions.Context) (functions.Function, error) { return &goFunc{}, nil }},
	}
	for _, c := range classes {
		if c.New == nil && c.NewSource == nil {
			cls := c
			c.New = func(ctx *functions.Context) (functions.Function, error) {
				m, err := cls.State.NewMBuf(ctx.Target, ctx.Params)
				if err != nil {
					return nil, err
				}
				return statefulFunc{&goFunc{mbuf: m}}, nil
			}
		}
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// testSwitch is userspace with a switch beneath it, front-panel ports
// swp1 (2) and swp2 (3), uplink its CPU port.
func testSwitch(t *testing.T, prof p4gen.Profile) (flowspaces.Flowspace, *Flowspace) {
	t.Helper()
	root := user.New(user.Options{Name: "user"})
	sw, err := New(Options{Name: "tor", Address: "127.0.0.1:1", DeviceID: 1, UplinkCPU: true,
		Ports: map[string]uint16{"swp1": 2, "swp2": 3}, Profile: prof})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flowspaces.Attach(root, sw, "CPU port", flowspaces.CopyOnce); err != nil {
		t.Fatal(err)
	}
	return root, sw
}

// frame is an Ethernet/IPv4 frame of protocol proto from source MAC
// byte mac, of n bytes.
func frame(proto byte, mac byte, n int) []byte {
	b := make([]byte, n)
	b[11] = mac
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	b[14] = 0x45
	binary.BigEndian.PutUint16(b[16:], uint16(n-14))
	b[22], b[23] = 64, proto
	return b
}

func byClass(nodes []*flowspaces.Node, class string) *flowspaces.Node {
	for _, n := range nodes {
		if n.Class.Name == class {
			return n
		}
	}
	return nil
}

// The program of a request's share on the switch, run on the reference
// semantics: the filter's packets go up through the CPU port with the
// mask of the outputs that passed them, the others are dropped; the
// accounting counters hold in and out of each function.
func TestProgramChainsAndAccounts(t *testing.T) {
	root, sw := testSwitch(t, p4gen.Tofino1())
	rt := flowgraph.New(flowgraph.Config{Registry: testRegistry(t), Hierarchy: root})
	defer rt.Close()
	if _, err := rt.Populate(`(cap,if=swp1) > f:(proto,n=6) > [(pcount) | (maxlen) | (sink)]`, flowgraph.RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range rt.Plan().Functions {
		if want := map[string]string{"sink": "user"}[f.Class]; want == "" && f.Flowspace != "tor" || want != "" && f.Flowspace != want {
			t.Errorf("%s placed in %s", f.ID, f.Flowspace)
		}
	}
	nodes := sw.Placed()
	if len(nodes) != 4 {
		t.Fatalf("placed on the switch: %d nodes, want cap, proto, pcount, maxlen", len(nodes))
	}
	proto := byClass(nodes, "proto")
	a, err := sw.Build(nodes, []*flowspaces.Node{proto})
	if err != nil {
		t.Fatal(err)
	}
	s := p4gen.NewSwitch(a.Prog)
	type pkt struct {
		data []byte
		port uint16
		up   bool
	}
	pkts := []pkt{{frame(6, 1, 60), 2, true}, {frame(17, 1, 70), 2, false}, {frame(6, 2, 200), 2, true},
		{frame(6, 1, 90), 3, false}, {frame(6, 1, 100), 2, true}}
	for i, p := range pkts {
		r, err := s.Process(p4gen.Arrival{Data: p.data, Port: p.port})
		if err != nil {
			t.Fatal(err)
		}
		if !p.up {
			if len(r.Out) != 0 {
				t.Errorf("packet %d left through port %d, want it dropped", i, r.Out[0].Port)
			}
			continue
		}
		if len(r.Out) != 1 || r.Out[0].Port != DefaultCPUPort {
			t.Fatalf("packet %d: %+v, want it on the CPU port", i, r.Out)
		}
		// packet_in: ingress_port (16 bits), mask (32 bits), then the frame.
		o := r.Out[0].Data
		if binary.BigEndian.Uint16(o) != p.port || binary.BigEndian.Uint32(o[2:]) != 1 || string(o[6:]) != string(p.data) {
			t.Errorf("packet %d up as % x", i, o[:6])
		}
	}
	counts := func(n *flowspaces.Node) []p4gen.CounterCell {
		l, _ := a.Lowering(n)
		return s.Counts[l.Acct]
	}
	if c := counts(byClass(nodes, "cap")); c[0].Packets != 4 {
		t.Errorf("capture of swp1 counted %d packets, want 4", c[0].Packets)
	}
	if c := counts(proto); c[0].Packets != 1 || c[1].Packets != 3 {
		t.Errorf("proto: filtered %d passed %d, want 1 and 3", c[0].Packets, c[1].Packets)
	}
	if c := counts(byClass(nodes, "pcount")); c[0].Packets != 0 || c[1].Packets != 3 {
		t.Errorf("pcount: filtered %d passed %d, want 0 and 3", c[0].Packets, c[1].Packets)
	}
	ml := byClass(nodes, "maxlen")
	l, _ := a.Lowering(ml)
	var reg *p4gen.Register
	for _, r := range a.Prog.Registers {
		if r.Owner == ml.ID {
			reg = r
		}
	}
	if reg == nil || l == nil {
		t.Fatal("maxlen has no register")
	}
	// MAC 1 (cell 1): TCP packets of 60 and 100 bytes from swp1; MAC 2: 200.
	if got := s.Regs[reg]; got[1] != 100 || got[2] != 200 {
		t.Errorf("maxlen cells %v, want 100 at 1 and 200 at 2", got[:3])
	}
}

// A function that does not fit the switch's resources is refused with
// the allocator's reason, and goes up with its dependants.
func TestPlacementByResources(t *testing.T) {
	prof := p4gen.Tofino1()
	prof.SRAMBlocks, prof.SRAMWidth = 2, 32 // 64 Kb of SRAM per stage
	root, _ := testSwitch(t, prof)
	rt := flowgraph.New(flowgraph.Config{Registry: testRegistry(t), Hierarchy: root})
	defer rt.Close()
	if _, err := rt.Populate(`(cap,if=swp1) > (proto,n=6) > (maxlen,cells=4096) > (pcount)`, flowgraph.RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	where := map[string]flowgraph.PlannedFunction{}
	for _, f := range rt.Plan().Functions {
		where[f.Class] = f
	}
	if where["proto"].Flowspace != "tor" || where["maxlen"].Flowspace != "user" || where["pcount"].Flowspace != "user" {
		t.Fatalf("proto in %s, maxlen in %s, pcount in %s; want tor, user, user",
			where["proto"].Flowspace, where["maxlen"].Flowspace, where["pcount"].Flowspace)
	}
	var reason string
	for _, r := range where["maxlen"].PassedOver {
		if r.Flowspace == "tor" {
			reason = r.Reason
		}
	}
	t.Log(reason)
	if !strings.Contains(reason, "register") || !strings.Contains(reason, "SRAM") {
		t.Errorf("maxlen passed over the switch because %q, want the register's SRAM named", reason)
	}
}

// Statements a lowering puts in the program for every packet (not in its
// Body) take stages too: a function whose shared statements do not fit
// is refused.
func TestSharedStatementsAllocated(t *testing.T) {
	root, _ := testSwitch(t, p4gen.Tofino1())
	rt := flowgraph.New(flowgraph.Config{Registry: testRegistry(t), Hierarchy: root})
	defer rt.Close()
	if _, err := rt.Populate(`(cap,if=swp1) > (proto,n=6) > (deep) > (pcount)`, flowgraph.RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range rt.Plan().Functions {
		if f.Class == "deep" {
			if f.Flowspace != "user" || len(f.PassedOver) == 0 || !strings.Contains(f.PassedOver[0].Reason, "stage 12") {
				t.Errorf("deep runs in %s (passed over %v); want it refused by the switch for want of stages", f.Flowspace, f.PassedOver)
			}
		}
	}
}
