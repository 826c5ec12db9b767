package buffers

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"
)

// FieldType is the type of a named field in an MBuf.
type FieldType uint8

const (
	U32 FieldType = iota + 1
	U64
	I64
	F64
	U8 // a byte: a HyperLogLog register, a run of flag bytes
)

// Size returns the bytes one value takes; a value is aligned to its size.
func (t FieldType) Size() int {
	switch t {
	case U8:
		return 1
	case U32:
		return 4
	}
	return 8
}

// String returns the type's name: u8, u32, u64, i64 or f64.
func (t FieldType) String() string {
	switch t {
	case U8:
		return "u8"
	case U32:
		return "u32"
	case U64:
		return "u64"
	case I64:
		return "i64"
	case F64:
		return "f64"
	}
	return fmt.Sprintf("FieldType(%d)", uint8(t))
}

// Field names a typed value at a byte offset of an MBuf. Count > 0 makes it
// an array of Count consecutive values (a sketch row, a histogram), even
// when Count is 1; 0 makes it one value.
type Field struct {
	Name   string
	Type   FieldType
	Offset int
	Count  int
}

// MBuf is a function's persistent state: plain bytes with a declared byte
// order and a layout of named fields, so a reader on any side of a barrier
// (a BPF map, a device, a plugin process) can decode it without knowing the
// function's code. The memory is 8-byte aligned.
//
// Counters in a native-order MBuf are updated atomically (Add64), so state
// can be read while the datapath runs.
type MBuf struct {
	words  []uint64
	order  binary.ByteOrder
	fields []Field
}

// Native is the byte order of this machine.
var Native binary.ByteOrder = binary.NativeEndian

// NewMBuf allocates size bytes (rounded up to 8) in the given byte order.
func NewMBuf(size int, order binary.ByteOrder, fields ...Field) *MBuf {
	return newMBuf(make([]uint64, (size+7)/8), order, fields)
}

// NewMBufOn returns an MBuf whose memory is mem rather than memory of its
// own: memory shared with another process (a plugin's state, which ffpf
// reads without asking the plugin). mem must be 8-byte aligned, a whole
// number of 8-byte words, and outlive the MBuf.
func NewMBufOn(mem []byte, order binary.ByteOrder, fields ...Field) *MBuf {
	if len(mem)%8 != 0 || (len(mem) > 0 && uintptr(unsafe.Pointer(&mem[0]))%8 != 0) {
		panic("buffers: an MBuf's memory must be whole aligned 8-byte words")
	}
	var words []uint64
	if len(mem) > 0 {
		words = unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), len(mem)/8)
	}
	return newMBuf(words, order, fields)
}

func newMBuf(words []uint64, order binary.ByteOrder, fields []Field) *MBuf {
	m := &MBuf{words: words, order: order, fields: fields}
	for _, f := range fields {
		n := max(f.Count, 1)
		if f.Offset < 0 || f.Offset+n*f.Type.Size() > len(m.words)*8 || f.Offset%f.Type.Size() != 0 {
			panic(fmt.Sprintf("buffers: MBuf field %q out of bounds or unaligned", f.Name))
		}
	}
	return m
}

// Bytes returns the state as bytes.
func (m *MBuf) Bytes() []byte {
	if len(m.words) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&m.words[0])), len(m.words)*8)
}

// Order returns the declared byte order.
func (m *MBuf) Order() binary.ByteOrder { return m.order }

// Fields returns the layout.
func (m *MBuf) Fields() []Field { return m.fields }

func (m *MBuf) word(off int) *uint64 {
	if off%8 != 0 {
		panic("buffers: unaligned 64-bit MBuf access")
	}
	return &m.words[off/8]
}

// Add64 atomically adds v to the native-order 64-bit counter at off.
func (m *MBuf) Add64(off int, v uint64) { atomic.AddUint64(m.word(off), v) }

// Load64 atomically reads the native-order 64-bit value at off.
func (m *MBuf) Load64(off int) uint64 { return atomic.LoadUint64(m.word(off)) }

// Store64 atomically writes the native-order 64-bit value at off.
func (m *MBuf) Store64(off int, v uint64) { atomic.StoreUint64(m.word(off), v) }

// Uint64 decodes the 64-bit value at off in the declared byte order.
func (m *MBuf) Uint64(off int) uint64 {
	if m.order == Native {
		return m.Load64(off)
	}
	return m.order.Uint64(m.Bytes()[off:])
}

// Uint32 decodes the 32-bit value at off in the declared byte order.
func (m *MBuf) Uint32(off int) uint32 {
	if m.order == Native {
		return atomic.LoadUint32((*uint32)(unsafe.Pointer(&m.Bytes()[off])))
	}
	return m.order.Uint32(m.Bytes()[off:])
}

// Uint8 reads the byte at off (atomically, as part of its 32-bit word).
func (m *MBuf) Uint8(off int) uint8 {
	var w [4]byte
	Native.PutUint32(w[:], atomic.LoadUint32((*uint32)(unsafe.Pointer(&m.Bytes()[off&^3]))))
	return w[off&3]
}

// Put writes value i of field f (a native-order MBuf's) atomically, a
// byte through its 32-bit word as Uint8 reads it: how a flowspace that
// keeps a function's state elsewhere (eBPF maps, a switch's registers)
// copies it in.
func (m *MBuf) Put(f Field, i int, v uint64) {
	switch f.Type {
	case U64, I64, F64:
		m.Store64(f.Offset+8*i, v)
	case U32:
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&m.Bytes()[f.Offset+4*i])), uint32(v))
	case U8:
		off := f.Offset + i
		w := (*uint32)(unsafe.Pointer(&m.Bytes()[off&^3]))
		var b [4]byte
		for {
			old := atomic.LoadUint32(w)
			Native.PutUint32(b[:], old)
			if b[off&3] == uint8(v) {
				return
			}
			b[off&3] = uint8(v)
			if atomic.CompareAndSwapUint32(w, old, Native.Uint32(b[:])) {
				return
			}
		}
	}
}

// Uint64s returns field f (type U64, I64 or F64) as a slice of the MBuf's
// own memory, Count values long (1 for a scalar), for structures that
// update their state in place (a sketch's counters). Only a native-order
// MBuf has such a view; it panics otherwise. Concurrent readers see the
// values only if the writer updates them atomically (sync/atomic), as the
// sketches of functions/sketch do wherever readers may look (a cms adds
// plainly until a reader of its counters exists).
func (m *MBuf) Uint64s(f Field) []uint64 {
	return unsafe.Slice((*uint64)(m.view(f, 8)), max(f.Count, 1))
}

// Uint32s returns a U32 field as a []uint32 view, as Uint64s does.
func (m *MBuf) Uint32s(f Field) []uint32 {
	return unsafe.Slice((*uint32)(m.view(f, 4)), max(f.Count, 1))
}

// Uint8s returns a U8 field as a []uint8 view, as Uint64s does. A byte
// cannot be updated atomically on its own: writers update it as part of its
// aligned 32-bit word (see Uint8).
func (m *MBuf) Uint8s(f Field) []uint8 {
	return unsafe.Slice((*uint8)(m.view(f, 1)), max(f.Count, 1))
}

func (m *MBuf) view(f Field, size int) unsafe.Pointer {
	if m.order != Native {
		panic("buffers: a slice view of an MBuf needs native byte order")
	}
	if f.Type.Size() != size {
		panic(fmt.Sprintf("buffers: MBuf field %q is %s, not a %d-byte type", f.Name, f.Type, size))
	}
	n := max(f.Count, 1)
	if f.Offset < 0 || f.Offset%size != 0 || f.Offset+n*size > len(m.words)*8 {
		panic(fmt.Sprintf("buffers: MBuf field %q out of bounds or unaligned", f.Name))
	}
	return unsafe.Pointer(&m.Bytes()[f.Offset])
}

// Snapshot decodes every field into a map: a scalar field becomes a number,
// an array a slice. It is control-plane code and allocates.
func (m *MBuf) Snapshot() map[string]any {
	out := make(map[string]any, len(m.fields))
	for _, f := range m.fields {
		if f.Count > 0 {
			vals := make([]any, f.Count)
			for i := range vals {
				vals[i] = m.decode(f.Type, f.Offset+i*f.Type.Size())
			}
			out[f.Name] = vals
			continue
		}
		out[f.Name] = m.decode(f.Type, f.Offset)
	}
	return out
}

func (m *MBuf) decode(t FieldType, off int) any {
	switch t {
	case U8:
		return m.Uint8(off)
	case U32:
		return m.Uint32(off)
	case U64:
		return m.Uint64(off)
	case I64:
		return int64(m.Uint64(off))
	case F64:
		return math.Float64frombits(m.Uint64(off))
	}
	return nil
}
