// Package layout is where DTA's reports land in a collector's memory: the
// hash functions that pick a Key-Write slot, a Key-Increment counter and a
// postcard chunk, the checksums stored beside the data, and the byte layout
// of slots, counters, chunks and Append entries. The translator (which
// writes) and the collector (which ingests directly and answers queries)
// both use it, so the two agree to the bit.
//
// Every hash is a CRC-32 as Tofino's CRCPolynomial(coeff, reversed=true,
// init=0xFFFFFFFF, xor=0xFFFFFFFF) and boost::crc_32_type compute it:
//
//	SlotHash(key, n)        = CRC32(le32(key) ‖ n)            before reduction mod M
//	SlotIndex(key, n, M)    = SlotHash(key, n) mod M          Key-Write slot, Key-Increment counter
//	Checksum(key)           = CRC32(le32(key))                stored beside Key-Write data
//	ChunkIndex(key, j, C)   = SlotHash(key, j) mod C          postcard chunk copy j
//	CacheIndex(key)         = CRC32(be32(key)) mod 32768      the translator's postcard cache line
//	PostcardWord(key, i, v) = HopChecksum(key, i) XOR g(v)    word i of the chunk (hop offset i, 0 first)
//
// The Key-Write hashes are the reference implementation's (jonlanglet/DTA,
// Translator/p4src/dta_translator.p4, ControlPrepareKeyWrite). The
// postcard hashes are not: the reference has one chunk per flow at its
// cache line's hash, and custom per-hop polynomials whose coefficients are
// even (0x1e12a700 has no x^0 term: eight of its checksum's bits are
// constant, measured by TestHopChecksumsUseEveryBit); here a flow has N
// chunk copies placed as Key-Write places its copies, and hop i's checksum
// is a standard CRC-32 polynomial (HopPolys). A hop is an offset within
// the path (DESIGN.md §9): 0 is the first hop.
//
// Memory words are little-endian, so a Go collector on a little-endian
// machine reads them natively: a Key-Write slot is {checksum, data}, one
// 64-bit word with the checksum in its low half; a counter is 64 bits (the
// RDMA Fetch&Add's width); a chunk is 8 words (32 bytes, the reference
// pads 5 hops to 32 so that a chunk's address is a shift); an Append entry
// is one word. The blank ⊔ (a hop that sent no postcard) is the value
// 0xFFFFFFFF, so every value 0 to 2^32−2 is a value a postcard can carry.
package layout

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Sizes in collector memory, in bytes.
const (
	KeyWriteSlotSize = 8  // {checksum:32, data:32}
	CounterSize      = 8  // a Key-Increment counter (RDMA Fetch&Add is 64-bit)
	AppendEntrySize  = 4  // one Append entry
	ChunkSize        = 32 // a postcard chunk: MaxHops words
)

// Postcarding limits.
const (
	MaxHops           = 8          // words in a chunk: hop offsets 0 to 7
	DefaultHops       = 5          // the reference's B (a five-hop fat tree)
	PostcardCacheSize = 32768      // the reference's POSTCARDER_CACHE_SIZE
	Blank             = 0xFFFFFFFF // g(⊔): the value of a hop that sent no postcard
)

// The limits of a collector's memory: the one definition that the
// reporter (what it may send), the translator (what it writes) and the
// collector (what it hosts and ingests) check against, so that a report
// one of them accepts is never one another refuses. A report's redundancy
// byte and hop byte, and its 32-bit list id, can say more than these; a
// collector drops such reports, so the reporter refuses to make them.
const (
	MaxRedundancy = 8         // copies (N) of a Key-Write key, a Key-Increment key or a postcard flow
	MaxSlots      = 1<<32 - 1 // slots, counters, chunks or entries of one structure (CRC-32 mod M)
	MaxLists      = 1 << 20   // Append lists: ids 0 to MaxLists-1
)

// CheckRedundancy refuses a number of copies a collector could not take:
// 1 to MaxRedundancy.
func CheckRedundancy(name string, n int) error {
	if n < 1 || n > MaxRedundancy {
		return fmt.Errorf("%s=%d: a collector takes 1 to %d copies", name, n, MaxRedundancy)
	}
	return nil
}

// CheckHashed refuses a size m of a structure that keys are hashed into
// (Key-Write slots, Key-Increment counters, postcard chunks): at most
// MaxSlots, and not a power of two. CRC-32 is affine, so CRC-32(key ‖ n)
// = CRC-32(key ‖ 0) XOR a constant of n; modulo 2^k the N copies of every
// key then lie at one fixed XOR distance, and a key that overwrites one
// copy overwrites all: at load 0.1, N = 2 loses 18% of the keys instead
// of 3.3% (collector's TestPowerOfTwoCorrelates). Modulo any other number
// the copies are as independent as the paper's analysis assumes.
func CheckHashed(name string, m uint64) error {
	switch {
	case m < 1:
		return fmt.Errorf("%s=0: at least 1", name)
	case m > MaxSlots:
		return fmt.Errorf("%s=%d: at most %d", name, m, uint64(MaxSlots))
	case m >= 2 && bits.OnesCount64(m) == 1:
		return fmt.Errorf("%s=%d is a power of two: CRC-32 is linear, so modulo 2^k every key's copies "+
			"lie at one fixed distance and are overwritten together; take another size, e.g. %d", name, m, m-3)
	}
	return nil
}

// Table is a reflected CRC-32 table for the polynomial coeff in normal
// form (0x04C11DB7 is the CRC-32 of Ethernet, zlib and hash/crc32.IEEE).
type Table [256]uint32

// MakeTable builds the table of coeff. The table is linear in its index
// (t[a^b] = t[a]^t[b]), so only the eight single bits take register steps,
// each one step from the next higher bit's entry; every other entry is
// the XOR of two before it. The tables are built in every process at
// start-up (13 of them), so this is 256 XORs rather than 2048 steps.
func MakeTable(coeff uint32) *Table {
	poly := bits.Reverse32(coeff)
	t := new(Table)
	for b, c := 128, poly; b > 0; b >>= 1 {
		t[b] = c
		if c&1 != 0 {
			c = c>>1 ^ poly
		} else {
			c >>= 1
		}
	}
	for i := 3; i < len(t); i++ {
		t[i] = t[i&(i-1)] ^ t[i&-i]
	}
	return t
}

// Step feeds one byte to the register crc.
func (t *Table) Step(crc uint32, b byte) uint32 { return t[byte(crc)^b] ^ crc>>8 }

// Checksum is the CRC of b (bytewise: the inputs here are a few bytes,
// where a call into the vectorised hash/crc32 costs more than it saves).
func (t *Table) Checksum(b []byte) uint32 {
	c := ^uint32(0)
	for _, x := range b {
		c = t.Step(c, x)
	}
	return ^c
}

// IEEE is the CRC-32 the reference translator's Hash<>(CRC32) computes.
var IEEE = MakeTable(0x04C11DB7)

// ieee4 are slicing-by-4 tables of IEEE: ieee4[k][b] is the register
// after byte b and k zero bytes, so that four bytes take four independent
// lookups instead of a chain of four.
var ieee4 = func() (t [4]Table) {
	t[0] = *IEEE
	for k := 1; k < 4; k++ {
		for i := range t[k] {
			t[k][i] = t[k-1][i]>>8 ^ IEEE[byte(t[k-1][i])]
		}
	}
	return t
}()

// CRC32 is the IEEE CRC-32 of b.
func CRC32(b []byte) uint32 { return IEEE.Checksum(b) }

// KeyState is the CRC-32 register after the key's four bytes in
// little-endian order, before the final inversion: the reference
// translator hashes key[7:0] ++ key[15:8] ++ key[23:16] ++ key[31:24],
// and its collector the key's bytes as x86 memory holds them. Checksum
// and every copy's SlotHash continue from it.
func KeyState(key uint32) uint32 {
	s := ^key // the register ^0 XOR the key's little-endian bytes
	return ieee4[3][byte(s)] ^ ieee4[2][byte(s>>8)] ^ ieee4[1][byte(s>>16)] ^ ieee4[0][s>>24]
}

// ChecksumOf is Checksum from the key's register.
func ChecksumOf(state uint32) uint32 { return ^state }

// Checksum is Key-Write's 32-bit key checksum h1(K): CRC-32 of the key's
// little-endian bytes.
func Checksum(key uint32) uint32 { return ^KeyState(key) }

// SlotHashOf is SlotHash from the key's register.
func SlotHashOf(state uint32, n int) uint32 { return ^IEEE.Step(state, byte(n)) }

// SlotHash is h0(n, K) = CRC-32(le32(K) ‖ n), the hash copy n of key K
// (Key-Write, Key-Increment, a postcard chunk) is placed by, before
// reduction modulo the slots.
func SlotHash(key uint32, n int) uint32 { return SlotHashOf(KeyState(key), n) }

// SlotIndex is the Key-Write slot (Key-Increment counter) of key's n-th
// copy among slots. The reference bounds with a mask, which is the same
// for the power-of-two sizes it allows.
func SlotIndex(key uint32, n uint8, slots uint64) uint64 {
	return uint64(SlotHash(key, int(n))) % slots
}

// ChunkIndex is the postcard chunk of a flow's n-th copy among chunks.
func ChunkIndex(key uint32, n uint8, chunks uint64) uint64 { return SlotIndex(key, n, chunks) }

// CacheIndex is the translator's postcard-cache line of a flow: CRC-32 of
// the key big-endian, modulo the cache size (the reference's; independent
// of the chunks, which hash the key little-endian).
func CacheIndex(key uint32) uint32 {
	b := [4]byte{byte(key >> 24), byte(key >> 16), byte(key >> 8), byte(key)}
	return CRC32(b[:]) % PostcardCacheSize
}

// Reducer computes h mod m for a 32-bit h without a division (Lemire,
// Kaser, Kurz: "Faster remainder by direct computation", 2019): exact for
// every h and every m from 1 to 2^32−1.
type Reducer struct {
	m, mp uint64
}

// NewReducer returns the reducer modulo m.
func NewReducer(m uint64) Reducer { return Reducer{m: m, mp: ^uint64(0)/m + 1} }

// Mod is h mod m.
func (r Reducer) Mod(h uint32) uint32 {
	hi, _ := bits.Mul64(r.mp*uint64(h), r.m)
	return uint32(hi)
}

// HopPolys are the CRC-32 polynomials of Postcarding's per-hop checksums,
// one per hop offset: standard CRC-32 polynomials, each with an x^0 term,
// none the chunk hash's before the last.
var HopPolys = [MaxHops]uint32{
	0x1EDC6F41, // CRC-32C (Castagnoli)
	0x741B8CD7, // CRC-32K (Koopman)
	0x814141AB, // CRC-32Q
	0xA833982B, // CRC-32D
	0xF4ACFB13, // CRC-32/AUTOSAR
	0x32583499, // CRC-32K2 (Koopman)
	0x8001801B, // CRC-32/CD-ROM-EDC
	0x04C11DB7, // CRC-32 (IEEE)
}

var hopTables = func() (t [MaxHops]*Table) {
	for i, p := range HopPolys {
		t[i] = MakeTable(p)
	}
	return t
}()

// HopChecksum is Postcarding's checksum(x, i) for key x and hop offset i
// (0 to MaxHops−1): CRC-32 with HopPolys[i] of the key's big-endian bytes.
func HopChecksum(key uint32, hop int) uint32 {
	t := hopTables[hop]
	s := ^uint32(0)
	s = t.Step(s, byte(key>>24))
	s = t.Step(s, byte(key>>16))
	s = t.Step(s, byte(key>>8))
	return ^t.Step(s, byte(key))
}

// G maps a postcard value into the word: the identity, as in the
// reference (whose values are 32-bit switch IDs, the word's width), with
// Blank for ⊔.
func G(v uint32) uint32 { return v }

// PostcardWord is what a chunk holds at hop offset hop for key's postcard
// of value v: checksum(key, hop) XOR g(v). A hop without a postcard holds
// PostcardWord(key, hop, Blank).
func PostcardWord(key uint32, hop int, v uint32) uint32 { return HopChecksum(key, hop) ^ G(v) }

// PostcardValue inverts PostcardWord: the value a chunk word holds for
// key's hop, if the word is key's (a query checks it against the set of
// known values).
func PostcardValue(key uint32, hop int, word uint32) uint32 { return word ^ HopChecksum(key, hop) }

// SlotWord is a Key-Write slot as one 64-bit word: the checksum in the low
// half, so that its little-endian bytes are PutKeyWriteSlot's.
func SlotWord(checksum, data uint32) uint64 { return uint64(data)<<32 | uint64(checksum) }

// PutKeyWriteSlot writes a Key-Write slot into b[:KeyWriteSlotSize].
func PutKeyWriteSlot(b []byte, checksum, data uint32) {
	binary.LittleEndian.PutUint64(b, SlotWord(checksum, data))
}

// KeyWriteSlot reads a Key-Write slot.
func KeyWriteSlot(b []byte) (checksum, data uint32) {
	return binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
}

// PutWord writes one 32-bit memory word (an Append entry, a chunk word).
func PutWord(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }

// Word reads one 32-bit memory word.
func Word(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// PutCounter writes a Key-Increment counter.
func PutCounter(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }

// Counter reads a Key-Increment counter.
func Counter(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
