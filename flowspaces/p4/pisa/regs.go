package pisa

import (
	"fmt"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// cell is a register cell's storage: the narrowest unsigned integer
// that holds the register's declared width (1 and 8 bits in a byte, 16,
// 32, 64), so that hll's 8-bit ranks take a byte each rather than eight
// and more of a sketch stays in the cache.
type cell interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64
}

// register holds one register's cells in exactly one of its slices,
// the one of its width.
type register struct {
	c8  []uint8
	c16 []uint16
	c32 []uint32
	c64 []uint64
}

func newRegister(r *p4gen.Register) *register {
	g := &register{}
	switch {
	case r.Width <= 8:
		g.c8 = make([]uint8, r.Size)
	case r.Width <= 16:
		g.c16 = make([]uint16, r.Size)
	case r.Width <= 32:
		g.c32 = make([]uint32, r.Size)
	default:
		g.c64 = make([]uint64, r.Size)
	}
	return g
}

func (g *register) len() int { return len(g.c8) + len(g.c16) + len(g.c32) + len(g.c64) }

func (g *register) get(i int) uint64 {
	switch {
	case g.c8 != nil:
		return uint64(g.c8[i])
	case g.c16 != nil:
		return uint64(g.c16[i])
	case g.c32 != nil:
		return uint64(g.c32[i])
	}
	return g.c64[i]
}

// set stores v, which the caller has masked to the register's width.
func (g *register) set(i int, v uint64) {
	switch {
	case g.c8 != nil:
		g.c8[i] = uint8(v)
	case g.c16 != nil:
		g.c16[i] = uint16(v)
	case g.c32 != nil:
		g.c32[i] = uint32(v)
	default:
		g.c64[i] = v
	}
}

// Register returns a copy of the cells of register r (nil if the
// program has no such register); SetRegister changes them.
func (m *Model) Register(r *p4gen.Register) []uint64 {
	i, ok := m.regIdx[r]
	if !ok {
		return nil
	}
	g := m.regs[i]
	out := make([]uint64, g.len())
	for j := range out {
		out[j] = g.get(j)
	}
	return out
}

// SetRegister writes v, masked to r's width, into cell i of register r,
// or into every cell when i is negative.
func (m *Model) SetRegister(r *p4gen.Register, i int, v uint64) error {
	ri, ok := m.regIdx[r]
	if !ok {
		return fmt.Errorf("register %s is not in the program", r.Name)
	}
	g := m.regs[ri]
	if i >= g.len() {
		return fmt.Errorf("register %s: index %d past its %d cells", r.Name, i, g.len())
	}
	v &= p4gen.Bit(r.Width).Mask()
	if i >= 0 {
		g.set(i, v)
		return nil
	}
	for j := range g.len() {
		g.set(j, v)
	}
	return nil
}

// rmwOps compiles a read-modify-write on g's cells, whatever their
// storage: the direct forms (a count, a maximum, fuse.go) when they
// apply, else the general one.
func (c *compiler) rmwOps(s p4gen.RMW, sc *scope, g *register, idx, nv, cond expr, oldTo, newTo int) op {
	switch {
	case g.c8 != nil:
		return rmwOn(c, s, sc, g.c8, idx, nv, cond, oldTo, newTo)
	case g.c16 != nil:
		return rmwOn(c, s, sc, g.c16, idx, nv, cond, oldTo, newTo)
	case g.c32 != nil:
		return rmwOn(c, s, sc, g.c32, idx, nv, cond, oldTo, newTo)
	}
	return rmwOn(c, s, sc, g.c64, idx, nv, cond, oldTo, newTo)
}

func rmwOn[T cell](c *compiler, s p4gen.RMW, sc *scope, cells []T, idx, nv, cond expr, oldTo, newTo int) op {
	mask := p4gen.Bit(s.Reg.Width).Mask()
	errIdx := fmt.Errorf("register %s: index past its %d cells", s.Reg.Name, len(cells))
	if o := rmwDirect(c, s, sc, cells, mask, errIdx, oldTo, newTo); o != nil {
		return o
	}
	return func(p *pkt) {
		i := idx(p)
		if i >= uint64(len(cells)) {
			p.err = errIdx
			return
		}
		old := uint64(cells[i])
		v := old
		p.old = old
		if cond == nil || cond(p) != 0 {
			v = nv(p) & mask
		}
		cells[i] = T(v)
		if oldTo >= 0 {
			p.put(oldTo, old)
		}
		if newTo >= 0 {
			p.put(newTo, v)
		}
	}
}

// A count-min sketch's rows are read-modify-writes in a row, each
// adding a constant to a cell of its register at an index in a field,
// copying nothing out: they run as one op, a loop over the rows (one
// call and one dispatch, not one per row).

// countRow is such a read-modify-write on cells of type T.
type countRow[T cell] struct {
	cells  []T
	idx    int // the index's slot
	k, m   uint64
	errIdx error
}

// counted reports whether s is such a read-modify-write, and returns its
// register.
func (c *compiler) counted(s p4gen.Stmt, sc *scope) (*register, bool) {
	r, ok := s.(p4gen.RMW)
	if !ok || r.Cond != nil || r.OldTo != nil || r.NewTo != nil {
		return nil, false
	}
	if _, ok := r.Index.(p4gen.Ref); !ok {
		return nil, false
	}
	if _, ok := c.refSlot(r.Index, sc); !ok {
		return nil, false
	}
	add, ok := r.New.(p4gen.Binary)
	if !ok || add.Op != p4gen.Add {
		return nil, false
	}
	if _, ok := add.L.(p4gen.Old); !ok {
		return nil, false
	}
	if _, ok := add.R.(p4gen.Const); !ok {
		return nil, false
	}
	ri, ok := c.regs[r.Reg]
	if !ok {
		return nil, false
	}
	return c.m.regs[ri], true
}

// countRun returns how many statements at the start of ss are counts
// of registers of one cell type, as counted.
func (c *compiler) countRun(ss []p4gen.Stmt, sc *scope) int {
	first, ok := c.counted(ss[0], sc)
	if !ok {
		return 0
	}
	n := 1
	for n < len(ss) {
		g, ok := c.counted(ss[n], sc)
		if !ok || (g.c8 == nil) != (first.c8 == nil) || (g.c16 == nil) != (first.c16 == nil) || (g.c32 == nil) != (first.c32 == nil) {
			break
		}
		n++
	}
	return n
}

// counts compiles a run of counts (countRun) into one op.
func (c *compiler) counts(ss []p4gen.Stmt, sc *scope) op {
	g, _ := c.counted(ss[0], sc)
	switch {
	case g.c8 != nil:
		return countRows(c, ss, sc, func(g *register) []uint8 { return g.c8 })
	case g.c16 != nil:
		return countRows(c, ss, sc, func(g *register) []uint16 { return g.c16 })
	case g.c32 != nil:
		return countRows(c, ss, sc, func(g *register) []uint32 { return g.c32 })
	}
	return countRows(c, ss, sc, func(g *register) []uint64 { return g.c64 })
}

func countRows[T cell](c *compiler, ss []p4gen.Stmt, sc *scope, cells func(*register) []T) op {
	rows := make([]countRow[T], len(ss))
	for i, s := range ss {
		r := s.(p4gen.RMW)
		g, _ := c.counted(s, sc)
		idx, _ := c.refSlot(r.Index, sc)
		rows[i] = countRow[T]{cells: cells(g), idx: idx, k: r.New.(p4gen.Binary).R.(p4gen.Const).Value,
			m:      p4gen.Bit(r.Reg.Width).Mask(),
			errIdx: fmt.Errorf("register %s: index past its %d cells", r.Reg.Name, len(cells(g)))}
	}
	return func(p *pkt) {
		for i := range rows {
			r := &rows[i]
			j := p.at(r.idx)
			if j >= uint64(len(r.cells)) {
				p.err = r.errIdx
				return
			}
			r.cells[j] = T((uint64(r.cells[j]) + r.k) & r.m)
		}
	}
}
