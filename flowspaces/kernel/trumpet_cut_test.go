package kernel

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// moreTrumpetFrames are header chains trumpetFrames leaves out: AH (not
// walked: it is the protocol, as in Parse), destination options after a
// first fragment, a routing header whose length runs past the datagram,
// IPv4 options with a fragment, a jumbogram with extension headers.
func moreTrumpetFrames() [][]byte {
	ext := func(nh byte, units int) []byte {
		b := make([]byte, 8*(units+1))
		b[0], b[1] = nh, byte(units)
		return b
	}
	frag6 := func(nh byte, off uint16) []byte {
		b := make([]byte, 8)
		b[0] = nh
		binary.BigEndian.PutUint16(b[2:], off<<3|1)
		return b
	}
	v6 := func(plen int, nh byte, rest []byte) []byte {
		return cat(ethHdr(0x86dd), ipv6Hdr(3, 64, nh, plen, 1), rest)
	}
	rest := cat(ext(44, 0), frag6(60, 0), ext(6, 1), tcpHdr(1, 2, 6), make([]byte, 30))
	return [][]byte{
		v6(len(rest), 0, rest),
		v6(0, 0, rest), // jumbogram
		v6(40, 43, cat(ext(6, 20), tcpHdr(1, 2, 5), make([]byte, 30))),
		v6(80, 51, cat(ext(6, 2), tcpHdr(1, 2, 5), make([]byte, 30))), // AH
		cat(ethHdr(0x8100, 0x88a8, 0x86dd), ipv6Hdr(0, 9, 60, 64, 2), ext(17, 0), udpHdr(1, 2, 56), make([]byte, 48)),
		cat(ethHdr(0x0800), ipv4Hdr(3, 30, 17, 6, 60, 0x2000, 3, 4), udpHdr(5, 6, 36), make([]byte, 28)),
		cat(ethHdr(0x0800), ipv4Hdr(1, 31, 6, 5, 45, 0, 3, 4), tcpHdr(5, 6, 6), make([]byte, 40)),
	}
}

// TestTrumpetCutFramesEqualGo: every adversarial frame cut short at every
// byte, and with each of its header bytes flipped, gives in trumpet's eBPF
// code the flow and summary monitor.Parse gives (or is counted without a
// key as Parse refuses it). Each frame is alone in its epoch, so that a
// wrong summary names its frame.
func TestTrumpetCutFramesEqualGo(t *testing.T) {
	needRoot(t)
	c, _ := functions.Default.Lookup("trumpet")
	var frames [][]byte
	for _, f := range append(trumpetFrames(), moreTrumpetFrames()...) {
		for n := 14; n <= len(f); n++ { // BPF_PROG_TEST_RUN takes whole Ethernet headers
			frames = append(frames, f[:n:n])
		}
		for i := range min(len(f), 120) {
			for _, x := range []byte{0xff, 0x0f, 0x80} {
				g := append([]byte(nil), f...)
				g[i] ^= x
				frames = append(frames, g)
			}
		}
	}
	const epoch = int64(10 * time.Millisecond)
	base := int64(1_700_000_000_000_000_000) / epoch * epoch
	ts := make([]int64, len(frames))
	for i := range ts {
		ts[i] = base + int64(i)*epoch + epoch/2
	}
	want, nokey := goSummaries(frames, ts, epoch)
	ctx := &functions.Context{ID: "trumpet", Params: trumpetParams(t, c, "10ms", 64, "a: *; count() > 0; 5-tuple; 10ms"),
		LinkType: functions.LinkEthernet, Snaplen: 262144, Target: functions.TargetXDP}
	rec := &drainRec{got: map[int64][]flowSum{}}
	slots := drained(t, c, ctx, rec, frames, ts, ts[len(ts)-1]+epoch)
	if slots[0] != uint64(len(frames)) || slots[1] != nokey || slots[2] != 0 || slots[3] != 0 {
		t.Errorf("packets %d nokey %d mapfull %d late %d; Go: %d, %d, 0, 0", slots[0], slots[1], slots[2], slots[3], len(frames), nokey)
	}
	bad := 0
	for i, f := range frames {
		e := ts[i] / epoch
		w, g := want[e], rec.got[e]
		if len(w) != len(g) || len(w) == 1 && (w[0].key != g[0].key || w[0].sum != g[0].sum) {
			if bad++; bad <= 10 {
				t.Errorf("frame %d (%d bytes) % x:\n eBPF %+v\n Go   %+v", i, len(f), f[:min(len(f), 90)], g, w)
			}
		}
	}
	t.Logf("%d frames, %d without a key, %d differ", len(frames), nokey, bad)
}

// TestTrumpetDrainStall: when the Go half stalls for several epochs (from
// the start of epoch 8 to the end of 12), the epochs whose maps were
// ready (7 and 8) are drained whole when it comes back, the
// packets of the epochs after them (their maps not ready) are counted as
// late, none is summarised, and none is mixed into another epoch; then
// the epochs go on as before.
func TestTrumpetDrainStall(t *testing.T) {
	needRoot(t)
	c, _ := functions.Default.Lookup("trumpet")
	const epoch = int64(10 * time.Millisecond)
	frames, ts := trumpetTrace(6000, epoch, 25)
	base := ts[0] / epoch
	stalled := func(i int) bool { e := ts[i]/epoch - base; return e >= 8 && e <= 12 }
	var kept [][]byte
	var keptTS []int64
	lost := uint64(0)
	for i := range frames {
		if e := ts[i]/epoch - base; e >= 9 && e <= 12 {
			lost++ // the maps of 9 to 12 are not ready: 7 and 8 not drained
			continue
		}
		kept, keptTS = append(kept, frames[i]), append(keptTS, ts[i])
	}
	want, nokey := goSummaries(kept, keptTS, epoch)
	ctx := &functions.Context{ID: "trumpet", Params: trumpetParams(t, c, "10ms", 16384, "a: *; count() > 0; 5-tuple; 10ms"),
		LinkType: functions.LinkEthernet, Snaplen: 262144, Target: functions.TargetXDP}
	rec := &drainRec{got: map[int64][]flowSum{}}
	slots := drained(t, c, ctx, rec, frames, ts, ts[len(ts)-1]+epoch, drainOpts{stall: stalled})
	if lost == 0 || slots[0] != uint64(len(kept)) || slots[1] != nokey || slots[2] != 0 || slots[3] != lost {
		t.Errorf("packets %d nokey %d mapfull %d late %d; want %d, %d, 0, %d", slots[0], slots[1], slots[2], slots[3], len(kept), nokey, lost)
	}
	for e := base; e <= ts[len(ts)-1]/epoch; e++ {
		g, w := rec.got[e], want[e]
		if len(g) != len(w) {
			t.Errorf("epoch %d: %d flows drained, want %d", e-base, len(g), len(w))
			continue
		}
		for j := range g {
			if g[j] != w[j] {
				t.Errorf("epoch %d flow %d: %+v, want %+v", e-base, j, g[j], w[j])
				break
			}
		}
	}
}

// TestTrumpetEpochEdges: packets 1 ns before, at and 1 ns after epochs'
// ends go to the epoch Go gives them (an end belongs to the next epoch),
// in the summaries and in the reports, over one and several epochs; and
// so they do with idle epochs between (stride: one epoch in 2 or 5 has
// packets), drained empty in eBPF and passed over by the packet clock in
// userspace.
func TestTrumpetEpochEdges(t *testing.T) {
	for _, stride := range []int64{1, 2, 5} {
		t.Run(fmt.Sprintf("stride=%d", stride), func(t *testing.T) { epochEdges(t, stride) })
	}
}

func epochEdges(t *testing.T, stride int64) {
	needRoot(t)
	c, _ := functions.Default.Lookup("trumpet")
	const epoch = int64(10 * time.Millisecond)
	frames, _ := trumpetTrace(3000, epoch, 1)
	base := int64(1_700_000_000_000_000_000)/epoch*epoch + epoch
	ts := make([]int64, len(frames))
	for i := range ts {
		ts[i] = base + int64(i/3)*stride*epoch + int64(i%3) - 1
	}
	want, nokey := goSummaries(frames, ts, epoch)
	params := trumpetParams(t, c, "10ms", 16384, "a: *; count() > 0; 5-tuple; 10ms", "b: *; sum(volume) >= 0; proto; 30ms",
		"c: *; max(ttl) > 0; dstip/24; 20ms")
	ctx := &functions.Context{ID: "trumpet", Params: params, LinkType: functions.LinkEthernet, Snaplen: 262144, Target: functions.TargetXDP}
	rec := &drainRec{got: map[int64][]flowSum{}}
	slots := drained(t, c, ctx, rec, frames, ts, ts[len(ts)-1]+epoch)
	if slots[0] != uint64(len(frames)) || slots[1] != nokey || slots[3] != 0 {
		t.Errorf("packets %d nokey %d late %d; want %d, %d, 0", slots[0], slots[1], slots[3], len(frames), nokey)
	}
	for e, w := range want {
		if g := rec.got[e]; !slices.Equal(g, w) {
			t.Errorf("epoch %d: %d flows, want %d", e-base/epoch, len(g), len(w))
		}
	}
	uctx := *ctx
	uctx.Target = ""
	_, wantRecs, _ := windowedGo(t, c, &uctx, frames, ts)
	gofn, err := c.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	gofn.(functions.Producer).SetEmit(collect(&got))
	last := ts[len(ts)-1]
	drained(t, c, ctx, gofn, frames, ts, last)
	gofn.(functions.Flusher).Flush(last)
	slices.Sort(got)
	slices.Sort(wantRecs)
	if len(wantRecs) == 0 || !slices.Equal(got, wantRecs) {
		t.Errorf("%d records from eBPF, %d from Go", len(got), len(wantRecs))
	}
}

// TestTrumpetHandlersDuringDrains: handlers (add, list, remove) run on
// trumpet's Go half in eBPF under the flowspace's Lock while its epochs
// are drained, and its counters synced into its MBuf and read, in other
// goroutines (run with -race: nothing is shared outside the lock); the
// event installed from the start reports exactly what it reports in
// userspace, undisturbed by the events that come and go.
func TestTrumpetHandlersDuringDrains(t *testing.T) {
	needRoot(t)
	c, _ := functions.Default.Lookup("trumpet")
	const epoch = int64(10 * time.Millisecond)
	frames, ts := trumpetTrace(20000, epoch, 25)
	params := trumpetParams(t, c, "10ms", 16384, "heavy: *; sum(volume) > 600; 5-tuple; 10ms")
	uctx := &functions.Context{ID: "trumpet", Params: params, LinkType: functions.LinkEthernet, Snaplen: 262144}
	_, want, _ := windowedGo(t, c, uctx, frames, ts)
	ctx := *uctx
	ctx.Target = functions.TargetXDP
	gofn, err := c.New(&ctx)
	if err != nil {
		t.Fatal(err)
	}
	var recs []string
	gofn.(functions.Producer).SetEmit(collect(&recs))
	n := &flowspaces.Node{ID: "trumpet"}
	k := &node{Node: n, gofn: gofn}
	k.started.Store(true)
	fs := &Flowspace{nodes: []*node{k}}
	hs := gofn.(functions.Handlers).Handlers()
	call := func(name, arg string) error {
		defer fs.Lock(n)()
		for _, h := range hs {
			if h.Name == name {
				_, err := h.Call(arg)
				return err
			}
		}
		return fmt.Errorf("no handler %s", name)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	calls := 0
	stop := func() {
		close(done)
		wg.Wait()
	}
	opts := drainOpts{mu: &k.goMu, sync: func(load func() bool) func() {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				load()
				gofn.(functions.Summarizer).Summary()
				time.Sleep(100 * time.Microsecond)
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				name := fmt.Sprintf("x%d", i)
				if err := call("add", name+": proto=udp; count() > 1; srcip/24; 20ms"); err != nil {
					t.Error(err)
					return
				}
				if err := call("list", ""); err != nil {
					t.Error(err)
				}
				if err := call("remove", name); err != nil {
					t.Error(err)
					return
				}
				calls++
				time.Sleep(100 * time.Microsecond)
			}
		}()
		return stop
	}}
	last := ts[len(ts)-1]
	drained(t, c, &ctx, gofn, frames, ts, last, opts)
	defer fs.Lock(n)()
	gofn.(functions.Flusher).Flush(last)
	var got []string
	for _, r := range recs {
		if strings.Contains(r, `"event":"heavy"`) {
			got = append(got, r)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("heavy: %d records in eBPF with handlers running, %d in userspace", len(got), len(want))
	}
	t.Logf("%d handler rounds during the drains; %d records of heavy", calls, len(got))
}
