package p4test

import (
	"fmt"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Fill does what the controller does with a function's state: it copies
// the cells of the registers and counters that owner declared into m,
// its MBuf laid out for the switch, cell i of each into value Base+i of
// the field it names. A cell that does not fit its field fails the test.
func Fill(tb testing.TB, s *p4gen.Switch, owner string, m *buffers.MBuf) {
	tb.Helper()
	set := func(field string, i int, v uint64) {
		var f *buffers.Field
		for _, x := range m.Fields() {
			if x.Name == field {
				f = &x
			}
		}
		if f == nil || i >= max(f.Count, 1) {
			tb.Fatalf("%s: no value %d of field %s in its MBuf (%v, %+v)", owner, i, field, m.Fields(), f)
		}
		switch f.Type {
		case buffers.U8:
			if v > 0xff {
				tb.Fatalf("%s: %s[%d] = %d does not fit a byte", owner, field, i, v)
			}
			m.Uint8s(*f)[i] = uint8(v)
		case buffers.U32:
			if v > 0xffffffff {
				tb.Fatalf("%s: %s[%d] = %d does not fit 32 bits", owner, field, i, v)
			}
			m.Uint32s(*f)[i] = uint32(v)
		case buffers.U64, buffers.I64:
			m.Uint64s(*f)[i] = v
		default:
			tb.Fatalf("%s: field %s is %v", owner, field, f.Type)
		}
	}
	n := 0
	for r, cells := range s.Regs {
		if r.Owner != owner || r.Field == "" {
			continue
		}
		for i, v := range cells {
			set(r.Field, r.Base+i, v)
		}
		n++
	}
	for c, cells := range s.Counts {
		if c.Owner != owner {
			continue
		}
		for i, cell := range cells {
			if c.FieldPackets != "" {
				set(c.FieldPackets, c.Base+i, cell.Packets)
			}
			if c.FieldBytes != "" {
				set(c.FieldBytes, c.Base+i, cell.Bytes)
			}
		}
		n++
	}
	if n == 0 && len(m.Fields()) > 0 {
		tb.Fatalf("%s keeps state (%s) but declared no register or counter", owner, fmt.Sprint(m.Fields()))
	}
}
