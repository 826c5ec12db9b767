package layout

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// Expected values from Python's zlib.crc32 (the same CRC-32 as boost's
// crc_32_type and Tofino's CRC32) over the bytes the reference hashes.
func TestKeyWriteHashes(t *testing.T) {
	for _, c := range []struct {
		key      uint32
		n        uint8
		crc, sum uint32 // CRC32(le32(key) ‖ n), CRC32(le32(key))
	}{
		{0x0a000105, 0, 0x4c91f782, 0xf78dac07},
		{0x0a000105, 1, 0x3b96c714, 0xf78dac07},
		{1, 0, 0xfb42dead, 0x99f8b879},
		{0xdeadbeef, 3, 0xc619e9a2, 0x1a5a601f},
	} {
		if got := SlotIndex(c.key, c.n, 1<<32); got != uint64(c.crc) {
			t.Errorf("SlotIndex(%#x, %d) = %#x, want %#x", c.key, c.n, got, c.crc)
		}
		if got := SlotIndex(c.key, c.n, 1000); got != uint64(c.crc)%1000 {
			t.Errorf("SlotIndex(%#x, %d, 1000) = %d", c.key, c.n, got)
		}
		if got := Checksum(c.key); got != c.sum {
			t.Errorf("Checksum(%#x) = %#x, want %#x", c.key, got, c.sum)
		}
	}
	// CacheIndex hashes the key big-endian: zlib.crc32(b'\x0a\x00\x01\x05') = 0x2788fab6.
	if got := CacheIndex(0x0a000105); got != 0x2788fab6%PostcardCacheSize {
		t.Errorf("CacheIndex = %#x", got)
	}
}

// The checksum and the slot hash are the reference's: CRC-32 of the key's
// little-endian bytes, and of those followed by n; the slicing-by-4 path
// agrees with hash/crc32.
func TestHashesAreCRC32(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		k := rng.Uint32()
		var b [5]byte
		binary.LittleEndian.PutUint32(b[:], k)
		if got, want := Checksum(k), crc32.ChecksumIEEE(b[:4]); got != want {
			t.Fatalf("Checksum(%#x) = %#x, CRC-32 %#x", k, got, want)
		}
		for n := range 8 {
			b[4] = byte(n)
			if got, want := SlotHash(k, n), crc32.ChecksumIEEE(b[:]); got != want {
				t.Fatalf("SlotHash(%#x, %d) = %#x, CRC-32 %#x", k, n, got, want)
			}
		}
		// Hop 7 uses the IEEE polynomial: the generic table agrees with hash/crc32.
		var be [4]byte
		binary.BigEndian.PutUint32(be[:], k)
		if got, want := HopChecksum(k, 7), crc32.ChecksumIEEE(be[:]); got != want {
			t.Fatalf("HopChecksum(%#x, 7) = %#x, CRC-32 %#x", k, got, want)
		}
	}
	// Castagnoli in normal form is hash/crc32's reversed 0x82F63B78.
	var be [4]byte
	binary.BigEndian.PutUint32(be[:], 0x0a000105)
	if got, want := HopChecksum(0x0a000105, 0), crc32.Checksum(be[:], crc32.MakeTable(crc32.Castagnoli)); got != want {
		t.Fatalf("hop 0: %#x, CRC-32C %#x", got, want)
	}
}

// Every hop's checksum is a bijection of the key with no constant bit;
// the reference's even coefficient 0x1e12a700 would have eight.
func TestHopChecksumsUseEveryBit(t *testing.T) {
	check := func(name string, f func(uint32) uint32) (constant uint32) {
		and, or := ^uint32(0), uint32(0)
		for k := range uint32(1 << 16) {
			c := f(k * 2654435761)
			and &= c
			or |= c
		}
		return and | ^or
	}
	for hop := range MaxHops {
		if c := check("", func(k uint32) uint32 { return HopChecksum(k, hop) }); c != 0 {
			t.Errorf("hop %d: constant bits %#x", hop, c)
		}
	}
	ref := MakeTable(0x1e12a700)
	c := check("", func(k uint32) uint32 {
		b := [4]byte{byte(k >> 24), byte(k >> 16), byte(k >> 8), byte(k)}
		return ref.Checksum(b[:])
	})
	if bits.OnesCount32(c) != 8 {
		t.Errorf("the reference's hop-1 polynomial has constant bits %#x, not eight", c)
	}
	for h := range MaxHops {
		v := uint32(0x01020304) * uint32(h+1)
		if w := PostcardWord(77, h, v); PostcardValue(77, h, w) != v || w == v {
			t.Errorf("hop %d: word %#x does not invert", h, w)
		}
	}
}

func TestReducer(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, m := range []uint64{1, 2, 3, 7, 1000, 999983, 4000000, 1<<31 - 1, 1 << 31, 1<<32 - 1} {
		r := NewReducer(m)
		for _, h := range []uint32{0, 1, uint32(m - 1), uint32(m), ^uint32(0)} {
			if got := r.Mod(h); uint64(got) != uint64(h)%m {
				t.Fatalf("%d mod %d = %d", h, m, got)
			}
		}
		for range 100000 {
			h := rng.Uint32()
			if got := r.Mod(h); uint64(got) != uint64(h)%m {
				t.Fatalf("%d mod %d = %d", h, m, got)
			}
		}
	}
}

// The bytewise CRC is the standard library's.
func TestCRC32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 64)
	for i := range 200 {
		n := i % len(b)
		for j := range b[:n] {
			b[j] = byte(r.Uint32())
		}
		if CRC32(b[:n]) != crc32.ChecksumIEEE(b[:n]) {
			t.Fatalf("CRC32 differs on %x", b[:n])
		}
	}
}

func TestSlotBytes(t *testing.T) {
	b := make([]byte, KeyWriteSlotSize)
	PutKeyWriteSlot(b, 0x11223344, 0xa0b0c0d0)
	if b[0] != 0x44 || b[4] != 0xd0 {
		t.Fatalf("slot % x is not little-endian", b)
	}
	if c, d := KeyWriteSlot(b); c != 0x11223344 || d != 0xa0b0c0d0 {
		t.Fatalf("KeyWriteSlot = %#x %#x", c, d)
	}
	c := make([]byte, CounterSize)
	PutCounter(c, 1<<40+5)
	if Counter(c) != 1<<40+5 || c[0] != 5 {
		t.Fatal("counter")
	}
	PutWord(c, 7)
	if Word(c) != 7 {
		t.Fatal("word")
	}
}

func TestSpread(t *testing.T) {
	// The N copies of a key land on distinct slots nearly always, and the
	// slots are used evenly.
	const slots = 1 << 10
	var hist [slots]int
	same := 0
	for k := range uint32(100000) {
		a, b := SlotIndex(k, 0, slots), SlotIndex(k, 1, slots)
		hist[a]++
		if a == b {
			same++
		}
	}
	if same > 300 { // expected 100000/1024 ≈ 98
		t.Errorf("%d keys have both copies in one slot", same)
	}
	for i, n := range hist {
		if n < 50 || n > 150 { // mean 97.7, sd ≈ 9.9
			t.Errorf("slot %d holds %d keys", i, n)
		}
	}
}

func BenchmarkSlotIndex(b *testing.B) {
	var s uint64
	for i := range b.N {
		s += SlotIndex(uint32(i), 1, 1<<22)
	}
	_ = s
}

// Every table is the one the bitwise register defines, entry by entry.
func TestMakeTable(t *testing.T) {
	for _, coeff := range append(HopPolys[:], 0x04C11DB7) {
		poly, tab := bits.Reverse32(coeff), MakeTable(coeff)
		for i := range tab {
			c := uint32(i)
			for range 8 {
				if c&1 != 0 {
					c = c>>1 ^ poly
				} else {
					c >>= 1
				}
			}
			if tab[i] != c {
				t.Fatalf("MakeTable(%#x)[%d] = %#x, want %#x", coeff, i, tab[i], c)
			}
		}
	}
}
