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
