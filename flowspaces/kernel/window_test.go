package kernel

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/record"
)

// collect returns an emit that keeps each record as its JSON line.
func collect(recs *[]string) func(*buffers.Batch) {
	return func(b *buffers.Batch) {
		for _, e := range b.E[:b.N] {
			j, err := record.AppendJSON(nil, b.PBuf.Data(e.Slot))
			if err != nil {
				*recs = append(*recs, "malformed: "+err.Error())
				continue
			}
			*recs = append(*recs, string(j))
		}
	}
}

// windowedGo runs the Go function on frames with times ts, as the user
// flowspace does: a tick at the first packet that reaches the deadline,
// one packet at a time, and the flush at the end. It returns the MBuf,
// the records and which frames passed.
func windowedGo(t *testing.T, c *functions.Class, ctx *functions.Context, frames [][]byte, ts []int64) (*buffers.MBuf, []string, []bool) {
	t.Helper()
	fn, err := c.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var recs []string
	if pr, ok := fn.(functions.Producer); ok && c.IsProducer(ctx.Params) {
		pr.SetEmit(collect(&recs))
	}
	clk := fn.(functions.Clocked)
	passed := make([]bool, len(frames))
	p := buffers.NewPBuf(buffers.MaxBatch, gen.MaxFrameLen)
	b := buffers.NewBatch(p, 0, buffers.MaxBatch, 0)
	for i, f := range frames {
		if clk.Deadline() <= ts[i] {
			clk.Tick(ts[i])
		}
		b.Reset()
		b.Append(f, uint32(len(f)), ts[i])
		fn.Process(b)
		passed[i] = b.N == 1
	}
	if fl, ok := fn.(functions.Flusher); ok {
		fl.Flush(ts[len(ts)-1])
	}
	return fn.(functions.Stateful).MBuf(), recs, passed
}

// windowedEBPF runs the class's eBPF code with window= on frames with
// times ts (the program reads each frame's time from the clock map) and
// drives its Go half as the flowspace does, closing each window when the
// clock passes its end; stall, when set, says at which frames the Go half
// does not run (a process that stalls). It returns the MBuf, the
// records, which frames passed, and how many packets were late.
func windowedEBPF(t *testing.T, c *functions.Class, ctx *functions.Context, frames [][]byte, ts []int64, stall func(i int) bool) (*buffers.MBuf, []string, []bool, uint64) {
	t.Helper()
	if err := c.CanRun(functions.TargetXDP, ctx.Params); err != nil {
		t.Fatal(err)
	}
	fn, err := c.EBPF(functions.TargetXDP, ctx)
	if err != nil {
		t.Fatal(err)
	}
	gctx := *ctx
	gctx.Target = functions.TargetXDP // the Go half's, as the flowspace makes it (kernel.go)
	gofn, err := c.New(&gctx)
	if err != nil {
		t.Fatal(err)
	}
	var recs []string
	if pr, ok := gofn.(functions.Producer); ok && c.IsProducer(ctx.Params) {
		pr.SetEmit(collect(&recs))
	}
	mbuf := gofn.(functions.Stateful).MBuf()
	node := &flowspaces.Node{ID: c.Name, Class: c, Ctx: *ctx}
	win, err := windowOf(node, fn)
	if err != nil {
		t.Fatal(err)
	}
	defer win.close()
	maps, err := newStateMaps(c, mbuf.Fields(), fn, win.halves())
	if err != nil {
		t.Fatal(err)
	}
	defer closeMaps(maps)
	counters, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(2 + win.need(fn.StateSlots()))})
	if err != nil {
		t.Fatal(err)
	}
	defer counters.Close()
	clock, _, err := newClockMap()
	if err != nil {
		t.Fatal(err)
	}
	defer clock.Close()
	p := &progSpec{kind: flowspaces.KindXDP, iface: "t", counters: counters, snap: ringbuf.Snap, progName: "ffpf_test",
		clock: clock, testClock: true,
		nodes: []progNode{{iface: "t", in: true, slot: 0}, {node: node, fn: fn, inputs: []int{0}, slot: 2, maps: maps, win: win}}}
	prog, err := p.load("test")
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	hs := &halfState{counters: counters, slot: 2, slots: fn.StateSlots(), maps: maps, mbuf: mbuf, win: win, gofn: gofn}
	if err := hs.start(ts[0]); err != nil {
		t.Fatal(err)
	}
	sum := func(slot int) uint64 {
		v, err := sumSlot(counters, slot)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	passed := make([]bool, len(frames))
	out := sum(3)
	for i, f := range frames {
		if err := clock.Update(uint32(clockFixed), uint64(ts[i]), ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
		if stall == nil || !stall(i) {
			if err := hs.advance(ts[i]); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := prog.Run(&ebpf.RunOptions{Data: f}); err != nil {
			t.Fatal(err)
		}
		now := sum(3)
		passed[i], out = now > out, now
	}
	last := ts[len(ts)-1]
	if err := hs.advance(last); err != nil {
		t.Fatal(err)
	}
	if !hs.load(int(win.open & 1)) {
		t.Fatal("cannot read the state")
	}
	if fl, ok := gofn.(functions.Flusher); ok {
		fl.Flush(last)
	}
	return mbuf, recs, passed, sum(2 + win.lateSlot())
}

// windowTimes spreads n frames evenly over windows windows of interval
// ns, starting inside a window (so the first one is partial), so that
// every window has packets.
func windowTimes(n int, interval int64, windows int) []int64 {
	base := int64(1_700_000_000_000_000_000)/interval*interval + interval/3
	ts := make([]int64, n)
	for i := range ts {
		ts[i] = base + int64(i)*int64(windows)*interval/int64(n)
	}
	return ts
}

// TestWindowsEqualGo: with window= (and report=), the eBPF code of
// counter, cms, hll, pcsa and bloom, its state double-buffered by epoch
// parity and closed by the Go half as the flowspace does, gives on the
// same frames with the same times the records of every window and the
// final state, byte for byte, that the Go function gives in userspace,
// and passes the same packets. Window assignment is per packet, from the
// time the program reads.
func TestWindowsEqualGo(t *testing.T) {
	needRoot(t)
	frames := measureFrames(12000)
	for _, tc := range []struct{ class, args string }{
		{"counter", "window=100ms report=1"},
		{"counter", "value=bytes window=1s"},
		{"counter", "key=srcip/24 window=100ms report=20 size=4096"},
		{"counter", "key=5tuple value=bytes window=250ms report=5 size=300"},
		{"cms", "key=srcip/24 value=bytes width=500 depth=3 window=100ms"},
		{"hll", "key=dstip precision=8 window=100ms report=1"},
		{"hll", "precision=14 window=1s"},
		{"pcsa", "key=dstip,dstport bitmaps=64 window=100ms report=1"},
		{"bloom", "key=srcip bits=2000 hashes=3 window=100ms report=1"},
		{"bloom", "key=dstip,dstport bits=64 hashes=2 pass=member window=100ms"},
	} {
		t.Run(fmt.Sprintf("%s %s", tc.class, tc.args), func(t *testing.T) {
			c, ok := functions.Default.Lookup(tc.class)
			if !ok {
				t.Fatalf("no class %s", tc.class)
			}
			params := bindArgs(t, c, tc.args)
			ctx := &functions.Context{ID: tc.class, Params: params, LinkType: functions.LinkEthernet, Snaplen: 262144}
			interval := int64(params.Duration("window"))
			ts := windowTimes(len(frames), interval, 7)
			goState, goRecs, goPassed := windowedGo(t, c, ctx, frames, ts)
			bpfState, bpfRecs, bpfPassed, late := windowedEBPF(t, c, ctx, frames, ts, nil)
			if late != 0 {
				t.Errorf("%d packets found their half not ready", late)
			}
			if !bytes.Equal(goState.Bytes(), bpfState.Bytes()) {
				for _, f := range goState.Fields() {
					g, b := fmt.Sprint(goState.Snapshot()[f.Name]), fmt.Sprint(bpfState.Snapshot()[f.Name])
					if g != b {
						t.Errorf("field %s of the last window differs:\n Go   %.300s\n eBPF %.300s", f.Name, g, b)
					}
				}
			}
			if c.IsProducer(params) && len(goRecs) < 7 {
				t.Fatalf("Go reported %d records for 7 windows", len(goRecs))
			}
			if len(goRecs) != len(bpfRecs) {
				t.Errorf("Go reports %d records, eBPF %d", len(goRecs), len(bpfRecs))
			}
			for i := range min(len(goRecs), len(bpfRecs)) {
				if goRecs[i] != bpfRecs[i] {
					t.Errorf("record %d differs:\n Go   %s\n eBPF %s", i, goRecs[i], bpfRecs[i])
					break
				}
			}
			for i := range frames {
				if goPassed[i] != bpfPassed[i] {
					t.Errorf("frame %d: Go passes %v, eBPF %v", i, goPassed[i], bpfPassed[i])
					break
				}
			}
			if bytes.Equal(goState.Bytes(), make([]byte, len(goState.Bytes()))) {
				t.Error("the last window's state is zero: the test compares nothing")
			}
		})
	}
}

// TestWindowResetLosesNothing: the windows' reports of an unkeyed counter
// in eBPF add up to every packet sent, window after window; and when the
// Go half stalls for more than a window (it does not sweep in time), the
// packets whose half is not ready are counted as late, exactly those of
// the epochs it missed, and never mixed into another window's report.
func TestWindowResetLosesNothing(t *testing.T) {
	needRoot(t)
	frames := measureFrames(6000)
	c, _ := functions.Default.Lookup("counter")
	params := bindArgs(t, c, "window=100ms report=1")
	ctx := &functions.Context{ID: "counter", Params: params, LinkType: functions.LinkEthernet, Snaplen: 262144}
	const interval = int64(100e6)
	ts := windowTimes(len(frames), interval, 10)
	packets := func(recs []string) (total uint64, per []uint64) {
		for _, r := range recs {
			var n uint64
			if _, err := fmt.Sscanf(r[bytes.Index([]byte(r), []byte(`"packets":`))+len(`"packets":`):], "%d", &n); err != nil {
				t.Fatalf("record %s: %v", r, err)
			}
			per = append(per, n)
			total += n
		}
		return total, per
	}
	epoch := func(i int) int64 { return ts[i] / interval }
	first := epoch(0)
	windows := int(epoch(len(ts)-1) - first + 1)
	_, recs, _, late := windowedEBPF(t, c, ctx, frames, ts, nil)
	if total, per := packets(recs); total != uint64(len(frames)) || late != 0 || len(per) != windows {
		t.Fatalf("the windows' reports count %d packets in %d windows (%v), %d late; %d were sent in %d", total, len(per), per, late, len(frames), windows)
	}

	// The Go half stalls from the middle of window 3 to that of window 5:
	// window 3's half is read late, so window 5 (its parity) cannot be
	// written until it is swept.
	stall := func(i int) bool {
		mid := (first+3)*interval + interval/2
		return ts[i] >= mid && ts[i] < mid+2*interval
	}
	var want uint64
	for i := range ts {
		if stall(i) && epoch(i) == first+5 {
			want++
		}
	}
	_, recs, _, late = windowedEBPF(t, c, ctx, frames, ts, stall)
	total, per := packets(recs)
	if late != want || want == 0 || total+late != uint64(len(frames)) {
		t.Fatalf("stalled: %d late (want %d), %d in the reports %v: %d sent", late, want, total, per, len(frames))
	}
	for w, n := range per {
		var sent uint64
		for i := range ts {
			if epoch(i) == first+int64(w) && !(stall(i) && epoch(i) == first+5) {
				sent++
			}
		}
		if n != sent {
			t.Errorf("window %d reports %d packets, %d were sent in it and measured", w, n, sent)
		}
	}
}

// BenchmarkWindowCost is the program's time per packet (BPF_PROG_TEST_RUN,
// repeated on one frame) for cms and hll without and with window=: what
// the epoch, its ready mark and the choice of map per parity add.
func BenchmarkWindowCost(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("loading eBPF programs needs root")
	}
	frame := measureFrames(64)[3]
	for _, tc := range []struct{ class, args string }{
		{"cms", "key=5tuple"}, {"cms", "key=5tuple window=1s"},
		{"hll", "key=dstip"}, {"hll", "key=dstip window=1s"},
		{"counter", "key=5tuple"}, {"counter", "key=5tuple window=1s"},
	} {
		b.Run(tc.class+"/"+strings.ReplaceAll(tc.args, " ", ","), func(b *testing.B) {
			t := &testing.T{}
			c, _ := functions.Default.Lookup(tc.class)
			ctx := &functions.Context{ID: tc.class, Params: bindArgs(t, c, tc.args), LinkType: functions.LinkEthernet, Snaplen: 262144}
			fn, err := c.EBPF(functions.TargetXDP, ctx)
			if err != nil {
				b.Fatal(err)
			}
			mbuf, _ := c.State.NewMBuf(functions.TargetXDP, ctx.Params)
			node := &flowspaces.Node{ID: c.Name, Class: c, Ctx: *ctx}
			win, err := windowOf(node, fn)
			if err != nil {
				b.Fatal(err)
			}
			defer win.close()
			maps, err := newStateMaps(c, mbuf.Fields(), fn, win.halves())
			if err != nil {
				b.Fatal(err)
			}
			defer closeMaps(maps)
			counters, _ := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(2 + win.need(fn.StateSlots()))})
			defer counters.Close()
			clock, off, _ := newClockMap()
			defer clock.Close()
			p := &progSpec{kind: flowspaces.KindXDP, iface: "t", counters: counters, snap: ringbuf.Snap, progName: "ffpf_test", clock: clock,
				nodes: []progNode{{iface: "t", in: true, slot: 0}, {node: node, fn: fn, inputs: []int{0}, slot: 2, maps: maps, win: win}}}
			prog, err := p.load("bench")
			if err != nil {
				b.Fatal(err)
			}
			defer prog.Close()
			if win != nil {
				hs := &halfState{counters: counters, slot: 2, slots: fn.StateSlots(), maps: maps, win: win}
				if err := hs.start(monotonic() + off); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			_, d, err := prog.Benchmark(frame, b.N, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(d.Nanoseconds()), "ns/pkt")
		})
	}
}
