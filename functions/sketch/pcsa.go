package sketch

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/measure"
)

// PCSA is probabilistic counting with stochastic averaging (Flajolet and
// Martin 1985) over m 32-bit bitmaps. A hash h selects bitmap
// j = (uint32(h>>32)·m) >> 32 and sets bit ρ = the trailing zeros of
// uint32(h) (31 when those 32 bits are 0). With R_j the lowest bit still
// clear in bitmap j and Z = ΣR_j / m, the estimate is
//
//	(m/φ)·(2^Z − 2^(−κ·Z)),  φ = 0.77351, κ = 1.75
//
// Flajolet and Martin's m/φ·2^Z with the correction term of Scheuermann
// and Mauve ("Near-optimal compression of probabilistic counting sketches
// for networking applications", DIALM-POMC 2007), which removes most of the
// estimator's bias at small cardinalities (without it an empty sketch
// estimates m/φ). Below 3m keys, where even that estimate strays by more
// than 3·0.78/√m, the estimate is linear counting (Whang, Vander-Zanden and
// Taylor 1990) per bit position: every key sets exactly one bit, at
// position r in a bitmap chosen uniformly, so with V_r of the m bitmaps
// having bit r clear, the keys at position r number about
// ln(V_r/m) / ln(1 − 1/m), and n is their sum over r; at 3m its standard
// error is about 0.52/√m. Standard error 0.78/√m.
//
// Tracked (Track), it also keeps ΣR_j and, per bit position, the bitmaps
// with it clear, and the bitmaps a window set a first bit in, so that a
// window's estimate (TrackedEstimate) costs 32 logarithms and its reset
// (ResetTouched) the bitmaps it touched, not m.
type PCSA struct {
	b       []uint32
	m       uint32
	tracked bool
	sum     int     // ΣR_j
	clear   [32]int // bitmaps with bit r clear
	touched *measure.Touched
}

// Constants of PCSA's estimate.
const (
	PCSAPhi   = 0.77351
	PCSAKappa = 1.75
)

// NewPCSA returns a PCSA sketch on mem, which holds its m bitmaps
// (m = len(mem), 1..2^31).
func NewPCSA(mem []uint32) (*PCSA, error) {
	if len(mem) < 1 || len(mem) > 1<<31 {
		return nil, fmt.Errorf("pcsa: %d bitmaps, want 1..2^31", len(mem))
	}
	return &PCSA{b: mem, m: uint32(len(mem))}, nil
}

// PCSAPosition returns the bitmap and bit a hash sets among m bitmaps.
func PCSAPosition(h uint64, m uint32) (j uint32, bit uint8) {
	j = uint32(uint64(uint32(h>>32)) * uint64(m) >> 32)
	return j, uint8(min(flowkey.TrailingZeros(uint32(h)), 31))
}

// PCSAPosition32 returns the bitmap and bit a 32-bit hash sets among 2^b
// bitmaps, as a switch computes them from crc32: the bitmap is the top b
// bits, the bit the trailing zeros of the rest (at most 31−b).
func PCSAPosition32(h uint32, b uint8) (j uint32, bit uint8) {
	if b > 0 {
		j = h >> (32 - b)
	}
	low := h&(1<<(32-b)-1) | 1<<(31-b)
	return j, uint8(bits.TrailingZeros32(low))
}

// Add32 offers a 32-bit hash (PCSAPosition32, the bitmaps a power of
// two); it reports whether a bit was set.
func (s *PCSA) Add32(h uint32) bool {
	j, bit := PCSAPosition32(h, uint8(bits.TrailingZeros32(s.m)))
	return s.set(j, bit)
}

// Track starts keeping ΣR_j, the clear bits and the bitmaps a window
// touched, which t records; the bitmaps must be 0 (a function's, at its
// start). Only the goroutine that adds (under the function's lock) may
// then read TrackedEstimate or call ResetTouched.
func (s *PCSA) Track(t *measure.Touched) {
	s.tracked, s.sum, s.touched = true, 0, t
	for r := range s.clear {
		s.clear[r] = len(s.b)
	}
}

// Add offers a key's hash; it reports whether a bit was set.
func (s *PCSA) Add(h uint64) bool {
	j, bit := PCSAPosition(h, s.m)
	return s.set(j, bit)
}

func (s *PCSA) set(j uint32, bit uint8) bool {
	mask := uint32(1) << bit
	if atomic.LoadUint32(&s.b[j])&mask != 0 {
		return false
	}
	old := atomic.OrUint32(&s.b[j], mask)
	if old&mask != 0 {
		return false
	}
	if s.tracked {
		s.clear[bit]--
		s.sum += bits.TrailingZeros32(^(old | mask)) - bits.TrailingZeros32(^old)
		if old == 0 {
			s.touched.Add(j)
		}
	}
	return true
}

// Estimate returns the cardinality estimate, from the bitmaps: any
// goroutine may call it while another adds.
func (s *PCSA) Estimate() float64 { return PCSAEstimate(s.b) }

// TrackedEstimate is Estimate, the same number, from what a tracked
// sketch keeps (from the bitmaps otherwise). Only the goroutine that adds
// may call it.
func (s *PCSA) TrackedEstimate() float64 {
	if !s.tracked {
		return s.Estimate()
	}
	return pcsaEstimate(s.sum, &s.clear, len(s.b))
}

// PCSAEstimate estimates the cardinality from bitmaps, e.g. a merged copy.
func PCSAEstimate(b []uint32) float64 {
	var sum int
	var clear [32]int // bitmaps with bit r clear
	for i := range b {
		w := atomic.LoadUint32(&b[i])
		sum += bits.TrailingZeros32(^w)
		for r := range clear {
			clear[r] += int(^w >> r & 1)
		}
	}
	return pcsaEstimate(sum, &clear, len(b))
}

// pcsaEstimate is the estimate from ΣR_j and, per bit position r, the
// bitmaps with bit r clear, of m bitmaps.
func pcsaEstimate(sum int, clear *[32]int, mb int) float64 {
	m := float64(mb)
	if clear[0] > 0 {
		lc := 0.0
		for _, v := range clear {
			lc += math.Log(float64(v)/m) / math.Log1p(-1/m)
		}
		if lc < 3*m {
			return lc
		}
	}
	z := float64(sum) / m
	return m / PCSAPhi * (math.Exp2(z) - math.Exp2(-PCSAKappa*z))
}

// Merge ors other's bitmaps (another CPU's copy) into s.
func (s *PCSA) Merge(other []uint32) {
	for i := range s.b[:len(other)] {
		atomic.OrUint32(&s.b[i], atomic.LoadUint32(&other[i]))
	}
	if s.tracked { // not set by Add: count again, and clear all at the reset
		s.sum = 0
		s.clear = [32]int{}
		for i := range s.b {
			w := s.b[i]
			s.sum += bits.TrailingZeros32(^w)
			for r := range s.clear {
				s.clear[r] += int(^w >> r & 1)
			}
		}
		s.touched.SetAll()
	}
}

// Reset zeroes bitmaps [from, to). A tracked sketch must be reset whole
// (ResetTouched).
func (s *PCSA) Reset(from, to int) {
	for i := from; i < to; i++ {
		atomic.StoreUint32(&s.b[i], 0)
	}
}

// ResetTouched zeroes every bitmap: a tracked sketch those a window set a
// bit in (the others are 0), an untracked one all of them.
func (s *PCSA) ResetTouched() {
	if !s.tracked || s.touched.All() {
		s.Reset(0, len(s.b))
	} else {
		for _, j := range s.touched.Entries() {
			atomic.StoreUint32(&s.b[j], 0)
		}
	}
	if s.tracked {
		s.Track(s.touched)
		s.touched.Reset()
	}
}
