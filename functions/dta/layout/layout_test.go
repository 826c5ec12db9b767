package layout

import (
	"hash/crc32"
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

// Expected values from a bitwise CRC in Python (normal-form polynomial,
// reflected input and output, init and final xor 0xFFFFFFFF: Tofino's
// CRCPolynomial(poly, true, false, false, ~0, ~0)) over be32(key).
func TestPostcardChecksum(t *testing.T) {
	want := map[uint32][5]uint32{
		0x0a000105: {0xff2c2750, 0x2bcfadfc, 0xbd6c4f74, 0xde3b6d45, 0xe4f471de},
		1:          {0xfffdd680, 0x119ca20c, 0x55f952f3, 0xf4b8da4a, 0xfe06c36c},
	}
	for key, w := range want {
		for h := uint8(1); h <= 5; h++ {
			if got := PostcardChecksum(key, h); got != w[h-1] {
				t.Errorf("PostcardChecksum(%#x, %d) = %#x, want %#x", key, h, got, w[h-1])
			}
		}
	}
	if PostcardChecksum(1, 0) != 0 || PostcardChecksum(1, MaxHops+1) != 0 {
		t.Error("hops outside 1..MaxHops must give 0")
	}
	for h := uint8(1); h <= MaxHops; h++ {
		v := uint32(0x01020304) * uint32(h)
		if w := PostcardWord(77, h, v); PostcardValue(77, h, w) != v || w == v {
			t.Errorf("hop %d: word %#x does not invert", h, w)
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
