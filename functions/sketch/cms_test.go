package sketch

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	boom "github.com/tylertreat/BoomFilters"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// item is one update of a test stream: a key (as its id and its bytes for
// the third-party baselines), its hash and its value.
type item struct {
	id    int
	hash  uint64
	bytes []byte
	value uint64
}

// stream is updates with a known answer: the exact sum per key id.
type stream struct {
	items []item
	exact []uint64 // by id
	total uint64
}

// zipfStream draws n updates of value 1 from u keys with Zipf(1.1)
// popularity; hashes are random.
func zipfStream(seed uint64, n, u int) *stream {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	z := rand.NewZipf(r, 1.1, 1, uint64(u-1))
	hashes := make([]uint64, u)
	keyBytes := make([][]byte, u)
	for i := range hashes {
		hashes[i] = r.Uint64()
		keyBytes[i] = binary.LittleEndian.AppendUint64(nil, hashes[i])
	}
	s := &stream{exact: make([]uint64, u)}
	for range n {
		id := int(z.Uint64())
		s.items = append(s.items, item{id, hashes[id], keyBytes[id], 1})
		s.exact[id]++
		s.total++
	}
	return s
}

// flowStream is a generated trace's packets keyed by spec, valued by wire
// bytes: real flow keys, hashed by flowkey with seed.
func flowStream(t testing.TB, genSeed uint64, packets int64, spec string, seed uint64) (*stream, []flowkey.Key) {
	sp, err := flowkey.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	g := gen.New(gen.Config{Seed: genSeed, Packets: packets, Flows: 20000, VLAN: 0.2, IPv6: 0.3})
	buf := make([]byte, gen.MaxFrameLen)
	ids := map[flowkey.Key]int{}
	var keys []flowkey.Key
	s := &stream{}
	for {
		n, wire, _, more := g.Next(buf)
		if !more {
			break
		}
		var k flowkey.Key
		if !sp.Extract(functions.LinkEthernet, buf[:n], &k) {
			continue
		}
		id, ok := ids[k]
		if !ok {
			id = len(keys)
			ids[k] = id
			keys = append(keys, k)
			s.exact = append(s.exact, 0)
		}
		var kb []byte
		for _, w := range k[:sp.Words()] {
			kb = binary.LittleEndian.AppendUint64(kb, w)
		}
		s.items = append(s.items, item{id, sp.Hash(&k, seed), kb, uint64(wire)})
		s.exact[id] += uint64(wire)
		s.total += uint64(wire)
	}
	return s, keys
}

func newCMS(t testing.TB, depth, width int, w Writes) *CountMin {
	s, err := NewCountMin(make([]uint64, depth*width), depth, width, w)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkCountMin feeds a stream and checks the count-min bound: no key under
// its exact sum; the share of keys over it by more than εN at most δ.
func checkCountMin(t *testing.T, name string, s *stream, eps, delta float64) (meanOver float64) {
	depth, width := CountMinDims(eps, delta)
	cms := newCMS(t, depth, width, Shared)
	for _, it := range s.items {
		cms.Add(it.hash, it.value)
	}
	// The keys' hashes, from their first update.
	hashOf := make([]uint64, len(s.exact))
	for _, it := range s.items {
		hashOf[it.id] = it.hash
	}
	bound := eps * float64(s.total)
	bad := 0
	for id, exact := range s.exact {
		est := cms.Estimate(hashOf[id])
		if est < exact {
			t.Fatalf("%s: key %d estimated %d below its exact %d", name, id, est, exact)
		}
		if float64(est-exact) > bound {
			bad++
		}
		meanOver += float64(est - exact)
	}
	frac := float64(bad) / float64(len(s.exact))
	t.Logf("%s: ε %g δ %.3g (%d×%d): %d keys, N %d, %.4f over εN, mean over-estimate %.1f", name, eps, delta,
		depth, width, len(s.exact), s.total, frac, meanOver/float64(len(s.exact)))
	if frac > delta {
		t.Errorf("%s: %.4f of the keys over-estimated by more than εN = %.0f; δ = %.4f", name, frac, bound, delta)
	}
	return meanOver / float64(len(s.exact))
}

func TestCountMinBound(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		zs := zipfStream(seed, 300000, 50000)
		fs, _ := flowStream(t, seed, 200000, "5tuple", seed)
		for _, p := range []struct{ eps, delta float64 }{{0.001, 0.01}, {0.0005, math.Exp(-2)}, {0.01, math.Exp(-1)}} {
			checkCountMin(t, "zipf", zs, p.eps, p.delta)
			checkCountMin(t, "flows by bytes", fs, p.eps, p.delta)
		}
	}
}

// TestCountMinOracle: on the same updates, our mean over-estimate is of the
// order of BoomFilters' (both are count-min sketches of the same size).
func TestCountMinOracle(t *testing.T) {
	fs, _ := flowStream(t, 4, 200000, "srcip/24,dstport", 99)
	const eps, delta = 0.002, 0.01
	ours := checkCountMin(t, "ours", fs, eps, delta)
	theirs := boom.NewCountMinSketch(eps, delta)
	for _, it := range fs.items {
		theirs.AddN(it.bytes, it.value)
	}
	seen := make([]bool, len(fs.exact))
	var over float64
	for _, it := range fs.items {
		if seen[it.id] {
			continue
		}
		seen[it.id] = true
		est := theirs.Count(it.bytes)
		if est < fs.exact[it.id] {
			t.Fatalf("BoomFilters under-estimates: %d < %d", est, fs.exact[it.id])
		}
		over += float64(est - fs.exact[it.id])
	}
	over /= float64(len(fs.exact))
	t.Logf("mean over-estimate: ours %.1f, BoomFilters %.1f", ours, over)
	if ours > 2*over+float64(fs.total)*eps/10 {
		t.Errorf("mean over-estimate %.1f, BoomFilters' %.1f", ours, over)
	}
}

func TestCountMinArgs(t *testing.T) {
	for _, c := range []struct{ n, d, w int }{{0, 0, 1}, {65, 65, 1}, {4, 1, 5}, {8, 2, 3}} {
		if _, err := NewCountMin(make([]uint64, c.n), c.d, c.w, Shared); err == nil {
			t.Errorf("NewCountMin(%d words, %d, %d) accepted", c.n, c.d, c.w)
		}
	}
	if d, w := CountMinDims(0.001, 0.01); d != 5 || w != 2719 {
		t.Errorf("CountMinDims = %d, %d", d, w)
	}
	s := newCMS(t, 3, 10, Exclusive)
	if s.Add(7, 5) != 5 || s.Add(7, 2) != 7 || s.Estimate(7) != 7 || s.Estimate(8) > 7 {
		t.Error("Add/Estimate")
	}
	other := make([]uint64, 30)
	copy(other, s.c)
	s.Merge(other)
	if s.Estimate(7) != 14 {
		t.Errorf("merged estimate %d", s.Estimate(7))
	}
	s.Reset(0, 15)
	s.Reset(15, s.Len())
	if s.Estimate(7) != 0 {
		t.Error("Reset")
	}
}

// benchKeys are the keys of a generated trace, for the benchmarks: our
// structures hash the key words, the baselines their bytes.
type benchKeys struct {
	sp    *flowkey.Spec
	keys  []flowkey.Key
	bytes [][]byte
}

func newBenchKeys(b *testing.B) *benchKeys {
	sp, _ := flowkey.Parse("5tuple")
	g := gen.New(gen.Config{Seed: 1, Packets: 1 << 16, IPv6: 0.3})
	buf := make([]byte, gen.MaxFrameLen)
	bk := &benchKeys{sp: sp}
	for {
		n, _, _, more := g.Next(buf)
		if !more {
			break
		}
		var k flowkey.Key
		if !sp.Extract(functions.LinkEthernet, buf[:n], &k) {
			continue
		}
		bk.keys = append(bk.keys, k)
		var kb []byte
		for _, w := range k[:sp.Words()] {
			kb = binary.LittleEndian.AppendUint64(kb, w)
		}
		bk.bytes = append(bk.bytes, kb)
	}
	// A power of two, for masking.
	n := 1
	for n*2 <= len(bk.keys) {
		n *= 2
	}
	bk.keys, bk.bytes = bk.keys[:n], bk.bytes[:n]
	return bk
}

// BenchmarkCountMin: one update (hash the key, add to each row) per op, ε
// 0.001, δ 0.01 (5×2719), on the keys of a generated trace.
func BenchmarkCountMin(b *testing.B) {
	bk := newBenchKeys(b)
	mask := len(bk.keys) - 1
	for _, w := range []Writes{Exclusive, Shared} {
		b.Run("ffpf-"+w.String(), func(b *testing.B) {
			d, wd := CountMinDims(0.001, 0.01)
			s := newCMS(b, d, wd, w)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				k := &bk.keys[i&mask]
				s.Add(bk.sp.Hash(k, 1), 1)
			}
		})
	}
	b.Run("BoomFilters", func(b *testing.B) {
		s := boom.NewCountMinSketch(0.001, 0.01)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			s.Add(bk.bytes[i&mask])
		}
	})
}
