package sketch

import (
	"math"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/record"
)

// hll's and pcsa's estimate is one number: --json's state, the report's
// record and a reader give the same, unrounded.
func TestEstimateOneForm(t *testing.T) {
	for _, c := range []*functions.Class{hllClass, pcsaClass} {
		p, err := c.Bind([]functions.Arg{{Key: "key", Value: functions.Raw{Kind: functions.RawWord, Text: "5tuple"}},
			{Key: "report", Value: functions.Raw{Kind: functions.RawNumber, Text: "1"}}})
		if err != nil {
			t.Fatal(err)
		}
		fn, err := c.New(&functions.Context{ID: c.Name + "#1", Params: p, LinkType: functions.LinkEthernet})
		if err != nil {
			t.Fatal(err)
		}
		var recs []float64
		fn.(functions.Producer).SetEmit(func(b *buffers.Batch) {
			for _, e := range b.E[:b.N] {
				if f, ok := record.Find(b.PBuf.Data(e.Slot), "estimate"); ok {
					recs = append(recs, f.Float())
				}
			}
		})
		pb := buffers.NewPBuf(buffers.MaxBatch, gen.MaxFrameLen)
		b := buffers.NewBatch(pb, 0, buffers.MaxBatch, 0)
		g := gen.New(gen.Config{Seed: 3, Packets: 4000, Flows: 1000})
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
					clk.Tick(ts)
				}
				b.Commit(uint32(n), uint32(w), ts)
				last = ts
			}
			fn.Process(b)
		}
		rd, err := fn.(functions.Readable).Read("estimate")
		if err != nil {
			t.Fatal(err)
		}
		read := rd(pb, 0)
		fn.(functions.Flusher).Flush(last)
		state, _ := fn.(functions.Summarizer).Summary()["estimate"].(float64)
		if len(recs) != 1 || recs[0] != state || read != state || state == math.Round(state) {
			t.Errorf("%s: record %v, --json %v, reader %v: want one number (not a whole one, or the test sees no rounding)", c.Name, recs, state, read)
		}
	}
}
