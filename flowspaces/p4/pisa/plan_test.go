package pisa

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4gentest"
)

// A node and a plan take the cache lines planner's comment says.
func TestPlanSizes(t *testing.T) {
	if s := unsafe.Sizeof(pnode{}); s != 128 {
		t.Fatalf("a node is %d bytes", s)
	}
	if s := unsafe.Sizeof(plan{}); s > 64 {
		t.Fatalf("a plan is %d bytes", s)
	}
}

// Frames that take the standard parser down its corners: VLAN stacks of
// none to five tags, IPv4 of every IHL (bogus, options), first and later
// fragments, every transport, ARP, IPv6 with chains of extension headers
// (options, routing, a first and a later fragment, past the eighth),
// unknown ethertypes and next headers.
func cornerFrames(rng *rand.Rand) [][]byte {
	eth := func(tags int, etype uint16) []byte {
		b := []byte{0x02, 0, 0, 0, 0, byte(rng.IntN(256)), 0x02, 0, 0, 0, 1, byte(rng.IntN(256))}
		for i := range tags {
			b = binary.BigEndian.AppendUint16(b, uint16(p4gen.VLANTypes[(i+rng.IntN(3))%3]))
			b = append(b, byte(rng.IntN(256)), byte(rng.IntN(256)))
		}
		return binary.BigEndian.AppendUint16(b, etype)
	}
	l4 := func(proto byte) []byte {
		n := map[byte]int{6: 20, 17: 8, 1: 8, 58: 8, 132: 12}[proto]
		s := make([]byte, n+rng.IntN(6))
		for i := range s {
			s[i] = byte(rng.IntN(256))
		}
		return s
	}
	protos := []byte{6, 17, 1, 132, 58, 99}
	var out [][]byte
	for tags := range 6 {
		for _, ihl := range []int{5, 5, 0, 1, 2, 3, 4, 6, 7, 15} {
			for _, proto := range protos {
				frag := 0
				if rng.IntN(4) == 0 {
					frag = 1 + rng.IntN(8000)
				}
				ip := make([]byte, 4*max(ihl, 5))
				for i := range ip {
					ip[i] = byte(rng.IntN(256))
				}
				ip[0] = 0x40 | byte(ihl)
				binary.BigEndian.PutUint16(ip[6:], uint16(rng.IntN(8))<<13|uint16(frag))
				ip[9] = proto
				out = append(out, append(append(eth(tags, p4gen.EtherIPv4), ip...), l4(proto)...))
			}
		}
		out = append(out, append(eth(tags, p4gen.EtherARP), make([]byte, 28)...), append(eth(tags, 0x1234), 1, 2, 3, 4, 5, 6, 7, 8))
	}
	exts := []byte{p4gen.ExtHopByHop, p4gen.ExtRouting, p4gen.ExtDestOpts, p4gen.ExtFragment}
	for n := range 10 {
		for _, proto := range protos {
			var chain []byte
			for range n {
				chain = append(chain, exts[rng.IntN(len(exts))])
			}
			chain = append(chain, proto)
			ip := make([]byte, 40)
			for i := range ip {
				ip[i] = byte(rng.IntN(256))
			}
			ip[0], ip[6] = 0x60, chain[0]
			b := append(eth(rng.IntN(2), p4gen.EtherIPv6), ip...)
			for i, e := range chain[:n] {
				if e == p4gen.ExtFragment {
					off := uint16(0)
					if rng.IntN(3) == 0 {
						off = uint16(1 + rng.IntN(100))
					}
					b = append(b, chain[i+1], 0)
					b = binary.BigEndian.AppendUint16(b, off<<3|uint16(rng.IntN(2)))
					b = append(b, 1, 2, 3, 4)
					continue
				}
				l := rng.IntN(3)
				b = append(b, chain[i+1], byte(l))
				b = append(b, make([]byte, (l+1)*8-2)...)
			}
			out = append(out, append(b, l4(proto)...))
		}
	}
	return out
}

// cuts returns every k'th frame cut at every length, and the others
// whole.
func cuts(frames [][]byte, k int) [][]byte {
	var out [][]byte
	for i, f := range frames {
		if i%k != 0 {
			out = append(out, f)
			continue
		}
		for n := range len(f) + 1 {
			out = append(out, f[:n])
		}
	}
	return out
}

// twoModels loads prog twice: with plans, and without (every packet
// through the general parser).
func twoModels(t *testing.T, prog *p4gen.Program) (m, g *Model) {
	t.Helper()
	m, err := Load(prog, roomy)
	if err != nil {
		t.Fatal(err)
	}
	if g, err = Load(prog, roomy); err != nil {
		t.Fatal(err)
	}
	g.plans = planner{}
	return m, g
}

// plansAsReference runs frames (each from the port ports gives it)
// through a model with plans, a model without and the reference, twice
// (so that the first time's paths are plans the second time), and
// requires the same results of all three. It returns how many packets
// the model parsed the second time by the plan of their whole path, and
// by a plan of its start and the general parser.
func plansAsReference(t *testing.T, prog *p4gen.Program, frames [][]byte, port func(i int) uint16) (planned, resumed int) {
	t.Helper()
	if err := prog.Validate(); err != nil {
		t.Fatal(err)
	}
	m, g := twoModels(t, prog)
	ref := p4gen.NewSwitch(prog)
	for round := range 2 {
		for i, f := range frames {
			a := p4gen.Arrival{Data: f, Port: port(i), Time: uint64(i)}
			if round == 1 {
				p := m.newPkt()
				m.arrive(&p, a, true)
				switch r, _ := m.planned(&p); r {
				case planDone:
					planned++
				case planResumed:
					resumed++
				}
			}
			want, werr := ref.Process(a)
			for k, mm := range []*Model{m, g} {
				got, gerr := mm.Process(a)
				if (werr == nil) != (gerr == nil) {
					t.Fatalf("frame %d (%x) model %d: reference error %v, model %v", i, f, k, werr, gerr)
				}
				if werr != nil {
					continue
				}
				if d := diffResult(want, got); d != "" {
					t.Fatalf("round %d frame %d (%x) model %d: %s", round, i, f, k, d)
				}
			}
		}
	}
	for _, r := range prog.Registers {
		if fmt.Sprint(ref.Regs[r]) != fmt.Sprint(m.Register(r)) {
			t.Fatalf("register %s %v, model %v", r.Name, ref.Regs[r], m.Register(r))
		}
	}
	return planned, resumed
}

// everyField is the standard program with an ingress that adds one to
// every field of every valid header (the IPv4 checksum updated), so that
// the deparser writes each from what the parser loaded: a field loaded
// from the wrong bits leaves the wrong bytes.
func everyField() *p4gen.Program {
	prog := p4gen.NewProgram("every")
	prog.UpdateIPv4Checksum = true
	for _, h := range prog.Headers {
		var then []p4gen.Stmt
		for _, f := range h.Type.Fields {
			if !f.Var {
				r := p4gen.Ref{Path: "hdr." + h.Name + "." + f.Name, Bits: f.Bits}
				then = append(then, p4gen.Assign{Dst: r, X: p4gen.B(p4gen.Add, r, p4gen.C(1, f.Bits))})
			}
		}
		prog.Ingress = append(prog.Ingress, p4gen.If{Cond: p4gen.Valid{Header: h.Name}, Then: then})
	}
	prog.Ingress = append(prog.Ingress, p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)})
	return prog
}

// oneField changes the TTL alone: the deparser writes the other fields
// from the bytes where the parser found their headers (locate).
func oneField() *p4gen.Program {
	prog := p4gen.NewProgram("one")
	prog.UpdateIPv4Checksum = true
	ttl := p4gen.F("ipv4_ttl", "ttl")
	prog.Ingress = []p4gen.Stmt{
		p4gen.If{Cond: p4gen.Valid{Header: "ipv4_ttl"}, Then: []p4gen.Stmt{p4gen.Assign{Dst: ttl, X: p4gen.B(p4gen.Sub, ttl, p4gen.C(1, 8))}}},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)},
	}
	return prog
}

// dropped is the standard program with a deparser that leaves out
// header h: no packet that has it leaves as it came.
func dropped(h string) *p4gen.Program {
	prog := p4gen.NewProgram("dropped")
	prog.Deparse = slices.DeleteFunc(slices.Clone(prog.Deparse), func(d string) bool { return d == h })
	prog.Ingress = []p4gen.Stmt{p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)}}
	return prog
}

// Programs that read every field, one field, none (with a deparser that
// drops headers), and the sketches, on the parser's corners and every cut of them, give with plans what they give
// without and what the reference gives; most packets are parsed by
// plans.
func TestPlansAsReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	corners := cornerFrames(rng)
	frames := append(cuts(corners, 8), p4gentest.Frames(5, 600, 300)...)
	port := func(int) uint16 { return 1 }
	for _, c := range []struct {
		name string
		prog *p4gen.Program
	}{{"every field", everyField()}, {"one field", oneField()}, {"first header dropped", dropped("eth_dst_0")}, {"IPv4's second dropped", dropped("ipv4_tos")}, {"cms > hll", cmsHLL(t)}} {
		t.Run(c.name, func(t *testing.T) {
			planned, resumed := plansAsReference(t, c.prog, frames, port)
			if planned < len(frames)/4 || resumed < len(frames)/4 {
				t.Fatalf("of %d packets, %d parsed by plans, %d resumed", len(frames), planned, resumed)
			}
			t.Logf("of %d packets, %d parsed by plans, %d resumed", len(frames), planned, resumed)
		})
	}
}

// A parser whose selects read metadata (the ingress port), a field of a
// header its path may not extract (zero then), and keys from three
// places in the packet (matched key by key, not as two loads) gives with
// plans what it gives without.
func TestPlanSelectsAsReference(t *testing.T) {
	prog := p4gen.NewProgram("selects")
	prog.Parser = append([]*p4gen.ParserState(nil), prog.Parser...)
	state := func(name string) *p4gen.ParserState {
		for i, s := range prog.Parser {
			if s.Name == name {
				c := *s
				prog.Parser[i] = &c
				return &c
			}
		}
		t.Fatalf("no state %s", name)
		return nil
	}
	start := state("start")
	start.Select = append([]p4gen.Expr{p4gen.Std("ingress_port")}, start.Select...)
	var cases []p4gen.Case
	cases = append(cases, p4gen.Case{Values: []uint64{2, p4gen.EtherIPv4}, Next: p4gen.Accept}) // port 2's IPv4 is not parsed
	for _, c := range start.Cases {
		cases = append(cases, p4gen.Case{Values: []uint64{0, c.Values[0]}, Masks: []uint64{0, 0xffff}, Next: c.Next})
	}
	start.Cases = cases
	udp := state("parse_udp")
	udp.Select = []p4gen.Expr{p4gen.F("vlan0_type", "ether_type")} // on the path of tagged frames only
	udp.Cases = []p4gen.Case{{Values: []uint64{p4gen.EtherIPv4}, Next: p4gen.Reject}}
	tcp := state("parse_tcp")
	tcp.Select = []p4gen.Expr{p4gen.F("eth_type", "ether_type"), p4gen.F("tcp_flags", "flags"), p4gen.F("l4_dport", "dst_port")}
	tcp.Cases = []p4gen.Case{
		{Values: []uint64{p4gen.EtherIPv4, 2, 0}, Masks: []uint64{0xffff, 2, 0}, Next: p4gen.Reject}, // SYN
		{Values: []uint64{0, 0, 80}, Masks: []uint64{0, 0, 0xffff}, Next: p4gen.Reject},
	}
	tcp.Default = p4gen.Accept
	prog.Metadata = []p4gen.Field{{Name: "v4", Bits: 1}, {Name: "udp", Bits: 1}}
	v4, u := p4gen.Ref{Path: "meta.v4", Bits: 1}, p4gen.Ref{Path: "meta.udp", Bits: 1}
	d := &p4gen.DigestType{Name: "d_t", Fields: []p4gen.Field{{Name: "v4", Bits: 1}, {Name: "udp", Bits: 1}}}
	prog.Digests = []*p4gen.DigestType{d}
	prog.Ingress = []p4gen.Stmt{
		p4gen.Assign{Dst: v4, X: p4gen.Cast{Bits: 1, X: p4gen.Valid{Header: "ipv4_proto"}}},
		p4gen.Assign{Dst: u, X: p4gen.Cast{Bits: 1, X: p4gen.Valid{Header: "udp_csum"}}},
		p4gen.Digest{Type: d, Values: []p4gen.Expr{v4, u}},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	frames := append(cornerFrames(rng), p4gentest.Frames(6, 3000, 300)...)
	for _, f := range frames[:200] {
		frames = append(frames, f[:rng.IntN(len(f)+1)])
	}
	planned, _ := plansAsReference(t, prog, frames, func(i int) uint16 { return uint16(1 + i%3) })
	if planned < len(frames)/2 {
		t.Fatalf("%d of %d packets parsed by plans", planned, len(frames))
	}
	m, err := Load(prog, roomy)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[uint8]int{}
	for i, f := range frames {
		if _, err := m.Process(p4gen.Arrival{Data: f, Port: uint16(1 + i%3)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range m.plans.nodes {
		kinds[n.kind]++
	}
	if kinds[rawSelect] == 0 || kinds[keySelect] == 0 {
		t.Fatalf("nodes by kind %v: want nodes that select on two loads and on keys", kinds)
	}
}

// A packet that takes a plan's path up to a select and then another
// case (every case of every select of the IPv4/TCP path, between
// packets of the plan) is parsed as the reference parses it, and so is
// the plan's packet after it.
func TestPlanDiverges(t *testing.T) {
	base := []byte{0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 1, 2, 0x08, 0x00,
		0x45, 0, 0, 40, 0, 1, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 192, 168, 0, 1,
		0x04, 0x00, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0}
	set := func(f func(b []byte)) []byte {
		b := append([]byte(nil), base...)
		f(b)
		return b
	}
	var variants [][]byte
	for _, et := range []uint16{p4gen.EtherIPv6, 0x8100, 0x88a8, 0x9100, p4gen.EtherARP, p4gen.EtherRARP, 0x0801, 0} {
		variants = append(variants, set(func(b []byte) { binary.BigEndian.PutUint16(b[12:], et) }))
	}
	for ihl := range 16 {
		variants = append(variants, set(func(b []byte) { b[14] = 0x40 | byte(ihl) }))
	}
	for _, frag := range []uint16{1, 0x1fff, 0x2000, 0x4001} {
		variants = append(variants, set(func(b []byte) { binary.BigEndian.PutUint16(b[20:], frag) }))
	}
	for _, proto := range []byte{17, 1, 132, 58, 0, 255} {
		variants = append(variants, set(func(b []byte) { b[23] = proto }))
	}
	var frames [][]byte
	for _, v := range variants {
		frames = append(frames, base, v, base[:len(base)-1], v[:len(v)-7])
	}
	for _, prog := range []*p4gen.Program{everyField(), cmsHLL(t)} {
		planned, resumed := plansAsReference(t, prog, frames, func(int) uint16 { return 1 })
		if planned < len(variants) || resumed < len(variants) {
			t.Fatalf("%d packets parsed by plans, %d resumed", planned, resumed)
		}
	}
}

// loopProgram is a parser that loops: after Ethernet with ethertype
// 0x88b5 (and a 2-byte header of a state with no select, when pre), a
// state extracts a byte again while it is 0xaa (selecting on it and, when
// wide, on it cast to 64 bits: a key too wide for a word, which no plan
// takes). A digest sends the last byte up.
func loopProgram(pre, wide bool) *p4gen.Program {
	prog := p4gen.NewProgram("loop")
	bt := &p4gen.HeaderType{Name: "byte_t", Fields: []p4gen.Field{{Name: "b", Bits: 8}}}
	wt := &p4gen.HeaderType{Name: "word_t", Fields: []p4gen.Field{{Name: "w", Bits: 16}}}
	prog.HeaderTypes = append(prog.HeaderTypes, bt, wt)
	prog.Headers = append(prog.Headers, &p4gen.Header{Name: "pre", Type: wt}, &p4gen.Header{Name: "lp", Type: bt})
	prog.Deparse = append(prog.Deparse, "pre", "lp")
	prog.Parser = append([]*p4gen.ParserState(nil), prog.Parser...)
	start := *prog.Parser[0]
	first := "parse_loop"
	if pre {
		first = "parse_pre"
	}
	start.Cases = append([]p4gen.Case{{Values: []uint64{0x88b5}, Next: first}}, start.Cases...)
	prog.Parser[0] = &start
	b := p4gen.Ref{Path: "hdr.lp.b", Bits: 8}
	loop := &p4gen.ParserState{Name: "parse_loop", Extract: []string{"lp"}, Select: []p4gen.Expr{b},
		Cases: []p4gen.Case{{Values: []uint64{0xaa}, Next: "parse_loop"}}, Default: p4gen.Accept}
	if wide {
		loop.Select = append(loop.Select, p4gen.Cast{Bits: 64, X: b})
		loop.Cases[0].Values = []uint64{0xaa, 0xaa}
	}
	prog.Parser = append(prog.Parser, &p4gen.ParserState{Name: "parse_pre", Extract: []string{"pre"}, Default: "parse_loop"}, loop)
	meta := p4gen.Ref{Path: "meta.b", Bits: 8}
	prog.Metadata = []p4gen.Field{{Name: "b", Bits: 8}}
	d := &p4gen.DigestType{Name: "d_t", Fields: []p4gen.Field{{Name: "b", Bits: 8}}}
	prog.Digests = []*p4gen.DigestType{d}
	prog.Ingress = []p4gen.Stmt{
		p4gen.Assign{Dst: meta, X: b},
		p4gen.Digest{Type: d, Values: []p4gen.Expr{meta}},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)},
	}
	return prog
}

// A parser that loops gives with plans what it gives without, on loops
// of every length up to past the parser's bound on its steps, whole and
// cut, through a state with headers and no select or not: a packet the
// plans leave partway (too short for a node, or at a state no plan
// takes) is parsed on from the right state, bit and step.
func TestPlanLoop(t *testing.T) {
	for _, pre := range []bool{false, true} {
		frame := func(n int) []byte {
			f := []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0xb5}
			if pre {
				f = append(f, 7, 7)
			}
			for range n {
				f = append(f, 0xaa)
			}
			return append(f, 1, 2, 3)
		}
		var short, long [][]byte
		for n := range 70 {
			short = append(short, frame(n))
		}
		short = append(short, cuts(short, 3)...)
		for n := 240; n < 260; n++ {
			long = append(long, frame(n), frame(n)[:len(frame(n))-3])
		}
		for _, wide := range []bool{false, true} {
			prog := loopProgram(pre, wide)
			planned, resumed := plansAsReference(t, prog, short, func(int) uint16 { return 1 })
			if resumed == 0 || !wide && planned == 0 {
				t.Fatalf("pre %v wide %v: %d parsed by plans, %d resumed", pre, wide, planned, resumed)
			}
			// The reference spins where the model's steps end: loops
			// near the bound are compared with the general parser.
			m, g := twoModels(t, prog)
			loops, accepted := 0, 0
			for round := range 2 {
				for _, f := range append(short, long...) {
					a := p4gen.Arrival{Data: f, Port: 1}
					want, err := g.Process(a)
					if err != nil {
						t.Fatal(err)
					}
					perr, n := want.ParserError, len(want.Digests)
					got, err := m.Process(a)
					if err != nil {
						t.Fatal(err)
					}
					if got.ParserError != perr || len(got.Digests) != n || fmt.Sprint(got.Digests) != fmt.Sprint(want.Digests) {
						t.Fatalf("pre %v wide %v round %d frame of %d bytes: parser error %q, %v; with plans %q, %v",
							pre, wide, round, len(f), perr, want.Digests, got.ParserError, got.Digests)
					}
					switch {
					case len(f) > 250 && perr == errParserLoop.Error():
						loops++
					case len(f) > 250 && perr == "":
						accepted++
					}
				}
			}
			if loops == 0 || accepted == 0 {
				t.Fatalf("pre %v wide %v: of the long loops, %d past the parser's bound, %d accepted", pre, wide, loops, accepted)
			}
		}
	}
}

// A packet whose plan was not made (its need past any packet's) takes
// the plan of its path's start, and the general parser from there:
// the next state, or the end (a later fragment, an unknown ethertype)
// with the payload where the last node's headers end.
func TestPlanNotMade(t *testing.T) {
	prog := everyField()
	frames := append(cornerFrames(rand.New(rand.NewPCG(9, 10))), p4gentest.Frames(7, 300, 30)...)
	m, err := Load(prog, roomy)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if _, err := m.Process(p4gen.Arrival{Data: f, Port: 1}); err != nil {
			t.Fatal(err)
		}
	}
	pre := map[int32]bool{}
	for _, c := range m.plans.cold {
		pre[c.pre] = true
	}
	unmade := 0
	for i := range m.plans.plans {
		if !pre[int32(i)] {
			m.plans.plans[i].need = math.MaxInt32
			unmade++
		}
	}
	ref := p4gen.NewSwitch(prog)
	resumed := 0
	for i, f := range frames {
		a := p4gen.Arrival{Data: f, Port: 1, Time: uint64(i)}
		p := m.newPkt()
		m.arrive(&p, a, true)
		if r, _ := m.planned(&p); r == planResumed {
			resumed++
		}
		asReference(t, ref, m, i, a)
	}
	if unmade == 0 || resumed < len(frames)/2 {
		t.Fatalf("%d plans not made, %d of %d packets resumed", unmade, resumed, len(frames))
	}
}

// asReference requires that m do with frame i what ref does.
func asReference(t *testing.T, ref *p4gen.Switch, m *Model, i int, a p4gen.Arrival) {
	t.Helper()
	want, _ := ref.Process(a)
	got, err := m.Process(a)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffResult(want, got); d != "" {
		t.Fatalf("frame %d (%x): %s", i, a.Data, d)
	}
}

// The tree and its plans are bounded: on frames of many shapes, the
// model holds at most maxPlanNodes nodes and maxPlans plans, and the
// packets past them are parsed as the reference parses them.
func TestPlansBounded(t *testing.T) {
	prog := everyField()
	rng := rand.New(rand.NewPCG(7, 8))
	var frames [][]byte
	for range 40 {
		frames = append(frames, cornerFrames(rng)...)
	}
	m, err := Load(prog, roomy)
	if err != nil {
		t.Fatal(err)
	}
	ref := p4gen.NewSwitch(prog)
	for i, f := range frames {
		a := p4gen.Arrival{Data: f, Port: 1, Time: uint64(i)}
		asReference(t, ref, m, i, a)
	}
	if len(m.plans.nodes) > maxPlanNodes || len(m.plans.plans) > maxPlans {
		t.Fatalf("%d nodes, %d plans", len(m.plans.nodes), len(m.plans.plans))
	}
	if len(m.plans.nodes) < 20 {
		t.Fatalf("only %d nodes: the frames do not take many paths", len(m.plans.nodes))
	}
	t.Logf("%d nodes, %d plans over %d frames", len(m.plans.nodes), len(m.plans.plans), len(frames))
}

// BenchmarkModelGeneralParser is BenchmarkModel with no plans: every
// packet goes through the general parser, state by state, the baseline
// that plans are measured against.
func BenchmarkModelGeneralParser(b *testing.B) {
	benchModel(b, maxVariants, func(m *Model) { m.plans = planner{} })
}
