package buffers

import (
	"encoding/binary"
	"math"
	"testing"
	"unsafe"
)

func TestPBufStoreTruncatesLikeASnapLength(t *testing.T) {
	p := NewPBuf(4, 16)
	pkt := make([]byte, 40)
	for i := range pkt {
		pkt[i] = byte(i)
	}
	if n := p.Store(2, pkt, 40, 7, 3); n != 16 {
		t.Fatalf("caplen %d, want 16", n)
	}
	m := p.Meta(2)
	if m.CapLen != 16 || m.WireLen != 40 || m.Timestamp != 7 || m.Source != 3 {
		t.Errorf("meta %+v", *m)
	}
	if d := p.Data(2); len(d) != 16 || d[15] != 15 {
		t.Errorf("data %v", d)
	}
	// Data must not reach into the next slot even through append.
	if d := p.Data(2); cap(d) > 16 {
		t.Errorf("cap %d leaks into the next slot", cap(d))
	}
	p.Store(1, pkt[:5], 0, 0, 0)
	if p.Meta(1).WireLen != 0 { // a wire length below the captured one is kept
		t.Errorf("wire length below caplen not raised: %d", p.Meta(1).WireLen)
	}
}

func TestBatchAppendCommitAndRoom(t *testing.T) {
	p := NewPBuf(8, 64)
	b := NewBatch(p, 4, 4, 9)
	for i := 0; b.Room() > 0; i++ {
		if i%2 == 0 {
			b.Append([]byte{byte(i)}, 100, int64(i))
		} else {
			s := b.NextSlot()
			s[0] = byte(i)
			b.Commit(1, 100, int64(i))
		}
	}
	if b.N != 4 {
		t.Fatalf("N=%d", b.N)
	}
	for i, e := range b.Entries() {
		if e.Slot != uint32(4+i) || p.Data(e.Slot)[0] != byte(i) || p.Meta(e.Slot).Source != 9 {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
}

func TestViewRefersWithoutCopying(t *testing.T) {
	mem := []byte("xxHELLOyyWORLD")
	p := NewPBufView(mem, 4)
	b := NewBatch(p, 0, 4, 1)
	b.AppendRef(2, 5, 60, 1)
	b.AppendRef(9, 5, 0, 2)
	if string(p.Data(0)) != "HELLO" || string(p.Data(1)) != "WORLD" || p.Meta(1).WireLen != 0 { // a wire length below the captured one is kept
		t.Errorf("view: %q %q %+v", p.Data(0), p.Data(1), *p.Meta(1))
	}
	mem[2] = 'J'
	if p.Data(0)[0] != 'J' {
		t.Error("view copied the packet")
	}
	if !p.IsView() || NewPBuf(1, 1).IsView() {
		t.Error("IsView")
	}
	defer func() {
		if recover() == nil {
			t.Error("Slot on a view did not panic")
		}
	}()
	p.Slot(0)
}

func TestUnionKeepsSlotOrderAndFirstClass(t *testing.T) {
	p := NewPBuf(MaxBatch, 8)
	mk := func(class uint32, slots ...uint32) *Batch {
		b := NewBatch(p, 0, MaxBatch, 0)
		for _, s := range slots {
			b.E[b.N] = Entry{Slot: s, Class: class}
			b.N++
		}
		return b
	}
	a, b, c := mk(1, 0, 3, 5, 255), mk(2, 1, 3, 7), mk(3)
	var out Batch
	out.Union([]*Batch{a, b, c})
	want := []Entry{{0, 1}, {1, 2}, {3, 1}, {5, 1}, {7, 2}, {255, 1}}
	if out.N != len(want) {
		t.Fatalf("union %v", out.Entries())
	}
	for i, e := range out.Entries() {
		if e != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, e, want[i])
		}
	}
	out.Union([]*Batch{c, mk(0)})
	if out.N != 0 {
		t.Errorf("union of empties has %d", out.N)
	}
	if allocs := testing.AllocsPerRun(100, func() { out.Union([]*Batch{a, b}) }); allocs != 0 {
		// The slice literal escapes only if Union keeps it; it must not.
		t.Errorf("Union allocates %v", allocs)
	}
}

func TestMBufDecodesDeclaredOrder(t *testing.T) {
	m := NewMBuf(24, binary.BigEndian,
		Field{Name: "a", Type: U32, Offset: 0}, Field{Name: "b", Type: U64, Offset: 8},
		Field{Name: "row", Type: U32, Offset: 16, Count: 2})
	raw := m.Bytes()
	binary.BigEndian.PutUint32(raw[0:], 7)
	binary.BigEndian.PutUint64(raw[8:], 1<<40)
	binary.BigEndian.PutUint32(raw[16:], 1)
	binary.BigEndian.PutUint32(raw[20:], 2)
	s := m.Snapshot()
	if s["a"] != uint32(7) || s["b"] != uint64(1<<40) {
		t.Errorf("snapshot %v", s)
	}
	if row := s["row"].([]any); row[0] != uint32(1) || row[1] != uint32(2) {
		t.Errorf("row %v", row)
	}
	n := NewMBuf(16, Native, Field{Name: "c", Type: U64}, Field{Name: "f", Type: F64, Offset: 8})
	n.Add64(0, 5)
	n.Add64(0, 6)
	n.Store64(8, math.Float64bits(2.5))
	if s := n.Snapshot(); s["c"] != uint64(11) || s["f"] != 2.5 {
		t.Errorf("native snapshot %v", s)
	}
}

func TestMBufBytesAndOneValueArrays(t *testing.T) {
	m := NewMBuf(16, Native, Field{Name: "regs", Type: U8, Offset: 1, Count: 6},
		Field{Name: "one", Type: U64, Offset: 8, Count: 1})
	raw := m.Bytes()
	for i := range 6 {
		raw[1+i] = byte(10 + i)
	}
	m.Store64(8, 3)
	s := m.Snapshot()
	regs := s["regs"].([]any)
	for i, v := range regs {
		if v != uint8(10+i) {
			t.Errorf("register %d = %v, want %d", i, v, 10+i)
		}
	}
	if len(regs) != 6 {
		t.Errorf("%d registers", len(regs))
	}
	// An array of one value is still an array: a sketch one counter wide
	// reads the same way as a wider one.
	if one, ok := s["one"].([]any); !ok || len(one) != 1 || one[0] != uint64(3) {
		t.Errorf("one-value array decoded as %#v", s["one"])
	}
	for typ, name := range map[FieldType]string{U8: "u8", U32: "u32", U64: "u64", I64: "i64", F64: "f64"} {
		if typ.String() != name {
			t.Errorf("%d is called %q, want %q", typ, typ.String(), name)
		}
	}
}

func TestMBufRejectsBadLayout(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("field past the end accepted")
		}
	}()
	NewMBuf(8, Native, Field{Name: "x", Type: U64, Offset: 8})
}

func TestMBufSliceViews(t *testing.T) {
	rows := Field{Name: "rows", Type: U64, Offset: 8, Count: 4}
	bits := Field{Name: "bits", Type: U32, Offset: 40, Count: 3}
	regs := Field{Name: "regs", Type: U8, Offset: 52, Count: 16}
	m := NewMBuf(68, Native, Field{Name: "total", Type: U64}, rows, bits, regs)
	u := m.Uint64s(rows)
	u[3] = 7
	if len(u) != 4 || m.Uint64(8+24) != 7 {
		t.Fatalf("U64 view: len %d, value %d", len(u), m.Uint64(32))
	}
	w := m.Uint32s(bits)
	w[2] = 9
	if len(w) != 3 || m.Uint32(48) != 9 {
		t.Fatal("U32 view")
	}
	r := m.Uint8s(regs)
	r[15] = 5
	if len(r) != 16 || m.Uint8(67) != 5 {
		t.Fatal("U8 view")
	}
	if len(m.Uint64s(Field{Name: "total", Type: U64})) != 1 {
		t.Fatal("scalar view")
	}
	for name, f := range map[string]func(){
		"type":  func() { m.Uint32s(rows) },
		"order": func() { NewMBuf(8, binary.BigEndian, Field{Name: "x", Type: U64}).Uint64s(Field{Name: "x", Type: U64}) },
		"range": func() { m.Uint8s(Field{Name: "y", Type: U8, Offset: 60, Count: 13}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestMBufOnSharesItsMemory(t *testing.T) {
	mem := make([]uint64, 3) // 8-aligned
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), 24)
	m := NewMBufOn(raw, Native, Field{Name: "n", Type: U64, Offset: 8})
	m.Add64(8, 5)
	if mem[1] != 5 || &m.Bytes()[0] != &raw[0] {
		t.Errorf("the MBuf did not write the memory it was given: %v", mem)
	}
	mem[1] = 9
	if m.Snapshot()["n"] != uint64(9) {
		t.Errorf("the MBuf did not read the memory it was given: %v", m.Snapshot())
	}
	for name, f := range map[string]func(){
		"odd size":  func() { NewMBufOn(raw[:20], Native) },
		"unaligned": func() { NewMBufOn(raw[4:20], Native) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: accepted", name)
				}
			}()
			f()
		}()
	}
}

func TestMBufPut(t *testing.T) {
	m := NewMBuf(32, Native,
		Field{Name: "b", Type: U8, Offset: 0, Count: 6},
		Field{Name: "w", Type: U32, Offset: 8, Count: 2},
		Field{Name: "q", Type: U64, Offset: 16, Count: 2})
	f := m.Fields()
	m.Put(f[0], 5, 0xab)
	m.Put(f[0], 4, 0xcd)
	m.Put(f[1], 1, 0xdeadbeef)
	m.Put(f[2], 1, 1<<40)
	if m.Uint8(5) != 0xab || m.Uint8(4) != 0xcd || m.Uint8(3) != 0 {
		t.Errorf("bytes %v", m.Uint8s(f[0]))
	}
	if m.Uint32(12) != 0xdeadbeef || m.Uint32(8) != 0 || m.Uint64(24) != 1<<40 || m.Uint64(16) != 0 {
		t.Errorf("words %v %v", m.Uint32s(f[1]), m.Uint64s(f[2]))
	}
}
