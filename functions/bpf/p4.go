package bpf

// The filter on a P4 switch. A switch cannot run libpcap's program: it
// has no loads at packet offsets, only the headers its parser extracted.
// So the program is executed symbolically, on the switch's headers:
// every path from its first instruction to a return becomes a conjunction
// of tests on header bits (a load's bytes are the bits of the chunks the
// parser extracts there; a jump is a test of those bits against a
// constant), together with the parser's choices the path needs (the
// ethertype, the IHL, the protocol that put a chunk at the byte loaded)
// and the chunks whose validity says the frame is long enough for a load
// (a load past the captured bytes rejects the packet in libpcap). The
// paths, in the program's order, make a decision list: one ternary table
// whose entries, highest priority first, are the paths and whose action
// passes or drops. The controller installs the entries: it is the ACL a
// switch programmer writes, a DNF of the filter with priorities.
//
// The verdict is libpcap's on every frame, by construction: each entry is
// a path, each test the path's own on the same bits. A filter is refused,
// with the reason, where that cannot hold: a load whose bytes the switch
// does not parse on some route (payload, IPv4 options, a header the
// parser does not know), a load that ends inside a chunk (a frame cut
// between its end and the chunk's would have libpcap's value and not the
// switch's), arithmetic on packet bytes other than masks and shifts (no
// ternary match expresses len - 10 > ip[0]), offsets computed from other
// than the IHL, backward jumps (protochain), the packet's direction, or
// more entries than a table holds.

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// MaxP4Entries bounds the entries of a filter's table on a switch: a
// quarter of a Tofino stage's TCAM rows (24 blocks of 512).
const MaxP4Entries = 3072

// maxP4Steps bounds the symbolic execution: instructions executed over
// all paths.
const maxP4Steps = 1 << 20

func newP4(ctx *functions.Context) (p4gen.Function, error) {
	if ctx.LinkType != functions.LinkEthernet {
		return nil, fmt.Errorf("a switch reads Ethernet frames, not %v", ctx.LinkType)
	}
	prog, err := compileContext(ctx)
	if err != nil {
		return nil, err
	}
	if prog.HasBackwardJumps() {
		return nil, errors.New("the filter jumps backwards (protochain): a switch's pipeline does not loop")
	}
	if asksDirection(prog.Instructions()) {
		return nil, errors.New("inbound and outbound ask a packet's direction, which a switch port does not give")
	}
	f := &p4Filter{insns: prog.Instructions()}
	// Decide now, on the standard headers, so that what the switch cannot
	// express is known at placement.
	if _, err := f.decide(p4gen.NewProgram("check")); err != nil {
		return nil, err
	}
	return f, nil
}

// p4Filter is the filter's program, lowered when the switch's program is
// built (its headers are the parser's).
type p4Filter struct{ insns []Instruction }

func (f *p4Filter) Lower(b *p4gen.Builder) error {
	dl, err := f.decide(b.Prog)
	if err != nil {
		return err
	}
	pass := b.Meta("pass", 1)
	accept := b.Action("accept", nil, p4gen.Assign{Dst: pass, X: p4gen.C(1, 1)})
	reject := b.Action("reject", nil, p4gen.Assign{Dst: pass, X: p4gen.C(0, 1)})
	verdict := func(ok bool) *p4gen.Action {
		if ok {
			return accept
		}
		return reject
	}
	t := &p4gen.Table{Name: "filter", Actions: []*p4gen.Action{accept, reject}, Default: verdict(dl.def),
		Size: max(len(dl.entries), 1)}
	for _, k := range dl.keys {
		t.Keys = append(t.Keys, p4gen.TableKey{X: k.x, Match: k.kind})
	}
	for i, e := range dl.entries {
		en := p4gen.Entry{Match: make([]p4gen.Match, len(dl.keys)), Priority: int32(len(dl.entries) - i), Action: verdict(e.pass)}
		for j, k := range dl.keys {
			if k.kind == p4gen.Range {
				en.Match[j] = p4gen.Match{Lo: e.lo[j], Hi: e.hi[j]}
			} else {
				en.Match[j] = p4gen.Match{Value: e.value[j], Mask: e.mask[j]}
			}
		}
		t.Entries = append(t.Entries, en)
	}
	b.Table(t)
	b.Add(p4gen.Apply{Table: t})
	b.Pass = p4gen.B(p4gen.Eq, pass, p4gen.C(1, 1))
	return nil
}

// Sources of the bits a path tests: a frame's bit (byte·8 + its position
// from the most significant), a bit of packet_length (srcLen + j, j from
// the least significant), or a header's validity (srcValid + its index).
const (
	srcLen   = 1 << 24
	srcValid = 1 << 25
)

// sbit is a bit of a value: a constant (k 0 or 1), or a source's bit,
// negated when neg (k −1).
type sbit struct {
	k   int8
	src int32
	neg bool
}

// sval is a 32-bit value, bit 0 the least significant.
type sval [32]sbit

func constant(v uint32) sval {
	var s sval
	for j := range s {
		s[j] = sbit{k: int8(v >> j & 1)}
	}
	return s
}

// cube is a conjunction of literals: source → value.
type cube map[int32]bool

// span is a header the parser extracts on a route, at bytes [start, end).
type span struct {
	h          *p4gen.Header
	start, end int
	varbit     bool
}

// state is a path's: the machine's registers and what the path knows.
type state struct {
	a, x  sval
	mem   [MemWords]sval
	facts cube           // bits the path has tested
	min   int            // bytes the frame has, by the loads done
	pick  map[string]int // parser states whose case the path chose (−1: default)
	route []span         // the parser's route as far as the path knows it
}

func (st *state) clone() *state {
	c := *st
	c.facts = make(cube, len(st.facts))
	for k, v := range st.facts {
		c.facts[k] = v
	}
	c.pick = make(map[string]int, len(st.pick))
	for k, v := range st.pick {
		c.pick[k] = v
	}
	return &c
}

// with returns a copy of st that also knows c.
func (st *state) with(c cube) *state {
	n := st.clone()
	for k, v := range c {
		n.facts[k] = v
	}
	return n
}

// ranges are a path's tests of values against intervals: the value of
// frame bits [E−w, E) (id E<<6 | w), or the packet's length (rngLen),
// within [lo, hi]. A switch matches them with range keys.
type ranges map[int32][2]uint64

const rngLen = -1

// entry is a path: its tests and verdict, and the route its bits are on.
type entry struct {
	lits  cube
	rng   ranges
	pass  bool
	route []span
}

// sym executes a program symbolically against a program's parser.
type sym struct {
	insns  []Instruction
	prog   *p4gen.Program
	valid  map[string]int32 // header → its validity source
	header []*p4gen.Header
	steps  int
}

// decision is the table a filter becomes.
type decision struct {
	keys    []tableKey
	entries []tableEntry
	def     bool
}

type tableKey struct {
	x    p4gen.Expr
	name string
	kind p4gen.MatchKind
}

type tableEntry struct {
	value, mask []uint64 // ternary keys
	lo, hi      []uint64 // range keys
	pass        bool
}

// decide executes the program on prog's parser and returns its table.
func (f *p4Filter) decide(prog *p4gen.Program) (*decision, error) {
	x := &sym{insns: f.insns, prog: prog, valid: map[string]int32{}}
	for i, h := range prog.Headers {
		x.valid[h.Name] = srcValid + int32(i)
		x.header = append(x.header, h)
	}
	es, err := x.run(0, &state{facts: cube{}, pick: map[string]int{}})
	if err != nil {
		return nil, err
	}
	return x.table(es)
}

// conj returns the entries of es that can hold with c and r, which are
// added to each.
func conj(es []entry, c cube, r ranges) []entry {
	out := es[:0:0]
next:
	for _, e := range es {
		lits := make(cube, len(e.lits)+len(c))
		for k, v := range e.lits {
			lits[k] = v
		}
		for k, v := range c {
			if w, ok := lits[k]; ok && w != v {
				continue next
			}
			lits[k] = v
		}
		rng := e.rng
		if len(r) > 0 {
			rng = make(ranges, len(e.rng)+len(r))
			for k, v := range e.rng {
				rng[k] = v
			}
			for k, v := range r {
				if w, ok := rng[k]; ok {
					v = [2]uint64{max(v[0], w[0]), min(v[1], w[1])}
				}
				if v[0] > v[1] {
					continue next
				}
				rng[k] = v
			}
		}
		out = append(out, entry{lits: lits, rng: rng, pass: e.pass, route: e.route})
	}
	return out
}

func leaf(st *state, pass bool) []entry { return []entry{{lits: cube{}, pass: pass, route: st.route}} }

// tests reports whether an entry tests anything.
func (e *entry) tests() bool { return len(e.lits) > 0 || len(e.rng) > 0 }

var errTooMany = fmt.Errorf("the filter needs more than %d table entries on a switch", MaxP4Entries)

// choice is a decision among cubes (with ranges, when set), in order; els
// applies when none holds (nil: the last cube is taken to hold when the
// others do not).
type choice struct {
	cubes  []cube
	ranges []ranges
	next   []func(*state) ([]entry, error)
	els    func(*state) ([]entry, error)
}

// decideAmong runs a choice: the entries of each alternative that can
// hold, under its cube, in order.
func (x *sym) decideAmong(st *state, ch choice) ([]entry, error) {
	var out []entry
	for i, c := range ch.cubes {
		sure := true
		possible := true
		for k, v := range c {
			if w, ok := st.facts[k]; ok {
				if w != v {
					possible = false
				}
			} else {
				sure = false
			}
		}
		if !possible {
			continue
		}
		var r ranges
		if ch.ranges != nil {
			r = ch.ranges[i]
			sure = sure && len(r) == 0
		}
		last := ch.els == nil && i == len(ch.cubes)-1
		es, err := ch.next[i](st.with(c))
		if err != nil {
			return nil, err
		}
		if sure || last {
			return append(out, es...), nil
		}
		out = append(out, conj(es, c, r)...)
		if len(out) > MaxP4Entries {
			return nil, errTooMany
		}
	}
	if ch.els == nil {
		return out, nil
	}
	es, err := ch.els(st)
	if err != nil {
		return nil, err
	}
	out = append(out, es...)
	if len(out) > MaxP4Entries {
		return nil, errTooMany
	}
	return out, nil
}

// resolve replaces the bits of v the path knows by constants.
func (st *state) resolve(v sval) sval {
	for j, b := range v {
		if b.k < 0 {
			if w, ok := st.facts[b.src]; ok {
				v[j] = sbit{k: int8(boolBit(w != b.neg))}
			}
		}
	}
	return v
}

func boolBit(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// known returns v as a constant, if every bit is known.
func known(v sval) (uint32, bool) {
	var c uint32
	for j, b := range v {
		if b.k < 0 {
			return 0, false
		}
		c |= uint32(b.k) << j
	}
	return c, true
}

// bitIs is the literal that bit b has value want (b symbolic).
func bitIs(b sbit, want bool) (int32, bool) { return b.src, want != b.neg }

// eqCube returns the cube of v == k, false when a constant bit differs.
func eqCube(v sval, k, mask uint32) (cube, bool) {
	c := cube{}
	for j, b := range v {
		if mask>>j&1 == 0 {
			continue
		}
		want := k>>j&1 == 1
		if b.k >= 0 {
			if (b.k == 1) != want {
				return nil, false
			}
			continue
		}
		s, w := bitIs(b, want)
		if old, ok := c[s]; ok && old != w {
			return nil, false
		}
		c[s] = w
	}
	return c, true
}

// gtCubes returns cubes whose union is v > k, mutually exclusive.
func gtCubes(v sval, k uint32) []cube {
	var out []cube
	for j := 31; j >= 0; j-- {
		if k>>j&1 == 1 {
			continue
		}
		// bits above j equal k's, bit j is 1 (k's is 0).
		hi := ^uint32(0) << (j + 1)
		if j == 31 {
			hi = 0
		}
		c, ok := eqCube(v, k|1<<j, hi|1<<j)
		if ok {
			out = append(out, c)
		}
	}
	return out
}

// run executes from pc on st and returns the entries of its paths.
func (x *sym) run(pc int, st *state) ([]entry, error) {
	for {
		if x.steps++; x.steps > maxP4Steps {
			return nil, errors.New("the filter has too many paths to become a switch's table")
		}
		if pc >= len(x.insns) {
			return nil, errors.New("the filter runs past its end")
		}
		in := x.insns[pc]
		switch in.Code & 0x07 {
		case classRET:
			if in.Code == classRET|retK {
				return leaf(st, in.K != 0), nil
			}
			c, _ := eqCube(st.resolve(st.a), 0, ^uint32(0))
			return x.decideAmong(st, choice{cubes: []cube{c},
				next: []func(*state) ([]entry, error){func(s *state) ([]entry, error) { return leaf(s, false), nil }},
				els:  func(s *state) ([]entry, error) { return leaf(s, true), nil }})
		case classLD, classLDX:
			es, done, err := x.load(pc, in, st)
			if done || err != nil {
				return es, err
			}
		case classST:
			st.mem[in.K%MemWords] = st.a
		case classSTX:
			st.mem[in.K%MemWords] = st.x
		case classMISC:
			if in.Code&0xf8 == miscTXA {
				st.a = st.x
			} else {
				st.x = st.a
			}
		case classALU:
			operand := constant(in.K)
			if in.Code&srcX != 0 {
				xv, ok := known(st.resolve(st.x))
				if !ok {
					return x.concretizeX(pc, st)
				}
				operand = constant(xv)
			}
			if err := st.alu(in.Code&0xf0, operand); err != nil {
				return nil, err
			}
		case classJMP:
			if in.Code&0xf0 == jmpJA {
				pc += 1 + int(in.K)
				continue
			}
			k := in.K
			if in.Code&srcX != 0 {
				xv, ok := known(st.resolve(st.x))
				if !ok {
					return x.concretizeX(pc, st)
				}
				k = xv
			}
			return x.jump(pc, in, k, st)
		}
		pc++
	}
}

// jump decides a conditional jump on A against k.
func (x *sym) jump(pc int, in Instruction, k uint32, st *state) ([]entry, error) {
	a := st.resolve(st.a)
	jt, jf := pc+1+int(in.Jt), pc+1+int(in.Jf)
	goTo := func(t int) func(*state) ([]entry, error) {
		return func(s *state) ([]entry, error) { return x.run(t, s) }
	}
	switch in.Code & 0xf0 {
	case jmpJEQ:
		c, ok := eqCube(a, k, ^uint32(0))
		if !ok {
			return x.run(jf, st)
		}
		return x.decideAmong(st, choice{cubes: []cube{c}, next: []func(*state) ([]entry, error){goTo(jt)}, els: goTo(jf)})
	case jmpJSET:
		c, ok := eqCube(a, 0, k) // the tested bits all clear: the jump's false branch
		if !ok {
			return x.run(jt, st)
		}
		return x.decideAmong(st, choice{cubes: []cube{c}, next: []func(*state) ([]entry, error){goTo(jf)}, els: goTo(jt)})
	case jmpJGT, jmpJGE:
		if in.Code&0xf0 == jmpJGE {
			if k == 0 {
				return x.run(jt, st)
			}
			k--
		}
		if id, w, ok := x.rangeOf(a, st); ok {
			if uint64(k) >= 1<<w-1 {
				return x.run(jf, st)
			}
			return x.decideAmong(st, choice{cubes: []cube{{}}, ranges: []ranges{{id: {uint64(k) + 1, 1<<w - 1}}},
				next: []func(*state) ([]entry, error){goTo(jt)}, els: goTo(jf)})
		}
		cs := gtCubes(a, k)
		next := make([]func(*state) ([]entry, error), len(cs))
		for i := range cs {
			next[i] = goTo(jt)
		}
		return x.decideAmong(st, choice{cubes: cs, next: next, els: goTo(jf)})
	}
	return nil, fmt.Errorf("the filter has an unknown jump (%#x)", in.Code)
}

// rangeOf says whether a is a whole header field on the path's route, or
// the packet's length: a value a range key matches. It returns the
// value's range id and width.
func (x *sym) rangeOf(a sval, st *state) (int32, uint, bool) {
	if a[0].k < 0 && a[0].src >= srcLen && a[0].src < srcValid {
		for j, b := range a {
			if b.k >= 0 || b.neg || b.src != srcLen+int32(j) {
				return 0, 0, false
			}
		}
		return rngLen, 32, true
	}
	w := 0
	for w < 32 && a[w].k < 0 {
		w++
	}
	if w == 0 {
		return 0, 0, false
	}
	end := a[0].src + 1
	for j, b := range a {
		switch {
		case j < w && (b.neg || b.src != end-1-int32(j) || b.src >= srcLen):
			return 0, 0, false
		case j >= w && b.k != 0:
			return 0, 0, false
		}
	}
	ref, bit, ok := x.fieldOf(end-1, st.route)
	if !ok || bit != 0 || ref.Bits != w {
		return 0, 0, false
	}
	return end<<6 | int32(w), uint(w), true
}

// alu applies an ALU operation to A, on masks and shifts of packet bits,
// or on known values.
func (st *state) alu(op uint16, k sval) error {
	a := st.resolve(st.a)
	kv, _ := known(k)
	if av, ok := known(a); ok {
		switch op {
		case aluADD:
			av += kv
		case aluSUB:
			av -= kv
		case aluMUL:
			av *= kv
		case aluDIV:
			if kv == 0 {
				return errors.New("the filter divides by zero")
			}
			av /= kv
		case aluMOD:
			if kv == 0 {
				return errors.New("the filter divides by zero")
			}
			av %= kv
		case aluNEG:
			av = -av
		case aluAND:
			av &= kv
		case aluOR:
			av |= kv
		case aluXOR:
			av ^= kv
		case aluLSH:
			av = shl(av, kv)
		case aluRSH:
			av = shr(av, kv)
		}
		st.a = constant(av)
		return nil
	}
	pow2 := kv != 0 && kv&(kv-1) == 0
	switch {
	case op == aluAND:
		for j := range a {
			if kv>>j&1 == 0 {
				a[j] = sbit{}
			}
		}
	case op == aluOR:
		for j := range a {
			if kv>>j&1 == 1 {
				a[j] = sbit{k: 1}
			}
		}
	case op == aluXOR:
		for j := range a {
			if kv>>j&1 == 1 {
				if a[j].k >= 0 {
					a[j].k ^= 1
				} else {
					a[j].neg = !a[j].neg
				}
			}
		}
	case op == aluLSH:
		a = shifted(a, int(kv))
	case op == aluMUL && pow2:
		a = shifted(a, bits.TrailingZeros32(kv))
	case op == aluRSH:
		a = shifted(a, -int(kv))
	case op == aluDIV && pow2:
		a = shifted(a, -bits.TrailingZeros32(kv))
	case op == aluMOD && pow2:
		for j := range a {
			if (kv-1)>>j&1 == 0 {
				a[j] = sbit{}
			}
		}
	case (op == aluADD || op == aluSUB) && kv == 0:
	default:
		return errors.New("the filter computes on packet bytes (arithmetic a switch's table cannot match)")
	}
	st.a = a
	return nil
}

// shifted is a shifted left by n bits (right for n < 0), zeros shifted
// in.
func shifted(a sval, n int) (r sval) {
	for j := range r {
		if i := j - n; i >= 0 && i < len(a) {
			r[j] = a[i]
		}
	}
	return r
}

func shl(v, n uint32) uint32 {
	if n >= 32 {
		return 0
	}
	return v << n
}

func shr(v, n uint32) uint32 {
	if n >= 32 {
		return 0
	}
	return v >> n
}

// concretizeX splits the path on the value of X's unknown bits (the IHL
// that libpcap's ldxb 4*([14]&0xf) loads), and goes on at pc with each.
func (x *sym) concretizeX(pc int, st *state) ([]entry, error) {
	xv := st.resolve(st.x)
	var srcs []int32
	for _, b := range xv {
		if b.k < 0 && !slices.Contains(srcs, b.src) {
			if b.src >= srcLen {
				return nil, errors.New("the filter loads at an offset computed from the packet's length")
			}
			srcs = append(srcs, b.src)
		}
	}
	if len(srcs) > 6 {
		return nil, errors.New("the filter loads at an offset computed from the packet (other than from the IPv4 header length)")
	}
	ch := choice{}
	for v := 0; v < 1<<len(srcs); v++ {
		c := cube{}
		for i, s := range srcs {
			c[s] = v>>i&1 == 1
		}
		ch.cubes = append(ch.cubes, c)
		ch.next = append(ch.next, func(s *state) ([]entry, error) { return x.run(pc, s) })
	}
	return x.decideAmong(st, ch)
}

// load executes a load instruction. done says the path was decided
// (entries returned): a load out of bounds rejects, and a load whose
// route or offset is not known splits the path and goes on in each part.
func (x *sym) load(pc int, in Instruction, st *state) ([]entry, bool, error) {
	mode, size := in.Code&0xe0, in.Code&0x18
	toX := in.Code&0x07 == classLDX
	set := func(v sval) {
		if toX {
			st.x = v
		} else {
			st.a = v
		}
	}
	switch mode {
	case modeIMM:
		set(constant(in.K))
		return nil, false, nil
	case modeLEN:
		var v sval
		for j := range v {
			v[j] = sbit{k: -1, src: srcLen + int32(j)}
		}
		set(v)
		return nil, false, nil
	case modeMEM:
		set(st.mem[in.K%MemWords])
		return nil, false, nil
	}
	n := map[uint16]int{sizeW: 4, sizeH: 2, sizeB: 1}[size]
	off := uint64(in.K)
	if mode == modeIND {
		xv, ok := known(st.resolve(st.x))
		if !ok {
			es, err := x.concretizeX(pc, st)
			return es, true, err
		}
		off += uint64(xv)
	}
	if mode == modeMSH {
		n = 1
	}
	if in.K >= 1<<31 {
		return nil, true, fmt.Errorf("the filter reads an ancillary field (offset %d), which a switch does not have", int32(in.K))
	}
	if off+uint64(n) > 1<<16 {
		return leaf(st, false), true, nil // past any frame: rejected
	}
	es, v, done, err := x.read(pc, st, int(off), n)
	if done || err != nil {
		return es, true, err
	}
	if mode == modeMSH {
		var xv sval
		for j := range xv {
			xv[j] = sbit{}
		}
		for i := 0; i < 4; i++ {
			xv[2+i] = v[i]
		}
		st.x = xv
		return nil, false, nil
	}
	set(v)
	return nil, false, nil
}

// read returns the value of bytes [off, off+n) of the frame on the
// path's route, splitting the path where the route is not known and
// rejecting it where the frame is too short.
func (x *sym) read(pc int, st *state, off, n int) ([]entry, sval, bool, error) {
	end := off + n
	route, split, err := x.walk(st, end)
	if err != nil {
		return nil, sval{}, true, err
	}
	if split != nil {
		es, err := x.decideAmong(st, *split(pc))
		return es, sval{}, true, err
	}
	if len(route) > len(st.route) {
		st.route = route // the longer: both are the parser's route for the path
	}
	// The chunks that hold the bytes: whole ones, each extracted whenever
	// the frame holds the bytes (it ends at the load's end, or before the
	// bytes the path knows the frame has).
	var last *span
	for i := range route {
		s := &route[i]
		if s.end <= off || s.start >= end {
			continue
		}
		if s.varbit {
			return nil, sval{}, true, fmt.Errorf("the filter reads bytes %d to %d, in %s, which a switch does not parse into fields", off, end-1, describeHeader(s.h.Name))
		}
		last = s
	}
	if last == nil || last.end < end {
		return nil, sval{}, true, fmt.Errorf("the filter reads bytes %d to %d, past the headers a switch parses", off, end-1)
	}
	if last.end > max(end, st.min) {
		return nil, sval{}, true, fmt.Errorf("the filter reads bytes %d to %d, which end inside the switch's chunk %s (bytes %d to %d): a frame cut in between has them for libpcap and not for the switch",
			off, end-1, last.h.Name, last.start, last.end-1)
	}
	var v sval
	for j := range v {
		v[j] = sbit{}
		if j < 8*n {
			byteAt := off + n - 1 - j/8
			v[j] = sbit{k: -1, src: int32(byteAt*8 + 7 - j%8)}
		}
	}
	if end <= st.min {
		return nil, v, false, nil
	}
	// Out of bounds: rejected. In bounds: on, knowing the frame's length.
	short := cube{x.valid[last.h.Name]: false}
	es, err := x.decideAmong(st, choice{cubes: []cube{short},
		next: []func(*state) ([]entry, error){func(s *state) ([]entry, error) { return leaf(s, false), nil }},
		els: func(s *state) ([]entry, error) {
			s = s.with(cube{x.valid[last.h.Name]: true})
			s.min = end
			return x.run(pc, s)
		}})
	return es, sval{}, true, err
}

func describeHeader(name string) string {
	switch {
	case name == "ipv4_opts":
		return "the IPv4 options"
	case len(name) > 3 && name[:3] == "ext":
		return "an IPv6 extension header"
	}
	return name
}

// walk follows the parser on the path's frame until it has extracted
// the bytes before need. It returns the route, or, where the route
// depends on bits the path does not know, the split that chooses it.
func (x *sym) walk(st *state, need int) ([]span, func(pc int) *choice, error) {
	ps := x.prog.Parser[0]
	off := 0
	var route []span
	for {
		for i, name := range ps.Extract {
			h := x.prog.Header(name)
			n := h.Type.Bits()
			varbit := false
			for _, f := range h.Type.Fields {
				varbit = varbit || f.Var
			}
			if i == len(ps.Extract)-1 && ps.VarBits != nil {
				v, unknown := x.eval(ps.VarBits, route, st)
				if unknown != nil {
					return nil, x.splitOn(st, route, *unknown), nil
				}
				n += int(v)
			}
			if n%8 != 0 {
				return nil, nil, fmt.Errorf("header %s is not whole bytes", name)
			}
			route = append(route, span{h: h, start: off, end: off + n/8, varbit: varbit})
			off += n / 8
			if off >= need {
				return route, nil, nil
			}
		}
		next := ps.Default
		if len(ps.Select) > 0 {
			k, picked := st.pick[ps.Name]
			if !picked {
				var undecided []int
				k = -1
			cases:
				for ci, c := range ps.Cases {
					cb, possible := x.caseCube(ps, c, route)
					if !possible {
						continue
					}
					sure := true
					for s, v := range cb {
						if w, ok := st.facts[s]; !ok {
							sure = false
						} else if w != v {
							continue cases
						}
					}
					if sure && len(undecided) == 0 {
						k = ci
						break
					}
					undecided = append(undecided, ci)
					if sure {
						break
					}
				}
				if len(undecided) > 0 {
					return nil, x.splitCases(ps, route, undecided), nil
				}
			}
			if k >= 0 {
				next = ps.Cases[k].Next
			}
		}
		if next == p4gen.Accept || next == p4gen.Reject {
			return route, nil, nil
		}
		for _, s := range x.prog.Parser {
			if s.Name == next {
				ps = s
			}
		}
	}
}

// field returns the frame bits of a header field on route, most
// significant first.
func (x *sym) field(r p4gen.Ref, route []span) ([]int32, bool) {
	for _, s := range route {
		pre := "hdr." + s.h.Name + "."
		if len(r.Path) <= len(pre) || r.Path[:len(pre)] != pre {
			continue
		}
		at := 0
		for _, f := range s.h.Type.Fields {
			if f.Name == r.Path[len(pre):] {
				out := make([]int32, f.Bits)
				for i := range out {
					out[i] = int32(s.start*8 + at + i)
				}
				return out, true
			}
			at += f.Bits
		}
	}
	return nil, false
}

// caseCube is the cube of a parser case's values on the route's bits.
func (x *sym) caseCube(ps *p4gen.ParserState, c p4gen.Case, route []span) (cube, bool) {
	cb := cube{}
	for i, e := range ps.Select {
		r, ok := e.(p4gen.Ref)
		if !ok {
			return nil, false
		}
		fb, ok := x.field(r, route)
		if !ok {
			return nil, false
		}
		mask := r.Type().Mask()
		if c.Masks != nil {
			mask = c.Masks[i]
		}
		for j, src := range fb {
			bit := uint(len(fb) - 1 - j)
			if mask>>bit&1 == 1 {
				cb[src] = c.Values[i]>>bit&1 == 1
			}
		}
	}
	return cb, true
}

// splitCases is the split on a parser state's undecided cases, in order,
// then its default; a frame too short for the state's headers never
// reaches the transition, and is rejected (the load that needs it is out
// of bounds).
func (x *sym) splitCases(ps *p4gen.ParserState, route []span, cases []int) func(int) *choice {
	return func(pc int) *choice {
		lastValid := x.valid[route[len(route)-1].h.Name]
		ch := &choice{cubes: []cube{{lastValid: false}},
			next: []func(*state) ([]entry, error){func(s *state) ([]entry, error) { return leaf(s, false), nil }}}
		for _, ci := range cases {
			cb, _ := x.caseCube(ps, ps.Cases[ci], route)
			cb[lastValid] = true
			ci := ci
			ch.cubes = append(ch.cubes, cb)
			ch.next = append(ch.next, func(s *state) ([]entry, error) {
				s.pick[ps.Name] = ci
				return x.run(pc, s)
			})
		}
		ch.els = func(s *state) ([]entry, error) {
			s = s.with(cube{lastValid: true})
			s.pick[ps.Name] = -1
			return x.run(pc, s)
		}
		return ch
	}
}

// splitOn is the split on every value of a header field (the length of a
// varbit header that the route goes past).
func (x *sym) splitOn(st *state, route []span, r p4gen.Ref) func(int) *choice {
	return func(pc int) *choice {
		fb, _ := x.field(r, route)
		var own *span
		for i := range route {
			if fb[0] >= int32(route[i].start*8) && fb[0] < int32(route[i].end*8) {
				own = &route[i]
			}
		}
		valid := x.valid[own.h.Name]
		ch := &choice{cubes: []cube{{valid: false}},
			next: []func(*state) ([]entry, error){func(s *state) ([]entry, error) { return leaf(s, false), nil }}}
		for v := 0; v < 1<<len(fb); v++ {
			cb := cube{valid: true}
			for j, src := range fb {
				cb[src] = v>>(len(fb)-1-j)&1 == 1
			}
			ch.cubes = append(ch.cubes, cb)
			ch.next = append(ch.next, func(s *state) ([]entry, error) { return x.run(pc, s) })
		}
		return ch
	}
}

// eval evaluates a parser expression over the fields the path knows; it
// returns the field it does not know, if any.
func (x *sym) eval(e p4gen.Expr, route []span, st *state) (uint64, *p4gen.Ref) {
	switch e := e.(type) {
	case p4gen.Const:
		return e.Value, nil
	case p4gen.Ref:
		fb, ok := x.field(e, route)
		if !ok {
			return 0, &e
		}
		var v uint64
		for _, src := range fb {
			w, ok := st.facts[src]
			if !ok {
				return 0, &e
			}
			v = v<<1 | uint64(boolBit(w))
		}
		return v, nil
	case p4gen.Cast:
		v, u := x.eval(e.X, route, st)
		return v & e.Type().Mask(), u
	case p4gen.Binary:
		l, u := x.eval(e.L, route, st)
		if u != nil {
			return 0, u
		}
		r, u := x.eval(e.R, route, st)
		if u != nil {
			return 0, u
		}
		m := e.Type().Mask()
		switch e.Op {
		case p4gen.Add:
			return (l + r) & m, nil
		case p4gen.Sub:
			return (l - r) & m, nil
		case p4gen.Shl:
			return (l << r) & m, nil
		case p4gen.Shr:
			return l >> r, nil
		}
	}
	panic(fmt.Sprintf("bpf: a parser expression %T the filter cannot evaluate", e))
}

// table turns the paths into the table: its keys (the fields, validity
// bits and length the paths test) and entries, in the paths' order; the
// first path that tests nothing is the default (the paths after it are
// never taken), and the entries at the end that agree with it go.
func (x *sym) table(es []entry) (*decision, error) {
	d := &decision{}
	for i, e := range es {
		if !e.tests() {
			d.def = e.pass
			es = es[:i]
			break
		}
	}
	for len(es) > 0 && es[len(es)-1].pass == d.def {
		es = es[:len(es)-1]
	}
	if len(es) > MaxP4Entries {
		return nil, errTooMany
	}
	keyOf := map[string]int{}
	key := func(name string, xe p4gen.Expr, kind p4gen.MatchKind) int {
		if i, ok := keyOf[name]; ok {
			return i
		}
		keyOf[name] = len(d.keys)
		d.keys = append(d.keys, tableKey{x: xe, name: name, kind: kind})
		return len(d.keys) - 1
	}
	// A field that a path tests against a range is a range key; its bit
	// tests become ranges too.
	rangeRef := func(id int32, route []span) (p4gen.Expr, string, bool) {
		if id == rngLen {
			return p4gen.Std("packet_length"), "packet_length", true
		}
		ref, _, ok := x.fieldOf(id>>6-1, route)
		return ref, ref.Path, ok
	}
	for _, e := range es {
		for id := range e.rng {
			xe, name, ok := rangeRef(id, e.route)
			if !ok {
				return nil, fmt.Errorf("bpf: range %d is in no header of its route", id)
			}
			key(name, xe, p4gen.Range)
		}
	}
	type bitAt struct {
		key int
		bit uint // from the key's least significant
		set bool
	}
	rows := make([][]bitAt, len(es))
	for i, e := range es {
		for _, s := range sortedSrcs(e.lits) {
			b := bitAt{set: e.lits[s]}
			switch {
			case s >= srcValid:
				h := x.header[s-srcValid]
				b.key = key("valid "+h.Name, p4gen.Valid{Header: h.Name}, p4gen.Ternary)
			case s >= srcLen:
				b.key, b.bit = key("packet_length", p4gen.Std("packet_length"), p4gen.Ternary), uint(s-srcLen)
			default:
				ref, bit, ok := x.fieldOf(s, e.route)
				if !ok {
					return nil, fmt.Errorf("bpf: frame bit %d is in no header of its route", s)
				}
				b.key, b.bit = key(ref.Path, ref, p4gen.Ternary), bit
			}
			rows[i] = append(rows[i], b)
		}
	}
	for i, e := range es {
		te := tableEntry{value: make([]uint64, len(d.keys)), mask: make([]uint64, len(d.keys)),
			lo: make([]uint64, len(d.keys)), hi: make([]uint64, len(d.keys)), pass: e.pass}
		for j, k := range d.keys {
			if k.kind == p4gen.Range {
				te.hi[j] = k.x.Type().Mask()
			}
		}
		for _, b := range rows[i] {
			te.mask[b.key] |= 1 << b.bit
			if b.set {
				te.value[b.key] |= 1 << b.bit
			}
		}
		for id, r := range e.rng {
			_, name, _ := rangeRef(id, e.route)
			j := keyOf[name]
			te.lo[j], te.hi[j] = max(te.lo[j], r[0]), min(te.hi[j], r[1])
		}
		// Bit tests of a range key: an interval when they fix its top bits.
		for j, k := range d.keys {
			if k.kind != p4gen.Range || te.mask[j] == 0 {
				continue
			}
			full := k.x.Type().Mask()
			m := te.mask[j]
			free := full &^ m
			if free&(free+1) != 0 { // the free bits are not the low ones
				return nil, fmt.Errorf("the filter tests %s both against a range and by a mask a range cannot express", k.name)
			}
			te.lo[j], te.hi[j] = max(te.lo[j], te.value[j]), min(te.hi[j], te.value[j]|free)
			te.mask[j], te.value[j] = 0, 0
			if te.lo[j] > te.hi[j] {
				return nil, fmt.Errorf("bpf: an empty range on %s", k.name)
			}
		}
		d.entries = append(d.entries, te)
	}
	return d, nil
}

func sortedSrcs(c cube) []int32 {
	srcs := make([]int32, 0, len(c))
	for s := range c {
		srcs = append(srcs, s)
	}
	sort.Slice(srcs, func(i, j int) bool { return srcs[i] < srcs[j] })
	return srcs
}

// fieldOf returns the header field that holds frame bit s on route, and
// the bit's position in it from its least significant.
func (x *sym) fieldOf(s int32, route []span) (p4gen.Ref, uint, bool) {
	for _, sp := range route {
		if s < int32(sp.start*8) || s >= int32(sp.end*8) {
			continue
		}
		at := int(s) - sp.start*8
		for _, f := range sp.h.Type.Fields {
			if at < f.Bits && !f.Var {
				return p4gen.Ref{Path: "hdr." + sp.h.Name + "." + f.Name, Bits: f.Bits}, uint(f.Bits - 1 - at), true
			}
			at -= f.Bits
		}
	}
	return p4gen.Ref{}, 0, false
}
