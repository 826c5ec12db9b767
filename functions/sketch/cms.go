package sketch

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/measure"
)

// CountMin is a count-min sketch (Cormode and Muthukrishnan 2005): depth
// rows of width 64-bit counters; a key adds its value to one counter per
// row (row i at flowkey.Index(h, i, width)) and its estimate is the least
// of them. With width = ⌈e/ε⌉ and depth = ⌈ln 1/δ⌉ an estimate is never
// below the true sum and exceeds it by more than εN (N the sum of all
// values) with probability at most δ.
//
// Counters are 64-bit: a byte count passes 2^32 within a second at 40 Gb/s,
// and a 32-bit counter that wraps would break the never-below guarantee.
// Row r occupies counters [r·width, (r+1)·width) of the memory.
//
// Tracked (Track), it records the counters a window raised from 0, so that
// ResetTouched clears those, not depth·width.
type CountMin struct {
	c       []uint64
	depth   uint32
	width   uint32
	w       Writes
	touched *measure.Touched
}

// Writes says who may update a structure of counters, which decides how
// it adds.
type Writes uint8

const (
	// Shared: any goroutines update and read at once; adds are atomic
	// (sync/atomic), so a reader (an MBuf snapshot) may run any time.
	Shared Writes = iota
	// Exclusive: one goroutine updates; readers synchronise with it (the
	// function's lock, or after it stopped). Adds are plain, several
	// times cheaper than atomic ones.
	Exclusive
)

// CountMinDims returns the depth and width that give error εN with
// probability 1−δ: ⌈ln 1/δ⌉ and ⌈e/ε⌉.
func CountMinDims(eps, delta float64) (depth, width int) {
	return int(math.Ceil(math.Log(1 / delta))), int(math.Ceil(math.E / eps))
}

// NewCountMin returns a count-min sketch on mem, which must hold exactly
// depth·width counters (depth 1..64, width 1..2^31).
func NewCountMin(mem []uint64, depth, width int, w Writes) (*CountMin, error) {
	if depth < 1 || depth > 64 || width < 1 || width > 1<<31 {
		return nil, fmt.Errorf("count-min: depth %d (1..64) or width %d (1..2^31) out of range", depth, width)
	}
	if len(mem) != depth*width {
		return nil, fmt.Errorf("count-min: %d counters given for %d×%d", len(mem), depth, width)
	}
	return &CountMin{c: mem, depth: uint32(depth), width: uint32(width), w: w}, nil
}

// Depth returns the number of rows.
func (s *CountMin) Depth() int { return int(s.depth) }

// Width returns the counters per row.
func (s *CountMin) Width() int { return int(s.width) }

// Add adds v to the counters of the key hashed to h and returns the key's
// new estimate.
func (s *CountMin) Add(h, v uint64) uint64 {
	est := uint64(math.MaxUint64)
	base := uint32(0)
	if s.w == Exclusive {
		for i := uint32(0); i < s.depth; i++ {
			j := base + flowkey.Index(h, i, s.width)
			s.c[j] += v
			if s.c[j] == v && s.touched != nil {
				s.first(j, v)
			}
			est = min(est, s.c[j])
			base += s.width
		}
		return est
	}
	for i := uint32(0); i < s.depth; i++ {
		j := base + flowkey.Index(h, i, s.width)
		n := atomic.AddUint64(&s.c[j], v)
		if n == v && s.touched != nil {
			s.first(j, v)
		}
		est = min(est, n)
		base += s.width
	}
	return est
}

// AddRows adds v to counter pos[r] of each row r (a switch's positions,
// flowkey.P4Index) and returns the key's new estimate.
func (s *CountMin) AddRows(pos []uint32, v uint64) uint64 {
	est := uint64(math.MaxUint64)
	for r, i := range pos[:s.depth] {
		j := uint32(r)*s.width + i
		p := &s.c[j]
		var n uint64
		if s.w == Exclusive {
			*p += v
			n = *p
		} else {
			n = atomic.AddUint64(p, v)
		}
		if n == v && s.touched != nil {
			s.first(j, v)
		}
		est = min(est, n)
	}
	return est
}

// EstimateRows returns the least of counters pos[r] of the rows.
func (s *CountMin) EstimateRows(pos []uint32) uint64 {
	est := uint64(math.MaxUint64)
	for r, i := range pos[:s.depth] {
		est = min(est, atomic.LoadUint64(&s.c[uint32(r)*s.width+i]))
	}
	return est
}

// first records that counter j went from 0 by adding v.
func (s *CountMin) first(j uint32, v uint64) {
	if v != 0 {
		s.touched.Add(j)
	}
}

// Track starts recording the counters a window raises from 0, in t; the
// counters must be 0 (a function's, at its start).
func (s *CountMin) Track(t *measure.Touched) { s.touched = t }

// ResetTouched zeroes the counters: a tracked sketch's that a window
// raised from 0 (the others are 0), an untracked one's all.
func (s *CountMin) ResetTouched() { resetTouched64(s.c, s.touched) }

// Estimate returns the estimate of the key hashed to h: the least of its
// counters.
func (s *CountMin) Estimate(h uint64) uint64 {
	est := uint64(math.MaxUint64)
	base := uint32(0)
	for i := uint32(0); i < s.depth; i++ {
		est = min(est, atomic.LoadUint64(&s.c[base+flowkey.Index(h, i, s.width)]))
		base += s.width
	}
	return est
}

// Cells returns the counters of the key hashed to h, one per row, into
// out (of Depth() elements): MAFIA's aggregates over a key's hash set
// (min, max, sum, avg) are computed from them.
func (s *CountMin) Cells(h uint64, out []uint64) {
	base := uint32(0)
	for i := uint32(0); i < s.depth; i++ {
		out[i] = atomic.LoadUint64(&s.c[base+flowkey.Index(h, i, s.width)])
		base += s.width
	}
}

// Reset zeroes counters [from, to) of the memory: all of them at once, or a
// part per packet in an incremental reset.
func (s *CountMin) Reset(from, to int) { zero64(s.c[from:to]) }

// Len returns the number of counters, depth·width.
func (s *CountMin) Len() int { return len(s.c) }

// Merge adds the counters of other, a sketch of the same dimensions and
// seed (another CPU's copy), into s.
func (s *CountMin) Merge(other []uint64) {
	for i := range s.c[:len(other)] {
		atomic.AddUint64(&s.c[i], atomic.LoadUint64(&other[i]))
	}
	if s.touched != nil {
		s.touched.SetAll()
	}
}

func zero64(c []uint64) {
	for i := range c {
		atomic.StoreUint64(&c[i], 0)
	}
}

// resetTouched64 zeroes the words of c that t recorded (the others are
// 0), or all of them untracked (t nil) or past t's list; t starts again.
func resetTouched64(c []uint64, t *measure.Touched) {
	if t == nil || t.All() {
		zero64(c)
	} else {
		for _, j := range t.Entries() {
			atomic.StoreUint64(&c[j], 0)
		}
	}
	if t != nil {
		t.Reset()
	}
}

// SetWrites changes who may update the sketch; the caller makes sure no
// Add runs meanwhile, and that the adds before it happen before any
// reader that the change admits.
func (s *CountMin) SetWrites(w Writes) { s.w = w }

// String returns "shared" or "exclusive".
func (w Writes) String() string {
	if w == Exclusive {
		return "exclusive"
	}
	return "shared"
}
