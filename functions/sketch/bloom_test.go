package sketch

import (
	"math"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"
)

func newBloom(t testing.TB, m, k int) *Bloom {
	s, err := NewBloom(make([]uint64, BloomWords(m)), m, k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBloomBound: no false negatives, and a false-positive rate within a
// factor 1.5 of (1 − e^(−kn/m))^k, for several sizes, loads and seeds.
func TestBloomBound(t *testing.T) {
	const probes = 400000
	for _, c := range []struct{ m, k, n int }{
		{1 << 16, 4, 8000}, {64 * 1024, 7, 6000}, {100003, 3, 20000}, {1 << 20, 5, 150000}, {512, 4, 64}, {64, 4, 6},
	} {
		// The formula is the rate expected over filters; a small filter's
		// own rate varies with how many bits its few keys happened to set,
		// so small filters are averaged over several.
		reps := max(1, 60000/c.n)
		for _, seed := range []uint64{1, 2, 3} {
			fp := 0
			for rep := 0; rep < reps; rep++ {
				s := newBloom(t, c.m, c.k)
				base := seed<<48 | uint64(rep)<<36
				for i := 0; i < c.n; i++ {
					s.Add(splitmix(base + uint64(i)))
				}
				for i := 0; i < c.n; i++ {
					if !s.Test(splitmix(base + uint64(i))) {
						t.Fatalf("m %d k %d: member %d tests false", c.m, c.k, i)
					}
				}
				for i := 0; i < probes/reps; i++ {
					if s.Test(splitmix(base + 1<<32 + uint64(i))) {
						fp++
					}
				}
			}
			rate, want := float64(fp)/float64(probes/reps*reps), BloomFalsePositive(c.m, c.k, c.n)
			t.Logf("m %d k %d n %d seed %d: false positives %.5f, theory %.5f", c.m, c.k, c.n, seed, rate, want)
			if rate > 1.5*want || rate < want/1.5 {
				t.Errorf("m %d k %d n %d seed %d: false-positive rate %.5f, theory %.5f", c.m, c.k, c.n, seed, rate, want)
			}
		}
	}
}

// TestBloomFlowKeys: members are the flow keys of the first half of a
// trace; the keys seen only in the second half are the probes. The oracle
// bits-and-blooms/bloom of the same m and k sees a false-positive rate of
// the same order.
func TestBloomFlowKeys(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		fs, keys := flowStream(t, seed, 200000, "5tuple", seed)
		half := len(fs.items) / 2
		member := make([]bool, len(keys))
		n := 0
		for _, it := range fs.items[:half] {
			if !member[it.id] {
				member[it.id] = true
				n++
			}
		}
		m := 16 * n
		k := BloomK(m, n)
		s := newBloom(t, m, k)
		ref := bloom.New(uint(m), uint(k))
		for _, it := range fs.items[:half] {
			s.Add(it.hash)
			ref.Add(it.bytes)
		}
		fp, fpRef, probes := 0, 0, 0
		probed := make([]bool, len(keys))
		for _, it := range fs.items {
			if member[it.id] {
				if !s.Test(it.hash) {
					t.Fatal("false negative")
				}
				continue
			}
			if probed[it.id] {
				continue
			}
			probed[it.id] = true
			probes++
			if s.Test(it.hash) {
				fp++
			}
			if ref.Test(it.bytes) {
				fpRef++
			}
		}
		want := BloomFalsePositive(m, k, n)
		t.Logf("seed %d: %d members, %d probes, m %d k %d: %d false positives (bits-and-blooms %d), %.1f expected",
			seed, n, probes, m, k, fp, fpRef, want*float64(probes))
		// Few expected false positives: allow Poisson noise (mean + 4 sd + 2).
		if lim := want*float64(probes) + 4*math.Sqrt(want*float64(probes)) + 2; float64(fp) > lim {
			t.Errorf("seed %d: %d false positives, at most %.0f expected", seed, fp, lim)
		}
	}
}

func TestBloomAddMergeReset(t *testing.T) {
	a, b := newBloom(t, 1000, 3), newBloom(t, 1000, 3)
	if a.Add(5) || !a.Add(5) {
		t.Error("Add reports presence wrongly")
	}
	b.Add(6)
	a.Merge(b.Words())
	if !a.Test(5) || !a.Test(6) {
		t.Error("merge")
	}
	a.Reset(0, len(a.Words()))
	if a.Test(5) {
		t.Error("reset")
	}
	for _, c := range []struct{ w, m, k int }{{1, 0, 1}, {1, 64, 0}, {1, 64, 33}, {1, 65, 1}} {
		if _, err := NewBloom(make([]uint64, c.w), c.m, c.k); err == nil {
			t.Errorf("NewBloom(%d words, %d bits, %d) accepted", c.w, c.m, c.k)
		}
	}
	if BloomK(1<<16, 8000) != 6 || BloomWords(65) != 2 {
		t.Error("BloomK or BloomWords")
	}
}

func TestCountingBloom(t *testing.T) {
	for _, w := range []Writes{Shared, Exclusive} {
		fs, _ := flowStream(t, 7, 50000, "5tuple", 3)
		s, err := NewCountingBloom(make([]uint64, 8192), 4, w)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range fs.items {
			s.Add(it.hash, it.value)
		}
		over, seen := 0, map[int]bool{}
		for _, it := range fs.items {
			if seen[it.id] {
				continue
			}
			seen[it.id] = true
			h, exact := it.hash, fs.exact[it.id]
			mn, mx, sum, avg := s.Min(h), s.Max(h), s.Sum(h), s.Avg(h)
			if mn < exact {
				t.Fatalf("min %d below the exact %d", mn, exact)
			}
			if !(mn <= avg && avg <= mx && sum >= 4*mn && sum <= 4*mx) {
				t.Fatalf("min %d avg %d max %d sum %d", mn, avg, mx, sum)
			}
			if s.Any(h, 0) {
				t.Fatal("a member has a zero counter")
			}
			if mn > exact {
				over++
			}
		}
		t.Logf("%s: %d of %d keys over-estimated", w, over, len(seen))
	}
	s, _ := NewCountingBloom(make([]uint64, 1<<16), 3, Exclusive)
	h := splitmix(9)
	s.Set(h, 7)
	if !s.All(h, 7) || s.Min(h) != 7 || s.Any(h, 0) {
		t.Error("Set/All/Any")
	}
	if s.Remove(h, 8) || !s.Remove(h, 7) || !s.All(h, 0) {
		t.Error("Remove")
	}
	// A hash whose high half is 0 puts all k positions on one counter:
	// Add adds k times there, and Remove takes back exactly that.
	s.Add(5, 2)
	if s.Min(5) != 6 || s.Remove(5, 3) || !s.Remove(5, 2) || s.Min(5) != 0 {
		t.Error("Remove of coinciding positions")
	}
	s.Set(h, math.MaxUint64)
	if s.Avg(h) != math.MaxUint64 {
		t.Errorf("Avg of max counters %d", s.Avg(h))
	}
	if _, err := NewCountingBloom(nil, 3, Shared); err == nil {
		t.Error("no counters accepted")
	}
}

// BenchmarkBloom: one insertion (hash the key, set k bits) per op, m 2^20
// bits, k 4.
func BenchmarkBloom(b *testing.B) {
	bk := newBenchKeys(b)
	mask := len(bk.keys) - 1
	b.Run("ffpf", func(b *testing.B) {
		s := newBloom(b, 1<<20, 4)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			s.Add(bk.sp.Hash(&bk.keys[i&mask], 1))
		}
	})
	b.Run("bits-and-blooms", func(b *testing.B) {
		s := bloom.New(1<<20, 4)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			s.Add(bk.bytes[i&mask])
		}
	})
}

// BenchmarkPCSA: one update per op, m 128 (MAFIA's size); no baseline.
func BenchmarkPCSA(b *testing.B) {
	bk := newBenchKeys(b)
	mask := len(bk.keys) - 1
	s := newPCSA(b, 128)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Add(bk.sp.Hash(&bk.keys[i&mask], 1))
	}
}
