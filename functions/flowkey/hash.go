package flowkey

import "math/bits"

// Constants of the key hash (see the package documentation).
const (
	HashInit = 0x243f6a8885a308d3 // π's first fraction bits: the empty state
	HashMul  = 0x9e3779b97f4a7c15 // 2^64/φ, odd
	HashMul2 = 0xbf58476d1ce4e5b9 // splitmix64's first multiplier
	FmixMul1 = 0xff51afd7ed558ccd // murmur3's fmix64
	FmixMul2 = 0xc4ceb9fe1a85ec53
)

// HashWords hashes key words with a seed:
//
//	h = seed ^ HashInit
//	for each word w: h = (h ^ w) * HashMul; h ^= h >> 29; h *= HashMul2
//	return Fmix64(h)
func HashWords(w []uint64, seed uint64) uint64 {
	h := seed ^ HashInit
	for _, x := range w {
		h = (h ^ x) * HashMul
		h ^= h >> 29
		h *= HashMul2
	}
	return Fmix64(h)
}

// Fmix64 is murmur3's 64-bit finalizer: every input bit affects every
// output bit.
func Fmix64(h uint64) uint64 {
	h ^= h >> 33
	h *= FmixMul1
	h ^= h >> 33
	h *= FmixMul2
	h ^= h >> 33
	return h
}

// Hash returns the 64-bit hash of the spec's words of k.
func (sp *Spec) Hash(k *Key, seed uint64) uint64 { return HashWords(k[:sp.words], seed) }

// Index returns the i-th position (i = 0, 1, …) of a hash in [0, n), by
// double hashing (Kirsch and Mitzenmacher, "Less hashing, same
// performance", 2006) and a multiply-shift range reduction (Lemire 2019)
// that needs no division:
//
//	g = uint32(h) + i * uint32(h >> 32)   (mod 2^32)
//	index = (uint64(g) * n) >> 32
func Index(h uint64, i, n uint32) uint32 {
	g := uint32(h) + i*uint32(h>>32)
	return uint32(uint64(g) * uint64(n) >> 32)
}

// LeadingZeros and TrailingZeros are the bit scans the sketches use; an
// eBPF program has no such instruction and computes them with a fixed
// binary search (6 shift-and-compare steps).
func LeadingZeros(x uint64) int  { return bits.LeadingZeros64(x) }
func TrailingZeros(x uint32) int { return bits.TrailingZeros32(x) }
