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
	}
	return s, nil
}

// Windowed reports whether the state is kept per window.
func (s *P4State) Windowed() bool { return s.shift >= 0 }

// P4Reg is a register of the function's state: one, or one per half.
type P4Reg struct {
	r    [2]*p4gen.Register
	size int
}

// In returns the register of half h (0 without a window).
func (r *P4Reg) In(h int) *p4gen.Register { return r.r[h] }

// Register declares a register of the state (see p4gen.Builder.Register).
func (s *P4State) Register(name string, width, size int, field string, base int) *P4Reg {
	r := &P4Reg{size: size}
	if !s.Windowed() {
		r.r[0] = s.b.Register(name, width, size, field, base)
	} else {
		for h, half := range []p4gen.Half{p4gen.HalfEven, p4gen.HalfOdd} {
			r.r[h] = s.b.Register(fmt.Sprintf("%s_%s", name, []string{"even", "odd"}[h]), width, size, field, base)
			r.r[h].Half = half
		}
	}
	s.regs = append(s.regs, r)
	return r
}

// P4Count is a count of the state: packets into MBuf field packets, their
// bytes (packet_length) into field bytes ("" for none).
type P4Count struct {
	c              *p4gen.Counter
	packets, bytes *P4Reg
}

// Count declares a count: a counter cell without a window, registers of
// one cell per half with one.
func (s *P4State) Count(name, packets, bytes string) *P4Count {
	c := &P4Count{}
	if !s.Windowed() {
		t := p4gen.PacketsAndBytes
		switch {
		case bytes == "":
			t = p4gen.Packets
		case packets == "":
			t = p4gen.Bytes
		}
		c.c = s.b.Counter(name, 1, t, packets, bytes, 0)
	} else {
		if packets != "" {
			c.packets = s.Register(name+"_packets", 64, 1, packets, 0)
		}
		if bytes != "" {
			c.bytes = s.Register(name+"_bytes", 64, 1, bytes, 0)
		}
	}
	s.counts = append(s.counts, c)
	return c
}

// Add returns the statements that count the packet in half h.
func (c *P4Count) Add(h int) []p4gen.Stmt {
	if c.c != nil {
		return []p4gen.Stmt{p4gen.Count{Counter: c.c, Index: p4gen.C(0, 32)}}
	}
	var ss []p4gen.Stmt
	add := func(r *P4Reg, v p4gen.Expr) {
		if r != nil {
			ss = append(ss, p4gen.RMW{Reg: r.In(h), Index: p4gen.C(0, 32), New: p4gen.B(p4gen.Add, p4gen.Old{Bits: 64}, v)})
		}
	}
	add(c.packets, p4gen.C(1, 64))
	add(c.bytes, p4gen.Cast{Bits: 64, X: p4gen.Std("packet_length")})
	return ss
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
	w := &p4gen.Window{Shift: s.shift}
	epoch, mark, parity, prev := b.Meta("epoch", 32), b.Meta("mark", 32), b.Meta("parity", 1), b.Meta("prev", 32)
	var drained [2]p4gen.Ref
	for h := range 2 {
		drained[h] = b.Meta(fmt.Sprint("drained", h), 32)
	}
	held, heldOther := b.Meta("held", 32), b.Meta("held_other", 32)
	swept, own, ownOld, pos := b.Meta("swept", 64), b.Meta("own", 1), b.Meta("own_cursor", 64), b.Meta("pos", 32)
	n := 1
	for _, r := range s.regs {
		n = max(n, r.size)
	}
	names := []string{"even", "odd"}
	var sweep, mine [2]*p4gen.Register
	for h := range 2 {
		w.State[h] = b.Register("state_"+names[h], 32, 1, "", 0)
		sweep[h] = b.Register("sweep_"+names[h], 64, 1, "", 0)
		mine[h] = b.Register("own_"+names[h], 64, 1, "", 0)
	}
	boundary := b.Register("window", 32, 1, "", 0)
	w.Dropped = b.Counter("lost", 1, p4gen.Packets, "", "", 0)
	w.Digest = b.Digest("window", []p4gen.Field{{Name: "mark", Bits: 32}, {Name: "prev", Bits: 32}})
	w.Drain = b.Action("drain", []p4gen.Field{{Name: "even", Bits: 32}, {Name: "odd", Bits: 32}},
		p4gen.Assign{Dst: drained[0], X: p4gen.Ref{Path: "even", Bits: 32}},
		p4gen.Assign{Dst: drained[1], X: p4gen.Ref{Path: "odd", Bits: 32}})
	w.Drained = b.Table(&p4gen.Table{Name: "drained", Keys: []p4gen.TableKey{{X: parity, Match: p4gen.Exact}},
		Actions: []*p4gen.Action{w.Drain}, Default: w.Drain, DefaultArgs: []uint64{0, 0}, Size: 2})
	hi := func(x p4gen.Expr) p4gen.Expr { return p4gen.Slice{X: x, Hi: 63, Lo: 32} }
	lo := func(x p4gen.Expr) p4gen.Expr { return p4gen.Slice{X: x, Hi: 31, Lo: 0} }
	old64 := p4gen.Old{Bits: 64}
	// A sweep of a half is a cursor (mark of the window whose data it
	// clears, next cell): it starts at a new drain mark d and ends at n.
	finished := func(c p4gen.Expr, d p4gen.Expr) p4gen.Expr {
		return p4gen.AllOf(p4gen.B(p4gen.Eq, hi(c), d), p4gen.B(p4gen.Ge, lo(c), c32(uint64(n))))
	}
	step := func(d p4gen.Expr) p4gen.Expr { // a cursor's next value, clearing for d
		return p4gen.Mux{Cond: p4gen.B(p4gen.Ne, hi(old64), d), Then: p4gen.Concat(d, c32(1)),
			Else: p4gen.Mux{Cond: p4gen.B(p4gen.Lt, lo(old64), c32(uint64(n))),
				Then: p4gen.Concat(hi(old64), p4gen.B(p4gen.Add, lo(old64), c32(1))), Else: old64}}
	}
	at := func(c p4gen.Expr, d p4gen.Expr) p4gen.Expr { // the cell a step clears
		return p4gen.Mux{Cond: p4gen.B(p4gen.Ne, hi(c), d), Then: c32(0), Else: lo(c)}
	}
	clear := func(h int, cond p4gen.Expr) []p4gen.Stmt {
		var ss []p4gen.Stmt
		for _, r := range s.regs {
			reg := r.In(h)
			ss = append(ss, p4gen.If{Cond: p4gen.AllOf(cond, p4gen.B(p4gen.Lt, pos, c32(uint64(r.size)))),
				Then: []p4gen.Stmt{p4gen.RMW{Reg: reg, Index: pos, New: p4gen.C(0, reg.Width)}}})
		}
		return ss
	}
	half := func(h int) []p4gen.Stmt {
		q, dh, dq := 1-h, drained[h], drained[1-h]
		sweeping := func(held p4gen.Expr) p4gen.Expr {
			return p4gen.AllOf(p4gen.B(p4gen.Ne, dq, c32(0)), p4gen.B(p4gen.Eq, held, dq))
		}
		// The half is clean for a window when the packets of the other
		// parity swept it (sweep[h]) or its own packets did (own[h]), for
		// the drain mark of the window it holds.
		doneBy := func(c p4gen.Expr) p4gen.Expr {
			return p4gen.Mux{Cond: p4gen.B(p4gen.Ge, lo(c), c32(uint64(n))), Then: hi(c), Else: c32(0)}
		}
		claimable := func(x p4gen.Expr, ownCursor p4gen.Expr) p4gen.Expr {
			return p4gen.AnyOf(p4gen.B(p4gen.Eq, x, c32(0)), p4gen.B(p4gen.Eq, x, mark),
				p4gen.B(p4gen.Eq, x, doneBy(swept)), p4gen.B(p4gen.Eq, x, doneBy(ownCursor)))
		}
		// This half's own sweep runs while the half holds a drained
		// window the other sweep has not cleared: the packet is not
		// measured then, and clears a cell instead.
		ownActive := p4gen.AllOf(p4gen.B(p4gen.Ne, dh, c32(0)), p4gen.Unary{Op: p4gen.Not, X: finished(swept, dh)})
		ss := []p4gen.Stmt{
			p4gen.RMW{Reg: sweep[h], Index: c32(0), New: old64, OldTo: &swept},
			p4gen.RMW{Reg: mine[h], Index: c32(0), New: step(dh), OldTo: &ownOld,
				Cond: p4gen.AllOf(ownActive, p4gen.Unary{Op: p4gen.Not, X: finished(old64, dh)})},
			p4gen.Assign{Dst: own, X: p4gen.Cast{Bits: 1, X: p4gen.AllOf(ownActive, p4gen.Unary{Op: p4gen.Not, X: finished(ownOld, dh)})}},
			p4gen.RMW{Reg: w.State[h], Index: c32(0), New: mark, Cond: claimable(p4gen.Old{Bits: 32}, ownOld), OldTo: &held},
			p4gen.If{Cond: claimable(held, ownOld), Then: body(h), Else: append([]p4gen.Stmt{
				p4gen.Count{Counter: w.Dropped, Index: c32(0)},
				p4gen.Assign{Dst: pos, X: at(ownOld, dh)}},
				clear(h, p4gen.B(p4gen.Eq, own, p4gen.C(1, 1)))...)},
			// The other half, while it holds the window the controller has
			// read: one cell of each of its registers cleared.
			p4gen.RMW{Reg: w.State[q], Index: c32(0), New: p4gen.Old{Bits: 32}, OldTo: &heldOther},
			p4gen.RMW{Reg: sweep[q], Index: c32(0), New: step(dq), OldTo: &swept,
				Cond: p4gen.AllOf(sweeping(heldOther), p4gen.Unary{Op: p4gen.Not, X: finished(old64, dq)})},
			p4gen.Assign{Dst: pos, X: at(swept, dq)},
		}
		return append(ss, clear(q, p4gen.AllOf(sweeping(heldOther), p4gen.Unary{Op: p4gen.Not, X: finished(swept, dq)}))...)
	}
	b.Add(
		p4gen.Assign{Dst: epoch, X: p4gen.Cast{Bits: 32, X: p4gen.B(p4gen.Shr, b.Time, p4gen.C(uint64(s.shift), b.Time.Bits))}},
		p4gen.Assign{Dst: mark, X: p4gen.B(p4gen.Add, epoch, c32(1))},
		p4gen.Assign{Dst: parity, X: p4gen.Slice{X: epoch, Hi: 0, Lo: 0}},
		p4gen.Apply{Table: w.Drained},
		p4gen.RMW{Reg: boundary, Index: c32(0), New: mark, OldTo: &prev},
		p4gen.If{Cond: p4gen.B(p4gen.Ne, prev, mark), Then: []p4gen.Stmt{p4gen.Digest{Type: w.Digest, Values: []p4gen.Expr{mark, prev}}}},
		p4gen.If{Cond: p4gen.B(p4gen.Eq, parity, p4gen.C(0, 1)), Then: half(0), Else: half(1)},
	)
	b.Window = w
}
