package flowkey

import (
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// A memo gives the hash Extract and Hash give, computes each packet once
// per window, and forgets when told or when another window comes.
func TestHashesMemo(t *testing.T) {
	frames := keyFrames()
	p := buffers.NewPBuf(2*buffers.MaxBatch, 2048)
	store := func(b *buffers.Batch, off int) {
		b.Reset()
		for i := range b.Cap {
			f := frames[(off+i)%len(frames)]
			b.Append(f, uint32(len(f)), 0)
		}
	}
	for _, spec := range []string{"5tuple", "srcip/24,dstport", "vlan", "srcmac,dstip/16/64"} {
		sp := mustParse(t, spec)
		hs := NewHashes(sp, functions.LinkEthernet, 7)
		check := func(b *buffers.Batch, what string) {
			t.Helper()
			var k Key
			for _, e := range b.E[:b.N] {
				ok := sp.Extract(functions.LinkEthernet, p.Data(e.Slot), &k)
				want := uint64(0)
				if ok {
					want = sp.Hash(&k, 7)
				}
				if h, got := hs.Of(e.Slot); got != ok || h != want {
					t.Fatalf("%s, %s: slot %d: memo gives %#x %v, Extract and Hash %#x %v", spec, what, e.Slot, h, got, want, ok)
				}
			}
		}
		a := buffers.NewBatch(p, 0, buffers.MaxBatch, 0)
		b := buffers.NewBatch(p, buffers.MaxBatch, buffers.MaxBatch, 0)
		for off := 0; off < len(frames); off += 97 {
			store(a, off)
			// Half the batch first (as a serial route does), then all of it.
			half := *a
			half.N = a.N / 2
			hs.Fill(&half)
			check(&half, "half a batch")
			hs.Fill(a)
			check(a, "a batch")
			store(b, off+1) // another window: no forgetting needed
			hs.Fill(b)
			check(b, "the next window")
			store(b, off+2) // the same window with new packets
			hs.Forget()
			hs.Fill(b)
			check(b, "after Forget")
		}
	}
}

func TestSame(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"5tuple", "dstport,srcport,dstip,srcip,proto", true},
		{"srcip", "srcip/128", true},
		{"srcip/32", "srcip", false}, // /32 keeps 32 bits of an IPv6 address
		{"srcip/24/64", "srcip/24/64", true},
		{"srcip/24/64", "srcip/24/48", false},
		{"srcip", "dstip", false},
		{"5tuple", "5tuple,vlan", false},
		{"srcmac", "dstmac", false},
	} {
		if got := mustParse(t, tc.a).Same(mustParse(t, tc.b)); got != tc.same {
			t.Errorf("Same(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
	sp := mustParse(t, "5tuple")
	hs := NewHashes(sp, functions.LinkEthernet, 0)
	if !hs.Matches(mustParse(t, "srcip,dstip,srcport,dstport,proto"), functions.LinkEthernet, 0) ||
		hs.Matches(sp, functions.LinkRaw, 0) || hs.Matches(sp, functions.LinkEthernet, 1) {
		t.Error("Matches must hold for the same key, link type and seed only")
	}
}

// Extract's fast paths (untagged Ethernet, IPv4 or IPv6) give the key of
// the general path on every frame they take, whole, cut short or with a
// bit flipped, and take the common ones.
func TestExtractFastPath(t *testing.T) {
	frames := keyFrames()
	for i := range frames[:300] { // IP headers with each bit flipped
		f := append([]byte(nil), frames[i]...)
		for off := 12; off < min(len(f), 62); off++ {
			for bit := range 8 {
				g := append([]byte(nil), f...)
				g[off] ^= 1 << bit
				frames = append(frames, g)
			}
		}
	}
	taken := 0
	for _, spec := range []string{"5tuple", "5tuple,vlan,srcmac,dstmac", "srcip/24,dstport", "dstip/0,proto", "vlan", "srcmac", "srcport", "dstip/17/64,srcip/1"} {
		sp := mustParse(t, spec)
		for _, f := range frames {
			var fast, general Key
			if !sp.extractEthIPv4(f, &fast) && !sp.extractEthIPv6(f, &fast) {
				continue
			}
			taken++
			if !sp.extract(functions.LinkEthernet, f, &general) || fast != general {
				t.Fatalf("%s of %x: fast path %x, general %x", spec, f, fast, general)
			}
		}
	}
	if taken < len(frames) {
		t.Errorf("the fast path took %d of %d frames × 8 specs", taken, len(frames))
	}
}

// BenchmarkHashesFill hashes a batch of 256 frames (20% IPv6, 20% with
// VLAN tags) through a memo, beside the plain loop that extracts and
// hashes each packet in turn: the cost of the memo. An op is a packet.
func BenchmarkHashesFill(b *testing.B) {
	sp := mustParse(b, "5tuple")
	p := buffers.NewPBuf(buffers.MaxBatch, 2048)
	batch := buffers.NewBatch(p, 0, buffers.MaxBatch, 0)
	for _, f := range genFrames(buffers.MaxBatch, 0.2) {
		batch.Append(f, uint32(len(f)), 0)
	}
	b.Run("memo", func(b *testing.B) {
		hs := NewHashes(sp, functions.LinkEthernet, 0)
		b.ReportAllocs()
		for i := 0; i < b.N; i += buffers.MaxBatch {
			hs.Forget()
			hs.Fill(batch)
		}
	})
	b.Run("loop", func(b *testing.B) {
		var k Key
		var sink uint64
		b.ReportAllocs()
		for i := 0; i < b.N; i += buffers.MaxBatch {
			for _, e := range batch.E[:batch.N] {
				if sp.Extract(functions.LinkEthernet, p.Data(e.Slot), &k) {
					sink += sp.Hash(&k, 0)
				}
			}
		}
		hashSink = sink
	})
}

var hashSink uint64
