package collector

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// The checksum and the slot hash are the reference's: CRC-32 of the key's
// little-endian bytes, and of those followed by n.
func TestHashesAreCRC32(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		k := rng.Uint32()
		var b [5]byte
		binary.LittleEndian.PutUint32(b[:], k)
		if got, want := Checksum(k), crc32.ChecksumIEEE(b[:4]); got != want {
			t.Fatalf("Checksum(%#x) = %#x, CRC-32 %#x", k, got, want)
		}
		for n := range MaxRedundancy {
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

// Every hop's checksum is a bijection of the key with no constant bit (the
// reference's even coefficients would give 0x1e12a700 eight).
func TestHopChecksumsUseEveryBit(t *testing.T) {
	for hop := range MaxHops {
		and, or := ^uint32(0), uint32(0)
		for k := range uint32(1 << 16) {
			c := HopChecksum(k*2654435761, hop)
			and &= c
			or |= c
		}
		if and != 0 || or != ^uint32(0) {
			t.Errorf("hop %d: bits always set %#x, bits never set %#x", hop, and, ^or)
		}
	}
}

func TestReducer(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, m := range []uint64{1, 2, 3, 7, 1000, 999983, 4000000, 1<<31 - 1, 1 << 31, MaxSlots} {
		r := newReducer(m)
		for _, h := range []uint32{0, 1, uint32(m - 1), uint32(m), ^uint32(0)} {
			if got := r.mod(h); uint64(got) != uint64(h)%m {
				t.Fatalf("%d mod %d = %d", h, m, got)
			}
		}
		for range 100000 {
			h := rng.Uint32()
			if got := r.mod(h); uint64(got) != uint64(h)%m {
				t.Fatalf("%d mod %d = %d", h, m, got)
			}
		}
	}
}

func TestParse(t *testing.T) {
	kw, err := ParseKeyWrite("slots=4M,redundancy=2")
	if err != nil || kw.Slots != 4000000 || kw.Redundancy != 2 {
		t.Fatalf("%+v %v", kw, err)
	}
	ap, err := ParseAppend("lists=16,size=1Mi")
	if err != nil || ap.Lists != 16 || ap.Size != 1<<20 {
		t.Fatalf("%+v %v", ap, err)
	}
	pc, err := ParsePostcarding("chunks=0x10001,hops=5,values=262144")
	if err != nil || pc.Chunks != 0x10001 || pc.Hops != 5 || pc.Values != 1<<18 {
		t.Fatalf("%+v %v", pc, err)
	}
	for _, bad := range []string{"", "slots", "slots=x", "slots=1M,slots=2M", "redundancy=2", "slot=1M", "slots=99999999999999999999"} {
		if _, err := ParseKeyWrite(bad); err == nil {
			t.Errorf("ParseKeyWrite(%q) passed", bad)
		}
	}
	for _, c := range []Config{
		{},
		{KeyWrite: KeyWriteConfig{Slots: 1 << 20}},
		{KeyWrite: KeyWriteConfig{Slots: 1000, Redundancy: 9}},
		{Append: AppendConfig{Lists: 0, Size: 10}},
		{Postcarding: PostcardingConfig{Chunks: 1000, Hops: 9}},
		{Postcarding: PostcardingConfig{Chunks: 1000, Values: Blank}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v passed", c)
		}
	}
}
