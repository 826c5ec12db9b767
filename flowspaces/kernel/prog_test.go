package kernel

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
	fbpf "github.com/ffpf-go/ffpf/functions/bpf"
	_ "github.com/ffpf-go/ffpf/functions/counters"
	_ "github.com/ffpf-go/ffpf/functions/dev"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// TestGeneratedFiltersMatchTheEngine runs generated XDP programs on
// generated traffic (5% malformed, 20% VLAN) through the kernel's
// BPF_PROG_TEST_RUN and compares each verdict with ffpf's own cBPF engine,
// which the bpf package checks against libpcap. No interface is needed.
func TestGeneratedFiltersMatchTheEngine(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("loading eBPF programs needs root")
		}
		t.Skip("loading eBPF programs needs root")
	}
	exprs := []string{
		"tcp and dst port 80", "udp", "vlan and udp", "ip6 and tcp", "icmp or arp",
		"less 100", "greater 1000", "tcp[tcpflags] & tcp-syn != 0", "ip[6:2] & 0x1fff != 0",
		"ether[100] = 0", "udp[8:4] = 0", "not ip and not ip6", "portrange 1000-2000", "vlan 100",
	}
	bpfClass, _ := functions.Default.Lookup("bpf")
	g := gen.New(gen.Config{Seed: 5, Packets: 20000, Malformed: 0.05, VLAN: 0.2})
	var pkts [][]byte
	buf := make([]byte, gen.MaxFrameLen)
	for {
		c, _, _, ok := g.Next(buf)
		if !ok {
			break
		}
		if c >= 14 { // XDP test runs need an Ethernet header
			pkts = append(pkts, append([]byte(nil), buf[:c]...))
		}
	}
	for _, expr := range exprs {
		params, err := bpfClass.Bind([]functions.Arg{{Value: functions.Raw{Kind: functions.RawString, Text: expr}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := &functions.Context{Params: params, LinkType: functions.LinkEthernet, Snaplen: 262144}
		fn, err := bpfClass.EBPF(functions.TargetKernel, ctx)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		eng, err := fbpf.CompileAndLoad(expr, functions.LinkEthernet, 262144)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		p := &progSpec{kind: flowspaces.KindXDP, iface: "t", counters: m, snap: ringbuf.Snap, progName: "ffpf_test",
			nodes: []progNode{{iface: "t", in: true, slot: 0}, {node: &flowspaces.Node{ID: "bpf"}, fn: fn, inputs: []int{0}, slot: 2}}}
		prog, err := p.load("test")
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		out := func() uint64 {
			var per []uint64
			m.Lookup(uint32(3), &per)
			var s uint64
			for _, v := range per {
				s += v
			}
			return s
		}
		before, differ := out(), 0
		for i, pkt := range pkts {
			ret, err := prog.Run(&ebpf.RunOptions{Data: pkt})
			if err != nil || ret != 2 {
				t.Fatalf("%s: packet %d: verdict %d, %v", expr, i, ret, err)
			}
			now := out()
			got, want := now > before, eng.Run(pkt, uint32(len(pkt))) != 0
			before = now
			if got != want && differ < 3 {
				differ++
				t.Errorf("%s: packet %d (%d bytes): eBPF %v, engine %v", expr, i, len(pkt), got, want)
			}
		}
		prog.Close()
	}
}

// TestCounterSlotsAreReused: the counter slots of removed functions serve
// again, zeroed, so that requests can come and go without end.
func TestCounterSlotsAreReused(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("loading eBPF programs needs root")
		}
		t.Skip("loading eBPF programs needs root")
	}
	fs, err := New(Options{Kind: flowspaces.KindXDP, Interface: "lo"})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	fs.progName = "ffpf_test" // not counted by the end-to-end tests running beside
	count, _ := functions.Default.Lookup("pktcount")
	mk := func(id string) *flowspaces.Node {
		n := &flowspaces.Node{ID: id, Class: count, Ctx: functions.Context{Params: functions.Params{}}}
		n.Flowspace = fs
		return n
	}
	a := mk("a")
	if err := fs.Instantiate(a); err != nil {
		t.Fatal(err)
	}
	dirty := make([]uint64, ebpf.MustPossibleCPU())
	dirty[0] = 7
	fs.counters.Update(uint32(fs.nodes[0].slot), dirty, ebpf.UpdateAny) // a counted something
	used := fs.slots
	for i := range 3000 { // far more than the map holds without reuse
		fs.Remove(a)
		if err := fs.Connect(); err != nil {
			t.Fatal(err)
		}
		a = mk(fmt.Sprint("a", i))
		if err := fs.Instantiate(a); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	if fs.slots != used {
		t.Errorf("%d slots handed out, want %d", fs.slots, used)
	}
	var per []uint64
	fs.counters.Lookup(uint32(fs.nodes[0].slot), &per)
	for _, v := range per {
		if v != 0 {
			t.Fatalf("a reused slot starts at %v", per)
		}
	}
}

// TestDropVerdict: with drop=true on the capture, a packet that no end of
// the graph kept is dropped at the hook (XDP_DROP, TC_ACT_SHOT) and counted
// in the capture's state; kept packets go on. An observing capture on the
// same interface keeps every packet.
func TestDropVerdict(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("loading eBPF programs needs root")
		}
		t.Skip("loading eBPF programs needs root")
	}
	bind := func(class string, args ...functions.Arg) (*functions.Class, functions.Params) {
		c, ok := functions.Default.Lookup(class)
		if !ok {
			t.Fatalf("no class %s", class)
		}
		p, err := c.Bind(args)
		if err != nil {
			t.Fatal(err)
		}
		return c, p
	}
	word := func(k, v string) functions.Arg {
		return functions.Arg{Key: k, Value: functions.Raw{Kind: functions.RawWord, Text: v}}
	}
	str := func(v string) functions.Arg {
		return functions.Arg{Value: functions.Raw{Kind: functions.RawString, Text: v}}
	}
	filter := func(expr string) ebpfgen.Function {
		c, p := bind("bpf", str(expr))
		fn, err := c.EBPF(functions.TargetKernel, &functions.Context{Params: p, LinkType: functions.LinkEthernet, Snaplen: 262144})
		if err != nil {
			t.Fatal(err)
		}
		return fn
	}
	g := gen.New(gen.Config{Seed: 8, Packets: 5000, Malformed: 0.05, VLAN: 0.2})
	var pkts [][]byte
	buf := make([]byte, gen.MaxFrameLen)
	for {
		c, _, _, ok := g.Next(buf)
		if !ok {
			break
		}
		if c >= 14 {
			pkts = append(pkts, append([]byte(nil), buf[:c]...))
		}
	}
	udp, _ := fbpf.CompileAndLoad("udp", functions.LinkEthernet, 262144)
	arp, _ := fbpf.CompileAndLoad("arp", functions.LinkEthernet, 262144)
	for _, tc := range []struct {
		name       string
		kind       flowspaces.Kind
		drop       []string // drop= of each capture on the interface
		pass, shot int64
	}{
		{"xdp", flowspaces.KindXDP, []string{"true"}, 2, 1},
		{"tc", flowspaces.KindKernel, []string{"true"}, -1, 2},
		{"xdp overlay", flowspaces.KindXDP, []string{"true", "false"}, 2, 1},
		{"xdp observe", flowspaces.KindXDP, []string{"false"}, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 32})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			// [capture > [(bpf,"udp") > (pktcount) | (bpf,"arp")]], a
			// second capture for the overlay, and one on another interface.
			var nodes []*node
			var spec []progNode
			add := func(k *node, pn progNode) {
				k.slot, pn.slot = len(nodes)*4, len(nodes)*4
				nodes, spec = append(nodes, k), append(spec, pn)
			}
			for _, d := range tc.drop {
				c, p := bind("dev", word("expr", "t"), word("drop", d))
				add(&node{Node: &flowspaces.Node{ID: "dev", Class: c, Ctx: functions.Context{Params: p}}, iface: "t"},
					progNode{iface: "t", in: true})
			}
			c, p := bind("dev", word("expr", "u"))
			add(&node{Node: &flowspaces.Node{ID: "other", Class: c, Ctx: functions.Context{Params: p}}, iface: "u"},
				progNode{iface: "u", in: true})
			first := len(spec)
			add(&node{Node: &flowspaces.Node{ID: "udp"}}, progNode{node: &flowspaces.Node{ID: "udp"}, fn: filter("udp"), inputs: []int{0}})
			cnt, cp := bind("pktcount")
			cfn, _ := cnt.EBPF(functions.TargetKernel, &functions.Context{Params: cp})
			add(&node{Node: &flowspaces.Node{ID: "count"}}, progNode{node: &flowspaces.Node{ID: "count"}, fn: cfn, inputs: []int{first}})
			add(&node{Node: &flowspaces.Node{ID: "arp"}}, progNode{node: &flowspaces.Node{ID: "arp"}, fn: filter("arp"), inputs: []int{0}})
			ps := &progSpec{kind: tc.kind, iface: "t", counters: m, snap: ringbuf.Snap, nodes: spec, progName: "ffpf_test"}
			ps.verdicts(nodes)
			wantDrop := !slices.Contains(tc.drop, "false")
			if ps.drop != wantDrop {
				t.Fatalf("drop = %v, want %v", ps.drop, wantDrop)
			}
			prog, err := ps.load("test")
			if err != nil {
				t.Fatal(err)
			}
			defer prog.Close()
			var dropped, refused uint64
			for i, pkt := range pkts {
				ret, err := prog.Run(&ebpf.RunOptions{Data: pkt})
				if errors.Is(err, unix.EINVAL) && tc.kind == flowspaces.KindKernel {
					// The skb test run refuses some runts (nothing past
					// the link header); the e2e tests run them for real.
					refused++
					continue
				}
				if err != nil {
					t.Fatalf("packet %d (%d bytes): %v", i, len(pkt), err)
				}
				keep := !wantDrop || udp.Run(pkt, uint32(len(pkt))) != 0 || arp.Run(pkt, uint32(len(pkt))) != 0
				want := tc.pass
				if !keep {
					want = tc.shot
					dropped++
				}
				if int64(int32(ret)) != want {
					t.Fatalf("packet %d (%d bytes): verdict %d, want %d", i, len(pkt), int32(ret), want)
				}
			}
			sum := func(slot int) (s uint64) {
				var per []uint64
				if err := m.Lookup(uint32(slot), &per); err != nil {
					t.Fatal(err)
				}
				for _, v := range per {
					s += v
				}
				return s
			}
			for _, k := range nodes[:len(tc.drop)] {
				if got := sum(k.slot + slotDiscarded); got != dropped {
					t.Errorf("discarded = %d, want %d", got, dropped)
				}
			}
			if got := sum(nodes[len(tc.drop)].slot + slotDiscarded); got != 0 {
				t.Errorf("the capture on another interface counts %d discarded", got)
			}
			t.Logf("%d packets: %d dropped, %d refused by the test run", len(pkts), dropped, refused)
			if refused > uint64(len(pkts))/50 {
				t.Errorf("the test run refused %d of %d packets", refused, len(pkts))
			}
			if wantDrop && (dropped == 0 || dropped == uint64(len(pkts))) {
				t.Errorf("%d of %d dropped: the traffic does not test the verdict", dropped, len(pkts))
			}
		})
	}
}
