package collector

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ffpf-go/ffpf/functions/dta/layout"
	"github.com/ffpf-go/ffpf/functions/dta/translator"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

// The same reports through a translator writing into a collector's memory
// and ingested by a collector directly leave identical memory and give
// identical answers, for all four primitives.
func TestTranslatorWritesCollectorMemory(t *testing.T) {
	cfg := Config{KeyWrite: KeyWriteConfig{Slots: 4099, Redundancy: 2},
		KeyIncrement: KeyIncrementConfig{Slots: 2053, Redundancy: 3},
		Append:       AppendConfig{Lists: 4, Size: 1000},
		Postcarding:  PostcardingConfig{Chunks: 2003, Hops: 5, Redundancy: 2, Values: 1 << 20}}
	for _, batch := range []int{1, 4, 16} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			direct, viaT := newTest(t, cfg), newTest(t, cfg)
			tr, err := translator.New(viaT.TranslatorConfig(batch), viaT)
			if err != nil {
				t.Fatal(err)
			}
			reps, keys := equivalenceReports(t, cfg)
			for i := range reps {
				if why := direct.Ingest(&reps[i]); why != 0 {
					t.Fatalf("direct ingest refused %+v: %v", reps[i], why)
				}
				if err := tr.Translate(&reps[i]); err != nil {
					t.Fatal(err)
				}
			}
			tr.Flush()
			if st, ts := viaT.Stats(), tr.Stats(); st.Outside != 0 || ts.Writes == 0 || ts.FetchAdds == 0 {
				t.Fatalf("collector %+v, translator %+v", st, ts)
			}
			if !slices.Equal(direct.kw.slots, viaT.kw.slots) {
				t.Error("Key-Write slots differ")
			}
			if !slices.Equal(direct.ki.counters, viaT.ki.counters) {
				t.Error("Key-Increment counters differ")
			}
			if !slices.Equal(direct.pc.words, viaT.pc.words) {
				t.Error("postcard chunks differ")
			}
			if !slices.Equal(direct.ap.entries, viaT.ap.entries) {
				t.Error("Append rings differ")
			}
			for l := range cfg.Append.Lists {
				a, at, _ := direct.AppendLast(l, 2000)
				b, bt, _ := viaT.AppendLast(l, 2000)
				if at != bt || !slices.Equal(a, b) || at == 0 {
					t.Errorf("list %d: %d entries and %d", l, at, bt)
				}
			}
			found := [3]int{}
			for _, k := range keys {
				a, _ := direct.KeyWrite(k, 0, 0)
				b, _ := viaT.KeyWrite(k, 0, 0)
				if a != b {
					t.Errorf("keywrite %#x: %+v and %+v", k, a, b)
				}
				x, _ := direct.KeyIncrement(k, 0)
				y, _ := viaT.KeyIncrement(k, 0)
				if x != y {
					t.Errorf("keyincrement %#x: %d and %d", k, x, y)
				}
				p, _ := direct.Postcard(k)
				q, _ := viaT.Postcard(k)
				if p.Status != q.Status || !slices.Equal(p.Hops, q.Hops) || p.Votes != q.Votes {
					t.Errorf("postcarding %#x: %+v and %+v", k, p, q)
				}
				if a.Status == Found {
					found[0]++
				}
				if x > 0 {
					found[1]++
				}
				if p.Status == Found {
					found[2]++
				}
			}
			if found[0] < 100 || found[1] < 100 || found[2] < 100 {
				t.Errorf("too few answers found to compare: %v", found)
			}
		})
	}
}

// equivalenceReports are reports of the four primitives: Key-Write and
// Key-Increment of 300 keys (some written twice), Append to every list,
// and postcards in path order: whole paths, and paths of two hops whose
// chunks no other flow shares (the translator writes those at Flush, the
// collector as they come: the same memory only if nothing else lands on
// the chunk between).
func equivalenceReports(t *testing.T, cfg Config) (reps []wire.Report, keys []uint32) {
	rng := rand.New(rand.NewPCG(13, 40040))
	used := map[uint64]bool{}
	chunks := func(k uint32) (c []uint64) {
		for j := range cfg.Postcarding.Redundancy {
			c = append(c, layout.ChunkIndex(k, uint8(j), cfg.Postcarding.Chunks))
		}
		return c
	}
	for i := range 300 {
		k := rng.Uint32()
		keys = append(keys, k)
		reps = append(reps, wire.Report{Op: wire.KeyWrite, Redundancy: 2, Key: k, Data: rng.Uint32()},
			wire.Report{Op: wire.KeyIncrement, Redundancy: 3, Key: k, Counter: uint64(rng.IntN(100))})
		if i%5 == 0 {
			reps = append(reps, wire.Report{Op: wire.KeyWrite, Redundancy: 2, Key: keys[rng.IntN(len(keys))], Data: rng.Uint32()})
		}
		for range 7 {
			reps = append(reps, wire.Report{Op: wire.Append, List: uint32(rng.IntN(4)), Data: rng.Uint32()})
		}
		if i%10 == 9 {
			continue // left for the short paths
		}
		for _, c := range chunks(k) {
			used[c] = true
		}
		for h := range uint8(5) {
			reps = append(reps, wire.Report{Op: wire.Postcarding, Key: k, Hop: h, Data: uint32(rng.IntN(1 << 20))})
		}
	}
	for i := 9; i < len(keys); i += 10 {
		k := keys[i]
		free := true
		for _, c := range chunks(k) {
			free = free && !used[c]
			used[c] = true
		}
		if !free {
			continue
		}
		for h := range uint8(2) {
			reps = append(reps, wire.Report{Op: wire.Postcarding, Key: k, Hop: h, Data: uint32(rng.IntN(1 << 20))})
		}
	}
	return reps, keys
}
