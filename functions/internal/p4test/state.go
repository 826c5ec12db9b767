package p4test

import (
	"fmt"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/functions/record"
)

// Fill does what the controller does with a function's state: it copies
// the cells of the registers and counters that owner declared into m,
// its MBuf laid out for the switch, cell i of each into value Base+i of
// the field it names. A cell that does not fit its field fails the test.
func Fill(tb testing.TB, s *p4gen.Switch, owner string, m *buffers.MBuf) {
	FillHalf(tb, s, owner, p4gen.HalfAll, m)
}

// FillHalf is Fill for one half of a function's windows: it copies the
// registers and counters of that half, and those of no half.
func FillHalf(tb testing.TB, s *p4gen.Switch, owner string, half p4gen.Half, m *buffers.MBuf) {
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
		if r.Owner != owner || r.Field == "" || r.Half != p4gen.HalfAll && r.Half != half {
			continue
		}
		for i, v := range cells {
			set(r.Field, r.Base+i, v)
		}
		n++
	}
	for c, cells := range s.Counts {
		if c.Owner != owner || c.FieldPackets == "" && c.FieldBytes == "" || c.Half != p4gen.HalfAll && c.Half != half {
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

// Window is a window of a function on a switch, as the controller reads
// it when it ends.
type Window struct {
	Number uint64 // the packets' time >> shift
	// Half is a Go half (TargetP4) holding the window's state, nil when
	// the switch did not measure the window (its half was not clean).
	Half functions.Function
}

// RunWindows runs ps through a switch that runs fn alone, with a
// controller that follows its window (p4gen.Window): on the digest that a
// window began it reads the windows that ended, each into a fresh Go half,
// and then lets the packets clear the half (Drained); at the end it reads
// the window that is open. It returns the windows, in order, and, for
// each packet, whether the switch measured it (Window.Dropped did not
// count it).
func RunWindows(tb testing.TB, fn Fn, ps []Packet) ([]Window, []bool) {
	tb.Helper()
	const id = "f#1"
	s, bs := Switch(tb, fn)
	w := bs[0].Window
	if w == nil {
		tb.Fatalf("%s has no window on the switch", fn.Expr)
	}
	var out []Window
	drained := [2]uint64{}
	read := func(mark uint64) {
		number := (mark - 1) & 0xffffffff
		h := number & 1
		win := Window{Number: number}
		if s.Regs[w.State[h]][0] == mark {
			half, err := fn.Class.New(fn.Context(id, functions.TargetP4))
			if err != nil {
				tb.Fatal(err)
			}
			hv := []p4gen.Half{p4gen.HalfEven, p4gen.HalfOdd}[h]
			FillHalf(tb, s, id, hv, half.(functions.Stateful).MBuf())
			win.Half = half
			for c, cells := range s.Counts { // the controller zeroes the half's counters
				if c.Owner == id && c.Half == hv {
					clear(cells)
				}
			}
			drained[h] = mark
			var es []p4gen.Entry
			for p := range uint64(2) {
				es = append(es, p4gen.Entry{Match: []p4gen.Match{{Value: p}}, Action: w.Drain, Args: []uint64{drained[0], drained[1]}})
			}
			s.Entries[w.Drained] = es
		}
		out = append(out, win)
	}
	last := uint64(0)
	measured := make([]bool, len(ps))
	for i, p := range ps {
		lost := s.Counts[w.Dropped][0].Packets
		r, err := s.Process(p4gen.Arrival{Data: p.Data, Port: 2, Time: Time(p.Time)})
		if err != nil {
			tb.Fatalf("packet %d: %v", i, err)
		}
		measured[i] = s.Counts[w.Dropped][0].Packets == lost
		for _, d := range r.Digests {
			if d.Type != w.Digest {
				continue
			}
			mark, prev := d.Values[0], d.Values[1]
			if prev != 0 {
				for m := prev; m != mark; m = (m + 1) & 0xffffffff {
					read(m)
				}
			}
			last = mark
		}
	}
	if last != 0 {
		read(last)
	}
	return out, measured
}

// Records has fn, a producer, keep the records it emits, as JSON lines,
// in the slice returned.
func Records(tb testing.TB, fn functions.Function) *[]string {
	recs := new([]string)
	fn.(functions.Producer).SetEmit(func(b *buffers.Batch) {
		for _, e := range b.E[:b.N] {
			j, err := record.AppendJSON(nil, b.PBuf.Data(e.Slot))
			if err != nil {
				tb.Fatal(err)
			}
			*recs = append(*recs, string(j))
		}
	})
	return recs
}

// Report has the window's Go half, its state filled from the switch,
// report the window as a flowspace has it do: ticked at t, a time in the
// window, which starts its window, and then at the window's end. It
// returns the records, as JSON lines.
func (w Window) Report(tb testing.TB, t int64) []string {
	tb.Helper()
	recs := Records(tb, w.Half)
	c := w.Half.(functions.Clocked)
	c.Tick(t)
	c.Tick(c.Deadline())
	return *recs
}
