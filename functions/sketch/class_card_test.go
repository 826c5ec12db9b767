package sketch

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/internal/windowtest"
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
		recs := windowtest.Feed(t, fn, gen.New(gen.Config{Seed: 3, Packets: 4000, Flows: 1000}))
		rd, err := fn.(functions.Readable).Read("estimate")
		if err != nil {
			t.Fatal(err)
		}
		read := rd(nil, 0)
		state, _ := fn.(functions.Summarizer).Summary()["estimate"].(float64)
		var rec struct{ Estimate float64 }
		if len(recs) == 1 {
			json.Unmarshal([]byte(recs[0]), &rec)
		}
		if len(recs) != 1 || rec.Estimate != state || read != state || state == math.Round(state) {
			t.Errorf("%s: record %v, --json %v, reader %v: want one number (not a whole one, or the test sees no rounding)", c.Name, recs, state, read)
		}
	}
}

// tracked says whether a function of this package tracks what its
// windows touch.
func tracked(fn functions.Function) bool {
	switch f := fn.(type) {
	case *HLLFunc:
		return f.s.hist != nil
	case *PCSAFunc:
		return f.s.tracked
	case *CMS:
		return f.s.touched != nil
	case *BloomFunc:
		return f.b != nil && f.b.touched != nil || f.cb != nil && f.cb.touched != nil
	}
	return false
}

// A window's close costs what the window touched (measure.Touched): the
// tracked estimates and resets of hll, pcsa, cms and bloom report, window
// for window, exactly what scanning and clearing the whole structure
// reports (the function as an eBPF flowspace runs it, untracked), with
// windows of a few packets (the list) and of hundreds, which touch more
// than the list keeps (an eighth of the structure: the whole is cleared).
func TestWindowCloseTracked(t *testing.T) {
	raw := func(k, text string) functions.Arg {
		return functions.Arg{Key: k, Value: functions.Raw{Kind: functions.RawNumber, Text: text}}
	}
	word := func(k, text string) functions.Arg {
		return functions.Arg{Key: k, Value: functions.Raw{Kind: functions.RawWord, Text: text}}
	}
	for _, c := range []struct {
		class *functions.Class
		args  []functions.Arg
	}{
		{hllClass, []functions.Arg{raw("precision", "8")}},
		{pcsaClass, []functions.Arg{raw("bitmaps", "256")}},
		{cmsClass, []functions.Arg{raw("width", "101"), raw("depth", "3"), raw("report", "3"), word("value", "bytes")}},
		{bloomClass, []functions.Arg{raw("bits", "4000"), raw("hashes", "3")}},
		{bloomClass, []functions.Arg{raw("bits", "500"), word("counting", "true"), word("value", "bytes")}},
	} {
		for _, window := range []string{"2", "200"} {
			args := append([]functions.Arg{word("key", "5tuple"), {Key: "window", Value: functions.Raw{Kind: functions.RawNumber, Text: window, Unit: "us"}}}, c.args...)
			if !slices.ContainsFunc(args, func(a functions.Arg) bool { return a.Key == "report" }) {
				args = append(args, raw("report", "1"))
			}
			p, err := c.class.Bind(args)
			if err != nil {
				t.Fatal(err)
			}
			var got [2][]string
			for i, target := range []functions.Target{functions.TargetUser, functions.TargetXDP} {
				fn, err := c.class.New(&functions.Context{ID: c.class.Name + "#1", Params: p, LinkType: functions.LinkEthernet, Target: target})
				if err != nil {
					t.Fatal(err)
				}
				if tracked(fn) != (target == functions.TargetUser) {
					t.Fatalf("%s in %s: tracked %v", c.class.Name, target, tracked(fn))
				}
				got[i] = windowtest.Feed(t, fn, gen.New(gen.Config{Seed: 5, Packets: 6000, Flows: 3000}))
			}
			if len(got[0]) < 20 || !slices.Equal(got[0], got[1]) {
				t.Errorf("%s %v window=%sus: %d records tracked, %d untracked, or different records", c.class.Name, c.args, window, len(got[0]), len(got[1]))
			}
		}
	}
}

// BenchmarkTrackingCost is the datapath's cost of tracking what a window
// touches: the same function processing the same batches, tracked (user)
// and untracked (as in eBPF), with a window long enough never to close
// here, so that only the adds are measured. Compare the two in one run.
func BenchmarkTrackingCost(b *testing.B) {
	pb := buffers.NewPBuf(4*buffers.MaxBatch, gen.MaxFrameLen)
	var batches []*buffers.Batch
	g := gen.New(gen.Config{Seed: 5, Packets: 4 * buffers.MaxBatch, Flows: 100000})
	for i := range 4 {
		bt := buffers.NewBatch(pb, uint32(i*buffers.MaxBatch), buffers.MaxBatch, 0)
		for bt.Room() > 0 {
			c, w, _, _ := g.Next(bt.NextSlot())
			bt.Commit(uint32(c), uint32(w), 1)
		}
		batches = append(batches, bt)
	}
	for _, c := range []struct {
		class *functions.Class
		arg   functions.Arg
	}{
		{hllClass, functions.Arg{Key: "precision", Value: functions.Raw{Kind: functions.RawNumber, Text: "14"}}},
		{cmsClass, functions.Arg{Key: "depth", Value: functions.Raw{Kind: functions.RawNumber, Text: "5"}}},
		{bloomClass, functions.Arg{Key: "counting", Value: functions.Raw{Kind: functions.RawWord, Text: "true"}}},
	} {
		p, err := c.class.Bind([]functions.Arg{c.arg, {Key: "window", Value: functions.Raw{Kind: functions.RawNumber, Text: "1", Unit: "h"}}})
		if err != nil {
			b.Fatal(err)
		}
		for _, target := range []functions.Target{functions.TargetXDP, functions.TargetUser} {
			b.Run(c.class.Name+"/"+map[functions.Target]string{functions.TargetUser: "tracked", functions.TargetXDP: "untracked"}[target], func(b *testing.B) {
				fn, err := c.class.New(&functions.Context{ID: "x", Params: p, LinkType: functions.LinkEthernet, Target: target})
				if err != nil {
					b.Fatal(err)
				}
				fn.(functions.Clocked).Tick(1)
				var hs [4]flowkey.Hashes
				for i, bt := range batches {
					hs[i] = *flowkey.NewHashes(measure.Spec(p), functions.LinkEthernet, seed)
					hs[i].Fill(bt)
				}
				kd := fn.(flowkey.Keyed)
				var work buffers.Batch
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					work = *batches[i&3]
					kd.ProcessHashes(&work, &hs[i&3])
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*buffers.MaxBatch), "ns/packet")
			})
		}
	}
}
