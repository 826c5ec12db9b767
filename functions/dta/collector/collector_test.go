package collector

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

func newTest(t testing.TB, cfg Config) *Collector {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func payload(r wire.Report) []byte {
	b, err := r.Append(nil)
	if err != nil {
		panic(err)
	}
	return b
}

func TestKeyWriteQueries(t *testing.T) {
	c := newTest(t, Config{KeyWrite: KeyWriteConfig{Slots: 1000003, Redundancy: 2}})
	if why := c.IngestPayload(payload(wire.Report{Op: wire.KeyWrite, Redundancy: 2, Key: 0x0a000105, Data: 42})); why != 0 {
		t.Fatal(why)
	}
	a, _ := c.KeyWrite(0x0a000105, 0, 0)
	if a.Status != Found || a.Value != 42 || a.Votes != 2 || a.Matches != 2 {
		t.Fatalf("%+v", a)
	}
	if a, _ := c.KeyWrite(0x0a000106, 0, 0); a.Status != NotFound {
		t.Fatalf("a key never written: %+v", a)
	}
	// Written again with one copy: the two copies disagree, one vote each.
	c.Ingest(&wire.Report{Op: wire.KeyWrite, Redundancy: 1, Key: 0x0a000105, Data: 43})
	if a, _ := c.KeyWrite(0x0a000105, 0, 0); a.Status != Collision || a.Matches != 2 {
		t.Fatalf("copies 43 and 42: %+v", a)
	}
	if a, _ := c.KeyWrite(0x0a000105, 1, 0); a.Status != Found || a.Value != 43 {
		t.Fatalf("N=1: %+v", a)
	}
	// Four copies, three agree: the plurality wins; a consensus of 4 is not met.
	c.Ingest(&wire.Report{Op: wire.KeyWrite, Redundancy: 4, Key: 7, Data: 1})
	c.Ingest(&wire.Report{Op: wire.KeyWrite, Redundancy: 1, Key: 7, Data: 2})
	if a, _ := c.KeyWrite(7, 4, 0); a.Status != Found || a.Value != 1 || a.Votes != 3 {
		t.Fatalf("plurality: %+v", a)
	}
	if a, _ := c.KeyWrite(7, 4, 4); a.Status != Collision {
		t.Fatalf("consensus 4: %+v", a)
	}
	if _, err := c.KeyWrite(7, 9, 0); err == nil {
		t.Error("redundancy 9 queried")
	}
	if _, err := c.KeyIncrement(7, 0); err == nil {
		t.Error("a primitive not hosted was queried")
	}
}

// Bad input is counted per reason, never written.
func TestMalformedCounted(t *testing.T) {
	c := newTest(t, Config{KeyWrite: KeyWriteConfig{Slots: 1009}, Append: AppendConfig{Lists: 2, Size: 10},
		Postcarding: PostcardingConfig{Chunks: 1009, Hops: 3, Values: 100}})
	cases := []struct {
		b    []byte
		want Reason
	}{
		{nil, ReasonShort},
		{[]byte{1}, ReasonShort},
		{[]byte{1, 0, 2, 0, 0}, ReasonShort},
		{[]byte{9, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ReasonOpcode},
		{append(payload(wire.Report{Op: wire.Append, List: 1, Data: 5}), 0), ReasonTrailing},
		{payload(wire.Report{Op: wire.Append, List: 2, Data: 5}), ReasonList},
		{payload(wire.Report{Op: wire.KeyWrite, Redundancy: 0, Key: 1}), ReasonRedundancy},
		{payload(wire.Report{Op: wire.KeyWrite, Redundancy: 9, Key: 1}), ReasonRedundancy},
		{payload(wire.Report{Op: wire.Postcarding, Key: 1, Hop: 3, Data: 5}), ReasonHop},
		{payload(wire.Report{Op: wire.Postcarding, Key: 1, Hop: 0, Data: 100}), ReasonValue},
		{payload(wire.Report{Op: wire.KeyIncrement, Redundancy: 1, Key: 1, Counter: 1}), ReasonDisabled},
	}
	in := c.NewIngester()
	for _, tc := range cases {
		if got := c.IngestPayload(tc.b); got != tc.want {
			t.Errorf("% x: %v, want %v", tc.b, got, tc.want)
		}
		if got := in.IngestPayload(tc.b); got != tc.want {
			t.Errorf("ingester: % x: %v, want %v", tc.b, got, tc.want)
		}
	}
	in.Flush()
	s := c.Stats()
	for _, r := range Reasons {
		want := 0
		for _, tc := range cases {
			if tc.want == r {
				want += 2
			}
		}
		if s.Dropped[r.String()] != uint64(want) {
			t.Errorf("%v: %d, want %d", r, s.Dropped[r.String()], want)
		}
	}
	if s.Total() != 0 {
		t.Errorf("%d reports ingested", s.Total())
	}
	var r wire.Report
	if n := testing.AllocsPerRun(100, func() { in.IngestPayload([]byte{9, 0}); _ = decode(cases[2].b, &r) }); n != 0 {
		t.Errorf("%v allocations per bad payload", n)
	}
}

// Append returns every entry in order, whatever the batch size, across
// the ring's wrap, and a reader that falls behind learns how many it lost.
func TestAppendInOrderWithBatching(t *testing.T) {
	for _, b := range []int{1, 4, 8, 16} {
		c := newTest(t, Config{Append: AppendConfig{Lists: 3, Size: 1000}})
		var next uint64
		var got []uint32
		seq := uint32(0)
		for round := range 50 {
			batch := make([]uint32, b)
			for i := range batch {
				batch[i] = seq
				seq++
			}
			if b == 1 {
				c.Ingest(&wire.Report{Op: wire.Append, List: 1, Data: batch[0]})
			} else if err := c.AppendBatch(1, batch); err != nil {
				t.Fatal(err)
			}
			if round%7 == 0 { // a consumer keeping up
				var lost uint64
				var err error
				got, next, lost, err = c.AppendRead(1, next, 1<<20, got)
				if err != nil || lost != 0 {
					t.Fatalf("B=%d: lost %d, %v", b, lost, err)
				}
			}
		}
		got, _, _, _ = c.AppendRead(1, next, 1<<20, got)
		for i, v := range got {
			if v != uint32(i) {
				t.Fatalf("B=%d: entry %d is %d", b, i, v)
			}
		}
		if len(got) != int(seq) {
			t.Fatalf("B=%d: read %d of %d", b, len(got), seq)
		}
		last, total, _ := c.AppendLast(1, 5)
		if total != uint64(seq) || len(last) != 5 || last[4] != seq-1 || last[0] != seq-5 {
			t.Fatalf("B=%d: last 5 %v of %d", b, last, total)
		}
		if e, total, _ := c.AppendLast(0, 5); len(e) != 0 || total != 0 {
			t.Fatalf("an empty list: %v %d", e, total)
		}
	}
	// A reader 300 entries behind a ring of 100 loses 200.
	c := newTest(t, Config{Append: AppendConfig{Lists: 1, Size: 100}})
	for i := range 300 {
		c.Ingest(&wire.Report{Op: wire.Append, Data: uint32(i)})
	}
	e, next, lost, _ := c.AppendRead(0, 0, 1000, nil)
	if lost != 200 || next != 300 || len(e) != 100 || e[0] != 200 || e[99] != 299 {
		t.Fatalf("lost %d next %d, %d entries from %d", lost, next, len(e), e[0])
	}
}

// Writers on several goroutines: each one's entries keep their order.
func TestAppendConcurrentWriters(t *testing.T) {
	c := newTest(t, Config{Append: AppendConfig{Lists: 1, Size: 1 << 16}})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4000 {
				if w%2 == 0 {
					c.Ingest(&wire.Report{Op: wire.Append, Data: uint32(w)<<24 | uint32(i)})
				} else {
					c.AppendBatch(0, []uint32{uint32(w)<<24 | uint32(2*i), uint32(w)<<24 | uint32(2*i+1)})
				}
			}
		}()
	}
	wg.Wait()
	e, _, _, _ := c.AppendRead(0, 0, 1<<20, nil)
	if len(e) != 2*4000+2*8000 {
		t.Fatalf("%d entries", len(e))
	}
	var next [4]uint32
	for _, v := range e {
		w := v >> 24
		if v&0xffffff != next[w] {
			t.Fatalf("writer %d: %d after %d", w, v&0xffffff, next[w])
		}
		next[w]++
	}
}

// Key-Increment never under-counts, on a heavily loaded sketch and with
// increments from several goroutines.
func TestKeyIncrementNeverUnderCounts(t *testing.T) {
	c := newTest(t, Config{KeyIncrement: KeyIncrementConfig{Slots: 10007, Redundancy: 2}})
	const keys = 50000
	truth := make([]uint64, keys)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			in := c.NewIngester()
			for i := g; i < 4*keys; i += 2 {
				k := i % keys
				v := uint64(rng.IntN(1000))
				in.Ingest(&wire.Report{Op: wire.KeyIncrement, Redundancy: 2, Key: perm(uint32(k)), Counter: v})
				truth[k] += v // keys of one goroutine: i%2 == g fixes k%2
			}
			in.Flush()
		}()
	}
	wg.Wait()
	for k, want := range truth {
		got, err := c.KeyIncrement(perm(uint32(k)), 0)
		if err != nil {
			t.Fatal(err)
		}
		if got < want {
			t.Fatalf("key %d: %d, increments sum to %d", k, got, want)
		}
	}
	if c.Stats().Reports["keyincrement"] != 4*keys {
		t.Errorf("%d increments counted", c.Stats().Reports["keyincrement"])
	}
	// On a sketch 100 times larger than the keys, a key is over-counted
	// only when both its counters are shared: (1-e^-0.02)^2, 0.04%.
	c2 := newTest(t, Config{KeyIncrement: KeyIncrementConfig{Slots: 1000003, Redundancy: 2}})
	for k := range 10000 {
		c2.Ingest(&wire.Report{Op: wire.KeyIncrement, Redundancy: 2, Key: perm(uint32(k)), Counter: uint64(k) + 1})
	}
	over := 0
	for k := range 10000 {
		got, _ := c2.KeyIncrement(perm(uint32(k)), 0)
		if got < uint64(k)+1 {
			t.Fatalf("key %d: %d, incremented by %d", k, got, k+1)
		}
		if got > uint64(k)+1 {
			over++
		}
	}
	if over > 20 {
		t.Errorf("%d of 10000 keys over-counted at load 0.01 (expected about 4)", over)
	}
}

// Postcards ingested one by one, hop 0 first, give back paths of any
// length up to B.
func TestPostcardsIngested(t *testing.T) {
	c := newTest(t, Config{Postcarding: PostcardingConfig{Chunks: 100003, Hops: 5, Redundancy: 2, Values: 1 << 18}})
	for k := range uint32(1000) {
		l := int(k%5) + 1
		for h := range l {
			if why := c.Ingest(&wire.Report{Op: wire.Postcarding, Key: perm(k), Hop: uint8(h), Data: (k*7 + uint32(h)) % (1 << 18)}); why != 0 {
				t.Fatal(why)
			}
		}
	}
	for k := range uint32(1000) {
		a, _ := c.Postcard(perm(k))
		l := int(k%5) + 1
		if a.Status != Found || len(a.Hops) != l || a.Votes < 1 {
			t.Fatalf("flow %d: %+v, want %d hops", k, a, l)
		}
		for h, v := range a.Hops {
			if v != (k*7+uint32(h))%(1<<18) {
				t.Fatalf("flow %d hop %d: %d", k, h, v)
			}
		}
	}
	if a, _ := c.Postcard(12345); a.Status != NotFound {
		t.Fatalf("a flow never seen: %+v", a)
	}
	// A translator's path with a hop it did not collect.
	if err := c.WritePath(99, []uint32{3, Blank, 5}); err != nil {
		t.Fatal(err)
	}
	if a, _ := c.Postcard(99); a.Status != Found || !equal(a.Hops, []uint32{3, Blank, 5}) {
		t.Fatalf("%+v", a)
	}
	if err := c.WritePath(99, []uint32{1, 2, 3, 4, 5, 6}); err == nil {
		t.Error("a path longer than B written")
	}
}
