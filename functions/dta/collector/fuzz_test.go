package collector

import (
	"testing"

	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

// Any payload is ingested or counted under one reason, exactly once, and
// never crashes the collector.
func FuzzIngestPayload(f *testing.F) {
	for _, r := range []wire.Report{
		{Op: wire.KeyWrite, Redundancy: 2, Key: 1, Data: 2},
		{Op: wire.Append, List: 3, Data: 4},
		{Op: wire.KeyIncrement, Redundancy: 9, Key: 1, Counter: 5},
		{Op: wire.Postcarding, Key: 1, Hop: 7, Data: 6},
	} {
		b, _ := r.Append(nil)
		f.Add(b)
	}
	f.Add([]byte{0xff, 0xff})
	c, err := New(Config{KeyWrite: KeyWriteConfig{Slots: 1009}, Append: AppendConfig{Lists: 4, Size: 16},
		KeyIncrement: KeyIncrementConfig{Slots: 1009}, Postcarding: PostcardingConfig{Chunks: 1009, Hops: 5, Values: 1000}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		total := func() uint64 {
			s := c.Stats()
			n := s.Total()
			for _, v := range s.Dropped {
				n += v
			}
			return n
		}
		before := total()
		why := c.IngestPayload(b)
		if after := total(); after != before+1 {
			t.Fatalf("% x (%v): counted %d times", b, why, after-before)
		}
	})
}
