package flowkey

import (
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// Hashes memoizes the key hashes of the packets of one batch window (the
// slots [Base, Base+MaxBatch) of a PBuf, where every entry of a batch
// lies) under one spec, link type and seed: each packet is parsed and
// hashed once, however many functions keyed alike process it. A flowspace
// keeps one per key on a route and forgets it when the next batch comes
// (Forget); a function keeps its own when it runs alone. It allocates
// nothing after NewHashes and is not safe for concurrent use.
type Hashes struct {
	sp   *Spec
	lt   functions.LinkType
	seed uint64

	pbuf  *buffers.PBuf
	base  uint32
	stamp uint32 // the slots whose seen equals it are known
	seen  [buffers.MaxBatch]uint32
	h     [buffers.MaxBatch]uint64
	ok    [buffers.MaxBatch]bool
	key   Key // Extract's scratch
}

// NewHashes returns an empty memo of the hashes of sp's keys, with seed,
// of packets of link type lt.
func NewHashes(sp *Spec, lt functions.LinkType, seed uint64) *Hashes {
	return &Hashes{sp: sp, lt: lt, seed: seed, stamp: 1}
}

// Keyed is a function that updates its state by its packets' key hashes:
// a flowspace that runs several such functions on a batch gives those
// keyed alike (Spec.Same, one link type and seed) one Hashes, so that each
// packet is parsed and hashed once (DESIGN.md §11, a flow hash computed
// once), and calls ProcessHashes in place of Process.
type Keyed interface {
	functions.Function
	// KeyHash returns how the function keys and hashes its packets; a
	// nil sp says it takes no flowspace's hashes (it positions keys by
	// hashes of its own, a switch's) and is run by Process.
	KeyHash() (sp *Spec, lt functions.LinkType, seed uint64)
	// ProcessHashes is Process with the hashes of b's packets at hand:
	// hs.Fill(b) has been called.
	ProcessHashes(b *buffers.Batch, hs *Hashes)
}

// Matches says whether hs memoizes the hashes a function keyed by sp, lt
// and seed computes.
func (hs *Hashes) Matches(sp *Spec, lt functions.LinkType, seed uint64) bool {
	return hs.lt == lt && hs.seed == seed && hs.sp.Same(sp)
}

// Forget forgets every hash: the slots hold other packets now.
func (hs *Hashes) Forget() {
	hs.stamp++
	if hs.stamp == 0 { // wrapped: an old mark could pass for a new one
		clear(hs.seen[:])
		hs.stamp = 1
	}
}

// Fill computes the hashes of b's packets not known yet. A batch of
// another window (PBuf or Base) makes it forget the previous one.
func (hs *Hashes) Fill(b *buffers.Batch) {
	if b.PBuf != hs.pbuf || b.Base != hs.base {
		hs.Forget()
		hs.pbuf, hs.base = b.PBuf, b.Base
	}
	p := b.PBuf
	for _, e := range b.E[:b.N] {
		i := e.Slot - hs.base
		if hs.seen[i] == hs.stamp {
			continue
		}
		hs.seen[i] = hs.stamp
		if hs.sp.Extract(hs.lt, p.Data(e.Slot), &hs.key) {
			hs.h[i], hs.ok[i] = hs.sp.Hash(&hs.key, hs.seed), true
		} else {
			hs.h[i], hs.ok[i] = 0, false
		}
	}
}

// Of returns the hash of the key of the packet in slot, which must be an
// entry of the batch last filled, and false when the packet has no key
// (Extract returned false).
func (hs *Hashes) Of(slot uint32) (uint64, bool) {
	i := slot - hs.base
	return hs.h[i], hs.ok[i]
}

// Same reports whether sp and o make the same key of every packet: the
// same fields with the same prefix lengths, in whatever order written.
func (sp *Spec) Same(o *Spec) bool {
	if sp == o {
		return true
	}
	return sp.has == o.has && sp.header == o.header && sp.words == o.words &&
		sp.pfx[0].masks() == o.pfx[0].masks() && sp.pfx[1].masks() == o.pfx[1].masks()
}

func (p prefix) masks() [3]uint64 { return [3]uint64{p.m4, p.m6hi, p.m6lo} }
