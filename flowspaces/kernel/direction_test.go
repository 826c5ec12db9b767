package kernel

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// TestDirectionOfEachHook runs the programs of an interface's two hooks
// (the ingress, XDP here, and tc egress) through BPF_PROG_TEST_RUN: a
// capture counts a packet at the hooks of its direction only, libpcap's
// inbound passes the packets of the ingress and outbound those of the
// egress, and drop=true never drops a sent packet.
func TestDirectionOfEachHook(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("loading eBPF programs needs root")
		}
		t.Skip("loading eBPF programs needs root")
	}
	bind := func(class string, args ...functions.Arg) (*functions.Class, functions.Params) {
		c, _ := functions.Default.Lookup(class)
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
	// An ICMP echo request, Ethernet and IPv4.
	pkt := []byte{
		0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00,
		0x45, 0, 0, 28, 0, 1, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
		8, 0, 0xf7, 0xfe, 0, 1, 0, 0,
	}
	for _, dir := range []string{"in", "out", "inout"} {
		t.Run(dir, func(t *testing.T) {
			m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 32})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			fs := &Flowspace{opts: Options{Kind: flowspaces.KindXDP, Interface: "t"}, counters: m, progName: "ffpf_test"}
			dc, dp := bind("dev", word("expr", "t"), word("drop", "true"), word("direction", dir))
			src := &node{Node: &flowspaces.Node{ID: "dev", Class: dc, Ctx: functions.Context{Params: dp,
				Captures: []functions.Capture{{Direction: dir}}}}, iface: "t", slot: 0}
			nodes := []*node{src}
			for i, expr := range []string{"inbound", "outbound", "udp"} {
				c, p := bind("bpf", str(expr))
				ctx := functions.Context{Params: p, LinkType: functions.LinkEthernet, Snaplen: 262144}
				fn, err := c.EBPF(functions.TargetXDP, &ctx)
				if err != nil {
					t.Fatal(err)
				}
				nodes = append(nodes, &node{Node: &flowspaces.Node{ID: expr, Class: c, Ctx: ctx, Inputs: []*flowspaces.Node{src.Node}},
					fn: fn, slot: 8 + 4*i})
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
			// With udp alone, which the packet fails, drop=true drops it
			// at the ingress and lets it go at the egress: a sent packet is
			// never dropped.
			progs := map[string]*ebpf.Program{}
			alone := []*node{src, nodes[3]}
			if err := fs.load(alone, "t", 0, progs); err != nil {
				t.Fatal(err)
			}
			for key, p := range progs {
				ret, err := p.Run(&ebpf.RunOptions{Data: pkt})
				p.Close()
				if err != nil {
					t.Fatal(err)
				}
				_, egress := splitHook(key)
				want := uint32(xdpDrop)
				if egress {
					want = 0xffffffff
				}
				if ret != want {
					t.Errorf("udp alone, %s: verdict %d, want %d", key, int32(ret), int32(want))
				}
			}
			for slot := range 32 {
				if err := m.Put(uint32(slot), make([]uint64, ebpf.MustPossibleCPU())); err != nil {
					t.Fatal(err)
				}
			}

			clear(progs)
			if err := fs.load(nodes, "t", 0, progs); err != nil {
				t.Fatal(err)
			}
			in, out := dir != "out", dir != "in"
			if (progs["t"] != nil) != in || (progs["t"+egressSuffix] != nil) != out {
				t.Fatalf("programs for %v", progs)
			}
			for key, p := range progs {
				ret, err := p.Run(&ebpf.RunOptions{Data: pkt})
				p.Close()
				if err != nil {
					t.Fatal(err)
				}
				// At the ingress inbound keeps the packet from the drop;
				// at the egress nothing does, and drop=true drops only
				// received packets.
				_, egress := splitHook(key)
				want := uint32(xdpPass)
				if egress {
					want = 0xffffffff // TC_ACT_UNSPEC: on to the next program
				}
				if ret != want {
					t.Errorf("%s: verdict %d, want %d", key, int32(ret), int32(want))
				}
			}
			n := func(b bool) uint64 {
				if b {
					return 1
				}
				return 0
			}
			if got, want := sum(0), n(in)+n(out); got != want {
				t.Errorf("the capture counts %d packets, want %d", got, want)
			}
			if got := sum(8 + 1); got != n(in) {
				t.Errorf("inbound passes %d packets, want %d", got, n(in))
			}
			if got := sum(12 + 1); got != n(out) {
				t.Errorf("outbound passes %d packets, want %d", got, n(out))
			}
			if got := sum(16); got != n(in)+n(out) {
				t.Errorf("udp sees %d packets, want %d", got, n(in)+n(out))
			}
		})
	}
}
