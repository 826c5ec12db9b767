package measure

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// P4Runs says why a measurement function with parameters p cannot run
// on a switch, or nil when it can: a window must be a power of two of the
// switch's µs clock (P4Window).
func P4Runs(p functions.Params) error {
	if !p.Has("window") {
		return nil
	}
	_, err := P4Window(p.Duration("window"))
	return err
}

// P4Window returns the shift of a window on a switch: a window is 2^shift
// µs, so that a packet's window is its time shifted right (a switch does
// not divide), aligned to multiples of itself as windows are on the host.
// Another window is refused with the nearest that runs.
func P4Window(d time.Duration) (int, error) {
	us := d / time.Microsecond
	if d%time.Microsecond == 0 && us > 0 && us&(us-1) == 0 && us < 1<<47 {
		return bits.TrailingZeros64(uint64(us)), nil
	}
	lo := time.Microsecond << (63 - bits.LeadingZeros64(uint64(max(us, 1))))
	return 0, fmt.Errorf("window=%v runs above the switch: a switch's windows are a power of two of its µs clock (window=%v or %v), a packet's window its time shifted right",
		d, lo, 2*lo)
}

// P4State is a measurement function's state on a switch, declared through
// it so that window= works for every class alike: without a window each
// register is one and each count a counter cell (which every P4Runtime
// target reads); with one, each register is two, one per half of the
// window's parity, counts are registers too, and the packets clear the
// idle half as p4gen.Window describes.
type P4State struct {
	b      *p4gen.Builder
	shift  int // −1: no window
	regs   []*P4Reg
	counts []*P4Count
	// With a window: its objects, and the packet's window, declared and
	// computed first, so that nothing the function computes delays them.
	w            *p4gen.Window
	mark, parity p4gen.Ref
	drained      [2]p4gen.Ref
}

// NewP4State returns the state of the function b lowers, whose
// parameters are p.
func NewP4State(b *p4gen.Builder, p functions.Params) (*P4State, error) {
	s := &P4State{b: b, shift: -1}
	if p.Has("window") {
		shift, err := P4Window(p.Duration("window"))
		if err != nil {
			return nil, err
		}
		s.shift = shift
		s.prelude()
	}
	return s, nil
}

// prelude declares the window's objects and adds the statements that find
// the packet's window, the marks the controller has drained, and a new
// window's digest.
func (s *P4State) prelude() {
	b := s.b
	c32 := func(v uint64) p4gen.Const { return p4gen.C(v, 32) }
	w := &p4gen.Window{Shift: s.shift}
	epoch, prev := b.Meta("epoch", 32), b.Meta("prev", 32)
	s.mark, s.parity = b.Meta("mark", 32), b.Meta("parity", 1)
	for h := range 2 {
		s.drained[h] = b.Meta(fmt.Sprint("drained", h), 32)
	}
	boundary := b.Register("window", 32, 1, "", 0)
	w.Digest = b.Digest("window", []p4gen.Field{{Name: "mark", Bits: 32}, {Name: "prev", Bits: 32}})
	w.Drain = b.Action("drain", []p4gen.Field{{Name: "even", Bits: 32}, {Name: "odd", Bits: 32}},
		p4gen.Assign{Dst: s.drained[0], X: p4gen.Ref{Path: "even", Bits: 32}},
		p4gen.Assign{Dst: s.drained[1], X: p4gen.Ref{Path: "odd", Bits: 32}})
	w.Drained = b.Table(&p4gen.Table{Name: "drained", Keys: []p4gen.TableKey{{X: s.parity, Match: p4gen.Exact}},
		Actions: []*p4gen.Action{w.Drain}, Default: w.Drain, DefaultArgs: []uint64{0, 0}, Size: 2})
	b.Add(
		p4gen.Assign{Dst: epoch, X: p4gen.Cast{Bits: 32, X: p4gen.B(p4gen.Shr, b.Time, p4gen.C(uint64(s.shift), b.Time.Bits))}},
		p4gen.Assign{Dst: s.mark, X: p4gen.B(p4gen.Add, epoch, c32(1))},
		p4gen.Assign{Dst: s.parity, X: p4gen.Slice{X: epoch, Hi: 0, Lo: 0}},
		p4gen.Apply{Table: w.Drained},
		p4gen.RMW{Reg: boundary, Index: c32(0), New: s.mark, OldTo: &prev},
		p4gen.If{Cond: p4gen.B(p4gen.Ne, prev, s.mark), Then: []p4gen.Stmt{p4gen.Digest{Type: w.Digest, Values: []p4gen.Expr{s.mark, prev}}}},
	)
	s.w = w
}

// Windowed reports whether the state is kept per window.
func (s *P4State) Windowed() bool { return s.shift >= 0 }

// P4Reg is a register of the function's state: one, or one per half.
type P4Reg struct {
	r    [2]*p4gen.Register
	size int
	// With a window: the index every access to half h uses (the measure
	// index for the packets of h's parity, the cell being cleared for the
	// others), and the measure index the body gave.
	idx     [2]p4gen.Ref
	measure p4gen.Expr
	s       *P4State
}

// In returns the register of half h (0 without a window).
func (r *P4Reg) In(h int) *p4gen.Register { return r.r[h] }

// RMW returns the read-modify-write a packet measured into half h makes
// of the register: a's Reg is set, and with a window its Index becomes
// the half's one index (every access to a register of one half, measure
// or clear, uses one index, so that they are one access in one stage).
func (r *P4Reg) RMW(h int, a p4gen.RMW) p4gen.RMW {
	a.Reg = r.r[h]
	if r.s.Windowed() {
		if r.measure != nil && r.measure != a.Index {
			panic(fmt.Sprintf("measure: register %s is measured at two indices", r.r[h].Name))
		}
		r.measure, a.Index = a.Index, r.idx[h]
	}
	return a
}

// Register declares a register of the state (see p4gen.Builder.Register).
func (s *P4State) Register(name string, width, size int, field string, base int) *P4Reg {
	r := &P4Reg{size: size, s: s}
	if !s.Windowed() {
		r.r[0] = s.b.Register(name, width, size, field, base)
	} else {
		for h, half := range []p4gen.Half{p4gen.HalfEven, p4gen.HalfOdd} {
			r.r[h] = s.b.Register(fmt.Sprintf("%s_%s", name, []string{"even", "odd"}[h]), width, size, field, base)
			r.r[h].Half = half
			r.idx[h] = s.b.Meta(fmt.Sprintf("%s_%s_idx", name, []string{"even", "odd"}[h]), 32)
		}
	}
	s.regs = append(s.regs, r)
	return r
}

// P4Count is a count of the state: packets into MBuf field packets, their
// bytes (packet_length) into field bytes ("" for none). It is a counter,
// which takes no stateful ALU and which every P4Runtime target reads;
// with a window, one per half, which the controller zeroes once it has
// read it (p4gen.Window).
type P4Count struct{ c [2]*p4gen.Counter }

// Count declares a count.
func (s *P4State) Count(name, packets, bytes string) *P4Count {
	t := p4gen.PacketsAndBytes
	switch {
	case bytes == "":
		t = p4gen.Packets
	case packets == "":
		t = p4gen.Bytes
	}
	c := &P4Count{}
	if !s.Windowed() {
		c.c[0] = s.b.Counter(name, 1, t, packets, bytes, 0)
	} else {
		for h, half := range []p4gen.Half{p4gen.HalfEven, p4gen.HalfOdd} {
			c.c[h] = s.b.Counter(fmt.Sprintf("%s_%s", name, []string{"even", "odd"}[h]), 1, t, packets, bytes, 0)
			c.c[h].Half = half
		}
	}
	s.counts = append(s.counts, c)
	return c
}

// Add returns the statements that count the packet in half h.
func (c *P4Count) Add(h int) []p4gen.Stmt {
	return []p4gen.Stmt{p4gen.Count{Counter: c.c[h], Index: p4gen.C(0, 32)}}
}

// Lower adds the function's statements: body(h), the statements of a
// packet measured into half h (0 without a window; with one, the body is
// given twice, once per half, so that each register is accessed once on
// every path). body must declare nothing: declare the state and
// metadata first.
func (s *P4State) Lower(body func(h int) []p4gen.Stmt) {
	b := s.b
	if !s.Windowed() {
		b.Add(body(0)...)
		return
	}
	c32 := func(v uint64) p4gen.Const { return p4gen.C(v, 32) }
	w, mark, parity, drained := s.w, s.mark, s.parity, s.drained
	names := []string{"even", "odd"}
	n := 1
	for _, r := range s.regs {
		n = max(n, r.size)
	}
	var cursor [2]*p4gen.Register
	var held, cold [2]p4gen.Ref
	for h := range 2 {
		w.State[h] = b.Register("state_"+names[h], 32, 1, "", 0)
		cursor[h] = b.Register("cursor_"+names[h], 64, 1, "", 0)
		held[h], cold[h] = b.Meta("held_"+names[h], 32), b.Meta("cursor_"+names[h], 64)
	}
	measuring := b.Meta("measuring", 1)
	w.Dropped = b.Counter("lost", 1, p4gen.Packets, "", "", 0)
	hi := func(x p4gen.Expr) p4gen.Expr { return p4gen.Slice{X: x, Hi: 63, Lo: 32} }
	lo := func(x p4gen.Expr) p4gen.Expr { return p4gen.Slice{X: x, Hi: 31, Lo: 0} }
	old64 := p4gen.Old{Bits: 64}
	is := func(x p4gen.Ref, v uint64) p4gen.Expr { return p4gen.B(p4gen.Eq, x, p4gen.C(v, x.Bits)) }
	// A half's cursor is (the mark of the window whose data it clears,
	// the next cell): a new drain mark d starts it at 0, and it is
	// finished at n. Every packet advances it while it is not finished:
	// the packets of the other parity while they measure theirs, those of
	// the half's own while they cannot measure (after an idle window: a
	// half is never measured into while its cursor runs).
	finished := func(c p4gen.Expr, d p4gen.Expr) p4gen.Expr {
		return p4gen.AllOf(p4gen.B(p4gen.Eq, hi(c), d), p4gen.B(p4gen.Ge, lo(c), c32(uint64(n))))
	}
	stepping := func(c p4gen.Expr, d p4gen.Expr) p4gen.Expr {
		return p4gen.AllOf(p4gen.B(p4gen.Ne, d, c32(0)), p4gen.Unary{Op: p4gen.Not, X: finished(c, d)})
	}
	var ss []p4gen.Stmt
	for h := range 2 {
		ss = append(ss, p4gen.RMW{Reg: cursor[h], Index: c32(0), Cond: stepping(old64, drained[h]), OldTo: &cold[h],
			New: p4gen.Mux{Cond: p4gen.B(p4gen.Ne, hi(old64), drained[h]), Then: p4gen.Concat(drained[h], c32(1)),
				Else: p4gen.Concat(hi(old64), p4gen.B(p4gen.Add, lo(old64), c32(1)))}})
	}
	// The half of the packet's parity is claimed when it holds none, this
	// window, or the window drained last once its cursor cleared it.
	claimable := func(h int, x p4gen.Expr) p4gen.Expr {
		return p4gen.AnyOf(p4gen.B(p4gen.Eq, x, c32(0)), p4gen.B(p4gen.Eq, x, mark),
			p4gen.AllOf(finished(cold[h], drained[h]), p4gen.B(p4gen.Eq, x, drained[h])))
	}
	for h := range 2 {
		ss = append(ss, p4gen.RMW{Reg: w.State[h], Index: c32(0), New: mark, OldTo: &held[h],
			Cond: p4gen.AllOf(is(parity, uint64(h)), claimable(h, p4gen.Old{Bits: 32}))})
	}
	ss = append(ss, p4gen.Assign{Dst: measuring, X: p4gen.Cast{Bits: 1, X: p4gen.Mux{Cond: is(parity, 0),
		Then: claimable(0, held[0]), Else: claimable(1, held[1])}}})
	bodies := [2][]p4gen.Stmt{body(0), body(1)}
	// One index per register and half: the measure's for the packets
	// measured into the half, the cursor's cell for the others.
	for _, r := range s.regs {
		if r.measure == nil {
			panic(fmt.Sprintf("measure: register %s is never measured", r.r[0].Name))
		}
		for h := range 2 {
			ss = append(ss, p4gen.Assign{Dst: r.idx[h], X: p4gen.Mux{Cond: p4gen.AllOf(is(parity, uint64(h)), is(measuring, 1)), Then: r.measure,
				Else: p4gen.Mux{Cond: p4gen.B(p4gen.Ne, hi(cold[h]), drained[h]), Then: c32(0), Else: lo(cold[h])}}})
		}
	}
	clear := func(h int) []p4gen.Stmt {
		var cs []p4gen.Stmt
		for _, r := range s.regs {
			reg := r.In(h)
			cs = append(cs, p4gen.If{Cond: p4gen.AllOf(stepping(cold[h], drained[h]), p4gen.B(p4gen.Lt, r.idx[h], c32(uint64(r.size)))),
				Then: []p4gen.Stmt{p4gen.RMW{Reg: reg, Index: r.idx[h], New: p4gen.C(0, reg.Width)}}})
		}
		return cs
	}
	half := func(h int) []p4gen.Stmt {
		return append([]p4gen.Stmt{p4gen.If{Cond: is(measuring, 1), Then: bodies[h],
			Else: append([]p4gen.Stmt{p4gen.Count{Counter: w.Dropped, Index: c32(0)}}, clear(h)...)}},
			clear(1-h)...)
	}
	b.Add(ss...)
	b.Add(p4gen.If{Cond: p4gen.B(p4gen.Eq, parity, p4gen.C(0, 1)), Then: half(0), Else: half(1)})
	b.Window = w
}
