package pisa

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// header is a header instance's layout in the slots.
type header struct {
	name    string
	index   int
	fields  []hfield
	used    []hfield // the fields the program reads or writes
	fixed   int      // bits, the varbit field not counted
	varMax  int      // the varbit field's most bits, 0 for none
	varAt   int      // its bit offset in the header
	varIdx  int      // the fixed fields before it; -1 for none
	varName string
	pos     int // in the deparser's list; -1 for none
}

type hfield struct {
	slot, off, bits int // off: bit offset in the header (before a varbit field, or after it by its length)
	afterVar        bool
	// used: the program reads or writes it. The parser extracts only
	// those; the deparser takes the others from the bytes the header was
	// extracted from (zeros for a header made valid).
	used bool
}

// pstate is a compiled parser state.
type pstate struct {
	name    string
	extract []*header
	varBits expr
	sel     []expr
	masks   []uint64 // each select expression's type mask
	cases   []pcase
	def     int
	// packed: the select's values fit one word, each at its shift (its
	// field when selSlots' is not -1), so that a case is one compare.
	packed   bool
	selSlots []int
	shifts   []uint

	// A state without a varbit field extracts its headers at once when
	// the packet holds them all: the fields the program uses (offsets
	// from the state's start), the headers made valid, their validity
	// bits by word.
	whole             bool
	bits              int
	loads             []hfield
	places            []hplace
	vwords            []vword
	inOrder           bool // its headers are in the deparser's order among themselves
	firstPos, lastPos int
	// fast: the loads as one 8-byte load each, shifted, when the state
	// starts on a byte and the packet holds span bytes from there
	// (nil when a field does not fit such a load).
	fast []fload
	span int
}

// fload is a field's load from a state's bytes: the 8 bytes at boff,
// shifted right by rsh and masked (in a plan, boff -1 is the 8 bytes
// the load before it loaded).
type fload struct {
	slot, boff int32
	rsh        uint64
	mask       uint64
}

// visit is an extraction by the parser at bit at: of state st's
// headers, or of header ^st alone when st < 0.
type visit struct{ st, at int32 }

// locate sets where p's headers were extracted (hdrAt) from its visits,
// once: the parser records only its visits, since most packets leave
// with the bytes they came with and nothing reads hdrAt.
func (m *Model) locate(p *pkt) {
	if p.located {
		return
	}
	p.located = true
	for _, v := range p.visits {
		if n := int(v.st) - len(m.states); n >= 0 {
			for _, h := range m.plans.places[n] {
				p.hdrAt[h.index] = int32(h.off) + 1
			}
			continue
		}
		if v.st < 0 {
			p.hdrAt[^v.st] = v.at + 1
			continue
		}
		for _, h := range m.states[v.st].places {
			p.hdrAt[h.index] = v.at + int32(h.off) + 1
		}
	}
}

// hplace is a header a state extracts, off bits into it.
type hplace struct{ index, off int }

// vword is validity bits to set in a word of pkt.vbits.
type vword struct {
	i    int
	bits uint64
}

type pcase struct {
	vals, masks []uint64
	next        int
	pv, pm      uint64 // the values and masks packed, when the state's select is
}

// Parser next states that end parsing.
const (
	nextAccept = -1
	nextReject = -2
)

// maxParserSteps bounds the states a packet goes through, so that a
// parser that loops without extracting ends (the reference would spin).
const maxParserSteps = 256

var (
	errReject     = errors.New("reject")
	errParserLoop = errors.New("the parser went through too many states")
)

func (c *compiler) parser(prog *p4gen.Program) error {
	m := c.m
	index := map[string]int{p4gen.Accept: nextAccept, p4gen.Reject: nextReject}
	for i, s := range prog.Parser {
		index[s.Name] = i
	}
	for _, s := range prog.Parser {
		ps := pstate{name: s.Name}
		for _, h := range s.Extract {
			hd := m.header(h)
			if hd == nil {
				return fmt.Errorf("parser state %s extracts undeclared header %s", s.Name, h)
			}
			ps.extract = append(ps.extract, hd)
		}
		var err error
		if s.VarBits != nil {
			if ps.varBits, err = c.expr(s.VarBits, nil); err != nil {
				return fmt.Errorf("parser state %s: %v", s.Name, err)
			}
		}
		width := 0
		for _, x := range s.Select {
			e, err := c.expr(x, nil)
			if err != nil {
				return fmt.Errorf("parser state %s: %v", s.Name, err)
			}
			ps.sel = append(ps.sel, e)
			ps.masks = append(ps.masks, x.Type().Mask())
			slot, ok := c.refSlot(x, nil)
			if !ok {
				slot = -1
			}
			ps.selSlots, ps.shifts = append(ps.selSlots, slot), append(ps.shifts, uint(width))
			width += max(1, x.Type().Bits)
		}
		ps.packed = width <= 64
		for _, cs := range s.Cases {
			pc := pcase{vals: cs.Values, masks: cs.Masks, next: index[cs.Next]}
			if pc.masks == nil {
				pc.masks = ps.masks
			}
			never := false
			for i, v := range pc.vals {
				m := pc.masks[i] & ps.masks[i]
				pc.pv |= v & m << ps.shifts[i]
				pc.pm |= m << ps.shifts[i]
				// A value past its key's width that the mask keeps is
				// never matched.
				never = never || v&pc.masks[i]&^ps.masks[i] != 0
			}
			if never {
				pc.pm, pc.pv = 0, 1
			}
			ps.cases = append(ps.cases, pc)
		}
		ps.def = index[s.Default]
		m.states = append(m.states, ps)
	}
	m.keys = make([]uint64, 0, 16)
	return nil
}

// wholeStates prepares the states that extract their headers at once,
// when which fields are used is known.
func (m *Model) wholeStates() {
	for i := range m.states {
		s := &m.states[i]
		s.whole, s.inOrder = s.varBits == nil, true
		for j, h := range s.extract {
			if h.varMax > 0 {
				s.whole = false
			}
			for _, f := range h.used {
				f.off += s.bits
				s.loads = append(s.loads, f)
				s.fast = append(s.fast, fload{slot: int32(f.slot), boff: int32(f.off >> 3), rsh: uint64(64 - f.off&7 - f.bits), mask: p4gen.Bit(f.bits).Mask()})
				s.span = max(s.span, f.off>>3+8)
				if f.off&7+f.bits > 64 {
					s.whole = false // a field of more than 57 bits off a byte
				}
			}
			s.places = append(s.places, hplace{index: h.index, off: s.bits})
			w := h.index >> 6
			if n := len(s.vwords); n > 0 && s.vwords[n-1].i == w {
				s.vwords[n-1].bits |= 1 << uint(h.index&63)
			} else {
				s.vwords = append(s.vwords, vword{w, 1 << uint(h.index&63)})
			}
			if j == 0 {
				s.firstPos = h.pos
			} else if h.pos <= s.lastPos {
				s.inOrder = false
			}
			s.lastPos = h.pos
			s.bits += h.fixed
		}
	}
	m.initPlans()
}

// parse runs the parser over p.data, as p4gen.Switch does: by the plan
// of its path when the model has one (plan.go), else by the general
// parser, which records its path for a plan while the plans have room.
func (m *Model) parse(p *pkt) error {
	if len(m.plans.nodes) == 0 {
		return m.general(p, 0, 0, 0, false)
	}
	r, err := m.planned(p)
	if r >= planGeneral {
		err = m.unplanned(p, r)
	}
	return err
}

// unplanned runs the general parser on p, which planned left with r.
func (m *Model) unplanned(p *pkt, r int) error {
	if r == planNew && len(m.plans.nodes) < maxPlanNodes {
		m.plans.trace = m.plans.trace[:0]
		err := m.general(p, 0, 0, 0, true)
		m.learn(err)
		return err
	}
	return m.general(p, 0, 0, 0, false)
}

// general runs the parser over p.data state by state from state st at
// bit bit, its step'th, recording its path in m.plans.trace when rec is
// set.
func (m *Model) general(p *pkt, st, bit, step int, rec bool) error {
	data := p.data
	for ; step < maxParserSteps; step++ {
		s := &m.states[st]
		at := bit
		if s.whole && bit+s.bits <= 8*len(data) {
			if bit&7 == 0 && bit>>3+s.span <= len(data) {
				// The span check above keeps every load in the
				// packet, and a state's slots are the model's (newPkt
				// sizes v for them): no bounds check per field.
				d := unsafe.Add(unsafe.Pointer(unsafe.SliceData(data)), bit>>3)
				v := unsafe.Pointer(unsafe.SliceData(p.v))
				fast := s.fast // not reloaded after each store
				for i := range fast {
					f := &fast[i]
					w := binary.BigEndian.Uint64((*[8]byte)(unsafe.Add(d, f.boff))[:])
					*(*uint64)(unsafe.Add(v, uintptr(f.slot)*8)) = w >> (f.rsh & 63) & f.mask
				}
			} else {
				for _, f := range s.loads {
					off := bit + f.off
					if i, s := off>>3, off&7; i+8 <= len(data) && s+f.bits <= 64 {
						p.v[f.slot] = binary.BigEndian.Uint64(data[i:]) << uint(s) >> uint(64-f.bits)
					} else {
						p.v[f.slot] = getBits(data, off, f.bits)
					}
				}
			}
			p.visits = append(p.visits, visit{st: int32(st), at: int32(bit)})
			for _, w := range s.vwords {
				p.vbits[w.i] |= w.bits
			}
			if len(s.extract) > 0 {
				if !s.inOrder || s.firstPos <= p.lastPos {
					p.ordered = false
				}
				p.lastPos = s.lastPos
			}
			bit += s.bits
		} else {
			if err := m.extract(p, s, &bit); err != nil {
				return err
			}
		}
		next, taken := m.choose(p, s)
		if rec {
			m.plans.trace = append(m.plans.trace, pstep{st: int32(st), at: int32(at), c: int32(taken)})
		}
		switch next {
		case nextAccept:
			p.payload = bit / 8
			return nil
		case nextReject:
			p.payload = bit / 8
			return errReject
		}
		st = next
	}
	return errParserLoop
}

// choose returns the state after state s for p, its headers extracted
// (nextAccept, nextReject), and the case it took (its cases' count for
// the default).
func (m *Model) choose(p *pkt, s *pstate) (next, taken int) {
	next, taken = s.def, len(s.cases)
	if s.packed && len(s.sel) > 0 {
		var key uint64
		for i, x := range s.sel {
			var v uint64
			if sl := s.selSlots[i]; sl >= 0 {
				v = p.v[sl]
			} else {
				v = x(p)
			}
			key |= v & s.masks[i] << (s.shifts[i] & 63)
		}
		for i := range s.cases {
			if c := &s.cases[i]; key&c.pm == c.pv {
				next, taken = c.next, i
				break
			}
		}
	} else if len(s.sel) > 0 {
		keys := m.keys[:0]
		for _, x := range s.sel {
			keys = append(keys, x(p))
		}
	cases:
		for j, c := range s.cases {
			for i, v := range c.vals {
				if keys[i]&c.masks[i] != v&c.masks[i] {
					continue cases
				}
			}
			next, taken = c.next, j
			break
		}
	}
	return next, taken
}

// extract extracts state s's headers one by one from bit on, as far as
// the packet holds them.
func (m *Model) extract(p *pkt, s *pstate, at *int) error {
	data, bit := p.data, *at
	for i, h := range s.extract {
		varBits := 0
		if i == len(s.extract)-1 && s.varBits != nil {
			varBits = int(s.varBits(p))
		}
		if bit+h.fixed+varBits > 8*len(data) {
			p.payload = bit / 8
			return errTooShort
		}
		if h.varMax > 0 && varBits > h.varMax {
			return h.varErr(varBits)
		}
		p.visits = append(p.visits, visit{st: ^int32(h.index), at: int32(bit)})
		for _, f := range h.used {
			off := bit + f.off
			if f.afterVar {
				off += varBits
			}
			if i, s := off>>3, off&7; i+8 <= len(data) && s+f.bits <= 64 {
				p.v[f.slot] = binary.BigEndian.Uint64(data[i:]) << uint(s) >> uint(64-f.bits)
			} else {
				p.v[f.slot] = getBits(data, off, f.bits)
			}
		}
		if h.varMax > 0 {
			off, n := int32((bit+h.varAt)/8), int32(varBits/8)
			if p.varOff[h.index] == 0 && p.varLen[h.index] == 0 && off|n != 0 {
				p.varSet = append(p.varSet, int32(h.index))
			}
			p.varOff[h.index], p.varLen[h.index] = off, n
		}
		bit += h.fixed + varBits
		p.vbits[h.index>>6] |= 1 << uint(h.index&63)
		if h.pos <= p.lastPos {
			p.ordered = false
		}
		p.lastPos = h.pos
	}
	*at = bit
	return nil
}

// valid reports whether header h is valid in p.
func (p *pkt) valid(h *header) bool { return p.vbits[h.index>>6]>>uint(h.index&63)&1 == 1 }

func (h *header) varErr(bits int) error {
	return fmt.Errorf("header %s: varbit field %s of %d bits takes at most %d", h.name, h.varName, bits, h.varMax)
}

// deparse writes the valid headers of the deparser's list, then the
// payload, into out.
func (m *Model) deparse(p *pkt, out []byte) []byte {
	if m.csumLast != nil && p.valid(m.csumLast) {
		m.locate(p)
		was := p.v[m.ipv4csum]
		p.v[m.ipv4csum] = 0
		w := bitWriter{b: m.scratch[:0]}
		for _, h := range m.csumHdrs {
			if p.valid(h) {
				m.emit(p, h, &w)
			}
		}
		m.scratch = w.b
		p.v[m.ipv4csum] = uint64(p4gen.Checksum16(w.b))
		if p.v[m.ipv4csum] != was {
			p.dirty = true
		}
	}
	if !p.dirty && p.ordered && p.payload >= 0 {
		return append(out[:0], p.data...)
	}
	m.locate(p)
	w := bitWriter{b: out[:0]}
	for _, h := range m.deparser {
		if p.valid(h) {
			m.emit(p, h, &w)
		}
	}
	if p.payload >= 0 && p.payload <= len(p.data) {
		w.b = append(w.b, p.data[p.payload:]...)
	}
	return w.b
}

func (m *Model) emit(p *pkt, h *header, w *bitWriter) {
	at := int(p.hdrAt[h.index]) - 1
	for i, f := range h.fields {
		if i == h.varIdx {
			w.b = append(w.b, p.data[p.varOff[h.index]:p.varOff[h.index]+p.varLen[h.index]]...)
		}
		switch {
		case f.used:
			w.put(p.v[f.slot], f.bits)
		case at < 0:
			w.put(0, f.bits)
		default:
			off := at + f.off
			if f.afterVar {
				off += 8 * int(p.varLen[h.index])
			}
			w.put(getBits(p.data, off, f.bits), f.bits)
		}
	}
	if h.varIdx == len(h.fields) {
		w.b = append(w.b, p.data[p.varOff[h.index]:p.varOff[h.index]+p.varLen[h.index]]...)
	}
}
