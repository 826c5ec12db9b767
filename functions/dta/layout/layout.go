// Package layout is where DTA's reports land in a collector's memory: the
// hash functions that pick a Key-Write slot, a Key-Increment counter and a
// postcard chunk, the checksums stored beside the data, and the byte layout
// of slots, chunks and Append entries. The translator (which writes) and the
// collector (which ingests directly and answers queries) both use it, so the
// two agree to the bit.
//
// The definitions are the reference implementation's (jonlanglet/DTA,
// Translator/p4src/dta_translator.p4 and Collector/collector.cpp), all
// CRC-32 as Tofino and boost::crc_32_type compute it (reflected, initial
// value and final xor 0xFFFFFFFF):
//
//	SlotIndex(key, n, M)   = CRC32(le32(key) ‖ n) mod M          Key-Write slot, Key-Increment counter
//	Checksum(key)          = CRC32(le32(key))                    stored beside Key-Write data
//	CacheIndex(key)        = CRC32(be32(key)) mod 32768          the translator's postcard cache line
//	ChunkIndex(key, n, C)  = SlotIndex(key, n, C)                postcard chunk
//	PostcardWord(key, h, v)= CRC32_h(be32(key)) XOR g(v)         word h-1 of the chunk, g(v) = v
//
// where CRC32_h is CRC-32 with hop h's own polynomial (PostcardPolys).
//
// The sharp edge: memory words are little-endian (the reference keeps the
// Key-Write checksum little-endian but the data in network order; here
// every word is little-endian, so a Go collector reads them natively), and
// the postcard value 0 is the blank ⊔ (a hop that sent no postcard), so a
// real postcard value of 0 reads back as blank.
package layout

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"
)

// Sizes in collector memory, in bytes.
const (
	KeyWriteSlotSize = 8  // {checksum:32, data:32}
	CounterSize      = 8  // a Key-Increment counter (RDMA Fetch&Add is 64-bit)
	AppendEntrySize  = 4  // one Append entry
	ChunkSize        = 32 // a postcard chunk: MaxHops words (the reference pads 5×4 B to 32)
)

// Postcarding limits.
const (
	MaxHops           = 8     // words in a chunk
	DefaultHops       = 5     // the reference's B (a five-hop fat tree)
	PostcardCacheSize = 32768 // the reference's POSTCARDER_CACHE_SIZE
	Blank             = 0     // the value of a hop that sent no postcard (⊔)
)

// PostcardPolys are the CRC-32 polynomials (normal form, x^32 implied) of
// the per-hop postcard checksums, hop 1 first. Hops 1–5 are the
// reference's (ControlPostcarder_cache seeds); 6–8, which it does not have,
// are CRC-32C, CRC-32K and CRC-32Q.
var PostcardPolys = [MaxHops]uint32{0x1e12a700, 0x65b96595, 0x49cf878b, 0x36518f0d, 0x7a40a908,
	0x1edc6f41, 0x741b8cd7, 0x814141ab}

var hopTables [MaxHops]*crc32.Table

func init() {
	for i, p := range PostcardPolys {
		// Go's tables take the reflected polynomial.
		hopTables[i] = crc32.MakeTable(bits.Reverse32(p))
	}
}

// crc runs CRC-32 over b with table t (bytewise: the inputs are 4–5 bytes,
// where a call into the vectorised crc32.Update costs more than it saves).
func crc(t *crc32.Table, b []byte) uint32 {
	c := ^uint32(0)
	for _, x := range b {
		c = t[byte(c)^x] ^ c>>8
	}
	return ^c
}

// CRC32 is the IEEE CRC-32 of b, as Tofino's HashAlgorithm_t.CRC32 and
// boost::crc_32_type compute it.
func CRC32(b []byte) uint32 { return crc(crc32.IEEETable, b) }

// SlotIndex is the Key-Write slot (and Key-Increment counter) of key's
// n-th copy among slots: CRC32 of the key's four bytes little-endian
// followed by the byte n, modulo slots. The reference bounds with a mask,
// which is the same for the power-of-two sizes it allows.
func SlotIndex(key uint32, n uint8, slots uint64) uint64 {
	b := [5]byte{byte(key), byte(key >> 8), byte(key >> 16), byte(key >> 24), n}
	return uint64(CRC32(b[:])) % slots
}

// Checksum is the key checksum stored in a Key-Write slot: CRC32 of the
// key's four bytes little-endian.
func Checksum(key uint32) uint32 {
	b := [4]byte{byte(key), byte(key >> 8), byte(key >> 16), byte(key >> 24)}
	return CRC32(b[:])
}

// CacheIndex is the translator's postcard-cache line of a flow: CRC32 of
// the key big-endian, modulo the cache size.
func CacheIndex(key uint32) uint32 {
	b := [4]byte{byte(key >> 24), byte(key >> 16), byte(key >> 8), byte(key)}
	return CRC32(b[:]) % PostcardCacheSize
}

// ChunkIndex is the postcard chunk of a flow's n-th copy among chunks. The
// reference has one copy, at CRC32(be32(key)), the same hash as its cache
// line (its TODO); here it is SlotIndex, independent of CacheIndex, and it
// gives the paper's N copies.
func ChunkIndex(key uint32, n uint8, chunks uint64) uint64 { return SlotIndex(key, n, chunks) }

// PostcardChecksum is checksum(key, hop) for hop 1..MaxHops: CRC-32 of
// the key big-endian with hop's polynomial. Other hops give 0.
func PostcardChecksum(key uint32, hop uint8) uint32 {
	if hop < 1 || hop > MaxHops {
		return 0
	}
	b := [4]byte{byte(key >> 24), byte(key >> 16), byte(key >> 8), byte(key)}
	return crc(hopTables[hop-1], b[:])
}

// G maps a postcard value into the word: the identity, as in the
// reference (whose values are 32-bit switch IDs, the slot width).
func G(v uint32) uint32 { return v }

// PostcardWord is what the chunk holds for hop's postcard of value v:
// checksum(key, hop) XOR g(v). A hop without a postcard holds
// PostcardWord(key, hop, Blank).
func PostcardWord(key uint32, hop uint8, v uint32) uint32 {
	return PostcardChecksum(key, hop) ^ G(v)
}

// PostcardValue inverts PostcardWord: the value a chunk word holds for
// key's hop, if the word is key's (a query checks it against the set of
// known values).
func PostcardValue(key uint32, hop uint8, word uint32) uint32 {
	return word ^ PostcardChecksum(key, hop)
}

// PutKeyWriteSlot writes a Key-Write slot into b[:KeyWriteSlotSize].
func PutKeyWriteSlot(b []byte, checksum, data uint32) {
	binary.LittleEndian.PutUint32(b, checksum)
	binary.LittleEndian.PutUint32(b[4:], data)
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
