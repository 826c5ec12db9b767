package sketch

import (
	"math"
	"testing"
)

func newPCSA(t testing.TB, m int) *PCSA {
	s, err := NewPCSA(make([]uint32, m))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPCSABound: relative error within 3·0.78/√m on distinct hashes, for
// several m, seeds and cardinalities from m/20 to 60m.
func TestPCSABound(t *testing.T) {
	for _, m := range []int{16, 64, 128, 1024, 4096} {
		bound := 3 * 0.78 / math.Sqrt(float64(m))
		worst := 0.0
		for _, seed := range []uint64{1, 2, 3, 4} {
			for _, c := range cardinalities {
				n := int(math.Max(1, math.Round(c*float64(m))))
				s := newPCSA(t, m)
				for i := 0; i < n; i++ {
					h := splitmix(seed<<40 | uint64(m)<<20 | uint64(i))
					s.Add(h)
					if i%4 == 0 {
						s.Add(h)
					}
				}
				rel := (s.Estimate() - float64(n)) / float64(n)
				worst = math.Max(worst, math.Abs(rel))
				if math.Abs(rel) > bound {
					t.Errorf("m %d seed %d n %d: estimate %.0f, error %.4f beyond %.4f", m, seed, n, s.Estimate(), rel, bound)
				}
			}
		}
		t.Logf("m %d: worst relative error %.4f, bound %.4f", m, worst, bound)
	}
}

// TestPCSAFlowKeys: distinct flow keys of generated traces (MAFIA's size
// 128 and a larger sketch).
func TestPCSAFlowKeys(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		fs, keys := flowStream(t, seed, 150000, "5tuple", seed)
		for _, m := range []int{128, 2048} {
			bound := 3 * 0.78 / math.Sqrt(float64(m))
			s := newPCSA(t, m)
			for _, it := range fs.items {
				s.Add(it.hash)
			}
			n := float64(len(keys))
			rel := (s.Estimate() - n) / n
			t.Logf("seed %d m %d: %d distinct, estimate %.0f (%.4f)", seed, m, len(keys), s.Estimate(), rel)
			if math.Abs(rel) > bound {
				t.Errorf("seed %d m %d: error %.4f beyond %.4f", seed, m, rel, bound)
			}
		}
	}
}

func TestPCSAMergeResetArgs(t *testing.T) {
	a, b, all := newPCSA(t, 64), newPCSA(t, 64), newPCSA(t, 64)
	if a.Estimate() != 0 {
		t.Errorf("empty estimate %v", a.Estimate())
	}
	for i := uint64(0); i < 5000; i++ {
		h := splitmix(i)
		all.Add(h)
		if i%2 == 0 {
			a.Add(h)
		} else {
			b.Add(h)
		}
	}
	a.Merge(b.b)
	for i := range a.b {
		if a.b[i] != all.b[i] {
			t.Fatal("merge of two halves differs from the whole")
		}
	}
	a.Reset(0, 64)
	if a.Estimate() != 0 {
		t.Error("reset")
	}
	if j, bit := PCSAPosition(0xffffffff00000000, 100); j != 99 || bit != 31 {
		t.Errorf("PCSAPosition = %d, %d", j, bit)
	}
	if j, bit := PCSAPosition(0x0000000000000008, 100); j != 0 || bit != 3 {
		t.Errorf("PCSAPosition = %d, %d", j, bit)
	}
	if _, err := NewPCSA(nil); err == nil {
		t.Error("no bitmaps accepted")
	}
}
