package translator

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions/dta/layout"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

// rec is a Memory that keeps a copy of every write.
type rec struct{ ws []Write }

func (r *rec) Apply(w *Write) {
	c := *w
	if w.Data != nil {
		c.Data = append([]byte(nil), w.Data...)
	}
	r.ws = append(r.ws, c)
}

func newT(t testing.TB, cfg Config, m Memory) *Translator {
	t.Helper()
	tr, err := New(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func small() Config {
	return Config{Slots: 1000, Counters: 509, Chunks: 251, Copies: 1, Hops: 5, Lists: 4, ListSize: 40, Batch: 4}
}

func TestKeyWriteFanout(t *testing.T) {
	for _, n := range []uint8{1, 2, 4} {
		var r rec
		tr := newT(t, small(), &r)
		rep := wire.Report{Op: wire.KeyWrite, Redundancy: n, Key: 0x0a000105, Data: 0xdeadbeef}
		if err := tr.Translate(&rep); err != nil {
			t.Fatal(err)
		}
		if len(r.ws) != int(n) {
			t.Fatalf("N=%d: %d writes", n, len(r.ws))
		}
		want := make([]byte, layout.KeyWriteSlotSize)
		layout.PutKeyWriteSlot(want, layout.Checksum(rep.Key), rep.Data)
		slots := map[uint64]bool{}
		for i, w := range r.ws {
			if w.Region != KeyWrite || w.Offset != layout.SlotIndex(rep.Key, uint8(i), 1000)*8 || !bytes.Equal(w.Data, want) {
				t.Fatalf("N=%d write %d: %+v", n, i, w)
			}
			slots[w.Offset] = true
		}
		if len(slots) != int(n) {
			t.Errorf("N=%d: the copies share slots: %v", n, slots)
		}
	}
}

// Key-Increment adds to N counters; a count-min query (the least of them)
// never under-counts.
func TestKeyIncrement(t *testing.T) {
	cfg := small()
	m := NewMem(cfg)
	tr := newT(t, cfg, m)
	rng := rand.New(rand.NewPCG(1, 1))
	truth := map[uint32]uint64{}
	for range 20000 {
		k := uint32(rng.IntN(2000)) // 2000 keys in 512 counters: many collisions
		c := uint64(1 + rng.IntN(3))
		truth[k] += c
		if err := tr.Translate(&wire.Report{Op: wire.KeyIncrement, Redundancy: 3, Key: k, Counter: c}); err != nil {
			t.Fatal(err)
		}
	}
	if tr.Stats().FetchAdds != 60000 {
		t.Fatalf("%d fetch&adds", tr.Stats().FetchAdds)
	}
	for k, c := range truth {
		q := ^uint64(0)
		for n := range uint8(3) {
			q = min(q, layout.Counter(m.Counters[layout.SlotIndex(k, n, cfg.Counters)*8:]))
		}
		if q < c {
			t.Fatalf("key %d: %d < %d", k, q, c)
		}
	}
}

// Append batches B entries per list and writes them in order at the
// list's head, wrapping the ring; Flush writes the partial batches.
func TestAppendBatches(t *testing.T) {
	for _, b := range []int{1, 2, 4, 8, 16} {
		t.Run(fmt.Sprint("B=", b), func(t *testing.T) {
			cfg := small()
			cfg.Batch = b
			var r rec
			tr := newT(t, cfg, &r)
			direct := NewMem(cfg)
			heads := make([]uint64, cfg.Lists)
			const n = 103
			var entries [4][]uint32 // per list, in the order the writes carry them
			for i := range n {
				for _, l := range []uint32{2, 0} {
					v := uint32(i+1) | l<<24
					before := len(r.ws)
					if err := tr.Translate(&wire.Report{Op: wire.Append, List: l, Data: v}); err != nil {
						t.Fatal(err)
					}
					// A write only on every B-th entry of a list.
					if (len(r.ws) > before) != ((i+1)%b == 0) {
						t.Fatalf("entry %d of list %d: %d writes", i, l, len(r.ws)-before)
					}
					layout.PutWord(direct.Lists[l][heads[l]*4:], v)
					heads[l] = (heads[l] + 1) % cfg.ListSize
				}
			}
			tr.Flush()
			next := map[uint32]uint64{}
			m := NewMem(cfg)
			for _, w := range r.ws {
				if w.Region != Append || len(w.Data)%4 != 0 || len(w.Data) > 4*b {
					t.Fatalf("write %+v", w)
				}
				if w.Offset != next[w.List]*4 {
					t.Fatalf("list %d: write at %d, head at %d", w.List, w.Offset/4, next[w.List])
				}
				next[w.List] = (next[w.List] + uint64(len(w.Data)/4)) % cfg.ListSize
				for i := 0; i < len(w.Data); i += 4 {
					entries[w.List] = append(entries[w.List], layout.Word(w.Data[i:]))
				}
				m.Apply(&w)
			}
			for _, l := range []uint32{0, 2} {
				if len(entries[l]) != n {
					t.Fatalf("list %d: %d entries written", l, len(entries[l]))
				}
				for i, v := range entries[l] {
					if v != uint32(i+1)|l<<24 {
						t.Fatalf("list %d entry %d is %#x", l, i, v)
					}
				}
			}
			if err := m.Equal(direct); err != nil {
				t.Fatal(err)
			}
			if st := tr.Stats(); st.Batches != uint64(2*((n+b-1)/b)) || st.Reports[wire.Append] != 2*n {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func chunkOf(t *testing.T, w Write, key uint32, hops int) []uint32 {
	t.Helper()
	if w.Region != Postcards || len(w.Data) != hops*4 {
		t.Fatalf("postcard write %+v", w)
	}
	var vals []uint32
	for h := range hops {
		vals = append(vals, layout.PostcardValue(key, h, layout.Word(w.Data[h*4:])))
	}
	return vals
}

// A flow's chunk is written once its B-th hop is in, in hop order,
// whatever the order the postcards came in; each copy at its chunk.
func TestPostcardComplete(t *testing.T) {
	cfg := small()
	cfg.Copies = 2
	var r rec
	tr := newT(t, cfg, &r)
	key := uint32(0x0a000105)
	for i, h := range []uint8{2, 0, 4, 1, 3} {
		if err := tr.Translate(&wire.Report{Op: wire.Postcarding, Key: key, Hop: h, Data: 100 + uint32(h)}); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 2, false: 0}[i == 4]; len(r.ws) != want {
			t.Fatalf("after %d postcards: %d writes", i+1, len(r.ws))
		}
	}
	for n, w := range r.ws {
		if w.Offset != layout.ChunkIndex(key, uint8(n), cfg.Chunks)*layout.ChunkSize {
			t.Fatalf("copy %d at %d", n, w.Offset)
		}
		if got := fmt.Sprint(chunkOf(t, w, key, 5)); got != "[100 101 102 103 104]" {
			t.Fatalf("chunk %s", got)
		}
	}
	tr.Flush()
	if st := tr.Stats(); st.Complete != 1 || st.Evicted != 0 || st.Flushed != 0 || len(r.ws) != 2 {
		t.Fatalf("stats %+v, %d writes", st, len(r.ws))
	}
}

// Two flows of one cache line: the second evicts the first, written with
// blanks for its missing hops; Flush writes the second.
func TestPostcardCollision(t *testing.T) {
	var k1, k2 uint32
	seen := map[uint32]uint32{}
	for k := uint32(1); ; k++ {
		if o, ok := seen[layout.CacheIndex(k)]; ok {
			k1, k2 = o, k
			break
		}
		seen[layout.CacheIndex(k)] = k
	}
	var r rec
	tr := newT(t, small(), &r)
	for _, p := range []struct {
		key uint32
		hop uint8
	}{{k1, 0}, {k1, 1}, {k1, 1}, {k2, 3}} {
		if err := tr.Translate(&wire.Report{Op: wire.Postcarding, Key: p.key, Hop: p.hop, Data: p.key<<4 | uint32(p.hop)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.ws) != 1 {
		t.Fatalf("%d writes after the collision", len(r.ws))
	}
	want := fmt.Sprint([]uint32{k1<<4 | 0, k1<<4 | 1, layout.Blank, layout.Blank, layout.Blank})
	if got := fmt.Sprint(chunkOf(t, r.ws[0], k1, 5)); got != want {
		t.Fatalf("evicted chunk %s, want %s", got, want)
	}
	tr.Flush()
	if len(r.ws) != 2 {
		t.Fatalf("%d writes after Flush", len(r.ws))
	}
	want = fmt.Sprint([]uint32{layout.Blank, layout.Blank, layout.Blank, k2<<4 | 3, layout.Blank})
	if got := fmt.Sprint(chunkOf(t, r.ws[1], k2, 5)); got != want {
		t.Fatalf("flushed chunk %s, want %s", got, want)
	}
	if st := tr.Stats(); st.Evicted != 1 || st.Flushed != 1 || st.Complete != 0 || st.Duplicates != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRefused(t *testing.T) {
	var r rec
	tr := newT(t, small(), &r)
	for _, c := range []struct {
		rep wire.Report
		why Reason
	}{
		{wire.Report{Op: wire.KeyWrite, Redundancy: 0, Key: 1}, BadRedundancy},
		{wire.Report{Op: wire.KeyIncrement, Redundancy: 0, Key: 1}, BadRedundancy},
		// past what a collector takes (layout.MaxRedundancy): no 9 copies
		{wire.Report{Op: wire.KeyWrite, Redundancy: 9, Key: 1}, BadRedundancy},
		{wire.Report{Op: wire.KeyIncrement, Redundancy: 255, Key: 1}, BadRedundancy},
		{wire.Report{Op: wire.Append, List: 4}, BadList},
		{wire.Report{Op: wire.Append, List: 1 << 31}, BadList},
		{wire.Report{Op: wire.Postcarding, Hop: 5}, BadHop},
		{wire.Report{Op: wire.Postcarding, Hop: 255}, BadHop},
	} {
		var e *Error
		if err := tr.Translate(&c.rep); !errors.As(err, &e) || e.Reason != c.why {
			t.Errorf("%+v: %v", c.rep, err)
		}
	}
	if err := tr.Translate(&wire.Report{Op: 9}); err == nil {
		t.Error("opcode 9 translated")
	}
	tr.Flush()
	if st := tr.Stats(); len(r.ws) != 0 || st.Refused[BadRedundancy] != 4 || st.Refused[BadList] != 2 || st.Refused[BadHop] != 2 {
		t.Fatalf("%d writes, stats %+v", len(r.ws), st)
	}
	// What a collector could not host: its limits are layout's.
	ok := Config{Slots: 1, Counters: 1, Chunks: 1, Copies: 1, Hops: 5, Lists: 1, ListSize: 1, Batch: 1}
	if _, err := New(ok, &r); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { *c = Config{} }, "slots=0: at least 1"},
		{func(c *Config) { c.Hops = 9 }, "hops is 1 to 8"},
		{func(c *Config) { c.Batch = 3 }, "batch is 1, 2, 4, 8 or 16"},
		{func(c *Config) { c.Slots = 1 << 20 }, "slots=1048576 is a power of two"},
		{func(c *Config) { c.Counters = 1 << 10 }, "counters=1024 is a power of two"},
		{func(c *Config) { c.Chunks = 1 << 16 }, "chunks=65536 is a power of two"},
		{func(c *Config) { c.Slots = 1 << 32 }, "slots=4294967296: at most 4294967295"},
		{func(c *Config) { c.Copies = 9 }, "copies=9: a collector takes 1 to 8 copies"},
		{func(c *Config) { c.Lists = 1<<20 + 1 }, "lists is 1 to 1048576"},
	} {
		cfg := ok
		c.set(&cfg)
		if _, err := New(cfg, &r); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("config %+v: %v, want %q", cfg, err, c.want)
		}
	}
}

// ingest is a collector that writes each report directly, the way the
// paper's primitives define the memory (no batching, no cache).
func ingest(m *Mem, cfg Config, heads []uint64, r *wire.Report) {
	switch r.Op {
	case wire.KeyWrite:
		for n := range r.Redundancy {
			layout.PutKeyWriteSlot(m.KeyWrite[layout.SlotIndex(r.Key, n, cfg.Slots)*8:], layout.Checksum(r.Key), r.Data)
		}
	case wire.KeyIncrement:
		for n := range r.Redundancy {
			c := m.Counters[layout.SlotIndex(r.Key, n, cfg.Counters)*8:]
			layout.PutCounter(c, layout.Counter(c)+r.Counter)
		}
	case wire.Append:
		layout.PutWord(m.Lists[r.List][heads[r.List]*4:], r.Data)
		heads[r.List] = (heads[r.List] + 1) % cfg.ListSize
	case wire.Postcarding:
		for n := range cfg.Copies {
			off := layout.ChunkIndex(r.Key, uint8(n), cfg.Chunks)*layout.ChunkSize + uint64(r.Hop)*4
			layout.PutWord(m.Postcards[off:], layout.PostcardWord(r.Key, int(r.Hop), r.Data))
		}
	}
}

// The translator's writes leave the memory a collector ingesting the same
// reports directly would have (postcard flows arriving whole, one after
// another, so that no cache line is shared).
func TestAgainstDirectIngest(t *testing.T) {
	cfg := Config{Slots: 4093, Counters: 1021, Chunks: 509, Copies: 2, Hops: 5, Lists: 8, ListSize: 1000, Batch: 16}
	viaT, direct := NewMem(cfg), NewMem(cfg)
	tr := newT(t, cfg, viaT)
	heads := make([]uint64, cfg.Lists)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 50000 {
		var reps []wire.Report
		switch i % 4 {
		case 0:
			reps = []wire.Report{{Op: wire.KeyWrite, Redundancy: uint8(1 + rng.IntN(4)), Key: rng.Uint32() % 3000, Data: rng.Uint32()}}
		case 1:
			reps = []wire.Report{{Op: wire.KeyIncrement, Redundancy: 2, Key: rng.Uint32() % 3000, Counter: uint64(rng.IntN(100))}}
		case 2:
			reps = []wire.Report{{Op: wire.Append, List: uint32(rng.IntN(8)), Data: rng.Uint32()}}
		case 3:
			if i%40 != 3 {
				continue
			}
			key := rng.Uint32()
			for h := range uint8(5) {
				reps = append(reps, wire.Report{Op: wire.Postcarding, Key: key, Hop: h, Data: rng.Uint32() | 1})
			}
		}
		for j := range reps {
			if err := tr.Translate(&reps[j]); err != nil {
				t.Fatal(err)
			}
			ingest(direct, cfg, heads, &reps[j])
		}
	}
	tr.Flush()
	if err := viaT.Equal(direct); err != nil {
		t.Fatal(err)
	}
	if viaT.Outside != 0 {
		t.Fatalf("%d writes outside", viaT.Outside)
	}
	t.Logf("%+v", tr.Stats())
}

func BenchmarkTranslate(b *testing.B) {
	cfg := DefaultConfig
	m := NewMem(cfg)
	for _, c := range []struct {
		name string
		rep  func(i int) wire.Report
	}{
		{"keywrite/N=2", func(i int) wire.Report {
			return wire.Report{Op: wire.KeyWrite, Redundancy: 2, Key: uint32(i) * 2654435761, Data: uint32(i)}
		}},
		{"keyincrement/N=2", func(i int) wire.Report {
			return wire.Report{Op: wire.KeyIncrement, Redundancy: 2, Key: uint32(i) * 2654435761, Counter: 1}
		}},
		{"append/B=16", func(i int) wire.Report { return wire.Report{Op: wire.Append, List: uint32(i & 7), Data: uint32(i)} }},
		{"postcarding/B=5", func(i int) wire.Report {
			return wire.Report{Op: wire.Postcarding, Key: uint32(i/5) * 2654435761, Hop: uint8(i % 5), Data: uint32(i)}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr := newT(b, cfg, m)
			reps := make([]wire.Report, 1<<12)
			for i := range reps {
				reps[i] = c.rep(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				_ = tr.Translate(&reps[i&(len(reps)-1)])
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mreports/s")
		})
	}
}
