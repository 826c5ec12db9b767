package buffers

import "fmt"

// Meta describes the packet stored in one PBuf slot.
type Meta struct {
	Timestamp int64  // nanoseconds since the Unix epoch
	Offset    uint64 // where the packet's bytes start in the PBuf's memory
	CapLen    uint32 // bytes captured
	WireLen   uint32 // bytes the packet had on the wire, as the source says (a capture file may say less than CapLen: kept, as libpcap keeps it)
	Source    uint16 // index of the source that stored it
}

// PBuf is a circular packet buffer of fixed-size slots. Slot i occupies
// bytes [i*SlotSize, (i+1)*SlotSize) of one contiguous allocation.
//
// A view PBuf (NewPBufView) owns no slot memory: its slots are descriptors
// into memory a source already holds (a mapped capture file, AF_XDP UMEM),
// which is how a packet reaches the functions without being copied.
type PBuf struct {
	slotSize int // 0 for a view
	data     []byte
	meta     []Meta
	ann      []uint64 // AnnWords per slot
}

// AnnWords is the size, in 64-bit words, of the annotation area of a PBuf
// slot: per-packet metadata that functions attach (a timestamp taken, a
// sample's random number, a tag, a flow hash computed once), as Click's and
// VPP's packet annotations. The flowgraph gives each function that writes
// annotations its own words, so forked branches never overwrite each other.
const AnnWords = 8

// NewPBuf allocates a PBuf of slots slots of slotSize bytes each.
func NewPBuf(slots, slotSize int) *PBuf {
	if slots <= 0 || slotSize <= 0 {
		panic(fmt.Sprintf("buffers: bad PBuf geometry %d×%d", slots, slotSize))
	}
	return NewPBufOn(make([]byte, slots*slotSize), slots, slotSize)
}

// NewPBufOn returns a PBuf of slots slots of slotSize bytes each whose
// slots are mem (at least slots*slotSize bytes): memory allocated
// elsewhere, such as shared memory that another process maps
// (buffers/shared). Its metadata and annotations stay this process's.
func NewPBufOn(mem []byte, slots, slotSize int) *PBuf {
	if slots <= 0 || slotSize <= 0 || len(mem) < slots*slotSize {
		panic(fmt.Sprintf("buffers: bad PBuf geometry %d×%d on %d bytes", slots, slotSize, len(mem)))
	}
	p := &PBuf{
		slotSize: slotSize,
		data:     mem[: slots*slotSize : slots*slotSize],
		meta:     make([]Meta, slots),
		ann:      make([]uint64, slots*AnnWords),
	}
	for i := range p.meta {
		p.meta[i].Offset = uint64(i * slotSize)
	}
	return p
}

// NewPBufView returns a PBuf of slots descriptors into mem, filled with
// Batch.AppendRef; mem must outlive every batch that refers to it.
func NewPBufView(mem []byte, slots int) *PBuf {
	if slots <= 0 {
		panic(fmt.Sprintf("buffers: bad PBuf view of %d slots", slots))
	}
	return &PBuf{data: mem, meta: make([]Meta, slots), ann: make([]uint64, slots*AnnWords)}
}

// Memory returns the memory the packets lie in: the slots', or the
// memory a view refers to. A packet's Meta.Offset is its place in it.
func (p *PBuf) Memory() []byte { return p.data }

// IsView reports whether the PBuf refers to memory it does not own.
func (p *PBuf) IsView() bool { return p.slotSize == 0 }

// Slots returns the number of slots.
func (p *PBuf) Slots() int { return len(p.meta) }

// SlotSize returns the size of a slot in bytes: the most a slot can capture.
func (p *PBuf) SlotSize() int { return p.slotSize }

// Slot returns the whole memory of slot i, for a source that writes a
// packet in place (Batch.NextSlot). A view has no slot memory of its own.
func (p *PBuf) Slot(i uint32) []byte {
	if p.slotSize == 0 {
		panic("buffers: a view PBuf has no slots to write")
	}
	off := int(i) * p.slotSize
	return p.data[off : off+p.slotSize : off+p.slotSize]
}

// Data returns the captured bytes of slot i.
func (p *PBuf) Data(i uint32) []byte {
	m := &p.meta[i]
	end := m.Offset + uint64(m.CapLen)
	return p.data[m.Offset:end:end]
}

// Ann returns the annotation area of slot i. A word is valid for a packet
// only once its writer has written it: annotations are not cleared when a
// slot is reused, so a reader must be placed after the writer.
func (p *PBuf) Ann(i uint32) *[AnnWords]uint64 {
	return (*[AnnWords]uint64)(p.ann[int(i)*AnnWords:])
}

// Meta returns the descriptor of slot i.
func (p *PBuf) Meta(i uint32) *Meta { return &p.meta[i] }

// Store copies pkt into slot i, truncating it to the slot size the way a
// snap length would, and records its metadata. It returns the captured length.
func (p *PBuf) Store(i uint32, pkt []byte, wireLen uint32, ts int64, src uint16) uint32 {
	n := copy(p.Slot(i), pkt)
	p.meta[i] = Meta{Timestamp: ts, Offset: uint64(int(i) * p.slotSize), CapLen: uint32(n), WireLen: wireLen, Source: src}
	return uint32(n)
}
