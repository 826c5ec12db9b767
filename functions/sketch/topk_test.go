package sketch

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ffpf-go/ffpf/functions/flowkey"
)

// TestTopKExact: offered exact running counts, the tracker holds exactly
// the K largest keys with their counts (compared with a sort), through many
// evictions, table shifts and growing estimates.
func TestTopKExact(t *testing.T) {
	for _, k := range []int{1, 2, 10, 100} {
		for _, seed := range []uint64{1, 2, 3} {
			r := rand.New(rand.NewPCG(seed, uint64(k)))
			z := rand.NewZipf(r, 1.2, 1, 4999)
			counts := map[uint64]uint64{}
			top := NewTopK[uint64](k)
			for range 50000 {
				key := z.Uint64() * 7919 // spread the ids
				counts[key]++
				h := key % 64 // a weak hash: long probe runs
				if seed == 3 {
					h = flowkey.Fmix64(key)
				}
				top.Offer(&key, h, counts[key])
			}
			type kv struct{ k, v uint64 }
			var all []kv
			for key, v := range counts {
				all = append(all, kv{key, v})
			}
			slices.SortFunc(all, func(a, b kv) int {
				if a.v != b.v {
					return int(int64(b.v) - int64(a.v))
				}
				return 0
			})
			got := top.Append(nil)
			if len(got) != min(k, len(all)) {
				t.Fatalf("k %d: %d entries", k, len(got))
			}
			for i, e := range got {
				if e.Estimate != counts[e.Key] {
					t.Fatalf("k %d: key %d estimate %d, count %d", k, e.Key, e.Estimate, counts[e.Key])
				}
				if e.Estimate != all[i].v {
					t.Fatalf("k %d seed %d: rank %d has %d, the exact rank %d has %d", k, seed, i, e.Estimate, i, all[i].v)
				}
				if i > 0 && got[i-1].Estimate < e.Estimate {
					t.Fatal("not sorted")
				}
			}
			// Every tracked key is reachable through the table.
			for _, e := range got {
				if !top.tracked(&e.Key, e.Hash) {
					t.Fatalf("key %d lost from the table", e.Key)
				}
			}
			if top.Threshold() != got[len(got)-1].Estimate && len(got) == k {
				t.Fatal("threshold")
			}
			top.Reset()
			if top.Len() != 0 || top.Threshold() != 0 {
				t.Fatal("reset")
			}
		}
	}
}

// TestTopKWithCountMin: heavy flows of a trace by bytes, found by a
// count-min sketch with the tracker, against the exact top 10.
func TestTopKWithCountMin(t *testing.T) {
	fs, keys := flowStream(t, 5, 200000, "5tuple", 1)
	d, w := CountMinDims(0.0005, 0.01)
	cms := newCMS(t, d, w, Exclusive)
	top := NewTopK[flowkey.Key](10)
	for _, it := range fs.items {
		top.Offer(&keys[it.id], it.hash, cms.Add(it.hash, it.value))
	}
	ids := make([]int, len(keys))
	for i := range ids {
		ids[i] = i
	}
	slices.SortFunc(ids, func(a, b int) int { return int(int64(fs.exact[b]) - int64(fs.exact[a])) })
	got := top.Append(nil)
	bound := uint64(0.0005 * float64(fs.total))
	for i, e := range got {
		exact := fs.exact[ids[i]]
		// The i-th reported estimate is within εN of the i-th exact size.
		if e.Estimate < exact || e.Estimate > exact+bound {
			t.Errorf("rank %d: estimate %d, exact %d-th largest %d (εN %d)", i, e.Estimate, i, exact, bound)
		}
	}
}

// TestNoAllocs: no update allocates.
func TestNoAllocs(t *testing.T) {
	top := NewTopK[flowkey.Key](16)
	d, w := CountMinDims(0.01, 0.01)
	cms := newCMS(t, d, w, Shared)
	hll, pcsa, bl := newHLL(t, 12), newPCSA(t, 128), newBloom(t, 1<<12, 3)
	cb, _ := NewCountingBloom(make([]uint64, 1024), 3, Exclusive)
	var k flowkey.Key
	n := uint64(0)
	if a := testing.AllocsPerRun(1000, func() {
		n++
		k[0] = n % 100
		h := flowkey.Fmix64(k[0])
		top.Offer(&k, h, cms.Add(h, n))
		hll.Add(h)
		pcsa.Add(h)
		bl.Add(h)
		cb.Add(h, 1)
	}); a != 0 {
		t.Errorf("%v allocations per update", a)
	}
}

// BenchmarkTopK: a count-min update with its offer to a top-100 tracker.
func BenchmarkTopK(b *testing.B) {
	bk := newBenchKeys(b)
	mask := len(bk.keys) - 1
	d, w := CountMinDims(0.001, 0.01)
	cms := newCMS(b, d, w, Exclusive)
	top := NewTopK[flowkey.Key](100)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := &bk.keys[i&mask]
		h := bk.sp.Hash(k, 1)
		top.Offer(k, h, cms.Add(h, 1))
	}
}
