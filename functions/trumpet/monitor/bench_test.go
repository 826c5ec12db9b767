package monitor_test

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/trumpet/event"
	"github.com/ffpf-go/ffpf/functions/trumpet/monitor"
)

// The paper's base experiment: 4,096 triggers in 32 wildcard patterns,
// each packet matching 8 of them, 64-byte packets at 10G line rate
// (14.88 Mpps, one every 67.2 ns on the packet clock), 10 ms epochs.

const linePeriod = 67 // ns between 64-byte packets at 10 Gb/s (67.2)

// udpFrame is a 60-byte Ethernet/IPv4/UDP frame (64 on the wire with the
// FCS).
func udpFrame(src, dst [4]byte, sport, dport uint16) []byte {
	b := make([]byte, 60)
	b[12], b[13] = 0x08, 0x00
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 46)
	copy(ip[12:], src[:])
	copy(ip[16:], dst[:])
	u := ip[20:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], 26)
	return b
}

// baseTriggers: pattern i (0..31) fixes a dstip prefix of 24+i%8 bits,
// the dport when (i/8)%2 == 1 and the protocol when i/16 == 1; its 128
// triggers watch 10.(i%4).k.0 for k < 128. A flow to 10.g.k.1 port 80
// matches the 8 patterns with i%4 == g. Trigger 0 fires on every epoch
// (count() > 0, for the detection delay); the others never do.
func baseTriggers() []event.Event {
	var evs []event.Event
	for i := range 32 {
		for k := range 128 {
			f := event.Filter{SrcPort: event.AnyPort, DstPort: event.AnyPort, Proto: -1,
				DstIP: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i % 4), byte(k), 0}), 24+i%8)}
			if (i/8)%2 == 1 {
				f.DstPort = event.PortRange{Lo: 80, Hi: 80}
			}
			if i/16 == 1 {
				f.Proto = 17
			}
			var pred event.Expr = event.Binary{Op: ">", L: event.Agg{Func: "sum", Var: "volume"}, R: event.Num(1e12)}
			if i == 0 && k == 0 {
				pred = event.Binary{Op: ">", L: event.Agg{Func: "count"}, R: event.Num(0)}
			}
			evs = append(evs, event.Event{Name: fmt.Sprintf("t%d.%d", i, k), Filters: []event.Filter{f},
				Predicate: pred, Interval: 10 * time.Millisecond})
		}
	}
	return evs
}

// threadCPU is the CPU time of the calling thread (the benchmark locks
// itself to one): on a shared machine, wall time counts the other
// programs' turns too.
func threadCPU() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

type benchTrace struct {
	frames [][]byte // views of one array
}

var benchTraces = map[bool]*benchTrace{}

// newBenchTrace: 16,384 flows (4 groups × 128 × 32 sources), sent in
// bursts of 1 to 4 packets of a flow; with flood, every other packet is a
// new 5-tuple.
func newBenchTrace(n int, flood bool) *benchTrace {
	if bt := benchTraces[flood]; bt != nil && len(bt.frames) == n {
		return bt
	}
	r := rand.New(rand.NewSource(1))
	flows := make([][]byte, 0, 16384)
	for g := range 4 {
		for k := range 128 {
			for s := range 32 {
				flows = append(flows, udpFrame([4]byte{192, 168, byte(s), byte(g)}, [4]byte{10, byte(g), byte(k), 1}, uint16(1000+s), 80))
			}
		}
	}
	bt := &benchTrace{}
	for len(bt.frames) < n {
		f := flows[r.Intn(len(flows))]
		for range 1 + r.Intn(4) {
			if flood {
				bt.frames = append(bt.frames, udpFrame([4]byte{172, byte(r.Intn(256)), byte(r.Intn(256)), byte(r.Intn(256))},
					[4]byte{10, byte(r.Intn(4)), byte(r.Intn(128)), 1}, uint16(r.Intn(65536)), 80))
			}
			bt.frames = append(bt.frames, f)
		}
	}
	bt.frames = bt.frames[:n]
	flat := make([]byte, 0, 60*n)
	for i, f := range bt.frames {
		flat = append(flat, f...)
		bt.frames[i] = flat[60*i : 60*i+60 : 60*i+60]
	}
	benchTraces[flood] = bt
	return bt
}

// BenchmarkMonitor runs packets at one per 67 ns of packet clock through a
// monitor, ticking its epochs and running the sweep in slices of 2 µs
// after every batch of 256 packets. floor is the flow table alone (no
// trigger); triggers has the 4,096; flood sends every other packet from
// a new 5-tuple, with the DoS filter on. Metrics: Mpps on one core
// (everything included), the longest sweep of an epoch (ms of work), late
// sweeps (finished at the next epoch's end, not between batches), the
// detection delay (the packet clock at the report minus the interval's
// end, in epochs; a report is due within one epoch of its interval's
// end, two epochs after the interval starts). The -batch cases feed the
// batches of 256 packets (cut at an epoch's end) to ProcessBatch instead
// of one Process per packet; triggers-batch-plain is triggers-batch on the
// plain path (Config.Plain: no flow gates in the sweep, the general
// summary update), to measure the fast one against.
func BenchmarkMonitor(b *testing.B) {
	for _, c := range []struct {
		name     string
		triggers bool
		flood    bool
		batch    bool
		plain    bool
	}{{"floor", false, false, false, false}, {"triggers", true, false, false, false}, {"flood", true, true, false, false},
		{"floor-batch", false, false, true, false}, {"triggers-batch", true, false, true, false}, {"flood-batch", true, true, true, false},
		{"triggers-batch-plain", true, false, true, true}} {
		b.Run(c.name, func(b *testing.B) {
			bt := newBenchTrace(1<<20, c.flood)
			cfg := monitor.Config{LinkType: functions.LinkEthernet, Epoch: int64(10 * time.Millisecond),
				Flows: 1 << 15, Buckets: 1 << 12, BurstGap: 5000, BurstLen: 5, Plain: c.plain}
			if c.flood {
				cfg.DoS = 256 // four of the flood's 64-byte packets
			}
			var now int64
			var delay int64
			m, err := monitor.New(cfg, func(t *monitor.Trigger, start int64, _ *monitor.Key, _ float64) {
				delay = max(delay, now-(start+int64(t.Event.Interval)))
			})
			if err != nil {
				b.Fatal(err)
			}
			if c.triggers {
				for _, e := range baseTriggers() {
					if err := m.Add(e); err != nil {
						b.Fatal(err)
					}
				}
			}
			if c.triggers && m.Patterns() != 32 {
				b.Fatalf("%d patterns", m.Patterns())
			}
			now = 1_700_000_000 * int64(time.Second)
			var i0 int
			var t0 int64
			at := func(k int) ([]byte, int64, uint32) {
				return bt.frames[(i0+k)&(1<<20-1)], t0 + int64(k+1)*linePeriod, 64
			}
			runBatch := func(n int) {
				for i := 0; i < n; {
					if now+linePeriod >= m.Deadline() {
						m.Tick(now + linePeriod)
					}
					c := min(256, n-i, int((m.Deadline()-now-1)/linePeriod))
					i0, t0 = i, now
					m.ProcessBatch(c, at)
					now += int64(c) * linePeriod
					i += c
					if m.Pending() {
						m.Sweep(2000)
					}
				}
			}
			run := func(n int) {
				if c.batch {
					runBatch(n)
					return
				}
				for i := range n {
					now += linePeriod
					if now >= m.Deadline() {
						m.Tick(now)
					}
					m.Process(bt.frames[i&(1<<20-1)], now, 64)
					if i&255 == 255 && m.Pending() {
						m.Sweep(2000)
					}
				}
			}
			run(1 << 20) // warm: the flows are in the table
			m.Stats = monitor.Stats{}
			delay = 0
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			c0 := threadCPU()
			run(b.N)
			cpu := threadCPU() - c0
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
			b.ReportMetric(float64(b.N)/float64(cpu)*1e3, "Mpps-cpu")
			b.ReportMetric(float64(m.Stats.SweepMaxNs)/1e6, "sweep-ms")
			b.ReportMetric(float64(m.Stats.Late), "late")
			b.ReportMetric(float64(m.Stats.NewFlows)/float64(b.N), "new/pkt")
			b.ReportMetric(float64(delay)/float64(cfg.Epoch), "detect-epochs")
			if c.flood {
				b.ReportMetric(float64(m.Stats.DoSFiltered)/float64(b.N), "filtered/pkt")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkSweep is the work of one epoch's sweep of the 4,096 triggers
// over 16,384 flows (131,072 flow-trigger pairs), done at once.
func BenchmarkSweep(b *testing.B) {
	bt := newBenchTrace(1<<18, false)
	cfg := monitor.Config{LinkType: functions.LinkEthernet, Epoch: int64(10 * time.Millisecond),
		Flows: 1 << 15, Buckets: 1 << 12}
	m, err := monitor.New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range baseTriggers() {
		if err := m.Add(e); err != nil {
			b.Fatal(err)
		}
	}
	now := 1_700_000_000 * int64(time.Second)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu int64
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		m.Tick(now)
		for i := range bt.frames { // one epoch's packets
			m.Process(bt.frames[i], now+int64(i), 64)
		}
		now += cfg.Epoch
		b.StartTimer()
		c0 := threadCPU()
		m.Tick(now) // starts the sweep of the epoch
		m.Flush(now)
		cpu += threadCPU() - c0
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/sweep")
	b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/sweep")
}

// benchRunner feeds the base experiment's trace to one monitor in batches
// of up to 256 packets on the packet clock (as BenchmarkMonitor's -batch
// cases do), each call going on where the last stopped, and sums the
// thread's CPU time it took.
type benchRunner struct {
	m      *monitor.Monitor
	frames [][]byte
	now    int64
	pos    int
	t0     int64
	at     func(k int) ([]byte, int64, uint32)
	cpu    int64
}

func newBenchRunner(b *testing.B, triggers, plain bool) *benchRunner {
	cfg := monitor.Config{LinkType: functions.LinkEthernet, Epoch: int64(10 * time.Millisecond),
		Flows: 1 << 15, Buckets: 1 << 12, BurstGap: 5000, BurstLen: 5, Plain: plain}
	m, err := monitor.New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	if triggers {
		for _, e := range baseTriggers() {
			if err := m.Add(e); err != nil {
				b.Fatal(err)
			}
		}
	}
	r := &benchRunner{m: m, frames: newBenchTrace(1<<20, false).frames, now: 1_700_000_000 * int64(time.Second)}
	r.at = func(k int) ([]byte, int64, uint32) {
		return r.frames[(r.pos+k)&(1<<20-1)], r.t0 + int64(k+1)*linePeriod, 64
	}
	return r
}

// run feeds the next n packets.
func (r *benchRunner) run(n int) {
	c0 := threadCPU()
	m := r.m
	for i := 0; i < n; {
		if r.now+linePeriod >= m.Deadline() {
			m.Tick(r.now + linePeriod)
		}
		c := min(256, n-i, int((m.Deadline()-r.now-1)/linePeriod))
		r.t0 = r.now
		m.ProcessBatch(c, r.at)
		r.now += int64(c) * linePeriod
		r.pos += c
		i += c
		if m.Pending() {
			m.Sweep(2000)
		}
	}
	r.cpu += threadCPU() - c0
}

// BenchmarkMonitorAlternating runs the flow table alone (floor), the 4,096
// triggers, and the triggers on the plain path (Config.Plain) in one
// process, an epoch's packets (10 ms at line rate) each in turn, so that
// the load of other programs on the machine weighs on the three alike:
// each one's Mpps on the CPU time it took, and the ratios of the triggers
// to the floor and to the plain path.
func BenchmarkMonitorAlternating(b *testing.B) {
	rs := []*benchRunner{newBenchRunner(b, false, false), newBenchRunner(b, true, false), newBenchRunner(b, true, true)}
	for _, r := range rs {
		r.run(1 << 20) // warm: the flows are in the table
		r.cpu = 0
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	const epochPackets = int(10*time.Millisecond) / linePeriod
	for done := 0; done < b.N; done += epochPackets {
		for _, r := range rs {
			r.run(min(epochPackets, b.N-done))
		}
	}
	b.StopTimer()
	mpps := func(r *benchRunner) float64 { return float64(b.N) / float64(r.cpu) * 1e3 }
	b.ReportMetric(mpps(rs[0]), "floor-Mpps-cpu")
	b.ReportMetric(mpps(rs[1]), "triggers-Mpps-cpu")
	b.ReportMetric(mpps(rs[2]), "plain-Mpps-cpu")
	b.ReportMetric(mpps(rs[1])/mpps(rs[0]), "triggers/floor")
	b.ReportMetric(mpps(rs[1])/mpps(rs[2]), "triggers/plain")
	b.ReportMetric(0, "ns/op")
}
