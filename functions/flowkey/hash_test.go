package flowkey

import (
	"fmt"
	"math"
	"math/bits"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// TestHashGolden pins the hash: the eBPF side must give these values.
func TestHashGolden(t *testing.T) {
	for _, tc := range []struct {
		w    []uint64
		seed uint64
	}{
		{nil, 0}, {[]uint64{0}, 0}, {[]uint64{1, 2, 3}, 42}, {[]uint64{^uint64(0), 1 << 63, 5, 6, 7, 8, 9}, 1 << 40},
	} {
		// Recompute from the documented formula, step by step.
		h := tc.seed ^ 0x243f6a8885a308d3
		for _, x := range tc.w {
			h = (h ^ x) * 0x9e3779b97f4a7c15
			h ^= h >> 29
			h *= 0xbf58476d1ce4e5b9
		}
		h ^= h >> 33
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
		h *= 0xc4ceb9fe1a85ec53
		h ^= h >> 33
		if got := HashWords(tc.w, tc.seed); got != h {
			t.Errorf("HashWords(%x, %d) = %#x, formula gives %#x", tc.w, tc.seed, got, h)
		}
	}
	if got := HashWords([]uint64{1, 2, 3}, 42); got != 0x27927c9ad6aa9347 {
		t.Errorf("HashWords([1 2 3], 42) = %#x", got)
	}
	if got := Index(0x0000000300000005, 2, 1000); got != uint32(uint64(5+2*3)*1000>>32) {
		t.Errorf("Index = %d", got)
	}
}

// TestHashQuality: single-bit changes of a real key flip each output bit
// about half the time (avalanche), and seeds give unrelated hashes.
func TestHashQuality(t *testing.T) {
	sp := mustParse(t, "5tuple")
	g := gen.New(gen.Config{Seed: 11, Packets: 5000, IPv6: 0.5})
	buf := make([]byte, gen.MaxFrameLen)
	var flips [64]int
	trials := 0
	seen := map[Key]bool{}
	for {
		n, _, _, more := g.Next(buf)
		if !more {
			break
		}
		var k Key
		if !sp.Extract(functions.LinkEthernet, buf[:n], &k) || seen[k] {
			continue // distinct keys only: repeats are not independent trials
		}
		seen[k] = true
		h := sp.Hash(&k, 7)
		for w := 0; w < sp.Words(); w++ {
			for b := 0; b < 64; b++ {
				k2 := k
				k2[w] ^= 1 << b
				d := h ^ sp.Hash(&k2, 7)
				for i := range flips {
					flips[i] += int(d >> i & 1)
				}
				trials++
			}
		}
		if c := bits.OnesCount64(h ^ sp.Hash(&k, 8)); c < 12 || c > 52 {
			t.Errorf("seeds 7 and 8 differ in %d bits", c)
		}
	}
	for i, f := range flips {
		p := float64(f) / float64(trials)
		if math.Abs(p-0.5) > 5*0.5/math.Sqrt(float64(trials)) {
			t.Errorf("output bit %d flips with probability %.3f over %d trials", i, p, trials)
		}
	}
}

// TestIndexUniform: positions of distinct real keys fill n buckets evenly
// (chi-square), for each of four double-hashing rows.
func TestIndexUniform(t *testing.T) {
	sp := mustParse(t, "srcip,dstip,srcport,dstport,proto")
	g := gen.New(gen.Config{Seed: 12, Packets: 300000, Flows: 100000, IPv6: 0.3})
	buf := make([]byte, gen.MaxFrameLen)
	keys := map[Key]bool{}
	for {
		n, _, _, more := g.Next(buf)
		if !more {
			break
		}
		var k Key
		if sp.Extract(functions.LinkEthernet, buf[:n], &k) {
			keys[k] = true
		}
	}
	const buckets = 997
	for row := uint32(0); row < 4; row++ {
		var c [buckets]float64
		for k := range keys {
			i := Index(sp.Hash(&k, 1), row, buckets)
			if i >= buckets {
				t.Fatalf("index %d out of range", i)
			}
			c[i]++
		}
		exp := float64(len(keys)) / buckets
		chi := 0.0
		for _, o := range c {
			chi += (o - exp) * (o - exp) / exp
		}
		// 996 degrees of freedom: mean 996, sd 44.6; 5 sd is far out.
		if chi > 996+5*44.6 {
			t.Errorf("row %d: chi-square %.0f over %d keys", row, chi, len(keys))
		}
		t.Logf("row %d: chi-square %.0f, %d keys", row, chi, len(keys))
	}
}

// BenchmarkExtractHash measures Extract (with its fast path) and, beside
// it, the general parser alone (extract), on frames half of them IPv6.
func BenchmarkExtractHash(b *testing.B) {
	for _, spec := range []string{"5tuple", "srcip/24", "5tuple,vlan,srcmac,dstmac"} {
		for _, path := range []string{"extract", "general"} {
			b.Run(spec+"/"+path, func(b *testing.B) {
				sp := mustParse(b, spec)
				extract := sp.Extract
				if path == "general" {
					extract = sp.extract
				}
				frames := genFrames(256, 0.5)
				b.ReportAllocs()
				b.ResetTimer()
				var k Key
				var sink uint64
				for i := 0; i < b.N; i++ {
					if extract(functions.LinkEthernet, frames[i&255], &k) {
						sink += sp.Hash(&k, 1)
					}
				}
				_ = fmt.Sprint(sink == 1)
			})
		}
	}
}

func genFrames(n int, v6 float64) [][]byte {
	g := gen.New(gen.Config{Seed: 1, Packets: int64(n), VLAN: 0.2, IPv6: v6})
	out := make([][]byte, 0, n)
	buf := make([]byte, gen.MaxFrameLen)
	for {
		l, _, _, more := g.Next(buf)
		if !more {
			return out
		}
		out = append(out, append([]byte(nil), buf[:l]...))
	}
}

func TestExtractHashNoAllocs(t *testing.T) {
	sp := mustParse(t, "5tuple,vlan,srcmac,dstmac")
	frames := genFrames(64, 0.5)
	var k Key
	i := 0
	if a := testing.AllocsPerRun(1000, func() {
		if sp.Extract(functions.LinkEthernet, frames[i&63], &k) {
			sp.Hash(&k, 1)
		}
		i++
	}); a != 0 {
		t.Errorf("%v allocations per packet", a)
	}
}
