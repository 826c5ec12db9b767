package kernel

import (
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	cring "github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/annotate"
	_ "github.com/ffpf-go/ffpf/functions/bpf"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// clockRig is a program of one source on interface "t" and one exported
// function of class, run through BPF_PROG_TEST_RUN, with the flowspace's
// ring buffer and map of clock-only records sent.
type clockRig struct {
	prog               *ebpf.Program
	ring, sent, ctr    *ebpf.Map
	rd                 *cring.Reader
	offset             int64
	frame              []byte
	withClock, withAnn bool
}

func newClockRig(tb testing.TB, class string, args []functions.Arg, withClock bool) *clockRig {
	tb.Helper()
	c, ok := functions.Default.Lookup(class)
	if !ok {
		tb.Fatalf("no class %s", class)
	}
	params, err := c.Bind(args)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := &functions.Context{ID: class, Params: params, LinkType: functions.LinkEthernet, Snaplen: 262144}
	if c.Validate != nil {
		if err := c.Validate(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	fn, err := c.EBPF(functions.TargetXDP, ctx)
	if err != nil {
		tb.Fatal(err)
	}
	r := &clockRig{offset: ringbuf.Offset()}
	if r.ctr, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 16}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.ctr.Close() })
	if r.ring, err = ringbuf.NewMap(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.ring.Close() })
	p := &progSpec{kind: flowspaces.KindXDP, iface: "t", counters: r.ctr, ring: r.ring, snap: 2048, progName: "ffpf_test",
		offset: r.offset, exports: []int{1},
		nodes: []progNode{{iface: "t", in: true, slot: 0}, {node: &flowspaces.Node{ID: class, Class: c, Ctx: *ctx}, fn: fn, inputs: []int{0}, slot: 2}}}
	for w := range c.Annotates {
		p.ann = append(p.ann, ctx.Ann+w)
	}
	if t, ok := fn.(ebpfgen.Timed); ok && t.Timed() {
		p.timed = true
	}
	if withClock {
		if r.sent, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1}); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { r.sent.Close() })
		p.sent = r.sent
	}
	if r.prog, err = p.load("test"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.prog.Close() })
	if r.rd, err = cring.NewReader(r.ring); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.rd.Close() })
	g := gen.New(gen.Config{Seed: 3, Packets: 1, IPv6: -1, VLAN: -1})
	buf := make([]byte, gen.MaxFrameLen)
	n, _, _, _ := g.Next(buf)
	r.frame = buf[:n]
	return r
}

// records reads what the ring holds now.
func (r *clockRig) records(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	for {
		r.rd.SetDeadline(time.Now().Add(10 * time.Millisecond))
		rec, err := r.rd.Read()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return out
		}
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, rec.RawSample)
	}
}

func filterArgs(expr string) []functions.Arg {
	return []functions.Arg{{Key: "expr", Value: functions.Raw{Kind: functions.RawString, Text: expr}}}
}

// TestClockOnlyRecords: a program whose exported filter passes nothing
// sends clock-only records (mask 0, no bytes) with the (coarse) time of
// the packet that made it, at most one per CPU and ringbuf.ClockEvery; the
// first filtered packet sends one at once.
func TestClockOnlyRecords(t *testing.T) {
	needRoot(t)
	r := newClockRig(t, "bpf", filterArgs("ether proto 0x88b5"), true)
	before := monotonicNow()
	const n = 20000
	for range n {
		if _, err := r.prog.Run(&ebpf.RunOptions{Data: r.frame}); err != nil {
			t.Fatal(err)
		}
	}
	after := monotonicNow()
	recs := r.records(t)
	if len(recs) == 0 {
		t.Fatal("no clock-only record for 20,000 filtered packets")
	}
	if most := int((after-before)/ringbuf.ClockEvery.Nanoseconds()) + runtime.NumCPU(); len(recs) > most {
		t.Errorf("%d clock-only records in %v, want at most %d (one per CPU and %v)", len(recs), time.Duration(after-before), most, ringbuf.ClockEvery)
	}
	prev := int64(0)
	for _, rec := range recs {
		mask := binary.NativeEndian.Uint64(rec[ringbuf.OffMask:])
		capLen := binary.NativeEndian.Uint32(rec[ringbuf.OffCapLen:])
		ts := int64(binary.NativeEndian.Uint64(rec[ringbuf.OffTime:]))
		if len(rec) < ringbuf.HeaderLen || mask != 0 || capLen != 0 {
			t.Fatalf("a record of %d bytes with mask %#x and %d bytes of packet, want a clock-only record", len(rec), mask, capLen)
		}
		// The coarse clock is behind by up to a tick.
		if ts < before-coarseLag || ts > after || ts < prev {
			t.Errorf("clock record at %d, want ascending times within [%d, %d]", ts, before-coarseLag, after)
		}
		prev = ts
	}

	// Without a clock map the program sends nothing for filtered packets.
	q := newClockRig(t, "bpf", filterArgs("ether proto 0x88b5"), false)
	if _, err := q.prog.Run(&ebpf.RunOptions{Data: q.frame}); err != nil {
		t.Fatal(err)
	}
	if recs := q.records(t); len(recs) != 0 {
		t.Errorf("%d records without a clock map, want none", len(recs))
	}
}

// TestTimestampAnnotationGoesUp: timestamp in eBPF writes its word, and
// the record that carries the packet up carries the word after the
// header and the same time: with the flowspace's offset the word is the
// packet's timestamp above, to the nanosecond, on the wall clock's time
// base.
func TestTimestampAnnotationGoesUp(t *testing.T) {
	needRoot(t)
	r := newClockRig(t, "timestamp", nil, true)
	wall := time.Now().UnixNano()
	for range 3 {
		if _, err := r.prog.Run(&ebpf.RunOptions{Data: r.frame}); err != nil {
			t.Fatal(err)
		}
	}
	recs := r.records(t)
	if len(recs) != 3 {
		t.Fatalf("%d records for 3 packets", len(recs))
	}
	for _, rec := range recs {
		h := ringbuf.Header(1)
		if mask := binary.NativeEndian.Uint64(rec[ringbuf.OffMask:]); mask != 1 || len(rec) < h+len(r.frame) {
			t.Fatalf("record of %d bytes with mask %#x, want a packet of %d bytes after a %d-byte header", len(rec), mask, len(r.frame), h)
		}
		ts := int64(binary.NativeEndian.Uint64(rec[ringbuf.OffTime:])) + r.offset
		word := int64(binary.NativeEndian.Uint64(rec[ringbuf.OffAnn:]))
		if word != ts {
			t.Errorf("annotation %d, packet time %d: want them equal", word, ts)
		}
		if d := word - wall; d < -time.Second.Nanoseconds() || d > time.Minute.Nanoseconds() {
			t.Errorf("annotation %d is %v from the wall clock", word, time.Duration(d))
		}
		if string(rec[h:h+len(r.frame)]) != string(r.frame) {
			t.Error("the packet's bytes after the annotation words differ from the frame")
		}
	}
}

// BenchmarkClockOnly measures, in the kernel (BPF_PROG_TEST_RUN's
// repeat), a program whose exported filter drops the packet, without and
// with clock-only records: the cost per filtered packet of keeping the
// flowspace above on time.
func BenchmarkClockOnly(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("loading eBPF programs needs root")
	}
	for _, withClock := range []bool{false, true} {
		name := "without"
		if withClock {
			name = "with"
		}
		b.Run(name, func(b *testing.B) {
			r := newClockRig(b, "bpf", filterArgs("ether proto 0x88b5"), withClock)
			go func() { // keep the ring from filling
				for {
					if _, err := r.rd.Read(); err != nil {
						return
					}
				}
			}()
			b.ResetTimer()
			_, d, err := r.prog.Benchmark(r.frame, b.N, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(d.Nanoseconds()), "ns/packet")
		})
	}
}

// coarseLag bounds how far CLOCK_MONOTONIC_COARSE is behind: a tick.
const coarseLag = int64(20 * time.Millisecond)

func monotonicNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
