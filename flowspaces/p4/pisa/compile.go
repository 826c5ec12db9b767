package pisa

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// expr computes a value of the packet; op is a statement.
type (
	expr func(*pkt) uint64
	op   func(*pkt)
)

// pkt is one packet's state: its value slots and where its bytes are.
type pkt struct {
	v       []uint64
	data    []byte
	payload int     // offset of the bytes past the parsed headers; -1: none
	varOff  []int32 // per header: its varbit field's bytes in data
	varLen  []int32
	varSet  []int32 // the headers whose varOff or varLen this packet set
	hdrAt   []int32 // per header: 1 + the bit offset it was extracted at; 0: not extracted (see locate)
	// visits are the parser's extractions in order, from which locate
	// sets hdrAt when something needs it (located).
	visits  []visit
	located bool
	vbits   []uint64 // the headers that are valid, a bit per header index
	old     uint64   // the register cell an RMW is updating
	clones  []uint32
	e2e     []e2eReq // egress-to-egress clones asked for
	err     error
	// dirty: a header field or a header's validity was written; ordered:
	// the parser extracted headers in the deparser's order. When the one
	// is false and the other true, the deparser gives back the bytes as
	// they came.
	dirty   bool
	ordered bool
	lastPos int
}

// e2eReq is an egress-to-egress clone a packet asked for: the session,
// and the slots of the metadata it preserves.
type e2eReq struct {
	session  uint32
	preserve []int
}

// action is a compiled action: its parameters' slots and its body.
type action struct {
	a      *p4gen.Action
	slots  []int
	masks  []uint64
	body   []op
	run    op   // seq(body)
	called bool // its body is being compiled (for call cycles)
}

func (a *action) call(p *pkt, args []uint64) {
	for i, s := range a.slots {
		p.put(s, args[i]&a.masks[i])
	}
	a.run(p)
}

// at is p.v[s], and put sets it, with no bounds check: every slot a
// compiled closure holds is one of the model's, resolved at load before
// any packet's slots are made (newPkt sizes them for all; newVariant
// refuses a variant whose compiling added one).
func (p *pkt) at(s int) uint64 {
	return *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(p.v)), uintptr(s)*8))
}

func (p *pkt) put(s int, v uint64) {
	*(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(p.v)), uintptr(s)*8)) = v
}

func run(ops []op, p *pkt) {
	for _, o := range ops {
		o(p)
		if p.err != nil {
			return
		}
	}
}

// seq is one op that runs ops in turn, stopping at an error, as run
// does: four at a time with no loop (a loop's index and bounds, kept
// across each call, cost as much as the call).
func seq(ops []op) op {
	switch len(ops) {
	case 0:
		return func(*pkt) {}
	case 1:
		return ops[0]
	case 2:
		a, b := ops[0], ops[1]
		return func(p *pkt) {
			if a(p); p.err == nil {
				b(p)
			}
		}
	case 3:
		a, b, c := ops[0], ops[1], ops[2]
		return func(p *pkt) {
			if a(p); p.err != nil {
				return
			}
			if b(p); p.err == nil {
				c(p)
			}
		}
	}
	a, b, c, d := ops[0], ops[1], ops[2], ops[3]
	if len(ops) == 4 {
		return func(p *pkt) {
			if a(p); p.err != nil {
				return
			}
			if b(p); p.err != nil {
				return
			}
			if c(p); p.err == nil {
				d(p)
			}
		}
	}
	rest := seq(ops[4:])
	return func(p *pkt) {
		if a(p); p.err != nil {
			return
		}
		if b(p); p.err != nil {
			return
		}
		if c(p); p.err != nil {
			return
		}
		if d(p); p.err == nil {
			rest(p)
		}
	}
}

// compiler resolves names to slots and turns the IR into closures.
type compiler struct {
	m       *Model
	slots   map[string]int // hdr.h.f, meta.f, standard_metadata.f
	actions map[*p4gen.Action]*action
	tables  map[*p4gen.Table]*table
	regs    map[*p4gen.Register]int
	ctrs    map[*p4gen.Counter]int
	digs    map[*p4gen.DigestType]int
	hdr     map[int]bool // slots of header fields
	used    map[int]bool // slots an expression reads or a statement writes
	// share: statements outside actions compile once for all the
	// variants (shared, by the statement's whole value), so that
	// variants that fold to the same code run the same closures and
	// fewer of them compete for the cache.
	share  bool
	shared map[string]op
}

// scope is what names mean where an expression is: an action's
// parameters, and whether Old (an RMW's cell) is readable.
type scope struct {
	params map[string]int
	inRMW  bool
}

func (c *compiler) slot(r p4gen.Ref, sc *scope) (int, error) {
	if sc != nil {
		if s, ok := sc.params[r.Path]; ok {
			return s, nil
		}
	}
	if s, ok := c.slots[r.Path]; ok {
		return s, nil
	}
	return 0, fmt.Errorf("%s is not declared", r.Path)
}

// refSlot returns the slot of x when it is a field (read).
func (c *compiler) refSlot(x p4gen.Expr, sc *scope) (int, bool) {
	r, ok := x.(p4gen.Ref)
	if !ok {
		return 0, false
	}
	s, err := c.slot(r, sc)
	if err != nil {
		return 0, false
	}
	c.used[s] = true
	return s, true
}

func (c *compiler) expr(x p4gen.Expr, sc *scope) (expr, error) {
	if bitwise(x) {
		return c.fused(x, sc)
	}
	return c.node(x, sc)
}

// node compiles x's own operation into a closure, its operands by expr.
func (c *compiler) node(x p4gen.Expr, sc *scope) (expr, error) {
	switch x := x.(type) {
	case p4gen.Const:
		v := x.Value
		return func(*pkt) uint64 { return v }, nil
	case p4gen.Ref:
		s, err := c.slot(x, sc)
		if err != nil {
			return nil, err
		}
		c.used[s] = true
		return func(p *pkt) uint64 { return p.at(s) }, nil
	case p4gen.Valid:
		h := c.m.header(x.Header)
		if h == nil {
			return nil, fmt.Errorf("header %s is not declared", x.Header)
		}
		w, sh := h.index>>6, uint(h.index&63)
		return func(p *pkt) uint64 { return p.vbits[w] >> sh & 1 }, nil
	case p4gen.Old:
		if sc == nil || !sc.inRMW {
			return nil, fmt.Errorf("a register's old value is read outside its read-modify-write")
		}
		return func(p *pkt) uint64 { return p.old }, nil
	case p4gen.Unary:
		a, err := c.operand(x.X, sc)
		if err != nil {
			return nil, err
		}
		if x.Op == p4gen.Not {
			return func(p *pkt) uint64 { return a.get(p) ^ 1 }, nil
		}
		m := x.Type().Mask()
		return func(p *pkt) uint64 { return ^a.get(p) & m }, nil
	case p4gen.Binary:
		return c.binary(x, sc)
	case p4gen.Cast:
		m := x.Type().Mask()
		if s, ok := c.refSlot(x.X, sc); ok {
			return func(p *pkt) uint64 { return p.at(s) & m }, nil
		}
		a, err := c.expr(x.X, sc)
		if err != nil {
			return nil, err
		}
		return func(p *pkt) uint64 { return a(p) & m }, nil
	case p4gen.Slice:
		if in, ok := x.X.(p4gen.Slice); ok { // x[h:l][h2:l2] is x[l+h2:l+l2]
			return c.expr(p4gen.Slice{X: in.X, Hi: in.Lo + x.Hi, Lo: in.Lo + x.Lo}, sc)
		}
		if s, ok := c.refSlot(x.X, sc); ok {
			lo, m := uint(x.Lo), x.Type().Mask()
			return func(p *pkt) uint64 { return p.at(s) >> (lo & 63) & m }, nil
		}
		a, err := c.expr(x.X, sc)
		if err != nil {
			return nil, err
		}
		lo, m := uint(x.Lo), x.Type().Mask()
		return func(p *pkt) uint64 { return a(p) >> (lo & 63) & m }, nil
	case p4gen.Mux:
		cond, a, err := c.operands(x.Cond, x.Then, sc)
		if err != nil {
			return nil, err
		}
		b, err := c.operand(x.Else, sc)
		if err != nil {
			return nil, err
		}
		return func(p *pkt) uint64 {
			if cond.get(p) != 0 {
				return a.get(p)
			}
			return b.get(p)
		}, nil
	}
	return nil, fmt.Errorf("unknown expression %T", x)
}

func b2u(c bool) uint64 {
	if c {
		return 1
	}
	return 0
}

func (c *compiler) binary(x p4gen.Binary, sc *scope) (expr, error) {
	m := x.L.Type().Mask()
	// A constant right operand is the common case (x + 1, x == 6, x >> 4):
	// one closure call fewer, two when the left is a field.
	if k, ok := x.R.(p4gen.Const); ok {
		r := k.Value
		if sl, ok := x.L.(p4gen.Slice); ok && (x.Op == p4gen.Eq || x.Op == p4gen.Ne) {
			if in, ok := sl.X.(p4gen.Slice); ok {
				sl = p4gen.Slice{X: in.X, Hi: in.Lo + sl.Hi, Lo: in.Lo + sl.Lo}
			}
			if s, ok := c.refSlot(sl.X, sc); ok { // a bit test: x[h:l] == k
				lo, sm := uint(sl.Lo), sl.Type().Mask()
				if x.Op == p4gen.Eq {
					return func(p *pkt) uint64 { return b2u(p.at(s)>>(lo&63)&sm == r) }, nil
				}
				return func(p *pkt) uint64 { return b2u(p.at(s)>>(lo&63)&sm != r) }, nil
			}
		}
		if s, ok := c.refSlot(x.L, sc); ok {
			switch x.Op {
			case p4gen.Eq:
				return func(p *pkt) uint64 { return b2u(p.at(s) == r) }, nil
			case p4gen.Ne:
				return func(p *pkt) uint64 { return b2u(p.at(s) != r) }, nil
			case p4gen.Lt:
				return func(p *pkt) uint64 { return b2u(p.at(s) < r) }, nil
			case p4gen.Gt:
				return func(p *pkt) uint64 { return b2u(p.at(s) > r) }, nil
			case p4gen.Le:
				return func(p *pkt) uint64 { return b2u(p.at(s) <= r) }, nil
			case p4gen.Ge:
				return func(p *pkt) uint64 { return b2u(p.at(s) >= r) }, nil
			case p4gen.Add:
				return func(p *pkt) uint64 { return (p.at(s) + r) & m }, nil
			}
		}
		a, err := c.operand(x.L, sc)
		if err != nil {
			return nil, err
		}
		switch x.Op {
		case p4gen.Add:
			return func(p *pkt) uint64 { return (a.get(p) + r) & m }, nil
		case p4gen.Sub:
			return func(p *pkt) uint64 { return (a.get(p) - r) & m }, nil
		case p4gen.And:
			return func(p *pkt) uint64 { return a.get(p) & r }, nil
		case p4gen.Or:
			return func(p *pkt) uint64 { return a.get(p) | r }, nil
		case p4gen.Eq:
			return func(p *pkt) uint64 { return b2u(a.get(p) == r) }, nil
		case p4gen.Ne:
			return func(p *pkt) uint64 { return b2u(a.get(p) != r) }, nil
		case p4gen.Lt:
			return func(p *pkt) uint64 { return b2u(a.get(p) < r) }, nil
		case p4gen.Gt:
			return func(p *pkt) uint64 { return b2u(a.get(p) > r) }, nil
		case p4gen.Le:
			return func(p *pkt) uint64 { return b2u(a.get(p) <= r) }, nil
		case p4gen.Ge:
			return func(p *pkt) uint64 { return b2u(a.get(p) >= r) }, nil
		case p4gen.Shl:
			if r >= 64 {
				return func(p *pkt) uint64 { return 0 }, nil
			}
			return func(p *pkt) uint64 { return a.get(p) << (r & 63) & m }, nil
		case p4gen.Shr:
			if r >= 64 {
				return func(p *pkt) uint64 { return 0 }, nil
			}
			return func(p *pkt) uint64 { return a.get(p) >> (r & 63) }, nil
		}
	}
	if f := c.slotBinary(x, sc); f != nil {
		return f, nil
	}
	a, b, err := c.operands(x.L, x.R, sc)
	if err != nil {
		return nil, err
	}
	switch x.Op {
	case p4gen.Add:
		return func(p *pkt) uint64 { return (a.get(p) + b.get(p)) & m }, nil
	case p4gen.Sub:
		return func(p *pkt) uint64 { return (a.get(p) - b.get(p)) & m }, nil
	case p4gen.SatAdd:
		return func(p *pkt) uint64 {
			a, b := a.get(p), b.get(p)
			if s := a + b; s < a || s > m {
				return m
			} else {
				return s
			}
		}, nil
	case p4gen.And:
		return func(p *pkt) uint64 { return a.get(p) & b.get(p) }, nil
	case p4gen.Or:
		return func(p *pkt) uint64 { return a.get(p) | b.get(p) }, nil
	case p4gen.Xor:
		return func(p *pkt) uint64 { return a.get(p) ^ b.get(p) }, nil
	case p4gen.Shl:
		return func(p *pkt) uint64 {
			a, b := a.get(p), b.get(p)
			if b >= 64 {
				return 0
			}
			return a << b & m
		}, nil
	case p4gen.Shr:
		return func(p *pkt) uint64 {
			a, b := a.get(p), b.get(p)
			if b >= 64 {
				return 0
			}
			return a >> b
		}, nil
	case p4gen.Eq:
		return func(p *pkt) uint64 { return b2u(a.get(p) == b.get(p)) }, nil
	case p4gen.Ne:
		return func(p *pkt) uint64 { return b2u(a.get(p) != b.get(p)) }, nil
	case p4gen.Lt:
		return func(p *pkt) uint64 { return b2u(a.get(p) < b.get(p)) }, nil
	case p4gen.Le:
		return func(p *pkt) uint64 { return b2u(a.get(p) <= b.get(p)) }, nil
	case p4gen.Gt:
		return func(p *pkt) uint64 { return b2u(a.get(p) > b.get(p)) }, nil
	case p4gen.Ge:
		return func(p *pkt) uint64 { return b2u(a.get(p) >= b.get(p)) }, nil
	case p4gen.LAnd:
		return func(p *pkt) uint64 {
			if a.get(p) == 0 {
				return 0
			}
			return b.get(p)
		}, nil
	case p4gen.LOr:
		return func(p *pkt) uint64 {
			if a.get(p) == 1 {
				return 1
			}
			return b.get(p)
		}, nil
	}
	return nil, fmt.Errorf("unknown operator %v", x.Op)
}

func (c *compiler) stmts(ss []p4gen.Stmt, sc *scope) ([]op, error) {
	out := make([]op, 0, len(ss))
	share := c.share && sc == nil
	for i := 0; i < len(ss); i++ {
		var key string
		if h, ok := ss[i].(p4gen.Hash); ok {
			hs := []p4gen.Hash{h}
			for i+1 < len(ss) {
				next, ok := ss[i+1].(p4gen.Hash)
				if !ok || !sameData(hs[len(hs)-1], next) {
					break
				}
				hs, i = append(hs, next), i+1
			}
			if share {
				if key = fmt.Sprintf("%#v", hs); c.shared[key] != nil {
					out = append(out, c.shared[key])
					continue
				}
			}
			o, err := c.hashes(hs, sc)
			if err != nil {
				return nil, err
			}
			out = append(out, c.keep(key, o))
			continue
		}
		if n := c.countRun(ss[i:], sc); n > 1 {
			if share {
				if key = fmt.Sprintf("%#v", ss[i:i+n]); c.shared[key] != nil {
					out, i = append(out, c.shared[key]), i+n-1
					continue
				}
			}
			out, i = append(out, c.keep(key, c.counts(ss[i:i+n], sc))), i+n-1
			continue
		}
		if share {
			if key = fmt.Sprintf("%#v", ss[i]); c.shared[key] != nil {
				out = append(out, c.shared[key])
				continue
			}
		}
		o, err := c.stmt(ss[i], sc)
		if err != nil {
			return nil, err
		}
		out = append(out, c.keep(key, o))
	}
	return out, nil
}

// keep records o as the code of the statement of key (none: "") for
// the variants compiled after.
func (c *compiler) keep(key string, o op) op {
	if key != "" {
		if c.shared == nil {
			c.shared = map[string]op{}
		}
		c.shared[key] = o
	}
	return o
}

// set returns the slot and mask an assignment to r writes.
func (c *compiler) set(r p4gen.Ref, sc *scope) (int, uint64, error) {
	s, err := c.slot(r, sc)
	c.used[s] = true
	return s, r.Type().Mask(), err
}

// dirties wraps o so that it marks the packet's headers written when
// slot d is a header field's.
func (c *compiler) dirties(d int, o op) op {
	if !c.hdr[d] {
		return o
	}
	return func(p *pkt) {
		o(p)
		p.dirty = true
	}
}

func (c *compiler) stmt(s p4gen.Stmt, sc *scope) (op, error) {
	m := c.m
	switch s := s.(type) {
	case p4gen.Assign:
		d, mask, err := c.set(s.Dst, sc)
		if err != nil {
			return nil, err
		}
		// Every expression's value is within its type, which is Dst's
		// (Validate): no mask. A constant or a field is one closure.
		_ = mask
		if k, ok := s.X.(p4gen.Const); ok {
			v := k.Value
			return c.dirties(d, func(p *pkt) { p.put(d, v) }), nil
		}
		if r, ok := c.refSlot(s.X, sc); ok {
			return c.dirties(d, func(p *pkt) { p.put(d, p.at(r)) }), nil
		}
		if bitwise(s.X) {
			o, err := c.assignFused(d, s.X, sc)
			return c.dirties(d, o), err
		}
		if o, err := c.assignNode(d, s.X, sc); o != nil || err != nil {
			return c.dirties(d, o), err
		}
		x, err := c.expr(s.X, sc)
		if err != nil {
			return nil, err
		}
		return c.dirties(d, func(p *pkt) { p.put(d, x(p)) }), nil
	case p4gen.If:
		cond, err := c.expr(s.Cond, sc)
		if err != nil {
			return nil, err
		}
		th, err := c.stmts(s.Then, sc)
		if err != nil {
			return nil, err
		}
		el, err := c.stmts(s.Else, sc)
		if err != nil {
			return nil, err
		}
		then, els := seq(th), seq(el)
		if v, ok := s.Cond.(p4gen.Valid); ok && len(el) == 0 {
			h := c.m.header(v.Header)
			w, b := h.index>>6, uint64(1)<<uint(h.index&63)
			return func(p *pkt) {
				if p.vbits[w]&b != 0 {
					then(p)
				}
			}, nil
		}
		return func(p *pkt) {
			if cond(p) != 0 {
				then(p)
			} else {
				els(p)
			}
		}, nil
	case p4gen.Apply:
		t := c.tables[s.Table]
		if t == nil {
			return nil, fmt.Errorf("table %s is not declared", s.Table.Name)
		}
		if t.direct {
			return t.applyDirect, nil
		}
		return func(p *pkt) {
			a, args := t.lookup(p)
			a.call(p, args)
		}, nil
	case p4gen.Call:
		a, err := c.action(s.Action)
		if err != nil {
			return nil, err
		}
		args := make([]expr, len(s.Args))
		for i, x := range s.Args {
			if args[i], err = c.expr(x, sc); err != nil {
				return nil, err
			}
		}
		return func(p *pkt) {
			for i, x := range args {
				p.v[a.slots[i]] = x(p) & a.masks[i]
			}
			a.run(p)
		}, nil
	case p4gen.Hash:
		return c.hashes([]p4gen.Hash{s}, sc)
	case p4gen.Random:
		d, mask, err := c.set(s.Dst, sc)
		if err != nil {
			return nil, err
		}
		lo, hi := s.Lo, s.Hi
		return c.dirties(d, func(p *pkt) { p.put(d, m.Random(lo, hi)&mask) }), nil
	case p4gen.RMW:
		return c.rmw(s, sc)
	case p4gen.Count:
		ci, ok := c.ctrs[s.Counter]
		if !ok {
			return nil, fmt.Errorf("counter %s is not declared", s.Counter.Name)
		}
		idx, err := c.operand(s.Index, sc) // a constant, a field: read inline
		if err != nil {
			return nil, err
		}
		cells := m.counts[ci]
		lenSlot := c.slots["standard_metadata.packet_length"]
		errIdx := fmt.Errorf("counter %s: index past its %d cells", s.Counter.Name, len(cells))
		if k, ok := s.Index.(p4gen.Const); ok && k.Value < uint64(len(cells)) {
			cell := &cells[k.Value] // a function's total, its count of packets with no key
			return func(p *pkt) {
				cell.Packets++
				cell.Bytes += p.at(lenSlot)
			}, nil
		}
		return func(p *pkt) {
			i := idx.get(p)
			if i >= uint64(len(cells)) {
				p.err = errIdx
				return
			}
			cells[i].Packets++
			cells[i].Bytes += p.at(lenSlot)
		}, nil
	case p4gen.Digest:
		di, ok := c.digs[s.Type]
		if !ok {
			return nil, fmt.Errorf("digest %s is not declared", s.Type.Name)
		}
		vals := make([]expr, len(s.Values))
		for i, x := range s.Values {
			var err error
			if vals[i], err = c.expr(x, sc); err != nil {
				return nil, err
			}
		}
		return func(p *pkt) {
			start := len(m.dvals)
			for _, x := range vals {
				m.dvals = append(m.dvals, x(p))
			}
			m.digs = append(m.digs, digestRec{typ: di, start: start, end: len(m.dvals)})
		}, nil
	case p4gen.Clone:
		sess := s.Session
		if s.E2E {
			req := e2eReq{session: sess}
			for _, r := range s.Preserve {
				i, err := c.slot(r, sc)
				if err != nil {
					return nil, err
				}
				req.preserve = append(req.preserve, i)
			}
			return func(p *pkt) { p.e2e = append(p.e2e, req) }, nil
		}
		return func(p *pkt) { p.clones = append(p.clones, sess) }, nil
	case p4gen.SetValid:
		h := c.m.header(s.Header)
		if h == nil {
			return nil, fmt.Errorf("header %s is not declared", s.Header)
		}
		w, b := h.index>>6, uint64(1)<<uint(h.index&63)
		if !s.Valid {
			return func(p *pkt) { p.vbits[w], p.dirty = p.vbits[w]&^b, true }, nil
		}
		return func(p *pkt) {
			m.locate(p)
			p.vbits[w], p.dirty = p.vbits[w]|b, true
			p.hdrAt[h.index] = 0
			for _, f := range h.fields {
				p.put(f.slot, 0)
			}
		}, nil
	case p4gen.MarkToDrop:
		spec := c.slots["standard_metadata.egress_spec"]
		return func(p *pkt) { p.put(spec, p4gen.DropPort) }, nil
	}
	return nil, fmt.Errorf("unknown statement %T", s)
}

func (c *compiler) rmw(s p4gen.RMW, sc *scope) (op, error) {
	ri, ok := c.regs[s.Reg]
	if !ok {
		return nil, fmt.Errorf("register %s is not declared", s.Reg.Name)
	}
	idx, err := c.expr(s.Index, sc)
	if err != nil {
		return nil, err
	}
	in := &scope{inRMW: true}
	if sc != nil {
		in.params = sc.params
	}
	nv, err := c.expr(s.New, in)
	if err != nil {
		return nil, err
	}
	var cond expr
	if s.Cond != nil {
		if cond, err = c.expr(s.Cond, in); err != nil {
			return nil, err
		}
	}
	oldTo, newTo := -1, -1
	if s.OldTo != nil {
		if oldTo, _, err = c.set(*s.OldTo, sc); err != nil {
			return nil, err
		}
	}
	if s.NewTo != nil {
		if newTo, _, err = c.set(*s.NewTo, sc); err != nil {
			return nil, err
		}
	}
	o := c.rmwOps(s, sc, c.m.regs[ri], idx, nv, cond, oldTo, newTo)
	if oldTo >= 0 && c.hdr[oldTo] || newTo >= 0 && c.hdr[newTo] {
		return func(p *pkt) {
			o(p)
			p.dirty = true
		}, nil
	}
	return o, nil
}

// action compiles a's body once; a call cycle is refused.
func (c *compiler) action(a *p4gen.Action) (*action, error) {
	if ca, ok := c.actions[a]; ok {
		if ca.called {
			return nil, fmt.Errorf("action %s calls itself", a.Name)
		}
		return ca, nil
	}
	ca := &action{a: a, called: true}
	c.actions[a] = ca
	sc := &scope{params: map[string]int{}}
	for _, f := range a.Params {
		s := c.m.nslots
		c.m.nslots++
		ca.slots = append(ca.slots, s)
		ca.masks = append(ca.masks, p4gen.Bit(f.Bits).Mask())
		sc.params[f.Name] = s
	}
	body, err := c.stmts(a.Body, sc)
	if err != nil {
		return nil, fmt.Errorf("action %s: %v", a.Name, err)
	}
	ca.body, ca.run, ca.called = body, seq(body), false
	return ca, nil
}

// bitWriter appends values of any width, most significant bit first.
type bitWriter struct {
	b   []byte
	acc uint64
	n   int // bits pending in acc (< 8 between puts)
}

func (w *bitWriter) put(v uint64, bits int) {
	if w.n == 0 {
		switch bits {
		case 8:
			w.b = append(w.b, byte(v))
			return
		case 16:
			w.b = binary.BigEndian.AppendUint16(w.b, uint16(v))
			return
		case 32:
			w.b = binary.BigEndian.AppendUint32(w.b, uint32(v))
			return
		case 48:
			w.b = append(w.b, byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
			return
		case 64:
			w.b = binary.BigEndian.AppendUint64(w.b, v)
			return
		}
	}
	if bits > 56 {
		w.put(v>>32, bits-32)
		bits, v = 32, v&0xffffffff
	}
	w.acc = w.acc<<uint(bits) | v&(1<<uint(bits)-1)
	w.n += bits
	for w.n >= 8 {
		w.b = append(w.b, byte(w.acc>>uint(w.n-8)))
		w.n -= 8
	}
}

// getBits reads n bits (1 to 64) at bit offset off of b, most significant
// first; b must hold them.
func getBits(b []byte, off, n int) uint64 {
	i, s := off>>3, off&7
	if i+8 <= len(b) && s+n <= 64 {
		return binary.BigEndian.Uint64(b[i:]) << uint(s) >> uint(64-n)
	}
	if s+n > 64 {
		hi := uint64(b[i]) & (1<<uint(8-s) - 1)
		rest := n - (8 - s)
		return hi<<uint(rest) | getBits(b, (i+1)*8, rest)
	}
	end := (off + n + 7) >> 3
	var v uint64
	for _, c := range b[i:end] {
		v = v<<8 | uint64(c)
	}
	v >>= uint(8*(end-i) - s - n)
	if n == 64 {
		return v
	}
	return v & (1<<uint(n) - 1)
}

var errTooShort = errors.New(p4gen.ErrPacketTooShort.Error())

// slotBinary compiles x, an arithmetic or comparison of two fields,
// reading both from their slots (the sketches' sums and their
// comparisons of counts). It returns nil for another x.
func (c *compiler) slotBinary(x p4gen.Binary, sc *scope) expr {
	m := x.L.Type().Mask()
	ls, lok := c.refSlot(x.L, sc)
	rs, rok := c.refSlot(x.R, sc)
	if !lok || !rok {
		return nil
	}
	switch x.Op {
	case p4gen.Add:
		return func(p *pkt) uint64 { return (p.at(ls) + p.at(rs)) & m }
	case p4gen.Sub:
		return func(p *pkt) uint64 { return (p.at(ls) - p.at(rs)) & m }
	case p4gen.Eq:
		return func(p *pkt) uint64 { return b2u(p.at(ls) == p.at(rs)) }
	case p4gen.Ne:
		return func(p *pkt) uint64 { return b2u(p.at(ls) != p.at(rs)) }
	case p4gen.Lt:
		return func(p *pkt) uint64 { return b2u(p.at(ls) < p.at(rs)) }
	case p4gen.Le:
		return func(p *pkt) uint64 { return b2u(p.at(ls) <= p.at(rs)) }
	case p4gen.Gt:
		return func(p *pkt) uint64 { return b2u(p.at(ls) > p.at(rs)) }
	case p4gen.Ge:
		return func(p *pkt) uint64 { return b2u(p.at(ls) >= p.at(rs)) }
	}
	return nil
}

// operands compiles x and y as operands.
func (c *compiler) operands(x, y p4gen.Expr, sc *scope) (operand, operand, error) {
	a, err := c.operand(x, sc)
	if err != nil {
		return a, operand{}, err
	}
	b, err := c.operand(y, sc)
	return a, b, err
}

// assignNode compiles the assignment of x to slot d into one closure
// when x is a sum, a difference or a choice, its operands read inline
// (metadata computed from fields: a length, its bound); nil for another
// x.
func (c *compiler) assignNode(d int, x p4gen.Expr, sc *scope) (op, error) {
	switch x := x.(type) {
	case p4gen.Binary:
		if x.Op != p4gen.Add && x.Op != p4gen.Sub {
			return nil, nil
		}
		a, b, err := c.operands(x.L, x.R, sc)
		if err != nil {
			return nil, err
		}
		m := x.L.Type().Mask()
		if x.Op == p4gen.Sub {
			return func(p *pkt) { p.put(d, (a.get(p)-b.get(p))&m) }, nil
		}
		return func(p *pkt) { p.put(d, (a.get(p)+b.get(p))&m) }, nil
	case p4gen.Mux:
		a, b, err := c.operands(x.Then, x.Else, sc)
		if err != nil {
			return nil, err
		}
		if t, ok := c.rangeTest(x.Cond, sc); ok {
			// A choice on a field against a constant (a length at
			// least 4): the test too is read inline.
			s, r, m, lo, span, neg := t.a.slot, t.a.rot, t.a.m, t.lo, t.span, t.neg
			return func(p *pkt) {
				if bits.RotateLeft64(p.at(s), r)&m-lo <= span != neg {
					p.put(d, a.get(p))
				} else {
					p.put(d, b.get(p))
				}
			}, nil
		}
		cond, err := c.operand(x.Cond, sc)
		if err != nil {
			return nil, err
		}
		return func(p *pkt) {
			if cond.get(p) != 0 {
				p.put(d, a.get(p))
			} else {
				p.put(d, b.get(p))
			}
		}, nil
	}
	return nil, nil
}

// test is a comparison of an inline operand with a constant as a range
// of it: a - lo <= span (unsigned), or outside it when neg.
type test struct {
	a        operand
	lo, span uint64
	neg      bool
}

// rangeTest returns x as a test when it compares a field (moved and
// masked) with a constant.
func (c *compiler) rangeTest(x p4gen.Expr, sc *scope) (test, bool) {
	b, ok := x.(p4gen.Binary)
	if !ok {
		return test{}, false
	}
	k, ok := b.R.(p4gen.Const)
	if !ok {
		return test{}, false
	}
	switch b.Op {
	case p4gen.Eq, p4gen.Ne, p4gen.Lt, p4gen.Le, p4gen.Gt, p4gen.Ge:
	default:
		return test{}, false
	}
	a, err := c.operand(b.L, sc)
	if err != nil || a.x != nil {
		return test{}, false
	}
	t, v, all := test{a: a}, k.Value, ^uint64(0)
	switch b.Op {
	case p4gen.Eq, p4gen.Ne:
		t.lo, t.neg = v, b.Op == p4gen.Ne
	case p4gen.Ge, p4gen.Lt: // a >= v, or not
		t.lo, t.span, t.neg = v, all-v, b.Op == p4gen.Lt
	case p4gen.Gt, p4gen.Le: // a >= v+1, or not
		if v == all {
			t.span, t.neg = all, b.Op == p4gen.Gt // always, or never
		} else {
			t.lo, t.span, t.neg = v+1, all-v-1, b.Op == p4gen.Le
		}
	}
	return t, true
}
