package collector

import (
	"math/bits"
)

// crcTable is a reflected CRC-32 table: the CRC-32 family as Tofino's
// CRCPolynomial(coeff, reversed=true, init=0xFFFFFFFF, xor=0xFFFFFFFF)
// computes it, for the polynomial coeff in normal form (0x04C11DB7 is the
// CRC-32 of Ethernet, zlib and hash/crc32.IEEE).
type crcTable [256]uint32

func makeTable(coeff uint32) *crcTable {
	poly := bits.Reverse32(coeff)
	t := new(crcTable)
	for i := range t {
		c := uint32(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ poly
			} else {
				c >>= 1
			}
		}
		t[i] = c
	}
	return t
}

func (t *crcTable) step(crc uint32, b byte) uint32 { return t[byte(crc)^b] ^ crc>>8 }

// ieee is the CRC-32 the reference translator's Hash<>(CRC32) computes.
var ieee = makeTable(0x04C11DB7)

// ieee4 are slicing-by-4 tables of ieee: ieee4[k][b] is the register
// after byte b and k zero bytes, so that four bytes take four independent
// lookups instead of a chain of four.
var ieee4 = func() (t [4]crcTable) {
	t[0] = *ieee
	for k := 1; k < 4; k++ {
		for i := range t[k] {
			t[k][i] = t[k-1][i]>>8 ^ ieee[byte(t[k-1][i])]
		}
	}
	return t
}()

// keyState is the CRC-32 register after the key's four bytes in
// little-endian order, before the final inversion: the reference
// translator hashes key[7:0] ++ key[15:8] ++ key[23:16] ++ key[31:24]
// (Translator/p4src/dta_translator.p4, ControlPrepareKeyWrite), and its
// collector the key's bytes as x86 memory holds them.
func keyState(key uint32) uint32 {
	s := ^key // the register ^0 XOR the key's little-endian bytes
	return ieee4[3][byte(s)] ^ ieee4[2][byte(s>>8)] ^ ieee4[1][byte(s>>16)] ^ ieee4[0][s>>24]
}

// Checksum is Key-Write's 32-bit key checksum h1(K): CRC-32 of the key's
// little-endian bytes.
func Checksum(key uint32) uint32 { return ^keyState(key) }

// slotHash is h0(n, K) = CRC-32(key ‖ n) from the key's register: the key's
// bytes then n as one byte.
func slotHash(state uint32, n int) uint32 { return ^ieee.step(state, byte(n)) }

// SlotHash is h0(n, K), the hash a Key-Write, Key-Increment or Postcarding
// copy n of key K is placed by, before reduction modulo the slots.
func SlotHash(key uint32, n int) uint32 { return slotHash(keyState(key), n) }

// reducer computes h mod m for 32-bit h without a division (Lemire,
// Kaser, Kurz: "Faster remainder by direct computation", 2019): exact for
// every h and every m below 2^32.
type reducer struct {
	m, mp uint64
}

func newReducer(m uint64) reducer { return reducer{m: m, mp: ^uint64(0)/m + 1} }

func (r reducer) mod(h uint32) uint32 {
	hi, _ := bits.Mul64(r.mp*uint64(h), r.m)
	return uint32(hi)
}

// hopPolys are the CRC-32 polynomials of Postcarding's per-hop checksums,
// one per hop offset: checksum(x, i) is CRC-32 with hopPolys[i] of the
// key's big-endian bytes. The reference implementation uses one custom
// polynomial per hop (ControlPostcarder_cache's checksum_seed), but its
// coefficients are even (0x1e12a700 has no x^0 term: its checksums have 8
// constant bits); these are standard CRC-32 polynomials, each with an x^0
// term, none the chunk hash's.
var hopPolys = [MaxHops]uint32{
	0x1EDC6F41, // CRC-32C (Castagnoli)
	0x741B8CD7, // CRC-32K (Koopman)
	0x814141AB, // CRC-32Q
	0xA833982B, // CRC-32D
	0xF4ACFB13, // CRC-32/AUTOSAR
	0x32583499, // CRC-32K2 (Koopman)
	0x8001801B, // CRC-32/CD-ROM-EDC
	0x04C11DB7, // CRC-32 (IEEE)
}

var hopTables = func() (t [MaxHops]*crcTable) {
	for i, p := range hopPolys {
		t[i] = makeTable(p)
	}
	return t
}()

// HopChecksum is Postcarding's checksum(x, i) for key x and hop offset i.
func HopChecksum(key uint32, hop int) uint32 {
	t := hopTables[hop]
	s := ^uint32(0)
	s = t.step(s, byte(key>>24))
	s = t.step(s, byte(key>>16))
	s = t.step(s, byte(key>>8))
	return ^t.step(s, byte(key))
}
