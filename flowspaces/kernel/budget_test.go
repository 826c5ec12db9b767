package kernel

import (
	"encoding/binary"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	cring "github.com/cilium/ebpf/ringbuf"

	"github.com/ffpf-go/ffpf/bridges/afxdp"
	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// TestBudgetTakesExactly: with a packet limit, the program of an XDP or tc
// hook counts exactly the packets the limit allows, takes them from the
// run's budget (which the process reads as spent), and lets every packet
// on, counted or not: counted at capture (--capture-count), or at the ends
// of the graph (-c) where the hook alone is the end.
func TestBudgetTakesExactly(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("loading eBPF programs needs root")
		}
		t.Skip("loading eBPF programs needs root")
	}
	pkt := make([]byte, 60)
	pkt[12], pkt[13] = 0x08, 0x00
	for i, kind := range []flowspaces.Kind{flowspaces.KindXDP, flowspaces.KindKernel, flowspaces.KindXDP, flowspaces.KindKernel} {
		counting := flowspaces.Counting(i / 2)
		b := flowspaces.NewBudget(5, counting)
		bm, m := budgetRig(t, kind, b)
		p := &progSpec{kind: kind, iface: "t", counters: m, snap: ringbuf.Snap, progName: "ffpf_test", budget: bm,
			nodes: []progNode{{iface: "t", slot: 0, in: true}}, atEnds: counting == flowspaces.AtEnds}
		p.ends = p.endsOf()
		prog, err := p.load("test")
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		pass := uint32(xdpPass)
		if kind != flowspaces.KindXDP {
			pass = ^uint32(0) // TCX_NEXT
		}
		for i := range 8 {
			if b.Spent() != (i >= 5) {
				t.Errorf("%s: after %d packets the budget says spent=%v", kind, i, b.Spent())
			}
			ret, err := prog.Run(&ebpf.RunOptions{Data: pkt})
			if err != nil || ret != pass {
				t.Fatalf("%s: packet %d: verdict %d, %v", kind, i, ret, err)
			}
		}
		var per []uint64
		if err := m.Lookup(uint32(0), &per); err != nil {
			t.Fatal(err)
		}
		var in uint64
		for _, v := range per {
			in += v
		}
		if in != 5 || !b.Spent() {
			t.Errorf("%s: the hook counted %d packets of 8 with a limit of 5 (spent: %v)", kind, in, b.Spent())
		}
		prog.Close()
		m.Close()
	}
}

// budgetRig returns the map of budget b, shared as a flowspace of kind
// shares it with its programs, and a counter map.
func budgetRig(t *testing.T, kind flowspaces.Kind, b *flowspaces.Budget) (budget, counters *ebpf.Map) {
	t.Helper()
	fs, err := New(Options{Kind: kind, Interface: "t"})
	if err != nil {
		t.Fatal(err)
	}
	fs.SetBudget(b)
	if budget, err = fs.budgetMap(); err != nil {
		t.Fatal(err)
	}
	if counters, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 8}); err != nil {
		t.Fatal(err)
	}
	return budget, counters
}

// TestBudgetCountsAtTheEnds: counting at the ends of the graph (-c), a
// packet holds its unit while the program runs and spends it only where
// it passes an end (a filter for UDP): the TCP packets between give theirs
// back, and the filter sees none past the limit's last. A packet that goes
// up keeps its unit for the flowspace above, unless it reached an end
// here too: then it spends it, and its record says so (inproc.EndedBit).
func TestBudgetCountsAtTheEnds(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("loading eBPF programs needs root")
		}
		t.Skip("loading eBPF programs needs root")
	}
	bpfClass, _ := functions.Default.Lookup("bpf")
	params, err := bpfClass.Bind([]functions.Arg{{Value: functions.Raw{Kind: functions.RawString, Text: "udp"}}})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := bpfClass.EBPF(functions.TargetXDP, &functions.Context{Params: params, LinkType: functions.LinkEthernet, Snaplen: 262144})
	if err != nil {
		t.Fatal(err)
	}
	frame := func(proto byte) []byte {
		f := make([]byte, 60)
		f[12], f[13] = 0x08, 0x00
		f[14], f[14+9] = 0x45, proto
		return f
	}
	udp, tcp := frame(17), frame(6)
	sum := func(m *ebpf.Map, slot uint32) uint64 {
		var per []uint64
		if err := m.Lookup(slot, &per); err != nil {
			t.Fatal(err)
		}
		var s uint64
		for _, v := range per {
			s += v
		}
		return s
	}
	for _, up := range []bool{false, true} {
		b := flowspaces.NewBudget(5, flowspaces.AtEnds)
		bm, m := budgetRig(t, flowspaces.KindXDP, b)
		ring, err := ringbuf.NewMap()
		if err != nil {
			t.Fatal(err)
		}
		p := &progSpec{kind: flowspaces.KindXDP, iface: "t", counters: m, snap: ringbuf.Snap, progName: "ffpf_test", budget: bm,
			nodes:  []progNode{{iface: "t", slot: 0, in: true}, {node: &flowspaces.Node{ID: "bpf"}, fn: fn, inputs: []int{0}, slot: 2}},
			atEnds: true, ring: ring}
		if up {
			p.exports = []int{0} // every packet the hook captures goes up
		}
		p.ends = p.endsOf()
		prog, err := p.load("test")
		if err != nil {
			t.Fatalf("up=%v: %v", up, err)
		}
		run := func(n int) {
			for i := range n {
				pkt := udp
				if i%2 == 1 {
					pkt = tcp
				}
				if ret, err := prog.Run(&ebpf.RunOptions{Data: pkt}); err != nil || ret != xdpPass {
					t.Fatalf("up=%v: verdict %d, %v", up, ret, err)
				}
			}
		}
		run(20)
		if !up {
			// U T U T U T U T U: the fifth UDP packet is the ninth.
			if in, out := sum(m, 2), sum(m, 3); in != 9 || out != 5 || sum(m, 0) != 9 || !b.Spent() || b.Counted() != 5 {
				t.Errorf("the filter saw %d packets and kept %d, the hook took %d; the budget counted %d (spent: %v); want 9, 5, 9, 5",
					in, out, sum(m, 0), b.Counted(), b.Spent())
			}
		} else {
			// U T U T U: three UDP packets spent their units at the
			// filter; the two TCP ones went up holding theirs, and the
			// packets after them found none.
			if in := sum(m, 0); in != 5 || b.Counted() != 3 || b.Spent() {
				t.Errorf("the hook took %d packets, the budget counted %d (spent: %v); want 5, 3, not spent", in, b.Counted(), b.Spent())
			}
			rd, err := cring.NewReader(ring)
			if err != nil {
				t.Fatal(err)
			}
			var masks []uint64
			for range 5 {
				rd.SetDeadline(time.Now().Add(time.Second))
				rec, err := rd.Read()
				if err != nil {
					t.Fatalf("record %d: %v", len(masks), err)
				}
				masks = append(masks, binary.NativeEndian.Uint64(rec.RawSample[ringbuf.OffMask:]))
			}
			rd.Close()
			want := []uint64{1 | inproc.EndedBit, 1, 1 | inproc.EndedBit, 1, 1 | inproc.EndedBit}
			if !slices.Equal(masks, want) {
				t.Errorf("the records' masks are %#x, want %#x", masks, want)
			}
			// The flowspace above filtered both: their units come back,
			// for a UDP packet and a TCP one that goes up, then for it.
			b.Return(2)
			run(2)
			if b.Counted() != 4 || b.Spent() {
				t.Errorf("after two units came back, the budget counted %d (spent: %v), want 4", b.Counted(), b.Spent())
			}
			b.Return(1)
			run(1)
			if b.Counted() != 5 || !b.Spent() {
				t.Errorf("after the last unit came back, the budget counted %d (spent: %v), want 5", b.Counted(), b.Spent())
			}
		}
		prog.Close()
		m.Close()
		ring.Close()
	}
}

// TestOneCaptureOfAnInterfaceWithALimit: counting at the ends (-c), a
// program takes one unit per packet for one capture's stream, so a second
// capture of the interface is refused here (placement puts it at the next
// hook); counting at capture, both run here.
func TestOneCaptureOfAnInterfaceWithALimit(t *testing.T) {
	devClass, _ := functions.Default.Lookup("dev")
	capture := func(snap string) *flowspaces.Node {
		p, err := devClass.Bind([]functions.Arg{{Value: functions.Raw{Kind: functions.RawWord, Text: "lo"}},
			{Key: "snaplen", Value: functions.Raw{Kind: functions.RawNumber, Text: snap}}})
		if err != nil {
			t.Fatal(err)
		}
		return &flowspaces.Node{ID: "dev#" + snap, Class: devClass, Ctx: functions.Context{Params: p}}
	}
	for _, c := range []flowspaces.Counting{flowspaces.AtEnds, flowspaces.AtCapture} {
		fs, err := New(Options{Kind: flowspaces.KindKernel})
		if err != nil {
			t.Fatal(err)
		}
		fs.SetBudget(flowspaces.NewBudget(10, c))
		a, b := capture("100"), capture("200")
		if err := fs.Host(a); err != nil {
			t.Fatal(err)
		}
		a.Flowspace = fs
		err = fs.Host(b)
		if c == flowspaces.AtEnds && (err == nil || !strings.Contains(err.Error(), "with -c a program counts one capture of an interface")) {
			t.Errorf("-c: a second capture of lo: %v", err)
		}
		if c == flowspaces.AtCapture && err != nil {
			t.Errorf("--capture-count: a second capture of lo: %v", err)
		}
	}
}

// TestBudgetProgramsLoad: the verifier takes the programs of every way a
// packet can go with a packet limit: counted at the ends or at capture,
// at XDP or tc, going up through the ring buffer (its clock-only records
// too) or through AF_XDP, reaching an end here or not.
func TestBudgetProgramsLoad(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("loading eBPF programs needs root")
		}
		t.Skip("loading eBPF programs needs root")
	}
	bpfClass, _ := functions.Default.Lookup("bpf")
	params, err := bpfClass.Bind([]functions.Arg{{Value: functions.Raw{Kind: functions.RawString, Text: "udp"}}})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := bpfClass.EBPF(functions.TargetXDP, &functions.Context{Params: params, LinkType: functions.LinkEthernet, Snaplen: 262144})
	if err != nil {
		t.Fatal(err)
	}
	ring, err := ringbuf.NewMap()
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	xsks, err := afxdp.NewMap()
	if err != nil {
		t.Fatal(err)
	}
	defer xsks.Close()
	sent, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sent.Close()
	for _, kind := range []flowspaces.Kind{flowspaces.KindXDP, flowspaces.KindKernel} {
		for _, counting := range []flowspaces.Counting{flowspaces.AtEnds, flowspaces.AtCapture} {
			for _, steal := range []bool{false, true} {
				for _, exports := range [][]int{nil, {1}, {0}} {
					if steal && (kind != flowspaces.KindXDP || exports == nil) {
						continue
					}
					bm, m := budgetRig(t, kind, flowspaces.NewBudget(5, counting))
					p := &progSpec{kind: kind, iface: "t", counters: m, snap: ringbuf.Snap, progName: "ffpf_test", budget: bm,
						nodes:  []progNode{{iface: "t", slot: 0, in: true}, {node: &flowspaces.Node{ID: "bpf"}, fn: fn, inputs: []int{0}, slot: 2}},
						atEnds: counting == flowspaces.AtEnds, ring: ring, sent: sent, exports: exports,
						hooks: []hookSlots{{slot: 0, mask: 1}}}
					if steal {
						p.xsk = xsks
					}
					p.ends = p.endsOf()
					prog, err := p.load("test")
					if err != nil {
						t.Errorf("%s, counting %d, steal %v, exports %v: %v", kind, counting, steal, exports, err)
						continue
					}
					prog.Close()
					m.Close()
				}
			}
		}
	}
}
