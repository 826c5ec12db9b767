package kernel

import (
	"fmt"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
	fbpf "github.com/ffpf-go/ffpf/functions/bpf"
	_ "github.com/ffpf-go/ffpf/functions/counters"
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
		fn, err := bpfClass.EBPF(ctx)
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
		p := &progSpec{kind: flowspaces.KindXDP, iface: "t", counters: m, dropSlot: 7, snap: bridgeSnap,
			nodes: []progNode{{iface: "t", slot: 0}, {node: &flowspaces.Node{ID: "bpf"}, fn: fn, inputs: []int{0}, slot: 2}}}
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
