package buffers

import "fmt"

// Meta describes the packet stored in one PBuf slot.
type Meta struct {
	Timestamp int64  // nanoseconds since the Unix epoch
	CapLen    uint32 // bytes stored in the slot
	WireLen   uint32 // bytes the packet had on the wire (≥ CapLen)
	Source    uint16 // index of the source that stored it
}

// PBuf is a circular packet buffer of fixed-size slots. Slot i occupies
// bytes [i*SlotSize, (i+1)*SlotSize) of one contiguous allocation.
type PBuf struct {
	slotSize int
	data     []byte
	meta     []Meta
}

// NewPBuf allocates a PBuf of slots slots of slotSize bytes each.
func NewPBuf(slots, slotSize int) *PBuf {
	if slots <= 0 || slotSize <= 0 {
		panic(fmt.Sprintf("buffers: bad PBuf geometry %d×%d", slots, slotSize))
	}
	return &PBuf{
		slotSize: slotSize,
		data:     make([]byte, slots*slotSize),
		meta:     make([]Meta, slots),
	}
}

// Slots returns the number of slots.
func (p *PBuf) Slots() int { return len(p.meta) }

// SlotSize returns the size of a slot in bytes: the most a slot can capture.
func (p *PBuf) SlotSize() int { return p.slotSize }

// Slot returns the whole memory of slot i, for a writer that fills it in
// place and then records the lengths with SetMeta.
func (p *PBuf) Slot(i uint32) []byte {
	off := int(i) * p.slotSize
	return p.data[off : off+p.slotSize : off+p.slotSize]
}

// Data returns the captured bytes of slot i.
func (p *PBuf) Data(i uint32) []byte {
	off := int(i) * p.slotSize
	return p.data[off : off+int(p.meta[i].CapLen) : off+p.slotSize]
}

// Meta returns the descriptor of slot i.
func (p *PBuf) Meta(i uint32) *Meta { return &p.meta[i] }

// Store copies pkt into slot i, truncating it to the slot size the way a
// snap length would, and records its metadata. It returns the captured length.
func (p *PBuf) Store(i uint32, pkt []byte, wireLen uint32, ts int64, src uint16) uint32 {
	n := copy(p.Slot(i), pkt)
	if wireLen < uint32(n) {
		wireLen = uint32(n)
	}
	p.meta[i] = Meta{Timestamp: ts, CapLen: uint32(n), WireLen: wireLen, Source: src}
	return uint32(n)
}
