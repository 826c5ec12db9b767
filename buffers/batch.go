package buffers

// MaxBatch is the most packets a batch carries. VPP and FastClick use 256:
// large enough to amortise per-call costs, small enough to stay in cache.
const MaxBatch = 256

// Entry is one IBuf entry: a PBuf slot and the 32-bit classification result
// the function that kept the packet attached to it.
type Entry struct {
	Slot  uint32
	Class uint32
}

// Batch is a vector of IBuf entries into one PBuf. It is the unit that
// crosses every interface of the datapath: a function receives a batch and
// compacts it in place, keeping the entries of the packets that pass.
//
// A batch owns a window of PBuf slots [Base, Base+Cap): a source appends
// packets into that window, in slot order.
type Batch struct {
	PBuf   *PBuf
	Base   uint32 // first slot of the window owned by this batch
	Cap    int    // how many packets the source may append (≤ MaxBatch)
	Source uint16 // source index recorded in each slot's Meta

	// Now is the stream's packet clock once the batch is through (ns since
	// the Unix epoch): the latest capture time seen, for a file; for a live
	// source, also wall time while nothing arrives. A batch with no packet
	// still tells a flowspace above that time moved (a clock-only batch).
	Now int64

	// N is the number of valid entries in E.
	N int
	// Dropped is set by a function during Process to the number of entries
	// it removed because of an error or overflow rather than by choice; the
	// executor resets it before each call. in = out + filtered + dropped.
	Dropped int
	E       [MaxBatch]Entry
}

// NewBatch returns a batch owning slots [base, base+n) of p.
func NewBatch(p *PBuf, base uint32, n int, source uint16) *Batch {
	if n > MaxBatch || int(base)+n > p.Slots() {
		panic("buffers: batch window outside PBuf")
	}
	return &Batch{PBuf: p, Base: base, Cap: n, Source: source}
}

// CopyRange makes b's entries a copy of src's entries whose slots lie in
// [lo, hi): the part of a batch before (or after) a point in time, which a
// flowspace processes on its own when a clocked function's deadline falls
// inside the batch.
func (b *Batch) CopyRange(src *Batch, lo, hi uint32) {
	b.PBuf, b.Base, b.Source, b.Now = src.PBuf, src.Base, src.Source, src.Now
	b.Dropped = 0
	n := 0
	for _, e := range src.E[:src.N] {
		if e.Slot >= lo && e.Slot < hi {
			b.E[n] = e
			n++
		}
	}
	b.N = n
}

// Entries returns the valid entries.
func (b *Batch) Entries() []Entry { return b.E[:b.N] }

// Reset empties the batch for refilling by its source.
func (b *Batch) Reset() { b.N, b.Dropped = 0, 0 }

// Room returns how many more packets a source may append.
func (b *Batch) Room() int { return b.Cap - b.N }

// NextSlot returns the memory of the slot the next appended packet goes to,
// for a source that writes the packet in place before calling Commit.
func (b *Batch) NextSlot() []byte { return b.PBuf.Slot(b.Base + uint32(b.N)) }

// Commit appends the packet written into NextSlot.
func (b *Batch) Commit(capLen, wireLen uint32, ts int64) {
	slot := b.Base + uint32(b.N)
	b.PBuf.meta[slot] = Meta{Timestamp: ts, Offset: uint64(int(slot) * b.PBuf.slotSize),
		CapLen: capLen, WireLen: wireLen, Source: b.Source}
	b.E[b.N] = Entry{Slot: slot}
	b.N++
}

// AppendRef appends a packet that is already in the memory of a view PBuf
// at off (zero-copy): the next slot becomes a descriptor of it.
func (b *Batch) AppendRef(off uint64, capLen, wireLen uint32, ts int64) {
	slot := b.Base + uint32(b.N)
	b.PBuf.meta[slot] = Meta{Timestamp: ts, Offset: off, CapLen: capLen, WireLen: wireLen, Source: b.Source}
	b.E[b.N] = Entry{Slot: slot}
	b.N++
}

// Append copies pkt into the next slot (truncated to the slot size) and
// appends it. The caller checks Room first.
func (b *Batch) Append(pkt []byte, wireLen uint32, ts int64) {
	slot := b.Base + uint32(b.N)
	b.PBuf.Store(slot, pkt, wireLen, ts, b.Source)
	b.E[b.N] = Entry{Slot: slot}
	b.N++
}

// AppendSlot appends an entry for a packet already stored in slot, for a
// source that owns its PBuf (zero-copy). A batch's slots must ascend and lie
// in [Base, Base+MaxBatch): set Base before the first AppendSlot.
func (b *Batch) AppendSlot(slot uint32) {
	b.E[b.N] = Entry{Slot: slot}
	b.N++
}

// CopyFrom makes b's entries a copy of src's (same PBuf).
func (b *Batch) CopyFrom(src *Batch) {
	b.PBuf, b.Base, b.Source, b.Now = src.PBuf, src.Base, src.Source, src.Now
	b.N = copy(b.E[:], src.E[:src.N])
	b.Dropped = 0
}

// Union sets b to the union of the entries of srcs, which must be
// subsequences of one source batch (slots ascending). A packet present in
// several inputs appears once, with the class result of the first input that
// has it: a flow is a set of packets, so a join never duplicates one.
func (b *Batch) Union(srcs []*Batch) {
	first := srcs[0]
	b.PBuf, b.Base, b.Source, b.Now = first.PBuf, first.Base, first.Source, first.Now
	b.Dropped = 0
	if len(srcs) == 1 {
		b.N = copy(b.E[:], first.E[:first.N])
		return
	}
	// Mark by slot offset in the window, then emit in slot order.
	var seen [MaxBatch]bool
	var class [MaxBatch]uint32
	lo, hi := MaxBatch, -1
	for _, s := range srcs {
		for _, e := range s.E[:s.N] {
			i := int(e.Slot - b.Base)
			if !seen[i] {
				seen[i], class[i] = true, e.Class
				lo, hi = min(lo, i), max(hi, i)
			}
		}
	}
	n := 0
	for i := lo; i <= hi; i++ {
		if seen[i] {
			b.E[n] = Entry{Slot: b.Base + uint32(i), Class: class[i]}
			n++
		}
	}
	b.N = n
}
