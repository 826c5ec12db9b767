package sketch

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/axiomhq/hyperloglog"

	"github.com/ffpf-go/ffpf/buffers"
)

func newHLL(t testing.TB, p int) *HLL {
	mem := make([]uint64, (1<<p)/8) // 8-byte aligned, as an MBuf
	s, err := NewHLL(unsafe.Slice((*uint8)(unsafe.Pointer(&mem[0])), 1<<p), p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// cardinalities are the distinct counts the estimators are checked at,
// as multiples of m: the linear-counting range, the switch to the raw
// estimate at 5m/2, and far beyond.
var cardinalities = []float64{0.05, 0.3, 1, 2, 2.5, 3, 4, 5, 8, 20, 60}

// TestHLLBound: relative error within 3·1.04/√m on distinct random hashes,
// several seeds and precisions, each with duplicates offered too.
func TestHLLBound(t *testing.T) {
	for _, p := range []int{4, 8, 10, 12, 14} {
		m := float64(int(1) << p)
		bound := 3 * 1.04 / math.Sqrt(m)
		worst := 0.0
		for _, seed := range []uint64{1, 2, 3, 4} {
			for _, c := range cardinalities {
				n := int(math.Max(1, math.Round(c*m)))
				s := newHLL(t, p)
				for i := 0; i < n; i++ {
					h := splitmix(seed<<40 | uint64(p)<<32 | uint64(i))
					s.Add(h)
					if i%3 == 0 {
						s.Add(h) // a duplicate changes nothing
					}
				}
				rel := (s.Estimate() - float64(n)) / float64(n)
				worst = math.Max(worst, math.Abs(rel))
				if math.Abs(rel) > bound {
					t.Errorf("p %d seed %d n %d: estimate %.0f, error %.4f beyond %.4f", p, seed, n, s.Estimate(), rel, bound)
				}
			}
		}
		t.Logf("p %d: worst relative error %.4f, bound %.4f", p, worst, bound)
	}
}

// TestHLLFlowKeys: distinct 5-tuples of generated traces, hashed by
// flowkey, against the exact count and against axiomhq/hyperloglog.
func TestHLLFlowKeys(t *testing.T) {
	const p = 12
	bound := 3 * 1.04 / math.Sqrt(1<<p)
	for _, seed := range []uint64{1, 2, 3} {
		for _, spec := range []string{"5tuple", "dstip", "srcip/24,dstport"} {
			fs, keys := flowStream(t, seed, 150000, spec, seed)
			s := newHLL(t, p)
			ax, _ := hyperloglog.NewSketch(p, false)
			for _, it := range fs.items {
				s.Add(it.hash)
				ax.Insert(it.bytes)
			}
			n := float64(len(keys))
			rel := (s.Estimate() - n) / n
			relAx := (float64(ax.Estimate()) - n) / n
			t.Logf("seed %d %s: %d distinct, ours %.0f (%.4f), axiomhq %d (%.4f)", seed, spec, len(keys), s.Estimate(), rel, ax.Estimate(), relAx)
			if math.Abs(rel) > bound {
				t.Errorf("seed %d %s: %d distinct keys estimated %.0f: error %.4f beyond %.4f", seed, spec, len(keys), s.Estimate(), rel, bound)
			}
			if math.Abs(rel) > math.Abs(relAx)+bound/2 {
				t.Errorf("seed %d %s: error %.4f, axiomhq's %.4f", seed, spec, rel, relAx)
			}
		}
	}
}

func TestHLLMergeResetArgs(t *testing.T) {
	a, b := newHLL(t, 10), newHLL(t, 10)
	r := rand.New(rand.NewPCG(1, 1))
	all := newHLL(t, 10)
	for i := 0; i < 20000; i++ {
		h := r.Uint64()
		all.Add(h)
		if i%2 == 0 {
			a.Add(h)
		} else {
			b.Add(h)
		}
	}
	a.Merge(b.Registers())
	if string(a.Registers()) != string(all.Registers()) {
		t.Error("merge of two halves differs from the whole")
	}
	a.Reset(0, 512)
	a.Reset(512, 1024)
	if a.Estimate() != 0 {
		t.Errorf("estimate after reset %v", a.Estimate())
	}
	if j, rho := HLLPosition(0, 4); j != 0 || rho != 61 {
		t.Errorf("HLLPosition(0, 4) = %d, %d; ρ is capped at 65−p", j, rho)
	}
	if j, rho := HLLPosition(0xf800000000000000, 4); j != 15 || rho != 1 {
		t.Errorf("HLLPosition = %d, %d", j, rho)
	}
	for _, c := range []struct{ n, p int }{{16, 3}, {1 << 19, 19}, {15, 4}} {
		if _, err := NewHLL(make([]uint8, c.n), c.p); err == nil {
			t.Errorf("NewHLL(%d, %d) accepted", c.n, c.p)
		}
	}
	mem := make([]uint64, 3)
	if _, err := NewHLL(unsafe.Slice((*uint8)(unsafe.Pointer(&mem[0])), 24)[1:17], 4); err == nil {
		t.Error("unaligned registers accepted")
	}
}

// BenchmarkHLL: one update (hash the key, raise a register) per op, p 14.
func BenchmarkHLL(b *testing.B) {
	bk := newBenchKeys(b)
	mask := len(bk.keys) - 1
	b.Run("ffpf", func(b *testing.B) {
		s := newHLL(b, 14)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			s.Add(bk.sp.Hash(&bk.keys[i&mask], 1))
		}
	})
	b.Run("axiomhq", func(b *testing.B) {
		s := hyperloglog.New14()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			s.Insert(bk.bytes[i&mask])
		}
	})
	b.Run("axiomhq-dense", func(b *testing.B) {
		s := hyperloglog.NewNoSparse()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			s.Insert(bk.bytes[i&mask])
		}
	})
}

// splitmix is splitmix64's output function: distinct inputs give distinct,
// uniformly spread outputs (a bijection), so n inputs are n distinct hashes.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// TestMBufViewsConcurrent: the structures on views of one MBuf, updated by
// two goroutines while a third takes snapshots (run with -race); the
// result equals a sequential run.
func TestMBufViewsConcurrent(t *testing.T) {
	fCMS := buffers.Field{Name: "cms", Type: buffers.U64, Offset: 0, Count: 4 * 512}
	fHLL := buffers.Field{Name: "hll", Type: buffers.U8, Offset: fCMS.Offset + 8*fCMS.Count, Count: 1 << 10}
	fPCSA := buffers.Field{Name: "pcsa", Type: buffers.U32, Offset: fHLL.Offset + fHLL.Count, Count: 64}
	fBloom := buffers.Field{Name: "bloom", Type: buffers.U64, Offset: fPCSA.Offset + 4*fPCSA.Count, Count: BloomWords(1 << 14)}
	size := fBloom.Offset + 8*fBloom.Count
	build := func() (*buffers.MBuf, *CountMin, *HLL, *PCSA, *Bloom) {
		m := buffers.NewMBuf(size, buffers.Native, fCMS, fHLL, fPCSA, fBloom)
		c, err1 := NewCountMin(m.Uint64s(fCMS), 4, 512, Shared)
		h, err2 := NewHLL(m.Uint8s(fHLL), 10)
		p, err3 := NewPCSA(m.Uint32s(fPCSA))
		b, err4 := NewBloom(m.Uint64s(fBloom), 1<<14, 3)
		for _, err := range []error{err1, err2, err3, err4} {
			if err != nil {
				t.Fatal(err)
			}
		}
		return m, c, h, p, b
	}
	const n = 20000
	update := func(c *CountMin, h *HLL, p *PCSA, b *Bloom, from, step int) {
		for i := from; i < n; i += step {
			x := splitmix(uint64(i % 5000))
			c.Add(x, uint64(i%7+1))
			h.Add(x)
			p.Add(x)
			b.Add(x)
		}
	}
	m1, c1, h1, p1, b1 := build()
	update(c1, h1, p1, b1, 0, 1)

	m2, c2, h2, p2, b2 := build()
	done := make(chan bool)
	go func() { update(c2, h2, p2, b2, 0, 2); done <- true }()
	go func() { update(c2, h2, p2, b2, 1, 2); done <- true }()
	stop := make(chan bool)
	go func() {
		for {
			select {
			case <-stop:
				done <- true
				return
			default:
				_ = m2.Snapshot()
				_ = h2.Estimate()
				_ = p2.Estimate()
			}
		}
	}()
	<-done
	<-done
	close(stop)
	<-done
	if string(m1.Bytes()) != string(m2.Bytes()) {
		t.Error("concurrent updates through MBuf views differ from sequential ones")
	}
	if h1.Estimate() != h2.Estimate() || c1.Estimate(splitmix(3)) == 0 || !b1.Test(splitmix(3)) || p1.Estimate() == 0 {
		t.Error("estimates")
	}
}
