package sketch

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/measure"
)

// Bloom is a Bloom filter of m bits with k positions per key
// (flowkey.Index(h, i, m), i < k, by double hashing). Bit b is bit b%64 of
// word b/64. A member always tests true; a non-member after n insertions
// tests true with probability about (1 − e^(−kn/m))^k. Per-CPU copies merge
// with Merge (or).
//
// Tracked (Track), it records the words a window set a first bit in, so
// that ResetTouched clears those, not the whole filter.
type Bloom struct {
	w       []uint64
	m       uint32
	k       uint32
	touched *measure.Touched
}

// BloomWords returns the 64-bit words m bits take.
func BloomWords(m int) int { return (m + 63) / 64 }

// BloomK returns the number of positions that minimises false positives
// for n keys in m bits: round(m/n · ln 2), at least 1.
func BloomK(m, n int) int { return max(1, int(math.Round(float64(m)/float64(max(n, 1))*math.Ln2))) }

// BloomFalsePositive returns (1 − e^(−kn/m))^k.
func BloomFalsePositive(m, k, n int) float64 {
	return math.Pow(1-math.Exp(-float64(k)*float64(n)/float64(m)), float64(k))
}

// NewBloom returns a Bloom filter of m bits (1..2^32−1) and k positions
// (1..32) on mem, which must hold BloomWords(m) words.
func NewBloom(mem []uint64, m, k int) (*Bloom, error) {
	if m < 1 || m > math.MaxUint32 || k < 1 || k > 32 {
		return nil, fmt.Errorf("bloom: %d bits (1..2^32-1) or %d hashes (1..32) out of range", m, k)
	}
	if len(mem) != BloomWords(m) {
		return nil, fmt.Errorf("bloom: %d words given for %d bits (%d)", len(mem), m, BloomWords(m))
	}
	return &Bloom{w: mem, m: uint32(m), k: uint32(k)}, nil
}

// Bits returns m; K returns k.
func (s *Bloom) Bits() int { return int(s.m) }
func (s *Bloom) K() int    { return int(s.k) }

// Add inserts a key's hash; it reports whether the key tested true before
// (all k bits were already set).
func (s *Bloom) Add(h uint64) (present bool) {
	present = true
	for i := uint32(0); i < s.k; i++ {
		b := flowkey.Index(h, i, s.m)
		p, mask := &s.w[b>>6], uint64(1)<<(b&63)
		if atomic.LoadUint64(p)&mask == 0 {
			present = false
			if atomic.OrUint64(p, mask) == 0 && s.touched != nil {
				s.touched.Add(b >> 6)
			}
		}
	}
	return present
}

// Track starts recording the words a window sets a first bit in, in t;
// the filter must be empty (a function's, at its start).
func (s *Bloom) Track(t *measure.Touched) { s.touched = t }

// ResetTouched empties the filter: a tracked one's words a window set a
// bit in (the others are 0), an untracked one's all.
func (s *Bloom) ResetTouched() { resetTouched64(s.w, s.touched) }

// Test reports whether a key's hash may be a member.
func (s *Bloom) Test(h uint64) bool {
	for i := uint32(0); i < s.k; i++ {
		b := flowkey.Index(h, i, s.m)
		if atomic.LoadUint64(&s.w[b>>6])&(1<<(b&63)) == 0 {
			return false
		}
	}
	return true
}

// Merge ors other's words (another CPU's copy) into s.
func (s *Bloom) Merge(other []uint64) {
	for i := range s.w[:len(other)] {
		atomic.OrUint64(&s.w[i], atomic.LoadUint64(&other[i]))
	}
	if s.touched != nil {
		s.touched.SetAll()
	}
}

// Reset zeroes words [from, to).
func (s *Bloom) Reset(from, to int) { zero64(s.w[from:to]) }

// Words returns the filter's words (the memory given to NewBloom).
func (s *Bloom) Words() []uint64 { return s.w }

// CountingBloom is a counting Bloom filter: n 64-bit counters, k per key at
// the positions a Bloom filter of n bits would use. It stores a value per
// key with MAFIA's aggregate reads over the key's k counters (min, max,
// sum, avg, all, any); Min never under-estimates a key's sum of Adds, as in
// a count-min sketch of one row shared by k hashes. A key whose positions
// coincide has that counter counted once per position.
//
// Tracked (Track), it records the counters a window raised from 0, so that
// ResetTouched clears those, not all n.
type CountingBloom struct {
	c       []uint64
	n       uint32
	k       uint32
	w       Writes
	touched *measure.Touched
}

// Track starts recording the counters a window raises from 0, in t; the
// counters must be 0 (a function's, at its start).
func (s *CountingBloom) Track(t *measure.Touched) { s.touched = t }

// ResetTouched zeroes the counters: a tracked filter's that a window
// raised from 0 (the others are 0), an untracked one's all.
func (s *CountingBloom) ResetTouched() { resetTouched64(s.c, s.touched) }

// first records that counter j went from 0 to now by adding v.
func (s *CountingBloom) first(j uint32, now, v uint64) {
	if now == v && v != 0 && s.touched != nil {
		s.touched.Add(j)
	}
}

// NewCountingBloom returns a counting Bloom filter on mem (n = len(mem)
// counters, 1..2^32−1) with k positions (1..32).
func NewCountingBloom(mem []uint64, k int, w Writes) (*CountingBloom, error) {
	if len(mem) < 1 || len(mem) > math.MaxUint32 || k < 1 || k > 32 {
		return nil, fmt.Errorf("counting bloom: %d counters (1..2^32-1) or %d hashes (1..32) out of range", len(mem), k)
	}
	return &CountingBloom{c: mem, n: uint32(len(mem)), k: uint32(k), w: w}, nil
}

// K returns the positions per key.
func (s *CountingBloom) K() int { return int(s.k) }

func (s *CountingBloom) at(h uint64, i uint32) *uint64 { return &s.c[flowkey.Index(h, i, s.n)] }

// Add adds v to the key's counters and returns the least of them after.
func (s *CountingBloom) Add(h, v uint64) uint64 {
	m := uint64(math.MaxUint64)
	if s.w == Exclusive {
		for i := uint32(0); i < s.k; i++ {
			j := flowkey.Index(h, i, s.n)
			s.c[j] += v
			s.first(j, s.c[j], v)
			m = min(m, s.c[j])
		}
		return m
	}
	for i := uint32(0); i < s.k; i++ {
		j := flowkey.Index(h, i, s.n)
		n := atomic.AddUint64(&s.c[j], v)
		s.first(j, n, v)
		m = min(m, n)
	}
	return m
}

// Remove subtracts v from the key's counters, once per position as Add
// adds, if none would fall below 0, and reports whether it did (a key that
// was added can be removed). It is meant for one writer: concurrent writers
// may interleave with its check.
func (s *CountingBloom) Remove(h, v uint64) bool {
	for i := uint32(0); i < s.k; i++ {
		p, times := s.at(h, i), uint64(0)
		for j := uint32(0); j < s.k; j++ {
			if s.at(h, j) == p {
				times++
			}
		}
		if hi, need := bits.Mul64(v, times); hi != 0 || atomic.LoadUint64(p) < need {
			return false
		}
	}
	for i := uint32(0); i < s.k; i++ {
		atomic.AddUint64(s.at(h, i), -v)
	}
	return true
}

// Set stores v in each of the key's counters.
func (s *CountingBloom) Set(h, v uint64) {
	for i := uint32(0); i < s.k; i++ {
		j := flowkey.Index(h, i, s.n)
		if atomic.SwapUint64(&s.c[j], v) == 0 {
			s.first(j, v, v)
		}
	}
}

// Min returns the least of the key's counters: its estimate.
func (s *CountingBloom) Min(h uint64) uint64 {
	m := uint64(math.MaxUint64)
	for i := uint32(0); i < s.k; i++ {
		m = min(m, atomic.LoadUint64(s.at(h, i)))
	}
	return m
}

// Max returns the largest of the key's counters.
func (s *CountingBloom) Max(h uint64) uint64 {
	var m uint64
	for i := uint32(0); i < s.k; i++ {
		m = max(m, atomic.LoadUint64(s.at(h, i)))
	}
	return m
}

// Sum returns the sum of the key's counters (wrapping at 2^64).
func (s *CountingBloom) Sum(h uint64) uint64 {
	var t uint64
	for i := uint32(0); i < s.k; i++ {
		t += atomic.LoadUint64(s.at(h, i))
	}
	return t
}

// Avg returns the mean of the key's counters, rounded down.
func (s *CountingBloom) Avg(h uint64) uint64 {
	var hi, lo uint64
	for i := uint32(0); i < s.k; i++ { // 128-bit sum: no overflow
		v := atomic.LoadUint64(s.at(h, i))
		lo += v
		if lo < v {
			hi++
		}
	}
	q, _ := bits.Div64(hi, lo, uint64(s.k)) // hi < k: no panic
	return q
}

// All reports whether every one of the key's counters equals v; Any
// whether one does. With v = 0, Any is "not a member".
func (s *CountingBloom) All(h, v uint64) bool {
	for i := uint32(0); i < s.k; i++ {
		if atomic.LoadUint64(s.at(h, i)) != v {
			return false
		}
	}
	return true
}

// Any reports whether one of the key's counters equals v.
func (s *CountingBloom) Any(h, v uint64) bool {
	for i := uint32(0); i < s.k; i++ {
		if atomic.LoadUint64(s.at(h, i)) == v {
			return true
		}
	}
	return false
}

// Merge adds other's counters (another CPU's copy) into s.
func (s *CountingBloom) Merge(other []uint64) {
	for i := range s.c[:len(other)] {
		atomic.AddUint64(&s.c[i], atomic.LoadUint64(&other[i]))
	}
	if s.touched != nil {
		s.touched.SetAll()
	}
}

// Reset zeroes counters [from, to).
func (s *CountingBloom) Reset(from, to int) { zero64(s.c[from:to]) }
