// Package windowtest drives a windowed function (a functions.Clocked
// producer) on generated packets as a flowspace does, for tests that
// compare two functions window for window: batches are cut at each
// deadline, the function is ticked before the packet that reaches it, and
// flushed at the end of the input. The records it reports come back as
// JSON lines.
package windowtest

import (
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/record"
)

// Feed runs fn, a producer, on the packets of g and returns its records
// as JSON.
func Feed(t testing.TB, fn functions.Function, g *gen.Generator) []string {
	t.Helper()
	var recs []string
	fn.(functions.Producer).SetEmit(func(b *buffers.Batch) {
		for _, e := range b.E[:b.N] {
			j, err := record.AppendJSON(nil, b.PBuf.Data(e.Slot))
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, string(j))
		}
	})
	pb := buffers.NewPBuf(buffers.MaxBatch, gen.MaxFrameLen)
	b := buffers.NewBatch(pb, 0, buffers.MaxBatch, 0)
	clk := fn.(functions.Clocked)
	var last int64
	for done := false; !done; {
		b.Reset()
		for b.Room() > 0 {
			n, w, ts, ok := g.Next(b.NextSlot())
			if !ok {
				done = true
				break
			}
			if clk.Deadline() <= ts {
				if b.N > 0 {
					fn.Process(b)
					b.Reset()
				}
				clk.Tick(ts)
			}
			b.Commit(uint32(n), uint32(w), ts)
			last = ts
		}
		fn.Process(b)
	}
	fn.(functions.Flusher).Flush(last)
	return recs
}
