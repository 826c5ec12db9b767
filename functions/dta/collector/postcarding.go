package collector

import "sync/atomic"

// chunkWords is the words of a chunk: the reference pads 5 hops of 4
// bytes to 32 bytes so that a chunk's address is a shift (Collector's
// postcarderEntry); B ≤ 8 hops use the first B.
const chunkWords = 8

// postcarding is Postcarding's memory (Figure 5): C chunks of B words,
// where copy j of flow x is chunk CRC-32(x ‖ j) mod C and hop i's word
// holds checksum(x, i) XOR g(value), g the identity on V = [0, |V|) and
// g(⊔) = Blank.
type postcarding struct {
	words  []uint32
	red    reducer
	hops   int
	n      int
	values uint32 // |V|
}

func newPostcarding(c PostcardingConfig) *postcarding {
	return &postcarding{words: prefault32(make([]uint32, c.Chunks*chunkWords)), red: newReducer(c.Chunks),
		hops: c.Hops, n: c.Redundancy, values: uint32(c.Values)}
}

func (p *postcarding) chunk(st uint32, j int) []uint32 {
	c := int(p.red.mod(slotHash(st, j))) * chunkWords
	return p.words[c : c+chunkWords : c+chunkWords]
}

// writeHop writes one postcard as it arrives, without a translator's
// cache: its word goes to offset hop of the flow's chunks. The postcard
// of hop 0 starts a path: it writes the whole chunk, the other hops
// blank, so that a path shorter than B reads back whole once its
// postcards are in (the reference's translator writes whole chunks only,
// from its cache; the paper writes the i-th postcard to B·h(x)+i).
//
// The stores are plain, as Key-Write's (see keyWrite.write).
//
//go:norace
func (p *postcarding) writeHop(key uint32, hop int, value uint32) {
	st := keyState(key)
	w := HopChecksum(key, hop) ^ value
	if hop != 0 {
		for j := range p.n {
			p.chunk(st, j)[hop] = w
		}
		return
	}
	var c [chunkWords]uint32
	c[0] = w
	for i := 1; i < p.hops; i++ {
		c[i] = HopChecksum(key, i) ^ Blank
	}
	for j := range p.n {
		copy(p.chunk(st, j)[:p.hops], c[:p.hops])
	}
}

// writePath writes a whole path, as a translator emits it from its cache
// (on B postcards, or early on a collision): values[i] is hop i's value
// or Blank, and the hops past the path are blank.
//
//go:norace
func (p *postcarding) writePath(key uint32, values []uint32) {
	st := keyState(key)
	var c [chunkWords]uint32
	for i := range p.hops {
		v := uint32(Blank)
		if i < len(values) {
			v = values[i]
		}
		c[i] = HopChecksum(key, i) ^ v
	}
	for j := range p.n {
		copy(p.chunk(st, j)[:p.hops], c[:p.hops])
	}
}

// PostcardAnswer is a Postcarding query's answer.
type PostcardAnswer struct {
	Status Status
	// Hops are the path's values, hop 0 first, up to its last collected
	// hop; a hop not collected within it is Blank.
	Hops []uint32
	// Votes is how many of the N chunks hold the path (valid chunks
	// otherwise hold different paths: a collision).
	Votes, Slots int
}

// query reconstructs the path: a chunk holds valid information when each
// of its B words decodes to a value in V or the blank, not all blank; the
// path is output when every valid chunk among the N gives the same one.
func (p *postcarding) query(key uint32, n int) PostcardAnswer {
	st := keyState(key)
	var sums [chunkWords]uint32
	for i := range p.hops {
		sums[i] = HopChecksum(key, i)
	}
	a := PostcardAnswer{Slots: n}
	var path [chunkWords]uint32
	plen := 0
	for j := range n {
		c := p.chunk(st, j)
		var got [chunkWords]uint32
		l, ok := 0, true
		for i := range p.hops {
			d := atomic.LoadUint32(&c[i]) ^ sums[i]
			if d != Blank && d >= p.values {
				ok = false
				break
			}
			got[i] = d
			if d != Blank {
				l = i + 1
			}
		}
		if !ok || l == 0 {
			continue
		}
		if a.Votes == 0 {
			path, plen = got, l
		} else if got != path {
			a.Status = Collision
		}
		a.Votes++
	}
	if a.Votes == 0 || a.Status == Collision {
		return a
	}
	a.Status, a.Hops = Found, append([]uint32(nil), path[:plen]...)
	return a
}
