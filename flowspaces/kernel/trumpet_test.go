package kernel

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/trumpet"
	"github.com/ffpf-go/ffpf/functions/trumpet/monitor"
)

// Adversarial frames for trumpet's phase 1: what monitor.Parse reads
// (or refuses) and the eBPF code must read the same.
func ethHdr(types ...uint16) []byte {
	b := []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2}
	for i, t := range types {
		b = binary.BigEndian.AppendUint16(b, t)
		if i < len(types)-1 {
			b = binary.BigEndian.AppendUint16(b, uint16(5+i)) // a tag's TCI
		}
	}
	return b
}

func ipv4Hdr(tos, ttl, proto byte, ihl, tot int, frag uint16, src, dst byte) []byte {
	b := make([]byte, max(ihl*4, 20))
	b[0] = 0x40 | byte(ihl&0x0f)
	b[1] = tos
	binary.BigEndian.PutUint16(b[2:], uint16(tot))
	binary.BigEndian.PutUint16(b[6:], frag)
	b[8], b[9] = ttl, proto
	copy(b[12:], []byte{10, 0, 0, src})
	copy(b[16:], []byte{10, 0, 1, dst})
	return b
}

func ipv6Hdr(tc, hop, nh byte, plen int, src byte) []byte {
	b := make([]byte, 40)
	binary.BigEndian.PutUint32(b, 6<<28|uint32(tc)<<20)
	binary.BigEndian.PutUint16(b[4:], uint16(plen))
	b[6], b[7] = nh, hop
	b[8], b[9], b[23] = 0x20, 0x01, src
	b[24], b[25], b[39] = 0x20, 0x01, 9
	return b
}

func tcpHdr(sp, dp uint16, doff int) []byte {
	b := make([]byte, max(doff*4, 20))
	binary.BigEndian.PutUint16(b, sp)
	binary.BigEndian.PutUint16(b[2:], dp)
	b[12] = byte(doff << 4)
	b[13] = 0x10
	return b
}

func udpHdr(sp, dp uint16, l int) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint16(b, sp)
	binary.BigEndian.PutUint16(b[2:], dp)
	binary.BigEndian.PutUint16(b[4:], uint16(l))
	return b
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// trumpetFrames are adversarial frames: truncated, bogus header lengths,
// VLAN tags (one, two, five), IPv4 and IPv6 fragments, IPv6 extension
// headers (walked, cut, too many), TSO and jumbogram lengths, CE marks,
// TCP data offsets out of range, protocols without ports.
func trumpetFrames() [][]byte {
	pay := func(n int) []byte { return make([]byte, n) }
	v4 := func(tos, ttl, proto byte, l4 []byte, payload int, frag uint16, src byte) []byte {
		return cat(ethHdr(0x0800), ipv4Hdr(tos, ttl, proto, 5, 20+len(l4)+payload, frag, src, 1), l4, pay(payload))
	}
	ext := func(nh byte, units int) []byte {
		b := make([]byte, 8*(units+1))
		b[0], b[1] = nh, byte(units)
		return b
	}
	frag6 := func(nh byte, off uint16, more bool) []byte {
		b := make([]byte, 8)
		b[0] = nh
		v := off << 3
		if more {
			v |= 1
		}
		binary.BigEndian.PutUint16(b[2:], v)
		return b
	}
	v6 := func(tc, hop byte, nh byte, rest []byte, src byte) []byte {
		return cat(ethHdr(0x86dd), ipv6Hdr(tc, hop, nh, len(rest), src), rest)
	}
	fr := [][]byte{
		v4(0, 64, 6, tcpHdr(1000, 80, 5), 100, 0, 1),
		v4(3, 63, 6, tcpHdr(1000, 80, 8), 1000, 0, 1),     // CE, TCP options
		v4(2, 62, 6, tcpHdr(1000, 80, 3), 10, 0, 1),       // data offset < 5
		v4(1, 61, 6, tcpHdr(1000, 80, 15), 0, 0, 2),       // data offset beyond the datagram
		v4(3, 60, 17, udpHdr(53, 53, 40), 32, 0, 3),       // UDP
		v4(0, 59, 17, udpHdr(53, 53, 4), 0, 0, 3)[:14+24], // UDP cut short
		v4(0, 58, 1, []byte{8, 0, 0, 0, 0, 0, 0, 0}, 56, 0, 4),
		v4(0, 57, 47, pay(4), 80, 0, 4),                                                     // GRE
		v4(0, 56, 132, pay(12), 30, 0, 4),                                                   // SCTP
		v4(0, 55, 6, tcpHdr(1001, 80, 5), 500, 0x2000, 5),                                   // first fragment (MF)
		v4(0, 54, 6, tcpHdr(1001, 80, 5), 500, 0x0010, 5),                                   // later fragment
		v4(0, 53, 17, udpHdr(7, 7, 100), 92, 0x0020, 5),                                     // later UDP fragment
		v4(0, 64, 6, tcpHdr(1000, 80, 5), 100, 0, 1)[:14+30],                                // truncated in TCP
		v4(0, 64, 6, tcpHdr(1000, 80, 5), 100, 0, 1)[:14+19],                                // truncated in IP
		v4(0, 64, 6, tcpHdr(1000, 80, 5), 100, 0, 1)[:14],                                   // no IP
		cat(ethHdr(0x0800), ipv4Hdr(0, 64, 6, 4, 60, 0, 6, 1), tcpHdr(1, 2, 5), pay(20)),    // IHL 4
		cat(ethHdr(0x0800), ipv4Hdr(0, 64, 6, 15, 40, 0, 6, 1), tcpHdr(1, 2, 5), pay(20)),   // IHL beyond the total
		cat(ethHdr(0x0800), ipv4Hdr(0, 64, 6, 5, 0, 0, 7, 1), tcpHdr(3, 4, 5), pay(300)),    // total 0 (TSO)
		cat(ethHdr(0x0800), ipv4Hdr(0, 64, 6, 5, 1500, 0, 8, 1), tcpHdr(3, 4, 5), pay(100)), // total beyond the frame
		cat(ethHdr(0x0800), ipv4Hdr(0, 64, 17, 5, 24, 0, 8, 1), udpHdr(3, 4, 8), pay(100)),  // total cuts UDP
		cat(ethHdr(0x0800), ipv4Hdr(0, 64, 6, 7, 100, 0, 9, 1), tcpHdr(5, 6, 5), pay(52)),   // IP options
		cat(ethHdr(0x8100, 0x0800), ipv4Hdr(3, 40, 6, 5, 140, 0, 10, 1), tcpHdr(7, 8, 5), pay(100)),
		cat(ethHdr(0x88a8, 0x8100, 0x0800), ipv4Hdr(0, 41, 17, 5, 128, 0, 10, 1), udpHdr(7, 8, 108), pay(100)),
		cat(ethHdr(0x8100, 0x8100, 0x8100, 0x9100, 0x0800), ipv4Hdr(0, 42, 17, 5, 128, 0, 10, 1), udpHdr(7, 8, 108), pay(100)),
		cat(ethHdr(0x8100, 0x8100, 0x8100, 0x8100, 0x8100, 0x0800), ipv4Hdr(0, 43, 17, 5, 128, 0, 10, 1), udpHdr(7, 8, 108), pay(100)), // five tags
		ethHdr(0x8100, 0x0800)[:16],                                                                                                    // a cut tag
		cat(ethHdr(0x0806), pay(28)),                                                                                                   // ARP
		v6(0, 64, 6, cat(tcpHdr(2000, 443, 5), pay(200)), 1),
		v6(3, 63, 6, cat(tcpHdr(2000, 443, 10), pay(50)), 1), // CE
		v6(1, 62, 17, cat(udpHdr(9, 9, 58), pay(50)), 2),
		v6(0, 61, 0, cat(ext(43, 1), ext(60, 0), tcpHdr(2001, 443, 5), pay(70)), 3),                                                              // hop-by-hop, routing, destination options
		v6(0, 60, 44, cat(frag6(6, 0, true), tcpHdr(2002, 443, 5), pay(90)), 3),                                                                  // first fragment
		v6(0, 59, 44, cat(frag6(6, 100, false), pay(90)), 3),                                                                                     // later fragment
		v6(0, 58, 0, cat(ext(44, 0), frag6(17, 7, false), pay(33)), 3),                                                                           // hop-by-hop, later fragment
		v6(0, 57, 0, cat(ext(60, 200)[:20]), 4),                                                                                                  // an extension header cut
		v6(0, 56, 0, cat(ext(0, 0), ext(0, 0), ext(0, 0), ext(0, 0), ext(0, 0), ext(0, 0), ext(0, 0), ext(0, 0), ext(6, 0), tcpHdr(1, 1, 5)), 4), // too many
		v6(0, 55, 58, pay(64), 5),                                                                                                                // ICMPv6
		cat(ethHdr(0x86dd), ipv6Hdr(0, 54, 6, 0, 6), tcpHdr(5, 5, 5), pay(40)),                                                                   // jumbogram length 0
		cat(ethHdr(0x86dd), ipv6Hdr(0, 53, 6, 4000, 6), tcpHdr(5, 5, 5), pay(40)),                                                                // length beyond the frame
		cat(ethHdr(0x86dd), ipv6Hdr(0, 52, 6, 10, 6), tcpHdr(5, 5, 5), pay(40)),                                                                  // length cuts TCP
		cat(ethHdr(0x86dd), ipv6Hdr(0, 51, 6, 0, 6))[:14+39],                                                                                     // truncated
		cat(ethHdr(0x8100, 0x86dd), ipv6Hdr(3, 50, 17, 20, 7), udpHdr(1, 2, 20), pay(12)),
		cat(ethHdr(0x0800), []byte{0x60}, pay(40)), // IPv4 ethertype, version 6
	}
	return fr
}

// trumpetTrace is generated frames (VLAN, IPv6, a tenth malformed) and the
// adversarial frames, several times each, with times over epochs epochs
// of epoch ns.
func trumpetTrace(n int, epoch int64, epochs int) ([][]byte, []int64) {
	frames := measureFrames(n)
	adv := trumpetFrames()
	r := rand.New(rand.NewSource(5))
	for range 6 {
		for _, f := range adv {
			i := r.Intn(len(frames) + 1)
			frames = slices.Insert(frames, i, f)
		}
	}
	return frames, windowTimes(len(frames), epoch, epochs)
}

// trumpetParams binds the trumpet class's parameters, events one a line
// in a file.
func trumpetParams(t testing.TB, c *functions.Class, epoch string, flows int, events ...string) functions.Params {
	t.Helper()
	file := filepath.Join(t.TempDir(), "events")
	if err := os.WriteFile(file, []byte(strings.Join(events, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := c.Bind([]functions.Arg{
		{Key: "events", Value: functions.Raw{Kind: functions.RawString, Text: file}},
		{Key: "epoch", Value: functions.Raw{Kind: functions.RawNumber, Text: strings.TrimSuffix(epoch, "ms"), Unit: "ms"}},
		{Key: "flows", Value: functions.Raw{Kind: functions.RawNumber, Text: fmt.Sprint(flows)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// drainOpts are drained's options.
type drainOpts struct {
	stall func(i int) bool // the Go half does not run at these frames (a process that stalls)
	mu    *sync.Mutex      // the Go half's lock (node.goMu), which its drains take
	// sync, when set, is called once the program is loaded with what the
	// flowspace's sync reads the counters into the Go half's MBuf with;
	// what it returns is called before the maps are closed.
	sync func(load func() bool) (stop func())
}

// onCPU runs f on CPU cpu: a program that BPF_PROG_TEST_RUN runs there
// writes that CPU's copy of a per-CPU map.
func onCPU(cpu int, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return err
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return err
	}
	defer unix.SchedSetaffinity(0, &all)
	return f()
}

// drained runs the class's eBPF code (a Drained function) on frames with
// times ts, the program reading each frame's time from the clock map, and
// drives its Go half gofn as the flowspace does (frame i on CPU i mod the
// CPUs, so that flows have entries on several): each epoch's flow map is
// drained once the clock has passed the epoch's end. After the last frame
// the clock is at end, and the run ends there: the epoch of end is
// drained as well. It returns the sums of the function's counter
// slots (its state, then late).
func drained(t testing.TB, c *functions.Class, ctx *functions.Context, gofn functions.Function, frames [][]byte, ts []int64, end int64, opts ...drainOpts) []uint64 {
	t.Helper()
	fn, err := c.EBPF(functions.TargetXDP, ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &flowspaces.Node{ID: c.Name, Class: c, Ctx: *ctx}
	win, err := windowOf(node, fn)
	if err != nil {
		t.Fatal(err)
	}
	defer win.close()
	if win == nil || win.flow == nil {
		t.Fatal("trumpet's eBPF code keeps no flow maps")
	}
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
		nodes: []progNode{{iface: "t", in: true, slot: 0}, {node: node, fn: fn, inputs: []int{0}, slot: 2, win: win}}}
	prog, err := p.load("test")
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	hs := &halfState{counters: counters, slot: 2, slots: fn.StateSlots(), win: win, gofn: gofn}
	var o drainOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	hs.mu = o.mu
	if st, ok := gofn.(functions.Stateful); ok {
		hs.mbuf = st.MBuf()
	}
	if err := hs.start(ts[0]); err != nil {
		t.Fatal(err)
	}
	if o.sync != nil {
		defer o.sync(func() bool { return hs.load(0) })()
	}
	for i, f := range frames {
		if err := clock.Update(uint32(clockFixed), uint64(ts[i]), ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
		if o.stall == nil || !o.stall(i) {
			if err := hs.advance(ts[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := onCPU(i%runtime.NumCPU(), func() error {
			_, err := prog.Run(&ebpf.RunOptions{Data: f})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := hs.end(end); err != nil { // as the flowspace ends a run
		t.Fatal(err)
	}
	var out []uint64
	for i := range win.need(fn.StateSlots()) - 2 {
		v, err := sumSlot(counters, 4+i)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

type flowSum struct {
	key monitor.Key
	sum monitor.Summary
}

// drainRec is a Go half that keeps the summaries it is handed, and
// counts the flows written on several CPUs in their epoch.
type drainRec struct {
	got   map[int64][]flowSum
	multi int
}

func (d *drainRec) Process(*buffers.Batch) {}
func (d *drainRec) Drain(e int64, keys, values []byte, n, cpus int) {
	vs := len(values) / max(n*cpus, 1)
	for i := range n {
		on := 0
		for c := range cpus {
			if int64(buffers.Native.Uint64(values[(i*cpus+c)*vs:])) == e {
				on++
			}
		}
		if on > 1 {
			d.multi++
		}
	}
	trumpet.FlowSummaries(e, keys, values, n, cpus, func(k *monitor.Key, s *monitor.Summary) {
		d.got[e] = append(d.got[e], flowSum{*k, *s})
	})
}

// goSummaries computes what the eBPF code should: per epoch, each flow's
// summary from the packets as monitor.Parse reads them, in the order of
// the flows' first packets; and the packets without a key.
func goSummaries(frames [][]byte, ts []int64, epoch int64) (map[int64][]flowSum, uint64) {
	want := map[int64][]flowSum{}
	at := map[int64]map[monitor.Key]int{}
	var nokey uint64
	var p monitor.Packet
	for i, f := range frames {
		if !monitor.Parse(functions.LinkEthernet, f, ts[i], uint32(len(f)), &p) {
			nokey++
			continue
		}
		e := ts[i] / epoch
		if at[e] == nil {
			at[e] = map[monitor.Key]int{}
		}
		j, ok := at[e][p.Key]
		if !ok {
			j = len(want[e])
			at[e][p.Key] = j
			want[e] = append(want[e], flowSum{key: p.Key})
		}
		want[e][j].sum.Add(&p)
	}
	return want, nokey
}

// TestTrumpetSummariesEqualGo: on the same frames (generated, and
// adversarial: truncated, bogus IHL and lengths, VLAN tags, fragments,
// IPv6 extension headers, protocols without ports) with the same times,
// trumpet's eBPF code (BPF_PROG_TEST_RUN) leaves per epoch the flows, in
// the order of their first packets, and the summaries, word for word,
// that monitor.Parse gives in Go, and counts the packets without a key as
// Parse refuses them. With a flow map too small, what it cannot keep is
// counted, and what it keeps is right.
func TestTrumpetSummariesEqualGo(t *testing.T) {
	needRoot(t)
	c, ok := functions.Default.Lookup("trumpet")
	if !ok {
		t.Fatal("no class trumpet")
	}
	const epoch = int64(10 * time.Millisecond)
	frames, ts := trumpetTrace(20000, epoch, 25)
	want, nokey := goSummaries(frames, ts, epoch)
	end := ts[len(ts)-1] + epoch
	for _, flows := range []int{16384, 16} {
		t.Run(fmt.Sprintf("flows=%d", flows), func(t *testing.T) {
			ctx := &functions.Context{ID: "trumpet", Params: trumpetParams(t, c, "10ms", flows, "a: *; count() > 0; 5-tuple; 10ms"),
				LinkType: functions.LinkEthernet, Snaplen: 262144, Target: functions.TargetXDP}
			rec := &drainRec{got: map[int64][]flowSum{}}
			slots := drained(t, c, ctx, rec, frames, ts, end)
			packets, gotNoKey, full, late := slots[0], slots[1], slots[2], slots[3]
			if packets != uint64(len(frames)) || gotNoKey != nokey || late != 0 {
				t.Errorf("packets %d nokey %d late %d; Go: %d, %d, 0", packets, gotNoKey, late, len(frames), nokey)
			}
			var kept uint64
			flowsSeen, bad := 0, 0
			for e, w := range want {
				g := rec.got[e]
				flowsSeen += len(w)
				if flows >= len(w) && len(g) != len(w) {
					t.Errorf("epoch %d: %d flows, Go %d", e, len(g), len(w))
				}
				// What the map kept is a subsequence of Go's flows, with
				// Go's summaries.
				j := 0
				for _, f := range g {
					kept += f.sum.Packets
					for j < len(w) && w[j].key != f.key {
						j++
					}
					if j == len(w) {
						if bad++; bad < 5 {
							t.Errorf("epoch %d: flow %x out of order or unknown to Go", e, f.key)
						}
						break
					}
					if w[j].sum != f.sum {
						if bad++; bad < 5 {
							t.Errorf("epoch %d flow %x: eBPF %+v, Go %+v", e, f.key, f.sum, w[j].sum)
						}
					}
					j++
				}
			}
			if kept+full+nokey != uint64(len(frames)) {
				t.Errorf("%d packets summarised, %d counted as mapfull, %d without a key: %d sent", kept, full, nokey, len(frames))
			}
			if flows >= 16384 && full != 0 || flows < 100 && full == 0 {
				t.Errorf("flows=%d: %d packets found the map full", flows, full)
			}
			if runtime.NumCPU() > 1 && rec.multi == 0 {
				t.Errorf("no flow was written on two CPUs in an epoch: the test does not see the CPUs' copies merged")
			}
			t.Logf("%d frames, %d flow-epochs (%d on several CPUs), %d without a key, %d packets found the map full", len(frames), flowsSeen, rec.multi, nokey, full)
		})
	}
}

// TestTrumpetInEBPFEqualGo: trumpet with summarisable events (count(),
// and every aggregate of volume, ttl and ecn, at 5-tuple and coarser
// granularities, over one and several epochs) in eBPF, its Go half
// drained as the flowspace does, reports line for line what it reports
// in userspace on the same frames with the same times. The order of an
// interval's reports is the flow table's memory order, which in
// userspace depends on how the sweep's slices and the next epoch's
// packets interleave (a time budget): the lines are compared sorted.
func TestTrumpetInEBPFEqualGo(t *testing.T) {
	needRoot(t)
	c, _ := functions.Default.Lookup("trumpet")
	const epoch = int64(10 * time.Millisecond)
	frames, ts := trumpetTrace(20000, epoch, 25)
	params := trumpetParams(t, c, "10ms", 16384,
		"heavy: *; sum(volume) > 600; 5-tuple; 10ms",
		"avg: proto=udp; avg(volume) > 500; srcip/16; 20ms",
		"sd: *; stddev(volume) > 200 or min(volume) == 0 or max(volume) > 1400; proto; 10ms",
		"ttl: *; max(ttl) > 100 and min(ttl) < 120 or stddev(ttl) > 30 or avg(ttl) < 50; dstip/24,proto; 10ms",
		"ecn: *; sum(ecn) >= 1 or avg(ecn) > 0.5 or max(ecn) == 1; srcip/8; 30ms",
		"count: proto=tcp; count() > 2; 5-tuple; 10ms",
		"v6: dstip=2001::/16; sum(volume) + count() > 0; srcip/48,dstport; 50ms",
	)
	ctx := &functions.Context{ID: "trumpet", Params: params, LinkType: functions.LinkEthernet, Snaplen: 262144}
	_, want, _ := windowedGo(t, c, ctx, frames, ts)
	xctx := *ctx
	xctx.Target = functions.TargetXDP
	gofn, err := c.New(&xctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	gofn.(functions.Producer).SetEmit(collect(&got))
	last := ts[len(ts)-1]
	slots := drained(t, c, &xctx, gofn, frames, ts, last)
	gofn.(functions.Flusher).Flush(last)
	per := map[string]int{}
	for _, l := range want {
		per[strings.Split(strings.Split(l, `"event":"`)[1], `"`)[0]]++
	}
	t.Logf("%d reports from Go: %v; eBPF state %v", len(want), per, slots)
	if len(per) < 7 {
		t.Errorf("only events %v report: the test would not see the others wrong", per)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		n := 0
		for i := range max(len(got), len(want)) {
			var g, w string
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				if n++; n <= 5 {
					t.Errorf("record %d:\n eBPF %s\n Go   %s", i, g, w)
				}
			}
		}
		t.Errorf("%d records from eBPF, %d from Go, %d differ", len(got), len(want), n)
	}
}

// trumpetRig is trumpet's program on its own (as drained builds it), for
// benchmarks.
type trumpetRig struct {
	prog     *ebpf.Program
	hs       *halfState
	clock    *ebpf.Map
	closeAll func()
}

func newTrumpetRig(b *testing.B, gofn functions.Function, flows int, testClock bool, events ...string) *trumpetRig {
	c, _ := functions.Default.Lookup("trumpet")
	ctx := &functions.Context{ID: "trumpet", Params: trumpetParams(b, c, "10ms", flows, events...), LinkType: functions.LinkEthernet,
		Snaplen: 262144, Target: functions.TargetXDP}
	if gofn == nil {
		var err error
		if gofn, err = c.New(ctx); err != nil {
			b.Fatal(err)
		}
	}
	fn, err := c.EBPF(functions.TargetXDP, ctx)
	if err != nil {
		b.Fatal(err)
	}
	node := &flowspaces.Node{ID: c.Name, Class: c, Ctx: *ctx}
	win, err := windowOf(node, fn)
	if err != nil {
		b.Fatal(err)
	}
	counters, _ := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(2 + win.need(fn.StateSlots()))})
	clock, off, _ := newClockMap()
	p := &progSpec{kind: flowspaces.KindXDP, iface: "t", counters: counters, snap: ringbuf.Snap, progName: "ffpf_test", clock: clock, testClock: testClock,
		nodes: []progNode{{iface: "t", in: true, slot: 0}, {node: node, fn: fn, inputs: []int{0}, slot: 2, win: win}}}
	prog, err := p.load("bench")
	if err != nil {
		b.Fatal(err)
	}
	hs := &halfState{counters: counters, slot: 2, slots: fn.StateSlots(), win: win, gofn: gofn}
	now := monotonic() + off
	if testClock {
		now = int64(1_700_000_000_000_000_000)
	}
	if err := hs.start(now); err != nil {
		b.Fatal(err)
	}
	return &trumpetRig{prog: prog, hs: hs, clock: clock, closeAll: func() { prog.Close(); clock.Close(); counters.Close(); win.close() }}
}

// BenchmarkTrumpetCost is trumpet's program's time per packet
// (BPF_PROG_TEST_RUN, repeated on one frame: a flow already in the map of
// its epoch); BenchmarkWindowCost's counter with key=5tuple is the cost
// of the same key and a table, for comparison.
func BenchmarkTrumpetCost(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("loading eBPF programs needs root")
	}
	frame := cat(ethHdr(0x0800), ipv4Hdr(0, 64, 6, 5, 60, 0, 1, 1), tcpHdr(1000, 80, 5), make([]byte, 20))
	b.Run("trumpet", func(b *testing.B) {
		r := newTrumpetRig(b, nil, 16384, false, "heavy: dstip=10.0.0.0/8; sum(volume) > 125KB; 5-tuple; 10ms")
		defer r.closeAll()
		b.ResetTimer()
		_, d, err := r.prog.Benchmark(frame, b.N, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(d.Nanoseconds()), "ns/pkt")
	})
}

// BenchmarkTrumpetDrain is the Go half's work at an epoch's end with
// 16,384 flows in the epoch's flow map: the map read and emptied (all
// CPUs' values: us/read), then the summaries decoded, fed to the monitor
// and the epoch swept (us/go); us/drain is the two.
func BenchmarkTrumpetDrain(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("loading eBPF programs needs root")
	}
	const flows = 16384
	const epoch = int64(10 * time.Millisecond)
	var frames [][]byte
	for i := range flows {
		ip := ipv4Hdr(0, 64, 17, 5, 20+8+100, 0, byte(i), byte(i>>8))
		frames = append(frames, cat(ethHdr(0x0800), ip, udpHdr(uint16(i>>16), 53, 108), make([]byte, 100)))
	}
	c, _ := functions.Default.Lookup("trumpet")
	ctx := &functions.Context{ID: "trumpet", Params: trumpetParams(b, c, "10ms", flows, "heavy: dstip=10.0.0.0/8; sum(volume) > 125KB; 5-tuple; 10ms"),
		LinkType: functions.LinkEthernet, Snaplen: 262144, Target: functions.TargetXDP}
	gofn, err := c.New(ctx)
	if err != nil {
		b.Fatal(err)
	}
	d := &timedDrain{d: gofn.(functions.Drainer)}
	r := newTrumpetRig(b, d, flows, true, "heavy: dstip=10.0.0.0/8; sum(volume) > 125KB; 5-tuple; 10ms")
	defer r.closeAll()
	var work time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		e := r.hs.win.open
		if err := r.clock.Update(uint32(clockFixed), uint64(e*epoch+epoch/2), ebpf.UpdateAny); err != nil {
			b.Fatal(err)
		}
		for _, f := range frames {
			if _, err := r.prog.Run(&ebpf.RunOptions{Data: f}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		t0 := time.Now()
		if err := r.hs.advance((e + 1) * epoch); err != nil {
			b.Fatal(err)
		}
		work += time.Since(t0)
		if d.n != flows {
			b.Fatalf("drained %d flows, want %d", d.n, flows)
		}
	}
	b.ReportMetric(float64(r.hs.win.cpus), "cpus")
	b.ReportMetric(float64(work.Microseconds())/float64(b.N), "us/drain")
	b.ReportMetric(float64((work-d.work).Microseconds())/float64(b.N), "us/read")
	b.ReportMetric(float64(d.work.Microseconds())/float64(b.N), "us/go")
}

// timedDrain times a Go half's drains.
type timedDrain struct {
	d    functions.Drainer
	n    int
	work time.Duration
}

func (d *timedDrain) Process(*buffers.Batch) {}
func (d *timedDrain) Drain(e int64, keys, values []byte, n, cpus int) {
	t0 := time.Now()
	d.d.Drain(e, keys, values, n, cpus)
	d.work += time.Since(t0)
	d.n = n
}
